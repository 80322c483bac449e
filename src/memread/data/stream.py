"""Continuous-stream batching for language models (truncated BPTT).

The token stream is cut into ``batch_size`` contiguous columns; batch ``i`` is the ``i``-th window of
``bptt`` steps in every column, so a reader's state at the end of batch ``i`` is the right state to
start batch ``i + 1`` from (the loop detaches it between batches). Columns overlap by one token, so
every token after the first is a target exactly once and perplexity covers the whole stream; the
ragged end of the last column is masked out.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor


class StreamBatches(Sequence):
    """Indexable BPTT batches ``{"input", "target", "mask"}``, each (B, <=bptt)."""

    def __init__(self, ids: Tensor, batch_size: int, bptt: int, pad_id: int = 0):
        if ids.dim() != 1 or ids.numel() < 2:
            raise ValueError("a token stream needs at least two tokens")
        n_targets = ids.numel() - 1
        batch_size = min(batch_size, n_targets)
        length = math.ceil(n_targets / batch_size)
        self.input = torch.full((batch_size, length), pad_id, dtype=torch.long)
        self.target = torch.full((batch_size, length), pad_id, dtype=torch.long)
        self.mask = torch.zeros((batch_size, length), dtype=torch.bool)
        for j in range(batch_size):
            start, end = j * length, min((j + 1) * length, n_targets)
            if end <= start:
                continue
            self.input[j, : end - start] = ids[start:end]
            self.target[j, : end - start] = ids[start + 1 : end + 1]
            self.mask[j, : end - start] = True
        self.bptt = bptt
        self.n_targets = n_targets

    def __len__(self) -> int:
        return math.ceil(self.input.size(1) / self.bptt)

    def __getitem__(self, i: int) -> dict[str, Tensor]:
        if not 0 <= i < len(self):
            raise IndexError(i)
        s = slice(i * self.bptt, (i + 1) * self.bptt)
        return {"input": self.input[:, s], "target": self.target[:, s], "mask": self.mask[:, s]}
