"""Readers, one file each, and the explicit registry that names them.

``READERS[name]`` is a :class:`ReaderSpec`: the reader's config dataclass (what ``[reader]`` in an
experiment file is checked against) and a builder ``build(cfg, input_size) -> reader``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from memread.readers.base import ReaderOutput, detach_state
from memread.readers.lstmn import LSTMNConfig, build_lstmn_reader
from memread.readers.rnn import RNNReaderConfig, build_rnn_reader


@dataclass(frozen=True)
class ReaderSpec:
    Config: type
    build: Callable[[Any, int], Any]
    description: str


READERS: dict[str, ReaderSpec] = {
    "lstm": ReaderSpec(RNNReaderConfig, build_rnn_reader, "LSTM (torch's fused nn.LSTM)"),
    "gru": ReaderSpec(RNNReaderConfig, build_rnn_reader, "GRU (torch's fused nn.GRU)"),
    "rnn": ReaderSpec(RNNReaderConfig, build_rnn_reader, "tanh RNN (torch's fused nn.RNN)"),
    "lstmn": ReaderSpec(LSTMNConfig, build_lstmn_reader, "LSTMN: LSTM with hidden and memory tapes and intra-attention (Cheng et al. 2016)"),
}


def build_reader(cfg: Any, input_size: int):
    return READERS[cfg.name].build(cfg, input_size)


__all__ = ["READERS", "ReaderSpec", "ReaderOutput", "build_reader", "detach_state"]
