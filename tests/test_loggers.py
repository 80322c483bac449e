"""Run loggers (``train.loggers``): MLflow and W&B receive exactly the records of metrics.jsonl, the config and the
best checkpoint's archive, and a resumed run goes on in the same tracker runs. The real libraries, offline: MLflow's
store is read back with ``MlflowClient``, W&B's offline run file (``RUN/wandb/offline-run-*/run-ID.wandb``) record by
record. Each library's tests are skipped where it is not installed (the ``mlflow`` and ``wandb`` extras)."""

from __future__ import annotations

import importlib.util
import json
import struct
import sys
import types
from collections import Counter
from pathlib import Path

import pytest

from memread.config import TrainConfig, experiment_from_dict
from memread.errors import MemreadError
from memread.experiment import resume_run, start_run
from memread.training import loggers as loggers_pkg
from memread.training.loop import WALL_CLOCK_KEYS, Trainer
from memread.training.metrics_log import MetricsLog

AVAILABLE = [name for name in ("mlflow", "wandb") if importlib.util.find_spec(name) is not None]


def config(loggers, **train):
    return experiment_from_dict({
        "data": {"name": "stories-text", "stories": 300, "bptt": 12},
        "reader": {"name": "lstm", "hidden": 16},
        "head": {"name": "lm", "emb": 16, "dropout": 0.1},
        "train": {"progress": False, "log_every": 1, "batch_size": 8, "evals_per_epoch": 4, "checkpoint_every": 2,
                  "max_steps": 8, "loggers": list(loggers), **train},
    }, "test")


def jsonl(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


def interrupted_then_resumed(run: Path, root: Path, cfg, monkeypatch, at: int = 5) -> None:
    """Train until the start of step ``at + 1`` (the records of step ``at`` written, the last checkpoint at an
    earlier step), interrupt as Ctrl-C does, then resume to the end: the resume writes step ``at`` again."""
    step = Trainer.train_step

    def interrupting(self, *args, **kwargs):
        if self.global_step == at:
            raise KeyboardInterrupt
        return step(self, *args, **kwargs)

    monkeypatch.setattr(Trainer, "train_step", interrupting)
    with start_run(cfg, run, root) as trainer, pytest.raises(KeyboardInterrupt):
        trainer.fit()
    assert max(r["step"] for r in jsonl(run)) == at
    monkeypatch.setattr(Trainer, "train_step", step)
    with resume_run(run, root) as trainer:
        trainer.fit()


# ----------------------------------------------------------------------------- the interface, with a fake logger


class FakeLogger:
    name = "fake"
    opened: list = []

    def __init__(self, config, run_dir, state):
        self.fresh = not state
        self.id = state["id"] if state else f"fake{len(FakeLogger.opened)}"
        self.records, self.artifacts, self.status = [], [], None
        FakeLogger.opened.append(self)

    def state(self):
        return {"id": self.id}

    def log(self, record):
        self.records.append(dict(record))

    def log_artifact(self, path):
        self.artifacts.append(Path(path).name)

    def close(self, status):
        self.status = status


@pytest.fixture
def fake(monkeypatch):
    """The "mlflow" logger replaced by FakeLogger (its library: json, always there)."""
    module = types.ModuleType("fake_logger")
    module.open_logger = FakeLogger
    monkeypatch.setitem(sys.modules, "fake_logger", module)
    monkeypatch.setitem(loggers_pkg.LOGGERS, "mlflow", ("fake_logger", "json", "mlflow", "Fake"))
    monkeypatch.setattr(FakeLogger, "opened", [])
    return FakeLogger


def test_every_record_written_is_forwarded_once_across_an_interrupted_run_and_its_resume(tmp_path, fake, monkeypatch):
    run = tmp_path / "run"
    interrupted_then_resumed(run, tmp_path, config(["mlflow"], log_artifact=True), monkeypatch)
    first, resumed = fake.opened
    assert first.status == "killed" and resumed.status == "finished"
    assert resumed.id == first.id and not resumed.fresh  # the same run, by RUN/loggers.json
    assert json.loads((run / "loggers.json").read_text()) == {"mlflow": {"id": first.id}}
    sent = first.records + resumed.records
    written = jsonl(run)
    strip = lambda rs: [{k: v for k, v in r.items() if k not in WALL_CLOCK_KEYS} for r in rs]  # noqa: E731
    # step 5's train record: sent by the interrupted process, written again by the resume and not sent twice
    assert strip(sent) == strip(written)
    assert [r["step"] for r in first.records if r["event"] == "train"] == [1, 2, 3, 4, 5]
    assert [r["step"] for r in resumed.records if r["event"] == "train"] == [6, 7, 8]
    assert Counter(r["event"] for r in written)["valid"] >= 1
    assert resumed.artifacts == ["model.safetensors"] and first.artifacts == []
    assert (run / "model.safetensors").is_file()


def test_a_logger_named_first_on_a_resume_gets_the_earlier_records(tmp_path, fake):
    run = tmp_path / "run"
    with start_run(config([], max_steps=4), run, tmp_path) as trainer:
        trainer.fit()
    with resume_run(run, tmp_path, ["train.max_steps=6", 'train.loggers=["mlflow"]']) as trainer:
        trainer.fit()
    (logger,) = fake.opened
    assert logger.fresh and logger.records == jsonl(run)
    assert max(r["step"] for r in logger.records) == 6


def test_only_the_process_that_writes_opens_loggers(tmp_path, fake):
    log = MetricsLog(tmp_path / "metrics.jsonl", enabled=False)  # a torchrun process other than 0
    log.open_loggers(config(["mlflow"]), tmp_path)
    log.write({"event": "train", "step": 1, "loss": 1.0})
    assert fake.opened == [] and log.loggers == []


def test_a_missing_library_is_one_line_with_its_pip_command(tmp_path, monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "wandb" else real(name, *a))
    with pytest.raises(MemreadError) as e:
        start_run(config(["wandb"]), tmp_path / "run", tmp_path)
    assert str(e.value) == ("train.loggers = ['wandb'] needs Weights & Biases (wandb): pip install 'memread[wandb]'")


def test_loggers_are_refused_by_name_and_log_artifact_needs_one(tmp_path):
    with pytest.raises(MemreadError, match=r"train\.loggers.*'mlflow' or 'wandb'.*'comet'"):
        config(["comet"])
    with pytest.raises(MemreadError, match="train.log_artifact = true logs the archive to train.loggers"):
        start_run(config([], log_artifact=True), tmp_path / "run", tmp_path)
    assert TrainConfig().loggers == () and TrainConfig().mlflow_uri == "" and TrainConfig().log_artifact is False


def test_the_loggers_a_config_may_name_are_the_registered_ones():
    import typing

    hint = typing.get_type_hints(TrainConfig, include_extras=True)["loggers"]
    assert set(typing.get_args(typing.get_args(hint)[0])) == set(loggers_pkg.LOGGERS)


def test_wandb_is_offline_unless_the_environment_says_otherwise(monkeypatch):
    from memread.training.loggers.wandb import mode

    monkeypatch.delenv("WANDB_MODE", raising=False)
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    assert mode() == "offline"
    monkeypatch.setenv("WANDB_API_KEY", "k" * 40)
    assert mode() == "online"
    monkeypatch.setenv("WANDB_MODE", "disabled")
    assert mode() is None  # wandb reads WANDB_MODE itself


# ----------------------------------------------------------------------------- the real libraries, offline


@pytest.fixture(scope="module")
def logged_run(tmp_path_factory):
    """One tiny run logged to every installed logger, interrupted after step 5 and resumed to step 8, with its
    archive logged at the end."""
    if not AVAILABLE:
        pytest.skip("neither mlflow nor wandb is installed (the `mlflow` and `wandb` extras)")
    root = tmp_path_factory.mktemp("loggers")
    run = root / "run"
    with pytest.MonkeyPatch.context() as mp:
        for key in ("WANDB_MODE", "WANDB_API_KEY", "MLFLOW_TRACKING_URI", "MLFLOW_EXPERIMENT_NAME", "WANDB_PROJECT"):
            mp.delenv(key, raising=False)
        mp.setenv("WANDB_SILENT", "true")
        interrupted_then_resumed(run, root, config(AVAILABLE, log_artifact=True), mp)
    return run


def expected_metrics(records: list[dict]) -> tuple[set, dict]:
    """metrics.jsonl's numbers as {(event/key, step, value)} (wall-clock keys by step alone: a resume that writes a
    step again times it anew) and its text values, the last of each key, as tags."""
    numbers, texts = set(), {}
    for r in records:
        for k, v in r.items():
            if k in ("event", "step"):
                continue
            if isinstance(v, (int, float)):
                numbers.add((f"{r['event']}/{k}", r["step"], None if k in WALL_CLOCK_KEYS else float(v)))
            else:
                texts[f"{r['event']}/{k}"] = v
    return numbers, texts


@pytest.mark.slow  # its run starts MLflow and W&B (W&B's service is a process of its own)
def test_mlflow_holds_exactly_the_records_of_metrics_jsonl_the_config_and_the_archive(logged_run):
    pytest.importorskip("mlflow")
    from mlflow.tracking import MlflowClient

    from memread.inference.archive import read_archive_header

    state = json.loads((logged_run / "loggers.json").read_text())["mlflow"]
    assert state["uri"] == f"sqlite:///{(logged_run / 'mlflow.db').resolve().as_posix()}"  # in the run folder
    client = MlflowClient(tracking_uri=state["uri"])
    (run,) = client.search_runs([e.experiment_id for e in client.search_experiments()])  # one run, resumed into
    assert run.info.run_id == state["run_id"] and run.info.status == "FINISHED"
    assert run.info.run_name == "run"
    numbers, texts = expected_metrics(jsonl(logged_run))
    logged = set()
    for key in run.data.metrics:
        history = client.get_metric_history(run.info.run_id, key)
        steps = [m.step for m in history]
        assert len(steps) == len(set(steps)), f"{key}: a step logged twice"  # the resumed step is not sent again
        wall = key.split("/", 1)[1] in WALL_CLOCK_KEYS
        logged |= {(key, m.step, None if wall else m.value) for m in history}
    assert logged == numbers
    assert {k: v for k, v in run.data.tags.items() if not k.startswith("mlflow.") and "/" in k} == texts
    config = json.loads((logged_run / "config.json").read_text())
    assert run.data.params == loggers_pkg.flat_params(config)
    assert run.data.params["train.loggers"] == json.dumps(AVAILABLE)
    (artifact,) = client.list_artifacts(run.info.run_id)
    assert artifact.path == "model.safetensors"
    local = Path(client.download_artifacts(run.info.run_id, artifact.path, str(logged_run.parent)))
    assert json.loads(read_archive_header(local)["config"]) == config
    assert (logged_run / "mlartifacts").is_dir()


def wandb_records(path: Path):
    """The protobuf records of a W&B transaction log (``run-ID.wandb``: a ':W&B' header, then leveldb-log blocks of
    32 KiB whose chunks are CRC32, length, type 1 (full) / 2 (first) / 3 (middle) / 4 (last))."""
    from wandb.proto import wandb_internal_pb2

    data = path.read_bytes()
    assert data[:4] == b":W&B"
    pos, block, pending = 7, 32768, b""
    while pos + 7 <= len(data):
        left = block - pos % block
        if left < 7:
            pos += left
            continue
        _, length, kind = struct.unpack("<IHB", data[pos:pos + 7])
        if kind == 0 and length == 0:
            pos += left
            continue
        pending += data[pos + 7:pos + 7 + length]
        pos += 7 + length
        if kind in (1, 4):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pending)
            pending = b""
            yield record


@pytest.mark.slow  # its run starts MLflow and W&B (W&B's service is a process of its own)
def test_wandb_holds_exactly_the_records_of_metrics_jsonl_the_config_and_the_archive(logged_run):
    pytest.importorskip("wandb")
    run_id = json.loads((logged_run / "loggers.json").read_text())["wandb"]["id"]
    files = sorted((logged_run / "wandb").glob("offline-run-*/run-*.wandb"))
    assert [f.name for f in files] == [f"run-{run_id}.wandb"] * 2  # the interrupted process's and the resume's
    rows, configs, artifacts, exits = [], [], [], []
    for f in files:
        for record in wandb_records(f):
            kind = record.WhichOneof("record_type")
            if kind == "history":
                row = {item.key or "/".join(item.nested_key): json.loads(item.value_json) for item in record.history.item}
                rows.append({k: v for k, v in row.items() if not k.startswith("_")})  # W&B's _step, _runtime ...
            elif kind == "run":
                assert record.run.run_id == run_id and record.run.project == "memread"
                assert record.run.display_name == "run"
                configs.append({i.key: json.loads(i.value_json) for i in record.run.config.update})
            elif kind == "config":
                configs.append({i.key: json.loads(i.value_json) for i in record.config.update})
            elif kind == "artifact":
                artifacts.append((record.artifact.name, record.artifact.type,
                                  [e.path for e in record.artifact.manifest.contents]))
            elif kind == "exit":
                exits.append(record.exit.exit_code)
    expected = [{"step": r["step"], **{f"{r['event']}/{k}": v for k, v in r.items() if k not in ("event", "step")}}
                for r in jsonl(logged_run)]
    # numbers as floats (W&B writes 96.0 as 96), the wall-clock keys by name alone (a resumed step is timed anew)
    strip = lambda rs: [{k: float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else v  # noqa: E731
                         for k, v in r.items() if k.split("/")[-1] not in WALL_CLOCK_KEYS} for r in rs]
    assert strip(rows) == strip(expected)  # one row a record, in order, step 5 once
    config = json.loads((logged_run / "config.json").read_text())
    assert configs and all(c.get(s) == config[s] for c in configs[:1] for s in config)
    assert artifacts == [("run-model", "model", ["model.safetensors"])]
    assert exits == [130, 0]
