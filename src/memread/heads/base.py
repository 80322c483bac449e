"""What a head is: everything an experiment puts around its reader (embeddings, output layers, the
second reader of a pair, a decoder), and the one output type every model returns.

A head's model is called by the loop as ``model(batch, state) -> ModelOutput``; it returns scores,
never a loss: the criterion (:mod:`memread.criteria`) turns the output and the batch into the loss and
the summed statistics.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from torch import Tensor


@dataclass
class ModelOutput:
    logits: Tensor | None = None  # what the criterion scores: (B, T, V), (B, C), (B,) ...
    state: Any = None  # recurrent state to carry into the next batch (language models)
    attention: Tensor | None = None  # optional trace for inspection and plots
    extra: dict[str, Any] = field(default_factory=dict)  # other outputs a criterion or a tool reads


@dataclass(frozen=True)
class HeadSpec:
    """A registered head: its ``[head]`` config class, the task shapes it serves, and
    ``build(head_cfg, reader_cfg, pipeline) -> nn.Module`` (the reader is built inside, after the seed)."""

    Config: type
    tasks: tuple[str, ...]
    build: Callable[..., Any]
    description: str
