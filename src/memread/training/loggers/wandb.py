"""Weights & Biases: a run's records as history rows, its config, its archive as a model artifact
(``train.loggers = ["wandb"]``, the ``wandb`` extra).

Offline unless the environment says otherwise: ``$WANDB_MODE`` where set (``online``, ``offline``, ``disabled``),
else online when ``$WANDB_API_KEY`` is set, else offline -- the run's files stay in ``RUN/wandb`` until ``wandb sync
RUN/wandb/offline-run-*``. The project is ``$WANDB_PROJECT``, else ``memread``; the run is named after the run folder.

Each record is one history row: ``{"event": "valid", "step": 400, "ppl": 120.5}`` -> ``{"step": 400, "valid/ppl":
120.5}``, every key charted against ``step`` (``define_metric``), W&B's own ``_step`` counting rows. The config is
the run's config, a resume's changed values included.
"""

from __future__ import annotations

import os
import re
import uuid
from pathlib import Path
from typing import Any

from memread.training.loggers import split_record

EXIT_CODES = {"finished": 0, "failed": 1, "killed": 130}


def mode() -> str | None:
    """The W&B mode: None (wandb reads ``$WANDB_MODE``) where that is set, else online with a key, else offline."""
    if os.environ.get("WANDB_MODE"):
        return None
    return "online" if os.environ.get("WANDB_API_KEY") else "offline"


class WandbLogger:
    name = "wandb"

    def __init__(self, config: Any, run_dir: Path, state: dict | None):
        import wandb

        run_dir = Path(run_dir)
        self.fresh = not (state and state.get("id"))
        run_id = uuid.uuid4().hex[:12] if self.fresh else state["id"]
        self.run = wandb.init(project=os.environ.get("WANDB_PROJECT") or "memread", name=run_dir.name, id=run_id,
                              resume="allow", dir=str(run_dir), mode=mode(), config=config.to_dict(),
                              settings=wandb.Settings(console="off", silent=True))
        if not self.fresh:
            self.run.config.update(config.to_dict(), allow_val_change=True)
        self.run.define_metric("step")
        self.run.define_metric("*", step_metric="step")
        self.id = run_id
        self.slug = re.sub(r"[^A-Za-z0-9_.-]", "-", run_dir.name) or "run"

    def state(self) -> dict:
        return {"id": self.id}

    def log(self, record: dict) -> None:
        event, step, values = split_record(record)
        self.run.log({"step": step, **{f"{event}/{k}": v for k, v in values.items()}})

    def log_artifact(self, path: Path) -> None:
        import wandb

        artifact = wandb.Artifact(f"{self.slug}-model", type="model",
                                  description="memread model archive of the best checkpoint (memread export)")
        artifact.add_file(str(path))
        self.run.log_artifact(artifact)

    def close(self, status: str) -> None:
        self.run.finish(exit_code=EXIT_CODES[status])


def open_logger(config: Any, run_dir: Path, state: dict | None) -> WandbLogger:
    return WandbLogger(config, run_dir, state)
