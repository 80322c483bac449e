"""The one training loop. It knows nothing about tasks, readers, heads or criteria beyond::

    task.batches(split, batch_size, epoch, seed)
    out = model(batch, state)        # -> ModelOutput(logits, state, ...)
    loss = criterion(out, batch)     # -> Loss(value, stats); criterion.summarize(sums) -> metrics

It trains with SGD or Adam and gradient-norm clipping, validates ``evals_per_epoch`` times an epoch,
decays the learning rate on a plateau, stops early, logs JSON lines (and optionally TensorBoard),
and writes ``checkpoint_last.pt`` / ``checkpoint_best.pt`` atomically. A resumed run continues from
``checkpoint_last.pt`` exactly: same data order, same dropout masks, same carried state.
"""

from __future__ import annotations

import json
import math
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import torch
from tqdm import tqdm

from memread.config import ExperimentConfig
from memread.criteria.base import Loss
from memread.errors import MemreadError
from memread.readers.base import detach_state, flatten_state, state_structure, unflatten_state
from memread.training.checkpoint import load_checkpoint, save_checkpoint
from memread.training.optim import PlateauSchedule, build_optimizer


@torch.no_grad()
def evaluate(model: torch.nn.Module, task: Any, split: str, batch_size: int, progress: bool = False,
             criterion: Any = None) -> dict[str, float]:
    """Metrics of ``model`` on a whole split (state carried across batches, as in training)."""
    model.eval()
    criterion = criterion if criterion is not None else task.build_criterion(model)
    stats: dict[str, float] = defaultdict(float)
    state = None
    batches = task.batches(split, batch_size)
    for i in tqdm(range(len(batches)), desc=f"eval {split}", leave=False, disable=not progress, file=sys.stderr, mininterval=1.0):
        batch = batches[i]
        out = model(batch, state)
        state = out.state
        for k, v in criterion(out, batch).stats.items():
            stats[k] += float(v)
    return criterion.summarize(dict(stats))


def set_epoch(model: torch.nn.Module, epoch: int) -> None:
    """Tell the modules that change with the epoch (``set_epoch``, as torch's samplers have it) which one
    is being trained: the first-epoch treatment of pretrained word vectors."""
    for module in model.modules():
        if hasattr(module, "set_epoch"):
            module.set_epoch(epoch)


def eval_points(n_batches: int, evals_per_epoch: int) -> set[int]:
    """Batch counts (1-based) after which to validate: evenly spread, always including the last."""
    k = max(1, min(evals_per_epoch, n_batches))
    return {max(1, round(n_batches * (j + 1) / k)) for j in range(k)}


class MetricsLog:
    """``metrics.jsonl``: one JSON object per line; TensorBoard alongside if asked for."""

    def __init__(self, path: Path, tensorboard: bool = False):
        self.path = path
        self.writer = None
        if tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter
            except ImportError:
                raise MemreadError("train.tensorboard = true needs TensorBoard: pip install 'memread[tensorboard]'") from None
            self.writer = SummaryWriter(str(path.parent / "tensorboard"))

    def truncate_after(self, step: int) -> None:
        """Drop records a killed run wrote after the checkpoint it is resumed from."""
        if not self.path.exists():
            return
        kept = []
        for line in self.path.read_text(encoding="utf-8").splitlines():
            try:
                if json.loads(line).get("step", 0) <= step:
                    kept.append(line)
            except json.JSONDecodeError:
                continue  # a line cut short by the kill
        self.path.write_text("".join(k + "\n" for k in kept), encoding="utf-8")

    def write(self, record: dict) -> None:
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")
        if self.writer is not None:
            for k, v in record.items():
                if isinstance(v, (int, float)) and k not in ("step", "epoch", "epochs_done"):
                    self.writer.add_scalar(f"{record.get('event', 'train')}/{k}", v, record.get("step", 0))
            self.writer.flush()


class Trainer:
    def __init__(self, cfg: ExperimentConfig, task: Any, model: torch.nn.Module, run_dir: Path,
                 vocab_fingerprint: str, payload: dict | None = None):
        self.cfg, self.task, self.model, self.run_dir = cfg, task, model, Path(run_dir)
        self.vocab_fingerprint = vocab_fingerprint
        T = cfg.train
        self.criterion = task.build_criterion(model)
        self.optimizer = build_optimizer(model.named_parameters(), T)
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.schedule = PlateauSchedule(self.criterion.higher_is_better, T.lr_decay, T.min_improvement)
        self.epoch = 0
        self.step_in_epoch = 0
        self.epoch_batches = 0  # batches in the epoch being trained (for ``epochs_done`` in valid records)
        self.global_step = 0
        self.finished = False
        self.stopped: str | None = None  # why a finished run stopped: "epochs", "max_steps" or "early"
        self.carry: Any = None
        self.log = MetricsLog(self.run_dir / "metrics.jsonl", T.tensorboard)
        if payload is not None:
            self._restore(payload)

    # ------------------------------------------------------------------ checkpoints
    def _payload(self) -> dict:
        return {
            "config": self.cfg.to_json(),
            "vocab": self.vocab_fingerprint,
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "loop": {
                "epoch": self.epoch,
                "step_in_epoch": self.step_in_epoch,
                "global_step": self.global_step,
                "finished": self.finished,
                "stopped": self.stopped,
                "schedule": self.schedule.state_dict(),
            },
            "rng": torch.get_rng_state(),
            "carry": {"structure": json.dumps(state_structure(self.carry)), "tensors": flatten_state(self.carry)},
        }

    def save(self, name: str) -> None:
        save_checkpoint(self._payload(), self.run_dir / name)

    def _restore(self, payload: dict) -> None:
        self.model.load_state_dict(payload["model"])
        saved = [(g.get("pattern"), g.get("lr_scale", 1.0), len(g["params"])) for g in payload["optimizer"]["param_groups"]]
        wanted = [(g.get("pattern"), g["lr_scale"], len(g["params"])) for g in self.optimizer.param_groups]
        if saved != wanted:
            raise MemreadError(f"{self.run_dir}: the checkpoint's optimizer groups {saved} (pattern, factor, "
                               f"parameters) do not fit train.lr_scale = {dict(self.cfg.train.lr_scale)} "
                               f"{wanted}; resume with the run's own train.lr_scale")
        self.optimizer.load_state_dict(payload["optimizer"])
        for group in self.optimizer.param_groups:  # keep the decayed lr, but honour new [train] settings
            group.setdefault("lr", self.cfg.train.lr)
        loop = payload["loop"]
        self.epoch, self.step_in_epoch = loop["epoch"], loop["step_in_epoch"]
        self.global_step, self.finished = loop["global_step"], loop["finished"]
        self.stopped = loop.get("stopped")  # None in checkpoints from before it was recorded
        if self.finished and self._budget_raised():
            self.finished, self.stopped = False, None  # --resume RUN --set train.epochs=N: go on
        self.schedule.load_state_dict(loop["schedule"])
        torch.set_rng_state(payload["rng"])
        carry = payload["carry"]
        self.carry = unflatten_state(json.loads(carry["structure"]), carry["tensors"])
        self.log.truncate_after(self.global_step)

    def _budget_raised(self) -> bool:
        """Whether a run that ran out of epochs or steps has been given more (an early stop is final)."""
        T = self.cfg.train
        if self.stopped == "epochs":
            return self.epoch < T.epochs and not (T.max_steps and self.global_step >= T.max_steps)
        if self.stopped == "max_steps":
            return (not T.max_steps or self.global_step < T.max_steps) and self.epoch < T.epochs
        return False

    # ------------------------------------------------------------------ the loop
    @property
    def lr(self) -> float:
        return self.optimizer.param_groups[0]["lr"]

    def _validate(self) -> bool:
        """Validate, update the schedule, write checkpoints; True if training should stop."""
        T = self.cfg.train
        metrics = evaluate(self.model, self.task, "valid", T.eval_batch_size or self.task.default_eval_batch_size,
                           T.progress, self.criterion)
        value = metrics[self.criterion.selection_metric]
        best = self.schedule.step(value, self.optimizer)
        stop_reason = None
        if T.patience and self.schedule.bad_evals >= T.patience:
            stop_reason = f"no improvement in {T.patience} evaluations"
        elif T.min_lr and self.lr < T.min_lr:
            stop_reason = f"learning rate below {T.min_lr}"
        done = {} if not self.epoch_batches else {"epochs_done": self.epoch + self.step_in_epoch / self.epoch_batches}
        self.log.write({"event": "valid", "step": self.global_step, "epoch": self.epoch, **done, **metrics,
                        "selection_metric": self.criterion.selection_metric, "lr": self.lr, "best": best})
        if T.progress:
            tqdm.write(
                f"step {self.global_step} epoch {self.epoch}: valid {self.criterion.selection_metric} {value:.4f}"
                f"{' (best)' if best else ''}, lr {self.lr:.4g}", file=sys.stderr
            )
        if best:
            self.save("checkpoint_best.pt")
        elif T.restore_best and self.schedule.worse_than_best(value) and not stop_reason:
            self._restore_best()
        if stop_reason:
            self.finished, self.stopped = True, "early"
            if T.progress:
                tqdm.write(f"early stop: {stop_reason}", file=sys.stderr)
        self.save("checkpoint_last.pt")
        return stop_reason is not None

    def _restore_best(self) -> None:
        """Go back to the best weights (and optimizer state) after a worse validation, keeping the decayed
        lr and the position in the data; the carried state came from the abandoned weights, so it restarts."""
        best = load_checkpoint(self.run_dir / "checkpoint_best.pt")
        lrs = [group["lr"] for group in self.optimizer.param_groups]
        self.model.load_state_dict(best["model"])
        self.optimizer.load_state_dict(best["optimizer"])
        for group, lr in zip(self.optimizer.param_groups, lrs):
            group["lr"] = lr
        self.carry = None
        self.log.write({"event": "restore_best", "step": self.global_step, "epoch": self.epoch,
                        "best_step": best["loop"]["global_step"], "lr": self.lr})
        if self.cfg.train.progress:
            tqdm.write(f"restored the best weights (step {best['loop']['global_step']}), lr {self.lr:.4g}", file=sys.stderr)

    def train_step(self, batch: dict) -> Loss:
        """One optimizer step on ``batch`` with the carried state; the carry moves on."""
        T = self.cfg.train
        self.model.train()
        out = self.model(batch, self.carry)
        loss = self.criterion(out, batch)
        self.optimizer.zero_grad(set_to_none=True)
        loss.value.backward()
        if T.clip > 0:
            torch.nn.utils.clip_grad_norm_(self.params, T.clip)
        self.optimizer.step()
        self.carry = detach_state(out.state)
        self.global_step += 1
        value = float(loss.value.detach())
        if not math.isfinite(value):
            raise MemreadError(f"training diverged at step {self.global_step} (loss {value}); "
                               f"lower train.lr or set train.clip; checkpoint_last.pt holds the last good state")
        return loss

    def fit(self) -> None:
        T = self.cfg.train
        while not self.finished and self.epoch < T.epochs:
            batches = self.task.batches("train", T.batch_size, self.epoch, T.seed)
            set_epoch(self.model, self.epoch)
            n = self.epoch_batches = len(batches)
            evals = eval_points(n, T.evals_per_epoch)
            loss_sum, loss_n, tokens, t0 = 0.0, 0, 0, time.perf_counter()
            stats: dict[str, float] = defaultdict(float)
            bar = tqdm(total=n, initial=self.step_in_epoch, desc=f"epoch {self.epoch + 1}/{T.epochs}",
                       disable=not T.progress, file=sys.stderr, mininterval=1.0, dynamic_ncols=True)
            stop = False
            for i in range(self.step_in_epoch, n):
                batch = batches[i]
                out = self.train_step(batch)
                self.step_in_epoch = i + 1
                loss_sum += float(out.value.detach())
                loss_n += 1
                for k, v in out.stats.items():
                    stats[k] += float(v)
                tokens += self.task.tokens_in(batch)
                bar.update(1)
                if self.global_step % T.log_every == 0 or i + 1 == n:
                    dt = max(time.perf_counter() - t0, 1e-9)
                    metrics = self.criterion.summarize(dict(stats))
                    record = {"event": "train", "step": self.global_step, "epoch": self.epoch,
                              "loss": loss_sum / loss_n, **{f"train_{k}": v for k, v in metrics.items()},
                              "lr": self.lr, "tokens_per_s": tokens / dt}
                    self.log.write(record)
                    shown = self.criterion.selection_metric
                    bar.set_postfix({"loss": f"{record['loss']:.3f}", shown: f"{metrics[shown]:.3f}", "tok/s": f"{record['tokens_per_s']:.0f}", "lr": f"{self.lr:.3g}"})
                    loss_sum, loss_n, tokens, t0 = 0.0, 0, 0, time.perf_counter()
                    stats = defaultdict(float)
                capped = bool(T.max_steps) and self.global_step >= T.max_steps
                if i + 1 in evals or capped:
                    stop = self._validate() or capped
                    if capped:
                        self.finished, self.stopped = True, self.stopped or "max_steps"
                        self.save("checkpoint_last.pt")
                elif T.checkpoint_every and self.global_step % T.checkpoint_every == 0:
                    self.save("checkpoint_last.pt")
                if stop:
                    break
            bar.close()
            if stop or self.finished:
                break
            self.epoch += 1
            self.step_in_epoch = 0
            self.carry = None
        self.finished, self.stopped = True, self.stopped or "epochs"
        self.save("checkpoint_last.pt")
