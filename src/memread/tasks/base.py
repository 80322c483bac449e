"""A task wires an experiment's parts: the dataset's pipeline, the head around the reader, the criterion.

The loop only ever calls::

    task.batches(split, batch_size, epoch, seed) -> Sequence of batches
    model = task.build_model();  criterion = task.build_criterion(model)
    out = model(batch, state)                 # -> ModelOutput (heads.base)
    loss = criterion(out, batch)              # -> Loss(value, stats)
    criterion.summarize(sums)                 # -> {"ppl": ...} / {"accuracy": ...}

so a new dataset, reader, head or criterion never touches the loop. What differs between task shapes
(which parts fit together) is a :class:`TaskSpec`, one short file per shape.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import torch
from torch import nn

from memread.criteria import CRITERIA
from memread.data.pipelines import DATASETS
from memread.data.vocab import Vocab
from memread.errors import MemreadError, allocation_failure
from memread.heads import HEADS
from memread.heads.base import ModelOutput  # noqa: F401 (the one output type, re-exported)
from memread.training.memory import check_fits


@dataclass(frozen=True)
class TaskSpec:
    """One task shape: ``check(cfg, where)`` refuses parts that do not fit together (one clear error)."""

    check: Callable[[Any, str], None]
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

    def build_model(self, seed: int | None = None, copies: int = 1, device: Any = None) -> nn.Module:
        """The head around the reader, its parameters drawn after ``torch.manual_seed(seed)``.

        Before anything is allocated, the model's parameter count (the model built on the meta device, from the
        config alone) is checked against the memory there is: ``copies`` float32 copies of the parameters on
        ``device`` (training holds the weights, their gradients and the optimizer's state; default: the weights on
        the CPU, where the model is built). A model that cannot fit, or whose allocation fails, is one
        :class:`MemreadError` naming its sizes, not an allocator's traceback (or the kernel's OOM killer)."""
        seed = self.cfg.train.seed if seed is None else seed
        meta = self.meta_model(seed)
        if meta is not None:
            check_fits(sum(p.numel() for p in meta.parameters()), copies, device, self.sizes())
        torch.manual_seed(seed)
        try:
            return HEADS[self.cfg.head.name].build(self.cfg.head, self.cfg.reader, self.data)
        except (RuntimeError, MemoryError) as e:
            line = allocation_failure(e)
            if line is None:
                raise
            raise MemreadError(f"the model does not fit in memory ({line}): {self.sizes()}; lower them") from None

    def meta_model(self, seed: int | None = None) -> nn.Module | None:
        """The model built on the meta device: its parameters' shapes, from the config alone, with no memory
        allocated; None where it cannot be built there (a head that reads pretrained vectors into its embedding)."""
        try:
            with torch.device("meta"):
                torch.manual_seed(self.cfg.train.seed if seed is None else seed)
                return HEADS[self.cfg.head.name].build(self.cfg.head, self.cfg.reader, self.data)
        except MemreadError:
            raise  # the config's own error, as the real build would say it
        except Exception:
            return None

    def sizes(self) -> str:
        """The sizes that make the model large, for a message: the largest whole numbers of [reader] and [head]
        and the vocabulary's size."""
        found = [(v, f"{section}.{f.name} = {v}") for section in ("reader", "head")
                 for f in dataclasses.fields(getattr(self.cfg, section))
                 if type(v := getattr(getattr(self.cfg, section), f.name)) is int and v > 1]
        words = [f"a vocabulary of {len(self.vocab):,} words"] if getattr(self, "vocab", None) is not None else []
        return ", ".join([text for _, text in sorted(found, key=lambda t: -t[0])[:3]] + words)

    def build_criterion(self, model: nn.Module):
        return CRITERIA[self.cfg.criterion.name].build(self.cfg.criterion, self.data, model)
