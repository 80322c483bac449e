"""Key-value-predict attention over the previous L outputs: Daniluk et al. (2017), 2.3.

The LSTM output is split in three equal parts: a key for the attention, a value for the memory, and
a predict part used only to encode the next-word distribution::

    [k_t ; v_t ; p_t] = h_t                               (11)  h_t from one fused nn.LSTM call per segment
    M_t  = tanh(W^Y [k_{t-L} .. k_{t-1}] + (W^h k_t) 1^T)  (7)
    a_t  = softmax(w^T M_t)                               (8)
    r_t  = [v_{t-L} .. v_{t-1}] a_t^T                     (9)
    h*_t = tanh(W^r r_t + W^x p_t)                        (12)  ``states``; the LM's decoder gives (5)

``hidden`` is the LSTM size, a multiple of 3 (300 gives parts of 100, as in the paper). Windows across
segments and document resets as in :mod:`memread.readers.attention_lm`; the computation is
:class:`memread.readers.attention_lm.WindowAttentionReader` with the output in three parts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from memread.readers.attention_lm import WindowAttentionReader
from memread.typed import PositiveFloat, PositiveInt


@dataclass
class KeyValuePredictConfig:
    name: Literal["kvp"] = "kvp"
    hidden: PositiveInt = 300  # LSTM size, a multiple of 3 (key, value and predict have hidden / 3 each)
    window: PositiveInt = 5  # L
    init_range: PositiveFloat = 0.1
    forget_bias: float = 1.0
    impl: Literal["fast", "reference"] = "fast"  # "reference": the equations token by token, to check against
    # the fast path's window attention: "auto" = the compiled C++ pass for CPU tensors where it builds, else
    # "function" (the hand-written autograd Function in tensor ops, what a GPU runs); "compiled" = C++ or an error
    backend: Literal["auto", "compiled", "function"] = "auto"

    @property
    def hidden_multiple(self) -> int:
        return 3


def build_key_value_predict_reader(cfg: KeyValuePredictConfig, input_size: int) -> WindowAttentionReader:
    return WindowAttentionReader(cfg, input_size)
