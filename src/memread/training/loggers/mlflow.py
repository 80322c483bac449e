"""MLflow: a run's records as metrics, its config as parameters, its archive as an artifact (``train.loggers =
["mlflow"]``, the ``mlflow`` extra).

The store is ``train.mlflow_uri`` (a tracking server's URL, ``sqlite:///PATH``, ``databricks`` ...); by default one
inside the run folder, ``RUN/mlflow.db`` (SQLite: MLflow's local store now that its ``./mlruns`` file store is in
maintenance mode) with artifacts in ``RUN/mlartifacts`` -- browse it with ``mlflow ui --backend-store-uri
sqlite:///RUN/mlflow.db``. The experiment is ``$MLFLOW_EXPERIMENT_NAME``, else ``memread``; the run is named after
the run folder.

A record ``{"event": "valid", "step": 400, "ppl": 120.5, "best": true, "selection_metric": "ppl"}`` becomes the
metrics ``valid/ppl`` = 120.5 and ``valid/best`` = 1.0 at step 400 (bools as 1 / 0) and the tag
``valid/selection_metric`` = "ppl" (text is no metric: a tag keeps its last value). Parameters are the config's
keys, ``train.lr`` ...; MLflow keeps a parameter's first value, so a value a resume changed (``--set train.lr=...``)
is the tag ``config.train.lr``.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from memread.training.loggers import flat_params, is_number, split_record

STATUS = {"finished": "FINISHED", "failed": "FAILED", "killed": "KILLED"}


def default_uri(run_dir: Path) -> str:
    return f"sqlite:///{(Path(run_dir) / 'mlflow.db').resolve().as_posix()}"


class MLflowLogger:
    name = "mlflow"

    def __init__(self, config: Any, run_dir: Path, state: dict | None):
        from mlflow.entities import Param
        from mlflow.tracking import MlflowClient

        run_dir = Path(run_dir)
        self.uri = config.train.mlflow_uri or default_uri(run_dir)
        self.client = MlflowClient(tracking_uri=self.uri)
        params = flat_params(config.to_dict())
        self.fresh = not (state and state.get("uri") == self.uri and state.get("run_id"))
        if self.fresh:
            name = os.environ.get("MLFLOW_EXPERIMENT_NAME") or "memread"
            found = self.client.get_experiment_by_name(name)
            if found is not None:
                experiment_id = found.experiment_id
            else:  # in the default store, the artifacts beside it in the run folder
                location = None if config.train.mlflow_uri else (run_dir / "mlartifacts").resolve().as_uri()
                experiment_id = self.client.create_experiment(name, artifact_location=location)
            run = self.client.create_run(experiment_id, run_name=run_dir.name,
                                         tags={"memread.run_dir": str(run_dir.resolve())})
            self.run_id = run.info.run_id
            items = sorted(params.items())
            for i in range(0, len(items), 100):  # MLflow takes 100 parameters a call
                self.client.log_batch(self.run_id, params=[Param(k, v) for k, v in items[i:i + 100]])
        else:
            self.run_id = state["run_id"]
            self.client.update_run(self.run_id, status="RUNNING")
            logged = self.client.get_run(self.run_id).data.params
            new = sorted((k, v) for k, v in params.items() if k not in logged)
            for i in range(0, len(new), 100):
                self.client.log_batch(self.run_id, params=[Param(k, v) for k, v in new[i:i + 100]])
            for k, v in params.items():
                if k in logged and logged[k] != v:
                    self.client.set_tag(self.run_id, f"config.{k}", v)

    def state(self) -> dict:
        return {"uri": self.uri, "run_id": self.run_id}

    def log(self, record: dict) -> None:
        from mlflow.entities import Metric, RunTag

        event, step, values = split_record(record)
        now = int(time.time() * 1000)
        metrics = [Metric(f"{event}/{k}", float(v), now, step) for k, v in values.items() if is_number(v)]
        tags = [RunTag(f"{event}/{k}", v if isinstance(v, str) else json.dumps(v))
                for k, v in values.items() if not is_number(v)]
        self.client.log_batch(self.run_id, metrics=metrics, tags=tags)

    def log_artifact(self, path: Path) -> None:
        self.client.log_artifact(self.run_id, str(path))

    def close(self, status: str) -> None:
        self.client.set_terminated(self.run_id, STATUS[status])


def open_logger(config: Any, run_dir: Path, state: dict | None) -> MLflowLogger:
    return MLflowLogger(config, run_dir, state)
