"""What the stacked LSTM readers (:mod:`memread.readers.gated_feedback`, :mod:`memread.readers.depth_gated`)
share around their recurrence: the layered state ``{"h": (L, B, H), "c": (L, B, H)}``, the forward that
picks the fast path or the reference and reads in float32 under autocast, and the reference's walk over
one row and one real token at a time.

A reader passes its two reads, ``read(x, mask, h0, c0) -> (states, h_n, c_n)``; these functions hold no
parameters and know nothing of the equations, which stay in the reader's file.
"""

from __future__ import annotations

from typing import Callable

import torch
from torch import Tensor

from memread.modules.precision import in_float32
from memread.readers.base import ReaderOutput

Read = Callable[[Tensor, Tensor, Tensor, Tensor], tuple[Tensor, Tensor, Tensor]]
Step = Callable[[Tensor, list[Tensor], list[Tensor]], tuple[list[Tensor], list[Tensor]]]


def zero_layered_state(layers: int, batch: int, hidden: int, like: Tensor) -> dict[str, Tensor]:
    """Zeros, what ``state=None`` means: ``{"h": (L, B, H), "c": (L, B, H)}``."""
    z = like.new_zeros(layers, batch, hidden)
    return {"h": z, "c": z}


def read_layered(read: Read, x: Tensor, mask: Tensor | None, state: dict | None, layers: int,
                 hidden: int) -> ReaderOutput:
    """x (B, T, E), mask (B, T) bool (True = real) or None, state from a previous call or None ->
    states (B, T, H), the top layer's h_t; memory = states, memory_mask = mask; state {"h", "c"}."""
    B, T, _ = x.shape
    if mask is None:
        mask = torch.ones(B, T, dtype=torch.bool, device=x.device)
    if state is None:
        state = zero_layered_state(layers, B, hidden, x)
    states, h_n, c_n = in_float32(read, x, mask, state["h"], state["c"])  # float32 under autocast
    return ReaderOutput(states=states, memory=states, memory_mask=mask, state={"h": h_n, "c": c_n})


def reference_rows(step: Step, x: Tensor, mask: Tensor, h0: Tensor, c0: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """The reference's outer loops: for every row ``b`` and every real token ``t``,
    ``h, c = step(x[b, t], h, c)`` with ``h``, ``c`` the lists of every layer's ``h_{t-1}``, ``c_{t-1}``
    (H,) of that row. A padded step changes nothing; ``states`` holds the top layer's ``h_t``, zeros at
    padded positions. Returns states (B, T, H) and the final h, c (L, B, H)."""
    L, B, H = h0.shape
    T = x.shape[1]
    rows, h_n, c_n = [], [], []
    for b in range(B):
        h = [h0[j, b] for j in range(L)]
        c = [c0[j, b] for j in range(L)]
        out = [x.new_zeros(H)] * T
        for t in range(T):
            if bool(mask[b, t]):
                h, c = step(x[b, t], h, c)
                out[t] = h[-1]
        rows.append(torch.stack(out) if T else x.new_zeros(0, H))
        h_n.append(torch.stack(h))
        c_n.append(torch.stack(c))
    return torch.stack(rows), torch.stack(h_n, dim=1), torch.stack(c_n, dim=1)
