"""Ranking metrics for answer sentence selection (WikiQA): MAP and MRR over questions.

Candidates are ranked by score, highest first; equal scores keep the original candidate order (the
earlier candidate ranks higher). That tie rule is deterministic but not neutral: a model that gives
every candidate the same score is scored on the file order. ``trec_eval`` breaks ties differently
(by document id, descending), so exact ties can make the two differ slightly.

The usual "filtered" protocol (Yang et al. 2015; the corpus's ``WikiQA-{dev,test}-filtered.ref``)
scores only questions that have at least one correct *and* at least one incorrect candidate: 122 of
296 dev and 237 of 633 test questions. (Questions whose candidates are all correct would get AP and
RR of 1 whatever the model does; the filtered refs leave them out, so :func:`map_mrr` does by default.)
"""

from __future__ import annotations

from typing import Iterable, Sequence


def _ranked_labels(scores: Sequence[float], labels: Sequence[int]) -> list[int]:
    if len(scores) != len(labels):
        raise ValueError(f"{len(scores)} scores but {len(labels)} labels")
    order = sorted(range(len(scores)), key=lambda i: -float(scores[i]))  # stable: ties keep candidate order
    return [int(labels[i]) for i in order]


def average_precision(scores: Sequence[float], labels: Sequence[int]) -> float:
    """Mean over the correct candidates of (correct ones ranked at or above it) / (its rank); 0.0 if none."""
    hits, total = 0, 0.0
    for rank, label in enumerate(_ranked_labels(scores, labels), 1):
        if label:
            hits += 1
            total += hits / rank
    return total / hits if hits else 0.0


def reciprocal_rank(scores: Sequence[float], labels: Sequence[int]) -> float:
    """1 / (rank of the best-ranked correct candidate); 0.0 if there is none."""
    for rank, label in enumerate(_ranked_labels(scores, labels), 1):
        if label:
            return 1.0 / rank
    return 0.0


def counts_for_ranking(labels: Sequence[int], require_incorrect: bool = True) -> bool:
    """Whether a question counts: at least one correct candidate, and (by default) one incorrect."""
    correct = sum(1 for label in labels if label)
    return correct > 0 and (not require_incorrect or correct < len(labels))


def map_mrr(questions: Iterable[tuple[Sequence[float], Sequence[int]]], require_incorrect: bool = True) -> dict:
    """``{"map": ..., "mrr": ..., "questions": n}`` over the questions :func:`counts_for_ranking` keeps.

    ``questions`` yields ``(scores, labels)`` per question. ``require_incorrect=True`` (the default)
    matches the official filtered refs exactly; ``False`` also keeps questions with only correct
    candidates. MAP and MRR are 0.0 when no question counts.
    """
    n, ap, rr = 0, 0.0, 0.0
    for scores, labels in questions:
        if not counts_for_ranking(labels, require_incorrect):
            continue
        n += 1
        ap += average_precision(scores, labels)
        rr += reciprocal_rank(scores, labels)
    return {"map": ap / n if n else 0.0, "mrr": rr / n if n else 0.0, "questions": n}
