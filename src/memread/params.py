"""Parameter counts, and the hidden size that matches a model's size to a baseline's.

Daniluk et al. (2017) compare their language models at (roughly) the same number of parameters:
"we adjusted the hidden size of all models to have roughly the same total number of model
parameters" (section 5.1, Table 2). :func:`match_hidden` does that: it picks the reader's ``hidden``
(a multiple of what the reader needs: 3 for kvp, N-1 for ngram) whose whole language model
(embedding, reader, softmax) is *nearest* in parameter count to a target, e.g. the LSTM LM's.

Counts come from the real modules, built on the ``meta`` device (no memory, no time), so they can
never drift from the code. With w = 300 and a 77k vocabulary against the LSTM LM (k = 300) this
gives k = 296 (attention), 560 (kv), 786 (kvp) and 564 / 786 / 968 / 1120 for ngram with n = 3..6:
Table 2's sizes, except kvp (the table's 834 has 25.6M parameters, not 23.9M) and the ngram's N,
which is one more here than in Table 2b (see ``tests/test_short_attention.py``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn


def count_parameters(module: nn.Module) -> int:
    """Distinct parameters (tied weights counted once)."""
    return sum(p.numel() for p in {id(p): p for p in module.parameters()}.values())


def lm_parameters(reader_cfg: Any, vocab_size: int, emb: int, tie_weights: bool = False) -> int:
    """Parameters of the whole language model (``memread.heads.lm.LanguageModel``)."""
    from memread.heads.lm import LanguageModel, LMHeadConfig
    from memread.readers import build_reader

    with torch.device("meta"):
        reader = build_reader(reader_cfg, emb)
        model = LanguageModel(vocab_size, LMHeadConfig(emb=emb, tie_weights=tie_weights), reader)
    return count_parameters(model)


def reader_parameters(reader_cfg: Any, input_size: int) -> int:
    from memread.readers import build_reader

    with torch.device("meta"):
        return count_parameters(build_reader(reader_cfg, input_size))


@dataclass
class Match:
    hidden: int
    params: int
    target: int

    @property
    def difference(self) -> int:
        return self.params - self.target


def match_hidden(reader_cfg: Any, target: int, count=None, max_hidden: int = 1 << 16) -> Match:
    """The ``hidden`` (a multiple of ``reader_cfg.hidden_multiple``, default 1) whose ``count(cfg)``
    is nearest to ``target`` (the smaller one on a tie). ``count`` defaults to the reader's own
    parameters with ``input_size`` unknown, so pass e.g. ``lambda c: lm_parameters(c, V, w)``."""
    if count is None:
        raise ValueError("match_hidden needs count=, e.g. lambda cfg: lm_parameters(cfg, vocab, emb)")
    step = getattr(reader_cfg, "hidden_multiple", 1)

    def at(k: int) -> int:
        return count(dataclasses.replace(reader_cfg, hidden=k))

    lo, hi = 1, 1  # in units of step: find the first size whose count reaches the target
    while at(hi * step) < target:
        lo, hi = hi, hi * 2
        if hi * step > max_hidden:
            raise ValueError(f"no hidden size up to {max_hidden} reaches {target} parameters")
    while lo < hi:
        mid = (lo + hi) // 2
        if at(mid * step) < target:
            lo = mid + 1
        else:
            hi = mid
    candidates = [k for k in ((hi - 1) * step, hi * step) if k >= step]
    best = min(candidates, key=lambda k: (abs(at(k) - target), k))
    return Match(best, at(best), target)


def match_lm_hidden(reader_cfg: Any, vocab_size: int, emb: int, baseline_cfg: Any, tie_weights: bool = False) -> Match:
    """``hidden`` for ``reader_cfg`` so its LM matches ``baseline_cfg``'s LM (same vocabulary and w)."""
    target = lm_parameters(baseline_cfg, vocab_size, emb, tie_weights)
    return match_hidden(reader_cfg, target, count=lambda c: lm_parameters(c, vocab_size, emb, tie_weights))
