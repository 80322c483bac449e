"""N-gram RNN: the next word from parts of the last N-1 outputs, Daniluk et al. (2017), 2.4.

No attention: the LSTM output is split into N-1 parts, and part i of the output i-1 steps back
contributes to the next-word prediction, so h^1 predicts the next word, h^2 the one after it, ...::

    [h^1_t ; .. ; h^{N-1}_t] = h_t                        h_t from one fused nn.LSTM call per segment
    h*_t = tanh(W^N [h^1_t ; h^2_{t-1} ; .. ; h^{N-1}_{t-N+2}])     (13)  ``states``; the decoder gives (5)

``hidden`` is the LSTM size, a multiple of N-1; W^N is (k/(N-1)) x k and h* has k/(N-1). The outputs
of the last N-2 steps are carried across segments; parts from before the start of the document
(or of the stream) are zero. ``impl = "reference"``: (13) one token at a time
(:func:`reference_h_star`, :meth:`DocumentLSTM.reference`), to check the fast path against.

Note on Table 2b: its sizes (k = 564 / 786 / 968 / 1120 for N = 2..5 at 23.9M parameters) are
those of this model with one more part, i.e. ``n = N + 1`` here (see ``memread.params`` and
``tests/test_short_attention.py``); 968 cannot be split into 3 equal parts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

import torch
from torch import Tensor, nn

from memread.errors import MemreadError
from memread.modules.document_lstm import DocumentLSTM
from memread.modules.window import History, carry, extend, lagged, pack_state, prepare, unpack_state
from memread.readers.base import ReaderOutput
from memread.typed import PositiveFloat, PositiveInt, Range


@dataclass
class NGramRNNConfig:
    name: Literal["ngram"] = "ngram"
    hidden: PositiveInt = 300  # LSTM size, a multiple of n - 1
    n: Annotated[int, Range(2)] = 4  # N: the prediction reads the outputs of the last N-1 steps (this one included)
    init_range: PositiveFloat = 0.1
    forget_bias: float = 1.0
    impl: Literal["fast", "reference"] = "fast"  # "reference": the equations token by token, to check against

    @property
    def hidden_multiple(self) -> int:
        return max(1, self.n - 1)


class NGramRNNReader(nn.Module):
    def __init__(self, cfg: NGramRNNConfig, input_size: int):
        super().__init__()
        if cfg.n < 2:
            raise MemreadError(f"reader.n must be >= 2 for ngram, got {cfg.n}")
        if cfg.hidden % (cfg.n - 1):
            raise MemreadError(f"reader.hidden must be a multiple of n - 1 = {cfg.n - 1} for ngram, got {cfg.hidden}")
        d = cfg.hidden // (cfg.n - 1)
        self.cfg, self.d = cfg, d
        self.window = cfg.n - 2  # earlier steps whose outputs are read
        self.lstm = DocumentLSTM(input_size, cfg.hidden, cfg.init_range, cfg.forget_bias)
        self.W_N = nn.Linear(cfg.hidden, d, bias=False)
        nn.init.uniform_(self.W_N.weight, -cfg.init_range, cfg.init_range)
        self.input_size, self.output_size = input_size, d

    def forward(self, x: Tensor, mask: Tensor | None = None, state: dict | None = None,
                return_attention: bool = False, reset: Tensor | None = None) -> ReaderOutput:
        """x (B, T, E), mask (B, T), reset (B, T): True where a document starts -> states h* (B, T, k/(N-1))."""
        B, T, _ = x.shape
        mask, lstm_reset, reset = prepare(x, mask, reset)
        lstm_state, window, valid = unpack_state(state, B, self.window, self.cfg.hidden, x)
        reference = self.cfg.impl == "reference"
        lstm = self.lstm.reference if reference else self.lstm
        h, lstm_state = lstm(x, mask, lstm_state, lstm_reset)  # (B, T, k)
        hist = extend(window, valid, h, mask, reset)  # (B, N-2+T, k)
        if reference:
            h_star = reference_h_star(self.W_N.weight, hist, self.d)
        else:
            parts = hist.seq.split(self.d, dim=-1)  # [h^1 .. h^{N-1}], (B, N-2+T, d) each
            # part i of step t-(i-1): zero where that step lies before the document (or stream) start
            concat = torch.cat([lagged(hist, part, lag) for lag, part in enumerate(parts)], dim=-1)  # (B, T, k)
            h_star = torch.tanh(self.W_N(concat))  # (13)  (B, T, d)
        window, valid = carry(hist, mask)
        return ReaderOutput(states=h_star, state=pack_state(lstm_state, window, valid))


def reference_h_star(W_N: Tensor, hist: History, d: int) -> Tensor:
    """Equation (13) one row and one position at a time (``impl = "reference"``; zeros at padding)::

        h*_t = tanh(W^N [h^1_t ; h^2_{t-1} ; .. ; h^{N-1}_{t-N+2}])

    with a part zero where its step is not a real output of t's document. Step t - i of position t
    is slot L + t - i of ``hist.seq`` (L = N - 2)."""
    B, T = hist.query_doc.shape
    L, n_parts = hist.window, hist.seq.size(-1) // d
    out = []
    for b in range(B):
        for t in range(T):
            if not hist.valid[b, L + t]:  # padding
                out.append(W_N.new_zeros(d))
                continue
            cols = []
            for i in range(n_parts):  # part i + 1 of step t - i
                slot = L + t - i
                in_doc = bool(hist.valid[b, slot]) and bool(hist.doc[b, slot] == hist.query_doc[b, t])
                cols.append(hist.seq[b, slot, i * d : (i + 1) * d] if in_doc else hist.seq.new_zeros(d))
            out.append(torch.tanh(W_N @ torch.cat(cols)))  # (13)
    return torch.stack(out).view(B, T, d)


def build_ngram_rnn_reader(cfg: NGramRNNConfig, input_size: int) -> NGramRNNReader:
    return NGramRNNReader(cfg, input_size)
