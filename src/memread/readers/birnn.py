"""A bidirectional RNN encoder that is exact under right padding without packing.

The encoders of the AS Reader and the IAA reader are bidirectional GRUs over whole documents
(~450 tokens). ``RNNReader`` packs padded batches; on CPU the backward pass of a packed torch RNN
slices its input once per time step and each slice's gradient is a full-size zero tensor, so it
costs O(T^2) (about 15x the unpacked cost at T = 450, measured). This encoder runs each direction as
an unpacked torch RNN instead:

- forward direction: over the padded batch as it is (right padding comes after every real token,
  so the state at a real position has only read real tokens);
- backward direction: over each row reversed *within its length* (padding stays at the end), and
  the output is reversed back the same way.

The states at real positions equal those of the packed bidirectional RNN with the same weights;
states at padding are finite and meaningless (mask them). It reads whole sequences and carries no
state between calls (``state`` must be None), so it serves as an encoder, not a streaming reader.
The config is ``RNNReaderConfig`` (name, hidden, layers, dropout between layers).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from memread.readers.base import ReaderOutput
from memread.readers.rnn import RNNReaderConfig


def reversal_index(mask: Tensor) -> Tensor:
    """(B, T) mask -> (B, T) index that reverses each row's real prefix and keeps padding in place."""
    B, T = mask.shape
    lengths = mask.sum(1, keepdim=True)  # (B, 1)
    t = torch.arange(T, device=mask.device).unsqueeze(0)  # (1, T)
    return torch.where(t < lengths, lengths - 1 - t, t)  # (B, T); an involution


class BiRNNReader(nn.Module):
    def __init__(self, cfg: RNNReaderConfig, input_size: int):
        super().__init__()
        cls = {"lstm": nn.LSTM, "gru": nn.GRU, "rnn": nn.RNN}[cfg.name]
        sizes = [input_size] + [2 * cfg.hidden] * (cfg.layers - 1)
        self.forward_rnns = nn.ModuleList(cls(size, cfg.hidden, batch_first=True) for size in sizes)
        self.backward_rnns = nn.ModuleList(cls(size, cfg.hidden, batch_first=True) for size in sizes)
        self.drop = nn.Dropout(cfg.dropout if cfg.layers > 1 else 0.0)
        self.input_size = input_size
        self.output_size = 2 * cfg.hidden

    def forward(self, x: Tensor, mask: Tensor | None = None, state=None, return_attention: bool = False) -> ReaderOutput:
        """x (B, T, E), mask (B, T) -> states (B, T, 2H): [forward states, backward states]."""
        if state is not None:
            raise ValueError("BiRNNReader reads whole sequences and carries no state")
        if mask is None:
            mask = torch.ones(x.shape[:2], dtype=torch.bool, device=x.device)
        idx = reversal_index(mask)  # (B, T)
        h = x
        for i, (forward_rnn, backward_rnn) in enumerate(zip(self.forward_rnns, self.backward_rnns)):
            if i:
                h = self.drop(h)
            forward = forward_rnn(h)[0]  # (B, T, H)
            h_reversed = h.gather(1, idx.unsqueeze(-1).expand_as(h))
            backward = backward_rnn(h_reversed)[0]  # (B, T, H), reversed order
            backward = backward.gather(1, idx.unsqueeze(-1).expand_as(backward))
            h = torch.cat([forward, backward], dim=-1)  # (B, T, 2H)
        return ReaderOutput(states=h, memory=h, memory_mask=mask, state=None)
