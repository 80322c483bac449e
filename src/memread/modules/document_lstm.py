"""A one-layer fused ``nn.LSTM`` that forgets everything at document starts.

Language models over documents (Wikipedia articles, stories) reset the recurrent state between
documents (Daniluk et al. 2017, section 4.1). A stream batch marks the first token of each document
with ``reset`` (B, T) bool; the state is set to zero *before* that token is read. Resets can fall
anywhere in a segment and in any row: the segment is cut only at the columns where some row resets,
so a segment without resets (nearly all of them) is still one fused call, and a segment with resets
in ``c`` distinct columns is ``c + 1`` fused calls.

Right padding (``mask`` False after a row's last real token) is packed, so the state carried out of
a padded row is the state at its last real token, exactly as :class:`memread.readers.rnn.RNNReader`.

Initialisation follows section 4.1: every weight uniform in ``(-init_range, init_range)``, the
forget-gate bias 1 (``bias_ih`` holds it, ``bias_hh`` is zero there, so the sum is ``forget_bias``).

:meth:`DocumentLSTM.reference` is the same reading one row and one token at a time, the LSTM's
equations written out: the readers' ``impl = "reference"``, to check the fused path against.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from memread.modules.lstm_step import lstm_step

LSTMState = tuple[Tensor, Tensor]  # h, c: (1, B, H) each, nn.LSTM's layout


class DocumentLSTM(nn.Module):
    def __init__(self, input_size: int, hidden: int, init_range: float = 0.1, forget_bias: float = 1.0):
        super().__init__()
        self.lstm = nn.LSTM(input_size, hidden, batch_first=True)
        self.hidden = hidden
        for p in self.lstm.parameters():
            nn.init.uniform_(p, -init_range, init_range)
        with torch.no_grad():  # gate order in nn.LSTM: input, forget, cell, output
            self.lstm.bias_ih_l0[hidden : 2 * hidden].fill_(forget_bias)
            self.lstm.bias_hh_l0[hidden : 2 * hidden].zero_()

    def initial_state(self, batch: int, like: Tensor) -> LSTMState:
        z = like.new_zeros(1, batch, self.hidden)
        return z, z

    def forward(self, x: Tensor, mask: Tensor | None = None, state: LSTMState | None = None,
                reset: Tensor | None = None) -> tuple[Tensor, LSTMState]:
        """x (B, T, E), mask (B, T) bool prefix, reset (B, T) bool -> outputs (B, T, H), (h, c)."""
        B, T = x.shape[:2]
        if state is None:
            state = self.initial_state(B, x)
        cuts = [0, T]
        if reset is not None:
            cuts = sorted({0, T, *torch.nonzero(reset.any(dim=0)).flatten().tolist()})
        outputs = []
        for a, b in zip(cuts[:-1], cuts[1:]):
            if reset is not None:
                keep = (~reset[:, a]).to(x.dtype).view(1, B, 1)  # rows whose document starts at a
                state = (state[0] * keep, state[1] * keep)
            out, state = self._run(x[:, a:b], None if mask is None else mask[:, a:b], state)
            outputs.append(out)
        return (outputs[0] if len(outputs) == 1 else torch.cat(outputs, dim=1)), state

    def _run(self, x: Tensor, mask: Tensor | None, state: LSTMState) -> tuple[Tensor, LSTMState]:
        if mask is None or bool(mask.all()):
            return self.lstm(x, state)
        lengths = mask.sum(dim=1)
        packed = pack_padded_sequence(x, lengths.clamp_min(1).cpu(), batch_first=True, enforce_sorted=False)
        out, (h, c) = self.lstm(packed, state)
        out, _ = pad_packed_sequence(out, batch_first=True, total_length=x.size(1))  # zeros at padding
        empty = (lengths == 0).view(1, -1, 1)  # rows with no real token here keep their state
        if bool(empty.any()):
            h, c = torch.where(empty, state[0], h), torch.where(empty, state[1], c)
        return out, (h, c)

    def reference(self, x: Tensor, mask: Tensor | None = None, state: LSTMState | None = None,
                  reset: Tensor | None = None) -> tuple[Tensor, LSTMState]:
        """What :meth:`forward` returns, one row and one token at a time (zeros at padding)::

            [i; f; g; o] = W_ih x_t + W_hh h_{t-1} + b_ih + b_hh      (h_{t-1} = c_{t-1} = 0 at a document start)
            c_t = sigmoid(f) * c_{t-1} + sigmoid(i) * tanh(g)
            h_t = sigmoid(o) * tanh(c_t)
        """
        B, T = x.shape[:2]
        H = self.hidden
        h0, c0 = self.initial_state(B, x) if state is None else state
        outputs, h_n, c_n = [], [], []
        for row in range(B):
            n = T if mask is None else int(mask[row].sum())
            h, c, out = h0[0, row], c0[0, row], []
            for t in range(n):
                if reset is not None and bool(reset[row, t]):  # a document starts: forget everything
                    h, c = torch.zeros_like(h), torch.zeros_like(c)
                h, c = lstm_step(self.lstm, 0, x[row, t], h, c)
                out.append(h)
            outputs.append(torch.stack(out + [x.new_zeros(H)] * (T - n)))
            h_n.append(h)
            c_n.append(c)
        return torch.stack(outputs), (torch.stack(h_n).unsqueeze(0), torch.stack(c_n).unsqueeze(0))
