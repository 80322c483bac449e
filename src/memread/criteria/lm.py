"""Language-model cross-entropy and perplexity ``exp(NLL / T)``, NLL summed over every target token of a
split and T their number."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import torch.nn.functional as F

from memread.criteria.base import Loss
from memread.heads.base import ModelOutput


@dataclass
class LMNLLConfig:
    name: Literal["lm_nll"] = "lm_nll"
    # "sequence": the loss is summed over the time steps of a segment and averaged over the batch, the
    # convention of the Torch/Theano LM code of the papers (their lr 0.65 and clip 5 assume it);
    # "token": averaged over every token (what lr values tuned for PyTorch's example assume)
    reduction: Literal["sequence", "token"] = "sequence"


class LMNLL:
    selection_metric = "ppl"
    higher_is_better = False

    def __init__(self, cfg: LMNLLConfig):
        self.reduction = cfg.reduction

    def __call__(self, out: ModelOutput, batch: dict) -> Loss:
        target, mask = batch["target"], batch["mask"]  # (B, T)
        nll = F.cross_entropy(out.logits.flatten(0, 1), target.flatten(), reduction="none").view_as(target)
        m = mask.to(nll.dtype)
        row_nll, row_tokens = (nll * m).sum(1).detach(), m.sum(1)  # the units: a row of the segment
        nll_sum = (nll * m).sum()
        tokens = m.sum()
        loss = nll_sum / target.size(0) if self.reduction == "sequence" else nll_sum / tokens.clamp_min(1.0)
        return Loss(loss, {"nll": nll_sum.detach(), "tokens": tokens.detach()},
                    weight=target.size(0) if self.reduction == "sequence" else tokens.detach(),
                    units={"nll": row_nll, "tokens": row_tokens})

    def summarize(self, sums: dict[str, float]) -> dict[str, float]:
        nll = sums["nll"] / max(sums["tokens"], 1.0)
        return {"ppl": math.exp(min(nll, 50.0)), "nll": nll, "tokens": sums["tokens"]}


def build_lm_nll(cfg: LMNLLConfig, pipeline, model) -> LMNLL:
    return LMNLL(cfg)
