"""Training throughput of a reader against its named baseline, each measured in one process (``memread bench``).

- ``readers``  a token reader (or its whole LM) against torch's fused ``nn.LSTM``: ``memread bench READER``
- ``cloze``    the IAA reader against the AS Reader: ``memread bench iaa``
- ``fusion``   the LSTMN deep-fusion decoder against an LSTM decoder with RNNSearch attention:
               ``memread bench lstmn-deep-fusion``

This file holds what they share and imports neither torch nor the CLI: the interleaved timing, and
the defaults of the token bench's flags (the CLI's parser reads them; the other two benches refuse
a flag that differs from them).
"""

from __future__ import annotations

import statistics
import time

from memread.errors import MemreadError

# defaults of `memread bench READER`'s flags (the keywords of memread.bench.readers.bench)
TOKEN_FLAGS = {"batch": 32, "steps": 35, "emb": 150, "hidden": 300, "vocab": 0, "repeats": 30, "match_params": False}


def median_step_times(a, b, repeats: int, warmup: int) -> tuple[float, float]:
    """Median seconds of the calls ``a()`` and ``b()``, run interleaved A B / B A (so a drift in the
    machine's speed hits both alike) after ``warmup`` untimed calls of each."""
    for _ in range(warmup):
        a()
        b()
    times: tuple[list[float], list[float]] = ([], [])
    pairs = ((a, times[0]), (b, times[1]))
    for r in range(repeats):
        for fn, ts in pairs if r % 2 == 0 else pairs[::-1]:
            t0 = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t0)
    return statistics.median(times[0]), statistics.median(times[1])


def reject_size_flags(args, command: str, hint: str) -> None:
    """``memread bench iaa`` / ``lstmn-deep-fusion`` take their sizes from ``--set``: refuse the token
    reader's size flags (any that differs from :data:`TOKEN_FLAGS`) rather than ignore them."""
    changed = ["--" + k.replace("_", "-") for k in ("steps", "emb", "hidden", "vocab", "repeats", "match_params")
               if hasattr(args, k) and getattr(args, k) != TOKEN_FLAGS[k]]
    if changed:
        raise MemreadError(f"bench {command} takes its sizes from --set ({hint}), not {', '.join(changed)}")
