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
        hit = ((scores > 0) == (labels > 0.5)).to(nll.dtype)
        stats = {"nll": nll.sum().detach(), "correct": hit.sum().detach(),
                 "count": torch.tensor(float(len(labels)), device=nll.device)}
        units = None
        if "question" in batch:  # whole questions: rank each question's candidates; a question is a unit
            questions = batch["question"]
            qs = questions.unique()
            rows = (questions.unsqueeze(0) == qs.unsqueeze(1)).to(nll.dtype)  # (Q, B): question q's candidates
            ranks = [metrics.map_mrr([(scores[questions == q].tolist(), batch["label"][questions == q].tolist())])
                     for q in qs.tolist()]
            units = {"nll": rows @ nll.detach(), "correct": rows @ hit, "count": rows.sum(1),
                     **{key: torch.tensor([r[metric] * r["questions"] for r in ranks], dtype=nll.dtype, device=nll.device)
                        for key, metric in (("ap", "map"), ("rr", "mrr"))},
                     "questions": torch.tensor([float(r["questions"]) for r in ranks], dtype=nll.dtype, device=nll.device)}
            stats.update(ap=units["ap"].sum(), rr=units["rr"].sum(), questions=units["questions"].sum())
        return Loss(nll.mean(), stats, weight=nll.numel(), units=units)

    def summarize(self, sums: dict[str, float]) -> dict[str, float]:
        q = sums.get("questions", 0.0)
        return {**accuracy_and_nll(sums), "map": sums["ap"] / q if q else 0.0, "mrr": sums["rr"] / q if q else 0.0,
                "questions": q}


def build_answer_selection(cfg: AnswerSelectionConfig, pipeline, model) -> AnswerSelection:
    return AnswerSelection()
