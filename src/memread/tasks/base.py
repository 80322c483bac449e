"""A task wires an experiment's parts: the dataset's pipeline, the head around the reader, the criterion.

The loop only ever calls::

    task.batches(split, batch_size, epoch, seed) -> Sequence of batches
    model = task.build_model();  criterion = task.build_criterion(model)
    out = model(batch, state)                 # -> ModelOutput (heads.base)
    loss = criterion(out, batch)              # -> Loss(value, stats)
    criterion.summarize(sums)                 # -> {"ppl": ...} / {"accuracy": ...}

so a new dataset, reader, head or criterion never touches the loop. What differs between task shapes
(which parts fit together, how an experiment file of the earlier ``[task]`` form reads) is a
:class:`TaskSpec`, one short file per shape.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import torch
from torch import nn

from memread.criteria import CRITERIA
from memread.data.pipelines import DATASETS
from memread.data.vocab import Vocab
from memread.errors import MemreadError
from memread.heads import HEADS
from memread.heads.base import ModelOutput  # noqa: F401 (the one output type, re-exported)


@dataclass(frozen=True)
class TaskSpec:
    """One task shape: ``check(cfg, where)`` refuses parts that do not fit together (one clear error);
    ``upgrade(task_section, where) -> {"data": ..., "head": ..., "criterion": ...}`` reads the earlier
    ``[task]`` form."""

    check: Callable[[Any, str], None]
    upgrade: Callable[[dict, str], dict]
    description: str


class Task:
    """An experiment's data pipeline, and the builders of its model and criterion."""

    def __init__(self, cfg: Any, data_root: Path, vocab: Vocab | None = None, data: Any = None):
        """``vocab``: a trained run's own vocabulary; ``data``: an already built pipeline (tests, benches)."""
        self.cfg = cfg
        self.data = data if data is not None else DATASETS[cfg.data.name].build(cfg.data, Path(data_root), vocab)
        self.name = self.data.task
        self.vocab = self.data.vocab
        self.default_eval_batch_size = self.data.default_eval_batch_size

    def batches(self, split: str, batch_size: int, epoch: int = 0, seed: int = 0):
        return self.data.batches(split, batch_size, epoch, seed)

    def tokens_in(self, batch: dict) -> int:
        return self.data.tokens_in(batch)

    def build_model(self, seed: int | None = None) -> nn.Module:
        """The head around the reader, its parameters drawn after ``torch.manual_seed(seed)``."""
        torch.manual_seed(self.cfg.train.seed if seed is None else seed)
        return HEADS[self.cfg.head.name].build(self.cfg.head, self.cfg.reader, self.data)

    def build_criterion(self, model: nn.Module):
        return CRITERIA[self.cfg.criterion.name].build(self.cfg.criterion, self.data, model)


def upgrade_sections(task: dict, where: str, routes: dict[str, tuple[str, str]], defaults: dict[str, Any],
                     sections: dict[str, dict]) -> dict[str, dict]:
    """Move the keys of an earlier ``[task]`` table into new sections: ``routes[old] = (section, key)``
    for the keys that apply to this experiment. A key left over is dropped when it holds its earlier
    default (run directories wrote every key) and refused, naming it, when it does not."""
    out = {name: dict(table) for name, table in sections.items()}
    for old, value in task.items():
        if old == "name":
            continue
        if old in routes:
            section, key = routes[old]
            out.setdefault(section, {})[key] = value
        elif old not in defaults:
            raise MemreadError(f"{where}: unknown key 'task.{old}'")
        elif value != defaults[old] and not (isinstance(value, list) and tuple(value) == defaults[old]):
            raise MemreadError(f"{where}: key 'task.{old}' does not apply to this experiment ({old} = {value!r})")
    return out
