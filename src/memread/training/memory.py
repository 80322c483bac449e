"""What memory there is, and whether a model fits in it, before anything is allocated: a model or batch too large
for the machine is one clear line instead of an allocator's traceback (or the kernel's OOM killer)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from memread.errors import MemreadError, human_bytes


def check_fits(params: int, copies: int, device: Any, sizes: str) -> None:
    """Refuse a model whose ``params`` float32 parameters cannot be held: ``copies`` of them on ``device`` (the CPU,
    by default), and the one built on the CPU first. ``sizes``: the config's sizes that make it large, for the
    message (:meth:`memread.tasks.base.Task.sizes`)."""
    device = torch.device(device if device is not None else "cpu")
    needs = [(torch.device("cpu"), 1), (device, copies)] if device.type != "cpu" else [(device, copies)]
    for where, n in needs:
        free = available_memory(where)
        need = params * 4 * n
        if free is not None and need > free:
            held = {1: "its weights", 2: "its weights and their gradients"}.get(
                n, f"its weights, their gradients and the optimizer's state ({n} copies)")
            raise MemreadError(
                f"the model does not fit in memory: {sizes} give {params:,} parameters, "
                f"{human_bytes(need)} for {held}, and {where.type if where.index is None else where} has "
                f"{human_bytes(free)} free; lower those sizes")


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
