"""Answer sentence selection (``[criterion] name = "answer_selection"``, WikiQA): the sigmoid
cross-entropy of one relevance score per candidate (Munkhdalai & Yu 2016, eq. 16), and, on batches of
whole questions (evaluation batches carry ``question``, each candidate's question index), MAP and MRR
over the questions the usual filtered protocol keeps (:mod:`memread.metrics`). ``accuracy`` is the
share of candidates classified right at p = 0.5; the checkpoint is chosen by MAP."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F

from memread import metrics
from memread.criteria.base import Loss
from memread.criteria.classification import accuracy_and_nll
from memread.heads.base import ModelOutput


@dataclass
class AnswerSelectionConfig:
    name: Literal["answer_selection"] = "answer_selection"


class AnswerSelection:
    selection_metric = "map"
    higher_is_better = True

    def __call__(self, out: ModelOutput, batch: dict) -> Loss:
        scores = out.logits  # (B,) one logit per candidate
        labels = batch["label"].to(scores.dtype)  # (B,) 1 = a correct answer
        nll = F.binary_cross_entropy_with_logits(scores, labels, reduction="none")  # (B,)
        stats = {"nll": nll.sum().detach(), "correct": ((scores > 0) == (labels > 0.5)).sum().detach(),
                 "count": torch.tensor(float(len(labels)), device=nll.device)}
        if "question" in batch:  # whole questions: rank each question's candidates
            questions = batch["question"]
            ranked = metrics.map_mrr((scores[questions == q].tolist(), batch["label"][questions == q].tolist())
                                     for q in questions.unique().tolist())
            n = ranked["questions"]
            stats.update(ap=torch.tensor(ranked["map"] * n, device=nll.device), rr=torch.tensor(ranked["mrr"] * n, device=nll.device),
                         questions=torch.tensor(float(n), device=nll.device))
        return Loss(nll.mean(), stats, weight=nll.numel())

    def summarize(self, sums: dict[str, float]) -> dict[str, float]:
        q = sums.get("questions", 0.0)
        return {**accuracy_and_nll(sums), "map": sums["ap"] / q if q else 0.0, "mrr": sums["rr"] / q if q else 0.0,
                "questions": q}


def build_answer_selection(cfg: AnswerSelectionConfig, pipeline, model) -> AnswerSelection:
    return AnswerSelection()
