import dataclasses
import json
import math
import re
import tomllib
import types
import typing
from pathlib import Path
from typing import Annotated, Optional

import pytest

from conftest import Fresh, tiny_toml
from memread.config import TrainConfig, experiment_from_dict, load_experiment, parse_override
from memread.data.pipelines import DATASETS
from memread.heads import DEFAULT_HEADS, HEADS
from memread.errors import MemreadError
from memread.typed import NonNegFloat, PositiveInt, Probability, Range, _coerce, from_dict

REPO = Path(__file__).parent.parent

# a valid experiment file (the tests below edit its text into ones the loader must refuse); lr = 1: an int for a float
GOOD = tiny_toml(data=Fresh(name="stories-text"), head={"emb": 16}, reader={"hidden": 16}, train=Fresh(lr=1))


def write(tmp_path, text):
    p = tmp_path / "exp.toml"
    p.write_text(text)
    return p


def test_valid_file_is_typed(tmp_path):
    cfg = load_experiment(write(tmp_path, GOOD))
    assert cfg.head.emb == 16 and cfg.reader.hidden == 16 and cfg.task == "lm"
    assert cfg.criterion.name == "lm_nll"  # [criterion] left out: the dataset's default
    assert isinstance(cfg.train.lr, float) and cfg.train.lr == 1.0  # int accepted for float
    assert cfg.train.optimizer == TrainConfig().optimizer


def test_unknown_key_is_named(tmp_path):
    with pytest.raises(MemreadError, match=r"exp.toml: unknown key 'reader.hiden'"):
        load_experiment(write(tmp_path, GOOD.replace("hidden = 16", "hiden = 16")))


def test_wrong_type_is_named(tmp_path):
    with pytest.raises(MemreadError, match=r"key 'train.batch_size' expects int, got 'big'"):
        load_experiment(write(tmp_path, GOOD + 'batch_size = "big"\n'))
    with pytest.raises(MemreadError, match=r"key 'train.optimizer' expects 'sgd' or 'adam'"):
        load_experiment(write(tmp_path, GOOD + 'optimizer = "rmsprop"\n'))


def test_unknown_section_reader_and_task(tmp_path):
    with pytest.raises(MemreadError, match="unknown section 'model'"):
        load_experiment(write(tmp_path, GOOD + "[model]\nx = 1\n"))
    with pytest.raises(MemreadError, match="reader.name"):
        load_experiment(write(tmp_path, GOOD.replace('name = "lstm"', 'name = "transformer"')))
    with pytest.raises(MemreadError, match="key 'data.name' must be one of"):
        load_experiment(write(tmp_path, GOOD.replace('"stories-text"', '"imagenet"')))


@pytest.mark.parametrize("data,head", [
    ({"name": "text"}, "lm"), ({"name": "ptb"}, "lm"), ({"name": "jsonl-classify", "classes": 2}, "mlp"),
    ({"name": "jsonl-pair", "classes": 3}, "pair"), ({"name": "wikiqa"}, "pair"), ({"name": "jsonl-cloze"}, "pointer"),
    ({"name": "parallel"}, "attention_decoder"), ({"name": "jsonl-document", "ratings": [1, 2]}, "hierarchical"),
], ids=lambda x: x["name"] if isinstance(x, dict) else x)
def test_the_head_defaults_by_the_datas_task(data, head):
    """No [head] (or a [head] without its name): the task's default head, as [criterion] defaults by dataset."""
    cfg = experiment_from_dict({"data": data, "reader": {"name": "lstm", "hidden": 8}}, "x.toml")
    assert cfg.head.name == head and cfg.head == HEADS[head].Config()
    sized = experiment_from_dict({"data": data, "reader": {"name": "lstm"}, "head": {"emb": 12}}, "x.toml")
    assert sized.head.name == head and sized.head.emb == 12


def test_a_wrong_head_name_lists_the_heads_that_fit_the_data():
    raw = {"data": {"name": "jsonl-cloze"}, "reader": {"name": "lstm"}}
    with pytest.raises(MemreadError, match=r"^x.toml: key 'head.name' = 'pointr' is no head; heads for 'cloze' data "
                                           r"\(data.name = 'jsonl-cloze'\): pointer \(the default\), as_reader, "
                                           r"final_state, iaa$"):
        experiment_from_dict({**raw, "head": {"name": "pointr"}}, "x.toml")
    with pytest.raises(MemreadError, match=r"head 'mlp' does not serve 'cloze' data .*heads for it: pointer \(the "
                                           r"default\), as_reader, final_state, iaa$"):
        experiment_from_dict({**raw, "head": {"name": "mlp"}}, "x.toml")
    # every task a dataset feeds has a default head that serves it
    assert {d.task for d in DATASETS.values()} <= set(DEFAULT_HEADS)
    assert all(task in HEADS[name].tasks for task, name in DEFAULT_HEADS.items())


def test_every_section_is_airtight(tmp_path):
    """A key that does not apply to the chosen dataset, head or criterion is refused, naming it."""
    with pytest.raises(MemreadError, match=r"unknown key 'data.documents'"):  # ptb is one stream
        load_experiment(write(tmp_path, GOOD.replace('"stories-text"', '"ptb"\ndocuments = true')))
    with pytest.raises(MemreadError, match=r"unknown key 'data.stories'"):
        load_experiment(write(tmp_path, GOOD.replace('"stories-text"', '"ptb"\nstories = 10')))
    with pytest.raises(MemreadError, match=r"unknown key 'criterion.emb_l2'"):
        load_experiment(write(tmp_path, GOOD + '[criterion]\nname = "lm_nll"\nemb_l2 = 1e-4\n'))
    with pytest.raises(MemreadError, match=r"head 'pointer' does not serve 'lm' data.*heads for it: lm"):
        load_experiment(write(tmp_path, GOOD.replace('name = "lm"', 'name = "pointer"')))
    with pytest.raises(MemreadError, match=r"criterion 'cloze_nll' does not serve 'lm' data.*lm_nll"):
        load_experiment(write(tmp_path, GOOD + '[criterion]\nname = "cloze_nll"\n'))
    with pytest.raises(MemreadError, match=r"data.documents = true needs a reader that resets"):
        load_experiment(write(tmp_path, GOOD.replace('"stories-text"', '"stories-text"\ndocuments = true')))


TASK_FORM = """
[task]
name = "lm"
dataset = "stories"
stories = 50
emb = 16
[reader]
name = "lstm"
hidden = 16
"""
REFUSED = ("the [task] form of memread before 0.1 is no longer read; rewrite it with [data], [head] and [criterion] "
           "sections (docs/tasks.md)")


def files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.slow  # starts processes
def test_the_task_form_is_refused_in_one_line_and_nothing_is_written(tmp_path):
    """An experiment file of the [task] form of memread before 0.1, and a run folder whose config.json holds
    "task", are refused with one line naming the file; nothing is written (no run folder, no file changed)."""
    import subprocess
    import sys

    from conftest import subprocess_env
    from memread.experiment import read_run_config, resume_run

    for text, overrides in [(TASK_FORM, []), (TASK_FORM, ["task.bptt=9"]), (TASK_FORM, ["data.bptt=9"]),
                            (GOOD + '[task]\nname = "lm"\n', [])]:
        path = write(tmp_path, text)
        with pytest.raises(MemreadError, match=rf"^{re.escape(f'{path}: {REFUSED}')}$"):
            load_experiment(path, overrides)
    # --set task.KEY on a file of sections is no section of it
    with pytest.raises(MemreadError, match=r"exp.toml: unknown section 'task'"):
        load_experiment(write(tmp_path, GOOD), ["task.bptt=9"])
    path = write(tmp_path, TASK_FORM)
    before = files(tmp_path)
    r = subprocess.run([sys.executable, "-m", "memread", "train", str(path), "--run-dir", str(tmp_path / "run")],
                       capture_output=True, text=True, timeout=300, env=subprocess_env(MEMREAD_DATA=str(tmp_path)))
    assert r.returncode != 0 and r.stderr.strip().splitlines()[-1].endswith(f"{path}: {REFUSED}"), r.stderr
    assert files(tmp_path) == before and not (tmp_path / "run").exists()

    run = tmp_path / "old-run"
    run.mkdir()
    good = load_experiment(write(tmp_path, GOOD)).to_dict()
    (run / "config.json").write_text(json.dumps({"task": {"name": "lm", "dataset": "stories", "stories": 50},
                                                 "reader": good["reader"], "train": good["train"]}))
    before = files(tmp_path)
    stored = run / "config.json"
    line = rf"^{re.escape(f'{stored}: {REFUSED}')}$"
    for overrides in ([], ["train.lr=0.5"]):
        with pytest.raises(MemreadError, match=line):
            read_run_config(run, overrides)
    with pytest.raises(MemreadError, match=line):
        resume_run(run, tmp_path, ["train.max_steps=3"])
    r = subprocess.run([sys.executable, "-m", "memread", "eval", str(run)], capture_output=True, text=True,
                       timeout=300, env=subprocess_env(MEMREAD_DATA=str(tmp_path)))
    assert r.returncode != 0 and r.stderr.strip().splitlines()[-1].endswith(f"{stored}: {REFUSED}"), r.stderr
    assert files(tmp_path) == before


def test_bad_toml_names_file_and_line(tmp_path):
    with pytest.raises(MemreadError, match=r"exp.toml: not valid TOML: .*line 3"):
        load_experiment(write(tmp_path, "[data]\nname = 'ptb'\nbptt = = 3\n"))


def test_overrides(tmp_path):
    cfg = load_experiment(write(tmp_path, GOOD), ["train.lr=0.5", "reader.layers=2", "train.optimizer=sgd"])
    assert cfg.train.lr == 0.5 and cfg.reader.layers == 2 and cfg.train.optimizer == "sgd"
    assert parse_override("data.name=ptb") == (["data", "name"], "ptb")
    with pytest.raises(MemreadError, match="unknown key 'train.nope'"):
        load_experiment(write(tmp_path, GOOD), ["train.nope=1"])
    with pytest.raises(MemreadError, match="section.key=value"):
        parse_override("lr=0.5")


def test_lr_scale_is_a_typed_table(tmp_path):
    cfg = load_experiment(write(tmp_path, GOOD + 'lr_scale = { "*.v" = 0.1, "embedding.*" = 2 }\n'))
    assert cfg.train.lr_scale == {"*.v": 0.1, "embedding.*": 2.0} and isinstance(cfg.train.lr_scale["embedding.*"], float)
    assert load_experiment(write(tmp_path, GOOD), ['train.lr_scale={"*.v" = 0.5}']).train.lr_scale == {"*.v": 0.5}
    assert TrainConfig().lr_scale == {}
    with pytest.raises(MemreadError, match=r"key 'train.lr_scale.\*.v' expects float, got 'x'"):
        load_experiment(write(tmp_path, GOOD + 'lr_scale = { "*.v" = "x" }\n'))
    with pytest.raises(MemreadError, match=r"key 'train.lr_scale' expects table of str = float, got 0.1"):
        load_experiment(write(tmp_path, GOOD + "lr_scale = 0.1\n"))


@pytest.mark.parametrize("path", sorted((REPO / "configs").rglob("*.toml")), ids=lambda p: str(p.relative_to(REPO)))
def test_every_shipped_config_is_valid(path):
    cfg = load_experiment(path)
    assert cfg.task and cfg.reader.name and cfg.head.name and cfg.criterion.name


# ----------------------------------------------------------------------------- value ranges (issue 25)

def with_key(section: str, key: str, value: str) -> str:
    """GOOD with ``section.key = value`` (in place of GOOD's own line for the key, if it has one)."""
    lines = GOOD.strip().splitlines()
    start = lines.index(f"[{section}]")
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("[")), len(lines))
    body = [line for line in lines[start + 1:end] if not line.startswith(f"{key} =")]
    return "\n".join(lines[:start + 1] + body + [f"{key} = {value}"] + lines[end:]) + "\n"


OUT_OF_RANGE = [  # section, key, value, the bound the message names
    ("train", "batch_size", "0", "at least 1"),
    ("data", "bptt", "0", "at least 1"),
    ("reader", "hidden", "-5", "at least 1"),
    ("train", "lr", "-1", "greater than 0"),
    ("head", "dropout", "2", r"in \[0, 1\)"),
    ("reader", "dropout", "2", r"in \[0, 1\)"),
    ("train", "epochs", "0", "at least 1"),  # was "checkpoint_best.pt: checkpoint not found" after the run
    # was "ValueError: Overflow when unpacking long long" from torch.manual_seed (issue 59)
    ("train", "seed", "100000000000000000000", r"in \[-1000000000000, 1000000000000\]"),
]


@pytest.mark.parametrize("section, key, value, bound", OUT_OF_RANGE, ids=lambda v: str(v))
def test_a_value_out_of_range_is_refused_naming_key_and_bound(tmp_path, section, key, value, bound):
    message = rf"exp.toml: key '{section}.{key}' must be {bound}, got {value}$"
    with pytest.raises(MemreadError, match=message):  # in the file
        load_experiment(write(tmp_path, with_key(section, key, value)))
    with pytest.raises(MemreadError, match=message):  # by --set
        load_experiment(write(tmp_path, GOOD), [f"{section}.{key}={value}"])


def test_ranges_inside_lists_tables_and_every_bound_itself(tmp_path):
    path = write(tmp_path, GOOD)
    with pytest.raises(MemreadError, match=r"key 'train.betas' must be in \[0, 1\), got 1$"):
        load_experiment(path, ["train.betas=[0.9, 1]"])
    with pytest.raises(MemreadError, match=r"key 'train.lr_scale.\*.v' must be at least 0, got -0.1$"):
        load_experiment(path, ['train.lr_scale={"*.v" = -0.1}'])
    with pytest.raises(MemreadError, match=r"key 'train.lr_decay' must be in \(0, 1\], got 0$"):
        load_experiment(path, ["train.lr_decay=0"])
    with pytest.raises(MemreadError, match=r"key 'train.lr' must be greater than 0, got nan$"):
        load_experiment(path, ["train.lr=nan"])
    with pytest.raises(MemreadError, match=r"key 'train.batch_size' expects int, got 1.5$"):  # the type comes first
        load_experiment(path, ["train.batch_size=1.5"])
    # the bounds themselves are values, as is every default (0 = off / no cap / the task's default)
    cfg = load_experiment(path, [
        "train.batch_size=1", "train.epochs=1", "train.lr=1e-9", "train.lr_decay=1", "train.clip=0", "train.max_steps=0",
        "train.patience=0", "train.eval_batch_size=0", "train.momentum=0", "train.betas=[0, 0.999]",
        "train.checkpoint_every=0", "train.min_lr=0", "train.weight_decay=0", 'train.lr_scale={"*" = 0}',
        "train.seed=-3", "head.dropout=0", "reader.dropout=0.99", "data.min_count=0", "data.max_vocab=0"])
    assert (cfg.train.batch_size, cfg.train.betas, cfg.train.seed, cfg.reader.dropout) == (1, (0.0, 0.999), -3, 0.99)
    assert cfg.train.lr_scale == {"*": 0.0} and cfg.train.lr_decay == 1.0


@pytest.mark.parametrize("section, key, value, named", [
    ("train", "lr", "inf", "train.lr"),  # was accepted: the run folder written, then divergence at step 2
    ("train", "max_minutes", "inf", "train.max_minutes"), ("train", "divergence", "inf", "train.divergence"),
    ("train", "clip", "inf", "train.clip"), ("train", "min_improvement", "inf", "train.min_improvement"),
    ("train", "lr_scale", '{"*.v" = inf}', r"train.lr_scale.\*.v"),  # inside a table
    ("reader", "forget_bias", "inf", "reader.forget_bias"),  # a float without a range (doc_lstm's)
])
def test_inf_is_refused_for_every_float_naming_the_key(tmp_path, section, key, value, named):
    message = rf"exp.toml: key '{named}' must be a finite number, got inf$"
    doc_lstm = lambda text: text.replace('name = "lstm"', 'name = "doc_lstm"')  # noqa: E731
    with pytest.raises(MemreadError, match=message):  # in the file
        load_experiment(write(tmp_path, doc_lstm(with_key(section, key, value))))
    with pytest.raises(MemreadError, match=message):  # by --set
        load_experiment(write(tmp_path, doc_lstm(GOOD)), [f"{section}.{key}={value}"])
    assert load_experiment(write(tmp_path, doc_lstm(GOOD)), [f"{section}.{key}={value.replace('inf', '0.5')}"])


def test_nan_and_minus_inf_are_refused_with_the_range_where_there_is_one():
    @dataclasses.dataclass
    class Options:
        bias: float = 0.0
        rate: NonNegFloat = 0.0
        maybe: Optional[float] = None

    for data, message in [({"bias": math.nan}, "key 'o.bias' must be a finite number, got nan"),
                          ({"bias": -math.inf}, "key 'o.bias' must be a finite number, got -inf"),
                          ({"maybe": math.inf}, "key 'o.maybe' must be a finite number, got inf"),
                          ({"rate": math.nan}, "key 'o.rate' must be at least 0, got nan"),  # its range first
                          ({"rate": -math.inf}, "key 'o.rate' must be at least 0, got -inf"),
                          ({"rate": math.inf}, "key 'o.rate' must be a finite number, got inf")]:
        with pytest.raises(MemreadError, match=rf"^f: {message}$"):
            from_dict(Options, data, "o", "f")
    assert from_dict(Options, {"bias": -1e308, "rate": 1e308, "maybe": None}, "o", "f") == Options(-1e308, 1e308)


def test_range_in_typed_from_dict():
    @dataclasses.dataclass
    class Options:
        size: Optional[PositiveInt] = None
        shares: tuple[Probability, ...] = ()
        weights: dict[str, NonNegFloat] = dataclasses.field(default_factory=dict)
        odd: Annotated[int, Range(-3, 3, lo_open=True, hi_open=True)] = 0

    assert from_dict(Options, {"size": None, "shares": [0, 0.5], "weights": {"a": 2}}, "o", "f") == Options(None, (0.0, 0.5), {"a": 2.0})
    for data, message in [({"size": 0}, "key 'o.size' must be at least 1, got 0"),  # in an Optional: the range, not "int or none"
                          ({"size": "x"}, "key 'o.size' expects int or none, got 'x'"),
                          ({"shares": [0.5, 1.0]}, r"key 'o.shares' must be in \[0, 1\), got 1.0"),
                          ({"weights": {"a": -1}}, "key 'o.weights.a' must be at least 0, got -1"),
                          ({"odd": 3}, r"key 'o.odd' must be in \(-3, 3\), got 3")]:
        with pytest.raises(MemreadError, match=rf"^f: {message}$"):
            from_dict(Options, data, "o", "f")
    assert [Range(1).describe(), Range(0, lo_open=True).describe(), Range(hi=2.5).describe(), Range(0, 1, hi_open=True).describe()] == \
        ["at least 1", "greater than 0", "at most 2.5", "in [0, 1)"]
    assert math.inf in Range(0) and math.nan not in Range(0) and math.nan not in Range()


# a section written as a value, `train = 3`: one error naming the file and the section
def without(section: str, text: str = GOOD) -> str:
    return re.sub(rf"\[{section}\]\n(?:[^\[\n].*\n)*", "", text)


@pytest.mark.parametrize("section, value", [("reader", '"lstm"'), ("train", "3"), ("data", "1"),
                                             ("head", "[1, 2]"), ("criterion", '"lm_nll"')])
def test_a_section_written_as_a_value_is_one_error(tmp_path, section, value):
    message = rf"exp.toml: '{section}' must be a table, got {re.escape(repr(tomllib.loads(f'v = {value}')['v']))}$"
    path = write(tmp_path, f"{section} = {value}\n" + without(section))
    with pytest.raises(MemreadError, match=message):
        load_experiment(path)
    with pytest.raises(MemreadError, match=message):  # --set into it: the same error, not "not a section"
        load_experiment(path, [f"{section}.x=1"])


def test_a_run_directory_with_a_section_written_as_a_value(tmp_path):
    from memread.experiment import read_run_config

    good = load_experiment(write(tmp_path, GOOD)).to_dict()
    for raw, message in [({**good, "train": 3}, "'train' must be a table, got 3"),
                         ({**good, "reader": "lstm"}, "'reader' must be a table, got 'lstm'"),
                         ({"task": "lm", "reader": good["reader"]}, re.escape(REFUSED))]:
        (tmp_path / "config.json").write_text(json.dumps(raw))
        for overrides in ([], ["train.lr=0.5"]):
            with pytest.raises(MemreadError, match=rf"config.json: {message}$"):
                read_run_config(tmp_path, overrides)
    with pytest.raises(MemreadError, match=r"^x.json: expected a table of sections \(data, reader, head, criterion, train\), got list$"):
        experiment_from_dict([good], "x.json")
    (tmp_path / "config.json").write_text(json.dumps({**good, "train": {**good["train"], "batch_size": 0}}))
    with pytest.raises(MemreadError, match=r"config.json: key 'train.batch_size' must be at least 1, got 0$"):
        read_run_config(tmp_path)


# every size and rate of every config class carries a Range: a new field without one fails here
SIZES_AND_RATES = re.compile(
    r"(^|_)(hidden|emb|layers|batch_size|bptt|dropout|lr|mlp|window|span|shared|n|steps|inference|vocab|count|stories|"
    r"stride|chunk|len|words|sentences|fraction|scale|l2|epochs|every|patience|decay|clip|momentum|betas|bucket|range|"
    r"improvement|divergence|objects|distractors|gap|size|dim|units)($|_)")
UNBOUNDED = {"seed", "story_seed", "forget_bias",  # any value is one
             "tasks"}  # bAbI task numbers: memread.tasks.cloze.check refuses one that is not a task


def _numeric_leaves(tp, ranged: bool = False) -> list[bool]:
    """For each int or float inside annotation ``tp`` (through Annotated, tuple, dict, unions): has it a Range?"""
    origin = typing.get_origin(tp)
    if origin is Annotated:
        base, *extras = typing.get_args(tp)
        return _numeric_leaves(base, ranged or any(isinstance(e, Range) for e in extras))
    if origin in (tuple, dict, typing.Union, types.UnionType):
        return [r for a in typing.get_args(tp) if a is not Ellipsis for r in _numeric_leaves(a, ranged)]
    return [ranged] if tp in (int, float) else []


def _config_classes() -> dict[str, type]:
    from memread.criteria import CRITERIA
    from memread.data.pipelines import DATASETS
    from memread.data.stories import StoryConfig
    from memread.heads import HEADS
    from memread.readers import READERS
    from memread.heads.decoders.attention import AttentionDecoderConfig
    from memread.heads.decoders.lstmn_fusion import FusionConfig
    from memread.heads.decoders.nse import NSEDecoderConfig

    classes = {"train": TrainConfig}
    for section, registry in (("reader", READERS), ("data", DATASETS), ("head", HEADS), ("criterion", CRITERIA)):
        for name, spec in registry.items():
            if spec.Config not in classes.values():
                classes[f"{section}:{name}"] = spec.Config
    for cls in (AttentionDecoderConfig, FusionConfig, NSEDecoderConfig, StoryConfig):  # built by heads and data, not from files
        classes[cls.__qualname__] = cls
    return classes


CONFIG_CLASSES = _config_classes()


def test_the_walk_sees_every_registry_and_the_size_names():
    assert {"train", "reader:lstm", "reader:nse", "data:ptb", "data:iwslt14", "head:lm", "head:iaa", "criterion:cloze_nll"} <= set(CONFIG_CLASSES)
    for name in ("hidden", "emb", "tgt_emb", "doc_layers", "batch_size", "eval_batch_size", "bptt", "dropout", "emb_dropout",
                 "lr", "min_lr", "lr_decay", "n", "max_vocab", "tgt_vocab", "min_count", "dev_fraction", "first_epoch_scale"):
        assert SIZES_AND_RATES.search(name), name
    assert not any(SIZES_AND_RATES.search(name) for name in UNBOUNDED)
    assert _numeric_leaves(dict[str, NonNegFloat]) == [True] and _numeric_leaves(tuple[float, Probability]) == [False, True]


@pytest.mark.parametrize("label", sorted(CONFIG_CLASSES))
def test_every_size_and_rate_field_carries_a_range(label):
    cls = CONFIG_CLASSES[label]
    hints = typing.get_type_hints(cls, include_extras=True)
    leaves = {f.name: _numeric_leaves(hints[f.name]) for f in dataclasses.fields(cls)}
    unbounded = sorted(name for name, ranged in leaves.items() if ranged and not all(ranged))
    assert [n for n in unbounded if SIZES_AND_RATES.search(n)] == [], \
        f"{cls.__qualname__}: give these fields a bound (memread.typed: PositiveInt, DropoutRate, ...)"
    assert set(unbounded) <= UNBOUNDED, f"{cls.__qualname__}: a bound for these, or list them in UNBOUNDED with the reason"
    for f in dataclasses.fields(cls):  # every default is inside its own range
        if leaves[f.name] and f.default is not dataclasses.MISSING:
            _coerce(f.default, hints[f.name], f.name, f"{cls.__qualname__}'s default")


@pytest.mark.parametrize("value", [True, 0, 3e-4, 16, "cuda", 'say "x"', [0.9, 0.999], {"emb": 0.5, "head.w": 2}])
def test_override_value_writes_what_an_override_reads_back(value):
    """A resumed run is given a stored config's value as ``--set train.KEY=TEXT`` (claims, reproduce)."""
    from memread.typed import override_value, parse_override

    assert parse_override(f"train.k={override_value(value)}")[1] == value
