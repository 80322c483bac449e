"""Gated-feedback LSTM (GF-LSTM) reader: Chung, Gulcehre, Cho and Bengio (2015), "Gated Feedback
Recurrent Neural Networks", the gLSTM baseline of the LSTMN paper's Table 1 (Cheng et al. 2016).

``L`` stacked LSTM layers in which every layer ``j`` at time ``t`` also reads the hidden states of
*all* layers at ``t - 1`` (the upper ones too), each through a scalar **global reset gate**
``g^{i->j}`` computed from the layer's input and from every layer's previous state. With
``h_t^0 = x_t`` and ``h*_{t-1} = [h_{t-1}^1; ...; h_{t-1}^L]``::

    g^{i->j} = sigmoid(w_g^{i->j} . h_t^{j-1} + u_g^{i->j} . h*_{t-1})           global reset gate, i = 1..L
    i_t^j = sigmoid(W_i^j h_t^{j-1} + U_i^j h_{t-1}^j + b_i^j)                    input gate
    f_t^j = sigmoid(W_f^j h_t^{j-1} + U_f^j h_{t-1}^j + b_f^j)                    forget gate
    o_t^j = sigmoid(W_o^j h_t^{j-1} + U_o^j h_{t-1}^j + b_o^j)                    output gate
    c~_t^j = tanh(W_c^j h_t^{j-1} + sum_i g^{i->j} U_c^{i->j} h_{t-1}^i + b_c^j)  GF-LSTM memory content
    c_t^j = f_t^j * c_{t-1}^j + i_t^j * c~_t^j
    h_t^j = o_t^j * tanh(c_t^j)

The reader's ``states`` are the top layer's ``h_t^L``.

**What the paper says.** Its LSTM is the standard one, gates from the layer's input and its own
previous state. The global reset gate is one scalar per pair of layers ``(i, j)`` and example,
``w_g^{i->j}`` and ``u_g^{i->j}`` are weight *vectors*, ``h*_{t-1}`` concatenates all layers' states at
``t - 1``. For LSTM (and GRU) units the global reset gates are used only when computing the new
memory content ``c~``, the sum over ``i`` replacing the ``U_c h_{t-1}`` term of the plain LSTM; the
unit-wise gates keep reading ``h_{t-1}^j`` alone. The paper writes no bias in any of these; like every
LSTM (and :mod:`memread.readers.lstmn`) we give the LSTM's four blocks one bias each; the global reset
gate, written without one, gets none.

(Sources: our stores held the paper's abstract ("a global gating unit for each pair of layers ...
gated adaptively based on the previous hidden states and the current input") and summaries of it,
not its full text, so the equations are cited by their left-hand side, not by number. The rest was
corroborated by public reimplementations, read for understanding only, and by a 2016 blog post that
reports an e-mail exchange in which Junyoung Chung confirmed that the global reset gates act on the
candidate ``c~`` only.)

**One layer is not a plain LSTM.** With ``L = 1`` the sum keeps one term, ``g^{1->1} U_c h_{t-1}``: the
candidate's recurrent part is still scaled by a gate of ``x_t`` and ``h_{t-1}``. With ``w_g = u_g = 0``
the gate is 1/2 everywhere, and the layer is torch's LSTM with the candidate rows of ``weight_hh``
halved (``tests/test_baselines_lstm.py`` checks exactly that).

**Dropout** (``dropout``) acts where a stacked ``nn.LSTM`` has it: on ``h_t^{j-1}`` where it enters
layer ``j`` from below (``j >= 2``, both in ``W h_t^{j-1}`` and in ``w_g . h_t^{j-1}``); the recurrent
and feedback connections (``h*_{t-1}``) get none.

**State and padding.** ``state`` is ``{"h": (L, B, H), "c": (L, B, H)}``: every layer's ``h`` and
``c``, carried across BPTT segments (``carries_state``). At a padded step (``mask`` False) no state
changes: the row keeps the state of its last real token, so the carried state of a right-padded row
is its state at its last real token and a row with no real token keeps the state it came with.

**Fast path.** Layer 1's input projections ``[W^1 x_t + b^1 | w_g^{.->1} . x_t]`` for all steps are one
matmul. Everything a step needs from ``h*_{t-1}`` (every layer's ``U_{i,f,o}^j h_{t-1}^j``, every
``U_c^{i->j} h_{t-1}^i``, and the ``u_g`` parts of every gate) is one batched matmul over the source
layers, ``h_{t-1}^i @ M_i`` with ``M_i`` (H, 3H + LH + L^2) packed from the parameters once per call.
Then per layer: one ``addmm`` for the layer's input from below (layers >= 2) and the elementwise
gates, the gated feedback summed with one batched product. Autograd builds the backward pass; the
per-step top states are stacked once at the end. Under ``torch.autocast`` the recurrence runs in
float32 (:mod:`memread.modules.precision`).

**Reference.** ``impl = "reference"`` reads one row and one token at a time, every layer written out
with the variables above (:meth:`GFLSTMReader._read_reference`); ``tests/test_baselines_lstm.py`` and
``tests/test_reader_contract.py`` check that the fast path equals it in float64.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from memread.errors import MemreadError
from memread.readers._layered_state import read_layered, reference_rows, zero_layered_state
from memread.readers.base import ReaderOutput
from memread.typed import DropoutRate, PositiveInt


@dataclass
class GFLSTMConfig:
    name: Literal["gflstm"] = "gflstm"
    hidden: PositiveInt = 300  # size of every layer's h_t^j and c_t^j
    layers: PositiveInt = 3  # L: the LSTMN paper's Table 1 stacks 3
    dropout: DropoutRate = 0.0  # on h_t^{j-1} where it enters layer j from below (layers > 1)
    impl: Literal["fast", "reference"] = "fast"  # "reference": the equations token by token, to check against


class GFLSTMLayer(nn.Module):
    """The parameters of layer ``j`` (input size ``I``: the embedding for j = 1, else H), named after
    the equations in the module docstring."""

    def __init__(self, input_size: int, hidden: int, layers: int):
        super().__init__()
        H, L = hidden, layers
        self.hidden = hidden
        self.W = nn.Linear(input_size, 4 * H)  # [W_i; W_f; W_o; W_c] on h_t^{j-1}, and [b_i; b_f; b_o; b_c]
        self.U = nn.Linear(H, 3 * H, bias=False)  # [U_i; U_f; U_o] on the layer's own h_{t-1}^j
        self.U_c = nn.Parameter(torch.empty(L, H, H))  # U_c[i] = U_c^{i->j}: what h_{t-1}^i adds to c~_t^j
        self.w_g = nn.Parameter(torch.empty(L, input_size))  # w_g[i] = w_g^{i->j} (on h_t^{j-1})
        self.u_g = nn.Parameter(torch.empty(L, L * H))  # u_g[i] = u_g^{i->j} (on h*_{t-1})
        bound = 1.0 / math.sqrt(hidden)  # torch's LSTM initialisation, for every parameter
        for p in self.parameters():
            nn.init.uniform_(p, -bound, bound)


class GFLSTMReader(nn.Module):
    """GF-LSTM reader: x (B, T, E), mask (B, T) -> states (B, T, H); see the module docstring."""

    def __init__(self, cfg: GFLSTMConfig, input_size: int):
        super().__init__()
        if cfg.hidden < 1 or cfg.layers < 1:
            raise MemreadError(f"reader gflstm: hidden and layers must be positive, got {cfg}")
        self.cfg = cfg
        self.input_size, self.output_size = input_size, cfg.hidden
        self.layers = nn.ModuleList(
            GFLSTMLayer(input_size if j == 0 else cfg.hidden, cfg.hidden, cfg.layers) for j in range(cfg.layers)
        )
        self.drop = nn.Dropout(cfg.dropout)

    def initial_state(self, batch: int, like: Tensor) -> dict[str, Tensor]:
        """Zeros, what ``state=None`` means: ``{"h": (L, B, H), "c": (L, B, H)}``."""
        return zero_layered_state(self.cfg.layers, batch, self.cfg.hidden, like)

    def forward(self, x: Tensor, mask: Tensor | None = None, state: dict | None = None,
                return_attention: bool = False) -> ReaderOutput:
        """x (B, T, E), mask (B, T) bool (True = real), state from a previous call -> states (B, T, H):
        the top layer's h_t; memory = states, memory_mask = mask; state {"h", "c"}: (L, B, H) each."""
        read = self._read_reference if self.cfg.impl == "reference" else self._read_fast
        return read_layered(read, x, mask, state, self.cfg.layers, self.cfg.hidden)

    # ------------------------------------------------------------------------- the fast path

    def _recurrent_weights(self) -> Tensor:
        """``M`` (L, H, 3H + LH + L^2): source layer ``i``'s ``h_{t-1}^i @ M[i]`` gives, in its columns,
        ``[U_{i,f,o}^i h^i | U_c^{i->1} h^i .. U_c^{i->L} h^i | u_g^{k->j}[block i] . h^i for j, k]``;
        the gates' parts are summed over ``i`` (``h*_{t-1}`` is the concatenation of the blocks)."""
        L, H = self.cfg.layers, self.cfg.hidden
        own = torch.stack([layer.U.weight.t() for layer in self.layers])  # (L, H, 3H): target j = source i
        feedback = torch.stack([torch.cat([layer.U_c[i].t() for layer in self.layers], dim=1)
                                for i in range(L)])  # (L_i, H, L_j * H)
        u_g = torch.stack([layer.u_g.view(L, L, H) for layer in self.layers])  # (L_j, L_k, L_i, H)
        u_g = u_g.permute(2, 3, 0, 1).reshape(L, H, L * L)  # (L_i, H, j * L + k)
        return torch.cat([own, feedback, u_g], dim=2)

    def _read_fast(self, x: Tensor, mask: Tensor, h0: Tensor, c0: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """All layers, all rows, step by step: states (B, T, H) and the final h, c (L, B, H)."""
        L, H = self.cfg.layers, self.cfg.hidden
        B, T, _ = x.shape
        # layer 1's input side for every step in one matmul: [W^1 x_t + b^1 | w_g^{.->1} . x_t]  (T, B, 4H + L)
        W_in = [torch.cat([layer.W.weight, layer.w_g]) for layer in self.layers]  # (4H + L, I_j)
        b_in = [torch.cat([layer.W.bias, layer.W.bias.new_zeros(L)]) for layer in self.layers]
        # per-step views made once: one autograd node gathers their gradients (indexing proj[t] in the
        # loop would give each step a backward that fills a zero tensor of the whole segment)
        proj = F.linear(x.transpose(0, 1), W_in[0], b_in[0]).unbind(0)
        M = self._recurrent_weights()
        col_full = mask.all(dim=0).tolist()  # steps where no row is padded
        h, c = list(h0.unbind(0)), list(c0.unbind(0))  # h_{t-1}^j, c_{t-1}^j  (B, H) each
        tops = []
        for t in range(T):
            R = torch.bmm(torch.stack(h), M)  # everything from h*_{t-1}  (L_i, B, 3H + LH + L^2)
            R_own, R_fb, R_g = R.split([3 * H, L * H, L * L], dim=2)
            R_own = R_own.unbind(0)  # U_{i,f,o}^j h_{t-1}^j, per layer j  (B, 3H)
            R_fb = R_fb.transpose(0, 1).split(H, dim=2)  # U_c^{i->j} h_{t-1}^i, per j  (B, L_i, H)
            g_rec = R_g.sum(dim=0).split(L, dim=1)  # u_g^{k->j} . h*_{t-1}, per j  (B, L_k)
            below = None
            m_t = None if col_full[t] else mask[:, t].unsqueeze(1)
            for j in range(L):
                z = proj[t] if j == 0 else torch.addmm(b_in[j], below, W_in[j].t())  # (B, 4H + L)
                z_ifo, z_c, z_g = z.split([3 * H, H, L], dim=1)
                g = torch.sigmoid(z_g + g_rec[j])  # g^{k->j}, k = 1..L  (B, L)
                i_t, f_t, o_t = torch.sigmoid(z_ifo + R_own[j]).split(H, dim=1)
                feedback = torch.bmm(g.unsqueeze(1), R_fb[j]).squeeze(1)  # sum_k g^{k->j} U_c^{k->j} h_{t-1}^k
                c_tilde = torch.tanh(z_c + feedback)  # c~_t^j
                c_t = torch.addcmul(f_t * c[j], i_t, c_tilde)  # c_t^j
                h_t = o_t * torch.tanh(c_t)  # h_t^j
                if m_t is not None:  # padded rows keep their state
                    h_t, c_t = torch.where(m_t, h_t, h[j]), torch.where(m_t, c_t, c[j])
                h[j], c[j] = h_t, c_t  # h_{t-1} for step t + 1: R above already read the old ones
                if j + 1 < L:
                    below = self.drop(h_t)
            tops.append(h[-1])
        states = torch.stack(tops, dim=1) if tops else x.new_zeros(B, 0, H)
        return states, torch.stack(h), torch.stack(c)

    # ------------------------------------------------------------------------- the reference

    def _read_reference(self, x: Tensor, mask: Tensor, h0: Tensor, c0: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """What :meth:`_read_fast` returns, one row and one real token at a time, the equations as the
        module docstring writes them (zeros at padded positions of ``states``)."""
        return reference_rows(self._step_reference, x, mask, h0, c0)

    def _step_reference(self, x_t: Tensor, h: list[Tensor], c: list[Tensor]) -> tuple[list[Tensor], list[Tensor]]:
        """One real token of one row: ``x_t`` (E,), every layer's ``h_{t-1}^j``, ``c_{t-1}^j`` (H,) ->
        every layer's ``h_t^j``, ``c_t^j``."""
        L = self.cfg.layers
        h_star = torch.cat(h)  # h*_{t-1}: every layer's state at t - 1
        below = x_t  # h_t^0 = x_t
        new_h, new_c = [], []
        for j, layer in enumerate(self.layers):
            W_i, W_f, W_o, W_c = layer.W.weight.chunk(4)
            b_i, b_f, b_o, b_c = layer.W.bias.chunk(4)
            U_i, U_f, U_o = layer.U.weight.chunk(3)
            g = [torch.sigmoid(layer.w_g[i] @ below + layer.u_g[i] @ h_star) for i in range(L)]  # g^{i->j}
            i_t = torch.sigmoid(W_i @ below + U_i @ h[j] + b_i)
            f_t = torch.sigmoid(W_f @ below + U_f @ h[j] + b_f)
            o_t = torch.sigmoid(W_o @ below + U_o @ h[j] + b_o)
            c_tilde = torch.tanh(W_c @ below + sum(g[i] * (layer.U_c[i] @ h[i]) for i in range(L)) + b_c)
            c_t = f_t * c[j] + i_t * c_tilde
            h_t = o_t * torch.tanh(c_t)
            new_h.append(h_t)
            new_c.append(c_t)
            below = self.drop(h_t)  # h_t^j, into layer j + 1
        return new_h, new_c  # all layers step together: layer j read h*_{t-1}, not h_t


def build_gflstm_reader(cfg: GFLSTMConfig, input_size: int) -> GFLSTMReader:
    return GFLSTMReader(cfg, input_size)
