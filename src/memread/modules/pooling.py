"""Pooling a text's reader states into one vector."""

from __future__ import annotations

from torch import Tensor

from memread.errors import MemreadError
from memread.modules.masking import last_real, masked_mean


def pool(states: Tensor, mask: Tensor, how: str) -> Tensor:
    """(B, T, H) reader states -> (B, H): ``mean`` over real tokens (the LSTMN setup: the mean of the
    hidden tape), ``last`` real state (NSE: its final output h_T), or ``max`` over real tokens."""
    if how == "mean":
        return masked_mean(states, mask)
    if how == "last":
        return last_real(states, mask)
    if how == "max":
        return states.masked_fill(~mask.unsqueeze(-1), float("-inf")).amax(dim=1)
    raise MemreadError(f"unknown pooling {how!r}; expected mean, last or max")
