"""Pointer-sum (Kadlec et al. 2016; Sordoni et al. 2016, equation (2)).

The probability of a candidate answer is the document attention summed over every position where
the candidate occurs::

    P(a | Q, D) = sum_{i in I(a, D)} d_i

Occurrence is word identity, given as per-example word ids (``doc_words``, ``cand_words``): two
positions hold the same word exactly when their ids are equal, whatever the vocabulary does with
rare words (two different unknown names must not share their attention). With a candidate list the
distribution is renormalised over the candidates; when every distinct word of the document is a
candidate (bAbI, no list given) the renormalisation changes nothing.
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
