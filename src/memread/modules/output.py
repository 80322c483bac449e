"""The output layer of a language model: states -> vocabulary logits."""

from __future__ import annotations

import torch
from torch import Tensor, nn


class VocabularyProjection(nn.Linear):
    """``nn.Linear`` onto the vocabulary, with the bias added after the product.

    ``F.linear`` on a contiguous input calls ``addmm``, which on the CPU first copies the bias into
    every row of the (tokens x vocabulary) result and then accumulates the product onto it: one extra
    write of the largest tensor of a language model (51 MB for 1280 tokens and 10k words). A product
    followed by an in-place broadcast add does the same arithmetic without that copy. Same parameters
    and state-dict keys as ``nn.Linear``.
    """

    def forward(self, x: Tensor) -> Tensor:
        out = torch.matmul(x, self.weight.t())
        return out if self.bias is None else out.add_(self.bias)
