"""Baseline readers: torch's fused LSTM and tanh RNN behind the common reader interface.

Their only memory is the fixed-size recurrent state; ``memory`` is the sequence of their output
states, so attention heads can still look back over them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from memread.readers.base import ReaderOutput
from memread.typed import DropoutRate, PositiveInt


@dataclass
class RNNReaderConfig:
    name: Literal["lstm", "rnn", "gru"] = "lstm"
    hidden: PositiveInt = 300
    layers: PositiveInt = 1
    dropout: DropoutRate = 0.0  # between stacked layers
    bidirectional: bool = False


class RNNReader(nn.Module):
    """``nn.LSTM`` / ``nn.GRU`` / ``nn.RNN`` (tanh) reader. Right-padded batches are packed, so the
    carried state of a padded row is the state at its last real token."""

    def __init__(self, cfg: RNNReaderConfig, input_size: int):
        super().__init__()
        cls = {"lstm": nn.LSTM, "gru": nn.GRU, "rnn": nn.RNN}[cfg.name]
        self.rnn = cls(
            input_size,
            cfg.hidden,
            num_layers=cfg.layers,
            dropout=cfg.dropout if cfg.layers > 1 else 0.0,
            bidirectional=cfg.bidirectional,
            batch_first=True,
        )
        self.input_size = input_size
        self.output_size = cfg.hidden * (2 if cfg.bidirectional else 1)

    def forward(self, x: Tensor, mask: Tensor | None = None, state=None, return_attention: bool = False) -> ReaderOutput:
        """x (B, T, E), mask (B, T) -> states (B, T, H)."""
        if mask is not None and not bool(mask.all()):
            lengths = mask.sum(dim=1).clamp_min(1).cpu()
            packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
            out, new_state = self.rnn(packed, state)
            states, _ = pad_packed_sequence(out, batch_first=True, total_length=x.size(1))
        else:
            states, new_state = self.rnn(x, state)  # (B, T, H)
        return ReaderOutput(states=states, memory=states, memory_mask=mask, state=new_state)


def build_rnn_reader(cfg: RNNReaderConfig, input_size: int) -> RNNReader:
    return RNNReader(cfg, input_size)
