"""Pointer-sum (Kadlec et al. 2016; Sordoni et al. 2016, equation (2)).

The probability of a candidate answer is the document attention summed over every position where
the candidate occurs::

    P(a | Q, D) = sum_{i in I(a, D)} d_i

Occurrence is word identity, given as per-example word ids (``doc_words``, ``cand_words``): two
positions hold the same word exactly when their ids are equal, whatever the vocabulary does with
rare words (two different unknown names must not share their attention).

Two normalisations (the cloze criterion's ``normalize``, :mod:`memread.criteria.cloze`):

- :func:`candidate_log_probs`: the distribution renormalised over the candidates,
  ``P(a) = sum_{i in I(a)} d_i / sum_c sum_{i in I(c)} d_i`` -- what every cloze head returns as its
  answer distribution (its logits), and what ``normalize = "candidates"`` trains on;
- :func:`answer_log_prob`: the papers' ``log P(a | Q, D) = log sum_{i in I(a, D)} d_i`` with ``d`` the
  softmax over all document positions, not renormalised (Kadlec et al. 2016; Sordoni et al. 2016,
  eq. (2) and section 5: it is the Stanford reader that "normalizes the output probabilities only over
  the candidate answers"); ``normalize = "document"`` (the default) trains on it.

The two differ by ``log sum_c sum_{i in I(c)} d_i``, the log of the attention mass on the candidates'
positions: they are equal only when the candidates' positions hold all of it (not even on bAbI, whose
candidates are the story's words but not its punctuation), and the argmax over the candidates is the
same under both.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from memread.modules.precision import float32_under_autocast

# the floor of a candidate that never occurs in the document (its probability is exactly 0)
MIN_PROBABILITY = 1e-12


def occurrences(doc_words: Tensor, doc_mask: Tensor, cand_words: Tensor, cand_mask: Tensor) -> Tensor:
    """(B, Td), (B, Td), (B, C), (B, C) -> (B, Td, C) bool: position i holds candidate c."""
    return (doc_words.unsqueeze(2) == cand_words.unsqueeze(1)) & doc_mask.unsqueeze(2) & cand_mask.unsqueeze(1)


def pointer_sum(attention: Tensor, hits: Tensor) -> Tensor:
    """Attention (B, Td) summed over each candidate's occurrences ``hits`` (B, Td, C) -> (B, C)."""
    return torch.bmm(attention.unsqueeze(1), hits.to(attention.dtype)).squeeze(1)  # (B, C)


@float32_under_autocast  # sums of small probabilities and their logs: in float32 under autocast
def candidate_log_probs(attention: Tensor, hits: Tensor, cand_mask: Tensor) -> Tensor:
    """log P(a) over the candidates (B, C), renormalised over the real ones; -inf at padding."""
    p = pointer_sum(attention, hits)  # (B, C)
    scores = torch.log(p.clamp_min(MIN_PROBABILITY)).masked_fill(~cand_mask, float("-inf"))
    return F.log_softmax(scores, dim=-1)


@float32_under_autocast
def answer_log_prob(attention: Tensor, hits: Tensor, answer: Tensor) -> Tensor:
    """The papers' pointer-sum ``log P(a | Q, D) = log sum_{i in I(a, D)} d_i`` (B,) of the candidate
    ``answer`` (B,) (an index into the candidates), from the document attention (B, Td) -- a softmax over
    all document positions -- and the occurrences ``hits`` (B, Td, C), not renormalised over the
    candidates; ``log MIN_PROBABILITY`` for an answer that does not occur in the document."""
    at_answer = hits.gather(2, answer.view(-1, 1, 1).expand(-1, hits.size(1), 1)).squeeze(2)  # (B, Td) i in I(a)
    p = (attention * at_answer.to(attention.dtype)).sum(dim=1)  # (B,)
    return torch.log(p.clamp_min(MIN_PROBABILITY))
