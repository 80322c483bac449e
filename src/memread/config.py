"""Typed experiment configs read from TOML.

An experiment file has three sections::

    [task]          # which task, its data and its head   (validated by the task's config class)
    name = "lm"
    [reader]        # which reader and its sizes           (validated by the reader's config class)
    name = "lstm"
    [train]         # the one training loop's settings     (TrainConfig below)

Every section is a dataclass. An unknown key or a value of the wrong type is rejected with a
:class:`MemreadError` naming the file and the key (``train.lr``); ``--set train.lr=0.5`` overrides
a value after the file is read and is checked the same way.
"""

from __future__ import annotations

import dataclasses
import json
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from memread.errors import MemreadError
from memread.typed import _coerce, _type_name, from_dict, parse_override, parse_settings  # noqa: F401 (re-exported)


@dataclass
class TrainConfig:
    """Settings of the training loop (``[train]``); every task and reader shares them."""

    optimizer: Literal["sgd", "adam"] = "adam"
    lr: float = 1e-3
    # per-parameter factors on lr: {glob over parameter names = factor}, e.g. {"*.v" = 0.1}; the first
    # pattern that matches a name wins; decay and restore_best keep the ratios
    lr_scale: dict[str, float] = field(default_factory=dict)
    momentum: float = 0.0
    weight_decay: float = 0.0
    betas: tuple[float, float] = (0.9, 0.999)
    clip: float = 5.0  # renormalise the gradient when its norm exceeds this; 0 = off
    batch_size: int = 32
    eval_batch_size: int = 0  # 0 = the task's default (1 for language modelling: exact perplexity)
    epochs: int = 10
    max_steps: int = 0  # stop after this many optimizer steps; 0 = no cap
    evals_per_epoch: int = 1  # validate this many times per epoch (2 = every half epoch)
    lr_decay: float = 1.0  # multiply lr by this when validation does not improve (LSTMN LM: 0.85)
    min_improvement: float = 0.0  # relative improvement that counts as "significant"
    patience: int = 0  # early stopping after this many evaluations without improvement; 0 = off
    min_lr: float = 0.0  # stop when the learning rate decays below this
    restore_best: bool = False  # on a validation worse than the best, go back to checkpoint_best's weights (lr stays decayed)
    seed: int = 1
    log_every: int = 50  # optimizer steps between lines in metrics.jsonl
    checkpoint_every: int = 0  # also write checkpoint_last every N steps (0 = at evaluations only)
    progress: bool = True  # progress bar on stderr
    tensorboard: bool = False  # also log to TensorBoard (needs the `tensorboard` extra)


@dataclass
class ExperimentConfig:
    """A whole experiment: the task section, the reader section and the training section."""

    task: Any
    reader: Any
    train: TrainConfig = field(default_factory=TrainConfig)

    def to_dict(self) -> dict:
        return {
            "task": dataclasses.asdict(self.task),
            "reader": dataclasses.asdict(self.reader),
            "train": dataclasses.asdict(self.train),
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)


# ----------------------------------------------------------------------------- experiment files


def experiment_from_dict(raw: dict, where: str) -> ExperimentConfig:
    """Validate a raw ``{task, reader, train}`` mapping against the registries' config classes."""
    from memread.readers import READERS
    from memread.tasks import TASKS

    for key in raw:
        if key not in ("task", "reader", "train"):
            raise MemreadError(f"{where}: unknown section '{key}' (known: task, reader, train)")
    task_raw = dict(raw.get("task", {}))
    reader_raw = dict(raw.get("reader", {}))
    task_name = task_raw.get("name")
    if task_name not in TASKS:
        raise MemreadError(f"{where}: key 'task.name' must be one of {sorted(TASKS)}, got {task_name!r}")
    reader_name = reader_raw.get("name")
    if reader_name not in READERS:
        raise MemreadError(
            f"{where}: key 'reader.name' must be one of {sorted(READERS)}, got {reader_name!r}"
        )
    task_cfg = from_dict(TASKS[task_name].Config, task_raw, "task", where)
    reader_cfg = from_dict(READERS[reader_name].Config, reader_raw, "reader", where)
    train_cfg = from_dict(TrainConfig, dict(raw.get("train", {})), "train", where)
    return ExperimentConfig(task=task_cfg, reader=reader_cfg, train=train_cfg)


def apply_overrides(raw: dict, overrides: list[str]) -> dict:
    raw = {k: dict(v) if isinstance(v, dict) else v for k, v in raw.items()}
    for text in overrides:
        (section, key), value = parse_override(text)
        raw.setdefault(section, {})
        if not isinstance(raw[section], dict):
            raise MemreadError(f"--set {text!r}: '{section}' is not a section")
        raw[section][key] = value
    return raw


def load_experiment(path: str | Path, overrides: list[str] = ()) -> ExperimentConfig:
    """Read a TOML experiment file, apply ``--set`` overrides, and validate every key."""
    path = Path(path)
    if not path.is_file():
        raise MemreadError(f"{path}: config file not found")
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as e:
        raise MemreadError(f"{path}: not valid TOML: {e}") from None
    except UnicodeDecodeError as e:
        raise MemreadError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    raw = apply_overrides(raw, list(overrides))
    return experiment_from_dict(raw, str(path))
