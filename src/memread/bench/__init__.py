"""Training throughput of a reader against its named baseline, each measured in one process (``memread bench``).

- ``readers``  a token reader (or its whole LM) against torch's fused ``nn.LSTM``: ``memread bench READER``
- ``cloze``    the IAA reader against the AS Reader: ``memread bench iaa``
- ``fusion``   the LSTMN deep-fusion decoder against an LSTM decoder with RNNSearch attention:
               ``memread bench lstmn-deep-fusion``
- ``nse_decoder``  the NSE decoder (NSE-NSE translation) against torch's fused ``nn.LSTM``:
               ``memread bench nse-decoder``

This file holds what they share and imports neither torch nor the CLI: the interleaved timing, and
the defaults of the token bench's flags (the CLI's parser reads them; the other benches refuse
a flag that differs from them).
"""

from __future__ import annotations

import statistics
import time
from typing import Callable

from memread.errors import MemreadError

# defaults of `memread bench READER`'s flags (the keywords of memread.bench.readers.bench)
TOKEN_FLAGS = {"batch": 32, "steps": 35, "emb": 150, "hidden": 300, "vocab": 0, "repeats": 30, "match_params": False}


def median_step_times(a, b, repeats: int, warmup: int, sync: Callable[[], None] | None = None) -> tuple[float, float]:
    """Median seconds of the calls ``a()`` and ``b()``, run interleaved A B / B A (so a drift in the
    machine's speed hits both alike) after ``warmup`` untimed calls of each. ``sync``: waits for the
    device's queued work (``torch.cuda.synchronize`` on a GPU, whose kernels run asynchronously), called
    before and after each timed call; None on the CPU, whose calls return when their work is done."""
    for _ in range(warmup):
        a()
        b()
    times: tuple[list[float], list[float]] = ([], [])
    pairs = ((a, times[0]), (b, times[1]))
    for r in range(repeats):
        for fn, ts in pairs if r % 2 == 0 else pairs[::-1]:
            if sync is not None:
                sync()
            t0 = time.perf_counter()
            fn()
            if sync is not None:
                sync()
            ts.append(time.perf_counter() - t0)
    return statistics.median(times[0]), statistics.median(times[1])


def device_sync(device) -> Callable[[], None] | None:
    """What :func:`median_step_times` calls around a timed region on ``device`` (a ``torch.device``):
    ``torch.cuda.synchronize`` for a CUDA device, None (nothing) elsewhere."""
    if getattr(device, "type", None) != "cuda":
        return None
    import torch

    return lambda: torch.cuda.synchronize(device)


def device_fields(device) -> dict:
    """The JSON line's description of where a bench ran: ``device`` and, on a GPU, its name."""
    fields = {"device": str(device)}
    if getattr(device, "type", None) == "cuda":
        import torch

        fields["gpu"] = torch.cuda.get_device_name(device)
    return fields


def reject_size_flags(args, command: str, hint: str) -> None:
    """``memread bench iaa`` / ``lstmn-deep-fusion`` take their sizes from ``--set``: refuse the token
    reader's size flags (any that differs from :data:`TOKEN_FLAGS`) rather than ignore them."""
    changed = ["--" + k.replace("_", "-") for k in ("steps", "emb", "hidden", "vocab", "repeats", "match_params")
               if hasattr(args, k) and getattr(args, k) != TOKEN_FLAGS[k]]
    if changed:
        raise MemreadError(f"bench {command} takes its sizes from --set ({hint}), not {', '.join(changed)}")
