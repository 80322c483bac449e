"""Attention over the previous L outputs: the neural LM with attention of Daniluk et al. (2017), 2.1.

An LSTM reads the tokens; at every step its output h_t attends over its own previous L outputs::

    h_t  = LSTM(x_t, h_{t-1})                            one fused nn.LSTM call per segment
    M_t  = tanh(W^Y Y_t + (W^h h_t) 1^T)                  (1)  Y_t = [h_{t-L} .. h_{t-1}]
    a_t  = softmax(w^T M_t)                               (2)
    r_t  = Y_t a_t^T                                      (3)
    h*_t = tanh(W^r r_t + W^x h_t)                        (4)
    y_t  = softmax(W* h*_t + b)                           (5)  the LM's decoder, over ``states`` = h*

r_t feeds only the prediction, never the LSTM, so (1)-(4) are computed for every position of the
segment at once over a banded window (:mod:`memread.modules.window`). The window of the last L
outputs is carried across segments; state and window are reset where a document starts (``reset``).
At the start of a document fewer than L outputs exist and attention covers only those; the first
token of a document has none, so r_t = 0.

``impl = "reference"`` reads the same equations one token at a time (:meth:`DocumentLSTM.reference`,
:func:`memread.modules.window.reference_attention`), to check the fast path against. The fast path's
window attention runs compiled on the CPU or in tensor ops, as the config's ``backend`` says (settable on
a built reader, ``reader.backend = "function"``; :class:`memread.modules.window.WindowAttention`): ``"auto"``
(the default) the compiled pass where it can run, ``"compiled"`` it or an error, ``"function"`` the tensor
ops everywhere (what a GPU runs). Same values (to float32 precision).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
from torch import Tensor, nn

from memread.errors import MemreadError
from memread.modules.document_lstm import DocumentLSTM
from memread.modules.window import WindowAttention, attention_matrix, carry, extend, pack_state, prepare, unpack_state
from memread.readers.base import ReaderOutput
from memread.typed import PositiveFloat, PositiveInt


@dataclass
class AttentionLMConfig:
    name: Literal["attention"] = "attention"
    hidden: PositiveInt = 300  # k: LSTM size, also the size of h*_t (Table 2c: 296 for w = 300, 77k words)
    window: PositiveInt = 5  # L: how many previous outputs are attended over
    init_range: PositiveFloat = 0.1  # every weight uniform in (-r, r) (section 4.1)
    forget_bias: float = 1.0  # LSTM forget-gate bias (section 4.1)
    impl: Literal["fast", "reference"] = "fast"  # "reference": the equations token by token, to check against
    # the fast path's window attention: "auto" = the compiled C++ pass for CPU tensors where it builds, else
    # "function" (the hand-written autograd Function in tensor ops, what a GPU runs); "compiled" = C++ or an error
    backend: Literal["auto", "compiled", "function"] = "auto"

    @property
    def hidden_multiple(self) -> int:
        return 1


class WindowAttentionReader(nn.Module):
    """Attention over the previous L outputs, eq. (1)-(4); with the LSTM output split in two parts
    (``cfg.hidden_multiple == 2``) it is key-value attention, eq. (6)-(10), and in three parts
    key-value-predict attention, eq. (11)-(12): one implementation for the three models of 2.1-2.3."""

    def __init__(self, cfg, input_size: int):
        super().__init__()
        parts = cfg.hidden_multiple
        if cfg.hidden % parts:
            raise MemreadError(f"reader.hidden must be a multiple of {parts} for {cfg.name} "
                               f"({parts} equal parts of the LSTM output), got {cfg.hidden}")
        if cfg.window < 1:
            raise MemreadError(f"reader.window must be >= 1 for {cfg.name}, got {cfg.window}")
        d = cfg.hidden // parts  # size of a key, a value, a predict part and of h*
        self.cfg, self.d = cfg, d
        self.lstm = DocumentLSTM(input_size, cfg.hidden, cfg.init_range, cfg.forget_bias)
        self.attention = WindowAttention(d, cfg.impl, cfg.backend, f"reader {cfg.name}")  # W^Y, W^h, w
        self.W_r = nn.Linear(d, d, bias=False)
        self.W_x = nn.Linear(d, d, bias=False)
        for name, p in self.named_parameters():
            if not name.startswith("lstm."):
                nn.init.uniform_(p, -cfg.init_range, cfg.init_range)
        self.input_size, self.output_size = input_size, d

    @property
    def backend(self) -> str:
        """The window attention's backend, ``"auto"``, ``"compiled"`` or ``"function"`` (the config's ``backend``)."""
        return self.attention.backend

    @backend.setter
    def backend(self, value: str) -> None:
        self.attention.backend = value

    def forward(self, x: Tensor, mask: Tensor | None = None, state: dict | None = None,
                return_attention: bool = False, reset: Tensor | None = None) -> ReaderOutput:
        """x (B, T, E), mask (B, T), reset (B, T): True where a document starts -> states h* (B, T, d)."""
        B, T, _ = x.shape
        mask, lstm_reset, reset = prepare(x, mask, reset)
        lstm_state, window, valid = unpack_state(state, B, self.cfg.window, self.cfg.hidden, x)
        lstm = self.lstm.reference if self.cfg.impl == "reference" else self.lstm
        h, lstm_state = lstm(x, mask, lstm_state, lstm_reset)  # (B, T, k)
        hist = extend(window, valid, h, mask, reset)  # the window's outputs, then this segment's: (B, L+T, k)
        # attention: key = value = predict = h;  (6) [k; v] = h, the value also predicts;  (11) [k; v; p] = h
        parts = hist.seq.split(self.d, dim=-1)  # (B, L+T, d) each
        keys, values, predict = parts[0], parts[min(1, len(parts) - 1)], parts[-1]
        L = self.cfg.window
        r, alpha = self.attention(hist, query=keys[:, L:], keys=keys, values=values)  # (1)-(3) / (7)-(9): (B, T, d)
        h_star = torch.tanh(self.W_r(r) + self.W_x(predict[:, L:]))  # (4) / (10) / (12)  (B, T, d)
        window, valid = carry(hist, mask)
        out = ReaderOutput(states=h_star, state=pack_state(lstm_state, window, valid))
        if return_attention:
            out.memory, out.memory_mask, out.attention = values, hist.valid, attention_matrix(alpha)
        return out


def build_attention_lm_reader(cfg: AttentionLMConfig, input_size: int) -> WindowAttentionReader:
    return WindowAttentionReader(cfg, input_size)
