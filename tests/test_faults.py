"""Fault injection on run directories (issue 25): every fault a user can cause or meet ends as one line
``memread: error: ...`` naming the file or key and the way out, a non-zero exit, and nothing saved
changed; the folder can then be started again or resumed.

Faults: a kill before the first checkpoint; two writers; a read-only folder; a full disk (a real tiny
tmpfs where this machine lets us mount one, an injected ENOSPC everywhere); crafted checkpoints; an
exploding learning rate; a kill off the logging boundary (metrics.jsonl exact on resume)."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from conftest import subprocess_env, tiny_config
from memread import cli
from memread.config import experiment_from_dict
from memread.errors import MemreadError
from memread.experiment import resume_run, start_run
from memread.training import checkpoint as checkpoint_module
from memread.training import loop as loop_module
from memread.training import metrics_log
from memread.training.runlock import writer



@pytest.fixture
def config(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("MEMREAD_DATA", str(tmp_path))  # the built-in stories need no data
    monkeypatch.delenv("MEMREAD_DEBUG", raising=False)
    return tiny_config(tmp_path)


def run_cli(capsys, *argv: str) -> tuple[int, str]:
    """``memread ARGV`` in this process: its exit code and what it printed to stderr."""
    capsys.readouterr()
    code = cli.main(list(argv))
    return code, capsys.readouterr().err


def one_error_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.startswith("memread: error:")]
    assert len(lines) == 1, err
    assert "Traceback" not in err, err
    return lines[0]


def saved(run: Path) -> dict[str, bytes]:
    """What a run folder holds for its user (the lock's own files aside)."""
    if not run.exists():
        return {}
    return {p.name: p.read_bytes() for p in sorted(run.iterdir()) if p.is_file() and not p.name.startswith(".lock")}


def records(run: Path, event: str | None = None) -> list[dict]:
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    return [r for r in rows if event is None or r["event"] == event]


# --------------------------------------------------------------------------- stuck folders


def test_a_run_killed_before_its_first_checkpoint_can_be_started_or_resumed(config, tmp_path, capsys):
    run = tmp_path / "run"
    cfg = experiment_from_dict({"data": {"name": "stories-text", "stories": 300, "bptt": 12},
                                "reader": {"name": "lstm", "hidden": 32}, "head": {"name": "lm", "emb": 24},
                                "train": {"max_steps": 3, "progress": False}}, "t")
    start_run(cfg, run, tmp_path).close()  # config.json and vocab.json written, then "killed"
    assert (run / "config.json").exists() and not (run / "checkpoint_last.pt").exists()
    code, err = run_cli(capsys, "train", "--resume", str(run))
    assert code == 0, err
    assert "wrote no checkpoint yet; starting it from its config.json" in err
    assert (run / "final.json").exists()

    again = tmp_path / "again"
    start_run(cfg, again, tmp_path).close()
    (again / "units-test.npz").write_bytes(b"another run's")  # a unit record the folder held before
    start_run(cfg, again, tmp_path).close()  # started again in place: nothing of the earlier run is left to be read
    assert not (again / "units-test.npz").exists()
    code, err = run_cli(capsys, "train", str(config), "--run-dir", str(again), "--set", "train.max_steps=2")
    assert code == 0, err
    assert "starting it again" in err
    assert records(again, "valid")[-1]["step"] == 2 and json.loads((again / "config.json").read_text())["train"]["max_steps"] == 2


def test_an_ended_runs_records_without_checkpoints_are_never_cleared(config, tmp_path, capsys):
    """A folder kept from another machine (final.json, units, metrics; no checkpoint) is an ended run: training
    or resuming there is refused with one line, and every file stays (session 33 lost three such folders)."""
    run = tmp_path / "run"
    code, err = run_cli(capsys, "train", str(config), "--run-dir", str(run), "--set", "train.max_steps=2")
    assert code == 0, err
    for name in ("checkpoint_last.pt", "checkpoint_best.pt"):
        (run / name).unlink()
    kept = {p.name: p.read_bytes() for p in run.iterdir() if p.is_file() and not p.name.startswith(".lock")}
    assert {"final.json", "metrics.jsonl", "units-test.npz"} <= kept.keys()
    for argv in (["train", str(config), "--run-dir", str(run)], ["train", "--resume", str(run)]):
        code, err = run_cli(capsys, *argv)
        line = one_error_line(err)
        assert code != 0 and "ended run's records" in line and str(run) in line, line
        assert {p.name: p.read_bytes() for p in run.iterdir() if p.name in kept} == kept


def test_a_bad_value_writes_nothing(config, tmp_path, capsys):
    run = tmp_path / "run"
    for bad in ("train.batch_size=0", "train.lr=-1", "reader.hidden=-5", "data.bptt=0", "head.dropout=2",
                "train.epochs=0", "train.lr=inf", "train.max_minutes=inf", "train.lr=nan"):
        code, err = run_cli(capsys, "train", str(config), "--run-dir", str(run), "--set", bad)
        line = one_error_line(err)
        assert code == 2 and bad.split("=")[0] in line, line
        assert not run.exists()


@pytest.mark.slow
def test_an_output_path_never_replaces_a_runs_own_files(config, tmp_path, capsys):
    """``memread export RUN RUN/checkpoint_best.pt`` exited 0 having replaced the best weights with an archive (eval
    then failed). Every verb's output path (export's OUT, --out of curves and attend: every PNG) is refused in one
    line when it is a run's own file, or a link to one, and nothing is written; any other name goes."""
    run = tmp_path / "run"
    code, err = run_cli(capsys, "train", str(config), "--run-dir", str(run), "--set", "train.max_steps=2",
                        "--set", 'reader.name="lstmn"', "--set", "train.eval_batch_size=16")  # attend: an lstmn
    assert code == 0, err
    (run / ".lock.json").write_text("{}")  # as while a writer holds the run
    for name in ("loggers.json", "mlflow.db"):  # as train.loggers leaves them
        (run / name).write_text("{}")
    before = {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()}
    own = ["checkpoint_best.pt", "checkpoint_last.pt", "config.json", "vocab.json", "metrics.jsonl", "final.json",
           "units-test.npz", "data_root.json", "loggers.json", "mlflow.db", ".lock", ".lock.json"]
    assert set(own) <= before.keys()
    (tmp_path / "link.safetensors").symlink_to(run / "checkpoint_last.pt")
    attempts = [["export", str(run), str(run / name)] for name in own]
    attempts += [["export", str(run), str(tmp_path / "link.safetensors")],
                 ["curves", str(run), "--out", str(run / "final.json")],
                 ["curves", str(run), "--out", str(run / "checkpoint_new.pt")],  # a name only the run's files have
                 ["attend", str(run), "the cat sat", "--out", str(run / "metrics.jsonl")]]
    for argv in attempts:
        code, err = run_cli(capsys, *argv)
        line = one_error_line(err)
        assert code == 2 and "that is a run's own file" in line and "Nothing was written" in line, (argv, line)
        assert {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()} == before, argv
    code, err = run_cli(capsys, "eval", str(run), "--split", "valid", "--batch-size", "16")
    assert code == 0, err
    for argv in (["export", str(run), str(run / "model.safetensors")],  # beside the run's files: fine
                 ["curves", str(run), "--out", str(run / "curves.png")],
                 ["attend", str(run), "the cat sat", "--out", str(run / "attention.png")],
                 ["export", str(run), str(tmp_path / "elsewhere" / "config.json")]):  # a name alone is no run
        code, err = run_cli(capsys, *argv)
        assert code == 0, (argv, err)
        assert Path(argv[-1]).stat().st_size > 0
    assert {p.name: p.read_bytes() for p in run.iterdir() if p.name in before} == before


# --------------------------------------------------------------------------- two writers


HOLD = """
import sys, time
from memread.training.runlock import RunLock
locks = [RunLock(run).acquire() for run in sys.argv[1:]]  # held while this process lives
print("held", flush=True)
time.sleep(120)
"""


@pytest.mark.slow  # starts processes
def test_a_second_writer_is_refused_naming_the_holder_and_a_dead_holder_frees_the_run(config, tmp_path, capsys):
    run = tmp_path / "run"
    assert run_cli(capsys, "train", str(config), "--run-dir", str(run), "--set", "train.max_steps=3")[0] == 0
    before = saved(run)
    fresh = tmp_path / "fresh"  # a folder another process is starting a run in
    fresh.mkdir()
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(run), str(fresh)], stdout=subprocess.PIPE, text=True,
                              env=subprocess_env())
    try:
        assert holder.stdout.readline().strip() == "held"
        for argv in (("train", "--resume", str(run), "--set", "train.max_steps=6"),
                     ("train", str(config), "--run-dir", str(fresh))):
            code, err = run_cli(capsys, *argv)
            line = one_error_line(err)
            assert code == 2 and f"pid {holder.pid}" in line and "another memread process is writing" in line
            assert saved(run) == before and saved(fresh) == {}
        code, err = run_cli(capsys, "eval", str(run), "--split", "valid")  # readers need no lock
        assert code == 0, err
        assert f"pid {holder.pid}" in writer(run)  # who writes it, for `scripts/claims.py status`
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    assert writer(run) is None and writer(tmp_path / "never-run") is None
    code, err = run_cli(capsys, "train", "--resume", str(run), "--set", "train.max_steps=6")  # the stale lock is gone
    assert code == 0, err
    assert [r["step"] for r in records(run, "valid")] == [3, 6]


@pytest.mark.slow  # starts processes
def test_two_train_processes_on_one_folder_write_one_log(config, tmp_path):
    """Two ``memread train`` processes started together on one folder: one trains, the other is refused."""
    run = tmp_path / "run"
    cmd = [sys.executable, "-m", "memread", "train", str(config), "--run-dir", str(run), "--set", "train.max_steps=30",
           "--set", "train.log_every=1"]
    env = subprocess_env(MEMREAD_DATA=str(tmp_path))
    procs = [subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    results = [(p.wait(timeout=300), p.stderr.read()) for p in procs]
    codes = sorted(code for code, _ in results)
    refused = [err for code, err in results if code != 0]
    # the loser is refused either by the lock (while the winner trains) or, if it came second, by the checkpoint
    assert codes == [0, 2], results
    assert "another memread process is writing" in refused[0] or "already holds a run" in refused[0], refused[0]
    steps = [r["step"] for r in records(run, "train")]
    assert steps == list(range(1, 31))  # each record once, in order


HOLD_THEN_GIVE_BACK = """
import sys, time
from memread.training.runlock import RunLock
RunLock(sys.argv[1]).acquire().release()  # a writer that ended, in a process that lives on (a notebook)
print("released", flush=True)
time.sleep(120)
"""


@pytest.mark.slow
def test_a_deleted_lock_file_does_not_let_a_second_writer_in(config, tmp_path, capsys):
    """``RUN/.lock`` deleted while its holder trains no longer locks anything (a new writer flocks a new file):
    ``.lock.json`` names the live holder, so ``train --resume`` is still refused, naming it, with nothing written;
    once the holder is dead, or where the pid it names belongs to a process started after it (reused), the resume
    goes on; a process that gave the lock back and lives on does not block anyone."""
    run = tmp_path / "run"
    assert run_cli(capsys, "train", str(config), "--run-dir", str(run), "--set", "train.max_steps=3")[0] == 0
    assert not (run / ".lock.json").exists()  # given back with the lock
    before = saved(run)
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(run)], stdout=subprocess.PIPE, text=True,
                              env=subprocess_env())
    try:
        assert holder.stdout.readline().strip() == "held"
        (run / ".lock").unlink()  # an `rm`, a sync tool: the holder trains on
        code, err = run_cli(capsys, "train", "--resume", str(run), "--set", "train.max_steps=6")
        line = one_error_line(err)
        assert code == 2 and f"pid {holder.pid}" in line and "another memread process is writing" in line, line
        assert ".lock file was deleted" in line, line
        assert saved(run) == before
        assert f"pid {holder.pid}" in writer(run)  # `claims.py status` sees it too
        # the same pid in a description written before that process began: a reused pid, not the holder
        owner = json.loads((run / ".lock.json").read_text())
        (run / ".lock.json").write_text(json.dumps({**owner, "started": owner["started"] - 3600}))
        assert writer(run) is None
        (run / ".lock.json").write_text(json.dumps(owner))
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    assert writer(run) is None
    gave_back = subprocess.Popen([sys.executable, "-c", HOLD_THEN_GIVE_BACK, str(run)], stdout=subprocess.PIPE,
                                 text=True, env=subprocess_env())
    try:
        assert gave_back.stdout.readline().strip() == "released"
        assert writer(run) is None and not (run / ".lock.json").exists()
        code, err = run_cli(capsys, "train", "--resume", str(run), "--set", "train.max_steps=6")
        assert code == 0, err
    finally:
        gave_back.send_signal(signal.SIGKILL)
        gave_back.wait()
    assert [r["step"] for r in records(run, "valid")] == [3, 6]
    assert [r["step"] for r in records(run, "train")] == [5]  # one writer's records: steps 1-5 of a log_every of 5


KILLED_WHILE_SAVING = """
import sys, time
from memread import cli
from memread.training import checkpoint
real_save, real_mkstemp, temps = checkpoint.torch.save, checkpoint.tempfile.mkstemp, []

def mkstemp(**kw):
    fd, name = real_mkstemp(**kw)
    temps.append(name)
    return fd, name

def save(payload, f):  # the second checkpoint_last.pt is half written when the process is killed
    if sum("checkpoint_last.pt." in name for name in temps) == 2:
        f.write(b"half a checkpoint")
        f.flush()
        print("saving", flush=True)
        time.sleep(120)
    real_save(payload, f)

checkpoint.tempfile.mkstemp, checkpoint.torch.save = mkstemp, save
cli.main(sys.argv[1:])
"""


@pytest.mark.slow  # starts processes
def test_a_writer_killed_while_saving_leaves_a_temp_file_the_next_writer_clears(config, tmp_path, capsys):
    run = tmp_path / "run"
    argv = ["train", str(config), "--run-dir", str(run), "--set", "train.max_steps=9", "--set", "train.checkpoint_every=3"]
    dying = subprocess.Popen([sys.executable, "-c", KILLED_WHILE_SAVING, *argv], env=subprocess_env(MEMREAD_DATA=str(tmp_path)),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert dying.stdout.readline().strip() == "saving", dying.stderr.read()
    finally:
        dying.send_signal(signal.SIGKILL)
        dying.wait()
    left = [p.name for p in run.glob("checkpoint_last.pt.*.tmp")]
    assert len(left) == 1 and (run / left[0]).read_bytes() == b"half a checkpoint"
    (run / "notes.tmp").write_text("the user's")  # temp files that are not the writer's stay
    (run / "checkpoint_last.pt.mine.tmp").write_text("the user's too")
    (run / "units-test.npz.abcd1234.tmp").write_text("a comparison's: it writes without the lock")
    code, err = run_cli(capsys, "eval", str(run), "--checkpoint", "last")  # a reader takes no lock, removes nothing
    assert code == 0, err
    assert (run / left[0]).exists()
    code, err = run_cli(capsys, "train", "--resume", str(run))
    assert code == 0, err
    assert f"removed what a writer killed while saving left: {left[0]} (0.0 MiB)" in err
    assert sorted(p.name for p in run.glob("*.tmp")) == ["checkpoint_last.pt.mine.tmp", "notes.tmp",
                                                          "units-test.npz.abcd1234.tmp"]
    assert [r["step"] for r in records(run, "valid")][-1] == 9


# --------------------------------------------------------------------------- read-only folders and full disks


def _mount_tmpfs(where: Path, size: str) -> bool:
    where.mkdir()
    if shutil.which("mount") is None or os.geteuid() != 0:
        return False
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)], capture_output=True)
    return done.returncode == 0


@pytest.fixture
def tmpfs(tmp_path):
    """A tiny filesystem of our own (root, Linux); skipped where it cannot be mounted."""
    where = tmp_path / "fs"
    if not _mount_tmpfs(where, "4m"):
        pytest.skip("cannot mount a tmpfs here (not root, or not Linux); the injected faults cover it")
    yield where
    subprocess.run(["umount", "-l", str(where)], capture_output=True)


def _remount(where: Path, mode: str) -> None:
    subprocess.run(["mount", "-o", f"remount,{mode}", str(where)], check=True, capture_output=True)


def test_read_only_folder_on_a_real_read_only_filesystem(config, tmpfs, capsys):
    run = tmpfs / "run"
    assert run_cli(capsys, "train", str(config), "--run-dir", str(run), "--set", "train.max_steps=3")[0] == 0
    before = saved(run)
    _remount(tmpfs, "ro")
    try:
        cases = [("train", str(config), "--run-dir", str(tmpfs / "new")),  # cannot create the folder
                 ("train", str(config), "--run-dir", str(run)),  # already holds a run (read before writing)
                 ("train", "--resume", str(run), "--set", "train.max_steps=6"),  # cannot lock or write
                 ("curves", str(run), "--out", str(run / "curves.png"))]  # cannot write the picture
        for argv in cases:
            code, err = run_cli(capsys, *argv)
            line = one_error_line(err)
            assert code == 2, err
            assert str(tmpfs) in line, line
        assert run_cli(capsys, "eval", str(run), "--split", "valid")[0] == 0  # reading still works
    finally:
        _remount(tmpfs, "rw")
    assert saved(run) == before
    assert run_cli(capsys, "train", "--resume", str(run), "--set", "train.max_steps=6")[0] == 0


def test_a_real_full_disk_loses_no_checkpoint_and_the_run_resumes(config, tmpfs, capsys):
    run = tmpfs / "run"
    assert run_cli(capsys, "train", str(config), "--run-dir", str(run), "--set", "train.max_steps=4",
                   "--set", "train.checkpoint_every=2")[0] == 0
    before = saved(run)
    filler = tmpfs / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT)
    try:  # fill the disk to the last block
        while True:
            os.write(fd, b"\0" * 1024)
    except OSError as e:
        assert e.errno == errno.ENOSPC
    finally:
        os.close(fd)
    code, err = run_cli(capsys, "train", "--resume", str(run), "--set", "train.max_steps=8",
                        "--set", "train.checkpoint_every=2")
    line = one_error_line(err)
    assert code == 2 and str(run) in line
    assert "checkpoint_last.pt is intact: continue with memread train --resume" in line or "No space" in line, line
    assert saved(run)["checkpoint_last.pt"] == before["checkpoint_last.pt"]
    assert saved(run)["checkpoint_best.pt"] == before["checkpoint_best.pt"]
    assert not [p for p in run.iterdir() if p.name.endswith(".tmp")]
    filler.unlink()
    code, err = run_cli(capsys, "train", "--resume", str(run), "--set", "train.max_steps=8",
                        "--set", "train.checkpoint_every=2")
    assert code == 0, err
    steps = [r["step"] for r in records(run, "train")]
    assert steps == sorted(set(steps))  # the records the failed attempt wrote were dropped, none twice
    assert records(run, "valid")[-1]["step"] == 8


def _fail_on(monkeypatch, target, attribute: str, error: Exception, after: int = 0) -> list[int]:
    """Make ``target.attribute`` raise ``error`` from its ``after + 1``-th call on."""
    real = getattr(target, attribute)
    calls = [0]

    def failing(*args, **kwargs):
        calls[0] += 1
        if calls[0] > after:
            raise error
        return real(*args, **kwargs)

    monkeypatch.setattr(target, attribute, failing)
    return calls


@pytest.mark.parametrize("error", [OSError(errno.ENOSPC, "No space left on device"),
                                   RuntimeError("[enforce fail at inline_container.cc:603] . unexpected pos 4352 vs 4240"),
                                   PermissionError(errno.EACCES, "Permission denied"),
                                   OSError(errno.EROFS, "Read-only file system")],
                         ids=["enospc", "torch-unexpected-pos", "eacces", "erofs"])
def test_an_injected_fault_while_writing_a_checkpoint(config, tmp_path, capsys, monkeypatch, error):
    run = tmp_path / "run"
    assert run_cli(capsys, "train", str(config), "--run-dir", str(run), "--set", "train.max_steps=4")[0] == 0
    before = saved(run)
    _fail_on(monkeypatch, checkpoint_module.torch, "save", error)
    code, err = run_cli(capsys, "train", "--resume", str(run), "--set", "train.max_steps=8")
    line = one_error_line(err)
    assert code == 2 and ("checkpoint_last.pt:" in line or "checkpoint_best.pt:" in line), line
    assert "continue with memread train --resume" in line
    after = saved(run)
    assert after["checkpoint_last.pt"] == before["checkpoint_last.pt"]
    assert after["checkpoint_best.pt"] == before["checkpoint_best.pt"]
    assert not [p for p in run.iterdir() if p.name.endswith(".tmp")]
    monkeypatch.undo()
    monkeypatch.setenv("MEMREAD_DATA", str(tmp_path))
    assert run_cli(capsys, "train", "--resume", str(run), "--set", "train.max_steps=8")[0] == 0


@pytest.mark.parametrize("where", ["mkdir", "config", "metrics"])
def test_injected_read_only_run_folder(config, tmp_path, capsys, monkeypatch, where):
    """Root ignores file modes, so the read-only cases are injected too: the folder cannot be made, config.json
    cannot be written, metrics.jsonl cannot be appended to."""
    run = tmp_path / "run"
    error = PermissionError(errno.EACCES, "Permission denied", str(run / "x"))
    if where == "mkdir":
        _fail_on(monkeypatch, Path, "mkdir", error)
    elif where == "config":
        _fail_on(monkeypatch, checkpoint_module.tempfile, "mkstemp", error)
    else:
        _fail_on(monkeypatch, metrics_log.MetricsLog, "write", error)
    code, err = run_cli(capsys, "train", str(config), "--run-dir", str(run), "--set", "train.max_steps=2")
    line = one_error_line(err)
    assert code == 2 and "Permission denied" in line and "writable" in line, line
    monkeypatch.undo()
    monkeypatch.setenv("MEMREAD_DATA", str(tmp_path))
    code, err = run_cli(capsys, "train", str(config), "--run-dir", str(run), "--set", "train.max_steps=2")
    assert code == 0, err  # nothing left behind blocks a new start


def test_debug_shows_the_traceback(config, tmp_path, capsys, monkeypatch):
    _fail_on(monkeypatch, Path, "mkdir", PermissionError(errno.EACCES, "Permission denied", "x"))
    with pytest.raises((MemreadError, PermissionError)):
        cli.main(["--debug", "train", str(config), "--run-dir", str(tmp_path / "run")])
    monkeypatch.setenv("MEMREAD_DEBUG", "1")
    with pytest.raises((MemreadError, PermissionError)):
        cli.main(["train", str(config), "--run-dir", str(tmp_path / "run")])


# --------------------------------------------------------------------------- crafted checkpoints


def _craft(run: Path, edit) -> None:
    path = run / "checkpoint_last.pt"
    payload = torch.load(path, weights_only=True)
    edit(payload)
    torch.save(payload, path)
    shutil.copy(path, run / "checkpoint_best.pt")


@pytest.mark.parametrize("edit, message", [
    (lambda p: p.pop("config"), "'config' is missing"),
    (lambda p: p.update(config="{not json"), "config is not valid JSON"),
    (lambda p: p.update(config="[1, 2]"), "config is not a JSON object"),
    (lambda p: p.pop("model"), "'model' is missing"),
    (lambda p: p.pop("loop"), "not a resumable checkpoint"),
    (lambda p: p["loop"].pop("global_step"), "not a resumable checkpoint"),
    (lambda p: p.pop("rng"), "not a resumable checkpoint"),
    (lambda p: p["model"].pop(next(iter(p["model"]))), "weights do not fit the model"),
    (lambda p: p["model"][next(iter(p["model"]))].view(-1)[3:5].fill_(float("nan")), "its weights are not finite"),
], ids=["no-config", "config-not-json", "config-not-object", "no-model", "no-loop", "loop-incomplete", "no-rng",
        "missing-tensor", "nan-weights"])
def test_a_crafted_checkpoint_is_one_line(config, tmp_path, capsys, edit, message):
    run = tmp_path / "run"
    assert run_cli(capsys, "train", str(config), "--run-dir", str(run), "--set", "train.max_steps=2")[0] == 0
    _craft(run, edit)
    before = saved(run)
    code, err = run_cli(capsys, "train", "--resume", str(run), "--set", "train.max_steps=4")
    line = one_error_line(err)
    assert code == 2 and message in line and "checkpoint_last.pt" in line, line
    if message != "not a resumable checkpoint":  # eval reads checkpoint_best, which needs no loop state
        code, err = run_cli(capsys, "eval", str(run))
        assert code == 2 and message in one_error_line(err)
    assert saved(run) == before


def test_eval_of_nan_weights_is_refused_naming_the_checkpoint_and_the_tensor(config, tmp_path, capsys):
    """``memread eval`` of a checkpoint whose weights are nan exited 0 printing ``ppl: NaN``: now one line naming
    the checkpoint, the tensor and how many of its values, exit 2; the run's other checkpoint still evaluates."""
    run = tmp_path / "run"
    assert run_cli(capsys, "train", str(config), "--run-dir", str(run), "--set", "train.max_steps=2")[0] == 0
    payload = torch.load(run / "checkpoint_best.pt", weights_only=True)
    name = sorted(k for k, v in payload["model"].items() if v.is_floating_point())[-1]
    payload["model"][name].view(-1)[:2] = torch.tensor([float("nan"), float("inf")])
    torch.save(payload, run / "checkpoint_best.pt")
    capsys.readouterr()
    code = cli.main(["eval", str(run), "--split", "valid"])
    out, err = capsys.readouterr()
    line = one_error_line(err)
    assert code == 2 and out == "" and "NaN" not in out, (out, line)
    total = payload["model"][name].numel()
    assert f"checkpoint_best.pt: its weights are not finite (2 of the {total} values of '{name}' are nan or inf" in line
    code, err = run_cli(capsys, "eval", str(run), "--split", "valid", "--checkpoint", "last")
    assert code == 0, err


def test_an_edited_train_config_is_named_and_the_way_out_works(config, tmp_path, capsys):
    run = tmp_path / "run"
    assert run_cli(capsys, "train", str(config), "--run-dir", str(run), "--set", "train.max_steps=3")[0] == 0
    cfg = json.loads((run / "config.json").read_text())
    cfg["train"]["clip"] = 1.0  # config.json no longer describes the run that wrote the checkpoint
    (run / "config.json").write_text(json.dumps(cfg))
    code, err = run_cli(capsys, "train", "--resume", str(run), "--set", "train.max_steps=6")
    line = one_error_line(err)
    assert code == 2 and "train.clip = 1.0" in line and "--set train.clip=5.0" in line, line
    code, err = run_cli(capsys, "train", "--resume", str(run), "--set", "train.max_steps=6", "--set", "train.clip=1.0")
    assert code == 0, err


# --------------------------------------------------------------------------- resumes that cannot do what --set asks


def test_a_resume_that_cannot_take_its_values_changes_nothing(config, tmp_path, capsys):
    run = tmp_path / "run"
    assert run_cli(capsys, "train", str(config), "--run-dir", str(run), "--set", "train.max_steps=3")[0] == 0
    before = saved(run)
    for argv, says in [(("--set", "train.epochs=60"), "raise train.max_steps as well"),
                       ((), "nothing to resume"),
                       (("--set", "train.batch_size=4"), "keeps its batch_size"),
                       (("--set", "train.max_steps=2"), "already at step 3")]:
        code, err = run_cli(capsys, "train", "--resume", str(run), *argv)
        line = one_error_line(err)
        assert code == 2 and says in line and "Nothing was changed" in line, line
        assert saved(run) == before


def test_a_resume_with_a_lower_lr_uses_it(config, tmp_path, capsys):
    run = tmp_path / "run"
    assert run_cli(capsys, "train", str(config), "--run-dir", str(run), "--set", "train.max_steps=3")[0] == 0
    trainer = resume_run(run, tmp_path, ["train.max_steps=6", "train.lr=0.05"])
    assert [g["lr"] for g in trainer.optimizer.param_groups] == pytest.approx([0.05])
    trainer.fit()
    trainer.close()
    assert json.loads((run / "config.json").read_text())["train"]["lr"] == 0.05


# --------------------------------------------------------------------------- divergence


@pytest.mark.parametrize("optimizer, lr", [("sgd", 1e6), ("adam", 1e4)])
def test_an_exploding_lr_stops_the_run_honestly(config, tmp_path, capsys, optimizer, lr):
    run = tmp_path / "run"
    code, err = run_cli(capsys, "train", str(config), "--run-dir", str(run), "--set", f"train.lr={lr}",
                        "--set", f'train.optimizer="{optimizer}"')
    line = one_error_line(err)
    assert code == 2 and "training diverged at step" in line and "no checkpoint was written" in line, line
    assert not (run / "final.json").exists()
    assert not [r for r in records(run) if r.get("best")]
    code, err = run_cli(capsys, "train", str(config), "--run-dir", str(run), "--set", "train.max_steps=2")
    assert code == 0, err  # the folder can be started again


def test_a_nan_loss_stops_the_run_at_its_step_before_any_checkpoint_of_nan_weights(config, tmp_path, capsys,
                                                                                  monkeypatch):
    """A training loss that is nan at step 4 (``train.divergence = 0``: no ratio to stop it first) stops the run at
    that step: one line, exit 2, nothing trained on the nan weights, the last checkpoint the one of step 3."""
    run = tmp_path / "run"
    real, calls = loop_module.combine_loss, []

    def nan_at_step_4(value, weight, where):
        calls.append(1)
        if len(calls) == 4:
            value = value * float("nan")  # what an overflow in the forward gives
        return real(value, weight, where)

    monkeypatch.setattr(loop_module, "combine_loss", nan_at_step_4)
    code, err = run_cli(capsys, "train", str(config), "--run-dir", str(run), "--set", "train.divergence=0",
                        "--set", "train.max_steps=8", "--set", "train.log_every=1", "--set", "train.checkpoint_every=1")
    line = one_error_line(err)
    assert code == 2 and "training diverged at step 4: the training loss is nan" in line, line
    assert "kept checkpoint_last.pt (step 3)" in line, line
    last = torch.load(run / "checkpoint_last.pt", weights_only=True)
    assert last["loop"]["global_step"] == 3 and all(t.isfinite().all() for t in last["model"].values())
    assert not (run / "checkpoint_best.pt").exists() and not (run / "final.json").exists()
    assert [r["step"] for r in records(run, "train")] == [1, 2, 3]
    assert records(run)[-1] == {"event": "diverged", "step": 4, "epoch": 0, "reason": "the training loss is nan"}
    assert len(calls) == 4  # no step after it


def test_a_validation_metric_that_explodes_stops_the_run_and_is_never_best(config, tmp_path, capsys, monkeypatch):
    run = tmp_path / "run"
    assert run_cli(capsys, "train", str(config), "--run-dir", str(run), "--set", "train.max_steps=4",
                   "--set", "train.evals_per_epoch=100")[0] == 0
    before = saved(run)
    real = loop_module.evaluate

    def exploded(*args, **kwargs):
        metrics = real(*args, **kwargs)
        return {**metrics, "ppl": 5e21}

    monkeypatch.setattr(loop_module, "evaluate", exploded)
    code, err = run_cli(capsys, "train", "--resume", str(run), "--set", "train.max_steps=8")
    line = one_error_line(err)
    assert code == 2 and "validation ppl 5e+21 is more than train.divergence = 10 times the best so far" in line, line
    assert re.search(r"kept checkpoint_last.pt \(step 4\) and checkpoint_best.pt \(step [1-4]\)", line), line
    assert saved(run)["checkpoint_best.pt"] == before["checkpoint_best.pt"]
    assert saved(run)["checkpoint_last.pt"] == before["checkpoint_last.pt"]
    assert not [r for r in records(run, "valid") if r["step"] > 4]
    assert records(run)[-1]["event"] == "diverged"


# --------------------------------------------------------------------------- metrics exact on resume


class Killed(BaseException):
    pass


def _kill_at(monkeypatch, step: int) -> None:
    real = loop_module.Trainer.train_step

    def train_step(self, batch, *more):
        if self.global_step + 1 == step:
            raise Killed  # the process dies here: what is on disk is what a SIGKILL leaves
        return real(self, batch, *more)

    monkeypatch.setattr(loop_module.Trainer, "train_step", train_step)


_OPENS: dict = {"hooked": False, "seen": None}  # what the audit hook records while a test watches


def _record_opens(event: str, args: tuple) -> None:
    if event == "open" and _OPENS["seen"] is not None:
        _OPENS["seen"].append((str(args[0]), args[1], args[2] or 0))


@contextlib.contextmanager
def watching_opens():
    """The files opened in the block, as (path, mode, flags). A hook cannot be removed: it is added by the first
    test that watches, and records nothing outside this block."""
    if not _OPENS["hooked"]:
        sys.addaudithook(_record_opens)
        _OPENS["hooked"] = True
    _OPENS["seen"] = seen = []
    try:
        yield seen
    finally:
        _OPENS["seen"] = None


def test_a_resume_never_truncates_the_log_in_place(tmp_path, monkeypatch):
    """The resume drops the records written after its checkpoint by replacing metrics.jsonl whole: a file opened
    for writing from its start ("w", O_TRUNC) is empty until rewritten, and a resume killed then would lose it."""
    cfg = experiment_from_dict({**RESUMED["lm"], "train": {"max_steps": 12, "log_every": 1, "checkpoint_every": 4,
                                                           "progress": False}}, "t")
    run = tmp_path / "run"
    trainer = start_run(cfg, run, tmp_path)
    with monkeypatch.context() as m:
        _kill_at(m, 7)
        with pytest.raises(Killed):
            trainer.fit()
    trainer.close()
    assert [r["step"] for r in records(run, "train")] == [1, 2, 3, 4, 5, 6]
    with watching_opens() as opens:
        trainer = resume_run(run, tmp_path)
    trainer.close()
    assert [r["step"] for r in records(run, "train")] == [1, 2, 3, 4]  # trimmed to the checkpoint
    log = str(run / "metrics.jsonl")
    truncating = [(mode, flags) for path, mode, flags in opens
                  if path == log and (isinstance(mode, str) and "w" in mode or flags & os.O_TRUNC)]
    assert truncating == []


def test_files_written_atomically_have_the_mode_open_gives_and_keep_the_one_they_replace(config, tmp_path, capsys):
    """mkstemp makes its temp files 0600; the run's files renamed from them (checkpoints, config.json, final.json,
    a trimmed metrics.jsonl) and an exported archive get what a plain open gives under the umask, as the files
    appended to do, so a run folder shared with a group is readable by it; a file replaced keeps its own mode."""
    old = os.umask(0o027)
    try:
        run = tmp_path / "run"
        code, err = run_cli(capsys, "train", str(config), "--run-dir", str(run), "--set", "train.max_steps=6",
                            "--set", "train.checkpoint_every=3")
        assert code == 0, err
        modes = {p.name: p.stat().st_mode & 0o777 for p in run.iterdir() if not p.name.startswith(".lock")}
        assert {"checkpoint_last.pt", "checkpoint_best.pt", "config.json", "final.json", "metrics.jsonl"} <= set(modes)
        assert set(modes.values()) == {0o640}, modes
        (run / "checkpoint_last.pt").chmod(0o604)  # the user's own choice survives the next write
        code, err = run_cli(capsys, "train", "--resume", str(run), "--set", "train.max_steps=9")
        assert code == 0, err
        assert (run / "checkpoint_last.pt").stat().st_mode & 0o777 == 0o604
        assert (run / "config.json").stat().st_mode & 0o777 == 0o640
        code, err = run_cli(capsys, "export", str(run), str(tmp_path / "model.safetensors"))
        assert code == 0, err
        assert (tmp_path / "model.safetensors").stat().st_mode & 0o777 == 0o640
    finally:
        os.umask(old)


RESUMED = {
    "lm": {"data": {"name": "stories-text", "stories": 300, "bptt": 12},
           "reader": {"name": "lstm", "hidden": 16}, "head": {"name": "lm", "emb": 16, "dropout": 0.2}},
    "lstmn-lm": {"data": {"name": "stories-text", "stories": 300, "bptt": 12},
                 "reader": {"name": "lstmn", "hidden": 16}, "head": {"name": "lm", "emb": 16, "dropout": 0.2}},
    "cloze": {"data": {"name": "stories", "stories": 300}, "reader": {"name": "lstm", "hidden": 16},
              "head": {"name": "pointer", "emb": 16}},
}


@pytest.mark.slow  # trains 23 steps twice, resuming three times
@pytest.mark.parametrize("name", sorted(RESUMED))
def test_metrics_are_the_same_record_by_record_after_kills_off_the_log_boundary(tmp_path, monkeypatch, name):
    train = {"optimizer": "adam", "lr": 3e-3, "batch_size": 8, "max_steps": 23, "evals_per_epoch": 3, "log_every": 5,
             "checkpoint_every": 3, "progress": False}
    cfg = experiment_from_dict({**RESUMED[name], "train": train}, "t")
    full = tmp_path / "full"
    with start_run(cfg, full, tmp_path) as trainer:
        trainer.fit()
    killed = tmp_path / "killed"
    trainer = start_run(cfg, killed, tmp_path)
    for step in (8, 14, 20):  # checkpoints at 6, 12, 18: each resume replays steps off the log boundary
        with monkeypatch.context() as m:
            _kill_at(m, step)
            with pytest.raises(Killed):
                trainer.fit()
        trainer.close()
        assert max(r["step"] for r in records(killed)) < step
        trainer = resume_run(killed, tmp_path)
    trainer.fit()
    trainer.close()
    a, b = records(full), records(killed)
    assert [(r["event"], r["step"]) for r in a] == [(r["event"], r["step"]) for r in b]
    for x, y in zip(a, b):
        for timed in loop_module.WALL_CLOCK_KEYS:
            x.pop(timed, None), y.pop(timed, None)
        assert x == y
