"""What a criterion is (fairseq's ``criterions``): the loss of a model's output on a batch, apart from
the model.

``criterion(out, batch) -> Loss``: the scalar loss to minimise and detached statistics summed over the
batch (sums, so that they add up over batches and processes); ``summarize(sums) -> metrics`` turns the
sums of a whole split into metrics, ``selection_metric`` names the one that picks checkpoints.

``Loss.units`` splits the batch's statistics by the unit a paired significance test resamples (an example,
a question with its candidates, a row of a language-model segment): ``units[key]`` is (U,), one value per
unit, and sums to ``stats[key]``. Any subset of a split's units, summed and summarized, gives that
subset's metrics, so ``memread compare`` tests any criterion's metrics (:mod:`memread.tools.compare`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

from torch import Tensor

from memread.heads.base import ModelOutput


@dataclass
class Loss:
    value: Tensor  # scalar, what the optimizer minimises
    stats: dict[str, Tensor] = field(default_factory=dict)  # detached sums over the batch
    # what ``value`` is a mean over (examples, sequences or tokens), so that the losses of a batch's shards on
    # several processes combine into the loss of the whole batch; None: the shards are always equal
    weight: Tensor | float | None = None
    # the statistics per unit (U,) each, summing to ``stats`` (see the module docstring); None: not split
    units: dict[str, Tensor] | None = None


class Criterion(Protocol):
    selection_metric: str
    higher_is_better: bool

    def __call__(self, out: ModelOutput, batch: dict) -> Loss: ...

    def summarize(self, sums: dict[str, float]) -> dict[str, float]: ...


@dataclass(frozen=True)
class CriterionSpec:
    """A registered criterion: its ``[criterion]`` config class, the task shapes it serves, and
    ``build(cfg, pipeline, model) -> Criterion`` (``model`` for the few that regularise its parameters)."""

    Config: type
    tasks: tuple[str, ...]
    build: Callable[..., Criterion]
    description: str
