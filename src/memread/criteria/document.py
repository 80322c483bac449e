"""Rating classification: cross-entropy over the rating classes; accuracy and the ratings' MSE.

As in Tang et al. (2015) and the NSE paper's Table 4, the MSE is between the *predicted class's* rating
(the argmax class, not an expectation) and the gold rating; the class values come from the pipeline
(:attr:`memread.data.pipelines.document.DocumentPipeline.class_values`: the ratings, or 0 and 1 for
polarity, whose MSE is then the error rate). Checkpoints are picked by accuracy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
from torch import Tensor

from memread.criteria.base import Loss
from memread.criteria.classification import CrossEntropy
from memread.heads.base import ModelOutput


@dataclass
class RatingConfig:
    name: Literal["rating"] = "rating"


def rating_sq_error(logits: Tensor, labels: Tensor, class_values: Tensor) -> Tensor:
    """Squared error (B,) between the argmax class's rating value and the gold class's (Table 4's MSE once
    summed and divided by the count)."""
    values = class_values.to(logits.device)
    return ((values[logits.argmax(-1)] - values[labels]) ** 2).detach()


class RatingCriterion:
    """:class:`memread.criteria.classification.CrossEntropy` (its loss, NLL, accuracy) plus the summed
    squared rating error ``sq_err``."""

    selection_metric = "accuracy"
    higher_is_better = True

    def __init__(self, class_values: list[float]):
        self.cross_entropy = CrossEntropy()
        self.class_values = torch.tensor(class_values, dtype=torch.float64)  # (C,)

    def __call__(self, out: ModelOutput, batch: dict) -> Loss:
        loss = self.cross_entropy(out, batch)
        sq_err = rating_sq_error(out.logits, batch["label"], self.class_values)
        loss.stats["sq_err"] = sq_err.sum()
        loss.units["sq_err"] = sq_err.to(loss.units["count"].dtype)
        return loss

    def summarize(self, sums: dict[str, float]) -> dict[str, float]:
        return {**self.cross_entropy.summarize(sums), "mse": sums["sq_err"] / max(sums["count"], 1.0)}


def build_rating(cfg: RatingConfig, pipeline, model) -> RatingCriterion:
    return RatingCriterion(pipeline.class_values)
