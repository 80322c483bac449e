"""What the verbs share: the ``--device`` and ``--data-root`` flags, the device a verb runs on, number checks,
where an output goes beside a run, a trained language model."""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Callable

from memread.errors import MemreadError


def add_device(p: argparse.ArgumentParser, what: str = "") -> None:
    p.add_argument("--device", default=None,
                   help=f"{what}auto, cpu, cuda, cuda:N or mps (default: {'the config' if what else 'cpu'})")


def add_data_root(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data-root", default=None,
                   help="folder holding the datasets (default: $MEMREAD_DATA, else the one a run given here was "
                        "trained with, else ~/.cache/memread/data)")


def model_device(args: argparse.Namespace) -> str:
    """The device a verb other than train runs its model on: ``--device`` (default cpu), checked before any
    work so that a device torch does not have here is one line (``memread: error: --device ...``)."""
    from memread.training.distributed import resolve_device

    name = args.device or "cpu"
    try:
        return str(resolve_device(name))
    except MemreadError as e:  # resolve_device speaks of train.device; here it is the flag
        line = str(e).replace(f"train.device = {name!r}", f"--device {name!r}", 1)
        raise MemreadError(line.replace("use device = ", "use --device ")) from None
    except RuntimeError:  # torch.device("gpu"): not a device name at all
        raise MemreadError(f"--device {name!r}: not a device (auto, cpu, cuda, cuda:N or mps)") from None


def whole(low: int | None = None, high: int | None = None) -> Callable[[str], int]:
    """An argparse ``type``: a whole number in [``low``, ``high``] (either end open where None). Anything else is
    refused by the parser in one line naming the flag (``memread compare: error: argument --batch-size: must be
    at least 1, got -1``) before any work is done."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if (low is not None and value < low) or (high is not None and value > high):
            raise argparse.ArgumentTypeError(_range(low, high) + f", got {value}")
        return value

    parse.__name__ = "whole number"
    return parse


def real(low: float | None = None, high: float | None = None, above: bool = False,
         below: bool = False) -> Callable[[str], float]:
    """An argparse ``type``: a finite number in [``low``, ``high``] (``above`` / ``below``: the end itself left out);
    NaN and infinities are refused too, in one line naming the flag."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        bad = not math.isfinite(value) or (low is not None and (value <= low if above else value < low)) or (
            high is not None and (value >= high if below else value > high))
        if bad:
            ends = ("greater than" if above else "at least", "less than" if below else "at most")
            parts = [f"{ends[0]} {low:g}" if low is not None else "", f"{ends[1]} {high:g}" if high is not None else ""]
            raise argparse.ArgumentTypeError(f"must be a finite number{' ' if any(parts) else ''}"
                                             f"{' and '.join(p for p in parts if p)}, got {text}")
        return value

    parse.__name__ = "number"
    return parse


def _range(low: int | None, high: int | None) -> str:
    if low is not None and high is not None:
        return f"must be from {low} to {high}"
    return f"must be at least {low}" if low is not None else f"must be at most {high}"


SEED = whole(0, 2**32 - 1)  # what torch, numpy and random all take


def beside(run: Path, name: str) -> Path:
    """Where a verb writes its output for a run: inside a run directory, or beside a model archive
    (``model.safetensors`` -> ``model.NAME``)."""
    return run / name if run.is_dir() else run.with_name(f"{run.stem}.{name}")


def trained_lm(args: argparse.Namespace, run_dir: str, device: str):
    """The trained language model of ``run_dir`` (cfg, task, model); another task is one line naming the verb."""
    from memread.data.root import data_root
    from memread.experiment import load_trained

    cfg, task, model = load_trained(Path(run_dir), data_root(args.data_root, run=run_dir), args.checkpoint, device)
    if cfg.task != "lm":
        raise MemreadError(f"{run_dir}: a {cfg.task!r} run (data.name = {cfg.data.name!r}); "
                           f"{args.command} needs a language model")
    return cfg, task, model
