"""Optimisers and the plateau learning-rate schedule.

The LSTMN paper's LM schedule is SGD at lr 0.65, multiplied by 0.85 after an epoch whose validation
perplexity shows no significant improvement: ``optimizer = "sgd"``, ``lr = 0.65``, ``lr_decay = 0.85``.
Sordoni et al. multiply Adam's lr by 0.8 when validation accuracy has not improved after half an
epoch: ``evals_per_epoch = 2``, ``lr_decay = 0.8``.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass

import torch

from memread.config import TrainConfig
from memread.errors import MemreadError


def param_groups(named_params, cfg: TrainConfig) -> list[dict]:
    """The optimizer's groups: first every parameter no ``lr_scale`` pattern matches (at ``lr``; the
    group whose lr the loop logs, possibly empty), then one group per pattern at ``lr * factor``, each
    parameter in the group of the first pattern (in the file's order) that matches its name."""
    named = [(n, p) for n, p in named_params if p.requires_grad]
    patterns = list(cfg.lr_scale)
    groups = [{"params": [], "lr": cfg.lr, "lr_scale": 1.0}]
    groups += [{"params": [], "lr": cfg.lr * cfg.lr_scale[pat], "lr_scale": cfg.lr_scale[pat], "pattern": pat}
               for pat in patterns]
    for name, p in named:
        hit = next((i for i, pat in enumerate(patterns) if fnmatch.fnmatchcase(name, pat)), None)
        groups[0 if hit is None else hit + 1]["params"].append(p)
    for g in groups[1:]:
        if not g["params"]:
            names = ", ".join(n for n, _ in named)
            raise MemreadError(f"train.lr_scale: pattern {g['pattern']!r} matches no parameter (the model's: {names})")
    return groups


def build_optimizer(named_params, cfg: TrainConfig) -> torch.optim.Optimizer:
    """SGD or Adam over ``model.named_parameters()``, with the groups of :func:`param_groups`."""
    groups = param_groups(named_params, cfg)
    if cfg.optimizer == "sgd":
        return torch.optim.SGD(groups, lr=cfg.lr, momentum=cfg.momentum, weight_decay=cfg.weight_decay)
    return torch.optim.Adam(groups, lr=cfg.lr, betas=cfg.betas, weight_decay=cfg.weight_decay)


@dataclass
class PlateauSchedule:
    """Tracks the best validation metric; decays lr and counts bad evaluations when it stalls.

    Two references: ``best`` is the last *significant* best (a value must beat it by
    ``min_improvement`` to reset the decay and patience count) and ``best_value`` is simply the best
    value seen, the one ``checkpoint_best.pt`` holds.
    """

    higher_is_better: bool
    decay: float = 1.0
    min_improvement: float = 0.0
    best: float | None = None
    best_value: float | None = None
    bad_evals: int = 0

    def better(self, value: float, than: float | None) -> bool:
        return than is None or (value > than if self.higher_is_better else value < than)

    def improved(self, value: float) -> bool:
        if self.best is None:
            return True
        margin = abs(self.best) * self.min_improvement
        return value > self.best + margin if self.higher_is_better else value < self.best - margin

    def worse_than_best(self, value: float) -> bool:
        return self.best_value is not None and self.better(self.best_value, value)

    def step(self, value: float, optimizer: torch.optim.Optimizer) -> bool:
        """Record a validation result; returns True if it is the best value so far."""
        new_best = self.better(value, self.best_value)
        if new_best:
            self.best_value = value
        if self.improved(value):
            self.best, self.bad_evals = value, 0
            return new_best
        self.bad_evals += 1
        if self.decay != 1.0:
            for group in optimizer.param_groups:
                group["lr"] *= self.decay
        return new_best

    def record(self, value: float) -> bool:
        """A validation that does not count (one a cap forced between the evaluation points): it can be the best
        value (``checkpoint_best.pt``), but it decays nothing and counts toward no patience, so a run a time limit
        splits over machines keeps the schedule of the run that was never split."""
        if self.better(value, self.best_value):
            self.best_value = value
            return True
        return False

    def state_dict(self) -> dict:
        return {"best": self.best, "best_value": self.best_value, "bad_evals": self.bad_evals}

    def load_state_dict(self, d: dict) -> None:
        self.best, self.bad_evals = d["best"], d["bad_evals"]
        self.best_value = d.get("best_value", d["best"])  # checkpoints from before it was kept apart
