"""Criteria, apart from the models (fairseq's ``criterions``), and their registry (``[criterion] name``).

``CRITERIA[name]`` is a :class:`CriterionSpec`: its config class, the task shapes it serves and its
builder ``build(cfg, pipeline, model) -> Criterion``.
"""

from __future__ import annotations

from memread.criteria.base import Criterion, CriterionSpec, Loss
from memread.criteria.translation import TokenNLLConfig, build_token_nll
from memread.criteria.lm import LMNLLConfig, build_lm_nll
from memread.criteria.document import RatingConfig, build_rating
from memread.criteria.cloze import ClozeNLLConfig, build_cloze_nll
from memread.criteria.answer_selection import AnswerSelectionConfig, build_answer_selection
from memread.criteria.classification import CrossEntropyConfig, build_cross_entropy

CRITERIA: dict[str, CriterionSpec] = {
    "lm_nll": CriterionSpec(LMNLLConfig, ("lm",), build_lm_nll, "next-word cross-entropy; perplexity"),
    "rating": CriterionSpec(RatingConfig, ("document",), build_rating, "cross-entropy over rating classes; accuracy, MSE of the argmax rating"),
    "cloze_nll": CriterionSpec(ClozeNLLConfig, ("cloze",), build_cloze_nll,
                               "the papers' pointer-sum -log sum_{i in I(a)} s_i, or with normalize = \"candidates\" the "
                               "NLL over the candidates (+ embedding L2); accuracy, per bAbI task too"),
    "token_nll": CriterionSpec(TokenNLLConfig, ("translate",), build_token_nll,
                               "target-token cross-entropy under teacher forcing; perplexity, accuracy"),
    "cross_entropy": CriterionSpec(CrossEntropyConfig, ("classify", "pair"), build_cross_entropy, "cross-entropy over classes; accuracy"),
    "answer_selection": CriterionSpec(AnswerSelectionConfig, ("pair",), build_answer_selection,
                                      "sigmoid cross-entropy of one score per candidate; MAP and MRR over whole questions"),
    # >>> more task shapes register here
}

__all__ = ["CRITERIA", "Criterion", "CriterionSpec", "Loss"]
