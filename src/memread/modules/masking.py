"""The one mask convention of memread: a boolean tensor where ``True`` marks a real token.

Sequences are right-padded, so a mask row is ``True`` for a prefix and ``False`` after it.
"""

from __future__ import annotations

import torch
from torch import Tensor


def lengths_to_mask(lengths: Tensor, max_len: int | None = None) -> Tensor:
    """(B,) lengths -> (B, T) bool mask, True for positions ``< length``."""
    max_len = int(lengths.max()) if max_len is None else max_len
    positions = torch.arange(max_len, device=lengths.device)
    return positions.unsqueeze(0) < lengths.unsqueeze(1)  # (B, T)


def mask_to_lengths(mask: Tensor) -> Tensor:
    """(B, T) bool mask -> (B,) int64 lengths."""
    return mask.sum(dim=-1)


def masked_softmax(scores: Tensor, mask: Tensor | None, dim: int = -1) -> Tensor:
    """Softmax over ``dim`` that gives exactly zero weight where ``mask`` is False.

    ``mask`` broadcasts against ``scores``. A row whose every position is masked gets all zeros
    (not NaN), so padded query positions can be carried along harmlessly.
    """
    if mask is None:
        return torch.softmax(scores, dim=dim)
    scores = scores.masked_fill(~mask, float("-inf"))
    # rows with no real position: softmax of all -inf is NaN; give them zeros instead
    any_real = mask.any(dim=dim, keepdim=True)
    weights = torch.softmax(scores.masked_fill(~any_real, 0.0), dim=dim)
    return weights.masked_fill(~mask, 0.0)


def masked_mean(x: Tensor, mask: Tensor, dim: int = 1) -> Tensor:
    """Mean of ``x`` (B, T, H) over real positions of ``mask`` (B, T) along ``dim``; (B, H)."""
    m = mask.unsqueeze(-1).to(x.dtype)
    return (x * m).sum(dim) / m.sum(dim).clamp_min(1.0)


def last_real(x: Tensor, mask: Tensor) -> Tensor:
    """State at the last real position of each row: ``x`` (B, T, H), ``mask`` (B, T) -> (B, H)."""
    idx = (mask.sum(dim=1) - 1).clamp_min(0)  # (B,)
    return x[torch.arange(x.size(0), device=x.device), idx]
