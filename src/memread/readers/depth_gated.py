"""Depth-gated LSTM (DGLSTM) reader: Yao, Cohn, Vylomova, Duh and Dyer (2015), "Depth-Gated LSTM"
(arXiv:1508.03790), the dLSTM baseline of the LSTMN paper's Table 1 (Cheng et al. 2016).

Stacked LSTM layers whose memory cells are linked across depth: a **depth gate** ``d_t^{L+1}`` lets
the lower layer's new cell ``c_t^L`` flow linearly into the upper layer's cell ``c_t^{L+1}``. Layer
``L + 1`` reads ``x_t^{L+1} = h_t^L`` (``x_t^1`` is the token's embedding)::

    i_t = sigmoid(W_xi x_t + W_hi h_{t-1} + w_ci * c_{t-1} + b_i)                        input gate
    f_t = sigmoid(W_xf x_t + W_hf h_{t-1} + w_cf * c_{t-1} + b_f)                        forget gate
    d_t^{L+1} = sigmoid(b_d + W_xd x_t^{L+1} + w_cd * c_{t-1}^{L+1} + w_ld * c_t^L)      depth gate
    c_t^{L+1} = d_t^{L+1} * c_t^L + f_t * c_{t-1} + i_t * tanh(W_xc x_t + W_hc h_{t-1} + b_c)
    o_t = sigmoid(W_xo x_t + W_ho h_{t-1} + w_co * c_t + b_o)                            output gate
    h_t = o_t * tanh(c_t)

(``i, f, o, c, h`` and their weights all belong to layer ``L + 1``.) The bottom layer has no lower
memory cell, so no depth gate and no ``d * c^L`` term: it is the paper's LSTM, the lines above without
the third, and the reader's ``states`` are the top layer's ``h_t``.

**What the paper leaves open, and what we chose.**

- *Peepholes.* The paper's LSTM is Graves's, whose gates read the memory cell (``W_ci c_{t-1}``,
  ``W_cf c_{t-1}``, ``W_co c_t``; the authors' implementation has these connections too), while the
  depth gate's own cell connections are weight vectors, ``w_cd * c_{t-1}`` and ``w_ld * c_t^L``. Whether
  the LSTM's cell-to-gate weights are full or diagonal we could not check in the paper's text (see
  Sources); ours are diagonal (vectors ``w_ci, w_cf, w_co``), as in Graves (2013), where these
  equations come from, and as the depth gate's are. (The authors' implementation, in the cnn library,
  uses full matrices there and couples ``f = 1 - i``, both taken over from cnn's LSTM; the paper's
  forget gate has weights of its own.)
- *Dropout* (``dropout``) acts on ``h_t^L`` where it enters layer ``L + 1`` (``x_t^{L+1}``), as a stacked
  ``nn.LSTM`` has it; the cell ``c_t^L`` that the depth gate carries up gets none.
- The paper writes every gate with a bias; so do we (the five blocks of ``W_x``'s bias).

(Sources: our stores held the paper's abstract ("[the depth gate] is a function of the lower layer
memory cell, the input to and the past memory cell of this layer"), not its full text, so the
equations are cited by their left-hand side, not by number. The authors' cnn implementation
(``dglstm.cc``), read for understanding only, has the same depth gate: a bias, a matrix on the
layer's input, vectors on the lower layer's new cell and on the layer's previous cell, and none on
the bottom layer.)

**One layer.** A one-layer DGLSTM is the paper's peephole LSTM; with ``w_ci = w_cf = w_co = 0`` it is
torch's ``nn.LSTM`` (``tests/test_baselines_lstm.py`` checks both).

**State and padding.** ``state`` is ``{"h": (L, B, H), "c": (L, B, H)}``: every layer's ``h`` and ``c``,
carried across BPTT segments (``carries_state``). At a padded step (``mask`` False) no state changes,
so a right-padded row carries its state at its last real token.

**Fast path.** A layer needs only the layer below at the same step and its own past, so the layers
run one after the other over the whole segment, as a stacked LSTM does: per layer, the input side
``W_x x_t^{L+1} + b`` of every gate (depth gate included) for all steps is one matmul, the depth
gate's ``w_ld * c_t^L`` is added for all steps at once, and each step is one ``addmm`` (``W_h h_{t-1}``)
and the elementwise gates. Autograd builds the backward pass; each layer's per-step states are
stacked once. Under ``torch.autocast`` the recurrence runs in float32 (:mod:`memread.modules.precision`).

**Reference.** ``impl = "reference"`` reads one row and one token at a time, every layer written out
as above (:meth:`DGLSTMReader._read_reference`); the tests check that the fast path equals it in float64.
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
class DGLSTMConfig:
    name: Literal["dglstm"] = "dglstm"
    hidden: PositiveInt = 300  # size of every layer's h_t and c_t
    layers: PositiveInt = 3  # the LSTMN paper's Table 1 stacks 3
    dropout: DropoutRate = 0.0  # on h_t^L where it enters layer L + 1 (layers > 1)
    impl: Literal["fast", "reference"] = "fast"  # "reference": the equations token by token, to check against


class DGLSTMLayer(nn.Module):
    """The parameters of one layer, named after the equations; ``lower``: a layer above the first,
    which has the depth gate."""

    def __init__(self, input_size: int, hidden: int, lower: bool):
        super().__init__()
        H = hidden
        self.hidden, self.lower = hidden, lower
        # [W_xi; W_xf; W_xc; W_xo (; W_xd)] on x_t, with [b_i; b_f; b_c; b_o (; b_d)]
        self.W_x = nn.Linear(input_size, (5 if lower else 4) * H)
        self.W_h = nn.Linear(H, 4 * H, bias=False)  # [W_hi; W_hf; W_hc; W_ho] on h_{t-1}
        self.w_ci = nn.Parameter(torch.empty(H))  # peepholes (diagonal): c_{t-1} into i_t
        self.w_cf = nn.Parameter(torch.empty(H))  # c_{t-1} into f_t
        self.w_co = nn.Parameter(torch.empty(H))  # c_t into o_t
        if lower:
            self.w_cd = nn.Parameter(torch.empty(H))  # depth gate: this layer's c_{t-1}
            self.w_ld = nn.Parameter(torch.empty(H))  # depth gate: the lower layer's c_t^L
        bound = 1.0 / math.sqrt(hidden)  # torch's LSTM initialisation, for every parameter
        for p in self.parameters():
            nn.init.uniform_(p, -bound, bound)


class DGLSTMReader(nn.Module):
    """DGLSTM reader: x (B, T, E), mask (B, T) -> states (B, T, H); see the module docstring."""

    def __init__(self, cfg: DGLSTMConfig, input_size: int):
        super().__init__()
        if cfg.hidden < 1 or cfg.layers < 1:
            raise MemreadError(f"reader dglstm: hidden and layers must be positive, got {cfg}")
        self.cfg = cfg
        self.input_size, self.output_size = input_size, cfg.hidden
        self.layers = nn.ModuleList(
            DGLSTMLayer(input_size if k == 0 else cfg.hidden, cfg.hidden, lower=k > 0) for k in range(cfg.layers)
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

    def _read_fast(self, x: Tensor, mask: Tensor, h0: Tensor, c0: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Layer after layer over the whole segment: states (B, T, H), the final h, c (L, B, H)."""
        col_full = mask.all(dim=0).tolist()  # steps where no row is padded
        mask_tm = mask.t().unsqueeze(2)  # (T, B, 1)
        inp, c_low = x.transpose(0, 1), None  # x_t^1 (T, B, E); no lower cell below the first layer
        h_n, c_n = [], []
        for k, layer in enumerate(self.layers):
            if k > 0:
                inp = self.drop(inp)  # x_t^{L+1} = h_t^L, dropped where it enters from below
            hs, cs, h, c = self._layer_fast(layer, inp, c_low, mask_tm, col_full, h0[k], c0[k])
            h_n.append(h)
            c_n.append(c)
            inp, c_low = hs, cs
        states = inp.transpose(0, 1)  # the top layer's h_t  (B, T, H)
        return states, torch.stack(h_n), torch.stack(c_n)

    @staticmethod
    def _layer_fast(layer: DGLSTMLayer, inp: Tensor, c_low: Tensor | None, mask_tm: Tensor, col_full: list[bool],
                    h: Tensor, c: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """One layer over the segment, time-major: inp (T, B, I) = x_t, c_low (T, B, H) = c_t^L or None,
        h, c (B, H) before the segment -> h_t, c_t for every step (T, B, H) each, and the last h, c."""
        T, B, _ = inp.shape
        H = layer.hidden
        proj = F.linear(inp, layer.W_x.weight, layer.W_x.bias)  # input side of every gate, every step
        # per-step views made once: one autograd node gathers their gradients (indexing proj[t] in the
        # loop would give each step a backward that fills a zero tensor of the whole segment)
        x_side = proj[:, :, : 4 * H].unbind(0)  # (B, 4H) per step
        if c_low is not None:  # b_d + W_xd x_t + w_ld * c_t^L, every step
            d_side = torch.addcmul(proj[:, :, 4 * H :], c_low, layer.w_ld).unbind(0)
            c_lows = c_low.unbind(0)
        W_hT = layer.W_h.weight.t()
        w_if = torch.stack([layer.w_ci, layer.w_cf])  # (2, H)
        hs, cs = [], []
        for t in range(T):
            a = torch.addmm(x_side[t], h, W_hT)  # i, f, c, o without the peepholes  (B, 4H)
            a_if, a_c, a_o = a.split([2 * H, H, H], dim=1)
            i_f = torch.sigmoid(torch.addcmul(a_if.view(B, 2, H), c.unsqueeze(1), w_if))  # i_t, f_t  (B, 2, H)
            i_t, f_t = i_f.unbind(1)
            c_t = torch.addcmul(f_t * c, i_t, torch.tanh(a_c))  # f c_{t-1} + i tanh(...)
            if c_low is not None:
                d_t = torch.sigmoid(torch.addcmul(d_side[t], c, layer.w_cd))  # depth gate d_t^{L+1}
                c_t = torch.addcmul(c_t, d_t, c_lows[t])  # + d_t^{L+1} * c_t^L
            o_t = torch.sigmoid(torch.addcmul(a_o, c_t, layer.w_co))
            h_t = o_t * torch.tanh(c_t)
            if not col_full[t]:  # padded rows keep their state
                h_t, c_t = torch.where(mask_tm[t], h_t, h), torch.where(mask_tm[t], c_t, c)
            h, c = h_t, c_t
            hs.append(h)
            cs.append(c)
        if not hs:
            empty = inp.new_zeros(0, B, H)
            return empty, empty, h, c
        return torch.stack(hs), torch.stack(cs), h, c

    # ------------------------------------------------------------------------- the reference

    def _read_reference(self, x: Tensor, mask: Tensor, h0: Tensor, c0: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """What :meth:`_read_fast` returns, one row and one real token at a time, the equations as the
        module docstring writes them (zeros at padded positions of ``states``)."""
        return reference_rows(self._step_reference, x, mask, h0, c0)

    def _step_reference(self, x_t: Tensor, h: list[Tensor], c: list[Tensor]) -> tuple[list[Tensor], list[Tensor]]:
        """One real token of one row: ``x_t`` (E,), every layer's ``h_{t-1}``, ``c_{t-1}`` (H,) -> every
        layer's ``h_t``, ``c_t``."""
        H = self.cfg.hidden
        h, c = list(h), list(c)
        c_lower = None  # the first layer has no lower cell
        for k, layer in enumerate(self.layers):
            W_xi, W_xf, W_xc, W_xo, *W_xd = layer.W_x.weight.split(H)
            b_i, b_f, b_c, b_o, *b_d = layer.W_x.bias.split(H)
            W_hi, W_hf, W_hc, W_ho = layer.W_h.weight.split(H)
            i_t = torch.sigmoid(W_xi @ x_t + W_hi @ h[k] + layer.w_ci * c[k] + b_i)
            f_t = torch.sigmoid(W_xf @ x_t + W_hf @ h[k] + layer.w_cf * c[k] + b_f)
            c_t = f_t * c[k] + i_t * torch.tanh(W_xc @ x_t + W_hc @ h[k] + b_c)
            if c_lower is not None:
                d_t = torch.sigmoid(b_d[0] + W_xd[0] @ x_t + layer.w_cd * c[k] + layer.w_ld * c_lower)
                c_t = d_t * c_lower + c_t  # c_t^{L+1} = d * c_t^L + f * c_{t-1} + i * tanh(...)
            o_t = torch.sigmoid(W_xo @ x_t + W_ho @ h[k] + layer.w_co * c_t + b_o)
            h_t = o_t * torch.tanh(c_t)
            h[k], c[k] = h_t, c_t  # layer k's own past for t + 1 (the layers above read h_t, c_t)
            x_t, c_lower = self.drop(h_t), c_t  # x_t^{L+1} = h_t^L
        return h, c


def build_dglstm_reader(cfg: DGLSTMConfig, input_size: int) -> DGLSTMReader:
    return DGLSTMReader(cfg, input_size)
