"""A sliding window over a reader's previous L outputs, for every position of a segment at once.

The readers of Daniluk et al. (2017) look back at the outputs of the previous L time steps. Those
outputs feed only the prediction, never the LSTM, so the LSTM runs as one fused call and the window
of every position is read off one sequence::

    seq = [window carried from the last segment (L slots) ; this segment's outputs (T)]   (B, L+T, D)

Position ``t`` of the segment sees slots ``t .. t+L-1`` of ``seq``, i.e. steps ``t-L .. t-1``
(:func:`visible` views them with ``unfold``, no copy). A slot is visible when it holds a real output (``valid``:
not an empty slot at the start of the stream, not padding) of the *same document* as position ``t``
(no ``reset`` in between). At the end of a segment the last L real outputs of each row are carried
(:func:`carry`), with slots from before the row's latest document start marked invalid, so reading a
stream in segments equals reading it at once.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import torch
from torch import Tensor, nn

from memread._compiled import CompiledOps, check_backend
from memread.modules.masking import masked_softmax
from memread.modules.precision import in_float32

# The compiled loops (``_window_kernels.cpp``) run (1)-(3) and their backward pass for CPU tensors when
# they could be built (:mod:`memread._compiled`); otherwise the tensor-op path below. The reader's
# ``backend`` option chooses (:class:`WindowAttention`).
SOURCE = Path(__file__).with_name("_window_kernels.cpp")
# ``kernels()``: ``torch.ops.memread_window`` (ops ``forward`` and ``backward``), built on first call
kernels = CompiledOps("memread_window", SOURCE, "memread_window", "window attention kernels")
# the fast path's backends (:data:`memread._compiled.Backend`): "function" = the tensor-op path of
# :class:`_BandedAttention` (a hand-written autograd Function, what a GPU runs)
BACKENDS: tuple[str, ...] = ("auto", "compiled", "function")


class History(NamedTuple):
    seq: Tensor  # (B, L+T, D)  carried window, then this segment's outputs
    valid: Tensor  # (B, L+T) bool  a real output is there
    doc: Tensor  # (B, L+T) long  document index: 0 = the document the segment starts in
    query_doc: Tensor  # (B, T) long  document index of each position of the segment
    window: int  # L


def empty_window(batch: int, window: int, dim: int, like: Tensor) -> tuple[Tensor, Tensor]:
    """The window at the start of a stream: L zero slots, none of them valid."""
    return like.new_zeros(batch, window, dim), torch.zeros(batch, window, dtype=torch.bool, device=like.device)


def extend(window: Tensor, window_valid: Tensor, outputs: Tensor, mask: Tensor, reset: Tensor) -> History:
    """Append this segment's outputs (B, T, D) to the carried window (B, L, D)."""
    B, L = window_valid.shape
    query_doc = torch.cumsum((reset & mask).long(), dim=1)  # (B, T) resets at or before t
    doc = torch.cat([query_doc.new_zeros(B, L), query_doc], dim=1)  # (B, L+T)
    return History(torch.cat([window, outputs], dim=1), torch.cat([window_valid, mask], dim=1), doc, query_doc, L)


def visible(h: History) -> Tensor:
    """(B, T, L) bool: slot j of position t holds a real output of t's document."""
    T = h.query_doc.size(1)
    valid = h.valid.unfold(1, h.window, 1)[:, :T]  # (B, T, L)
    same_doc = h.doc.unfold(1, h.window, 1)[:, :T] == h.query_doc.unsqueeze(-1)
    return valid & same_doc


def lagged(h: History, seq: Tensor, lag: int) -> Tensor:
    """``seq`` (B, L+T, D') at step ``t - lag`` for every position t, zero where not visible: (B, T, D')."""
    T = h.query_doc.size(1)
    start = h.window - lag
    if lag == 0:
        return seq[:, start : start + T]
    ok = h.valid[:, start : start + T] & (h.doc[:, start : start + T] == h.query_doc)  # (B, T)
    return seq[:, start : start + T] * ok.unsqueeze(-1).to(seq.dtype)


def carry(h: History, mask: Tensor) -> tuple[Tensor, Tensor]:
    """The last L real outputs of each row (B, L, D) and their validity (B, L), to start the next segment."""
    B, L = h.seq.size(0), h.window
    lengths = mask.sum(dim=1)  # (B,) real tokens this segment (a prefix)
    idx = lengths.unsqueeze(1) + torch.arange(L, device=mask.device)  # (B, L) slots ending at the last real one
    window = h.seq.gather(1, idx.unsqueeze(-1).expand(B, L, h.seq.size(-1)))
    last_doc = h.query_doc[:, -1:]  # (B, 1) the document of the row's last real token (resets count real tokens only)
    valid = h.valid.gather(1, idx) & (h.doc.gather(1, idx) == last_doc)
    return window, valid


class WindowAttention(nn.Module):
    """Equations (1)-(3) of Daniluk et al. (2017) (and (7)-(9) with keys and values apart), for
    every position of a segment at once::

        M_t = tanh(W^Y Y_t + (W^h q_t) 1^T)     (1)   Y_t = [y_{t-L} .. y_{t-1}] the window's keys
        a_t = softmax(w^T M_t)                   (2)   over the visible slots only
        r_t = V_t a_t^T                          (3)   V_t the window's values

    W^Y is applied once per slot of ``[window ; segment]``, not once per (position, slot) pair; the
    rest runs in :class:`_BandedAttention`, which writes M for all (t, j) into one buffer and
    differentiates by hand: on the CPU in one compiled pass over each position's window
    (``_window_kernels.cpp``), elsewhere with tensor ops (fewer passes over the (B, T, L, d) data than
    autograd's graph of views). ``backend`` (the reader config's; settable, ``attention.backend = ...``)
    picks: ``"auto"`` the compiled pass where it can run (CPU tensors in float32 / float64, the source
    built), else the tensor ops; ``"compiled"`` the compiled pass or a :class:`~memread.errors.MemreadError`;
    ``"function"`` the tensor ops everywhere. Same values (to float32 precision). With ``impl =
    "reference"`` it is :func:`reference_attention` instead: the equations one row and one position at a
    time, to check the fast path against. Under
    ``torch.autocast`` both run in float32 with autocast off (:mod:`memread.modules.precision`; on the
    CPU the compiled loops still run), the projections before them in the autocast dtype.
    """

    def __init__(self, dim: int, impl: str = "fast", backend: str = "auto", who: str = "window attention"):
        super().__init__()
        self.impl, self.who = impl, who  # ``who`` names the reader in errors
        self.backend = backend
        self.W_Y = nn.Linear(dim, dim, bias=False)
        self.W_h = nn.Linear(dim, dim, bias=False)
        self.w = nn.Linear(dim, 1, bias=False)

    def forward(self, h: History, query: Tensor, keys: Tensor, values: Tensor) -> tuple[Tensor, Tensor]:
        """query (B, T, d); keys (B, L+T, d) and values (B, L+T, dv) over ``h.seq``'s slots ->
        r (B, T, dv), alpha (B, T, L)."""
        if self.impl == "reference":
            return in_float32(reference_attention, self, h, query, keys, values)
        # under autocast in float32 (memread.modules.precision): on the CPU, the compiled loops still run
        return in_float32(_BandedAttention.apply, self.W_Y(keys), self.W_h(query), self.w.weight[0], values, visible(h),
                          self.backend, self.who)

    @property
    def backend(self) -> str:
        """The fast path's backend, ``"auto"``, ``"compiled"`` or ``"function"`` (the reader config's ``backend``)."""
        return self._backend

    @backend.setter
    def backend(self, value: str) -> None:
        self._backend = check_backend(value, BACKENDS, self.who)


def reference_attention(att: WindowAttention, h: History, query: Tensor, keys: Tensor,
                        values: Tensor) -> tuple[Tensor, Tensor]:
    """Equations (1)-(3) (and (7)-(9)) literally, one row and one position at a time: the readable form
    of :class:`WindowAttention` (same arguments and results; zeros at padded positions).

    Position t of the segment is slot L + t of ``h.seq``; its window is slots t .. t+L-1 (steps t-L .. t-1),
    of which it reads those holding a real output of its own document.
    """
    B, T = h.query_doc.shape
    L = h.window
    W_Y, W_h, w = att.W_Y.weight, att.W_h.weight, att.w.weight[0]
    r_all, alpha_all = [], []
    for b in range(B):
        for t in range(T):
            alpha_t = query.new_zeros(L)
            past = [j for j in range(L)
                    if h.valid[b, t + j] and h.doc[b, t + j] == h.query_doc[b, t]]  # visible slots of t's window
            if past and h.valid[b, L + t]:
                Y = keys[b, [t + j for j in past]].T  # (d, m): the visible keys as columns
                M = torch.tanh(W_Y @ Y + (W_h @ query[b, t]).unsqueeze(1))  # (1) / (7)
                a = torch.softmax(w @ M, dim=0)  # (2) / (8)
                r = values[b, [t + j for j in past]].T @ a  # (3) / (9)
                alpha_t = alpha_t.index_put((torch.tensor(past, device=alpha_t.device),), a)
            else:  # nothing to attend to (a document's first token, or padding): r_t = 0
                r = values.new_zeros(values.size(-1))
            r_all.append(r)
            alpha_all.append(alpha_t)
    return torch.stack(r_all).view(B, T, -1), torch.stack(alpha_all).view(B, T, L)


class _BandedAttention(torch.autograd.Function):
    """(1)-(3) after the projections: WY (B, L+T, d) = W^Y keys, q (B, T, d) = W^h q_t, w (d,),
    values (B, L+T, dv), visible (B, T, L) -> r (B, T, dv), alpha (B, T, L). Slot j of position t is
    slot t + j of the L+T sequence (step t - L + j). ``backend`` (:class:`WindowAttention`) picks the
    compiled pass or the tensor ops; ``who`` names the reader in its error."""

    @staticmethod
    def forward(ctx, WY: Tensor, q: Tensor, w: Tensor, values: Tensor, vis: Tensor, backend: str = "auto",
                who: str = "window attention"):
        ops = kernels.for_backend(q, backend, who)
        ctx.compiled = ops is not None
        if ops is not None:
            values = values.contiguous()
            r, alpha, M = ops.forward(WY.contiguous(), q.contiguous(), w.contiguous(), values, vis.contiguous())
            ctx.save_for_backward(M, alpha, w, values)
            ctx.mark_non_differentiable(alpha)
            return r, alpha
        B, T, d = q.shape
        L = WY.size(1) - T
        M = q.new_empty(B, T, L, d)
        for j in range(L):  # a loop over the window, not over time
            torch.add(WY[:, j : j + T], q, out=M[:, :, j])
        M.tanh_()  # (1)  (B, T, L, d)
        alpha = masked_softmax(M @ w, vis, dim=-1)  # (2)  (B, T, L)
        r = torch.zeros_like(values[:, :T])
        for j in range(L):
            r.addcmul_(alpha[..., j : j + 1], values[:, j : j + T])  # (3)  (B, T, dv)
        ctx.save_for_backward(M, alpha, w, values)
        ctx.mark_non_differentiable(alpha)
        return r, alpha

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, dr: Tensor, _dalpha: Tensor):
        M, alpha, w, values = ctx.saved_tensors
        if ctx.compiled:  # the path the forward pass took
            d_WY, d_q, d_w, d_values = kernels().backward(dr.contiguous(), M, alpha, w.contiguous(), values)
            return d_WY, d_q, d_w, d_values, None, None, None
        B, T, L, d = M.shape
        d_values = torch.zeros_like(values)
        d_alpha = torch.empty_like(alpha)
        for j in range(L):
            d_values[:, j : j + T].addcmul_(alpha[..., j : j + 1], dr)
            d_alpha[..., j] = torch.linalg.vecdot(dr, values[:, j : j + T])
        d_scores = alpha * (d_alpha - (alpha * d_alpha).sum(-1, keepdim=True))  # softmax; 0 where masked
        d_w = M.reshape(-1, d).t() @ d_scores.reshape(-1)  # (d,)
        d_pre = torch.addcmul(torch.ones_like(M), M, M, value=-1.0)  # tanh' = 1 - M^2
        d_pre.mul_(w).mul_(d_scores.unsqueeze(-1))  # (B, T, L, d)
        d_WY = torch.zeros(B, T + L, d, dtype=M.dtype, device=M.device)
        for j in range(L):
            d_WY[:, j : j + T].add_(d_pre[:, :, j])
        return d_WY, d_pre.sum(2), d_w, d_values, None, None, None


def attention_matrix(alpha: Tensor) -> Tensor:
    """Window weights (B, T, L) -> (B, T, L+T) over the slots of ``History.seq`` (row t: slots t..t+L-1),
    the reader interface's ``attention`` over ``memory``."""
    B, T, L = alpha.shape
    idx = torch.arange(T, device=alpha.device).view(1, T, 1) + torch.arange(L, device=alpha.device).view(1, 1, L)
    return alpha.new_zeros(B, T, L + T).scatter_(2, idx.expand(B, T, L), alpha)


# ----------------------------------------------------------------------------- the carried state


def unpack_state(state: dict | None, batch: int, window: int, dim: int, like: Tensor):
    """A window reader's carried state -> (LSTM (h, c) or None, window (B, L, D), valid (B, L))."""
    if state is None:
        return (None, *empty_window(batch, window, dim, like))
    return (state["h"], state["c"]), state["window"], state["valid"]


def pack_state(lstm_state: tuple[Tensor, Tensor], window: Tensor, valid: Tensor) -> dict[str, Tensor]:
    """Nested tensors only, so the training loop can detach it and checkpoints can flatten it."""
    return {"h": lstm_state[0], "c": lstm_state[1], "window": window, "valid": valid}


def prepare(x: Tensor, mask: Tensor | None, reset: Tensor | None) -> tuple[Tensor, Tensor | None, Tensor]:
    """Default mask (all real) and reset (none); resets count only at real tokens. Returns
    (mask, reset for the LSTM or None when there is none, reset for the window)."""
    B, T = x.shape[:2]
    if mask is None:
        mask = torch.ones(B, T, dtype=torch.bool, device=x.device)
    if reset is None:
        return mask, None, torch.zeros_like(mask)
    reset = reset & mask
    return mask, reset, reset
