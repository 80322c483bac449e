"""Run loggers beside ``metrics.jsonl``: MLflow and Weights & Biases, chosen by ``[train] loggers``.

``train.loggers = ["mlflow", "wandb"]`` sends each run's records where researchers look for them, from process 0
alone: the resolved config as parameters when the run starts, then every record :class:`MetricsLog
<memread.training.metrics_log.MetricsLog>` writes to ``metrics.jsonl``, as it writes it (the same records: the event, the
step and the values), and with ``train.log_artifact = true`` the best checkpoint's model archive (``memread
export``'s file, ``RUN/model.safetensors``) when training ends. Each logger is one small module
(:mod:`.mlflow`, :mod:`.wandb`) behind :class:`RunLogger`; its library is an optional extra (``pip install
'memread[mlflow]'``), and a run that names a logger whose library is missing is refused with that line.

**Resumes.** The ids of a run's MLflow run and W&B run are kept in ``RUN/loggers.json``: ``memread train --resume``
goes on logging into the same ones. The records a killed process wrote after its last checkpoint are written again
by the resume (``metrics.jsonl`` drops them and the resume repeats those steps exactly); the loggers received them
already, so they are not sent twice. A logger named for the first time on a resume (or an MLflow store that changed)
gets the run's earlier records first.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import math
from collections import Counter
from pathlib import Path
from typing import Any, Protocol

from memread.errors import MemreadError

# train.loggers name -> (module here, the library it needs, the extra that installs it, the library's name in words)
LOGGERS = {
    "mlflow": ("memread.training.loggers.mlflow", "mlflow", "mlflow", "MLflow"),
    "wandb": ("memread.training.loggers.wandb", "wandb", "wandb", "Weights & Biases (wandb)"),
}
STATE_FILE = "loggers.json"  # in the run folder: each logger's ids, for a resume to go on with
ARCHIVE_NAME = "model.safetensors"  # the best checkpoint's archive, in the run folder, with train.log_artifact


class RunLogger(Protocol):
    """One logger's side of a run. ``state()`` is what a resume needs to go on in the same run (stored in
    ``RUN/loggers.json``); ``fresh`` tells whether it starts a run there (then it is given the earlier records)."""

    name: str
    fresh: bool

    def state(self) -> dict: ...

    def log(self, record: dict) -> None: ...

    def log_artifact(self, path: Path) -> None: ...

    def close(self, status: str) -> None:  # "finished", "failed" or "killed"
        ...


def check_available(names: tuple[str, ...]) -> None:
    """Refuse ``train.loggers`` naming a logger whose library is not installed: one line with the pip command."""
    for name in names:
        if name not in LOGGERS:  # the config's Literal refuses it first; a hand-made TrainConfig lands here
            raise MemreadError(f"train.loggers: unknown logger {name!r} (known: {', '.join(LOGGERS)})")
        _, library, extra, words = LOGGERS[name]
        if importlib.util.find_spec(library) is None:
            raise MemreadError(f"train.loggers = [{name!r}] needs {words}: pip install 'memread[{extra}]'")


def split_record(record: dict) -> tuple[str, int, dict[str, Any]]:
    """A metrics.jsonl record as (event, step, values): every key but ``event`` and ``step``."""
    values = {k: v for k, v in record.items() if k not in ("event", "step")}
    return str(record.get("event", "train")), int(record.get("step", 0)), values


def is_number(value: Any) -> bool:
    """A value a tracker keeps as a metric: a number or a bool (1.0 / 0.0)."""
    return isinstance(value, (int, float)) and not isinstance(value, complex)


def flat_params(config: dict) -> dict[str, str]:
    """``ExperimentConfig.to_dict()`` as ``{"train.lr": "0.001", ...}``: scalars as text, lists and tables as JSON."""
    out = {}
    for section, table in config.items():
        for key, value in table.items():
            if isinstance(value, (list, tuple, dict)):
                text = json.dumps(value, sort_keys=True)
            elif isinstance(value, float) and math.isfinite(value):
                text = repr(value)
            else:
                text = str(value).lower() if isinstance(value, bool) else str(value)
            out[f"{section}.{key}"] = text
    return out


def read_state(run_dir: Path) -> dict:
    try:
        state = json.loads((Path(run_dir) / STATE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return state if isinstance(state, dict) else {}


class Attached:
    """A logger fed by MetricsLog: ``skip`` counts the (event, step) records a resume writes again that the logger
    has already (a killed process sent them before the resume dropped them from metrics.jsonl)."""

    def __init__(self, logger: RunLogger, skip: Counter):
        self.logger, self.skip = logger, skip

    def write(self, record: dict) -> None:
        key = (record.get("event"), record.get("step"))
        if self.skip[key] > 0:
            self.skip[key] -= 1
            return
        self.logger.log(record)


def open_loggers(names: tuple[str, ...], config: Any, run_dir: Path, earlier: list[dict],
                 replayed: Counter) -> list[Attached]:
    """Start (or go on with, by ``RUN/loggers.json``) each named logger for the run in ``run_dir``. ``config``: the
    :class:`ExperimentConfig`; ``earlier``: the records metrics.jsonl holds now (sent to a logger that starts its run
    here, on a resume); ``replayed``: the (event, step) of the records the resume dropped from metrics.jsonl."""
    from memread.training.checkpoint import write_text_atomically

    check_available(names)
    run_dir = Path(run_dir)
    state = read_state(run_dir)
    out = []
    for name in dict.fromkeys(names):  # each once
        module = importlib.import_module(LOGGERS[name][0])
        logger = module.open_logger(config, run_dir, state.get(name) if isinstance(state.get(name), dict) else None)
        state[name] = logger.state()
        write_text_atomically(run_dir / STATE_FILE, json.dumps(state, indent=2, sort_keys=True))
        if logger.fresh:
            for record in earlier:
                logger.log(record)
        out.append(Attached(logger, Counter() if logger.fresh else Counter(replayed)))
    return out
