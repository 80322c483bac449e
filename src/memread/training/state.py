"""What a training checkpoint holds and how a resume puts it back.

A checkpoint (``checkpoint_last.pt``, ``checkpoint_best.pt``) is one dict: the config and vocabulary fingerprint it
was trained with, the model's and optimizer's state, the loop's position and decisions (``loop``: epoch, step, why
it stopped, the plateau schedule, the first loss, the tokens and seconds trained, the running sums since the last
train record), the random states, the state carried between batches and, under torchrun, each process's own share
(its random states, carry and running sums); the float16 loss scaler's state where there is one. A resume restores
every part, so it continues exactly: the same data order, the same dropout masks, the same carried state, the same
train records. :func:`memread.training.checkpoint.check_loop_state` checks the ``loop`` part before it is read.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

from memread.errors import MemreadError
from memread.readers.base import flatten_state, state_structure, unflatten_state
from memread.training.checkpoint import save_checkpoint
from memread.training.distributed import gather, on_main, rng_state, set_rng_state, to_device
from memread.training.metrics_log import last_is_best, valid_records

# the functions below take the loop's Trainer (memread.training.loop), named Any here: the loop imports this module
Trainer = Any


def fresh_running() -> dict:
    """The running sums since the last train record, empty (saved in a checkpoint: a resume logs the same)."""
    return {"loss_sum": 0.0, "loss_n": 0, "tokens": 0, "seconds": 0.0, "stats": {}}


def process_state(trainer: Trainer) -> dict:
    """What each process alone knows: its random states, the state it carries, its running sums."""
    carry = to_device(trainer.carry, torch.device("cpu"))
    return {"rng": rng_state(trainer.device),
            "running": {**trainer.running, "seconds": trainer.running["seconds"] + trainer.since_resume()},
            "tokens_trained": trainer.tokens_trained,
            "carry": {"structure": json.dumps(state_structure(carry)), "tensors": flatten_state(carry)}}


def build_payload(trainer: Trainer) -> dict:
    """The checkpoint of ``trainer`` now; every process takes part (its random state and carry are in it)."""
    processes = gather(process_state(trainer), trainer.where)
    main = processes[0]
    payload = {
        "config": trainer.cfg.to_json(),
        "vocab": trainer.vocab_fingerprint,
        "model": trainer.model.state_dict(),
        "optimizer": trainer.optimizer.state_dict(),
        "loop": {
            "epoch": trainer.epoch,
            "step_in_epoch": trainer.step_in_epoch,
            "global_step": trainer.global_step,
            "finished": trainer.finished,
            "stopped": trainer.stopped,
            "schedule": trainer.schedule.state_dict(),
            "first_loss": trainer.first_loss,
            "tokens_trained": sum(p["tokens_trained"] for p in processes),  # every process's
            "seconds_trained": None if trainer.seconds_before is None else trainer.seconds_before + trainer.since_fit(),
            "seconds_by_device": trainer.seconds_by_device_so_far(),
            "running": main["running"],
        },
        "rng": main["rng"]["cpu"],
        "carry": main["carry"],
        "world": trainer.where.world,
    }
    if "cuda" in main["rng"]:
        payload["rng_cuda"] = main["rng"]["cuda"]
    if trainer.where.distributed:
        payload["processes"] = processes
    if trainer.scaler is not None:
        payload["scaler"] = trainer.scaler.state_dict()
    return payload


def restore(trainer: Trainer, payload: dict) -> None:
    """Put ``payload`` (a checkpoint of the run) back into ``trainer``: model, optimizer (its learning rate rescaled
    by a new ``train.lr``), the loop's position, schedule and cost so far, this process's random states, carry and
    running sums, the loss scaler; then the metrics log is cut back to the checkpoint's step and a best checkpoint
    left behind is mended (:func:`mend_best`)."""
    run_dir = trainer.run_dir
    missing = [k for k in ("optimizer", "loop", "rng", "carry") if k not in payload]
    if missing:
        raise MemreadError(f"{run_dir / 'checkpoint_last.pt'}: not a resumable checkpoint (no '{missing[0]}')")
    saved_world = payload.get("world", 1)
    if saved_world != trainer.where.world:
        raise MemreadError(f"{run_dir / 'checkpoint_last.pt'}: written by {saved_world} process(es), resumed by "
                           f"{trainer.where.world}; an exact resume needs the same number (each process's shard, "
                           f"dropout stream and carried state are in the checkpoint): use --nproc {saved_world}")
    trainer.model.load_state_dict(payload["model"])
    optimizer = trainer.optimizer
    saved = [(g.get("pattern"), g.get("lr_scale", 1.0), len(g["params"])) for g in payload["optimizer"]["param_groups"]]
    wanted = [(g.get("pattern"), g["lr_scale"], len(g["params"])) for g in optimizer.param_groups]
    if saved != wanted:
        raise MemreadError(f"{run_dir}: the checkpoint's optimizer groups {saved} (pattern, factor, "
                           f"parameters) do not fit train.lr_scale = {dict(trainer.cfg.train.lr_scale)} "
                           f"{wanted}; resume with the run's own train.lr_scale")
    optimizer.load_state_dict(payload["optimizer"])
    saved_lr = json.loads(payload["config"]).get("train", {}).get("lr", trainer.cfg.train.lr)
    for group in optimizer.param_groups:  # keep the decay so far; --set train.lr rescales it
        group["lr"] *= trainer.cfg.train.lr / saved_lr
    loop = payload["loop"]
    trainer.epoch, trainer.step_in_epoch = loop["epoch"], loop["step_in_epoch"]
    trainer.global_step, trainer.finished = loop["global_step"], loop["finished"]
    trainer.stopped = loop.get("stopped")  # None in checkpoints from before it was recorded
    if trainer.finished and trainer.budget_raised(trainer.cfg.train, trainer.stopped, trainer.epoch,
                                                  trainer.global_step):
        trainer.finished, trainer.stopped = False, None  # --resume RUN --set train.epochs=N: go on
    trainer.first_loss = loop.get("first_loss")
    trainer.seconds_before = loop.get("seconds_trained")  # None in checkpoints from before they were counted
    by_device = loop.get("seconds_by_device")  # None (not split) in checkpoints from before, or uncounted runs
    counted = isinstance(by_device, dict) and trainer.seconds_before is not None
    trainer.seconds_by_device = dict(by_device) if counted else None
    trainer.schedule.load_state_dict(loop["schedule"])
    if trainer.where.distributed:
        own = payload["processes"][trainer.where.rank]
    else:
        own = {"rng": {"cpu": payload["rng"], **({"cuda": payload["rng_cuda"]} if "rng_cuda" in payload else {})},
               "carry": payload["carry"], "running": loop.get("running", {}),
               "tokens_trained": loop.get("tokens_trained", 0)}
    trainer.running = {**fresh_running(), **own.get("running", {})}
    trainer.tokens_trained = own.get("tokens_trained", 0)  # 0 in checkpoints from before it was counted
    set_rng_state(own["rng"], trainer.device)
    carry = own["carry"]
    trainer.carry = to_device(unflatten_state(json.loads(carry["structure"]), carry["tensors"]), trainer.device)
    if trainer.scaler is not None and "scaler" in payload:
        trainer.scaler.load_state_dict(payload["scaler"])
    trainer.log.truncate_after(trainer.global_step)
    mend_best(run_dir, payload, trainer.global_step, trainer.where)


def mend_best(run_dir: Path, payload: dict, global_step: int, where: Any) -> None:
    """On resuming a run whose folder holds its last checkpoint alone (brought back from another machine, where only
    what the run needs to go on travelled: the best is left behind when it holds the same weights as the last):
    where the last validation was the best and the last checkpoint was written at it, that checkpoint is the best,
    written again under its name (``payload``: the last checkpoint's, ``global_step`` its step; ``where`` the
    trainer's :class:`~memread.training.distributed.Placement`: process 0 writes). Where the best weights are gone,
    say so now, not at the first worse validation (``restore_best``) or the final evaluation."""
    best = Path(run_dir) / "checkpoint_best.pt"
    if best.exists():
        return
    valid = valid_records(run_dir)
    if not valid:
        return  # no validation yet, so no best
    if last_is_best(valid, global_step):
        on_main(lambda: save_checkpoint(payload, best), where)
        return
    best_step = next((r.get("step") for r in reversed(valid) if r.get("best")), None)
    raise MemreadError(f"{best}: not found, and checkpoint_last.pt (step {global_step}) is not the best "
                       f"(the best validation was at step {best_step}): the final evaluation and restore_best "
                       f"need its weights. Bring checkpoint_best.pt back into {run_dir}, or train the run "
                       f"again; nothing was changed")
