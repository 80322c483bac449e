"""The Recurrent Memory model RM(+tM-g) of Tran, Bisazza & Monz (2016), "Recurrent Memory Networks for
Language Modeling" (NAACL), as Daniluk et al. (2017) compare against it (Figure 2a/2c, Figure 3b).

An LSTM reads the words; on top of it a Memory Block (their section 3.1) attends, with the LSTM's
hidden state h_t as the query, over the n most recent input words -- this one, x_t, included -- and
composes what it reads with h_t by a GRU-like gating unit. Tran et al.'s variable names::

    h_t  = LSTM(x_t, h_{t-1})                               one fused nn.LSTM call per segment
    m_i  = M x_i,   c_i = C x_i                              memory and output vectors of word i   (MB-1)
    p_t  = softmax_i( (m_i + T_M[j(i)])^T h_t )              attention, i = t-n+1 .. t             (MB-2)
    s_t  = sum_i p_ti (c_i + T_C[j(i)])                      what the block reads                  (MB-3)
    z_t  = sigmoid(W_z s_t + U_z h_t + b_z)                  update gate                           (MB-4)
    r_t  = sigmoid(W_r s_t + U_r h_t + b_r)                  reset gate                            (MB-5)
    h~_t = tanh(W s_t + U (r_t * h_t) + b)                   candidate                             (MB-6)
    h'_t = (1 - z_t) * h_t + z_t * h~_t                      ``states``; the LM's softmax reads it (MB-7)

"+tM" is the temporal matrix: T_M, T_C (n x d) add a vector per *relative position* j(i) in the
window (j = n-1 for x_t, n-2 for x_{t-1}, ...) to the memory and output vectors, so p_t gets a
position-dependent term T_M[j]^T h_t. "-g" is the gating composition (MB-4..7) instead of the linear
one (h'_t = s_t + W h_t).

**The labels MB-1..MB-7 are ours.** The search tools of this project hold only the paper's abstract,
not its text, so its equation numbers could not be checked here: the equations follow the paper's
section 3.1 as we know it and the authors' public Torch code (github.com/ketranm/RMN, read for
understanding only: ``RM.lua``, ``model/MemBlockG.lua``), which agrees with them (memory of the n
most recent words including the current one; temporal vectors by relative position, added to both
memories; a GRU-style gate with a bias in every term).

**Where we depart from the paper.** (1) Tran et al.'s M and C are their own |V| x d lookup tables
(which is why Daniluk et al.'s RM row has 93.7M parameters against the LSTM's 47.0M: two more
77k x 300 tables). A memread reader receives word embeddings, not word ids, so here M and C are
d x E maps of the model's input embedding x_i (M_paper = M E, a factorisation through the shared
embedding): 2 d E parameters instead of 2 d |V|, and the LM can be size-matched to the LSTM LM
(``memread match-params rm``). (2) The window is carried across BPTT segments and cleared at document
starts (``reset``), like the Daniluk readers; Tran et al. read single sentences. At a document's start
fewer than n words exist and attention covers only those (as Tran's code does at a sentence start).

The Memory Block's output never feeds the LSTM, so (MB-1)-(MB-7) run for every position of a segment
at once: one matmul gives M x and C x for the whole ``[window ; segment]``, one batched matmul scores
every position against every row of it (the band of n is gathered), another reads the values, and the
gating is three matmuls.
``impl = "reference"`` reads the same equations one row and one token at a time (:func:`reference_block`,
:meth:`DocumentLSTM.reference`), to check the fast path against.

Attention (``return_attention``) is (B, T, n+T) over ``memory`` = the output vectors c_i of
``[the n-1 carried words ; this segment's words ; one empty slot]``: row t covers slots t .. t+n-1,
i.e. words t-n+1 .. t, so ``memread attention-span`` labels x_t as position -1 and x_{t-n+1} as -n
(Figure 3b's "position in the history" of the word being predicted).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from memread.errors import MemreadError
from memread.modules.document_lstm import DocumentLSTM
from memread.modules.masking import masked_softmax
from memread.modules.window import History, attention_matrix, carry, extend, pack_state, prepare, unpack_state
from memread.readers.base import ReaderOutput
from memread.typed import PositiveFloat, PositiveInt


@dataclass
class RecurrentMemoryConfig:
    name: Literal["rm"] = "rm"
    hidden: PositiveInt = 300  # d: LSTM size, also the size of the memory vectors m_i, c_i and of h'_t
    window: PositiveInt = 15  # n: the most recent input words in the Memory Block, this one included (Fig. 2a: 1/5/10/15)
    init_range: PositiveFloat = 0.1  # every weight uniform in (-r, r) (Daniluk et al. 2017, section 4.1)
    forget_bias: float = 1.0  # LSTM forget-gate bias (section 4.1)
    impl: Literal["fast", "reference"] = "fast"  # "reference": the equations token by token, to check against


class RecurrentMemoryReader(nn.Module):
    """LSTM + Memory Block over the last n input words with temporal matrix and gating, RM(+tM-g)."""

    def __init__(self, cfg: RecurrentMemoryConfig, input_size: int):
        super().__init__()
        if cfg.window < 1:
            raise MemreadError(f"reader.window must be >= 1 for rm, got {cfg.window}")
        d, n = cfg.hidden, cfg.window
        self.cfg = cfg
        self.lstm = DocumentLSTM(input_size, d, cfg.init_range, cfg.forget_bias)
        self.M = nn.Linear(input_size, d, bias=False)  # (MB-1) memory vectors m_i = M x_i
        self.C = nn.Linear(input_size, d, bias=False)  # (MB-1) output vectors c_i = C x_i
        self.T_M = nn.Parameter(torch.empty(n, d))  # temporal matrix of the memory: row j = relative position j
        self.T_C = nn.Parameter(torch.empty(n, d))  # ... and of the output vectors
        self.W_s = nn.Linear(d, 3 * d)  # [W_z; W_r; W] s_t + [b_z; b_r; b]   (MB-4..6)
        self.U_zr = nn.Linear(d, 2 * d, bias=False)  # [U_z; U_r] h_t           (MB-4, 5)
        self.U = nn.Linear(d, d, bias=False)  # U (r_t * h_t)                    (MB-6)
        for name, p in self.named_parameters():
            if not name.startswith("lstm."):
                nn.init.uniform_(p, -cfg.init_range, cfg.init_range)
        self.input_size, self.output_size = input_size, d

    def forward(self, x: Tensor, mask: Tensor | None = None, state: dict | None = None,
                return_attention: bool = False, reset: Tensor | None = None) -> ReaderOutput:
        """x (B, T, E), mask (B, T), reset (B, T): True where a document starts -> states h' (B, T, d)."""
        B, T, E = x.shape
        n = self.cfg.window
        mask, lstm_reset, reset = prepare(x, mask, reset)
        lstm_state, window, valid = unpack_state(state, B, n - 1, E, x)  # the n-1 words before this segment
        reference = self.cfg.impl == "reference"
        lstm = self.lstm.reference if reference else self.lstm
        h, lstm_state = lstm(x, mask, lstm_state, lstm_reset)  # (B, T, d)
        hist = extend(window, valid, x, mask, reset)  # words of [window ; segment]: (B, n-1+T, E)
        vis = band_visible(hist, mask)  # (B, T, n): word t-n+1+j is in t's document
        if reference:
            h_out, p = reference_block(self, hist, h, vis)
        else:
            h_out, p = self._block(hist, h, vis)
        window, valid = carry(hist, mask)
        out = ReaderOutput(states=h_out, state=pack_state(lstm_state, window, valid))
        if return_attention:  # over the output vectors of [window ; segment ; one empty slot]: row t on slots t..t+n-1
            c = self.C(hist.seq)
            out.memory = torch.cat([c, c.new_zeros(B, 1, c.size(-1))], dim=1)  # (B, n+T, d)
            out.memory_mask = torch.cat([hist.valid, hist.valid.new_zeros(B, 1)], dim=1)
            out.attention = attention_matrix(p)  # (B, T, n+T)
        return out

    def _block(self, hist: History, h: Tensor, vis: Tensor) -> tuple[Tensor, Tensor]:
        """(MB-1)-(MB-7) for every position at once: h (B, T, d), vis (B, T, n) -> h' (B, T, d), p (B, T, n)."""
        T, n, d = h.size(1), self.cfg.window, self.cfg.hidden
        mc = F.linear(hist.seq, torch.cat([self.M.weight, self.C.weight]))  # (MB-1) one matmul: (B, n-1+T, 2d)
        m, c = mc.split(d, dim=-1)
        # (MB-2): slot j of position t is word t-n+1+j, row t+j of [window ; segment]. One bmm scores every
        # (position, row) pair and the band is gathered from it: (T + n - 1) / n times the band's work, but
        # two batched matmuls instead of a loop of n small ops forward and backward
        band = torch.arange(T, device=h.device).view(T, 1) + torch.arange(n, device=h.device)  # (T, n)
        scores = (h @ m.transpose(1, 2)).gather(2, band.expand(h.size(0), T, n))  # m_i^T h_t  (B, T, n)
        scores = scores + h @ self.T_M.t()  # + T_M[j]^T h_t
        p = masked_softmax(scores, vis, dim=-1)  # (B, T, n), zeros at padding
        s = torch.baddbmm(p @ self.T_C, attention_matrix(p)[:, :, : m.size(1)], c)  # (MB-3) sum_j p_tj (c_i + T_C[j])
        zr_in, w_in = self.W_s(s).split([2 * d, d], dim=-1)  # [W_z s + b_z ; W_r s + b_r], W s + b
        z, r = torch.sigmoid(zr_in + self.U_zr(h)).split(d, dim=-1)  # (MB-4, 5)
        h_tilde = torch.tanh(w_in + self.U(r * h))  # (MB-6)
        h_out = h + z * (h_tilde - h)  # (MB-7) (1 - z) h + z h~ (not torch.lerp: under autocast h and h~ differ in dtype)
        return h_out * hist.valid[:, -T:].unsqueeze(-1).to(h_out.dtype), p  # zeros at padding


def band_visible(hist: History, mask: Tensor) -> Tensor:
    """(B, T, n) bool: slot j of position t (word t-n+1+j, row t+j of ``hist.seq``) is a real word of t's
    document; the last slot is x_t itself, visible wherever t is a real token."""
    T, L = mask.size(1), hist.window  # L = n - 1 earlier words
    current = mask.unsqueeze(-1)  # (B, T, 1)
    if L == 0:
        return current
    earlier = hist.valid.unfold(1, L, 1)[:, :T] & (hist.doc.unfold(1, L, 1)[:, :T] == hist.query_doc.unsqueeze(-1))
    return torch.cat([earlier & current, current], dim=-1)


def reference_block(rm: RecurrentMemoryReader, hist: History, h: Tensor, vis: Tensor) -> tuple[Tensor, Tensor]:
    """(MB-1)-(MB-7) literally, one row and one position at a time (``impl = "reference"``; zeros at padding).

    Position t of the segment reads the words i = t-n+1 .. t of its own document: word i is row
    t + j of ``hist.seq`` with j = i - (t-n+1) its relative position (the temporal row j)."""
    B, T, d = h.shape
    n = rm.cfg.window
    W_z, W_r, W = rm.W_s.weight.split(d)
    b_z, b_r, b = rm.W_s.bias.split(d)
    U_z, U_r = rm.U_zr.weight.split(d)
    U = rm.U.weight
    h_all, p_all = [], []
    for row in range(B):
        for t in range(T):
            if not hist.valid[row, n - 1 + t]:  # padding
                h_all.append(h.new_zeros(d))
                p_all.append(h.new_zeros(n))
                continue
            h_t = h[row, t]
            js = [j for j in range(n) if vis[row, t, j]]  # relative positions of the words in t's document
            x_i = [hist.seq[row, t + j] for j in js]
            m = [rm.M.weight @ x + rm.T_M[j] for x, j in zip(x_i, js)]  # (MB-1) + temporal row
            c = [rm.C.weight @ x + rm.T_C[j] for x, j in zip(x_i, js)]
            p = torch.softmax(torch.stack([m_i @ h_t for m_i in m]), dim=0)  # (MB-2)
            s_t = sum(p_i * c_i for p_i, c_i in zip(p, c))  # (MB-3)
            z_t = torch.sigmoid(W_z @ s_t + U_z @ h_t + b_z)  # (MB-4)
            r_t = torch.sigmoid(W_r @ s_t + U_r @ h_t + b_r)  # (MB-5)
            h_tilde = torch.tanh(W @ s_t + U @ (r_t * h_t) + b)  # (MB-6)
            h_all.append((1 - z_t) * h_t + z_t * h_tilde)  # (MB-7)
            p_all.append(p.new_zeros(n).index_put((h.new_tensor(js, dtype=torch.long),), p))  # over all n slots
    return torch.stack(h_all).view(B, T, d), torch.stack(p_all).view(B, T, n)


def build_recurrent_memory_reader(cfg: RecurrentMemoryConfig, input_size: int) -> RecurrentMemoryReader:
    return RecurrentMemoryReader(cfg, input_size)
