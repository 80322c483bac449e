"""Where a run trains: its device, and the processes of a ``torchrun`` job (PyTorch's DDP).

``placement(device_name)`` reads torchrun's environment (``WORLD_SIZE``, ``RANK``, ``LOCAL_RANK``): with
more than one process it joins the process group (NCCL on GPUs, gloo on CPUs) and gives each process
the GPU of its local rank. Process 0 is the *main* one: it alone writes the run directory (lock,
config, checkpoints, metrics, progress bar); every process trains its shard of each batch, and
decisions (divergence, learning-rate decay, early stopping, the best checkpoint) are taken on values
all-reduced over the processes, so they are the same everywhere.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Callable

import torch
import torch.distributed as dist

from memread.errors import MemreadError


@dataclass(frozen=True)
class Placement:
    device: torch.device
    rank: int = 0
    world: int = 1

    @property
    def main(self) -> bool:
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.world > 1


def resolve_device(name: str, local_rank: int | None = None) -> torch.device:
    """``"auto" | "cpu" | "cuda" | "cuda:N" | "mps"`` -> a device torch has here (one clear line if not)."""
    if name == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda", local_rank or 0)
        if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    device = torch.device(name)
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise MemreadError(f"train.device = {name!r}: torch sees no CUDA GPU here (torch {torch.__version__}, "
                               f"CUDA build: {torch.version.cuda or 'no'}); use device = 'cpu' or 'auto'")
        if device.index is None:
            device = torch.device("cuda", local_rank or 0)
        if device.index >= torch.cuda.device_count():
            raise MemreadError(f"train.device = {name!r}: only {torch.cuda.device_count()} CUDA device(s) here")
    elif device.type == "mps" and not (getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()):
        raise MemreadError(f"train.device = {name!r}: Apple's MPS backend is not available here; use 'cpu' or 'auto'")
    return device


def placement(device_name: str = "auto") -> Placement:
    """This process's place: alone, or one of torchrun's ``WORLD_SIZE`` processes (joining its group)."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return Placement(resolve_device(device_name))
    rank, local_rank = int(os.environ["RANK"]), int(os.environ.get("LOCAL_RANK", "0"))
    device = resolve_device(device_name, local_rank)
    if not dist.is_initialized():
        if device.type == "cuda":
            torch.cuda.set_device(device)
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    return Placement(device, rank, world)


def to_device(obj: Any, device: torch.device) -> Any:
    """Tensors in (nested dicts, lists and tuples of) ``obj`` moved to ``device``; everything else as it is."""
    if isinstance(obj, torch.Tensor):
        return obj.to(device, non_blocking=device.type == "cuda")
    if isinstance(obj, dict):
        return {k: to_device(v, device) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        moved = [to_device(v, device) for v in obj]
        return type(obj)(moved) if isinstance(obj, list) else tuple(moved)
    return obj


def rng_state(device: torch.device) -> dict[str, Any]:
    """Every random state this process draws from: the CPU's, and its GPU's when it trains on one."""
    state = {"cpu": torch.get_rng_state()}
    if device.type == "cuda":
        state["cuda"] = torch.cuda.get_rng_state(device)
    return state


def set_rng_state(state: dict[str, Any], device: torch.device) -> None:
    torch.set_rng_state(state["cpu"])
    if device.type == "cuda" and "cuda" in state:
        torch.cuda.set_rng_state(state["cuda"], device)


def combine_loss(value: torch.Tensor, weight: Any, where: Placement) -> tuple[torch.Tensor, float]:
    """The loss to differentiate on this process, and the loss of the whole batch. ``weight``: what this
    process's ``value`` is a mean over (examples, sequences, tokens; ``Loss.weight``), None for equal shares.
    DDP averages gradients over the processes, so the local loss is scaled by ``weight * world / sum of
    weights``: the average of the scaled losses is the weighted mean, the loss one process would have."""
    if not where.distributed:
        return value, float(value.detach())
    w = torch.as_tensor(1.0 if weight is None else weight, dtype=torch.float64).to(where.device).detach()
    both = torch.stack([value.detach().to(torch.float64) * w, w])
    dist.all_reduce(both)
    total, weights = both[0], both[1]
    scale = (w * where.world / weights).to(value.dtype)
    return value * scale, float(total / weights)


def gather(obj: Any, where: Placement) -> list[Any]:
    """``obj`` of every process, in rank order, on every process (``[obj]`` when alone)."""
    if not where.distributed:
        return [obj]
    out: list[Any] = [None] * where.world
    dist.all_gather_object(out, obj)
    return out


def sum_over_processes(sums: dict[str, float], where: Placement) -> dict[str, float]:
    """Statistics summed over the processes (a process that saw no batch contributes nothing)."""
    total: dict[str, float] = {}
    for part in gather(sums, where):
        for k, v in part.items():
            total[k] = total.get(k, 0.0) + v
    return total


def on_main(fn: Callable[[], Any], where: Placement) -> Any:
    """Run ``fn`` on the main process only; the others wait for it, and fail with its error if it fails
    (so a refused start never leaves processes waiting forever)."""
    if not where.distributed:
        return fn()
    result, failure = None, None
    if where.main:
        try:
            result = fn()
        except Exception as e:  # told to the others, then raised here as it is
            failure = e
    message = [None if failure is None else str(failure)]
    dist.broadcast_object_list(message, src=0)
    if failure is not None:
        raise failure
    if message[0] is not None:
        raise MemreadError(f"process 0 failed: {message[0]}")
    return result


def barrier(where: Placement) -> None:
    if where.distributed:
        dist.barrier()
