"""Iterative alternating attention (Sordoni, Bachman, Trischler & Bengio 2016), sections 3.2-3.3.

A reader of a (query, document) pair. The encodings come from any registered reader (the paper:
one bidirectional GRU for the query, one for the document, over shared embeddings; the cloze head
``iaa`` composes them, see ``memread.heads.cloze``). Given the query encodings ``q_tilde`` (B, Tq, 2h) and
the document encodings ``d_tilde`` (B, Td, 2h), an inference GRU with state ``s`` runs T steps; at
step t it

1. glimpses the query:      q_{i,t} = softmax_i q~_i^T (A_q s_{t-1} + a_q),   q_t = sum_i q_{i,t} q~_i
2. glimpses the document:   d_{i,t} = softmax_i d~_i^T (A_d [s_{t-1}, q_t] + a_d),  d_t = sum_i d_{i,t} d~_i
3. gates both glimpses:     r_q = g_q([s_{t-1}, q_t, d_t, q_t * d_t]),  r_d = g_d(same)
4. updates its state:       s_t = f([r_q * q_t, r_d * d_t], s_{t-1})        (f: the GRU of equation (1))

and the answer distribution is the pointer-sum (equation (2)) of the last document attention
d_{i,T} (``memread.modules.pointer_sum``). ``fixed_query`` is the ablation of Table 2, line 6:
q_{i,t} = 1/|Q| at every step (the query glimpse is the mean of the query encodings).

**Training objective.** Equation (2) is the pointer-sum over the whole document's attention, trained by
log P(a | Q, D): ``[criterion] normalize = "document"``, the default (no public code of the authors was
found to compare). ``"candidates"`` renormalises over the candidates, which section 5 names as the Stanford
reader's variant; it was memread's default before the papers' form was, and runs written then read with it.

Choices the paper leaves open, made here: s_0 = 0 (the first query attention is the bias term
q~_i^T a_q alone); each search gate is Linear -> ReLU -> Linear -> sigmoid with ``gate_hidden``
units (default 2h); the update of step T is not computed, since only d_{i,T} is used; dropout
("on the search gates and on the inputs to both attention mechanisms", section 4) is applied to
the gates' input and to the attentions' search inputs s_{t-1} and [s_{t-1}, q_t].

The scores and glimpses are the bilinear attention with bias of ``memread.modules.attention``,
computed through :class:`~memread.modules.memory_reads.MemoryReads`, which forms the gradient of the
encodings once for all T steps instead of once per read (the same values; faster on long documents).
Each attention and its glimpse is one :meth:`~memread.modules.memory_reads.MemoryReads.attend`: on CPU
float32 / float64 a compiled fused read (one pass over the encodings forward, one backward), elsewhere
the composition ``masked_softmax(scores)`` then ``glimpse``. The head config's ``backend`` picks (settable
on the built module, ``model.iaa.backend = "function"``): ``"auto"`` (the default) the fused read where it
can run, ``"compiled"`` it or an error, ``"function"`` the composition everywhere (what a GPU runs); the
same values (to float32 precision).
Under ``torch.autocast`` the T steps (and their custom autograd functions) run in float32, with
autocast off (:mod:`memread.modules.precision`); the encoders before them in the autocast dtype.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from memread._compiled import check_backend
from memread.modules.dropout import Dropout
from memread.modules.loop_linears import LoopLinears
from memread.modules.masking import masked_mean
from memread.modules.memory_reads import BACKENDS, MemoryReads
from memread.modules.precision import float32_under_autocast


@dataclass
class IAAOutput:
    doc_attention: Tensor  # (B, Td) d_{i,T}, the last document attention
    query_trace: Tensor | None = None  # (B, T, Tq) q_{i,t} for t = 1..T, when asked for
    doc_trace: Tensor | None = None  # (B, T, Td) d_{i,t} for t = 1..T, when asked for


def _call(layer: nn.Module, x: Tensor) -> Tensor:
    return layer(x)


class GRUCellEq1(nn.Module):
    """The GRU of equation (1), written as in the paper (reset before the recurrent product)::

        r = sigmoid(I_r x + H_r h),  u = sigmoid(I_u x + H_u h),
        h_bar = tanh(I_h x + H_h (r * h)),  h' = (1 - u) * h + u * h_bar
    """

    def __init__(self, input_size: int, hidden_size: int):
        super().__init__()
        self.hidden_size = hidden_size
        self.I = nn.Linear(input_size, 3 * hidden_size)  # [I_r; I_u; I_h] x + biases
        self.H_ru = nn.Linear(hidden_size, 2 * hidden_size, bias=False)  # [H_r; H_u]
        self.H_h = nn.Linear(hidden_size, hidden_size, bias=False)

    def forward(self, x: Tensor, h: Tensor, linear=_call) -> Tensor:
        """x (B, In), h (B, H) -> h' (B, H). ``linear(layer, input)`` applies a layer (a loop passes
        its :class:`~memread.modules.loop_linears.LoopLinears`)."""
        Ix_r, Ix_u, Ix_h = linear(self.I, x).chunk(3, dim=-1)  # (B, H) each
        Hh_r, Hh_u = linear(self.H_ru, h).chunk(2, dim=-1)
        r = torch.sigmoid(Ix_r + Hh_r)  # (1) reset gate
        u = torch.sigmoid(Ix_u + Hh_u)  # (1) update gate
        h_bar = torch.tanh(Ix_h + linear(self.H_h, r * h))  # (1) candidate state
        return (1 - u) * h + u * h_bar  # (1)


class SearchGate(nn.Module):
    """g: R^{s+6h} -> R^{2h}, a 2-layer feed-forward network with a sigmoid output (section 3.2)."""

    def __init__(self, input_size: int, hidden_size: int, output_size: int, dropout: float):
        super().__init__()
        self.drop = Dropout(dropout)
        self.hidden = nn.Linear(input_size, hidden_size)
        self.out = nn.Linear(hidden_size, output_size)

    def forward(self, x: Tensor, linear=_call) -> Tensor:
        return torch.sigmoid(linear(self.out, torch.relu(linear(self.hidden, self.drop(x)))))  # (B, 2h)


class IterativeAlternatingAttention(nn.Module):
    """Sections 3.2-3.3 over encodings of size ``enc_size`` (= 2h for bidirectional encoders).

    ``cfg`` is the iaa head's config (:class:`memread.heads.cloze.IAAHeadConfig`, where its options are
    written): ``steps`` T, ``inference`` s, ``gate_hidden`` (0 = 2h), ``fixed_query``, ``dropout``,
    ``backend`` (the attention reads' fused kernel or composition; settable, ``module.backend = ...``)."""

    def __init__(self, cfg, enc_size: int):
        super().__init__()
        if cfg.steps < 1:
            raise ValueError(f"IAA needs at least one inference step, got steps = {cfg.steps}")
        self.cfg = cfg
        self.backend = cfg.backend
        s, e = cfg.inference, enc_size
        self.drop = Dropout(cfg.dropout)
        # q~_i^T (A_q s_{t-1} + a_q): A_q in R^{2h x s} (weight), a_q in R^{2h} (bias); absent in the ablation
        self.A_q = None if cfg.fixed_query else nn.Linear(s, e)
        # d~_i^T (A_d [s_{t-1}, q_t] + a_d): A_d in R^{2h x (s + 2h)}, a_d in R^{2h}
        self.A_d = nn.Linear(s + e, e)
        gate_hidden = cfg.gate_hidden or e
        self.query_gate = SearchGate(s + 3 * e, gate_hidden, e, cfg.dropout)  # g_q -> r_q
        self.doc_gate = SearchGate(s + 3 * e, gate_hidden, e, cfg.dropout)  # g_d -> r_d
        self.gru = GRUCellEq1(2 * e, s)  # s_t = f([r_q q_t, r_d d_t], s_{t-1})

    @property
    def backend(self) -> str:
        """The attention reads' backend, ``"auto"``, ``"compiled"`` or ``"function"`` (the config's ``backend``)."""
        return self._backend

    @backend.setter
    def backend(self, value: str) -> None:
        self._backend = check_backend(value, BACKENDS, "head iaa")

    @float32_under_autocast  # the T-step recurrence and its custom Functions in float32 under autocast
    def forward(self, q_tilde: Tensor, q_mask: Tensor, d_tilde: Tensor, d_mask: Tensor,
                trace: bool = False) -> IAAOutput:
        """q_tilde (B, Tq, 2h), q_mask (B, Tq), d_tilde (B, Td, 2h), d_mask (B, Td) -> IAAOutput."""
        B = q_tilde.size(0)
        s = q_tilde.new_zeros(B, self.cfg.inference)  # s_0
        document = MemoryReads(d_tilde, self.backend, "head iaa")
        query = None if self.cfg.fixed_query else MemoryReads(q_tilde, self.backend, "head iaa")
        linear = LoopLinears()  # each weight's gradient formed once for all T steps
        if self.cfg.fixed_query:  # q_{i,t} = 1 / |Q|
            q_att_fixed = q_mask.to(q_tilde.dtype) / q_mask.sum(1, keepdim=True).clamp_min(1).to(q_tilde.dtype)  # (B, Tq)
            q_fixed = masked_mean(q_tilde, q_mask)  # (B, 2h)
        q_trace, d_trace = [], []
        for t in range(1, self.cfg.steps + 1):
            if self.cfg.fixed_query:
                q_att, q_t = q_att_fixed, q_fixed
            else:  # q_{i,t} (B, Tq) and q_t (B, 2h)
                q_att, q_t = query.attend(linear(self.A_q, self.drop(s)), q_mask)
            d_key = linear(self.A_d, self.drop(torch.cat([s, q_t], -1)))  # (B, 2h) A_d [s_{t-1}, q_t] + a_d
            last = t == self.cfg.steps  # the answer reads d_{i,T}; d_T and s_T would be unused
            d_att, d_t = document.attend(d_key, d_mask, glimpse=not last)  # d_{i,t} (B, Td), d_t (B, 2h)
            if trace:
                q_trace.append(q_att)
                d_trace.append(d_att)
            if last:
                break
            search = torch.cat([s, q_t, d_t, q_t * d_t], -1)  # (B, s + 6h)
            r_q, r_d = self.query_gate(search, linear), self.doc_gate(search, linear)  # (B, 2h) each
            s = self.gru(torch.cat([r_q * q_t, r_d * d_t], -1), s, linear)  # (B, s)
        return IAAOutput(
            doc_attention=d_att,
            query_trace=torch.stack(q_trace, 1) if trace else None,
            doc_trace=torch.stack(d_trace, 1) if trace else None,
        )


_RECURRENT = re.compile(r"(weight_hh|\bH_ru\.weight|\bH_h\.weight)")


@torch.no_grad()
def paper_init_(model: nn.Module, std: float = 0.05) -> None:
    """Section 4: every weight ~ N(0, std), recurrent weights orthogonal (one square block per gate),
    biases zero (Saxe et al. 2013). An embedding's padding row stays zero."""
    for name, p in model.named_parameters():
        leaf = name.rsplit(".", 1)[-1]
        if leaf.startswith("bias"):
            p.zero_()
        elif _RECURRENT.search(name) and p.dim() == 2:
            n = p.size(1)
            for block in p.split(n, dim=0):
                nn.init.orthogonal_(block)
        else:
            p.normal_(0.0, std)
    for m in model.modules():
        if isinstance(m, nn.Embedding) and m.padding_idx is not None:
            m.weight[m.padding_idx].zero_()
