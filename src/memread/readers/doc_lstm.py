"""The LSTM language model baseline of Daniluk et al. (2017), Table 2c's "LSTM" row.

torch's fused ``nn.LSTM`` with the paper's initialisation (weights uniform in (-0.1, 0.1), forget-gate
bias 1) whose state is reset where a document starts, so it is the attention / kv / kvp / ngram
readers without their window: same LSTM, same initialisation, same resets. (The ``lstm`` reader has
torch's default initialisation and cannot reset mid-stream.)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from torch import Tensor, nn

from memread.modules.document_lstm import DocumentLSTM
from memread.modules.window import prepare
from memread.readers.base import ReaderOutput
from memread.typed import PositiveFloat, PositiveInt


@dataclass
class DocLSTMConfig:
    name: Literal["doc_lstm"] = "doc_lstm"
    hidden: PositiveInt = 300
    init_range: PositiveFloat = 0.1
    forget_bias: float = 1.0
    impl: Literal["fast", "reference"] = "fast"  # "reference": the equations token by token, to check against


class DocLSTMReader(nn.Module):
    def __init__(self, cfg: DocLSTMConfig, input_size: int):
        super().__init__()
        self.cfg = cfg
        self.lstm = DocumentLSTM(input_size, cfg.hidden, cfg.init_range, cfg.forget_bias)
        self.input_size, self.output_size = input_size, cfg.hidden

    def forward(self, x: Tensor, mask: Tensor | None = None, state: dict | None = None,
                return_attention: bool = False, reset: Tensor | None = None) -> ReaderOutput:
        """x (B, T, E), mask (B, T), reset (B, T): True where a document starts -> states (B, T, H)."""
        mask, lstm_reset, _ = prepare(x, mask, reset)
        lstm = self.lstm.reference if self.cfg.impl == "reference" else self.lstm  # token by token
        h, (h_n, c_n) = lstm(x, mask, None if state is None else (state["h"], state["c"]), lstm_reset)
        return ReaderOutput(states=h, memory=h, memory_mask=mask, state={"h": h_n, "c": c_n})


def build_doc_lstm_reader(cfg: DocLSTMConfig, input_size: int) -> DocLSTMReader:
    return DocLSTMReader(cfg, input_size)
