"""Cloze criteria: the loss of a model's answer distribution over each question's candidates.

``cloze_nll``: the negative log-likelihood of the answer, averaged over the questions, plus
``emb_l2`` times the squared norm of the embeddings (Sordoni et al.'s penalty, 1e-4 there). Every
cloze criterion reports the same statistics (:func:`answer_stats`) and metrics (:func:`summarize`):
accuracy, the answer's mean NLL, and on bAbI the accuracy of each task (``accuracy_qa1`` ...).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
from torch import Tensor, nn

from memread.criteria.base import Loss
from memread.criteria.classification import accuracy_and_nll
from memread.errors import MemreadError
from memread.heads.base import ModelOutput
from memread.modules.precision import to_float32
from memread.typed import NonNegFloat


@dataclass
class ClozeNLLConfig:
    name: Literal["cloze_nll"] = "cloze_nll"
    emb_l2: NonNegFloat = 0.0  # embedding L2 penalty added to the loss (Sordoni et al.: 1e-4)


def answer_stats(log_p: Tensor, batch: dict) -> tuple[Tensor, dict[str, Tensor]]:
    """The answer's NLL per question (B,) and the batch's summed statistics: nll, correct, count and,
    for batches with groups (bAbI tasks), correct_g{i} / count_g{i}."""
    answer = batch["answer"]  # (B,) index into cands
    log_p = to_float32(log_p)  # under autocast they may be bfloat16 / float16: the loss and its sums in float32
    nll = -log_p.gather(1, answer.unsqueeze(1)).squeeze(1)  # (B,)
    hit = log_p.argmax(dim=-1) == answer  # (B,)
    stats = {"nll": nll.sum().detach(), "correct": hit.sum().detach(), "count": torch.tensor(float(len(nll)), device=nll.device)}
    if "group" in batch:  # accuracy per bAbI task
        for g in batch["group"].unique().tolist():
            in_g = batch["group"] == g
            stats[f"correct_g{g}"] = hit[in_g].sum().detach()
            stats[f"count_g{g}"] = in_g.sum().detach().float()
    return nll, stats


def summarize(sums: dict[str, float], groups: list[str]) -> dict[str, float]:
    """Accuracy and mean NLL of a split; ``accuracy_{group}`` for each group with questions."""
    out = accuracy_and_nll(sums)
    for i, g in enumerate(groups):
        if sums.get(f"count_g{i}"):
            out[f"accuracy_{g}"] = sums[f"correct_g{i}"] / sums[f"count_g{i}"]
    return out


class ClozeNLL:
    selection_metric = "accuracy"
    higher_is_better = True

    def __init__(self, cfg: ClozeNLLConfig, groups: list[str], embedding: nn.Embedding | None = None):
        self.emb_l2 = cfg.emb_l2
        self.groups = list(groups)
        self.embedding = embedding  # the model's word embeddings, for the L2 penalty

    def __call__(self, out: ModelOutput, batch: dict) -> Loss:
        nll, stats = answer_stats(out.logits, batch)
        loss = nll.mean()
        if self.emb_l2:
            loss = loss + self.emb_l2 * self.embedding.weight.pow(2).sum()
        return Loss(loss, stats, weight=nll.numel())  # the penalty adds up to itself over the shards

    def summarize(self, sums: dict[str, float]) -> dict[str, float]:
        return summarize(sums, self.groups)


def build_cloze_nll(cfg: ClozeNLLConfig, pipeline, model: nn.Module) -> ClozeNLL:
    embedding = getattr(model, "embedding", None)
    if cfg.emb_l2 and not isinstance(embedding, nn.Embedding):
        raise MemreadError(f"criterion.emb_l2 needs a model with word embeddings (model.embedding); "
                           f"{type(model).__name__} has none")
    return ClozeNLL(cfg, pipeline.groups, embedding)
