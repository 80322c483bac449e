"""Token-level cross-entropy of a target sequence under teacher forcing: the loss is the NLL summed over
the real target tokens (``</s>`` included) divided by their number; a split reports perplexity
``exp(NLL / T)``, ``nll`` per token and ``accuracy`` (the arg-max word is right), and checkpoints are
picked by ``ppl``. BLEU needs decoding and is a separate evaluation (``memread bleu RUN_DIR``)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import torch.nn.functional as F

from memread.criteria.base import Loss
from memread.heads.base import ModelOutput


@dataclass
class TokenNLLConfig:
    name: Literal["token_nll"] = "token_nll"


class TokenNLL:
    selection_metric = "ppl"
    higher_is_better = False

    def __call__(self, out: ModelOutput, batch: dict) -> Loss:
        logits, target, mask = out.logits, batch["tgt_out"], batch["tgt_mask"]  # (B, T, V), (B, T), (B, T)
        m = mask.to(logits.dtype)
        per_token = F.cross_entropy(logits.flatten(0, 1), target.flatten(), reduction="none").view_as(m) * m
        nll = per_token.sum()
        tokens = mask.sum()
        correct = (logits.argmax(-1) == target)[mask].sum()
        stats = {"nll": nll.detach(), "tokens": tokens.detach().float(), "correct": correct.detach().float()}
        units = {"nll": per_token.sum(1).detach(), "tokens": m.sum(1),  # the units: sentence pairs
                 "correct": ((logits.argmax(-1) == target) & mask).sum(1).to(m.dtype)}
        return Loss(nll / tokens.clamp_min(1), stats, weight=tokens.detach(), units=units)

    def summarize(self, sums: dict[str, float]) -> dict[str, float]:
        n = max(sums.get("tokens", 0.0), 1.0)
        nll = sums.get("nll", 0.0) / n
        return {"ppl": math.exp(min(nll, 50.0)), "nll": nll, "accuracy": sums.get("correct", 0.0) / n,
                "tokens": sums.get("tokens", 0.0)}


def build_token_nll(cfg: TokenNLLConfig, pipeline, model) -> TokenNLL:
    return TokenNLL()
