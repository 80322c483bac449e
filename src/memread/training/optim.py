"""Optimisers and the plateau learning-rate schedule.

The LSTMN paper's LM schedule is SGD at lr 0.65, multiplied by 0.85 after an epoch whose validation
perplexity shows no significant improvement: ``optimizer = "sgd"``, ``lr = 0.65``, ``lr_decay = 0.85``.
Sordoni et al. multiply Adam's lr by 0.8 when validation accuracy has not improved after half an
epoch: ``evals_per_epoch = 2``, ``lr_decay = 0.8``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from memread.config import TrainConfig


def build_optimizer(params, cfg: TrainConfig) -> torch.optim.Optimizer:
    params = [p for p in params if p.requires_grad]
    if cfg.optimizer == "sgd":
        return torch.optim.SGD(params, lr=cfg.lr, momentum=cfg.momentum, weight_decay=cfg.weight_decay)
    return torch.optim.Adam(params, lr=cfg.lr, betas=cfg.betas, weight_decay=cfg.weight_decay)


@dataclass
class PlateauSchedule:
    """Tracks the best validation metric; decays lr and counts bad evaluations when it stalls."""

    higher_is_better: bool
    decay: float = 1.0
    min_improvement: float = 0.0
    best: float | None = None
    bad_evals: int = 0

    def improved(self, value: float) -> bool:
        if self.best is None:
            return True
        margin = abs(self.best) * self.min_improvement
        return value > self.best + margin if self.higher_is_better else value < self.best - margin

    def step(self, value: float, optimizer: torch.optim.Optimizer) -> bool:
        """Record a validation result; returns True if it is the new best."""
        if self.improved(value):
            self.best, self.bad_evals = value, 0
            return True
        self.bad_evals += 1
        if self.decay != 1.0:
            for group in optimizer.param_groups:
                group["lr"] *= self.decay
        return False

    def state_dict(self) -> dict:
        return {"best": self.best, "bad_evals": self.bad_evals}

    def load_state_dict(self, d: dict) -> None:
        self.best, self.bad_evals = d["best"], d["bad_evals"]
