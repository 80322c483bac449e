"""Readers, one file each, and the explicit registry that names them.

``READERS[name]`` is a :class:`ReaderSpec`: the reader's config dataclass (what ``[reader]`` in an
experiment file is checked against), a builder ``build(cfg, input_size) -> reader``, and what the
reader can do beyond the common interface (:mod:`memread.readers.base`), declared rather than found
by reflection: tasks ask ``spec.resets`` or :func:`readers_with` ``("resets")``. A reader with a
``Config.impl`` field (``"fast"`` / ``"reference"``) also holds its equation-by-equation reference.
Every registered reader is checked by ``tests/test_reader_contract.py``.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Callable

from memread.readers.base import ReaderOutput, detach_state
from memread.readers.attention_lm import AttentionLMConfig, build_attention_lm_reader
from memread.readers.depth_gated import DGLSTMConfig, build_dglstm_reader
from memread.readers.doc_lstm import DocLSTMConfig, build_doc_lstm_reader
from memread.readers.gated_feedback import GFLSTMConfig, build_gflstm_reader
from memread.readers.hornn import HORNNConfig, build_hornn_reader
from memread.readers.key_value import KeyValueConfig, build_key_value_reader
from memread.readers.key_value_predict import KeyValuePredictConfig, build_key_value_predict_reader
from memread.readers.lstmn import LSTMNConfig, build_lstmn_reader
from memread.readers.nse import NSEConfig, build_nse_reader
from memread.readers.recurrent_memory import RecurrentMemoryConfig, build_recurrent_memory_reader
from memread.readers.ngram_rnn import NGramRNNConfig, build_ngram_rnn_reader
from memread.readers.rnn import RNNReaderConfig, build_rnn_reader


@dataclass(frozen=True)
class ReaderSpec:
    Config: type
    build: Callable[[Any, int], Any]
    description: str
    # capabilities (the contract test checks each one that is declared)
    resets: bool = False  # forward(..., reset=) takes (B, T) bool document starts and forgets the past there
    shared_memory: bool = False  # forward(..., shared=[(memory (B, S, H), mask (B, S))]) when cfg.shared > 0
    memory_tape: bool = False  # forward(..., return_cells=True) puts its memory tape (B, S, H) in out.state["cells"]
    carries_state: bool = False  # out.state passed back as state= continues the text: two segments = one read


CAPABILITIES = tuple(f.name for f in fields(ReaderSpec) if f.type in (bool, "bool"))


READERS: dict[str, ReaderSpec] = {
    # carries_state when unidirectional (the default): a bidirectional state cannot continue a text
    "lstm": ReaderSpec(RNNReaderConfig, build_rnn_reader, "LSTM (torch's fused nn.LSTM)", carries_state=True),
    "gru": ReaderSpec(RNNReaderConfig, build_rnn_reader, "GRU (torch's fused nn.GRU)", carries_state=True),
    "rnn": ReaderSpec(RNNReaderConfig, build_rnn_reader, "tanh RNN (torch's fused nn.RNN)", carries_state=True),
    # the deep LSTM baselines of the LSTMN paper's Table 1 (sLSTM is "lstm" with layers = 3)
    "gflstm": ReaderSpec(GFLSTMConfig, build_gflstm_reader, "gated-feedback LSTM: every layer reads all layers' previous states through global reset gates (Chung et al. 2015)",
                carries_state=True),
    "dglstm": ReaderSpec(DGLSTMConfig, build_dglstm_reader, "depth-gated LSTM: a depth gate links each layer's memory cell to the cell above (Yao et al. 2015)",
                carries_state=True),
    # Daniluk et al. (2017): LSTM LMs over a window of their previous L outputs, and their baseline
    "doc_lstm": ReaderSpec(DocLSTMConfig, build_doc_lstm_reader, "LSTM LM baseline of Daniluk et al. 2017: fused nn.LSTM, their init, resets at document starts",
                resets=True, carries_state=True),
    "attention": ReaderSpec(AttentionLMConfig, build_attention_lm_reader, "LSTM + attention over its previous L outputs (Daniluk et al. 2017, eq. 1-5)",
                resets=True, carries_state=True),
    "kv": ReaderSpec(KeyValueConfig, build_key_value_reader, "key-value attention over the previous L outputs (Daniluk et al. 2017, eq. 6-10)",
                resets=True, carries_state=True),
    "kvp": ReaderSpec(KeyValuePredictConfig, build_key_value_predict_reader, "key-value-predict attention over the previous L outputs (Daniluk et al. 2017, eq. 11-12)",
                resets=True, carries_state=True),
    "ngram": ReaderSpec(NGramRNNConfig, build_ngram_rnn_reader, "N-gram RNN: next word from parts of the last N-1 outputs (Daniluk et al. 2017, eq. 13)",
                resets=True, carries_state=True),
    # the baselines Daniluk et al. (2017) compare against (Figure 2a/2c/2d)
    "rm": ReaderSpec(RecurrentMemoryConfig, build_recurrent_memory_reader,
                "RM(+tM-g): LSTM + Memory Block over the last n input words, temporal matrix, gating (Tran et al. 2016)",
                resets=True, carries_state=True),
    "hornn": ReaderSpec(HORNNConfig, build_hornn_reader,
                "higher order RNN, FOFE or gated pooling of the last N states (Soltani & Jiang 2016)",
                resets=True, carries_state=True),
    "lstmn": ReaderSpec(LSTMNConfig, build_lstmn_reader, "LSTMN: LSTM with hidden and memory tapes and intra-attention (Cheng et al. 2016)",
                memory_tape=True, carries_state=True),
    "nse": ReaderSpec(NSEConfig, build_nse_reader, "NSE: read, compose and write over a memory initialised with the input (Munkhdalai & Yu 2016); shared > 0: MMA-NSE",
                shared_memory=True),  # reads whole sequences: a state passed back is refused
}


def build_reader(cfg: Any, input_size: int):
    return READERS[cfg.name].build(cfg, input_size)


def readers_with(capability: str) -> list[str]:
    """Registered readers that declare ``capability`` (one of :data:`CAPABILITIES`), in registry order."""
    if capability not in CAPABILITIES:
        raise ValueError(f"unknown reader capability {capability!r}; known: {', '.join(CAPABILITIES)}")
    return [name for name, spec in READERS.items() if getattr(spec, capability)]


__all__ = ["CAPABILITIES", "READERS", "ReaderSpec", "ReaderOutput", "build_reader", "detach_state", "readers_with"]
