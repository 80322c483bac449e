"""Classification cross-entropy and accuracy (``[criterion] name = "cross_entropy"``): sentence classes
(SST) and pair classes (SNLI). The model's logits are (B, C), the batch's ``label`` (B,)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F

from memread.criteria.base import Loss
from memread.heads.base import ModelOutput


@dataclass
class CrossEntropyConfig:
    name: Literal["cross_entropy"] = "cross_entropy"


class CrossEntropy:
    """Mean cross-entropy over the batch; sums of the NLL, of the right predictions and of the examples."""

    selection_metric = "accuracy"
    higher_is_better = True

    def __call__(self, out: ModelOutput, batch: dict) -> Loss:
        logits, labels = out.logits, batch["label"]  # (B, C), (B,)
        nll = F.cross_entropy(logits, labels, reduction="none")  # (B,)
        hit = (logits.argmax(dim=-1) == labels).to(nll.dtype)
        units = {"nll": nll.detach(), "correct": hit, "count": torch.ones_like(hit)}  # the units: examples
        return Loss(nll.mean(), {k: v.sum() for k, v in units.items()}, weight=nll.numel(), units=units)

    def summarize(self, sums: dict[str, float]) -> dict[str, float]:
        return accuracy_and_nll(sums)


def accuracy_and_nll(sums: dict[str, float]) -> dict[str, float]:
    """The metrics every classifying criterion reports from its sums ``correct``, ``nll`` and ``count``."""
    n = max(sums["count"], 1.0)
    return {"accuracy": sums["correct"] / n, "nll": sums["nll"] / n, "count": sums["count"]}


def build_cross_entropy(cfg: CrossEntropyConfig, pipeline, model) -> CrossEntropy:
    return CrossEntropy()
