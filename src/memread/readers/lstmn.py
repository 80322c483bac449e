"""Long Short-Term Memory-Network (LSTMN) reader: Cheng, Dong and Lapata (2016), sections 3.2-3.3,
with two additions of the paper's earlier version: a bounded memory span and per-layer attention
that also looks at the lower layer's output.

The LSTM's single memory cell is replaced by two tapes that grow by one slot per token: a hidden
tape ``H = (h_1 .. h_{t-1})`` and a memory tape ``C = (c_1 .. c_{t-1})``. Reading token ``x_t``::

    a_i^t = v^T tanh(W_h h_i + W_x x_t + W_h~ h~_{t-1})          (4)  i over the tape
    s^t   = softmax(a^t)                                           (5)
    [h~_t; c~_t] = sum_i s_i^t [h_i; c_i]                          (6)  adaptive summaries
    [i_t; f_t; o_t; c^_t] = [sig; sig; sig; tanh](W [h~_t; x_t] + b)   (7)
    c_t = f_t * c~_t + i_t * c^_t                                  (8)
    h_t = o_t * tanh(c_t)                                          (9)

and ``h_t``, ``c_t`` are written to a new slot. (The paper writes no bias in (7), nor in its LSTM
equation (1); like every LSTM we give the gates one. Equation (4) has none and gets none.)

**The tape start** (``tape_start``). The paper: the sum in (6) runs over ``i = 1 .. t-1`` over the
tapes ``H_{t-1} = (h_1 .. h_{t-1})``, so the first token of a text has an empty tape: ``h~_1 = c~_1 = 0``
(the LSTM's zero initial state), and ``h~_0 = 0`` in (4). That is ``tape_start = "empty"``, the default
(and memread's only behaviour before the option existed, so configs and checkpoints without the key
read as before). The authors' Torch code (github.com/cheng6076/SNLI-attention, ``LSTMN.lua`` with
``model/encoder_lstmn_w2v.lua`` and ``model/decoder_deep_w2v.lua``) instead starts both tapes with one
zero slot, ``h_0 = c_0 = 0`` (its ``h_init``): token ``t`` attends over ``h_0 .. h_{t-1}``, so the zero
slot takes part in the softmax (5) of every token. ``tape_start = "zero_slot"`` does that: the slot's key
is ``W_h 0 = 0``, so its score is ``v^T tanh(W_x x_t + W_h~ h~_{t-1})`` and its value ``[0; 0]`` adds
nothing to (6), but its weight ``s_0^t`` is taken from the real slots, which then sum to ``1 - s_0^t``.
At ``t = 1`` it gets all the weight and ``h~_1 = c~_1 = 0`` as with an empty tape; from ``t = 2`` on
the two differ. The zero slot is not on the returned tapes: ``memory``, ``attention`` and the
state hold the written slots only (``attention`` rows sum to ``1 - s_0^t``), and a carried state
means the same thing under both options; the zero slot is in reach of every token, also beyond a
``span`` (which bounds the written slots; the authors' code has no span) and in every segment of a
stream, so reading in segments still equals reading at once.

**Deep LSTMN (3.3).** Layers are stacked; the output of layer ``k`` is its attention vector
``h~_t^k``, fed to layer ``k+1`` through a skip connection ``input_{k+1} = input_k + output_k``
(when the embedding size differs from ``hidden``, ``input_1`` enters the sum through a learned
projection, as in a ResNet shortcut). Each layer has its own tapes. With ``deep_attention`` the
attention of layer ``k+1`` also conditions on layer ``k``'s new hidden state, the earlier version's
``W_l h_t^k`` term: ``a_i^{t,k+1} = v^T tanh(W_h h_i^{k+1} + W_x input_t^{k+1} + W_l h_t^k +
W_h~ h~_{t-1}^{k+1})``. The reader's ``states`` are the top layer's ``h_t`` (its hidden tape is what
interacts with the environment), and ``memory`` is that tape.

**Memory span (early version).** With ``span = N`` a token attends only to the ``N`` most recent slots.

**State across calls (BPTT segments, sentences).** The returned ``state`` is a dict of tensors::

    {"h": (L, B, S, H), "c": (L, B, S, H), "h_tilde": (L, B, H), "slots": (B,) int64}

holding, per layer, the most recent ``span`` slots of both tapes (all slots when ``span = 0``),
right-aligned: row ``b``'s real slots are the last ``slots[b]`` ones. ``h_tilde`` is ``h~`` of the
row's last real token, for the ``W_h~ h~_{t-1}`` term of the next token. Because the state keeps
exactly the slots the next tokens may attend to, reading a text in segments gives the same values as
reading it at once (and token by token gives the same as a whole sentence). The key projections
``W_h h_i`` of carried slots are recomputed from the carried ``h`` once per call (one matmul), not
carried: the carried tape is detached between BPTT segments, but ``W_h`` still receives its gradient
through the keys read by the current segment, as an LSTM's recurrent weights do at a segment start.

For language modelling the tape therefore extends ``span`` tokens back across segment and sentence
boundaries: the model sees the same window at every position of the stream, in training and in
evaluation, however the stream is cut into BPTT segments; ``<eos>`` is an ordinary token that the
reader may learn to attend to or not, just as the LSTM baseline carries its state across sentences.
A continuous stream needs ``span > 0``: with ``span = 0`` the tape (and the cost of every step) would
grow with the stream, so a carried tape longer than ``MAX_UNBOUNDED_TAPE`` slots is refused.

**Fast path.** Per layer, everything that depends only on the input is computed for all steps in one
matmul (``W_x x_t`` and the input part of the gates; with ``deep_attention`` also ``W_l h_t^k``).
The recurrence then runs in a custom autograd function with a hand-written backward pass, so no
autograd graph is built per step and the tapes can be preallocated and written in place:

- forward, per step: the window's scores ``v^T tanh(K_i + q_t)`` (keys ``K_i = W_h h_i`` computed once,
  when slot ``i`` is written; with the zero slot also ``v^T tanh(q_t)``), a softmax, one batched
  product for ``[h~_t | c~_t]`` over the joint ``[h | c]`` tape, and one matmul of ``h~_t`` with
  ``[W_gates_h~; W_h~]`` that gives both the gates' recurrent part and the next token's ``W_h~ h~_t``;
  the gates' local derivatives are kept while in cache;
- backward, steps in reverse: slot ``t``'s gradient is complete once the later tokens that read it
  are undone, so it is pulled in with one batched product over their summaries' gradients; the
  ``tanh`` of (4) is recomputed rather than stored (the zero slot's score sends a gradient to ``q_t``
  and ``v`` only, as its key is constant); key and weight gradients are accumulated in
  preallocated buffers and the weight gradients summed in one matmul each after the loop.

Attention windows are slices of the tapes (a token attends to ``t - 1`` slots, or ``span``). Padding
needs no per-example loop: sequences are right-padded, so every real token's window is the same
slice for all rows, and padded steps only write slots that no real token reads.

**Compiled loops.** On the CPU both time loops run in C++ when a compiler is available
(``_lstmn_kernels.cpp``, built on first use; see :mod:`memread.readers._lstmn_kernels`), filling the
same buffers as the Python loops below, which are the fall-back (and the path on other devices).
There the window's passes are single loops per row: ``v^T tanh(K_i + q_t)`` is summed as the tanh is
computed, the backward pass recomputes it slot by slot while updating ``dK``, ``d q_t`` and ``dv`` (both
``tape_start`` options run there: the zero slot is one more score per step);
the gates' local derivatives are recomputed in the backward loop instead of stored, and the product
with ``W_f`` takes ``[d gates_t | d q_{t+1}]`` in one matmul. In float32 its tanh and sigmoid are a
vectorised form within 3 float32 ulps of tanh (float64 uses ``std::tanh``), so the two paths agree to
float32 precision and, in float64, both equal the naive reading of the equations.

**Autocast.** Under ``torch.autocast`` (mixed-precision training) the input projections run in the
autocast dtype and the recurrence in float32: the layer function gets its inputs cast to float32 and
runs with autocast off (:mod:`memread.modules.precision`), so the tapes and ``h~`` come out in float32
and on the CPU the compiled loops still run; the reference is read in float32 too.

**Reference.** ``impl = "reference"`` reads each text one token at a time with
:func:`reference_layer`, equations (4)-(9) as the paper writes them, with autograd: the form to check
the fast path against (``tests/test_lstmn.py`` and ``tests/test_reader_contract.py`` compare the two
in float64), far too slow to train with. Both take the same parameters, state and padding.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.autograd.function import once_differentiable

from memread.errors import MemreadError
from memread.modules.masking import masked_softmax
from memread.modules.precision import in_float32
from memread.readers._lstmn_kernels import kernels
from memread.readers.base import ReaderOutput
from memread.typed import DropoutRate, NonNegInt, PositiveInt

# A carried tape longer than this with ``span = 0`` is refused: set ``span`` for continuous streams.
MAX_UNBOUNDED_TAPE = 4096


@dataclass
class LSTMNConfig:
    name: Literal["lstmn"] = "lstmn"
    hidden: PositiveInt = 300  # size of h_t, c_t and of the attention layer in (4)
    layers: PositiveInt = 1  # deep LSTMN (3.3): attention vector of layer k + skip connection -> layer k+1
    span: NonNegInt = 0  # attend to at most the `span` most recent slots; the state carries as many. 0 = unbounded
    deep_attention: bool = False  # early version: layer k+1's attention also sees h_t^k (its W_l term)
    dropout: DropoutRate = 0.0  # on each layer's output before it feeds the layer above (layers > 1)
    impl: Literal["fast", "reference"] = "fast"  # "reference": equations (4)-(9) token by token, to check against
    # "empty": the paper's (6), i = 1 .. t-1 (the first token's tape is empty); "zero_slot": the authors' Torch
    # code, the tapes start with one slot h_0 = c_0 = 0 that every token may attend to (module docstring)
    tape_start: Literal["empty", "zero_slot"] = "empty"


# ----------------------------------------------------------------------------- one layer, fast path


# The compiled loops (``_lstmn_kernels.cpp``) are used for CPU tensors when they could be built; they
# fill the same buffers as the Python loops below. Tests switch them off to check the fall-back.
USE_COMPILED = True


def _compiled_kernels(like: Tensor):
    return kernels.for_tensor(like, USE_COMPILED)


def _window(t: int, s0: int, span: int, first: int) -> tuple[int, int]:
    """Slots that token ``t`` of the segment may attend to: ``[lo, hi)`` in tape coordinates, where
    the carried slots are ``0 .. s0-1`` and token ``t`` writes slot ``s0 + t``."""
    hi = s0 + t
    lo = max(first, hi - span) if span > 0 else first
    return lo, hi


def _lstmn_layer_forward(proj, H0, C0, K0, h_tilde0, start, W_f, b_f, W_h, v, span, for_backward, zero_slot=False):
    """Equations (4)-(9) over one segment for one layer, without autograd.

    proj (B, T, A + 4H) = [W_x x_t (+ W_l h_t^{k-1}) | W_gx x_t] for all steps;
    H0, C0 (B, S0, H), K0 = W_h H0 (B, S0, A): the carried tapes; h_tilde0 (B, H): h~ before the segment;
    start (B,) or None: first real carried slot of each row (None: all S0 slots are real);
    W_f (4H + A, H) = [W_gates_h~; W_h~], b_f (4H + A,) = [b; 0]: the gates' bias (its last A entries
    are a constant 0, given no gradient); W_h (A, H); v (A,); zero_slot: the tapes start with the zero
    slot (``tape_start = "zero_slot"``), one more score ``v^T tanh(q_t)`` in every softmax.
    Returns a dict: the tapes HC (B, S, 2H) = [h | c] and K (B, S, A) over carried + new slots, the
    attention weights s (B, T, S) over them, the zero slot's weights s0 (B, T) (None without it),
    [h~ | c~] (B, T, 2H), the activated gates (B, T, 4H), and with
    ``for_backward`` what the backward pass needs: the queries q (B, T, A) and, on the Python path,
    the local derivatives of the gates ``dgate`` (B, T, 4H) and ``o (1 - tanh^2 c)`` (B, T, H) (the
    compiled path recomputes them per step in its backward loop, which is cheaper than storing them).
    """
    B, T, _ = proj.shape
    S0, Hd = H0.size(1), H0.size(2)
    A = v.numel()
    S = S0 + T
    HC = proj.new_empty(B, S, 2 * Hd)  # hidden tape | memory tape
    K = proj.new_empty(B, S, A)  # W_h h_i, written once per slot
    HC[:, :S0, :Hd] = H0
    HC[:, :S0, Hd:] = C0
    K[:, :S0] = K0
    s_all = proj.new_zeros(B, T, S)
    s0_all = proj.new_empty(B, T) if zero_slot else None
    q_all = proj.new_empty(B, T, A)
    hc_tilde = proj.new_empty(B, T, 2 * Hd)
    gates = proj.new_empty(B, T, 4 * Hd)
    W_fT, W_hT = W_f.t(), W_h.t()
    first = 0 if start is None else int(start.min())
    q_rec = h_tilde0 @ W_fT[:, 4 * Hd :]  # W_h~ h~_0 (B, A)
    ops = _compiled_kernels(proj)
    out = dict(HC=HC, K=K, s=s_all, s0=s0_all, hc_tilde=hc_tilde, gates=gates, q=q_all, compiled=ops is not None)
    if ops is not None:
        ops.forward(proj, HC, K, s_all, q_all, hc_tilde, gates, q_rec.contiguous(), W_fT, b_f,
                    W_hT.contiguous(), v, start, first, S0, span, s0_all)
        return out
    dgate = proj.new_empty(B, T, 4 * Hd) if for_backward else None
    o_dtanh_c = proj.new_empty(B, T, Hd) if for_backward else None
    _forward_loop(proj, HC, K, s_all, q_all, hc_tilde, gates, dgate, o_dtanh_c, q_rec, W_fT, b_f, W_hT, v,
                  start, first, S0, span, for_backward, s0_all)
    out.update(dgate=dgate, o_dtanh_c=o_dtanh_c)
    return out


def _forward_loop(proj, HC, K, s_all, q_all, hc_tilde, gates, dgate, o_dtanh_c, q_rec, W_fT, b_f, W_hT, v,
                  start, first, S0, span, for_backward, s0_all=None):
    """The Python path of the forward time loop: fills the buffers of ``_lstmn_layer_forward`` (and the
    zero slot's weights ``s0_all`` (B, T) when the tapes start with it)."""
    B, T, _ = proj.shape
    Hd, A, S = HC.size(2) // 2, v.numel(), HC.size(1)
    xq, xg = proj[..., :A], proj[..., A:]
    tanh_c = proj.new_empty(B, Hd)
    one = proj.new_ones(())
    slot_ids = None if start is None else torch.arange(S, device=proj.device)
    for t in range(T):
        q = torch.add(xq[:, t], q_rec, out=q_all[:, t])  # W_x x_t + W_h~ h~_{t-1}  (B, A)
        lo, hi = _window(t, S0, span, first)
        if hi > lo:
            u = torch.add(K[:, lo:hi], q.unsqueeze(1)).tanh_()  # (B, w, A)
            a = torch.matmul(u, v)  # (4)  (B, w)
            if s0_all is not None:  # the zero slot first: key W_h 0 = 0, score v^T tanh(q_t)
                a = torch.cat([torch.matmul(torch.tanh(q), v).unsqueeze(1), a], dim=1)  # (B, 1 + w)
            if start is not None and bool((start > lo).any()):  # rows with fewer carried slots
                real = slot_ids[lo:hi].unsqueeze(0) >= start.unsqueeze(1)  # (B, w)
                if s0_all is not None:
                    real = torch.cat([real.new_ones(B, 1), real], dim=1)
                s = masked_softmax(a, real)  # (5)
            else:
                s = torch.softmax(a, dim=-1)  # (5)  (B, w) or (B, 1 + w)
            if s0_all is not None:
                s0_all[:, t] = s[:, 0]
                s = s[:, 1:]
            s_all[:, t, lo:hi] = s
            torch.bmm(s.unsqueeze(1), HC[:, lo:hi], out=hc_tilde[:, t : t + 1])  # (6)  [h~_t | c~_t]
        else:  # empty tape: h~_t = c~_t = 0 (with the zero slot: all the weight on it, and its value is 0)
            hc_tilde[:, t] = 0
            if s0_all is not None:
                s0_all[:, t] = 1
        h_tilde, c_tilde = hc_tilde[:, t, :Hd], hc_tilde[:, t, Hd:]
        z = torch.addmm(b_f, h_tilde, W_fT)  # (B, 4H + A): gates' recurrent part + b, and W_h~ h~_t for t + 1
        g = torch.add(xg[:, t], z[:, : 4 * Hd], out=gates[:, t])  # (7) pre-activations
        g[:, : 3 * Hd].sigmoid_()  # i, f, o
        g[:, 3 * Hd :].tanh_()  # c^
        i_t, f_t, o_t, c_hat = g.split(Hd, dim=1)
        c_t = torch.mul(f_t, c_tilde, out=HC[:, S0 + t, Hd:]).addcmul_(i_t, c_hat)  # (8)
        h_t = torch.mul(o_t, torch.tanh(c_t, out=tanh_c), out=HC[:, S0 + t, :Hd])  # (9)
        torch.mm(h_t, W_hT, out=K[:, S0 + t])  # W_h h_t, once for every later token
        q_rec = z[:, 4 * Hd :]
        if for_backward:  # local derivatives, while they are in cache
            d = dgate[:, t]
            torch.addcmul(g[:, : 3 * Hd], g[:, : 3 * Hd], g[:, : 3 * Hd], value=-1, out=d[:, : 3 * Hd])  # sig'
            d[:, :Hd].mul_(c_hat)  # d c_t / d i-gate pre-activation
            d[:, Hd : 2 * Hd].mul_(c_tilde)  # ... f
            d[:, 2 * Hd : 3 * Hd].mul_(tanh_c)  # d h_t / d o-gate pre-activation
            torch.addcmul(one, c_hat, c_hat, value=-1, out=d[:, 3 * Hd :]).mul_(i_t)  # ... c^
            torch.addcmul(one, tanh_c, tanh_c, value=-1, out=o_dtanh_c[:, t]).mul_(o_t)  # d h_t / d c_t


class _LSTMNLayerFunction(torch.autograd.Function):
    """One LSTMN layer over a segment, with a hand-written backward pass (see the module docstring)."""

    @staticmethod
    def forward(ctx, proj, H0, C0, K0, h_tilde0, W_f, b_f, W_h, v, start, span, for_backward, zero_slot=False):
        f = _lstmn_layer_forward(proj.contiguous(), H0, C0, K0, h_tilde0, start, W_f, b_f, W_h, v, span,
                                 for_backward, zero_slot)
        S0, Hd = H0.size(1), H0.size(2)
        HC, s_all = f["HC"], f["s"]
        if for_backward:
            ctx.save_for_backward(HC, f["K"], f["q"], s_all, f["hc_tilde"], f["gates"], f.get("dgate"),
                                  f.get("o_dtanh_c"), h_tilde0, W_f, W_h, v, start, f["s0"])
        ctx.span, ctx.S0, ctx.compiled = span, S0, f["compiled"]
        ctx.mark_non_differentiable(s_all)
        ctx.set_materialize_grads(False)  # outputs nobody used send None, not zeros
        # the whole tapes (B, S0 + T, H) and h~ (B, T, H); the reader slices memory and state from them
        return HC[:, :, :Hd], HC[:, :, Hd:], f["hc_tilde"][:, :, :Hd], s_all

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_H, grad_C, grad_h_tilde, _grad_s):
        HC, K, q_all, s_all, hc_tilde, gates, dgate, o_dtanh_c, h_tilde0, W_f, W_h, v, start, s0_all = ctx.saved_tensors
        span, S0 = ctx.span, ctx.S0
        B, T, H4 = gates.shape
        Hd, A = H4 // 4, v.numel()
        first = 0 if start is None else int(start.min())
        grad_h = None if grad_H is None else grad_H[:, S0:]
        grad_c = None if grad_C is None else grad_C[:, S0:]
        W_hv = v.unsqueeze(1) * W_h  # (A, H): dK below is kept without the factor v of (4)
        s_T = s_all.transpose(1, 2).contiguous()  # (B, S, T): who read slot j, and how much

        dproj = HC.new_empty(B, T, A + 4 * Hd)  # [d q_t | d gate pre-activations]
        D = HC.new_empty(B, T, 2 * Hd)  # d [h~_t | c~_t]
        dK = HC.new_zeros(B, HC.size(1), A)
        dv = v.new_zeros(1, A)
        if ctx.compiled:
            kernels().backward(grad_h, grad_c, grad_h_tilde, HC, K, q_all, s_all, hc_tilde, gates, W_f, W_hv, v,
                               start, first, S0, span, dproj, D, dK, dv, s0_all)  # the path the forward pass took
        else:
            _backward_loop(grad_h, grad_c, grad_h_tilde, HC, K, q_all, s_all, s_T, gates, dgate, o_dtanh_c, W_f,
                           W_hv, v, start, first, S0, span, dproj, D, dK, dv, s0_all)
        h_tilde_prev = torch.cat([h_tilde0.unsqueeze(1), hc_tilde[:, :-1, :Hd]], dim=1)  # h~_{t-1}  (B, T, H)
        dW_f = W_f.new_empty(W_f.shape)  # (4H + A, H), both halves written in place
        torch.mm(dproj[:, :, A:].reshape(B * T, 4 * Hd).t(), hc_tilde[:, :, :Hd].reshape(B * T, Hd),
                 out=dW_f[: 4 * Hd])
        torch.mm(dproj[:, :, :A].reshape(B * T, A).t(), h_tilde_prev.reshape(B * T, Hd), out=dW_f[4 * Hd :])
        dh_tilde0 = dproj[:, 0, :A] @ W_f[4 * Hd :]  # W_h~
        dW_h = v.unsqueeze(1) * (dK[:, S0:].reshape(B * T, A).t() @ HC[:, S0:, :Hd].reshape(B * T, Hd))
        dHC0 = torch.bmm(s_T[:, :S0], D)  # the carried slots: read by this segment's tokens  (B, S0, 2H)
        dH0, dC0 = dHC0[..., :Hd], dHC0[..., Hd:]
        if S0 and grad_H is not None:
            dH0 = dH0 + grad_H[:, :S0]
        if S0 and grad_C is not None:
            dC0 = dC0 + grad_C[:, :S0]
        dK0 = dK[:, :S0] * v
        db_f = torch.cat([dproj[:, :, A:].sum((0, 1)), dproj.new_zeros(A)])  # b_f[4H:] is a constant 0
        return (dproj, dH0, dC0, dK0, dh_tilde0, dW_f, db_f, dW_h, dv.squeeze(0),
                None, None, None, None)


def _backward_loop(grad_h, grad_c, grad_h_tilde, HC, K, q_all, s_all, s_T, gates, dgate, o_dtanh_c, W_f, W_hv, v,
                   start, first, S0, span, dproj, D, dK, dv, s0_all=None):
    """The Python path of the backward time loop: fills dproj, D, dK and dv (see the module docstring).

    With the zero slot (``s0_all`` (B, T) its weights) the real slots' score gradients are unchanged (its
    value is 0, so ``d s_0 = 0``), and its own, ``da_0 = -s_0 sum_i s_i d s_i``, reaches q_t and v."""
    B, T, H4 = gates.shape
    Hd, A = H4 // 4, v.numel()
    f_g = gates[:, :, Hd : 2 * Hd]
    W_g, W_q = W_f[: 4 * Hd], W_f[4 * Hd :]  # gates' recurrent weight, W_h~
    one = HC.new_ones(())
    for t in reversed(range(T)):
        slot = S0 + t
        # d h_t: from outside, through its key (4), through the summaries of later tokens (6)
        if grad_h is not None:
            dh = torch.addmm(grad_h[:, t], dK[:, slot], W_hv)
        else:
            dh = dK[:, slot] @ W_hv
        end = T if span == 0 else min(T, t + 1 + span)  # later tokens that can see this slot
        if end > t + 1:
            read = torch.bmm(s_T[:, slot : slot + 1, t + 1 : end], D[:, t + 1 : end]).squeeze(1)  # (B, 2H)
            dh += read[:, :Hd]
            dc = read[:, Hd:] if grad_c is None else read[:, Hd:] + grad_c[:, t]
        else:
            dc = grad_c[:, t] if grad_c is not None else torch.zeros_like(dh)
        dc = torch.addcmul(dc, dh, o_dtanh_c[:, t])  # (9)
        dg = dproj[:, t, A:]  # (8), (7)
        torch.mul(dgate[:, t], torch.cat([dc, dc, dh, dc], dim=1), out=dg)
        d_h_tilde = D[:, t, :Hd]
        if grad_h_tilde is not None:
            torch.addmm(grad_h_tilde[:, t], dg, W_g, out=d_h_tilde)
        else:
            torch.mm(dg, W_g, out=d_h_tilde)
        if t + 1 < T:
            d_h_tilde.addmm_(dproj[:, t + 1, :A], W_q)  # W_h~ h~_t was token t+1's query
        torch.mul(dc, f_g[:, t], out=D[:, t, Hd:])  # d c~_t  (8)
        lo, hi = _window(t, S0, span, first)
        if hi > lo:
            s = s_all[:, t, lo:hi]  # (B, w)
            ds = torch.bmm(D[:, t].unsqueeze(1), HC[:, lo:hi].transpose(1, 2)).squeeze(1)  # (6)  (B, w)
            sds = (s * ds).sum(dim=1, keepdim=True)  # (B, 1)
            da = s * (ds - sds)  # (5)
            u = torch.add(K[:, lo:hi], q_all[:, t].unsqueeze(1)).tanh_()  # (4) again  (B, w, A)
            dv.addmm_(da.reshape(1, -1), u.reshape(-1, A))
            g_u = torch.addcmul(one, u, u, value=-1)  # tanh' = 1 - u^2
            dK[:, lo:hi].addcmul_(da.unsqueeze(2), g_u)
            dq = torch.bmm(da.unsqueeze(1), g_u).squeeze(1)  # (B, A)
            if s0_all is not None:  # the zero slot's score v^T tanh(q_t): da_0 = -s_0 sum_i s_i ds_i
                da0 = -s0_all[:, t : t + 1] * sds  # (B, 1)
                u0 = torch.tanh(q_all[:, t])  # (B, A)
                dv.addmm_(da0.t(), u0)
                dq.addcmul_(da0, torch.addcmul(one, u0, u0, value=-1))
            torch.mul(dq, v, out=dproj[:, t, :A])  # d q_t
        else:
            dproj[:, t, :A] = 0


class LSTMNLayer(nn.Module):
    """The parameters of one LSTMN layer, named after equations (4) and (7)."""

    def __init__(self, input_size: int, hidden: int, lower: bool):
        super().__init__()
        self.hidden = hidden
        self.W_h = nn.Linear(hidden, hidden, bias=False)  # (4) keys of the hidden tape
        self.W_x = nn.Linear(input_size, hidden, bias=False)  # (4) the current input
        self.W_h_tilde = nn.Linear(hidden, hidden, bias=False)  # (4) the previous attention vector
        self.W_l = nn.Linear(hidden, hidden, bias=False) if lower else None  # early version: h_t^{k-1}
        self.v = nn.Parameter(torch.empty(hidden))  # (4)
        self.W = nn.Linear(hidden + input_size, 4 * hidden)  # (7) over [h~_t, x_t] -> i, f, o, c^
        bound = 1.0 / math.sqrt(hidden)
        for p in self.parameters():
            nn.init.uniform_(p, -bound, bound)

    def forward(self, inp: Tensor, lower_h: Tensor | None, H0: Tensor, C0: Tensor, h_tilde0: Tensor,
                start: Tensor | None, span: int, zero_slot: bool = False) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """inp (B, T, I), lower_h (B, T, H) or None, carried H0, C0 (B, S0, H), h_tilde0 (B, H), zero_slot
        (``tape_start = "zero_slot"``) -> hidden and memory tapes (B, S0 + T, H), h~ (B, T, H), attention
        weights (B, T, S0 + T) over the written slots."""
        Hd = self.hidden
        W_gh, W_gx = self.W.weight.split([Hd, self.W.in_features - Hd], dim=1)  # (7) on h~_t, on x_t
        W_in = torch.cat([self.W_x.weight, W_gx], dim=0)  # (A + 4H, I)
        proj = torch.nn.functional.linear(inp, W_in)  # W_x x_t and the gates' input part, all steps
        if self.W_l is not None and lower_h is not None:
            proj = proj + torch.nn.functional.pad(self.W_l(lower_h), (0, 4 * Hd))  # + W_l h_t^{k-1}
        W_f = torch.cat([W_gh, self.W_h_tilde.weight], dim=0)  # (4H + A, H)
        b_f = torch.cat([self.W.bias, self.W.bias.new_zeros(Hd)])  # the gates' bias, added with W_f h~_t
        K0 = self.W_h(H0)  # keys of the carried slots  (B, S0, A)
        for_backward = torch.is_grad_enabled()
        # under autocast: the recurrence in float32 (memread.modules.precision), on the compiled loops on the CPU
        return in_float32(
            _LSTMNLayerFunction.apply,
            proj, H0, C0, K0, h_tilde0, W_f, b_f, self.W_h.weight, self.v, start, span, for_backward, zero_slot
        )


# ----------------------------------------------------------------------------- one layer, the reference


def reference_layer(layer: LSTMNLayer, inp: Tensor, lower_h: Tensor | None, H0: Tensor, C0: Tensor,
                    h_tilde0: Tensor, span: int, zero_slot: bool = False) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Equations (4)-(9) for one text, one token at a time, as the paper writes them (``impl = "reference"``).

    inp (n, I): the layer's input x_t; lower_h (n, H): the layer below's h_t (deep attention) or None;
    H0, C0 (n0, H): the carried slots of the hidden and memory tapes; h_tilde0 (H,): h~ before the text;
    zero_slot: ``tape_start = "zero_slot"``, the slot ``h_0 = c_0 = 0`` of the authors' code before the
    written slots of every token's window (its key ``W_h h_0`` computed as written).
    Returns the tapes (n0 + n, H) each, h~ (n, H) and the attention weights s^t (n, n0 + n) over the
    written slots (with the zero slot they sum to 1 - s_0^t).
    """
    n, n0 = inp.size(0), H0.size(0)
    H_tape, C_tape = list(H0), list(C0)  # h_1 .. h_{t-1}, c_1 .. c_{t-1}
    h_tilde_prev = h_tilde0  # h~_{t-1}
    h_tildes, weights = [], []
    for t in range(n):
        x_t = inp[t]
        slots = list(range(max(0, len(H_tape) - span) if span else 0, len(H_tape)))  # the span's last slots
        s_t = inp.new_zeros(n0 + n)
        if slots or zero_slot:
            query = layer.W_x(x_t) + layer.W_h_tilde(h_tilde_prev)
            if layer.W_l is not None and lower_h is not None:
                query = query + layer.W_l(lower_h[t])  # early version: W_l h_t^{k-1}
            h_read = [H_tape[i] for i in slots]  # the slots token t reads: (h_0 = 0,) h_lo .. h_{t-1}
            c_read = [C_tape[i] for i in slots]
            if zero_slot:
                h_read, c_read = [inp.new_zeros(layer.hidden)] + h_read, [inp.new_zeros(layer.hidden)] + c_read
            a_t = torch.stack([layer.v @ torch.tanh(layer.W_h(h_i) + query) for h_i in h_read])  # (4)
            s = torch.softmax(a_t, dim=0)  # (5)
            h_tilde = sum(s_i * h_i for s_i, h_i in zip(s, h_read))  # (6)
            c_tilde = sum(s_i * c_i for s_i, c_i in zip(s, c_read))  # (6)
            if zero_slot:
                s = s[1:]  # the written slots' weights
            if slots:
                s_t = F.pad(s, (slots[0], n0 + n - slots[-1] - 1))
        else:  # an empty tape: h~_t = c~_t = 0
            h_tilde = c_tilde = inp.new_zeros(layer.hidden)
        i_t, f_t, o_t, c_hat = layer.W(torch.cat([h_tilde, x_t])).chunk(4)  # (7)
        i_t, f_t, o_t, c_hat = torch.sigmoid(i_t), torch.sigmoid(f_t), torch.sigmoid(o_t), torch.tanh(c_hat)
        c_t = f_t * c_tilde + i_t * c_hat  # (8)
        h_t = o_t * torch.tanh(c_t)  # (9)
        H_tape.append(h_t)  # write a new slot
        C_tape.append(c_t)
        h_tildes.append(h_tilde)
        weights.append(s_t)
        h_tilde_prev = h_tilde
    empty = inp.new_zeros(0, layer.hidden)
    return (torch.stack(H_tape) if H_tape else empty, torch.stack(C_tape) if C_tape else empty,
            torch.stack(h_tildes) if h_tildes else empty, torch.stack(weights) if weights else inp.new_zeros(0, n0))


# ----------------------------------------------------------------------------- the reader


class LSTMNReader(nn.Module):
    """LSTMN reader: x (B, T, E), mask (B, T) -> states (B, T, H); see the module docstring."""

    def __init__(self, cfg: LSTMNConfig, input_size: int):
        super().__init__()
        if cfg.hidden < 1 or cfg.layers < 1 or cfg.span < 0:
            raise MemreadError(f"reader lstmn: hidden and layers must be positive and span >= 0, got {cfg}")
        if cfg.tape_start not in ("empty", "zero_slot"):
            raise MemreadError(f"reader lstmn: tape_start must be 'empty' or 'zero_slot', got {cfg.tape_start!r}")
        self.cfg = cfg
        self.input_size = input_size
        self.output_size = cfg.hidden
        H = cfg.hidden
        self.layers = nn.ModuleList(
            LSTMNLayer(input_size if k == 0 else H, H, lower=cfg.deep_attention and k > 0) for k in range(cfg.layers)
        )
        # input_2 = input_1 + output_1 needs input_1 in R^H: a projection shortcut when E != H
        self.skip = nn.Linear(input_size, H, bias=False) if cfg.layers > 1 and input_size != H else None
        self.drop = nn.Dropout(cfg.dropout)

    def initial_state(self, batch: int, like: Tensor) -> dict[str, Tensor]:
        """The empty tape (what ``state=None`` means)."""
        L, H = self.cfg.layers, self.cfg.hidden
        return {
            "h": like.new_zeros(L, batch, 0, H),
            "c": like.new_zeros(L, batch, 0, H),
            "h_tilde": like.new_zeros(L, batch, H),
            "slots": torch.zeros(batch, dtype=torch.long, device=like.device),
        }

    def forward(self, x: Tensor, mask: Tensor | None = None, state: dict | None = None,
                return_attention: bool = False, return_cells: bool = False) -> ReaderOutput:
        """x (B, T, E), mask (B, T) bool (True = real, right-padded), state from a previous call.

        Returns states (B, T, H): the top layer's h_t; memory (B, S, H): the top layer's hidden tape
        over the carried slots and this segment (S = S0 + T), memory_mask (B, S); state (see the
        module docstring); attention (B, T, S): the top layer's weights s^t, if asked for. With
        ``return_cells`` the state also holds ``"cells"`` (B, S, H): the top layer's memory tape
        ``c_1 .. c_S``, aligned with ``memory`` (what a deep-fusion decoder reads as the source memory
        tape A, :mod:`memread.readers.lstmn_fusion`); passed back as a state, that key is ignored.
        """
        B, T, _ = x.shape
        if mask is None:
            mask = torch.ones(B, T, dtype=torch.bool, device=x.device)
        if state is None:
            state = self.initial_state(B, x)
        S0 = state["h"].size(2)
        if self.cfg.span == 0 and S0 > 0 and S0 + T > MAX_UNBOUNDED_TAPE:
            raise MemreadError(
                f"reader lstmn: the carried tape would hold {S0 + T} slots; with span = 0 (unbounded) the state "
                f"keeps the whole tape, so a continuous stream needs reader.span > 0 (e.g. span = 35)"
            )
        n0 = state["slots"]  # (B,) real carried slots, right-aligned
        start = None if bool((n0 == S0).all()) else S0 - n0  # (B,) first real carried slot

        lengths = mask.sum(dim=1)  # (B,)
        if self.cfg.impl == "reference":
            H_tapes, C_tapes, h_tildes, s = self._read_reference(x, lengths, state)
        else:
            H_tapes, C_tapes, h_tildes, s = self._read_fast(x, state, start)
        slot_ids = torch.arange(S0 + T, device=x.device)
        memory_mask = (slot_ids >= (S0 - n0).unsqueeze(1)) & (slot_ids < (S0 + lengths).unsqueeze(1))  # (B, S)
        carried = self._carry(state, H_tapes, C_tapes, h_tildes, lengths, uniform=start is None)
        if return_cells:
            carried["cells"] = C_tapes[-1]  # the top layer's memory tape  (B, S0 + T, H)
        return ReaderOutput(
            states=H_tapes[-1][:, S0:],  # h_t of the top layer  (B, T, H)
            memory=H_tapes[-1],  # (B, S0 + T, H)
            memory_mask=memory_mask,
            state=carried,
            attention=s if return_attention else None,
        )

    def _read_fast(self, x: Tensor, state: dict, start: Tensor | None):
        """Every layer over the whole batch: tapes (B, S0 + T, H) and h~ (B, T, H) per layer, and the
        top layer's attention weights (B, T, S0 + T)."""
        S0 = state["h"].size(2)
        inp, lower_h = x, None
        H_tapes, C_tapes, h_tildes = [], [], []
        for k, layer in enumerate(self.layers):
            H_tape, C_tape, h_tilde, s = layer(inp, lower_h, state["h"][k], state["c"][k], state["h_tilde"][k],
                                               start, self.cfg.span, self.cfg.tape_start == "zero_slot")
            H_tapes.append(H_tape)
            C_tapes.append(C_tape)
            h_tildes.append(h_tilde)
            if k + 1 < len(self.layers):  # (3.3) input_{k+1} = input_k + output_k, output_k = h~^k
                base = self.skip(inp) if k == 0 and self.skip is not None else inp
                inp = base + self.drop(h_tilde)
                lower_h = self.drop(H_tape[:, S0:]) if self.cfg.deep_attention else None
        return H_tapes, C_tapes, h_tildes, s

    def _read_reference(self, x: Tensor, lengths: Tensor, state: dict):
        """``impl = "reference"``: what :meth:`_read_fast` returns, read one row and one token at a time
        by :func:`reference_layer`. Padding is never read: padded positions of the tapes and of h~ are 0."""
        B, T, _ = x.shape
        S0 = state["h"].size(2)
        H_tapes, C_tapes, h_tildes = [[] for _ in self.layers], [[] for _ in self.layers], [[] for _ in self.layers]
        attention = []
        for b in range(B):
            n, n0 = int(lengths[b]), int(state["slots"][b])  # real tokens, real carried slots
            inp, lower_h = x[b, :n], None
            for k, layer in enumerate(self.layers):
                H_tape, C_tape, h_tilde, s = in_float32(  # in float32 under autocast, as the fast path
                    reference_layer, layer, inp, lower_h, state["h"][k, b, S0 - n0 :], state["c"][k, b, S0 - n0 :],
                    state["h_tilde"][k, b], self.cfg.span, self.cfg.tape_start == "zero_slot")
                # back to the batch's coordinates: carried slots end at S0, padding is zero
                H_tapes[k].append(F.pad(H_tape, (0, 0, S0 - n0, T - n)))
                C_tapes[k].append(F.pad(C_tape, (0, 0, S0 - n0, T - n)))
                h_tildes[k].append(F.pad(h_tilde, (0, 0, 0, T - n)))
                if k + 1 < len(self.layers):  # (3.3) input_{k+1} = input_k + output_k, output_k = h~^k
                    base = self.skip(inp) if k == 0 and self.skip is not None else inp
                    inp = base + self.drop(h_tilde)
                    lower_h = self.drop(H_tape[n0:]) if self.cfg.deep_attention else None
            attention.append(F.pad(s, (S0 - n0, T - n, 0, T - n)))
        stack = lambda rows: [torch.stack(r) for r in rows]  # noqa: E731
        return stack(H_tapes), stack(C_tapes), stack(h_tildes), torch.stack(attention)

    def _carry(self, state, H_tapes, C_tapes, h_tildes, lengths, uniform) -> dict[str, Tensor]:
        """The last ``span`` real slots of every layer's tapes (all when span = 0), right-aligned."""
        S, T = H_tapes[0].size(1), h_tildes[0].size(1)
        S0 = S - T
        total = state["slots"] + lengths  # (B,) real slots after this segment
        keep = total.clamp(max=self.cfg.span) if self.cfg.span > 0 else total
        if uniform and bool((lengths == T).all()):  # every row full: the last slots, a slice
            n = S if self.cfg.span == 0 else min(S, self.cfg.span)
            return {"h": torch.stack([tape[:, S - n :] for tape in H_tapes]),  # compact copies, so that
                    "c": torch.stack([tape[:, S - n :] for tape in C_tapes]),  # a checkpoint holds only
                    "h_tilde": torch.stack([ht[:, -1] for ht in h_tildes]), "slots": keep}  # the kept slots
        S_new = int(keep.max()) if keep.numel() else 0
        pos = torch.arange(S_new, device=lengths.device)
        src = (S0 + lengths - S_new).unsqueeze(1) + pos  # (B, S_new) source slot of each kept slot
        real = (pos >= (S_new - keep).unsqueeze(1)).unsqueeze(2)  # (B, S_new, 1)
        idx = src.clamp(min=0).unsqueeze(2).expand(-1, -1, self.cfg.hidden)

        def gather(tape: Tensor) -> Tensor:
            return torch.where(real, tape.gather(1, idx), tape.new_zeros(()))

        last = (lengths - 1).clamp(min=0).view(-1, 1, 1).expand(-1, 1, self.cfg.hidden)
        has_tokens = (lengths > 0).view(-1, 1)
        return {
            "h": torch.stack([gather(tape) for tape in H_tapes]),
            "c": torch.stack([gather(tape) for tape in C_tapes]),
            "h_tilde": torch.stack([
                torch.where(has_tokens, ht.gather(1, last).squeeze(1), ht0)
                for ht, ht0 in zip(h_tildes, state["h_tilde"])
            ]),
            "slots": keep,
        }

    def step(self, x_t: Tensor, state: dict | None = None) -> ReaderOutput:
        """Read one token ``x_t`` (B, E): incremental reading, left to right as in the paper's Figure 1.

        The output's ``attention`` (B, 1, S) is what the token attended to, ``memory`` (B, S, H) the
        hidden tape after writing it, and ``state["h"]`` / ``state["c"]`` (L, B, S, H) both tapes of
        every layer (with ``span`` set, only the slots still within reach).
        """
        return self.forward(x_t.unsqueeze(1), None, state, return_attention=True)


def build_lstmn_reader(cfg: LSTMNConfig, input_size: int) -> LSTMNReader:
    return LSTMNReader(cfg, input_size)
