"""Typed experiment configs read from TOML.

An experiment is data + reader + head + criterion + train, one section each::

    [data]          # memread.data.pipelines.DATASETS: the corpus, its vocabulary and batching
    name = "ptb"
    [reader]        # memread.readers.READERS: the reader and its sizes
    name = "lstm"
    [head]          # memread.heads.HEADS: what surrounds the reader (optional: the task's default,
    name = "lm"     # memread.heads.DEFAULT_HEADS)
    [criterion]     # memread.criteria.CRITERIA: the loss and metrics (optional: the dataset's default)
    name = "lm_nll"
    [train]         # the one training loop's settings (TrainConfig below)

Every section is a dataclass chosen by its ``name``; a key the chosen class does not have is rejected,
as is a value of the wrong type or a head or criterion that does not serve the dataset's task, with a
:class:`MemreadError` naming the file and the key (``train.lr``); ``--set train.lr=0.5`` overrides a
value after the file is read and is checked the same way. An experiment file (or a run directory's
``config.json``) of the ``[task]`` form of memread before 0.1 is refused in one line (:func:`refuse_task_form`).
"""

from __future__ import annotations

import dataclasses
import json
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal, Protocol

from memread.errors import MemreadError
from memread.typed import _coerce, _type_name, from_dict, parse_override, parse_settings  # noqa: F401 (re-exported)
from memread.typed import Fraction, NonNegFloat, NonNegInt, Pattern, PositiveFloat, PositiveInt, Probability, Range


DeviceName = Annotated[str, Pattern(r"auto|cpu|mps|cuda(:[0-9]+)?", "'auto', 'cpu', 'cuda', 'cuda:N' or 'mps'")]
# a seed every generator seeded from it takes: torch's take 64-bit seeds, and the training batches' order is drawn
# from seed * 1_000_003 + epoch (memread.data.pipelines), so a seed is a whole number within +-10^12
Seed = Annotated[int, Range(-10**12, 10**12)]


@dataclass
class TrainConfig:
    """Settings of the training loop (``[train]``); every task and reader shares them."""

    optimizer: Literal["sgd", "adam"] = "adam"  # "sgd" or "adam"
    lr: PositiveFloat = 1e-3  # learning rate
    # per-parameter factors on lr: {glob over parameter names = factor}, e.g. {"*.v" = 0.1}; the first
    # pattern that matches a name wins; decay and restore_best keep the ratios
    lr_scale: dict[str, NonNegFloat] = field(default_factory=dict)
    momentum: Probability = 0.0  # sgd's momentum
    weight_decay: NonNegFloat = 0.0  # L2 penalty on every parameter, added by the optimizer
    betas: tuple[Probability, Probability] = (0.9, 0.999)  # adam's moving-average factors
    clip: NonNegFloat = 5.0  # renormalise the gradient when its norm exceeds this; 0 = off
    # examples per optimizer step (a language model: columns of the stream read side by side)
    # examples (a stream: columns) per step; one larger than the training split is the whole split, refused in one
    # line when it cannot fit in memory (memread.experiment.start_run)
    batch_size: PositiveInt = 32
    eval_batch_size: NonNegInt = 0  # 0 = the task's default (1 for language modelling: exact perplexity)
    epochs: PositiveInt = 10  # passes over the training data
    max_steps: NonNegInt = 0  # stop after this many optimizer steps; 0 = no cap
    # a job's time limit: after this many minutes of training in this process, validate, checkpoint and stop
    # ("max_minutes"; `memread train --resume` goes on with a new allowance); 0 = no limit
    max_minutes: NonNegFloat = 0.0
    evals_per_epoch: PositiveInt = 1  # validate this many times per epoch (2 = every half epoch)
    lr_decay: Fraction = 1.0  # multiply lr by this when validation does not improve (LSTMN LM: 0.85)
    min_improvement: NonNegFloat = 0.0  # relative improvement that counts as "significant"
    patience: NonNegInt = 0  # early stopping after this many evaluations without improvement; 0 = off
    min_lr: NonNegFloat = 0.0  # stop when the learning rate decays below this
    # stop a diverged run: a training loss above this many times the first step's loss, or a validation metric
    # (one where lower is better: perplexity, MSE) above this many times the best so far; 0 = only losses
    # that are not finite stop it
    divergence: NonNegFloat = 10.0
    restore_best: bool = False  # on a validation worse than the best, go back to checkpoint_best's weights (lr stays decayed)
    seed: Seed = 1  # the model's initialisation and the order of the training batches; in [-10^12, 10^12]
    log_every: PositiveInt = 50  # optimizer steps between lines in metrics.jsonl
    checkpoint_every: NonNegInt = 0  # also write checkpoint_last every N steps (0 = at evaluations only)
    progress: bool = True  # progress bar on stderr
    tensorboard: bool = False  # also log to TensorBoard (needs the `tensorboard` extra)
    # also send the run to these trackers: "mlflow" (the `mlflow` extra) and/or "wandb" (the `wandb` extra): the
    # records of metrics.jsonl as they are written, the config as parameters (memread.training.loggers)
    loggers: tuple[Literal["mlflow", "wandb"], ...] = ()
    # MLflow's tracking URI (a server's URL, "sqlite:///PATH", ...); "" = a store in the run folder, RUN/mlflow.db
    mlflow_uri: str = ""
    # when training ends, write the best checkpoint's model archive (RUN/model.safetensors) and log it to the loggers
    log_artifact: bool = False
    # where to train: "auto" (the first GPU if there is one, else Apple's mps, else the CPU), "cpu", "cuda",
    # "cuda:N" or "mps"; under torchrun each process takes the GPU of its LOCAL_RANK
    device: DeviceName = "auto"
    # "32": float32; "bf16-mixed" / "16-mixed": torch.autocast to bfloat16 / float16 (with a gradient scaler),
    # the recurrences of the hand-written readers kept in float32
    precision: Literal["32", "bf16-mixed", "16-mixed"] = "32"


def _toml(value: Any) -> str:
    """A default as it is written in TOML."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, (tuple, list)):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k} = {_toml(v)}" for k, v in value.items()) + "}"
    return repr(value)


def field_comments(cls: type) -> dict[str, str]:
    """The comments of a dataclass's fields in its source, one line each: the full-line comments just above a
    field and the comment after it (``{}`` where the source cannot be read)."""
    import ast
    import inspect
    import io
    import textwrap
    import tokenize

    try:
        source = textwrap.dedent(inspect.getsource(cls))
    except (OSError, TypeError):
        return {}
    comments = {tok.start[0]: (tok.string.lstrip("#").strip(), tok.line.lstrip().startswith("#"))
                for tok in tokenize.generate_tokens(io.StringIO(source).readline) if tok.type == tokenize.COMMENT}
    out, after = {}, 0
    for node in ast.parse(source).body[0].body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            above = [text for line, (text, whole) in sorted(comments.items()) if after < line < node.lineno and whole]
            trailing = [text for line, (text, whole) in sorted(comments.items())
                        if node.lineno <= line <= node.end_lineno and not whole]
            out[node.target.id] = " ".join(above + trailing)
        after = getattr(node, "end_lineno", after) or after
    return out


def train_keys_help(width: int = 100) -> str:
    """Every ``[train]`` key with its default and meaning, from :class:`TrainConfig` and its field comments (the
    list ``memread train --help`` shows)."""
    import textwrap

    meanings = field_comments(TrainConfig)
    lines = ["[train] keys (the config's [train] table, or --set train.KEY=VALUE), with their defaults:"]
    for f in dataclasses.fields(TrainConfig):
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()  # type: ignore[misc]
        head = f"  {f.name} = {_toml(default)}"
        wrapped = textwrap.wrap(meanings.get(f.name, ""), width, initial_indent=" " * 31, subsequent_indent=" " * 31,
                                break_on_hyphens=False) or [""]
        if len(head) < 30:  # the key beside its meaning's first line, else on a line of its own
            lines.append(head.ljust(31) + wrapped.pop(0)[31:])
        else:
            lines.append(head)
        lines += wrapped
    return "\n".join(line.rstrip() for line in lines)


class SectionConfig(Protocol):
    """Any registered section's dataclass: a reader's, a dataset's, a head's or a criterion's."""

    name: str


SECTIONS = ("data", "reader", "head", "criterion", "train")


@dataclass
class ExperimentConfig:
    """A whole experiment: data, reader, head, criterion and the training loop's settings."""

    data: SectionConfig
    reader: SectionConfig
    head: SectionConfig
    criterion: SectionConfig
    train: TrainConfig = field(default_factory=TrainConfig)

    @property
    def task(self) -> str:
        """The task shape the dataset feeds ("lm", "cloze", ...)."""
        from memread.data.pipelines import DATASETS

        return DATASETS[self.data.name].task

    def to_dict(self) -> dict:
        return {k: dataclasses.asdict(getattr(self, k)) for k in SECTIONS}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)


# ----------------------------------------------------------------------------- experiment files


TASK_FORM = ("the [task] form of memread before 0.1 is no longer read; rewrite it with [data], [head] and "
             "[criterion] sections (docs/tasks.md)")


def refuse_task_form(raw: dict, where: str) -> dict:
    """``raw`` as it is, when it is a table of sections that is not of the ``[task]`` form of memread before 0.1;
    else one :class:`MemreadError` naming ``where`` (an experiment file, a run directory's config.json, a
    checkpoint or an archive)."""
    if not isinstance(raw, dict):
        raise MemreadError(f"{where}: expected a table of sections ({', '.join(SECTIONS)}), got {type(raw).__name__}")
    if "task" in raw:
        raise MemreadError(f"{where}: {TASK_FORM}")
    return raw


# Keys added to a section after run directories and archives of it were written, with the value that is what
# such a run was trained with: a stored config holds every key, so one without the key predates it. A new
# config without the key gets the field's default instead (the papers' form, where that differs).
EARLIER_VALUES = {("criterion", "cloze_nll", "normalize"): "candidates"}


def upgrade_stored(raw: dict, where: str) -> dict:
    """A run directory's, checkpoint's or archive's config (the ``[task]`` form refused: :func:`refuse_task_form`),
    with the keys it predates set to what it was trained with (:data:`EARLIER_VALUES`)."""
    raw = refuse_task_form(raw, where)
    for (section, name, key), value in EARLIER_VALUES.items():
        table = raw.get(section)
        if isinstance(table, dict) and table.get("name") == name and key not in table:
            raw = {**raw, section: {**table, key: value}}
    return raw


def _section(raw: dict, section: str, registry: dict, where: str, default: str | None = None) -> Any:
    table = raw.get(section, {} if default else None)
    if table is None:
        raise MemreadError(f"{where}: missing section [{section}] (its 'name' is one of {sorted(registry)})")
    if not isinstance(table, dict):
        raise MemreadError(f"{where}: '{section}' must be a table, got {table!r}")
    table = dict(table)
    if default and "name" not in table:
        table["name"] = default
    name = table.get("name")
    if name not in registry:
        raise MemreadError(f"{where}: key '{section}.name' must be one of {sorted(registry)}, got {name!r}")
    return from_dict(registry[name].Config, table, section, where)


def experiment_from_dict(raw: dict, where: str) -> ExperimentConfig:
    """Validate a raw ``{data, reader, head, criterion, train}`` mapping against the registries' config classes
    and against each other."""
    from memread.criteria import CRITERIA
    from memread.data.pipelines import DATASETS
    from memread.heads import DEFAULT_HEADS, HEADS, heads_for
    from memread.readers import READERS
    from memread.tasks import TASKS

    if not isinstance(raw, dict):
        raise MemreadError(f"{where}: expected a table of sections ({', '.join(SECTIONS)}), got {type(raw).__name__}")
    for key in raw:
        if key not in SECTIONS:
            raise MemreadError(f"{where}: unknown section '{key}' (known: {', '.join(SECTIONS)})")
    data = _section(raw, "data", DATASETS, where)
    task = DATASETS[data.name].task
    fits = ", ".join(f"{n} (the default)" if n == DEFAULT_HEADS[task] else n for n in heads_for(task))
    name = raw["head"].get("name") if isinstance(raw.get("head"), dict) else None
    if name is not None and name not in HEADS:  # the heads that fit this data, not all of them
        raise MemreadError(f"{where}: key 'head.name' = {name!r} is no head; heads for {task!r} data (data.name = "
                           f"{data.name!r}): {fits}")
    head = _section(raw, "head", HEADS, where, default=DEFAULT_HEADS[task])  # no [head]: the task's default
    if task not in HEADS[head.name].tasks:
        raise MemreadError(f"{where}: head '{head.name}' does not serve {task!r} data (data.name = {data.name!r}); "
                           f"heads for it: {fits}")
    criterion = _section(raw, "criterion", CRITERIA, where, default=DATASETS[data.name].criterion)
    if task not in CRITERIA[criterion.name].tasks:
        fits = sorted(n for n, c in CRITERIA.items() if task in c.tasks)
        raise MemreadError(f"{where}: criterion '{criterion.name}' does not serve {task!r} data; "
                           f"criteria for it: {', '.join(fits)}")
    reader = _section(raw, "reader", READERS, where)
    train = from_dict(TrainConfig, raw.get("train", {}), "train", where)  # `train = 3`: one error naming it
    cfg = ExperimentConfig(data=data, reader=reader, head=head, criterion=criterion, train=train)
    TASKS[task].check(cfg, where)
    return cfg


def apply_overrides(raw: dict, overrides: list[str]) -> dict:
    raw = {k: dict(v) if isinstance(v, dict) else v for k, v in raw.items()}
    for text in overrides:
        (section, key), value = parse_override(text)
        raw.setdefault(section, {})
        if not isinstance(raw[section], dict):
            continue  # `train = 3` in the file: validation names the file and the section ("'train' must be a table")
        raw[section][key] = value
    return raw


def load_experiment(path: str | Path, overrides: list[str] = ()) -> ExperimentConfig:
    """Read a TOML experiment file, apply ``--set`` overrides, and validate every key."""
    path = Path(path)
    if not path.is_file():
        raise MemreadError(f"{path}: config file not found")
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as e:
        raise MemreadError(f"{path}: not valid TOML: {e}") from None
    except UnicodeDecodeError as e:
        raise MemreadError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    raw = apply_overrides(refuse_task_form(raw, str(path)), list(overrides))
    return experiment_from_dict(raw, str(path))
