"""Attention scoring family.

One base class owns masking and normalisation; subclasses only compute scores. Keys can be
projected once per sequence (``project_keys``) and reused at every query step, which is what the
fast readers do.

- :class:`AdditiveAttention`  ``v^T tanh(W_k k_i + W_q q)``        (Bahdanau; "concat")
- :class:`BilinearAttention`  ``k_i^T (A q + a)``                   (bilinear with bias; Sordoni et al.)
- :class:`DotAttention`       ``k_i^T q``
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from memread.modules.masking import masked_softmax


class AttentionScorer(nn.Module):
    """Scores keys (B, S, Dk) against a query (B, Dq) and normalises with a masked softmax."""

    def project_keys(self, keys: Tensor) -> Tensor:
        """Per-sequence key projection, computed once and reused for every query."""
        return keys

    def score(self, query: Tensor, projected_keys: Tensor) -> Tensor:  # pragma: no cover - abstract
        """(B, Dq), (B, S, D) -> unnormalised scores (B, S)."""
        raise NotImplementedError

    def forward(
        self, query: Tensor, keys: Tensor, mask: Tensor | None = None, projected_keys: Tensor | None = None
    ) -> Tensor:
        """Attention weights (B, S); zero where ``mask`` (B, S) is False."""
        if projected_keys is None:
            projected_keys = self.project_keys(keys)
        return masked_softmax(self.score(query, projected_keys), mask, dim=-1)


class AdditiveAttention(AttentionScorer):
    """``v^T tanh(W_k k_i + W_q q)``."""

    def __init__(self, key_size: int, query_size: int, hidden_size: int):
        super().__init__()
        self.W_k = nn.Linear(key_size, hidden_size, bias=False)
        self.W_q = nn.Linear(query_size, hidden_size, bias=True)
        self.v = nn.Linear(hidden_size, 1, bias=False)

    def project_keys(self, keys: Tensor) -> Tensor:
        return self.W_k(keys)  # (B, S, A)

    def score(self, query: Tensor, projected_keys: Tensor) -> Tensor:
        return self.v(torch.tanh(projected_keys + self.W_q(query).unsqueeze(1))).squeeze(-1)  # (B, S)

    def score_queries(self, queries: Tensor, projected_keys: Tensor) -> Tensor:
        """Every query of a sequence at once: (B, T, Dq), (B, S, A) -> unnormalised scores (B, T, S)."""
        return self.v(torch.tanh(projected_keys.unsqueeze(1) + self.W_q(queries).unsqueeze(2))).squeeze(-1)


class BilinearAttention(AttentionScorer):
    """``k_i^T (A q + a)``: bilinear with a bias term."""

    def __init__(self, key_size: int, query_size: int, bias: bool = True):
        super().__init__()
        self.A = nn.Linear(query_size, key_size, bias=bias)

    def score(self, query: Tensor, projected_keys: Tensor) -> Tensor:
        return torch.bmm(projected_keys, self.A(query).unsqueeze(-1)).squeeze(-1)  # (B, S)


class DotAttention(AttentionScorer):
    """``k_i^T q`` (optionally scaled by 1/sqrt(d))."""

    def __init__(self, scaled: bool = False):
        super().__init__()
        self.scaled = scaled

    def score(self, query: Tensor, projected_keys: Tensor) -> Tensor:
        s = torch.bmm(projected_keys, query.unsqueeze(-1)).squeeze(-1)  # (B, S)
        return s / projected_keys.size(-1) ** 0.5 if self.scaled else s


def build_attention(kind: str, key_size: int, query_size: int, hidden_size: int | None = None) -> AttentionScorer:
    """``kind`` in {"additive", "bilinear", "dot"}."""
    if kind == "additive":
        return AdditiveAttention(key_size, query_size, hidden_size or key_size)
    if kind == "bilinear":
        return BilinearAttention(key_size, query_size)
    if kind == "dot":
        if key_size != query_size:
            raise ValueError(f"dot attention needs equal key and query sizes, got {key_size} and {query_size}")
        return DotAttention()
    raise ValueError(f"unknown attention kind {kind!r}; expected additive, bilinear or dot")
