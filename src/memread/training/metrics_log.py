"""A run's metrics log: ``metrics.jsonl``, one JSON object per line (the events ``train``, ``valid``,
``restore_best``, ``diverged``, ...), TensorBoard beside it when ``train.tensorboard`` asks for it, and every record
sent on to the run loggers of ``train.loggers`` (:mod:`memread.training.loggers`). A resumed run drops the records
its killed predecessor wrote after the checkpoint it goes on from (:meth:`MetricsLog.truncate_after`), so the log
reads as one uninterrupted run's.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

from memread.errors import MemreadError
from memread.training.checkpoint import write_text_atomically

if TYPE_CHECKING:
    from memread.config import ExperimentConfig


class MetricsLog:
    """``metrics.jsonl``: one JSON object per line; TensorBoard alongside if asked for, and every record sent on to the
    run loggers (MLflow, W&B: :mod:`memread.training.loggers`) once :meth:`open_loggers` has started them."""

    def __init__(self, path: Path, tensorboard: bool = False, enabled: bool = True):
        self.path = path
        self.writer = None
        self.enabled = enabled  # under torchrun only process 0 writes
        self.loggers: list = []  # memread.training.loggers.Attached, while a fit runs
        self.replayed: Counter = Counter()  # (event, step) of the records truncate_after dropped
        if tensorboard and enabled:
            try:
                from torch.utils.tensorboard import SummaryWriter
            except ImportError:
                raise MemreadError("train.tensorboard = true needs TensorBoard: pip install 'memread[tensorboard]'") from None
            self.writer = SummaryWriter(str(path.parent / "tensorboard"))

    def events(self) -> list[dict]:
        """The records written so far, each process reading them (a line cut short by a kill is skipped)."""
        if not self.path.exists():
            return []
        out = []
        for line in self.path.read_text(encoding="utf-8").splitlines():
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(record, dict):
                out.append(record)
        return out

    def truncate_after(self, step: int) -> None:
        """Drop records a killed run wrote after the checkpoint it is resumed from (the log is replaced atomically:
        a resume killed here leaves it whole)."""
        if not self.enabled or not self.path.exists():
            return
        kept = []
        for line in self.path.read_text(encoding="utf-8").splitlines():
            try:
                record = json.loads(line)
                if record.get("step", 0) <= step:
                    kept.append(line)
                else:  # the resume writes it again; the run loggers have it already
                    self.replayed[(record.get("event"), record.get("step"))] += 1
            except json.JSONDecodeError:
                continue  # a line cut short by the kill
        write_text_atomically(self.path, "".join(k + "\n" for k in kept))

    def open_loggers(self, cfg: ExperimentConfig, run_dir: Path) -> None:
        """Start (or go on with) the run loggers of ``train.loggers``, on the process that writes."""
        if self.enabled and cfg.train.loggers:
            from memread.training.loggers import open_loggers

            self.loggers = open_loggers(cfg.train.loggers, cfg, run_dir, self.events(), self.replayed)

    def log_artifact(self, path: Path) -> None:
        for attached in self.loggers:
            attached.logger.log_artifact(path)

    def close_loggers(self, status: str) -> None:
        """End the loggers' runs: "finished", "failed" or "killed"."""
        loggers, self.loggers = self.loggers, []
        for attached in loggers:
            attached.logger.close(status)

    def write(self, record: dict) -> None:
        if not self.enabled:
            return
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")
        if self.writer is not None:
            for k, v in record.items():
                if isinstance(v, (int, float)) and k not in ("step", "epoch", "epochs_done"):
                    self.writer.add_scalar(f"{record.get('event', 'train')}/{k}", v, record.get("step", 0))
            self.writer.flush()
        for attached in self.loggers:
            attached.write(record)


def valid_records(run_dir: Path) -> list[dict]:
    """A run's validation records (``metrics.jsonl``, event "valid"), in order; [] for a run without any."""
    return [r for r in MetricsLog(Path(run_dir) / "metrics.jsonl").events() if r.get("event") == "valid"]


def last_is_best(valid: list[dict], step: int) -> bool:
    """Whether the last checkpoint, written at ``step``, holds the best weights: the last of the ``valid`` records
    (metrics.jsonl) was the best so far and was taken at that step, so ``checkpoint_best.pt`` is the same."""
    return bool(valid) and bool(valid[-1].get("best")) and valid[-1].get("step") == step
