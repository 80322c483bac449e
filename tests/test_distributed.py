"""Data-parallel training with torchrun (issue 20), on this machine's CPUs with gloo: two processes give the
losses of one process with the same global batch (a language model carrying state, one of sentences read
alone whose shards hold different numbers of tokens, and a classifier);
a two-process run killed with SIGKILL mid-epoch resumes to the uninterrupted run; one run directory, one
metrics.jsonl, written by process 0 alone."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

from conftest import FIXTURES, Fresh, subprocess_env, tiny_config
from memread.training.loop import WALL_CLOCK_KEYS

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not dist.is_available() or not dist.is_gloo_available(),
                                                   reason="torch.distributed with gloo is not available here")]

# the tiny LM (tests/conftest.py) over two epochs, validated twice in each, on the CPU
LM = dict(head={"dropout": 0.0}, train={"epochs": 2, "evals_per_epoch": 2, "log_every": 3, "checkpoint_every": 4,
                                        "device": "cpu"})

# each sentence read alone, unsorted, the loss a mean over tokens: the two processes' shards hold different numbers
# of tokens, so only the weighting of their losses by those numbers (Loss.weight) gives the loss of one process
LM_SENTENCES = dict(LM, data={"bptt": None, "context": "sentence", "bucket": 0},
                    criterion={"name": "lm_nll", "reduction": "token"})

SST = dict(data={"name": "sst", "fine": True, "phrases": True}, reader={"hidden": 16},
           head={"name": "mlp", "emb": 16, "dropout": 0.0, "mlp": 16},
           train=Fresh(optimizer="adam", lr=1e-2, batch_size=8, epochs=2, log_every=2, progress=False, device="cpu"))


def train(config: Path, run: Path, nproc: int, *extra: str, root: Path, wait: bool = True, **popen):
    cmd = [sys.executable, "-m", "memread", "train", str(config), "--run-dir", str(run), "--nproc", str(nproc), *extra]
    env = subprocess_env(MEMREAD_DATA=str(root))
    if not wait:
        return subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, **popen)
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def records(run: Path, event: str) -> list[dict]:
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    return [r for r in rows if r["event"] == event]


def same_records(a: list[dict], b: list[dict], rel: float) -> None:
    assert [r["step"] for r in a] == [r["step"] for r in b]
    for x, y in zip(a, b):
        for k, v in x.items():
            if k in WALL_CLOCK_KEYS or not isinstance(v, float):
                assert k in WALL_CLOCK_KEYS or v == y[k], (k, x, y)
                continue
            assert v == pytest.approx(y[k], rel=rel, abs=1e-9), (k, x["step"], v, y[k])


@pytest.mark.parametrize("name", ["lm", "lm-sentences", "sst"])
def test_two_processes_give_the_losses_of_one_with_the_same_global_batch(tmp_path, name):
    root = FIXTURES if name == "sst" else tmp_path
    config = tiny_config(tmp_path, f"{name}.toml", **{"lm": LM, "lm-sentences": LM_SENTENCES, "sst": SST}[name])
    one, two = tmp_path / "one", tmp_path / "two"
    train(config, one, 1, root=root)
    train(config, two, 2, root=root)
    assert records(one, "train") and records(one, "valid")
    same_records(records(one, "train"), records(two, "train"), rel=1e-5)
    same_records(records(one, "valid"), records(two, "valid"), rel=1e-5)
    final_one, final_two = (json.loads((r / "final.json").read_text()) for r in (one, two))
    metric = "accuracy" if name == "sst" else "ppl"
    assert final_two["test"][metric] == pytest.approx(final_one["test"][metric], rel=1e-5)
    # one run directory, written by process 0 alone: one metrics.jsonl, each record once
    steps = [r["step"] for r in records(two, "train")]
    assert steps == sorted(set(steps))
    assert sorted(p.name for p in two.iterdir() if not p.name.startswith(".")) == [
        "checkpoint_best.pt", "checkpoint_last.pt", "config.json", "data_root.json", "final.json", "metrics.jsonl",
        "units-test.npz", "units-valid.npz", "vocab.json"]


def test_a_two_process_run_killed_mid_epoch_resumes_to_the_uninterrupted_run(tmp_path):
    # each process's dropout stream is resumed too
    config = tiny_config(tmp_path, "lm.toml", **dict(LM, head={"dropout": 0.3}))
    full, killed = tmp_path / "full", tmp_path / "killed"
    train(config, full, 2, root=tmp_path)
    n_steps = records(full, "train")[-1]["step"]
    kill_at = n_steps // 3 + 1  # mid-epoch, off the checkpoint and log boundaries
    proc = train(config, killed, 2, root=tmp_path, wait=False)
    deadline = time.time() + 300
    while time.time() < deadline:
        log = killed / "metrics.jsonl"
        if log.exists() and any(json.loads(l)["step"] >= kill_at for l in log.read_text().splitlines() if l.endswith("}")):
            break
        time.sleep(0.01)
    # the launcher and both workers (torchrun starts each worker in a session of its own), as a machine that dies
    subprocess.run(["pkill", "-KILL", "-f", f"run-dir {killed}"])
    proc.wait()
    time.sleep(0.5)
    assert max(r["step"] for r in records(killed, "train")) < n_steps, "the run finished before it was killed"
    assert (killed / "checkpoint_last.pt").exists()
    # another number of processes cannot continue it exactly: refused in one line, nothing changed
    before = (killed / "checkpoint_last.pt").read_bytes()
    one = subprocess.run([sys.executable, "-m", "memread", "train", "--resume", str(killed)],
                         env=subprocess_env(MEMREAD_DATA=str(tmp_path)), capture_output=True, text=True)
    assert one.returncode == 2 and "written by 2 process(es), resumed by 1" in one.stderr and "--nproc 2" in one.stderr
    assert (killed / "checkpoint_last.pt").read_bytes() == before
    resumed = subprocess.run([sys.executable, "-m", "memread", "train", "--resume", str(killed), "--nproc", "2"],
                             env=subprocess_env(MEMREAD_DATA=str(tmp_path)), capture_output=True, text=True)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    same_records(records(full, "train"), records(killed, "train"), rel=1e-6)
    same_records(records(full, "valid"), records(killed, "valid"), rel=1e-6)


def test_two_processes_stop_together_at_the_time_limit_asking_the_clock_every_few_steps(tmp_path):
    """train.max_minutes under torchrun: process 0's clock decides for both, asked every TIME_CHECK_EVERY steps
    (not every step: each ask is a collective and a wait for the device), so both stop at the first ask past
    the limit, validated and checkpointed, and the run says why it stopped."""
    from memread.training.loop import TIME_CHECK_EVERY

    config = tiny_config(tmp_path, "lm.toml", **LM)
    run = tmp_path / "timed"
    train(config, run, 2, "--set", "train.max_minutes=1e-9", root=tmp_path)
    final = json.loads((run / "final.json").read_text())
    assert TIME_CHECK_EVERY > 1 and max(r["step"] for r in records(run, "train")) <= TIME_CHECK_EVERY
    assert [r["step"] for r in records(run, "valid")] == [TIME_CHECK_EVERY]  # the one validation: at the stop
    loop = torch.load(run / "checkpoint_last.pt", weights_only=True)["loop"]
    assert loop["stopped"] == "max_minutes" and loop["global_step"] == TIME_CHECK_EVERY and "test" in final


def test_torchrun_itself_and_a_batch_that_does_not_split(tmp_path):
    config = tiny_config(tmp_path, "lm.toml", **dict(LM, train={**LM["train"], "batch_size": 7}))
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                           "-m", "memread", "train", str(config), "--run-dir", str(tmp_path / "run")],
                          env=subprocess_env(MEMREAD_DATA=str(tmp_path)), capture_output=True, text=True, timeout=600)
    assert done.returncode != 0
    errors = [line for line in done.stderr.splitlines() if line.startswith("memread: error:")]
    assert len(errors) == 1 and "7 columns do not split evenly over 2 processes" in errors[0], done.stderr[-2000:]
