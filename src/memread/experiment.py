"""Putting an experiment together: task + vocabulary + model + trainer, in a run directory.

A run directory holds ``config.json`` (the full, validated experiment), ``vocab.json``,
``metrics.jsonl``, ``checkpoint_last.pt``, ``checkpoint_best.pt`` and, when training ends,
``final.json`` (the best checkpoint's validation and test metrics).
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import torch

from memread.config import ExperimentConfig, apply_overrides, experiment_from_dict, upgrade
from memread.data.vocab import Vocab
from memread.errors import MemreadError
from memread.tasks import Task
from memread.training.checkpoint import check_compatible, load_checkpoint, load_model_state
from memread.training.loop import Trainer, evaluate


def build_task(cfg: ExperimentConfig, data_root: Path, vocab: Vocab | None = None) -> Task:
    return Task(cfg, data_root, vocab=vocab)


def build_model(cfg: ExperimentConfig, task: Task) -> torch.nn.Module:
    return task.build_model(cfg.train.seed)


def read_run_config(run_dir: Path, overrides: list[str] = ()) -> ExperimentConfig:
    path = run_dir / "config.json"
    if not path.is_file():
        raise MemreadError(f"{run_dir}: not a memread run directory (no config.json)")
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise MemreadError(f"{path}:{e.lineno}: not valid JSON ({e.msg})") from None
    for o in overrides:
        if not o.strip().startswith("train."):
            raise MemreadError(f"--set {o!r}: a resumed run can only change [train] settings; start a new run to change {o.split('=')[0]}")
    return experiment_from_dict(apply_overrides(upgrade(raw, str(path)), list(overrides)), str(path))


def start_run(cfg: ExperimentConfig, run_dir: Path, data_root: Path) -> Trainer:
    run_dir = Path(run_dir)
    if (run_dir / "checkpoint_last.pt").exists() or (run_dir / "config.json").exists():
        raise MemreadError(f"{run_dir}: already holds a run; continue it with --resume, or choose another --run-dir")
    task = build_task(cfg, data_root)
    for split in ("valid", "test"):  # read every split now: a bad file fails before the run starts
        task.batches(split, 1)
    model = build_model(cfg, task)
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "config.json").write_text(cfg.to_json(), encoding="utf-8")
    task.vocab.save(run_dir / "vocab.json")
    return Trainer(cfg, task, model, run_dir, task.vocab.fingerprint())


def resume_run(run_dir: Path, data_root: Path, overrides: list[str] = ()) -> Trainer:
    run_dir = Path(run_dir)
    cfg = read_run_config(run_dir, overrides)
    vocab = Vocab.load(run_dir / "vocab.json")
    ckpt = run_dir / "checkpoint_last.pt"
    if not ckpt.exists():
        raise MemreadError(f"{ckpt}: nothing to resume (the run wrote no checkpoint yet); start it again")
    payload = load_checkpoint(ckpt)
    check_compatible(payload, cfg.to_dict(), vocab.fingerprint(), ckpt)
    task = build_task(cfg, data_root, vocab=vocab)
    model = build_model(cfg, task)
    load_model_state(model, payload, ckpt)
    trainer = Trainer(cfg, task, model, run_dir, vocab.fingerprint(), payload=payload)
    if cfg.to_json() != payload["config"]:  # [train] overrides that fit the checkpoint: record them
        (run_dir / "config.json").write_text(cfg.to_json(), encoding="utf-8")
    return trainer


def load_trained(run_dir: Path, data_root: Path, which: str = "best") -> tuple[ExperimentConfig, Any, torch.nn.Module]:
    """Config, task and model with the weights of ``checkpoint_{which}.pt``, ready to evaluate."""
    run_dir = Path(run_dir)
    cfg = read_run_config(run_dir)
    vocab = Vocab.load(run_dir / "vocab.json")
    ckpt = run_dir / f"checkpoint_{which}.pt"
    payload = load_checkpoint(ckpt)
    check_compatible(payload, cfg.to_dict(), vocab.fingerprint(), ckpt)
    task = build_task(cfg, data_root, vocab=vocab)
    model = build_model(cfg, task)
    load_model_state(model, payload, ckpt)
    model.eval()
    return cfg, task, model


def final_evaluation(run_dir: Path, data_root: Path, splits=("valid", "test"), progress: bool = False) -> dict:
    """Evaluate the best checkpoint on ``splits``; write and return ``final.json``."""
    cfg, task, model = load_trained(run_dir, data_root, "best")
    bs = cfg.train.eval_batch_size or task.default_eval_batch_size
    result = {split: evaluate(model, task, split, bs, progress) for split in splits}
    (Path(run_dir) / "final.json").write_text(json.dumps(result, indent=2), encoding="utf-8")
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
        return [float(trainer.train_step(batches[i]).value.detach()) for i in range(steps)]
