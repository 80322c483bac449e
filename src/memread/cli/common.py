"""What the verbs share: the ``--device`` and ``--data-root`` flags, the device a verb runs on, number checks,
where an output goes beside a run, a trained language model."""

from __future__ import annotations

import argparse
from pathlib import Path

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


def at_least(flag: str, value: float, low: float, note: str = "") -> None:
    """Refuse a number flag below ``low`` (or NaN) in one line, before any work is done."""
    if not value >= low:  # NaN is refused too
        raise MemreadError(f"{flag} must be at least {low}{note}, got {value}")


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
