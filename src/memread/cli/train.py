"""``memread train``: start or resume a run, on one process or on ``--nproc N`` under torchrun."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from memread.cli.common import add_data_root, add_device, whole
from memread.errors import MemreadError


def add_train(sub) -> None:
    from memread.config import train_keys_help  # torch-free: the [train] keys, from TrainConfig itself

    p = sub.add_parser("train", help="train an experiment", epilog=train_keys_help(),
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("config", nargs="?", help="TOML experiment file")
    p.add_argument("--run-dir", help="default: runs/<config name>")
    p.add_argument("--resume", metavar="RUN_DIR", help="continue a run from its checkpoint_last.pt")
    p.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE", help="override a config value")
    p.add_argument("--nproc", type=whole(1), default=1, metavar="N",
                   help="train with N processes on this machine (torchrun and DDP: one GPU each, or gloo on CPUs)")
    add_device(p, "train.device: ")
    add_data_root(p)
    p.set_defaults(func=cmd_train)


def cmd_train(args: argparse.Namespace) -> int:
    from memread.config import load_experiment
    from memread.data.root import data_root
    from memread.experiment import final_evaluation, read_run_config, resume_run, start_run
    from memread.training.distributed import placement

    if args.nproc > 1:
        return _launch_torchrun(args)
    root = data_root(args.data_root, run=args.resume)  # a resumed run: the root it was trained with, by default
    overrides = list(args.set) + ([f'train.device="{args.device}"'] if args.device else [])
    if args.resume:
        run_dir = Path(args.resume)
        args.on_interrupt = (f"before training went on: the run is as its last checkpoint left it; continue with: "
                             f"memread train --resume {run_dir}")
        where = placement(read_run_config(run_dir, overrides).train.device)
        trainer = resume_run(run_dir, root, overrides, where)
    else:
        if not args.config:
            raise MemreadError("train needs a CONFIG file, or --resume RUN_DIR")
        args.on_interrupt = "before training began: nothing was trained; the same command starts the run again"
        cfg = load_experiment(args.config, overrides)
        run_dir = Path(args.run_dir) if args.run_dir else Path("runs") / Path(args.config).with_suffix("").name
        where = placement(cfg.train.device)
        trainer = start_run(cfg, run_dir, root, where)
    if where.main:
        print(f"run directory: {run_dir}" + (f" ({where.world} processes)" if where.distributed else "")
              + f", device {where.device}", file=sys.stderr)
    with trainer:  # holds the run directory's lock until final.json is written
        try:
            trainer.fit()
        except KeyboardInterrupt:
            print(f"\ninterrupted; continue with: memread train --resume {run_dir}", file=sys.stderr)
            return 130
        except (MemreadError, OSError) as e:  # a fault while training: say how to go on from what is saved
            raise MemreadError(_with_resume_hint(e, run_dir)) from e
        except (RuntimeError, MemoryError) as e:  # memory that ran out at a step: the same, one line
            from memread.errors import allocation_failure

            line = allocation_failure(e)
            if line is None:
                raise
            raise MemreadError(_with_resume_hint(MemreadError(
                f"out of memory while training ({line}): lower train.batch_size or the model's sizes"), run_dir)) from e
        if not where.main:
            return 0
        args.on_interrupt = (f"in the final evaluation: training is over and its checkpoints are saved; memread "
                             f"train --resume {run_dir} runs the final evaluation again (final.json)")
        result = final_evaluation(run_dir, root, progress=trainer.cfg.train.progress, device=str(where.device))
    print(_ending(trainer, run_dir), file=sys.stderr)
    print(json.dumps({"run_dir": str(run_dir), "stopped": trainer.stopped, **result}))
    return 0


def _ending(trainer, run_dir: Path) -> str:
    """How a finished run ended, in one line: ``stopped: REASON (what it means)``."""
    T, why = trainer.cfg.train, trainer.stopped
    if why == "max_minutes":
        what = (f"train.max_minutes = {T.max_minutes:g} spent, at step {trainer.global_step}; memread train --resume "
                f"{run_dir} goes on with a new allowance")
    elif why == "max_steps":
        what = f"train.max_steps = {T.max_steps} reached"
    elif why == "early":
        what = (f"the learning rate fell below train.min_lr = {T.min_lr:g}" if T.min_lr and trainer.lr < T.min_lr
                else f"no improvement on valid in train.patience = {T.patience} evaluations")
    elif why == "epochs":
        what = f"train.epochs = {T.epochs} done"
    else:
        what = "finished"
    return f"stopped: {why} ({what})"


def _with_resume_hint(e: Exception, run_dir: Path) -> str:
    from memread.errors import os_error_line
    from memread.training.loop import Diverged

    line = os_error_line(e) if isinstance(e, OSError) else str(e)
    if isinstance(e, Diverged):
        return line  # it says itself what is kept
    if (run_dir / "checkpoint_last.pt").exists():
        return f"{line}; checkpoint_last.pt is intact: continue with memread train --resume {run_dir}"
    return f"{line}; no checkpoint was written yet: start the run again in {run_dir}"


def _launch_torchrun(args: argparse.Namespace) -> int:
    """``memread train --nproc N ...``: the same command under PyTorch's own launcher (torchrun, one machine).
    The config, and a batch that splits over the processes, are checked here first, before any process starts or
    writes the run folder; a process that fails has said why (process 0 speaks for all), and torchrun's report of
    the failure is left out: one line, the failing process's exit status."""
    import os

    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.run import main as torchrun

    _check_split(args)
    argv = ["train"] + ([args.config] if args.config else [])
    for flag, value in (("--run-dir", args.run_dir), ("--resume", args.resume), ("--data-root", args.data_root),
                        ("--device", args.device)):
        if value:
            argv += [flag, value]
    for override in args.set:
        argv += ["--set", override]
    os.environ.setdefault("OMP_NUM_THREADS", "1")  # torchrun's own default, without its four lines of warning
    if not (args.debug or os.environ.get("MEMREAD_DEBUG", "") not in ("", "0")):
        import logging

        for name in ("torch.distributed.elastic", "torch.distributed.run"):  # its report of a failure: ours is one line
            logging.getLogger(name).setLevel(logging.CRITICAL)
    try:
        torchrun(["--standalone", "--nproc-per-node", str(args.nproc), "--module", "memread", *argv])
    except ChildFailedError as e:
        failures = getattr(e, "failures", {}) or {}
        first = getattr(failures.get(0), "exitcode", None)
        if first in (2, 130):  # process 0 said why in its one line (an error, or an interrupt)
            return first
        rank, failure = min((r, f) for r, f in failures.items() if f.exitcode not in (-15, None)) \
            if any(f.exitcode not in (-15, None) for f in failures.values()) else (0, failures.get(0))
        code = getattr(failure, "exitcode", 1)
        raise MemreadError(f"training with --nproc {args.nproc}: process {rank} failed (exit status {code}), and "
                           f"only process 0 speaks: run it again with --debug to see every process's error") from None
    return 0


def _check_split(args: argparse.Namespace) -> None:
    """Before torchrun starts ``--nproc`` processes: the config reads, and its training batch splits evenly over
    them (a stream's columns must; the processes refused it only after the run folder was written)."""
    from memread.config import load_experiment
    from memread.data.root import data_root
    from memread.experiment import build_task, read_run_config

    overrides = list(args.set) + ([f'train.device="{args.device}"'] if args.device else [])
    if args.resume:
        cfg = read_run_config(Path(args.resume), overrides)
    elif not args.config:
        raise MemreadError("train needs a CONFIG file, or --resume RUN_DIR")
    else:
        cfg = load_experiment(args.config, overrides)
    if cfg.train.batch_size % args.nproc == 0:
        return
    task = build_task(cfg, data_root(args.data_root, run=args.resume))
    batches = task.batches("train", cfg.train.batch_size, 0, cfg.train.seed)
    try:
        batches.shard(0, args.nproc)
    except MemreadError as e:
        raise MemreadError(f"{e}. Nothing was started or written") from None
