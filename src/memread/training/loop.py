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

import math
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import torch
from tqdm import tqdm

from memread.config import ExperimentConfig
from memread.criteria.base import Loss
from memread.errors import MemreadError
from memread.modules.precision import autocast as precision_autocast
from memread.readers.base import detach_state
from memread.training.checkpoint import load_checkpoint, save_checkpoint, write_text_atomically
from memread.training.clock import PausableClock
from memread.training.distributed import (Placement, combine_loss, on_main, resolve_device, sum_over_processes,
                                          to_device)
from memread.training.metrics_log import MetricsLog, last_is_best, valid_records
from memread.training.optim import PlateauSchedule, build_optimizer
from memread.training.state import build_payload, fresh_running, restore

# what other modules import from here (MetricsLog and its readers live in .metrics_log, the checkpoint's contents
# in .state)
__all__ = ["AMP_DTYPES", "ENDED", "TIME_CHECK_EVERY", "WALL_CLOCK_KEYS", "Diverged", "MetricsLog", "Trainer",
           "autocast", "eval_points", "evaluate", "last_is_best", "set_epoch", "valid_records"]


AMP_DTYPES = {"32": None, "bf16-mixed": torch.bfloat16, "16-mixed": torch.float16}
# under torchrun, the steps between two asks of process 0's clock for train.max_minutes (each ask is a collective)
TIME_CHECK_EVERY = 16
# the keys of a train log that time it: they differ between two runs whose logs are otherwise equal
WALL_CLOCK_KEYS = ("tokens_per_s", "seconds")


def autocast(device: torch.device, precision: str):
    """``torch.autocast`` for ``train.precision`` on ``device`` (a no-op context for "32"; on a CPU whose oneDNN
    cannot run the fused LSTM in that precision, with oneDNN off: :func:`memread.modules.precision.autocast`)."""
    return precision_autocast(device.type, AMP_DTYPES[precision])


@torch.no_grad()
def evaluate(model: torch.nn.Module, task: Any, split: str, batch_size: int, progress: bool = False,
             criterion: Any = None, where: Placement | None = None, precision: str = "32",
             units: list | None = None) -> dict[str, float]:
    """Metrics of ``model`` on a whole split (state carried across batches, as in training), on the model's
    device. Under torchrun the processes share the work (independent batches by index; a stream whose
    batches continue each other is read by process 0 alone) and every process gets the same metrics.
    ``units``: a list that receives, batch by batch, the criterion's unit statistics ``{key: (U_b,) numpy}``
    (:attr:`memread.criteria.base.Loss.units`, for :mod:`memread.tools.compare`; None for a batch it does not split
    by unit); one process only."""
    model.eval()
    device = next(model.parameters()).device
    where = where if where is not None else Placement(device)
    criterion = criterion if criterion is not None else task.build_criterion(model)
    stats: dict[str, float] = defaultdict(float)
    state = None
    batches = task.batches(split, batch_size)
    continues = getattr(batches, "continues", False)  # a stream: each batch goes on from the last one's state
    if not where.distributed:
        mine = range(len(batches))
    elif continues:
        mine = range(len(batches)) if where.main else range(0)
    else:
        mine = range(where.rank, len(batches), where.world)
    if units is not None and where.distributed:
        raise MemreadError("unit statistics (memread compare) are collected by one process: run it without torchrun")
    for i in tqdm(mine, desc=f"eval {split}", leave=False, disable=not (progress and where.main), file=sys.stderr,
                  mininterval=1.0):
        batch = to_device(batches[i], device)
        with autocast(device, precision):
            out = model(batch, state)
            loss = criterion(out, batch)
        state = out.state if continues else None
        for k, v in loss.stats.items():
            stats[k] += float(v)
        if units is not None:  # None for a batch the criterion does not split by unit
            units.append(None if loss.units is None else
                         {k: v.double().cpu().numpy() for k, v in loss.units.items()})
    return criterion.summarize(sum_over_processes(dict(stats), where))


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


# the stops after which a run has nothing left to train (a time limit's, ``"max_minutes"``, goes on when started again)
ENDED = ("early", "epochs", "max_steps")


class Diverged(MemreadError):
    """Training diverged: a loss that is not finite, or one (or a validation metric) past ``train.divergence``."""


class Trainer:
    """Trains ``model`` on ``task`` in ``run_dir``. ``lock``: the run directory's writer lock
    (:class:`memread.training.runlock.RunLock`), held until :meth:`close` (or the end of a ``with`` block)."""

    def __init__(self, cfg: ExperimentConfig, task: Any, model: torch.nn.Module, run_dir: Path,
                 vocab_fingerprint: str, payload: dict | None = None, lock: Any = None, where: Placement | None = None):
        T = cfg.train
        self.where = where if where is not None else Placement(resolve_device(T.device))
        self.device = self.where.device
        self.cfg, self.task, self.model, self.run_dir = cfg, task, model.to(self.device), Path(run_dir)
        self.lock = lock
        self.vocab_fingerprint = vocab_fingerprint
        # under torchrun the training forward goes through DDP (gradients averaged over the processes)
        self.train_model = model
        if self.where.distributed:
            from torch.nn.parallel import DistributedDataParallel

            self.train_model = DistributedDataParallel(
                model, device_ids=[self.device] if self.device.type == "cuda" else None)
        self.scaler = torch.amp.GradScaler(self.device.type) if T.precision == "16-mixed" else None
        self.criterion = task.build_criterion(model)
        self.optimizer = build_optimizer(model.named_parameters(), T)
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.schedule = PlateauSchedule(self.criterion.higher_is_better, T.lr_decay, T.min_improvement)
        self.epoch = 0
        self.step_in_epoch = 0
        self.epoch_batches = 0  # batches in the epoch being trained (for ``epochs_done`` in valid records)
        self.global_step = 0
        self.finished = False
        self.stopped: str | None = None  # why a finished run stopped: "epochs", "max_steps", "max_minutes" or "early"
        self.carry: Any = None
        self.first_loss: float | None = None  # the first step's loss: the scale of train.divergence
        self.tokens_trained = 0  # this process's training tokens so far, every epoch (what a run cost)
        # wall seconds in fit() before this process (every resume's, validations included: what a run cost); None
        # for a run resumed from a checkpoint written before they were counted (its cost stays unknown)
        self.seconds_before: float | None = 0.0
        # the same split by the device kind that trained them ({"cuda": s, "cpu": s}: a run begun on a lent GPU and
        # finished on a CPU); None where a checkpoint from before they were split began the run
        self.seconds_by_device: dict[str, float] | None = {}
        self.running = fresh_running()  # sums since the last train record (saved: a resume logs the same)
        self.clock = PausableClock()  # wall seconds less SIGTSTP pauses: what the run's seconds count
        if self.where.main and (T.loggers or T.log_artifact):  # a missing library: one line, before any training
            from memread.training.loggers import check_available

            if T.log_artifact and not T.loggers:
                raise MemreadError("train.log_artifact = true logs the archive to train.loggers, which is empty: "
                                   "name them (train.loggers = [\"mlflow\"]), or export it with memread export")
            check_available(T.loggers)
        self.log = MetricsLog(self.run_dir / "metrics.jsonl", T.tensorboard, enabled=self.where.main)
        self._config_pending = payload is not None and payload["config"] != cfg.to_json()
        if payload is not None:
            restore(self, payload)

    def close(self) -> None:
        """Give the run directory back to other writers."""
        if self.lock is not None:
            self.lock.release()

    def __enter__(self) -> "Trainer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------------ checkpoints (what they hold: .state)
    def save(self, name: str) -> None:
        payload = build_payload(self)  # every process takes part (its random state and carry are in it)

        def write() -> None:
            save_checkpoint(payload, self.run_dir / name)
            if name == "checkpoint_last.pt" and self._config_pending:
                # a resume under new [train] values: config.json describes the run once a checkpoint does
                write_text_atomically(self.run_dir / "config.json", self.cfg.to_json())

        on_main(write, self.where)  # process 0 writes; the others wait for the file (restore_best reads it)
        if name == "checkpoint_last.pt":
            self._config_pending = False

    @staticmethod
    def budget_raised(T: Any, stopped: str | None, epoch: int, step: int) -> bool:
        """Whether a run that ran out of epochs or steps has been given more (an early stop is final; a run
        stopped by its time limit, ``max_minutes``, has a new allowance in each process)."""
        if stopped in ("epochs", "max_minutes"):
            return epoch < T.epochs and not (T.max_steps and step >= T.max_steps)
        if stopped == "max_steps":
            return (not T.max_steps or step < T.max_steps) and epoch < T.epochs
        return False

    # ------------------------------------------------------------------ the cost clock
    def seconds_by_device_so_far(self) -> dict[str, float] | None:
        """The seconds trained by each device kind, this process's fit so far included (None: not split)."""
        if self.seconds_by_device is None:
            return None
        kind = self.device.type
        return {**self.seconds_by_device, kind: self.seconds_by_device.get(kind, 0.0) + self.since_fit()}

    def since_fit(self) -> float:
        """Clock seconds since this process's fit began."""
        return self.clock() - self._fit_t0 if getattr(self, "_fit_t0", None) is not None else 0.0

    def since_resume(self) -> float:
        """Clock seconds since the last train record (or this process's fit began)."""
        return self.clock() - self._t0 if getattr(self, "_t0", None) is not None else 0.0

    def _kept(self) -> str:
        """What a stopped run keeps, said honestly."""
        kept = []
        for name in ("checkpoint_last.pt", "checkpoint_best.pt"):
            try:
                step = load_checkpoint(self.run_dir / name)["loop"]["global_step"]
                kept.append(f"{name} (step {step})")
            except (MemreadError, KeyError, TypeError):
                continue
        if not kept:
            return (f"no checkpoint was written, so the folder can be started again: memread train CONFIG --run-dir "
                    f"{self.run_dir} --set train.lr=LOWER")
        return (f"kept {' and '.join(kept)}; continue from the last with a lower learning rate: memread train --resume "
                f"{self.run_dir} --set train.lr=LOWER")

    def _diverged(self, what: str) -> Diverged:
        self.log.write({"event": "diverged", "step": self.global_step, "epoch": self.epoch, "reason": what})
        return Diverged(f"training diverged at step {self.global_step}: {what}; {self._kept()}")

    # ------------------------------------------------------------------ the loop
    @property
    def lr(self) -> float:
        return self.optimizer.param_groups[0]["lr"]

    def _validate(self, counted: bool = True) -> bool:
        """Validate, update the schedule, write checkpoints; True if training should stop. A validation that is not
        ``counted`` (a cap stopped the run between evaluation points) is logged and may write the best checkpoint,
        but leaves the schedule (decay, patience, restore_best) as it was: :meth:`PlateauSchedule.record`."""
        T = self.cfg.train
        metrics = evaluate(self.model, self.task, "valid", T.eval_batch_size or self.task.default_eval_batch_size,
                           T.progress, self.criterion, self.where, T.precision)
        value = metrics[self.criterion.selection_metric]
        name = self.criterion.selection_metric
        if not math.isfinite(value):
            raise self._diverged(f"validation {name} is {value}")
        best_so_far = self.schedule.best_value
        if (T.divergence and not self.criterion.higher_is_better and best_so_far is not None
                and value > T.divergence * best_so_far):
            raise self._diverged(f"validation {name} {value:.4g} is more than train.divergence = {T.divergence:g} "
                                 f"times the best so far ({best_so_far:.4g})")
        significant = self.schedule.improved(value)  # by train.min_improvement, before the step moves the mark
        best = self.schedule.step(value, self.optimizer) if counted else self.schedule.record(value)
        stop_reason = None
        if counted and T.patience and self.schedule.bad_evals >= T.patience:
            stop_reason = f"no improvement in {T.patience} evaluations"
        elif counted and T.min_lr and self.lr < T.min_lr:
            stop_reason = f"learning rate below {T.min_lr}"
        done = {} if not self.epoch_batches else {"epochs_done": self.epoch + self.step_in_epoch / self.epoch_batches}
        self.log.write({"event": "valid", "step": self.global_step, "epoch": self.epoch, **done, **metrics,
                        "selection_metric": self.criterion.selection_metric, "lr": self.lr, "best": best,
                        # a best by less than min_improvement: the run's own rule counts no progress in it
                        **({"significant": False} if best and not significant else {}),
                        **({} if counted else {"counted": False})})
        if T.progress and self.where.main:
            tqdm.write(
                f"step {self.global_step} epoch {self.epoch + 1}: valid {self.criterion.selection_metric} {value:.4f}"
                f"{' (best)' if best else ''}, lr {self.lr:.4g}", file=sys.stderr
            )
        if best:
            self.save("checkpoint_best.pt")
        elif counted and T.restore_best and self.schedule.worse_than_best(value) and not stop_reason:
            self._restore_best()
        if stop_reason:
            self.finished, self.stopped = True, "early"
            if T.progress and self.where.main:
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
        if self.cfg.train.progress and self.where.main:
            tqdm.write(f"restored the best weights (step {best['loop']['global_step']}), lr {self.lr:.4g}", file=sys.stderr)

    def train_step(self, batch: dict, continues: bool = True) -> Loss:
        """One optimizer step on ``batch`` with the carried state; the carry moves on where the batches
        continue each other (a stream), else the next batch starts from an empty state."""
        T = self.cfg.train
        self.train_model.train()
        batch = to_device(batch, self.device)
        with autocast(self.device, T.precision):
            out = self.train_model(batch, self.carry)
            loss = self.criterion(out, batch)
        # under torchrun: this process's share of the batch's loss, and the batch's loss (decisions use it)
        objective, value = combine_loss(loss.value, loss.weight, self.where)
        self.optimizer.zero_grad(set_to_none=True)
        if self.scaler is not None:  # float16: scale the loss so small gradients survive, unscale to clip
            self.scaler.scale(objective).backward()
            self.scaler.unscale_(self.optimizer)
        else:
            objective.backward()
        if T.clip > 0:
            torch.nn.utils.clip_grad_norm_(self.params, T.clip)
        if self.scaler is not None:
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            self.optimizer.step()
        self.carry = detach_state(out.state) if continues else None
        self.global_step += 1
        self.step_loss = value
        if not math.isfinite(value):
            raise self._diverged(f"the training loss is {value}")
        if self.first_loss is None:
            self.first_loss = value
        elif T.divergence and self.first_loss > 0 and value > T.divergence * self.first_loss:
            raise self._diverged(f"the training loss {value:.4g} is more than train.divergence = {T.divergence:g} "
                                 f"times the first step's ({self.first_loss:.4g})")
        return loss

    def _epochs_shown(self, n: int) -> int:
        """The epochs the run will really train: ``epochs``, or fewer under a ``max_steps`` cap."""
        T = self.cfg.train
        return min(T.epochs, math.ceil(T.max_steps / n)) if T.max_steps and n else T.epochs

    def _log_train(self, bar: Any) -> None:
        """A train record from the sums since the last one (which are part of the checkpoint)."""
        r = self.running
        seconds = max(r["seconds"] + self.since_resume(), 1e-9)
        sums = sum_over_processes({**r["stats"], "_tokens": float(r["tokens"])}, self.where)
        tokens = sums.pop("_tokens")
        metrics = self.criterion.summarize(sums)
        record = {"event": "train", "step": self.global_step, "epoch": self.epoch,
                  "loss": r["loss_sum"] / r["loss_n"], **{f"train_{k}": v for k, v in metrics.items()},
                  "lr": self.lr, "tokens_per_s": tokens / seconds, "seconds": seconds}  # seconds: since the last log
        self.log.write(record)
        shown = self.criterion.selection_metric
        bar.set_postfix({"nll": f"{metrics['nll']:.3f}", shown: f"{metrics[shown]:.3f}",
                         "tok/s": f"{record['tokens_per_s']:.0f}", "lr": f"{self.lr:.3g}"})
        self.running = fresh_running()
        self._t0 = self.clock()

    def _out_of_time(self) -> bool:
        """Whether this process has trained ``max_minutes``. Under torchrun process 0's clock decides for all, asked
        every :data:`TIME_CHECK_EVERY` steps (a broadcast and a wait for the device each time it is asked)."""
        T = self.cfg.train
        if not T.max_minutes:
            return False
        if self.where.distributed and self.global_step % TIME_CHECK_EVERY:
            return False
        late = self.clock() - self._fit_t0 >= 60.0 * T.max_minutes
        if self.where.distributed:
            flag = torch.tensor([float(late)], device=self.device)
            torch.distributed.broadcast(flag, src=0)
            late = bool(flag.item())
        return late

    def fit(self) -> None:
        """Train until the run is finished: its epochs, ``max_steps`` or ``max_minutes`` are spent, or it stopped
        early. A pause given with ``kill -TSTP`` (not ``-STOP``) is not counted in its seconds (:mod:`.clock`)."""
        self.log.open_loggers(self.cfg, self.run_dir)
        status = "failed"
        try:
            with self.clock.counting_pauses():
                self._fit()
            if self.cfg.train.log_artifact and self.log.loggers:
                self.log.log_artifact(self._best_archive())
            status = "finished"
        except KeyboardInterrupt:
            status = "killed"
            raise
        finally:
            self.log.close_loggers(status)

    def _best_archive(self) -> Path:
        """The best checkpoint as a model archive (``memread export``'s), ``RUN/model.safetensors``."""
        import copy

        from memread.version import __version__
        from memread.inference.archive import export_archive
        from memread.training.checkpoint import load_model_state
        from memread.training.loggers import ARCHIVE_NAME

        ckpt = self.run_dir / "checkpoint_best.pt"
        model = copy.deepcopy(self.model)  # export moves it to the CPU
        load_model_state(model, load_checkpoint(ckpt), ckpt)
        return export_archive(self.cfg, self.task.vocab, model, self.run_dir / ARCHIVE_NAME, __version__,
                              source=f"{self.run_dir.resolve()} checkpoint_best.pt")

    def _fit(self) -> None:
        T = self.cfg.train
        self._t0 = self._fit_t0 = self.clock()
        while not self.finished and self.epoch < T.epochs:
            batches = self.task.batches("train", T.batch_size, self.epoch, T.seed)
            if self.where.distributed:  # this process's share of each batch: together, the batch of one process
                batches = batches.shard(self.where.rank, self.where.world)
            set_epoch(self.model, self.epoch)
            n = self.epoch_batches = len(batches)
            evals = eval_points(n, T.evals_per_epoch)
            bar = tqdm(total=n, initial=self.step_in_epoch, desc=f"epoch {self.epoch + 1}/{self._epochs_shown(n)}",
                       disable=not (T.progress and self.where.main), file=sys.stderr, mininterval=1.0,
                       dynamic_ncols=True)
            stop = False
            for i in range(self.step_in_epoch, n):
                batch = batches[i]
                out = self.train_step(batch, getattr(batches, "continues", False))
                self.step_in_epoch = i + 1
                r = self.running
                r["loss_sum"] += self.step_loss  # the mean over the processes under torchrun
                r["loss_n"] += 1
                for k, v in out.stats.items():
                    r["stats"][k] = r["stats"].get(k, 0.0) + float(v)
                tokens = self.task.tokens_in(batch)
                r["tokens"] += tokens
                self.tokens_trained += tokens
                bar.update(1)
                if self.global_step % T.log_every == 0 or i + 1 == n:
                    self._log_train(bar)
                capped = "max_steps" if T.max_steps and self.global_step >= T.max_steps else (
                    "max_minutes" if self._out_of_time() else None)
                if i + 1 in evals or capped:
                    stop = self._validate(counted=i + 1 in evals) or bool(capped)
                    if capped:
                        self.finished, self.stopped = True, self.stopped or capped
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
