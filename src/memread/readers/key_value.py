"""Key-value attention over the previous L outputs: Daniluk et al. (2017), 2.2.

The LSTM output is split in two: a key, used to compute the attention, and a value, used both as
the attended content and to encode the next-word distribution::

    [k_t ; v_t] = h_t                                     (6)  h_t from one fused nn.LSTM call per segment
    M_t  = tanh(W^Y [k_{t-L} .. k_{t-1}] + (W^h k_t) 1^T)  (7)
    a_t  = softmax(w^T M_t)                               (8)
    r_t  = [v_{t-L} .. v_{t-1}] a_t^T                     (9)
    h*_t = tanh(W^r r_t + W^x v_t)                        (10)  ``states``; the LM's decoder gives (5)

``hidden`` is the LSTM size (Table 2c's k = 560 for w = 300); keys, values and h* have hidden / 2.
Windows across segments and document resets as in :mod:`memread.readers.attention_lm`; the
computation is :class:`memread.readers.attention_lm.WindowAttentionReader` with the output in two parts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from memread.readers.attention_lm import WindowAttentionReader
from memread.typed import PositiveFloat, PositiveInt


@dataclass
class KeyValueConfig:
    name: Literal["kv"] = "kv"
    hidden: PositiveInt = 300  # LSTM size, a multiple of 2 (key and value have hidden / 2 each)
    window: PositiveInt = 5  # L
    init_range: PositiveFloat = 0.1
    forget_bias: float = 1.0
    impl: Literal["fast", "reference"] = "fast"  # "reference": the equations token by token, to check against
    # the fast path's window attention: "auto" = the compiled C++ pass for CPU tensors where it builds, else
    # "function" (the hand-written autograd Function in tensor ops, what a GPU runs); "compiled" = C++ or an error
    backend: Literal["auto", "compiled", "function"] = "auto"

    @property
    def hidden_multiple(self) -> int:
        return 2


def build_key_value_reader(cfg: KeyValueConfig, input_size: int) -> WindowAttentionReader:
    return WindowAttentionReader(cfg, input_size)
