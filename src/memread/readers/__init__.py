"""Readers, one file each, and the explicit registry that names them.

``READERS[name]`` is a :class:`ReaderSpec`: the reader's config dataclass (what ``[reader]`` in an
experiment file is checked against) and a builder ``build(cfg, input_size) -> reader``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from memread.readers.base import ReaderOutput, detach_state
from memread.readers.attention_lm import AttentionLMConfig, build_attention_lm_reader
from memread.readers.doc_lstm import DocLSTMConfig, build_doc_lstm_reader
from memread.readers.key_value import KeyValueConfig, build_key_value_reader
from memread.readers.key_value_predict import KeyValuePredictConfig, build_key_value_predict_reader
from memread.readers.lstmn import LSTMNConfig, build_lstmn_reader
from memread.readers.nse import NSEConfig, build_nse_reader
from memread.readers.ngram_rnn import NGramRNNConfig, build_ngram_rnn_reader
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
    # Daniluk et al. (2017): LSTM LMs over a window of their previous L outputs, and their baseline
    "doc_lstm": ReaderSpec(DocLSTMConfig, build_doc_lstm_reader, "LSTM LM baseline of Daniluk et al. 2017: fused nn.LSTM, their init, resets at document starts"),
    "attention": ReaderSpec(AttentionLMConfig, build_attention_lm_reader, "LSTM + attention over its previous L outputs (Daniluk et al. 2017, eq. 1-5)"),
    "kv": ReaderSpec(KeyValueConfig, build_key_value_reader, "key-value attention over the previous L outputs (Daniluk et al. 2017, eq. 6-10)"),
    "kvp": ReaderSpec(KeyValuePredictConfig, build_key_value_predict_reader, "key-value-predict attention over the previous L outputs (Daniluk et al. 2017, eq. 11-12)"),
    "ngram": ReaderSpec(NGramRNNConfig, build_ngram_rnn_reader, "N-gram RNN: next word from parts of the last N-1 outputs (Daniluk et al. 2017, eq. 13)"),
    "lstmn": ReaderSpec(LSTMNConfig, build_lstmn_reader, "LSTMN: LSTM with hidden and memory tapes and intra-attention (Cheng et al. 2016)"),
    "nse": ReaderSpec(NSEConfig, build_nse_reader, "NSE: read, compose and write over a memory initialised with the input (Munkhdalai & Yu 2016); shared > 0: MMA-NSE"),
}


def build_reader(cfg: Any, input_size: int):
    return READERS[cfg.name].build(cfg, input_size)


__all__ = ["READERS", "ReaderSpec", "ReaderOutput", "build_reader", "detach_state"]
