"""The training loop: it learns, it resumes exactly after SIGKILL, it refuses checkpoints that do not fit."""

import json
import math
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from conftest import subprocess_env, tiny_config
from memread.config import ExperimentConfig, TrainConfig, experiment_from_dict
from memread.errors import MemreadError
from memread.experiment import final_evaluation, load_trained, resume_run, start_run
from memread.readers.rnn import RNNReaderConfig
from memread.training.checkpoint import load_checkpoint
from memread.training.loop import eval_points
from memread.training.optim import PlateauSchedule, build_optimizer

# the tiny LM (tests/conftest.py) with dropout, over two epochs validated twice each, logging every step
TINY_LM = dict(head={"dropout": 0.2}, train={"epochs": 2, "evals_per_epoch": 2, "log_every": 1, "checkpoint_every": 4})


def lm_config(hidden: int = 32, dropout: float = 0.1, **train) -> ExperimentConfig:
    return experiment_from_dict({
        "data": {"name": "stories-text", "stories": 300, "bptt": 12},
        "reader": {"name": "lstm", "hidden": hidden},
        "head": {"name": "lm", "emb": 24, "dropout": dropout},
        "train": {"progress": False, "log_every": 5, **train},
    }, "test")


def records(run_dir: Path, event: str) -> list[dict]:
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return [r for r in map(json.loads, lines) if r["event"] == event]


@pytest.mark.slow  # trains two epochs
def test_tiny_lm_learns(tmp_path):
    cfg = lm_config(optimizer="adam", lr=1e-2, batch_size=8, epochs=2, evals_per_epoch=2)
    trainer = start_run(cfg, tmp_path / "run", tmp_path)
    trainer.fit()
    valid = [r["ppl"] for r in records(tmp_path / "run", "valid")]
    vocab_size = len(trainer.task.vocab)
    assert len(valid) == 4
    assert valid[-1] < 0.25 * vocab_size  # far below a uniform guess
    assert valid[-1] < valid[0]
    final = final_evaluation(tmp_path / "run", tmp_path)
    assert final["valid"]["ppl"] == pytest.approx(min(valid), rel=1e-6)  # best checkpoint selected on valid
    assert final["test"]["tokens"] > 0


def test_sgd_schedule_decays_on_plateau_and_stops_early():
    model = torch.nn.Linear(2, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.65)
    sched = PlateauSchedule(higher_is_better=False, decay=0.85, min_improvement=0.01)
    assert sched.step(100.0, opt) is True
    assert sched.step(99.5, opt) is True  # the best value so far (checkpoint_best), but < 1% better:
    assert opt.param_groups[0]["lr"] == pytest.approx(0.65 * 0.85)  # not significant, so lr decays
    assert sched.bad_evals == 1 and sched.best == 100.0 and sched.best_value == 99.5
    assert sched.step(99.7, opt) is False and sched.bad_evals == 2 and sched.worse_than_best(99.7)
    assert sched.step(90.0, opt) is True and sched.bad_evals == 0
    assert opt.param_groups[0]["lr"] == pytest.approx(0.65 * 0.85 ** 2)
    restored = PlateauSchedule(higher_is_better=True)
    restored.load_state_dict({"best": 0.5, "bad_evals": 1})  # a checkpoint from before best_value was kept
    assert restored.best_value == 0.5 and restored.worse_than_best(0.4) and not restored.worse_than_best(0.6)
    assert eval_points(10, 2) == {5, 10} and eval_points(3, 1) == {3} and eval_points(2, 5) == {1, 2}


@pytest.mark.parametrize("restore", [True, False])
def test_restore_best_goes_back_to_the_best_weights_after_a_worse_validation(tmp_path, restore):
    cfg = lm_config(optimizer="sgd", lr=0.5, lr_decay=0.5, batch_size=8, max_steps=4, restore_best=restore)
    trainer = start_run(cfg, tmp_path / "run", tmp_path)
    trainer.fit()  # four steps and one validation: checkpoint_best holds these weights
    # that validation was the cap's, which leaves the schedule alone (test below): one that counts, as at an
    # evaluation point, gives the schedule its reference
    trainer._validate()
    best = {k: v.clone() for k, v in trainer.model.state_dict().items()}
    with torch.no_grad():
        for p in trainer.model.parameters():
            p.add_(torch.randn_like(p))  # far worse weights
    ruined = {k: v.clone() for k, v in trainer.model.state_dict().items()}
    assert trainer.carry is not None  # the state carried from the last batch
    trainer._validate()
    valid = records(tmp_path / "run", "valid")
    assert valid[-1]["ppl"] > valid[0]["ppl"] and valid[-1]["best"] is False
    assert trainer.lr == pytest.approx(0.25)  # the decay applies either way
    expected = best if restore else ruined
    for k, v in trainer.model.state_dict().items():
        assert torch.equal(v, expected[k]), k
    assert (trainer.carry is None) == restore
    restores = records(tmp_path / "run", "restore_best")
    assert len(restores) == (1 if restore else 0)
    if restore:
        assert restores[0]["best_step"] == 4 and restores[0]["lr"] == pytest.approx(0.25)


def test_a_validation_forced_by_a_cap_between_evaluation_points_leaves_the_schedule_alone(tmp_path):
    """A time limit (or a step cap) between evaluation points validates for the record and the best checkpoint,
    but decays no lr, counts toward no patience and restores nothing: a run split over machines keeps the schedule
    of the run never split (session 20's gLSTM stopped a validation early, one of its three bad ones forced by the
    GPU call's time limit)."""
    sched = PlateauSchedule(higher_is_better=False, decay=0.5, min_improvement=0.0, best=100.0, best_value=100.0,
                            bad_evals=2)
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    assert sched.record(120.0) is False and sched.record(90.0) is True
    assert (sched.best, sched.best_value, sched.bad_evals, opt.param_groups[0]["lr"]) == (100.0, 90.0, 2, 1.0)
    # in the loop: three validations that do not count after a first that does; patience 1 would stop at once
    cfg = lm_config(optimizer="sgd", lr=0.5, lr_decay=0.5, batch_size=8, max_steps=4, patience=1, restore_best=True)
    trainer = start_run(cfg, tmp_path / "run", tmp_path)
    trainer.fit()
    trainer._validate()
    with torch.no_grad():
        for p in trainer.model.parameters():
            p.add_(torch.randn_like(p))  # far worse weights
    ruined = {k: v.clone() for k, v in trainer.model.state_dict().items()}
    for _ in range(3):
        assert trainer._validate(counted=False) is False  # no early stop
    valid = records(tmp_path / "run", "valid")
    assert [r.get("counted", True) for r in valid] == [False, True, False, False, False]
    assert trainer.lr == pytest.approx(0.5) and trainer.schedule.bad_evals == 0
    assert all(torch.equal(v, ruined[k]) for k, v in trainer.model.state_dict().items())  # nothing restored
    assert trainer._validate() is True  # one that counts: worse, patience 1, stop


def test_lr_scale_puts_matching_parameters_in_their_own_group():
    model = torch.nn.ModuleDict({"reader": torch.nn.Linear(3, 2), "decoder": torch.nn.Linear(2, 4)})
    cfg = TrainConfig(optimizer="sgd", lr=0.5, lr_scale={"reader.bias": 0.1, "reader.*": 2.0})
    opt = build_optimizer(model.named_parameters(), cfg)
    assert [g["lr"] for g in opt.param_groups] == pytest.approx([0.5, 0.05, 1.0])
    assert [len(g["params"]) for g in opt.param_groups] == [2, 1, 1]  # decoder.*; reader.bias (first match); reader.weight
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    for p in model.parameters():
        p.grad = torch.ones_like(p)
    opt.step()
    for name, lr in [("decoder.weight", 0.5), ("decoder.bias", 0.5), ("reader.bias", 0.05), ("reader.weight", 1.0)]:
        assert torch.allclose(before[name] - dict(model.named_parameters())[name], torch.full_like(before[name], lr)), name
    PlateauSchedule(higher_is_better=False, decay=0.5).step(1.0, opt)  # the first value: no decay
    sched = PlateauSchedule(higher_is_better=False, decay=0.5, best=1.0, best_value=1.0)
    sched.step(2.0, opt)  # worse: every group decays, the ratios stay
    assert [g["lr"] for g in opt.param_groups] == pytest.approx([0.25, 0.025, 0.5])
    with pytest.raises(MemreadError, match=r"train.lr_scale: pattern '\*.v' matches no parameter .*reader.weight"):
        build_optimizer(model.named_parameters(), TrainConfig(lr_scale={"*.v": 0.1}))


def test_resume_refuses_a_different_lr_scale_and_keeps_the_run(tmp_path):
    cfg = lm_config(optimizer="sgd", lr=0.5, batch_size=8, max_steps=2, lr_scale={"reader.*": 0.1})
    trainer = start_run(cfg, tmp_path / "run", tmp_path)
    assert [g["lr"] for g in trainer.optimizer.param_groups] == pytest.approx([0.5, 0.05])
    trainer.fit()
    resumed = resume_run(tmp_path / "run", tmp_path, ["train.max_steps=4"])  # same groups: fine
    assert [g["lr"] for g in resumed.optimizer.param_groups] == pytest.approx([0.5, 0.05])
    assert json.loads((tmp_path / "run" / "config.json").read_text())["train"]["max_steps"] == 2  # not yet trained on
    resumed.fit()
    saved = (tmp_path / "run" / "config.json").read_text()
    assert json.loads(saved)["train"]["max_steps"] == 4  # the override the run went on with is recorded
    for override in ['train.lr_scale={"reader.*" = 0.2}', "train.lr_scale={}"]:
        with pytest.raises(MemreadError, match=r"do not fit train.lr_scale .*resume with the run's own"):
            resume_run(tmp_path / "run", tmp_path, ["train.max_steps=6", override])
    assert (tmp_path / "run" / "config.json").read_text() == saved  # a refused resume changes nothing


def test_early_stopping_with_patience(tmp_path):
    cfg = lm_config(optimizer="sgd", lr=1e-6, batch_size=8, epochs=50, evals_per_epoch=4, patience=2, min_improvement=0.5)
    trainer = start_run(cfg, tmp_path / "run", tmp_path)
    trainer.fit()
    valid = records(tmp_path / "run", "valid")
    assert len(valid) == 3  # the first is the best; two without significant improvement stop the run
    # a lr of 1e-6 still lowers the loss a little: bests, but by less than min_improvement, and said so
    assert "significant" not in valid[0] and [(r["best"], r.get("significant")) for r in valid[1:]] == [(True, False)] * 2


def _train_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "memread", "train", *args]


@pytest.mark.slow
def test_sigkill_mid_epoch_then_resume_equals_uninterrupted(tmp_path):
    cfg = tiny_config(tmp_path, **TINY_LM)
    env = subprocess_env(MEMREAD_DATA=str(tmp_path))
    full, killed = tmp_path / "full", tmp_path / "killed"
    subprocess.run(_train_cmd(str(cfg), "--run-dir", str(full)), env=env, check=True, capture_output=True)
    train_full = records(full, "train")
    n_steps = train_full[-1]["step"]
    assert n_steps > 40

    kill_at = n_steps // 2 + 1  # mid-epoch, not on a checkpoint boundary
    proc = subprocess.Popen(_train_cmd(str(cfg), "--run-dir", str(killed)), env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while time.time() < deadline:
        metrics = killed / "metrics.jsonl"
        if metrics.exists() and any(json.loads(l).get("step", 0) >= kill_at for l in metrics.read_text().splitlines()[-3:] if l.strip().endswith("}")):
            break
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    assert proc.wait() == -signal.SIGKILL, "the run finished before it could be killed"
    step_at_kill = max(r["step"] for r in records(killed, "train"))
    assert step_at_kill < n_steps

    resumed = subprocess.run(_train_cmd("--resume", str(killed)), env=env, capture_output=True, text=True)
    assert resumed.returncode == 0, resumed.stderr
    train_resumed = records(killed, "train")
    assert [r["step"] for r in train_resumed] == [r["step"] for r in train_full]  # nothing lost, nothing twice
    for a, b in zip(train_full, train_resumed):
        assert a["loss"] == pytest.approx(b["loss"], rel=1e-6, abs=1e-7), f"step {a['step']}"
    assert [r["ppl"] for r in records(killed, "valid")] == pytest.approx([r["ppl"] for r in records(full, "valid")], rel=1e-6)
    # the tokens the run trained on, counted across the kill and the resume as without them
    tokens = [load_checkpoint(run / "checkpoint_last.pt")["loop"]["tokens_trained"] for run in (full, killed)]
    assert tokens[0] == tokens[1] > n_steps


SIGKILL_AT = """
import os, signal, sys
from memread import cli
from memread.training.loop import Trainer
real, kill_at = Trainer.train_step, int(sys.argv[1])

def train_step(self, *args, **kwargs):
    if self.global_step + 1 == kill_at:
        os.kill(os.getpid(), signal.SIGKILL)  # a real kill: no handler, no flush, no finally
    return real(self, *args, **kwargs)

Trainer.train_step = train_step
sys.exit(cli.main(sys.argv[2:]))
"""


@pytest.mark.slow
def test_sigkill_between_log_lines_then_resume_writes_the_uninterrupted_log(tmp_path):
    """log_every = 3, checkpoints every 4 steps, SIGKILL before step 11: the checkpoint of step 8 holds the sums of
    steps 7 and 8 (logged with 9), and the log line of step 9 the killed run wrote goes with the resume. The resumed
    metrics.jsonl is the uninterrupted one record by record, but for its wall-clock keys."""
    from memread.training.loop import WALL_CLOCK_KEYS

    cfg = tiny_config(tmp_path, **TINY_LM)
    env = subprocess_env(MEMREAD_DATA=str(tmp_path))
    sets = ["--set", "train.log_every=3", "--set", "train.max_steps=16"]
    full, killed = tmp_path / "full", tmp_path / "killed"
    subprocess.run(_train_cmd(str(cfg), "--run-dir", str(full), *sets), env=env, check=True, capture_output=True)
    proc = subprocess.run([sys.executable, "-c", SIGKILL_AT, "11", "train", str(cfg), "--run-dir", str(killed), *sets],
                          env=env, capture_output=True, text=True)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert load_checkpoint(killed / "checkpoint_last.pt")["loop"]["global_step"] == 8
    assert load_checkpoint(killed / "checkpoint_last.pt")["loop"]["running"]["loss_n"] == 2  # steps 7 and 8
    assert [r["step"] for r in records(killed, "train")] == [3, 6, 9]  # 9: after the checkpoint, written again
    resumed = subprocess.run(_train_cmd("--resume", str(killed)), env=env, capture_output=True, text=True)
    assert resumed.returncode == 0, resumed.stderr

    def log(run: Path) -> list[dict]:
        rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
        return [{k: v for k, v in r.items() if k not in WALL_CLOCK_KEYS} for r in rows]

    a, b = log(full), log(killed)
    assert [r["step"] for r in a if r["event"] == "train"] == [3, 6, 9, 12, 15]
    assert b == a


def test_a_runs_training_seconds_add_up_over_its_resumes(tmp_path):
    """``loop.seconds_trained``: the wall time of fit() summed over every process that trained the run (what a run
    cost, beside its tokens); a run begun before they were counted keeps None, not a part passed off as the whole."""
    from memread.training.checkpoint import save_checkpoint

    run = tmp_path / "run"
    with start_run(lm_config(max_steps=4, batch_size=8), run, tmp_path) as trainer:
        t0 = time.perf_counter()
        trainer.fit()
        first = time.perf_counter() - t0
    seconds = load_checkpoint(run / "checkpoint_last.pt")["loop"]["seconds_trained"]
    assert 0 < seconds <= first
    payload = load_checkpoint(run / "checkpoint_last.pt")
    payload["loop"]["seconds_trained"] = 1000.0  # as if the first process had trained 1000 s
    save_checkpoint(payload, run / "checkpoint_last.pt")
    with resume_run(run, tmp_path, ["train.max_steps=8"]) as trainer:
        t0 = time.perf_counter()
        trainer.fit()
        second = time.perf_counter() - t0
    loop = load_checkpoint(run / "checkpoint_last.pt")["loop"]
    assert 1000.0 < loop["seconds_trained"] <= 1000.0 + second
    # split by the device that trained them: here every second on the CPU, the first process's as its checkpoint
    # said (a run begun on a GPU keeps its GPU seconds apart)
    assert set(loop["seconds_by_device"]) == {"cpu"} and 0 < loop["seconds_by_device"]["cpu"] <= first + second
    payload = load_checkpoint(run / "checkpoint_last.pt")
    payload["loop"]["seconds_by_device"] = {"cuda": 480.0, "cpu": payload["loop"]["seconds_by_device"]["cpu"]}
    save_checkpoint(payload, run / "checkpoint_last.pt")
    with resume_run(run, tmp_path, ["train.max_steps=9"]) as trainer:
        trainer.fit()
    by_device = load_checkpoint(run / "checkpoint_last.pt")["loop"]["seconds_by_device"]
    assert by_device["cuda"] == 480.0 and by_device["cpu"] > payload["loop"]["seconds_by_device"]["cpu"]
    payload = load_checkpoint(run / "checkpoint_last.pt")
    del payload["loop"]["seconds_trained"]  # a checkpoint from before they were counted
    save_checkpoint(payload, run / "checkpoint_last.pt")
    with resume_run(run, tmp_path, ["train.max_steps=10"]) as trainer:
        trainer.fit()
    loop = load_checkpoint(run / "checkpoint_last.pt")["loop"]
    assert loop["global_step"] == 10 and loop["seconds_trained"] is None


def test_checkpoints_are_atomic_and_load_without_pickled_code(tmp_path):
    trainer = start_run(lm_config(max_steps=6, checkpoint_every=2, batch_size=8), tmp_path / "run", tmp_path)
    trainer.fit()
    files = sorted(p.name for p in (tmp_path / "run").iterdir())
    assert "checkpoint_best.pt" in files and "checkpoint_last.pt" in files
    assert not [f for f in files if f.endswith(".tmp")]
    payload = load_checkpoint(tmp_path / "run" / "checkpoint_last.pt")  # weights_only=True inside
    assert payload["loop"]["global_step"] == 6 and payload["loop"]["finished"] is True
    # what the run cost: every training token of its 6 batches
    assert payload["loop"]["tokens_trained"] == sum(trainer.task.tokens_in(b) for b in
                                                   list(trainer.task.batches("train", 8, 0, trainer.cfg.train.seed))[:6])

    evil = tmp_path / "evil.pt"
    torch.save({"format": "memread-checkpoint-v1", "obj": ExperimentConfig(data=None, reader=None, head=None, criterion=None)}, evil)
    with pytest.raises(MemreadError, match="evil.pt: not a loadable memread checkpoint"):
        load_checkpoint(evil)
    (tmp_path / "junk.pt").write_bytes(b"\x00garbage")
    with pytest.raises(MemreadError, match="junk.pt: not a loadable memread checkpoint"):
        load_checkpoint(tmp_path / "junk.pt")


def test_mismatched_checkpoint_is_refused_and_nothing_is_lost(tmp_path):
    run = tmp_path / "run"
    start_run(lm_config(max_steps=3, batch_size=8), run, tmp_path).fit()
    before = {p.name: p.read_bytes() for p in run.iterdir() if not p.name.startswith(".lock")}
    # another run's config with a different hidden size
    other = tmp_path / "other"
    start_run(lm_config(hidden=16, max_steps=2), other, tmp_path).fit()
    (run / "checkpoint_best.pt").write_bytes((other / "checkpoint_best.pt").read_bytes())
    with pytest.raises(MemreadError, match=r"checkpoint does not match the config: reader.hidden = 16 in the checkpoint, 32 now"):
        load_trained(run, tmp_path)
    # a vocabulary that differs from the one the checkpoint was trained with
    (run / "checkpoint_best.pt").write_bytes(before["checkpoint_best.pt"])
    vocab = json.loads((run / "vocab.json").read_text())
    vocab["itos"][-1], vocab["itos"][-2] = vocab["itos"][-2], vocab["itos"][-1]
    (run / "vocab.json").write_text(json.dumps(vocab))
    with pytest.raises(MemreadError, match="different vocabulary"):
        resume_run(run, tmp_path)
    (run / "vocab.json").write_bytes(before["vocab.json"])
    # refusing touched nothing else
    after = {p.name: p.read_bytes() for p in run.iterdir() if not p.name.startswith(".lock")}
    assert after == before
    with pytest.raises(MemreadError, match="already holds a run"):
        start_run(lm_config(max_steps=3), run, tmp_path)
    with pytest.raises(MemreadError, match="can only change \\[train\\] settings"):
        resume_run(run, tmp_path, ["reader.hidden=8"])


def test_cloze_loop_same_code_path(tmp_path):
    cfg = experiment_from_dict({"data": {"name": "stories", "stories": 200}, "reader": {"name": "lstm", "hidden": 16},
                                "head": {"name": "pointer", "emb": 16},
                                "train": {"max_steps": 5, "batch_size": 16, "progress": False}}, "test")
    start_run(cfg, tmp_path / "run", tmp_path).fit()
    valid = records(tmp_path / "run", "valid")
    assert len(valid) == 1 and 0.0 <= valid[0]["accuracy"] <= 1.0 and valid[0]["count"] == 20


def test_checkpoint_from_before_a_new_config_key_still_loads(tmp_path):
    run = tmp_path / "run"
    start_run(lm_config(max_steps=2, batch_size=8), run, tmp_path).fit()
    payload = torch.load(run / "checkpoint_best.pt", weights_only=True)
    saved = json.loads(payload["config"])
    del saved["criterion"]["reduction"]  # as written by a memread without that key
    payload["config"] = json.dumps(saved)
    torch.save(payload, run / "checkpoint_best.pt")
    cfg, task, model = load_trained(run, tmp_path)
    assert cfg.criterion.reduction == "sequence"


@pytest.mark.slow  # trains several epochs
def test_a_finished_run_given_more_epochs_goes_on_as_if_uninterrupted(tmp_path):
    """--resume RUN --set train.epochs=2 on a run that finished its one epoch continues it exactly;
    an early-stopped run stays finished."""
    full = start_run(lm_config(epochs=2, optimizer="sgd", lr=0.5, batch_size=8), tmp_path / "full", tmp_path)
    full.fit()
    short = start_run(lm_config(epochs=1, optimizer="sgd", lr=0.5, batch_size=8), tmp_path / "short", tmp_path)
    short.fit()
    assert load_checkpoint(tmp_path / "short" / "checkpoint_last.pt")["loop"]["stopped"] == "epochs"
    same = resume_run(tmp_path / "short", tmp_path)
    assert same.finished  # no new budget: nothing to do
    more = resume_run(tmp_path / "short", tmp_path, ["train.epochs=2"])
    assert not more.finished and more.epoch == 1
    more.fit()
    a, b = records(tmp_path / "full", "train"), records(tmp_path / "short", "train")
    assert [r["step"] for r in a] == [r["step"] for r in b]
    assert [r["loss"] for r in a] == pytest.approx([r["loss"] for r in b], rel=1e-6)
    early = start_run(lm_config(epochs=3, optimizer="sgd", lr=0.5, batch_size=8, patience=1, min_improvement=10.0),
                      tmp_path / "early", tmp_path)
    early.fit()
    assert load_checkpoint(tmp_path / "early" / "checkpoint_last.pt")["loop"]["stopped"] == "early"
    before = {p.name: p.read_bytes() for p in (tmp_path / "early").iterdir() if not p.name.startswith(".lock")}
    with pytest.raises(MemreadError, match="nothing to resume: it stopped early .* Nothing was changed"):
        resume_run(tmp_path / "early", tmp_path, ["train.epochs=5"])
    assert {p.name: p.read_bytes() for p in (tmp_path / "early").iterdir() if not p.name.startswith(".lock")} == before


@pytest.mark.slow  # trains whole epochs
def test_a_run_back_from_a_gpu_with_its_last_checkpoint_alone_gets_its_best_again_or_a_clear_refusal(tmp_path):
    """gpu_checks.sh brings a time-limited run's best checkpoint only where it is not the last. Resumed, such a
    folder writes the last again as the best when the last validation was the best at the last checkpoint's
    step (session 20's dLSTM failed at its first worse validation: restore_best found no best); where the best
    weights are truly gone, the resume refuses at once, naming the steps, and changes nothing."""
    run = tmp_path / "timed"
    timed = start_run(lm_config(epochs=2, optimizer="sgd", lr=0.5, batch_size=8, max_minutes=1e-9, restore_best=True),
                      run, tmp_path)
    timed.fit()
    timed.close()
    best = load_checkpoint(run / "checkpoint_best.pt")
    (run / "checkpoint_best.pt").unlink()
    more = resume_run(run, tmp_path, ["train.max_minutes=0"])
    again = load_checkpoint(run / "checkpoint_best.pt")
    assert again["loop"]["global_step"] == best["loop"]["global_step"] == 1
    assert all(torch.equal(again["model"][k], best["model"][k]) for k in best["model"])
    more.fit()  # restore_best and the final evaluation find it
    more.close()
    final_evaluation(run, tmp_path)
    # a last checkpoint past the best validation, the best gone: refused, nothing changed
    last = load_checkpoint(run / "checkpoint_last.pt")["loop"]
    valid = records(run, "valid")
    assert valid[-1]["step"] == last["global_step"]
    (run / "checkpoint_best.pt").unlink()
    lines = (run / "metrics.jsonl").read_text().splitlines()
    n = max(i for i, line in enumerate(lines) if json.loads(line)["event"] == "valid")
    (run / "metrics.jsonl").write_text("\n".join(lines[:n] + [json.dumps({**valid[-1], "best": False})]) + "\n")
    before = (run / "metrics.jsonl").read_text()
    with pytest.raises(MemreadError, match=r"checkpoint_best.pt: not found, and checkpoint_last.pt \(step \d+\) is "
                                           r"not the best \(the best validation was at step \d+\)"):
        resume_run(run, tmp_path, ["train.epochs=3"])
    assert not (run / "checkpoint_best.pt").exists() and (run / "metrics.jsonl").read_text() == before


@pytest.mark.slow  # trains a whole epoch, twice
def test_a_run_out_of_minutes_validates_stops_and_resumes_as_if_uninterrupted(tmp_path):
    """train.max_minutes: past the time limit the run validates, checkpoints and stops ("max_minutes"); a resume
    gets a new allowance and goes on exactly as the run that was never stopped."""
    full = start_run(lm_config(epochs=1, optimizer="sgd", lr=0.5, batch_size=8), tmp_path / "full", tmp_path)
    full.fit()
    timed = start_run(lm_config(epochs=1, optimizer="sgd", lr=0.5, batch_size=8, max_minutes=1e-9),
                      tmp_path / "timed", tmp_path)
    timed.fit()
    timed.close()
    loop = load_checkpoint(tmp_path / "timed" / "checkpoint_last.pt")["loop"]
    assert loop["stopped"] == "max_minutes" and loop["finished"] and loop["global_step"] == 1
    assert [r["step"] for r in records(tmp_path / "timed", "valid")] == [1]
    assert records(tmp_path / "timed", "valid")[0]["counted"] is False  # between evaluation points: see below
    assert (tmp_path / "timed" / "checkpoint_best.pt").exists()
    more = resume_run(tmp_path / "timed", tmp_path, ["train.max_minutes=0"])
    assert not more.finished and more.global_step == 1
    more.fit()
    assert load_checkpoint(tmp_path / "timed" / "checkpoint_last.pt")["loop"]["stopped"] == "epochs"
    a, b = records(tmp_path / "full", "train"), records(tmp_path / "timed", "train")
    assert [r["step"] for r in a][-3:] == [r["step"] for r in b][-3:]
    assert [r["loss"] for r in a][-3:] == pytest.approx([r["loss"] for r in b][-3:], rel=1e-6)
    assert records(tmp_path / "full", "valid")[-1]["ppl"] == pytest.approx(records(tmp_path / "timed", "valid")[-1]["ppl"],
                                                                           rel=1e-6)


def test_an_lstm_lm_trains_and_evaluates_under_bf16_mixed_on_any_cpu(tmp_path):
    """``train.precision = "bf16-mixed"`` on the CPU: an LSTM LM trains, validates and finishes with finite numbers,
    also on a CPU whose oneDNN refuses a bfloat16 LSTM (session 21's AVX2-only AMD EPYC, where every such run
    stopped at its first step: the loop's autocast turns oneDNN off there, memread.modules.precision.autocast)."""
    trainer = start_run(lm_config(max_steps=4, batch_size=8, precision="bf16-mixed", log_every=1),
                        tmp_path / "run", tmp_path)
    trainer.fit()
    train, valid = records(tmp_path / "run", "train"), records(tmp_path / "run", "valid")
    assert train and valid and all(math.isfinite(r["loss"]) for r in train) and math.isfinite(valid[-1]["ppl"])
    assert torch.backends.mkldnn.enabled  # left as it was


def test_a_pause_by_sigtstp_is_taken_out_of_a_runs_seconds(tmp_path):
    """fit() counts a pause given with SIGTSTP out of ``seconds_trained`` (and the train logs' seconds), and gives
    the signal back as it found it. The pause is a stand-in here (a sleep, not a stop): the real stop is below."""
    from memread.training.clock import PausableClock

    def unaccounted(signum, frame):  # what the test process does with SIGTSTP when fit() does not take it
        time.sleep(0.8)

    previous = signal.signal(signal.SIGTSTP, unaccounted)
    try:
        with start_run(lm_config(max_steps=6, batch_size=8, log_every=1), tmp_path / "run", tmp_path) as trainer:
            trainer.clock = PausableClock(stop=lambda: time.sleep(0.8))
            step = trainer.train_step

            def pausing_step(batch, *more):
                if trainer.global_step == 3:
                    signal.raise_signal(signal.SIGTSTP)
                return step(batch, *more)

            trainer.train_step = pausing_step
            t0 = time.perf_counter()
            trainer.fit()
            wall = time.perf_counter() - t0
        assert signal.getsignal(signal.SIGTSTP) is unaccounted  # given back
    finally:
        signal.signal(signal.SIGTSTP, previous)
    assert trainer.clock.paused_s >= 0.8
    seconds = load_checkpoint(tmp_path / "run" / "checkpoint_last.pt")["loop"]["seconds_trained"]
    assert 0 < seconds <= wall - 0.8
    assert sum(r["seconds"] for r in records(tmp_path / "run", "train")) <= wall - 0.8


@pytest.mark.skipif(not hasattr(signal, "SIGTSTP") or not Path("/proc/self/stat").exists(), reason="Linux signals")
@pytest.mark.slow  # starts processes
def test_the_clock_stops_the_process_on_sigtstp_and_leaves_the_pause_out():
    child = """
import time
from memread.training.clock import PausableClock
clock = PausableClock()
with clock.counting_pauses():
    c0, w0 = clock(), time.perf_counter()
    print("ready", flush=True)
    while time.perf_counter() - w0 < 3.0:
        time.sleep(0.01)
    print(time.perf_counter() - w0, clock() - c0, flush=True)
"""
    proc = subprocess.Popen([sys.executable, "-c", child], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=subprocess_env())
    try:
        assert proc.stdout.readline().strip() == "ready"
        proc.send_signal(signal.SIGTSTP)
        time.sleep(0.5)
        state = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        assert state == "T"  # stopped, as SIGSTOP stops it
        time.sleep(1.0)
        proc.send_signal(signal.SIGCONT)
        wall, clock = map(float, proc.stdout.readline().split())
        assert proc.wait(timeout=30) == 0
    finally:
        proc.kill()
    assert 1.3 <= wall - clock <= 2.5, (wall, clock)  # the 1.5 s it was stopped, out of the clock
    assert "paused" in proc.stderr.read()
