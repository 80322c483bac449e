"""The one output type every model returns, and what a task provides to the training loop.

A task owns its data (splits, vocabulary, batching), builds a model around any reader, and turns
summed statistics into metrics. The loop only ever calls::

    model(batch, state) -> ModelOutput
    task.batches(split, batch_size, epoch, seed) -> Sequence of batches
    task.summarize(stats) -> {"ppl": ...} / {"accuracy": ...}

so a new reader or task never touches the loop.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, Sequence

from torch import Tensor, nn


@dataclass
class ModelOutput:
    loss: Tensor  # scalar, the mean loss to minimise
    stats: dict[str, Tensor] = field(default_factory=dict)  # detached sums, added up over batches
    state: Any = None  # recurrent state to carry into the next batch (language models)
    logits: Tensor | None = None
    attention: Tensor | None = None  # optional trace for inspection and plots


class Task(Protocol):
    name: str
    Config: type
    selection_metric: str  # the validation metric that picks checkpoint_best
    higher_is_better: bool
    default_eval_batch_size: int

    def batches(self, split: str, batch_size: int, epoch: int = 0, seed: int = 0) -> Sequence[dict]: ...

    def build_model(self, reader_cfg: Any) -> nn.Module: ...

    def summarize(self, stats: dict[str, float]) -> dict[str, float]: ...

    def tokens_in(self, batch: dict) -> int: ...
