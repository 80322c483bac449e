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

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import torch
from torch import nn

from memread.criteria import CRITERIA
from memread.data.pipelines import DATASETS
from memread.data.vocab import Vocab
from memread.errors import MemreadError, allocation_failure, human_bytes
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
            self._check_fits(sum(p.numel() for p in meta.parameters()), copies, device)
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

    def _check_fits(self, params: int, copies: int, device: Any) -> None:
        """Refuse a model whose ``params`` float32 parameters cannot be held: ``copies`` of them on ``device``
        (the CPU, by default), and the one built on the CPU first."""
        device = torch.device(device if device is not None else "cpu")
        needs = [(torch.device("cpu"), 1), (device, copies)] if device.type != "cpu" else [(device, copies)]
        for where, n in needs:
            free = available_memory(where)
            need = params * 4 * n
            if free is not None and need > free:
                held = {1: "its weights", 2: "its weights and their gradients"}.get(
                    n, f"its weights, their gradients and the optimizer's state ({n} copies)")
                raise MemreadError(
                    f"the model does not fit in memory: {self.sizes()} give {params:,} parameters, "
                    f"{human_bytes(need)} for {held}, and {where.type if where.index is None else where} has "
                    f"{human_bytes(free)} free; lower those sizes")

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


def available_memory(device: Any = "cpu") -> int | None:
    """Bytes that can still be allocated on ``device``: a CUDA device's free memory; for the CPU, the system's
    available memory and free swap (``/proc/meminfo``), or what a cgroup's limit leaves when that is less. None
    where this cannot be told (another system, another device kind)."""
    device = torch.device(device)
    if device.type == "cuda":
        try:
            return int(torch.cuda.mem_get_info(device)[0])
        except (RuntimeError, AssertionError, ValueError):
            return None
    if device.type != "cpu":
        return None
    try:
        info = dict(line.split(":", 1) for line in Path("/proc/meminfo").read_text().splitlines() if ":" in line)
        free = (int(info["MemAvailable"].split()[0]) + int(info.get("SwapFree", "0 kB").split()[0])) * 1024
    except (OSError, KeyError, ValueError):
        return None
    try:  # a container's limit (cgroup v2)
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        if limit != "max":
            free = min(free, int(limit) - int(Path("/sys/fs/cgroup/memory.current").read_text()))
    except (OSError, ValueError):
        pass
    return max(free, 0)
