"""The Attention-Sum Reader (Kadlec, Schmid, Bajgar & Kleindienst 2016), section 3.

A reader of a (query, document) pair, the baseline of Sordoni et al. Table 2. The query is one
vector: the last state of the query encoder's forward GRU and the first state of its backward GRU,
concatenated (``g(q)``); one dot-product attention over the document encodings ``f_i(d)``::

    s_i = softmax_i f_i(d) . g(q)          P(w | q, d) = sum_{i in I(w, d)} s_i   (pointer-sum)

It has no parameters of its own: everything it learns is in the embeddings and the two encoders.

**Training objective.** The paper (and its code, ``rkadlec/asreader``) maximises log P(a | q, d), the
attention summed over the answer's positions out of the whole document: ``[criterion] normalize =
"document"``, the default. ``normalize = "candidates"`` renormalises over the candidates (the Stanford
reader's choice, and memread's earlier default); :mod:`memread.criteria.cloze` has both.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from memread.modules.masking import last_real, masked_softmax


class AttentionSumReader(nn.Module):
    def __init__(self, bidirectional: bool):
        super().__init__()
        self.bidirectional = bidirectional

    def query_vector(self, q_states: Tensor, q_mask: Tensor) -> Tensor:
        """g(q) (B, H): [forward state at the last token, backward state at the first token]."""
        if not self.bidirectional:
            return last_real(q_states, q_mask)
        half = q_states.size(-1) // 2
        forward_last = last_real(q_states[..., :half], q_mask)  # (B, h)
        backward_first = q_states[:, 0, half:]  # (B, h)
        return torch.cat([forward_last, backward_first], dim=-1)  # (B, 2h)

    def forward(self, q_states: Tensor, q_mask: Tensor, d_states: Tensor, d_mask: Tensor) -> Tensor:
        """q_states (B, Tq, H), d_states (B, Td, H) -> document attention s_i (B, Td)."""
        g = self.query_vector(q_states, q_mask)  # (B, H)
        scores = (d_states @ g.unsqueeze(-1)).squeeze(-1)  # (B, Td) f_i(d) . g(q)
        return masked_softmax(scores, d_mask, dim=-1)
