"""Key-value attention over the previous L outputs: Daniluk et al. (2017), 2.2.

The LSTM output is split in two: a key, used to compute the attention, and a value, used both as
the attended content and to encode the next-word distribution::

    [k_t ; v_t] = h_t                                     (6)  h_t from one fused nn.LSTM call per segment
    M_t  = tanh(W^Y [k_{t-L} .. k_{t-1}] + (W^h k_t) 1^T)  (7)
    a_t  = softmax(w^T M_t)                               (8)
    r_t  = [v_{t-L} .. v_{t-1}] a_t^T                     (9)
    h*_t = tanh(W^r r_t + W^x v_t)                        (10)  ``states``; the LM's decoder gives (5)

``hidden`` is the LSTM size (Table 2c's k = 560 for w = 300); keys, values and h* have hidden / 2.
Windows across segments and document resets as in :mod:`memread.readers.attention_lm`. The same
module serves key-value-predict (:mod:`memread.readers.key_value_predict`), whose output has a third part.
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


@dataclass
class KeyValueConfig:
    name: Literal["kv"] = "kv"
    hidden: int = 300  # LSTM size, a multiple of 2 (key and value have hidden / 2 each)
    window: int = 5  # L
    init_range: float = 0.1
    forget_bias: float = 1.0

    @property
    def hidden_multiple(self) -> int:
        return 2


class KeyValueReader(nn.Module):
    """Key-value attention (``cfg.hidden_multiple == 2``, eq. 6-10) and, with a third part that only
    predicts, key-value-predict attention (``cfg.hidden_multiple == 3``, eq. 11-12)."""

    def __init__(self, cfg: "KeyValueConfig", input_size: int):
        super().__init__()
        parts = cfg.hidden_multiple
        if cfg.hidden % parts:
            raise MemreadError(f"reader.hidden must be a multiple of {parts} for {cfg.name} "
                               f"({parts} equal parts of the LSTM output), got {cfg.hidden}")
        if cfg.window < 1:
            raise MemreadError(f"reader.window must be >= 1 for {cfg.name}, got {cfg.window}")
        d = cfg.hidden // parts
        self.cfg, self.d = cfg, d
        self.lstm = DocumentLSTM(input_size, cfg.hidden, cfg.init_range, cfg.forget_bias)
        self.attention = WindowAttention(d)  # W^Y, W^h, w
        self.W_r = nn.Linear(d, d, bias=False)
        self.W_x = nn.Linear(d, d, bias=False)
        for name, p in self.named_parameters():
            if not name.startswith("lstm."):
                nn.init.uniform_(p, -cfg.init_range, cfg.init_range)
        self.input_size, self.output_size = input_size, d

    def forward(self, x: Tensor, mask: Tensor | None = None, state: dict | None = None,
                return_attention: bool = False, reset: Tensor | None = None) -> ReaderOutput:
        """x (B, T, E), mask (B, T), reset (B, T): True where a document starts -> states h* (B, T, k/2)."""
        B, T, _ = x.shape
        mask, lstm_reset, reset = prepare(x, mask, reset)
        lstm_state, window, valid = unpack_state(state, B, self.cfg.window, self.cfg.hidden, x)
        h, lstm_state = self.lstm(x, mask, lstm_state, lstm_reset)  # (B, T, k)
        hist = extend(window, valid, h, mask, reset)  # (B, L+T, k)
        parts = hist.seq.split(self.d, dim=-1)  # (6) [k; v] or (11) [k; v; p]: (B, L+T, d) each
        keys, values, predict = parts[0], parts[1], parts[-1]  # kv: the value also predicts
        L = self.cfg.window
        r, alpha = self.attention(hist, query=keys[:, L:], keys=keys, values=values)  # (7)-(9)
        h_star = torch.tanh(self.W_r(r) + self.W_x(predict[:, L:]))  # (10) / (12)  (B, T, d)
        window, valid = carry(hist, mask)
        out = ReaderOutput(states=h_star, state=pack_state(lstm_state, window, valid))
        if return_attention:
            out.memory, out.memory_mask, out.attention = values, hist.valid, attention_matrix(alpha)
        return out


def build_key_value_reader(cfg: KeyValueConfig, input_size: int) -> KeyValueReader:
    return KeyValueReader(cfg, input_size)
