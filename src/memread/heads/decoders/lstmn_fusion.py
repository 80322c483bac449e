"""LSTMN decoder for dual sequences: Cheng, Dong and Lapata (2016), section 4 (Figure 3).

A *target* sequence is read by an LSTMN (intra-attention over its own hidden tape ``H`` and memory
tape ``C``, equations (4)-(9), as in :mod:`memread.readers.lstmn`) *conditioned* on a *source*
sequence read beforehand by an LSTMN encoder, whose hidden tape ``Y = (gamma_1 .. gamma_m)`` and memory
tape ``A = (alpha_1 .. alpha_m)`` are given. Two ways of fusing the inter-attention over the source
with the intra-attention over the target:

**Deep fusion (Figure 3b, eq. 10-15).** Reading target token ``x_t``::

    a_i^t = v^T tanh(W_h h_i + W_x x_t + W_h~ h~_{t-1})            (4)  i over the target tape
    s^t   = softmax(a^t);  [h~_t; c~_t] = sum_i s_i^t [h_i; c_i]       (5, 6)
    b_j^t = u^T tanh(W_g gamma_j + W_xi x_t + W_g~ gamma~_{t-1})    (10) j over the (real) source slots
    p^t   = softmax(b^t);  [gamma~_t; alpha~_t] = sum_j p_j^t [gamma_j; alpha_j]   (11, 12)
    [i_t; f_t; o_t; c^_t] = [sig; sig; sig; tanh](W [h~_t; x_t] + b)  (7)
    r_t   = sig(W_r [gamma~_t; x_t] + b_r)                           (13)
    c_t   = r_t * alpha~_t + f_t * c~_t + i_t * c^_t                 (14)
    h_t   = o_t * tanh(c_t)                                          (15)

The paper writes ``W_x`` in both (4) and (10); they are two matrices here (``W_x``, ``W_x_inter``).
As in the LSTMN reader the gates (7) and ``r_t`` (13) get a bias, the scores (4) and (10) none.
``alpha~_t`` enters the target memory, so the source's hidden size must equal ``hidden``.
The output (what predicts the next token) is ``h_t``.

**Shallow fusion (Figure 3a).** The paper only says the LSTMN is used "in lieu of a standard RNN or
LSTM" in a model "similar to" RNNSearch (Bahdanau et al. 2014). Our reading is exactly that: RNNSearch
with its recurrent unit replaced by an LSTMN. Before token ``t`` the decoder attends to the source
hidden tape with its previous hidden state ``h_{t-1}`` (Bahdanau's ``s_{i-1}``; ``h_0 = 0``), and the
attended vector is both an input of the LSTMN and combined with its output::

    e_j^t = u^T tanh(W_g gamma_j + W_s h_{t-1})                       additive (Bahdanau) scores
    p^t   = softmax(e^t);  ctx_t = sum_j p_j^t gamma_j                 over the real source slots
    x'_t  = [x_t; ctx_t]                                               the LSTMN's input: (4)-(9) on x'_t
    out_t = tanh(W_o [h_t; ctx_t] + b_o)                               the output, for prediction

Only the source *hidden* tape is read (``source_cells`` is ignored), and nothing of the source is
written into the target memory except through the gates: that is what deep fusion adds.

**Tapes and padding.** The target tape starts as the LSTMN reader's (``tape_start``, see
:mod:`memread.readers.lstmn`): ``"empty"`` (the default; the paper's (6) sums over ``i = 1 .. t-1``,
so the first token has ``h~_1 = c~_1 = 0``) or ``"zero_slot"`` (the authors' Torch code,
``model/decoder_deep_w2v.lua``: the target tapes start with one slot ``h_0 = c_0 = 0``, key ``W_h 0 = 0``,
which takes part in every token's intra-attention softmax (5) with the score ``v^T tanh(query)`` and adds
nothing to (6); it is not on the returned tape ``memory``). Either way ``h~_0 = gamma~_0 = 0``. (The
authors' decoder also attends over the encoder's zero slot in (10)-(12); here the source tapes are the
encoder's written slots: the inter-attention is the same under both options.) The heads build the
decoder with the default; ``FusionConfig(..., tape_start="zero_slot")`` selects the other.
Target sequences are right-padded, so a real token at position ``t`` reads only slots ``< t``, which
are real: padded target steps write slots nobody real reads. Padded source slots get exactly zero
weight (and are zeroed once, so garbage there cannot leak); a row without any real source slot
attends to nothing (``gamma~ = alpha~ = ctx = 0``).

**Outputs.** ``forward`` returns a :class:`ReaderOutput`: ``states`` (B, T, H) the outputs above,
``memory`` (B, T, H) the target hidden tape ``h_1 .. h_T`` with ``memory_mask`` the target mask,
``attention`` (B, T, S) the inter-attention weights ``p^t`` when asked for, and ``state`` the
decoder state after the whole target (rows' tapes include their padded steps; for incremental
decoding use :meth:`step`); when asked for attention the state also holds ``"intra_attention"``
(B, T, T): row t the intra-attention ``s^t`` over the target slots ``0 .. t-1`` (slot i holds the
decoder's input i; with the zero slot, the written slots' weights only). ``dropout`` is applied to
``states`` only.

**Fast path.** Everything that depends only on the target input is computed for all steps in one
matmul (``W_x x_t``, the gates' input part, ``W_x_inter x_t`` and ``r_t``'s input part; shallow:
``W_x x_t`` and the gates' ``x_t`` part), the source keys ``W_g gamma_j`` once per sequence, and the
remaining per-step products are fused: ``h~_t [W_gates_h~; W_h~]`` (the gates' recurrent part and
the next query), ``gamma~_t [W_r_gamma; W_g~]`` (``r_t``'s part and the next inter query), and the key
``W_h h_t`` of the new slot (shallow: ``h_t [W_h; W_s]``, the key and the next inter query;
``ctx_t [W_x_ctx; W_gates_ctx]``). The time loop runs in Python with autograd. Tapes live in
preallocated buffers written in place. Under autograd (training) :meth:`forward` writes and reads
them through custom autograd functions whose backward accumulates the tapes' gradients in buffers of
the same shape, ordered through the graph (:class:`_Tapes`): no tape is copied per step, and the
intra-attention (4)-(6) is one node. :meth:`step` under autograd (not a training path) grows the
tapes by concatenation, so that every returned state stays a tensor of its own that may be stepped
again. Shallow fusion's output ``tanh(W_o [h_t; ctx_t])`` is one matmul after the loop. Per step the code
avoids slicing tensors that need a gradient (a slice's backward fills a zero tensor of the whole
input): the inputs are unbound once, fused products are split. :mod:`memread.bench.fusion` times a
training step against an LSTM decoder with RNNSearch attention.

**Autocast.** Under ``torch.autocast`` :meth:`~LSTMNFusionDecoder.start`, :meth:`~LSTMNFusionDecoder.forward`
and :meth:`~LSTMNFusionDecoder.step` run in float32 with autocast off (:mod:`memread.modules.precision`):
the tapes, their custom autograd functions and the time loop stay in float32.
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
from memread.modules.precision import float32_under_autocast
from memread.readers.base import ReaderOutput
from memread.typed import DropoutRate, PositiveInt


@dataclass
class FusionConfig:
    name: Literal["lstmn_shallow", "lstmn_deep"]
    hidden: PositiveInt = 300  # size of h_t, c_t and of both attention layers
    dropout: DropoutRate = 0.0  # on the decoder's outputs (states)
    # the target tapes: "empty" (the paper's (6)) or "zero_slot" (the authors' code: h_0 = c_0 = 0 on the tape)
    tape_start: Literal["empty", "zero_slot"] = "empty"


def _write(buf: Tensor, n: int, value: Tensor, inplace: bool) -> Tensor:
    """Slot ``n`` of a tape ``buf`` (B, cap, D) set to ``value`` (B, D): in place (the buffer doubles
    when full), or, for :meth:`LSTMNFusionDecoder.step` under autograd, as a new tensor holding slots
    ``0 .. n``."""
    if not inplace:  # (no slicing when the buffer holds exactly n slots: a slice's backward fills zeros)
        return torch.cat([buf if buf.size(1) == n else buf[:, :n], value.unsqueeze(1)], dim=1)
    if n >= buf.size(1):
        grown = buf.new_empty(buf.size(0), max(2 * buf.size(1), n + 1, 4), buf.size(2))
        grown[:, :n] = buf[:, :n]
        buf = grown
    buf[:, n] = value
    return buf


class _Tapes:
    """The target tapes of one teacher-forced reading under autograd: ``HC`` (B, T, 2H) = [h | c] and
    ``K`` (B, T, H) = W_h h_i, outside autograd, written in place one slot per step by :class:`_TapeWrite`,
    and their gradients ``dHC``, ``dK`` (same shapes), filled by the backward of the reads.

    Slot ``n`` is written once, at step ``n``, and never modified afterwards; a read at step ``m`` sees
    slots ``< m`` only. So the buffers are kept as plain attributes of the autograd contexts (not
    ``save_for_backward``, whose version check every later write would trip): what a read used is
    still there in backward. The order of the backward calls is enforced by the graph: each write
    returns a 0-dim token that the next read and the next write take (and :class:`_TapeView` the
    last). The read at step ``m`` thus depends on the writes of slots ``m - 1, m - 2, .. 0`` through
    the chain, so the backward of slot ``n``'s write runs after that of every read of slot ``n``
    (steps ``m > n``), when ``dHC[:, n]`` and ``dK[:, n]`` are complete.
    """

    def __init__(self, HC: Tensor, K: Tensor):
        self.HC, self.K = HC, K
        self.dHC = self.dK = None
        self.task = None  # the backward pass the gradients belong to

    def grads(self) -> tuple[Tensor, Tensor]:
        """The gradient buffers, fresh zeros at the first call of each backward pass (after a pass with
        ``retain_graph``, perhaps running only part of the graph, the next must not see its sums; and
        the slots' gradients handed out stay untouched)."""
        task = torch._C._current_graph_task_id()
        if task != self.task:
            self.task = task
            self.dHC, self.dK = torch.zeros_like(self.HC), torch.zeros_like(self.K)
        return self.dHC, self.dK


class _TapeWrite(torch.autograd.Function):
    """Slot ``n`` of the tapes set to [h | c] and the key (each (B, H)) -> the token of this write (0-dim)."""

    @staticmethod
    def forward(ctx, tapes: _Tapes, n: int, after: Tensor | None, h: Tensor, c: Tensor, key: Tensor) -> Tensor:
        H = h.size(1)
        tapes.HC[:, n, :H] = h
        tapes.HC[:, n, H:] = c
        tapes.K[:, n] = key
        ctx.tapes, ctx.n, ctx.H = tapes, n, H
        return h.new_zeros(())

    @staticmethod
    @once_differentiable
    def backward(ctx, _):  # every read of slot n has run its backward (see _Tapes)
        dHC, dK = ctx.tapes.grads()
        n, H = ctx.n, ctx.H
        return None, None, None, dHC[:, n, :H], dHC[:, n, H:], dK[:, n]


def _intra_weights(scores: Tensor, query: Tensor, v: Tensor, zero_slot: bool) -> tuple[Tensor, Tensor | None]:
    """(5) over the written slots' scores (B, n) -> their weights (B, n), and with the zero slot first in
    the softmax (its key ``W_h 0 = 0``: score ``v^T tanh(query)``) its weight (B, 1); else None."""
    if not zero_slot:
        return torch.softmax(scores, dim=-1), None
    s = torch.softmax(torch.cat([(torch.tanh(query) @ v).unsqueeze(1), scores], dim=1), dim=-1)  # (B, 1 + n)
    return s[:, 1:], s[:, :1]


class _TapeRead(torch.autograd.Function):
    """Intra-attention (4)-(6) over slots ``0 .. n-1`` of the tapes (and the zero slot with ``zero_slot``):
    query (B, H) = W_x x_t + W_h~ h~_{t-1}, v (H,) -> [h~_t | c~_t] (B, 2H); ``after`` is the token of the
    write of slot ``n - 1``."""

    @staticmethod
    def forward(ctx, tapes: _Tapes, n: int, after: Tensor, query: Tensor, v: Tensor, zero_slot: bool = False) -> Tensor:
        t = torch.tanh(tapes.K[:, :n] + query.unsqueeze(1))  # (B, n, H)
        s, s0 = _intra_weights(t @ v, query, v, zero_slot)  # (4), (5)  (B, n)
        ctx.tapes, ctx.n, ctx.t, ctx.s, ctx.s0 = tapes, n, t, s, s0
        ctx.save_for_backward(v, query)
        return torch.bmm(s.unsqueeze(1), tapes.HC[:, :n]).squeeze(1)  # (6)  (the zero slot's value is 0)

    @staticmethod
    @once_differentiable
    def backward(ctx, d_out: Tensor):
        tapes, n, t, s, s0 = ctx.tapes, ctx.n, ctx.t, ctx.s, ctx.s0
        v, query = ctx.saved_tensors
        dHC, dK = tapes.grads()
        ds = torch.bmm(tapes.HC[:, :n], d_out.unsqueeze(2)).squeeze(2)  # (6) -> d s  (B, n)
        dHC[:, :n].baddbmm_(s.unsqueeze(2), d_out.unsqueeze(1))  # (6) -> d [h_i | c_i] += s_i d_out
        sds = (s * ds).sum(1, keepdim=True)  # (B, 1); the zero slot's d s_0 = 0 (its value is 0)
        da = s * (ds - sds)  # (5) softmax
        d_pre = torch.ops.aten.tanh_backward(da.unsqueeze(2) * v, t)  # (4) d (W_h h_i + query)  (B, n, H)
        dK[:, :n].add_(d_pre)
        dv = da.reshape(1, -1).mm(t.reshape(-1, t.size(2))).squeeze(0)  # (4) d v = sum_(b, i) da_i t_i
        d_query = d_pre.sum(1)
        if s0 is not None:  # the zero slot's score v^T tanh(query): da_0 = -s_0 sum_i s_i ds_i
            da0, t0 = -s0 * sds, torch.tanh(query)  # (B, 1), (B, H)
            d_query = d_query + torch.ops.aten.tanh_backward(da0 * v, t0)
            dv = dv + (da0 * t0).sum(0)
        return None, None, None, d_query, dv, None


class _TapeView(torch.autograd.Function):
    """Slots ``0 .. n-1`` of the tapes as (B, n, 2H), (B, n, H) views whose gradients enter the tapes'
    (the state after a teacher-forced reading; nothing writes the buffers afterwards)."""

    @staticmethod
    def forward(ctx, tapes: _Tapes, n: int, after: Tensor) -> tuple[Tensor, Tensor]:
        ctx.set_materialize_grads(False)
        ctx.tapes, ctx.n = tapes, n
        return tapes.HC[:, :n], tapes.K[:, :n]

    @staticmethod
    @once_differentiable
    def backward(ctx, d_HC: Tensor | None, d_K: Tensor | None):
        dHC, dK = ctx.tapes.grads()
        if d_HC is not None:
            dHC[:, : ctx.n].add_(d_HC)
        if d_K is not None:
            dK[:, : ctx.n].add_(d_K)
        return None, None, None


class LSTMNFusionDecoder(nn.Module):
    """LSTMN target processor with shallow or deep attention fusion; see the module docstring.

    y (B, T, E), y_mask (B, T), source_states (B, S, Hs), source_cells (B, S, Hs), source_mask (B, S)
    -> states (B, T, H).
    """

    def __init__(self, cfg: FusionConfig, input_size: int, source_size: int):
        super().__init__()
        if cfg.name not in ("lstmn_shallow", "lstmn_deep"):
            raise MemreadError(f"fusion decoder: name must be 'lstmn_shallow' or 'lstmn_deep', got {cfg.name!r}")
        if cfg.hidden < 1:
            raise MemreadError(f"fusion decoder: hidden must be positive, got {cfg.hidden}")
        if cfg.tape_start not in ("empty", "zero_slot"):
            raise MemreadError(f"fusion decoder: tape_start must be 'empty' or 'zero_slot', got {cfg.tape_start!r}")
        self.deep = cfg.name == "lstmn_deep"
        if self.deep and source_size != cfg.hidden:
            raise MemreadError(f"deep fusion writes the source memory tape into the target memory (eq. 14): the "
                               f"source size ({source_size}) must equal hidden ({cfg.hidden})")
        self.cfg = cfg
        self.input_size, self.source_size, self.output_size = input_size, source_size, cfg.hidden
        H, E, Hs = cfg.hidden, input_size, source_size
        In = E if self.deep else E + Hs  # the LSTMN's input: x_t (deep) or [x_t; ctx_t] (shallow)
        # intra-attention and gates, equations (4) and (7)
        self.W_h = nn.Linear(H, H, bias=False)
        self.W_x = nn.Linear(In, H, bias=False)
        self.W_h_tilde = nn.Linear(H, H, bias=False)
        self.v = nn.Parameter(torch.empty(H))
        self.W = nn.Linear(H + In, 4 * H)  # over [h~_t; x_t] (shallow: [h~_t; x_t; ctx_t]) -> i, f, o, c^
        # inter-attention over the source hidden tape
        self.W_gamma = nn.Linear(Hs, H, bias=False)  # keys W_g gamma_j, once per sequence
        self.u = nn.Parameter(torch.empty(H))
        if self.deep:
            self.W_x_inter = nn.Linear(E, H, bias=False)  # (10)
            self.W_gamma_tilde = nn.Linear(Hs, H, bias=False)  # (10)
            self.W_r = nn.Linear(Hs + E, H)  # (13) over [gamma~_t; x_t]
        else:
            self.W_s = nn.Linear(H, H, bias=False)  # Bahdanau's query: the previous hidden state
            self.W_o = nn.Linear(H + Hs, H)  # output over [h_t; ctx_t]
        bound = 1.0 / math.sqrt(H)
        for p in self.parameters():
            nn.init.uniform_(p, -bound, bound)
        self.drop = nn.Dropout(cfg.dropout)

    # ------------------------------------------------------------------ fused weights

    def _weights(self) -> dict[str, Tensor]:
        """The per-sequence concatenations of the weights (see "Fast path")."""
        H, E = self.cfg.hidden, self.input_size
        W_gh, W_gin = self.W.weight.split([H, self.W.in_features - H], dim=1)
        zeros = self.W.bias.new_zeros(H)
        w = {"W_fT": torch.cat([W_gh, self.W_h_tilde.weight]).t(),  # h~_t -> [gates | W_h~ h~_t]  (H, 5H)
             "b_f": torch.cat([self.W.bias, zeros])}
        if self.deep:
            W_rg, W_rx = self.W_r.weight.split([self.source_size, E], dim=1)
            # x_t -> [W_x x_t | gates' x part | W_x_inter x_t | r's x part]  (7H, E)
            w["W_in"] = torch.cat([self.W_x.weight, W_gin, self.W_x_inter.weight, W_rx])
            w["b_in"] = torch.cat([zeros, zeros.new_zeros(4 * H), zeros, self.W_r.bias])
            w["W_gT"] = torch.cat([W_rg, self.W_gamma_tilde.weight]).t()  # gamma~_t -> [r part | next query]
            w["W_hT"] = self.W_h.weight.t()  # h_t -> its key
        else:
            W_xx, W_xc = self.W_x.weight.split([E, self.source_size], dim=1)
            W_gx, W_gc = W_gin.split([E, self.source_size], dim=1)
            w["W_in"] = torch.cat([W_xx, W_gx])  # x_t -> [W_x x_t | gates' x part]  (5H, E)
            w["b_in"] = None
            w["W_cT"] = torch.cat([W_xc, W_gc]).t()  # ctx_t -> [W_x ctx part | gates' ctx part]  (Hs, 5H)
            w["W_hT"] = torch.cat([self.W_h.weight, self.W_s.weight]).t()  # h_t -> [key | next inter query]
        return w

    # ------------------------------------------------------------------ state

    @float32_under_autocast
    def start(self, source_states: Tensor, source_cells: Tensor | None, source_mask: Tensor | None,
              capacity: int = 8) -> dict:
        """The decoder state before the first target token: the source keys ``W_g gamma_j`` projected once,
        the source tapes (padding zeroed), and an empty target tape (preallocated for ``capacity`` slots).

        source_states (B, S, Hs) = Y, source_cells (B, S, Hs) = A (deep fusion; None for shallow),
        source_mask (B, S) bool or None (all real).
        """
        B, S, Hs = source_states.shape
        H = self.cfg.hidden
        if Hs != self.source_size:
            raise MemreadError(f"fusion decoder: source states have size {Hs}, expected {self.source_size}")
        if source_mask is None:
            source_mask = torch.ones(B, S, dtype=torch.bool, device=source_states.device)
        m = source_mask.unsqueeze(-1).to(source_states.dtype)
        if self.deep:
            if source_cells is None:
                raise MemreadError("deep fusion needs the source memory tape (source_cells); see "
                                   "LSTMNReader(..., return_cells=True)")
            YA = torch.cat([source_states, source_cells], dim=-1) * m  # [gamma_j | alpha_j]  (B, S, 2H)
        else:
            YA = source_states * m  # (B, S, Hs)
        has = source_mask.any(dim=1, keepdim=True)  # (B, 1)
        bias = torch.zeros(B, S, dtype=source_states.dtype, device=source_states.device)
        bias = bias.masked_fill(~source_mask & has, float("-inf"))  # rows without source: 0, then weight 0
        like = source_states
        return {
            "src_keys": self.W_gamma(YA[..., :Hs]),  # W_g gamma_j  (B, S, A)
            "src": YA,
            "src_bias": bias,
            "src_has": has.to(like.dtype),  # (B, 1)
            "src_full": bool(has.all()),  # every row has a source slot: no need to zero rows' weights
            "HC": like.new_zeros(B, capacity, 2 * H),  # target tapes [h | c], slots 0 .. n-1 written
            "K": like.new_zeros(B, capacity, H),  # W_h h_i
            "n": 0,
            "q_rec": like.new_zeros(B, H),  # W_h~ h~_{t-1}
            "p_rec": like.new_zeros(B, H),  # deep: W_g~ gamma~_{t-1}; shallow: W_s h_{t-1}
        }

    def reorder(self, state: dict, index: Tensor) -> dict:
        """The state of the batch rows ``index`` (B',) (beam search): a copy, so rows may repeat."""
        return {k: (v.index_select(0, index) if torch.is_tensor(v) else v) for k, v in state.items()}

    # ------------------------------------------------------------------ one step

    def _advance(self, x_proj: Tensor, st: dict, w: dict, inplace: bool, trace: list | None = None):
        """One target token: x_proj (B, P) its input-only projections -> h_t (B, H), the inter-attention
        p^t (B, S) and (shallow) ctx_t (B, Hs) or (deep) None; updates the dict ``st`` to the new state.
        ``trace``: a list that gets the intra-attention s^t (B, n) over the written target slots appended
        (read only: the same values either way).

        The target tapes are ``st["HC"]``, ``st["K"]`` (see :func:`_write`), or, in a teacher-forced
        reading under autograd, ``st["tape"]``: a :class:`_Tapes` and the token of its last write."""
        H, zero_slot = self.cfg.hidden, self.cfg.tape_start == "zero_slot"
        n, HC, K, tape = st["n"], st["HC"], st["K"], st.get("tape")
        src, src_keys = st["src"], st["src_keys"]

        def first(tape: Tensor) -> Tensor:  # slots 0 .. n-1 (the whole tape when autograd records)
            return tape if tape.size(1) == n else tape[:, :n]

        def inter(query: Tensor) -> tuple[Tensor, Tensor]:  # (10)-(12) / Bahdanau: weights and summary
            b = torch.tanh(src_keys + query.unsqueeze(1)) @ self.u + st["src_bias"]  # (B, S)
            p = torch.softmax(b, dim=-1)
            if not st["src_full"]:  # rows without any real source slot attend to nothing
                p = p * st["src_has"]
            return p, torch.bmm(p.unsqueeze(1), src).squeeze(1)

        def intra(query: Tensor) -> Tensor:  # (4)-(6): [h~_t | c~_t]  (B, 2H)
            if n == 0:  # (with the zero slot: all the weight on it, and its value is 0)
                if trace is not None:
                    trace.append(query.new_zeros(query.size(0), 0))
                return query.new_zeros(query.size(0), 2 * H)
            if tape is not None:
                if trace is not None:  # the weights _TapeRead computes inside, computed again as it does
                    with torch.no_grad():
                        a = torch.tanh(tape[0].K[:, :n] + query.unsqueeze(1)) @ self.v
                        trace.append(_intra_weights(a, query, self.v, zero_slot)[0])
                return _TapeRead.apply(tape[0], n, tape[1], query, self.v, zero_slot)
            a = torch.tanh(first(K) + query.unsqueeze(1)) @ self.v  # (4)  (B, n)
            s, _ = _intra_weights(a, query, self.v, zero_slot)  # (5)
            if trace is not None:
                trace.append(s)
            return torch.bmm(s.unsqueeze(1), first(HC)).squeeze(1)  # (6)

        if self.deep:
            xq, xg, xp, xr = x_proj.split([H, 4 * H, H, H], dim=1)
            h_tilde, c_tilde = intra(xq + st["q_rec"]).split(H, dim=1)
            p, ga = inter(xp + st["p_rec"])
            gamma_tilde, alpha_tilde = ga.split(H, dim=1)  # (10)-(12)
            z_g, st["q_rec"] = torch.addmm(w["b_f"], h_tilde, w["W_fT"]).split([4 * H, H], dim=1)  # gates | W_h~ h~_t
            z_r, st["p_rec"] = (gamma_tilde @ w["W_gT"]).split(H, dim=1)  # r's gamma~ part | W_g~ gamma~_t
            g = xg + z_g  # (7) pre-activations
            g_ifo, g_c = g.split([3 * H, H], dim=1)
            i_t, f_t, o_t = torch.sigmoid(g_ifo).split(H, dim=1)
            c_hat = torch.tanh(g_c)
            r_t = torch.sigmoid(xr + z_r)  # (13)
            c_t = torch.addcmul(torch.addcmul(r_t * alpha_tilde, f_t, c_tilde), i_t, c_hat)  # (14)
            h_t = o_t * torch.tanh(c_t)  # (15)
            key = h_t @ w["W_hT"]
            ctx = None
        else:
            p, ctx = inter(st["p_rec"])  # Bahdanau: attend with h_{t-1}
            xq, xg = x_proj.split([H, 4 * H], dim=1)
            zc_q, zc_g = (ctx @ w["W_cT"]).split([H, 4 * H], dim=1)  # the ctx_t part of the LSTMN's input
            h_tilde, c_tilde = intra(xq + zc_q + st["q_rec"]).split(H, dim=1)  # (4)-(6) on x'_t = [x_t; ctx_t]
            z_g, st["q_rec"] = torch.addmm(w["b_f"], h_tilde, w["W_fT"]).split([4 * H, H], dim=1)
            g = xg + zc_g + z_g  # (7) pre-activations
            g_ifo, g_c = g.split([3 * H, H], dim=1)
            i_t, f_t, o_t = torch.sigmoid(g_ifo).split(H, dim=1)
            c_hat = torch.tanh(g_c)
            c_t = torch.addcmul(f_t * c_tilde, i_t, c_hat)  # (8)
            h_t = o_t * torch.tanh(c_t)  # (9)
            key, st["p_rec"] = (h_t @ w["W_hT"]).split(H, dim=1)  # key of the new slot | W_s h_t for t + 1
        if tape is not None:
            st["tape"] = tape[0], _TapeWrite.apply(tape[0], n, tape[1], h_t, c_t, key)
        else:
            st["HC"] = _write(HC, n, torch.cat([h_t, c_t], dim=1), inplace)
            st["K"] = _write(K, n, key, inplace)
        st["n"] = n + 1
        return h_t, p, ctx

    def _project(self, y: Tensor, w: dict) -> Tensor:
        return F.linear(y, w["W_in"], w["b_in"])

    def _output(self, h: Tensor, ctx: Tensor | None) -> Tensor:
        if self.deep:
            return h
        return torch.tanh(self.W_o(torch.cat([h, ctx], dim=-1)))  # out_t = tanh(W_o [h_t; ctx_t] + b_o)

    # ------------------------------------------------------------------ public

    @float32_under_autocast
    def step(self, y_t: Tensor, state: dict) -> tuple[Tensor, dict]:
        """One target token y_t (B, E) -> its output (B, H) and the new state (from :meth:`start`).

        Costs O(S + t): the source keys and the target slots' keys are kept in the state. Under
        ``torch.no_grad()`` the tapes are written in place: the given state is consumed (step each
        state once; :meth:`reorder` copies). Under autograd they are concatenated (see "Fast path").
        The new state holds this step's weights for inspection (:meth:`step_trace`).
        """
        w = self._weights()
        st = dict(state)
        intra: list = []
        h_t, p, ctx = self._advance(self._project(y_t, w), st, w, not torch.is_grad_enabled(), intra)
        st["attention"], st["intra_attention"] = p, intra[0]
        return self.drop(self._output(h_t, ctx)), st

    @staticmethod
    def step_trace(state: dict) -> dict[str, Tensor]:
        """The weights of the step that gave ``state``: ``"source"`` the inter-attention p^t (B, S) over
        the source slots, ``"target"`` the intra-attention s^t (B, t - 1) over the target slots written
        before it (slot i: the decoder's input i, ``<s>`` first)."""
        return {"source": state["attention"], "target": state["intra_attention"]}

    @float32_under_autocast
    def forward(self, y: Tensor, y_mask: Tensor | None, source_states: Tensor, source_cells: Tensor | None,
                source_mask: Tensor | None, return_attention: bool = False) -> ReaderOutput:
        """Teacher forcing over the whole target y (B, T, E); see the module docstring for the outputs."""
        B, T, _ = y.shape
        if y_mask is None:
            y_mask = torch.ones(B, T, dtype=torch.bool, device=y.device)
        recording = torch.is_grad_enabled()
        st = self.start(source_states, source_cells, source_mask, capacity=T)
        if recording:  # the tapes are written in place all the same (see _Tapes)
            st["tape"] = _Tapes(st["HC"], st["K"]), None
        w = self._weights()
        proj = self._project(y, w)  # every input-only part, all steps  (B, T, P)
        hs, ctxs, ps = [], [], []
        intra: list | None = [] if return_attention else None
        for x_proj in proj.unbind(1):  # (unbind: one backward op, not a slice's per step)
            h_t, p, ctx = self._advance(x_proj, st, w, not recording, intra)
            hs.append(h_t)
            ctxs.append(ctx)
            if return_attention:
                ps.append(p)
        if recording:
            tapes, token = st.pop("tape")
            st["HC"], st["K"] = _TapeView.apply(tapes, T, token)
        memory = torch.stack(hs, dim=1) if recording else st["HC"][:, :T, : self.cfg.hidden]  # (B, T, H)
        states = self._output(memory, None if self.deep else torch.stack(ctxs, dim=1))
        if intra is not None:  # row t over the target slots 0 .. t - 1 (B, T, T)
            st["intra_attention"] = torch.stack([F.pad(s_t, (0, T - s_t.size(1))) for s_t in intra], dim=1)
        return ReaderOutput(
            states=self.drop(states),
            memory=memory,
            memory_mask=y_mask,
            state=st,
            attention=torch.stack(ps, dim=1) if return_attention else None,  # (B, T, S)
        )


def build_fusion_decoder(cfg: FusionConfig, input_size: int, source_size: int) -> LSTMNFusionDecoder:
    return LSTMNFusionDecoder(cfg, input_size, source_size)
