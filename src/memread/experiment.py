"""Putting an experiment together: task + vocabulary + model + trainer, in a run directory.

A run directory holds ``config.json`` (the full, validated experiment), ``vocab.json``, ``data_root.json``
(the data root it is trained with: the default of the verbs that read it again, :mod:`memread.data.root`),
``metrics.jsonl``, ``checkpoint_last.pt``, ``checkpoint_best.pt`` and, when training ends,
``final.json`` (the best checkpoint's validation and test metrics) with ``units-{valid,test}.npz`` (its unit
statistics, for ``memread compare``: :mod:`memread.training.units`).
"""

from __future__ import annotations

import dataclasses
import json
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable

import torch

from memread.config import SECTIONS, ExperimentConfig, apply_overrides, experiment_from_dict, upgrade_stored
from memread.data.root import RUN_FILE, data_root_record
from memread.data.vocab import Vocab
from memread.errors import MemreadError, human_bytes, os_error_line
from memread.inference.archive import archive_config, is_archive, load_archive
from memread.tasks import Task
from memread.training.memory import available_memory
from memread.training.checkpoint import (check_compatible, check_loop_state, clear_leftover_temps, load_checkpoint,
                                         load_model_state, write_text_atomically)
from memread.training.loop import Trainer, evaluate
from memread.training.distributed import Placement, on_main, placement, resolve_device
from memread.training.runlock import RunLock
from memread.training.units import save_units


def build_task(cfg: ExperimentConfig, data_root: Path, vocab: Vocab | None = None) -> Task:
    return Task(cfg, data_root, vocab=vocab)


def build_model(cfg: ExperimentConfig, task: Task, device: Any = None, training: bool = False) -> torch.nn.Module:
    """``cfg``'s model, refused in one line before anything is allocated when it cannot fit on ``device`` (the CPU by
    default): its weights, and for ``training`` their gradients and the optimizer's state as well."""
    T = cfg.train
    copies = (2 + (2 if T.optimizer == "adam" else 1 if T.momentum else 0)) if training else 1
    return task.build_model(T.seed, copies=copies, device=device)


def _read_raw_config(run_dir: Path) -> dict:
    path = run_dir / "config.json"
    if not path.is_file():
        raise MemreadError(f"{run_dir}: not a memread run directory (no config.json)")
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise MemreadError(f"{path}:{e.lineno}: not valid JSON ({e.msg})") from None
    except OSError as e:
        raise MemreadError(os_error_line(e, path)) from None
    if not isinstance(raw, dict):
        raise MemreadError(f"{path}: not a memread run config (a JSON object expected)")
    return upgrade_stored(raw, str(path))


def read_run_config(run_dir: Path, overrides: list[str] = ()) -> ExperimentConfig:
    """The typed config of a run directory (``--set train.KEY=V`` applied), or of a model archive."""
    if is_archive(run_dir):
        if overrides:
            raise MemreadError(f"{run_dir}: a model archive cannot be trained on; --set applies to run directories")
        return archive_config(Path(run_dir))[0]
    path = run_dir / "config.json"
    raw = _read_raw_config(run_dir)
    for o in overrides:
        if not o.strip().startswith("train."):
            raise MemreadError(f"--set {o!r}: a resumed run can only change [train] settings; start a new run to change {o.split('=')[0]}")
    return experiment_from_dict(apply_overrides(raw, list(overrides)), str(path))


# [train] keys a resumed run cannot take a new value of: they fix the data order or live in the optimizer state
FIXED_ON_RESUME = ("optimizer", "batch_size", "seed", "betas", "momentum", "weight_decay")
# [train] keys that do not shape the checkpoint: a resume may differ from config.json in them without --set
ANY_ON_RESUME = ("train.device", "train.progress", "train.tensorboard", "train.loggers", "train.mlflow_uri",
                 "train.log_artifact")


def _locked(run_dir: Path, work: Callable[[], None], where: Placement) -> RunLock | None:
    """On the main process: take ``run_dir``'s writer lock, clear the temp files a killed writer left, and do
    ``work`` under it (the lock is given back if ``work`` fails); the other processes of a torchrun job wait, and
    fail with it. The lock (main) or None."""

    def take() -> RunLock:
        try:
            run_dir.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise MemreadError(os_error_line(e, run_dir)) from None
        lock = RunLock(run_dir).acquire()
        try:
            removed = clear_leftover_temps(run_dir)
            if removed:
                print(f"{run_dir}: removed what a writer killed while saving left: {', '.join(removed)}", file=sys.stderr)
            work()
            return lock
        except BaseException:
            lock.release()
            raise

    return on_main(take, where)


def _record_data_root(run_dir: Path, data_root: Path) -> None:
    """Write the data root a run trains with into it (``data_root.json``), when it is not there already."""
    text = data_root_record(data_root)
    path = run_dir / RUN_FILE
    try:
        if path.read_text(encoding="utf-8") == text:
            return
    except (OSError, UnicodeDecodeError):
        pass
    write_text_atomically(path, text)


def _write_new_run(cfg: ExperimentConfig, run_dir: Path, task: Task, data_root: Path) -> None:
    """Under the lock: clear what a run that never checkpointed left, write config.json and vocab.json. A folder
    with ``final.json`` but no checkpoint holds an ended run's records (kept from the machine that trained it, as
    ``scripts/claims.py`` puts them back for ``memread compare``): refused, never cleared."""
    if (run_dir / "final.json").exists():
        raise MemreadError(f"{run_dir}: holds an ended run's records (final.json) without its checkpoints (trained "
                           f"elsewhere?): nothing to train there; compare it as it is, or choose another --run-dir. "
                           f"Nothing was changed")
    for path in [run_dir / n for n in ("metrics.jsonl", "checkpoint_best.pt")] + [
            *run_dir.glob("units-*.npz")]:
        path.unlink(missing_ok=True)
    write_text_atomically(run_dir / "config.json", cfg.to_json())
    task.vocab.save(run_dir / "vocab.json")
    _record_data_root(run_dir, data_root)


def start_run(cfg: ExperimentConfig, run_dir: Path, data_root: Path, where: Placement | None = None) -> Trainer:
    """A new run in ``run_dir``. The data is read and the model built before anything is written; a folder
    whose run wrote no checkpoint yet (killed early, or stopped by a bad value) is started again.
    ``where``: this process's device and place in a torchrun job (default: ``train.device``, alone)."""
    run_dir = Path(run_dir)
    where = where if where is not None else placement(cfg.train.device)
    if (run_dir / "checkpoint_last.pt").exists():
        raise MemreadError(f"{run_dir}: already holds a run; continue it with --resume, or choose another --run-dir")
    task = build_task(cfg, data_root)
    for split in ("valid", "test"):  # read every split now: a bad file fails before the run starts
        task.batches(split, 1)
    model = build_model(cfg, task, where.device, training=True)  # one line if it cannot fit, before anything is written
    _check_batch_fits(cfg, task, where)

    def prepare() -> None:
        if (run_dir / "checkpoint_last.pt").exists():  # written while we read the data
            raise MemreadError(f"{run_dir}: already holds a run; continue it with --resume, or choose another --run-dir")
        if (run_dir / "config.json").exists():
            print(f"{run_dir}: its run wrote no checkpoint yet; starting it again", file=sys.stderr)
        _write_new_run(cfg, run_dir, task, data_root)

    lock = _locked(run_dir, prepare, where)
    return Trainer(cfg, task, model, run_dir, task.vocab.fingerprint(), lock=lock, where=where)


def _check_batch_fits(cfg: ExperimentConfig, task: Task, where: Placement) -> None:
    """Refuse, before anything is written, a training batch that cannot fit in memory: at the least its token
    positions (this process's share) times the embedding width (the reader's input) and, for a language model,
    times the vocabulary (the output scores) are held at once, 4 bytes each (2 under mixed precision). A batch
    larger than the training split is the whole split (a stream's: one column per token), which may be what
    does not fit (``train.batch_size = 1000000000``)."""
    T = cfg.train
    batches = task.batches("train", T.batch_size, 0, T.seed)
    if len(batches) == 0:
        return
    ids = [t for t in batches[0].values() if isinstance(t, torch.Tensor) and t.dtype in (torch.long, torch.int)]
    if not ids:
        return
    largest = max(ids, key=lambda t: t.numel())
    positions = largest.numel() // where.world
    emb, vocab = getattr(cfg.head, "emb", 0), len(task.vocab) if task.name == "lm" else 0
    need = positions * (emb + vocab) * (4 if T.precision == "32" else 2)
    free = available_memory(where.device)
    if free is None or need <= free:
        return
    what = f"its {emb}-wide embeddings" + (f" and its scores over {vocab:,} words" if vocab else "")
    shape = " x ".join(f"{n:,}" for n in largest.shape)
    clamp = " (the whole training split: a batch is at most that)" if largest.size(0) < T.batch_size else ""
    raise MemreadError(f"train.batch_size = {T.batch_size}: one training batch, {shape} tokens{clamp}, needs at least "
                       f"{human_bytes(need)} for {what}, and {where.device} has {human_bytes(free)} free; lower "
                       f"train.batch_size. Nothing was written")


def _refuse_unreachable(cfg: ExperimentConfig, loop: dict, overrides: list[str], run_dir: Path) -> None:
    """A resume whose [train] values cannot take effect says so (and nothing is changed)."""
    T, step, epoch = cfg.train, loop["global_step"], loop["epoch"]
    keys = [o.split("=", 1)[0].strip()[len("train."):] for o in overrides]
    fixed = [k for k in keys if k in FIXED_ON_RESUME]
    if fixed:
        raise MemreadError(f"--set train.{fixed[0]}: a resumed run keeps its {fixed[0]} (it fixes the data order or the "
                           f"optimizer state); start a new run to change it. Nothing was changed")
    if T.max_steps and step > T.max_steps:
        raise MemreadError(f"train.max_steps = {T.max_steps}: the run is already at step {step}. Nothing was changed")
    if epoch >= T.epochs and not loop["finished"]:
        raise MemreadError(f"train.epochs = {T.epochs}: the run is already in epoch {epoch + 1}. Nothing was changed")
    stopped = loop.get("stopped")
    if not loop["finished"] or Trainer.budget_raised(T, stopped, epoch, step):
        return
    if stopped == "early":
        why = "it stopped early (no improvement on valid); an early stop is final: start a new run to train longer"
    elif stopped == "max_steps" and "epochs" in keys and T.max_steps and step >= T.max_steps:
        why = (f"it stopped at train.max_steps = {T.max_steps}; more epochs alone give it no more steps: raise "
               f"train.max_steps as well (or set it to 0)")
    else:
        why = (f"it finished (train.epochs = {T.epochs}, train.max_steps = {T.max_steps}, at step {step}); raise "
               f"train.epochs or train.max_steps with --set to train on")
    if overrides or (run_dir / "final.json").exists():
        raise MemreadError(f"{run_dir}: nothing to resume: {why}. Nothing was changed")


def resume_run(run_dir: Path, data_root: Path, overrides: list[str] = (), where: Placement | None = None) -> Trainer:
    """Continue the run in ``run_dir`` from ``checkpoint_last.pt`` exactly; ``overrides`` (``train.KEY=V``) give
    it new [train] values, refused with one line when they cannot take effect. A run that wrote no
    checkpoint yet is started from its config.json."""
    run_dir = Path(run_dir)
    overrides = list(overrides)
    cfg = read_run_config(run_dir, overrides)
    where = where if where is not None else placement(cfg.train.device)
    ckpt = run_dir / "checkpoint_last.pt"
    if not ckpt.exists():
        print(f"{ckpt}: the run wrote no checkpoint yet; starting it from its config.json", file=sys.stderr)
        task = build_task(cfg, data_root)
        model = build_model(cfg, task, where.device, training=True)

        lock = _locked(run_dir, lambda: _write_new_run(cfg, run_dir, task, data_root), where)
        return Trainer(cfg, task, model, run_dir, task.vocab.fingerprint(), lock=lock, where=where)

    def check() -> None:  # under the lock: the checkpoint fits config.json, and the --set values can take effect
        vocab = Vocab.load(run_dir / "vocab.json")
        payload = load_checkpoint(ckpt)
        # config.json must describe the run that wrote the checkpoint, [train] included; --set names what changes
        keys = tuple(o.split("=", 1)[0].strip() for o in overrides) + ANY_ON_RESUME
        check_compatible(payload, read_run_config(run_dir).to_dict(), vocab.fingerprint(), ckpt,
                         sections=SECTIONS, ignore=keys)
        loop = check_loop_state(payload, ckpt)  # each key of the type the loop wrote
        _refuse_unreachable(cfg, loop, overrides, run_dir)

    lock = _locked(run_dir, check, where)
    vocab = Vocab.load(run_dir / "vocab.json")
    payload = load_checkpoint(ckpt)
    task = build_task(cfg, data_root, vocab=vocab)
    model = build_model(cfg, task, where.device, training=True)
    try:
        load_model_state(model, payload, ckpt)
        if lock is not None:  # the main process, under the lock: where the run goes on reading its data from
            _record_data_root(run_dir, data_root)
        # config.json takes the new [train] values with the first checkpoint written under them
        return Trainer(cfg, task, model, run_dir, vocab.fingerprint(), payload=payload, lock=lock, where=where)
    except BaseException:
        if lock is not None:
            lock.release()
        raise


def load_trained(run_dir: Path, data_root: Path, which: str = "best", device: str = "cpu",
                 context: str | None = None) -> tuple[ExperimentConfig, Any, torch.nn.Module]:
    """Config, task and model with the weights of ``checkpoint_{which}.pt`` on ``device`` (a checkpoint
    written on any device loads on any other), ready to evaluate; ``run_dir`` may also be a model archive
    (``memread export``), which holds one set of weights. ``context`` ("stream" or "sentence"): a language
    model's data read in that protocol instead of its own (:mod:`memread.data.sentence_lm`)."""
    run_dir = Path(run_dir)
    if is_archive(run_dir):
        if context is not None:
            raise MemreadError(f"{run_dir}: a model archive is read in its own protocol; evaluate its run folder "
                               f"to read it in another")
        return load_archive(run_dir, data_root, device)
    cfg = read_run_config(run_dir)
    vocab = Vocab.load(run_dir / "vocab.json")
    ckpt = run_dir / f"checkpoint_{which}.pt"
    payload = load_checkpoint(ckpt)
    check_compatible(payload, cfg.to_dict(), vocab.fingerprint(), ckpt)
    if context is not None:
        cfg = with_context(cfg, context, run_dir)
    task = build_task(cfg, data_root, vocab=vocab)
    model = build_model(cfg, task, resolve_device(device))
    load_model_state(model, payload, ckpt)
    model.to(resolve_device(device)).eval()
    return cfg, task, model


def with_context(cfg: ExperimentConfig, context: str, where: Path) -> ExperimentConfig:
    """``cfg`` with its language-model data read as a stream or sentence by sentence."""
    if not hasattr(cfg.data, "context"):
        raise MemreadError(f"{where}: --context applies to a language model; this run's data is '{cfg.data.name}'")
    if context not in ("stream", "sentence"):
        raise MemreadError(f"{where}: --context must be stream or sentence, got {context!r}")
    data = dataclasses.replace(cfg.data, context=context, documents=False) if hasattr(cfg.data, "documents") else \
        dataclasses.replace(cfg.data, context=context)
    return dataclasses.replace(cfg, data=data)


def final_evaluation(run_dir: Path, data_root: Path, splits=("valid", "test"), progress: bool = False,
                     device: str = "cpu") -> dict:
    """Evaluate the best checkpoint on ``splits`` (on ``device``, at the run's precision); write and return
    ``final.json``."""
    cfg, task, model = load_trained(run_dir, data_root, "best", device)
    bs = cfg.train.eval_batch_size or task.default_eval_batch_size
    result = {}
    for split in splits:
        units: list = []
        result[split] = evaluate(model, task, split, bs, progress, precision=cfg.train.precision, units=units)
        if units and all(u is not None for u in units):  # what memread compare pairs, checkpoints or none
            save_units(run_dir, split, units, "best", bs, cfg.train.precision)
    write_text_atomically(Path(run_dir) / "final.json", json.dumps(result, indent=2))
    return result


def first_losses(cfg: ExperimentConfig, data_root: Path, steps: int = 2, data: Any = None) -> list[float]:
    """The losses of a config's first ``steps`` optimizer steps, as ``memread train`` takes them (seeded model,
    first training batches, the loop's own step) without a run directory: torchtune's recipe check, the numbers
    a refactor must not change. ``data``: an already built pipeline of ``cfg.data``."""
    task = Task(cfg, data_root, data=data)
    model = task.build_model(cfg.train.seed)
    with tempfile.TemporaryDirectory() as tmp:
        trainer = Trainer(cfg, task, model, Path(tmp), task.vocab.fingerprint())
        batches = task.batches("train", cfg.train.batch_size, 0, cfg.train.seed)
        continues = getattr(batches, "continues", False)
        return [float(trainer.train_step(batches[i], continues).value.detach()) for i in range(steps)]
