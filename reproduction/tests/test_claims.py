"""reproduction/claims.py (the claims scheduler, ``python -m reproduction.claims``): every claim names rows that exist, with configs that load with the claim's overrides,
compares rows it trains, and spreads its runs over the queues by their minutes."""

from __future__ import annotations

import functools
import os
import sys
from pathlib import Path

import pytest

from memread.config import load_experiment
from reproduction import REPO, claims
from reproduction.rows import config_path, find_row


@pytest.mark.parametrize("name", sorted(claims.CLAIMS))
def test_each_claim_trains_rows_that_exist_with_overrides_that_load(name):
    claim = claims.CLAIMS[name]
    for label, run in claim.runs.items():
        assert bool(run.row) != bool(run.config)  # a row of the papers' tables, or a config that has none
        path = config_path(find_row(run.row)) if run.row else REPO / run.config
        cfg = load_experiment(path, [*claim.overrides(label), "train.seed=2"])
        assert cfg.train.seed == 2 and cfg.train.progress is False
        assert label == run.row or not claim.paper_setup  # numbers under a row id only for the paper's setup
    assert all(a in claim.runs and b in claim.runs and a != b for a, b, _, _ in claim.compare)
    assert len({n for _, _, n, _ in claim.compare}) == len(claim.compare)
    # every run is trained for a comparison (a run in none is one whose comparison went missing from the list)
    assert {x for a, b, _, _ in claim.compare for x in (a, b)} == set(claim.runs)
    for cmd, (_, _, _, paper) in zip(claims.finish_commands(claim)[-len(claim.compare):], claim.compare):
        told = float(cmd[cmd.index("--paper-value") + 1]) if "--paper-value" in cmd else None
        assert told == paper  # the paper's difference is recorded beside ours
    # every (label, seed) once, over the queues
    work = [w for q in claims.queues(claim, 2) for w in q]
    assert sorted(work) == sorted((label, s) for label in claim.runs for s in range(1, claim.seeds_of(label) + 1))


def test_queues_go_seed_by_seed_longest_first_onto_the_least_loaded_queue():
    """A claim cut short by the session's end keeps whole seeds: every run of seed 1 starts before any of seed 2."""
    claim = claims.Claim("t", "test", {"a": claims.Run("x", 50), "b": claims.Run("y", 6)}, [("a", "b", "a-vs-b", 1.0)])
    q1, q2 = claims.queues(claim, 2)
    assert q1 == [("a", 1), ("b", 2), ("a", 3)] and q2 == [("b", 1), ("a", 2), ("b", 3)]
    # a claim started again: the runs that ended weigh nothing, so the two left to train go side by side
    q1, q2 = claims.queues(claim, 2, frozenset({("a", 1), ("b", 1), ("b", 2), ("b", 3)}))
    assert ("a", 2) in q1 and ("a", 3) in q2


def test_a_claim_off_the_papers_setup_keeps_its_runs_apart_and_records_only_comparisons(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    wikiqa = claims.CLAIMS["wikiqa"]
    assert not wikiqa.paper_setup
    cmd = claims.train_command(wikiqa, "lstm", 2)
    assert cmd[cmd.index("--run-dir") + 1] == "runs/claims/wikiqa/lstm/seed2"
    assert cmd[2] == "configs/wikiqa/lstm.toml" and "reader.hidden=300" in cmd and "train.seed=2" in cmd
    finish = claims.finish_commands(wikiqa)
    assert [c[1] for c in finish] == ["compare"]  # no memread reproduce under the paper's row ids
    assert finish[0][finish[0].index("--record") + 1] == "claim-wikiqa-mma-nse-vs-lstm-1x300"
    sst = claims.finish_commands(claims.CLAIMS["sst-fine"])
    assert [c[1] for c in sst] == ["reproduce"] * 3 + ["compare"] * 3


def _folder(run_dir: Path, config: Path, overrides: list[str], loop: dict) -> None:
    """A run folder as `memread train` leaves it: config.json, and a checkpoint with its loop state."""
    import torch

    from memread.training.checkpoint import FORMAT

    run_dir.mkdir(parents=True)
    (run_dir / "config.json").write_text(load_experiment(config, overrides).to_json())
    torch.save({"format": FORMAT, "config": "{}", "vocab": "v", "model": {}, "loop": loop},
               run_dir / "checkpoint_last.pt")


def test_a_run_folder_is_resumed_with_the_claims_new_train_values_and_an_ended_run_is_left(tmp_path, monkeypatch):
    """A claim started again (next session) resumes each run where it stopped, passing the [train] values the claim
    changed since (a raised epoch cap); a run that ended and gets nothing more from them is not run again (an
    early stop is final), so the claim goes on to record; a folder of another model is refused."""
    monkeypatch.chdir(tmp_path)
    wikiqa = claims.CLAIMS["wikiqa"]
    config = REPO / wikiqa.runs["lstm"].config_path
    old = [*wikiqa.overrides("lstm"), "train.epochs=8", "train.seed=2"]  # the claim's cap when these runs started
    run = tmp_path / "runs/claims/wikiqa/lstm/seed2"
    _folder(run, config, old, {"finished": False, "stopped": None, "epoch": 3, "global_step": 90})
    cap = f"train.epochs={wikiqa_epochs(wikiqa)}"
    killed = claims.train_command(wikiqa, "lstm", 2)
    assert killed == ["memread", "train", "--resume", str(Path("runs/claims/wikiqa/lstm/seed2")), "--set", cap]
    # the same run, ended at its 8-epoch cap: the claim's larger cap trains it on; at the same cap it is left
    run2 = tmp_path / "runs/claims/wikiqa/lstm/seed3"
    _folder(run2, config, old[:-1] + ["train.seed=3"], {"finished": True, "stopped": "epochs", "epoch": 8,
                                                          "global_step": 240})
    assert claims.train_command(wikiqa, "lstm", 3)[-2:] == ["--set", cap]
    assert claims.train_command(wikiqa, "lstm", 3, ("train.epochs=8",)) is None
    # an early stop is final
    run1 = tmp_path / "runs/claims/wikiqa/lstm/seed1"
    _folder(run1, config, old[:-1] + ["train.seed=1"], {"finished": True, "stopped": "early", "epoch": 5,
                                                          "global_step": 150})
    assert claims.train_command(wikiqa, "lstm", 1) is None
    assert "# runs/claims/wikiqa/lstm/seed1: ended; nothing to train" in claims.plan(wikiqa, 2).splitlines()
    # a folder that holds another model's run
    other = tmp_path / "runs/claims/wikiqa/mma-nse-attention/seed1"
    _folder(other, config, old[:-1] + ["train.seed=1"], {"finished": False, "stopped": None, "epoch": 0,
                                                          "global_step": 1})
    with pytest.raises(SystemExit, match="another config"):
        claims.train_command(wikiqa, "mma-nse-attention", 1)


def test_a_run_trained_elsewhere_is_left_and_only_trains_the_named_runs(tmp_path, monkeypatch):
    """A folder that came back from a GPU with final.json and unit records but no checkpoint has ended (its
    comparisons read the records); ``--only`` cuts a claim down to some of its runs and the comparisons between them."""
    monkeypatch.chdir(tmp_path)
    claim = claims.CLAIMS["ptb-lstmn-1layer-dropout"]
    run = tmp_path / "runs/claims/ptb-lstmn-1layer-dropout/lstm/seed1"
    run.mkdir(parents=True)
    assert claims.train_command(claim, "lstm", 1)[:3] == ["memread", "train", str(claim.runs["lstm"].config_path)]
    (run / "final.json").write_text("{}")
    assert claims.train_command(claim, "lstm", 1) is None
    lstm = claims.only(claim, ["lstm"])
    assert list(lstm.runs) == ["lstm"] and lstm.compare == []
    two = claims.only(claim, ["lstmn-empty", "lstm"])
    assert [c[2] for c in two.compare] == ["lstmn-empty-vs-lstm"]
    with pytest.raises(KeyError):
        claims.only(claim, ["gru"])


def wikiqa_epochs(claim) -> int:
    return load_experiment(REPO / claim.runs["lstm"].config_path, claim.overrides("lstm")).train.epochs


def test_the_ptb_claim_trains_both_tape_starts_of_one_row_apart():
    ptb = claims.CLAIMS["ptb-lstmn-1layer"]
    starts = {}
    for label in ("lstmn-empty", "lstmn-zero-slot"):
        cfg = load_experiment(config_path(find_row(ptb.runs[label].row)), ptb.overrides(label))
        assert cfg.reader.span == 35 and cfg.head.dropout == 0.0  # a segment's whole tape, no dropout
        starts[label] = cfg.reader.tape_start
    assert starts == {"lstmn-empty": "empty", "lstmn-zero-slot": "zero_slot"}
    assert not ptb.paper_setup and ptb.seeds == 1


def test_the_sentence_claim_trains_the_zero_slot_at_one_seed_after_each_seeds_pair():
    c = claims.CLAIMS["ptb-sentence-1layer"]
    assert (c.seeds, c.seeds_of("lstmn-empty"), c.seeds_of("lstm"), c.seeds_of("lstmn-zero-slot")) == (3, 3, 3, 1)
    cfg = load_experiment(REPO / c.runs["lstmn-zero-slot"].config, c.overrides("lstmn-zero-slot"))
    assert (cfg.data.context, cfg.reader.span, cfg.reader.tape_start, cfg.head.dropout) == ("sentence", 0, "zero_slot", 0.0)
    # seed 1's LSTMN and LSTM start first, side by side; the zero slot comes after them
    assert [q[0] for q in claims.queues(c, 2)] == [("lstmn-empty", 1), ("lstm", 1)]
    assert "lstmn-zero-slot/seed2" not in " ".join(map(str, c.run_dirs()))
    finish = claims.finish_commands(c)
    compare = {cmd[cmd.index("--record") + 1]: cmd for cmd in finish if "--record" in cmd}
    assert "--seeds" in compare["claim-ptb-sentence-1layer-lstmn-empty-vs-lstm"]
    one = compare["claim-ptb-sentence-1layer-lstmn-zero-slot-vs-lstm"]
    assert "--seeds" not in one and one[2:4] == [str(c.root / "lstmn-zero-slot" / "seed1"), str(c.root / "lstm" / "seed1")]
    # the runs of Table 1's sentence rows as configured are recorded under the rows' ids, from the claim's own
    # folders, before the comparisons; the zero slot (an override) is not a row's number
    rows_ = [cmd for cmd in finish if cmd[1] == "reproduce"]
    assert rows_ == [
        ["memread", "reproduce", "lstmn-t1-lstmn-sentence", "--seeds", "3", "--runs", str(c.root / "lstmn-empty"),
         "--set", "train.progress=false"],
        ["memread", "reproduce", "lstmn-t1-lstm-sentence", "--seeds", "3", "--runs", str(c.root / "lstm"),
         "--set", "train.progress=false"]]
    assert finish[:2] == rows_
    for cmd in rows_:
        assert load_experiment(REPO / find_row(cmd[2]).config, []).data.context == "sentence"
    # a claim without record_rows records its comparisons alone, though a run of it trains a row's config as it is
    dropout = claims.CLAIMS["ptb-lstmn-1layer-dropout"]
    assert dropout.runs["lstm"].row and not dropout.runs["lstm"].sets
    assert [cmd[1] for cmd in claims.finish_commands(dropout)] == ["compare"] * len(dropout.compare)


def test_an_invocations_device_and_overrides_reach_every_run_and_comparison(tmp_path, monkeypatch):
    """`claims.py run CLAIM --device cuda --set train.max_minutes=5`: each run trains with them (after the
    claim's own, so they win) and each comparison evaluates on that device; `memread` runs as this interpreter's
    module (memread on PYTHONPATH, not installed, on a GPU machine)."""
    monkeypatch.chdir(tmp_path)
    fig2c = claims.CLAIMS["daniluk-fig2c"]
    extra = claims.extra_overrides(["train.max_minutes=5"], "cuda")
    cmd = claims.train_command(fig2c, "kvp-L5", 1, extra)
    sets = [cmd[i + 1] for i, x in enumerate(cmd) if x == "--set"]
    assert sets[-3:] == ["train.max_minutes=5", 'train.device="cuda"', "train.seed=1"]
    cfg = load_experiment(config_path(find_row(fig2c.runs["kvp-L5"].row)), sets)
    assert cfg.train.device == "cuda" and cfg.train.max_minutes == 5 and cfg.head.dropout == 0.0
    finish = claims.finish_commands(fig2c, extra, "cuda")
    assert [c[1] for c in finish] == ["compare"] * 4 and all(c[-2:] == ["--device", "cuda"] for c in finish)
    assert claims._here(cmd)[:3] == [sys.executable, "-m", "memread"]
    plain = claims.finish_commands(fig2c)[0]  # no device: none passed; one seed: the seed folders compared
    assert plain[-3:] == ["claim-daniluk-fig2c-attention-vs-lstm", "--paper-value", "-3.2"] and "--seeds" not in plain
    assert plain[2:4] == ["runs/claims/daniluk-fig2c/attention-L10/seed1", "runs/claims/daniluk-fig2c/lstm/seed1"]
    assert "--seeds" in claims.finish_commands(claims.CLAIMS["wikiqa"])[0]


def test_a_claim_on_configs_without_rows_and_more_seeds_than_its_own(tmp_path, monkeypatch):
    """bAbI has no row in the papers' tables: its runs name configs; `--seeds N` (here through ``replace``) trains
    seeds 1 .. N and compares the seed folders with --seeds N."""
    monkeypatch.chdir(tmp_path)
    babi = claims.CLAIMS["babi-iaa"]
    cmd = claims.train_command(babi, "fixed", 3)
    assert cmd[2] == "configs/babi/fixed.toml" and cmd[cmd.index("--run-dir") + 1] == "runs/claims/babi-iaa/fixed/seed3"
    three = claims.replace(claims.CLAIMS["daniluk-fig2c"], seeds=3)
    fifteen = claims.queues(three, 15)
    assert len([w for q in fifteen for w in q]) == 15 and all(len(q) == 1 for q in fifteen)
    first = claims.finish_commands(three)[0]
    assert first[2:6] == ["runs/claims/daniluk-fig2c/attention-L10", "runs/claims/daniluk-fig2c/lstm", "--seeds", "3"]


@pytest.mark.slow  # starts processes
def test_the_gpu_script_starts_each_claim_spec_on_cuda_with_its_jobs_seeds_and_time_limit(tmp_path):
    """reproduction/gpu_checks.sh OUT MINUTES CLAIM:JOBS[:SEEDS] ..: each claim once, in the background, on cuda, limited
    to MINUTES of training, validated at 16 streams (here with a stand-in interpreter that logs its arguments)."""
    import subprocess

    log = tmp_path / "calls.txt"
    stub = tmp_path / "python"
    stub.write_text(f'#!/bin/sh\necho "$@" >> {log}\ncat > /dev/null\n')  # reads the bench-args heredoc as python would
    stub.chmod(0o755)
    out = tmp_path / "out"
    done = subprocess.run(["bash", str(REPO / "reproduction" / "gpu_checks.sh"), str(out), "0.5", "babi-iaa:9",
                           "daniluk-fig2c:15:3", "ptb-lstmn-1layer:3::6.5", "ptb-lstmn-1layer-dropout:1:::lstm"],
                          cwd=tmp_path,
                          env={"PATH": "/usr/bin:/bin", "PYTHON": str(stub)}, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    calls = log.read_text().splitlines()
    runs = sorted(c for c in calls if c.startswith("-m reproduction.claims run"))
    common = "--device cuda --set train.max_minutes=0.5 --set train.eval_batch_size=16"
    assert runs == [f"-m reproduction.claims run babi-iaa --jobs 9 {common}",
                    f"-m reproduction.claims run daniluk-fig2c --jobs 15 --seeds 3 {common}",  # a claim's own limit:
                    f"-m reproduction.claims run ptb-lstmn-1layer --jobs 3 {common.replace('0.5', '6.5')}",
                    f"-m reproduction.claims run ptb-lstmn-1layer-dropout --jobs 1 --only lstm {common}"]  # some of its runs
    assert any(c.startswith("-m pytest -m cuda tests/test_cuda.py") for c in calls)
    assert "claims all done" in (out / "timeline.txt").read_text()
    # TESTS=0: the claims alone, no CUDA tests or memory check beside them
    log.unlink()
    done = subprocess.run(["bash", str(REPO / "reproduction" / "gpu_checks.sh"), str(out), "0.5", "babi-iaa:9"],
                          cwd=tmp_path, env={"PATH": "/usr/bin:/bin", "PYTHON": str(stub), "TESTS": "0"},
                          capture_output=True, text=True, timeout=120)
    calls = log.read_text().splitlines()
    assert done.returncode == 0 and any(c.startswith("-m reproduction.claims run babi-iaa") for c in calls)
    assert not any("pytest" in c or "document_memory" in c for c in calls)


@pytest.mark.slow  # starts processes
def test_the_gpu_script_shares_the_gpu_through_mps_and_goes_on_without_a_daemon_that_does_not_serve(tmp_path):
    """Where nvidia-cuda-mps-control exists the runs share the GPU through MPS (their environment names its pipe);
    a daemon whose first CUDA call fails is told to quit and the runs go on without it; MPS=0 leaves it off."""
    import subprocess

    log, bin_ = tmp_path / "calls.txt", tmp_path / "bin"
    bin_.mkdir()
    (bin_ / "nvidia-cuda-mps-control").write_text(f'#!/bin/sh\necho "mps $* $(cat 2>/dev/null)" >> {log}\n')
    stub = tmp_path / "python"  # fails the first CUDA call where FAIL is set; logs each call with the MPS pipe
    stub.write_text(f'#!/bin/sh\necho "pipe=$CUDA_MPS_PIPE_DIRECTORY $@" >> {log}\n'
                    'case "$1" in -c) [ -n "$FAIL" ] && case "$2" in *torch.ones*) exit 1;; esac;; esac\n'
                    'cat > /dev/null\n')
    for f in bin_ / "nvidia-cuda-mps-control", stub:
        f.chmod(0o755)

    def run(**env):
        log.write_text("")
        out = tmp_path / f"out-{'-'.join(env) or 'plain'}"  # its own timeline.txt
        done = subprocess.run(["bash", str(REPO / "reproduction" / "gpu_checks.sh"), str(out), "0.5", "babi-iaa:9"],
                              cwd=tmp_path, capture_output=True, text=True, timeout=120,
                              env={"PATH": f"{bin_}:/usr/bin:/bin", "PYTHON": str(stub), "TESTS": "0", "BENCH": "0",
                                   **env})
        assert done.returncode == 0, done.stderr
        claim = next(c for c in log.read_text().splitlines() if "-m reproduction.claims run" in c)
        return log.read_text(), claim, (out / "timeline.txt").read_text()

    calls, claim, timeline = run()
    assert "mps -d" in calls and claim.startswith("pipe=/tmp/mps-pipe ") and "MPS on" in timeline
    assert calls.rstrip().endswith("mps  quit")  # stopped once the claims are done, before any bench
    calls, claim, timeline = run(FAIL="1")
    assert "mps  quit" in calls and claim.startswith("pipe= ") and "MPS off" in timeline
    calls, claim, timeline = run(MPS="0")
    assert "mps" not in calls.replace("pipe=", "") and claim.startswith("pipe= ") and "MPS" not in timeline


@pytest.mark.slow  # starts processes
def test_stage_copies_each_unfinished_run_slim_for_a_gpu_call_and_the_gpu_script_puts_it_in_place(tmp_path,
                                                                                                   monkeypatch):
    """``stage``: each run with a checkpoint that has not ended (a time limit's stop goes on), its last checkpoint
    and its best only where the last validation was not the best at the last step, with config, metrics and
    vocabulary; runs that ended or never began stay behind. gpu_checks.sh copies .carry/runs into runs/ first."""
    import json
    import subprocess

    import torch

    from memread.training.checkpoint import FORMAT

    monkeypatch.chdir(tmp_path)
    claim = claims.Claim("t", "test", {"a": claims.Run("x", 5), "b": claims.Run("y", 5)}, [("a", "b", "a-vs-b", 1.0)],
                         seeds=2, paper_setup=False)

    def folder(label: str, seed: int, step: int, finished: bool, stopped: str | None, best: list[tuple[int, bool]]):
        d = tmp_path / "runs/claims/t" / label / f"seed{seed}"
        d.mkdir(parents=True)
        loop = {"global_step": step, "finished": finished, "stopped": stopped}
        for name in ("checkpoint_last.pt", "checkpoint_best.pt"):
            torch.save({"format": FORMAT, "config": "{}", "vocab": "v", "model": {}, "loop": loop}, d / name)
        for name in ("config.json", "vocab.json"):
            (d / name).write_text("{}")
        (d / "metrics.jsonl").write_text("".join(json.dumps({"event": "valid", "step": s, "best": b}) + "\n"
                                                 for s, b in best))

    folder("a", 1, 40, True, "max_minutes", [(20, True), (40, True)])  # the last is the best: one checkpoint
    folder("a", 2, 45, False, None, [(20, True), (40, False)])  # killed past a worse validation: both
    folder("b", 1, 40, True, "early", [(20, True), (40, False)])  # ended
    folder("b", 2, 45, False, None, [(20, True), (40, True)])  # killed mid-epoch after a best: the best is not the last
    assert claims.stage(claim, Path(".carry")) == 0
    staged = sorted(str(p.relative_to(tmp_path / ".carry")) for p in (tmp_path / ".carry").rglob("*") if p.is_file())
    a1, a2, b2 = "runs/claims/t/a/seed1/", "runs/claims/t/a/seed2/", "runs/claims/t/b/seed2/"
    both = ("checkpoint_best.pt", "checkpoint_last.pt", "config.json", "metrics.jsonl", "vocab.json")
    assert staged == sorted([a1 + n for n in ("checkpoint_last.pt", "config.json", "metrics.jsonl", "vocab.json")]
                            + [a2 + n for n in both] + [b2 + n for n in both])
    # the GPU script puts them in place before the claims start (a stand-in interpreter)
    work = tmp_path / "work"
    work.mkdir()
    (tmp_path / ".carry").rename(work / ".carry")
    stub = tmp_path / "python"
    stub.write_text("#!/bin/sh\ncat > /dev/null\n")
    stub.chmod(0o755)
    done = subprocess.run(["bash", str(REPO / "reproduction" / "gpu_checks.sh"), str(work / "out"), "0.5", "babi-iaa:9"],
                          cwd=work, env={"PATH": "/usr/bin:/bin", "PYTHON": str(stub), "TESTS": "0", "BENCH": "0"},
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert (work / a2 / "checkpoint_best.pt").exists() and (work / a1 / "checkpoint_last.pt").exists()
    assert f"staged: {a1[:-1]} {a2[:-1]} {b2[:-1]} \n" in (work / "out" / "timeline.txt").read_text()


def test_status_says_where_each_run_stands_from_its_folder(tmp_path, monkeypatch, capsys):
    """A claim spans sessions (its processes die, its folders stay): ``status`` reads each run's metrics.jsonl and
    checkpoint: not started, unfinished with its best validation so far, or how it ended."""
    import json

    import torch

    from memread.training.checkpoint import FORMAT

    monkeypatch.chdir(tmp_path)
    claim = claims.Claim("t", "test", {"a": claims.Run("x", 5), "b": claims.Run("y", 5)}, [("a", "b", "a-vs-b", 1.0)],
                         seeds=2, paper_setup=False)

    def folder(label: str, seed: int, stopped: str | None, accuracies: list[float], best: list[bool]) -> None:
        d = tmp_path / "runs/claims/t" / label / f"seed{seed}"
        d.mkdir(parents=True)
        torch.save({"format": FORMAT, "config": "{}", "vocab": "v", "model": {}, "loop": {"stopped": stopped}},
                   d / "checkpoint_last.pt")
        rows = [{"event": "valid", "epochs_done": i + 1.0, "accuracy": a, "selection_metric": "accuracy", "best": b}
                for i, (a, b) in enumerate(zip(accuracies, best))]
        (d / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))

    folder("a", 1, "early", [0.5, 0.6, 0.55, 0.54, 0.52], [True, True, False, False, False])
    folder("a", 2, None, [0.4, 0.45], [True, True])
    folder("b", 1, "epochs", [0.3, 0.35], [True, True])
    halves = tmp_path / "runs/claims/t/b/seed1/metrics.jsonl"  # evaluations on batch boundaries: said to a tenth
    halves.write_text(halves.read_text().replace('"epochs_done": 2.0', '"epochs_done": 1.99922'))
    lines = claims.status(claim).splitlines()
    assert lines[0] == "# t: test"
    got = {line.split()[0]: line.split(None, 1)[1] for line in lines[1:]}
    assert got["runs/claims/t/a/seed1"] == "done (early stop): 5 epochs; best valid accuracy 0.6 at epoch 2, last 0.52"
    assert got["runs/claims/t/a/seed2"] == ("unfinished, not running (`run` resumes it): 2 epochs; best valid accuracy "
                                           "0.45 at epoch 2, last 0.45")  # its process gone (no lock held)
    assert got["runs/claims/t/b/seed1"] == ("done (epoch cap, still improving): 2 epochs; best valid accuracy 0.35 "
                                          "at epoch 2, last 0.35")
    assert got["runs/claims/t/b/seed2"] == "not started"
    # a run that ended on a lent GPU: its checkpoints stayed there, its unit record says how it ended
    import numpy as np

    from memread.training.units import save_units

    gpu = tmp_path / "runs/claims/t/b/seed2"
    folder("b", 2, "early", [0.3, 0.4, 0.38], [True, True, False])
    (gpu / "checkpoint_best.pt").write_bytes(b"weights")
    save_units(gpu, "test", [{"correct": np.ones(3), "count": np.ones(3)}], "best", 16, "32")
    for name in ("checkpoint_last.pt", "checkpoint_best.pt"):
        (gpu / name).unlink()
    got = {line.split()[0]: line.split(None, 1)[1] for line in claims.status(claim).splitlines()[1:]}
    assert got["runs/claims/t/b/seed2"] == ("done (early stop): 3 epochs; best valid accuracy 0.4 at epoch 2, last 0.38; "
                                          "trained elsewhere, compared from its records")
    monkeypatch.setattr(sys, "argv", ["claims.py", "status", "wikiqa"])
    assert claims.main() == 0
    out = capsys.readouterr().out
    assert out.startswith("# wikiqa: ") and "runs/claims/wikiqa/lstm/seed3" in out and "not started" in out


def test_a_claims_comparisons_run_side_by_side_and_one_failing_fails_the_claim(monkeypatch, capsys):
    """On a GPU a 3-seed comparison takes ~50 s: the claim's four comparisons run ``jobs`` at a time (session 18's
    call lost two of them to its watchdog when they ran one after another); every one runs even when one fails."""
    import subprocess
    import threading
    import time
    from types import SimpleNamespace

    live, peak, seen, lock = [0], [0], [], threading.Lock()

    def fake_run(cmd, **kw):
        with lock:
            live[0] += 1
            peak[0] = max(peak[0], live[0])
            seen.append(cmd)
        time.sleep(0.2)
        with lock:
            live[0] -= 1
        failed = "claim-daniluk-fig2c-kv-vs-attention" in cmd
        return SimpleNamespace(returncode=1 if failed else 0, stdout="{}", stderr="memread: error: it broke")

    monkeypatch.setattr(subprocess, "run", fake_run)
    claim = claims.CLAIMS["daniluk-fig2c"]
    assert claims.finish(claim, 3, (), "cuda", {}) == 1
    assert peak[0] == 3 and len(seen) == len(claim.compare) == 4
    assert all("--device" in c and "cuda" in c for c in seen)
    assert "it broke" in capsys.readouterr().err
    peak[0], seen[:] = 0, []
    monkeypatch.setattr(subprocess, "run", lambda cmd, **kw: fake_run([c for c in cmd if "kv-vs" not in c]))
    assert claims.finish(claim, 1, (), None, {}) == 0 and peak[0] == 1 and len(seen) == 4


def test_compare_records_a_claims_comparisons_again_from_its_ended_runs_and_nothing_else(tmp_path, monkeypatch,
                                                                                         capsys):
    """``claims.py compare CLAIM``: the kept runs put back, then only the `memread compare --record` commands (no
    row recorded again, nothing trained); refused in one line while a run has not ended."""
    import subprocess
    from types import SimpleNamespace

    monkeypatch.chdir(tmp_path)
    seen = []
    monkeypatch.setattr(subprocess, "run", lambda cmd, **kw: seen.append(cmd) or SimpleNamespace(returncode=0,
                                                                                                  stdout="", stderr=""))
    claim = claims.CLAIMS["sst-binary"]
    for d in claim.run_dirs()[:-1]:
        d.mkdir(parents=True)
        (d / "final.json").write_text("{}")
    monkeypatch.setattr(sys, "argv", ["claims.py", "compare", "sst-binary"])
    assert claims.main() == 1 and seen == []
    assert "has not ended (no final.json)" in capsys.readouterr().err
    last = claim.run_dirs()[-1]
    last.mkdir(parents=True)
    (last / "final.json").write_text("{}")
    assert claims.main() == 0
    assert [c[3] for c in seen] == ["compare"] * len(claim.compare)  # python -m memread compare ...
    assert [c[c.index("--record") + 1] for c in seen] == [f"claim-sst-binary-{name}" for _, _, name, _ in
                                                          claim.compare]


@pytest.mark.slow  # starts processes
def test_the_gpu_script_brings_back_the_unfinished_runs_checkpoints_in_parts(tmp_path):
    """CKPTS: what each unfinished run needs to go on comes back (memread.training.loop.resume_files: its best
    checkpoint too where the last checkpoint is not at a best validation; an early-stopped run's stay), as parts under the tool's 16 MiB a file, and the small logs
    travel inside runs.tgz so that the files stay within the tool's 8."""
    import json
    import subprocess
    import tarfile

    from memread.training.checkpoint import FORMAT, save_checkpoint

    def run_folder(name: str, stopped: str | None, last_best: bool, step: int = 40) -> Path:
        d = tmp_path / "runs" / "claims" / "c" / name / "seed1"
        d.mkdir(parents=True)
        loop = {"stopped": stopped, "finished": stopped is not None, "global_step": step}
        for ckpt in ("checkpoint_last.pt", "checkpoint_best.pt"):
            save_checkpoint({"format": FORMAT, "config": "{}", "vocab": "v", "model": {}, "loop": loop}, d / ckpt)
        (d / "vocab.json").write_text("[]")
        evals = [{"event": "valid", "step": 20, "best": True}, {"event": "train", "step": 30},
                 {"event": "valid", "step": 40, "best": last_best}]
        (d / "metrics.jsonl").write_text("".join(json.dumps(e) + "\n" for e in evals))
        return d

    run_folder("improving", "max_minutes", True)  # stopped at its best validation: the last is the best
    run_folder("worse-last", "max_minutes", False)
    run_folder("killed-after-best", None, True, step=45)  # killed mid-epoch: the best is not the last
    (run_folder("stopped-early", "early", False) / "units-test.npz").write_bytes(b"units")  # final_evaluation's
    stub = tmp_path / "python"  # the helper that picks the checkpoints runs for real; the rest is stood in for
    stub.write_text(f'#!/bin/sh\n[ "$3" = resumable ] && shift 2 && PYTHONPATH={REPO} exec {sys.executable} -m reproduction.claims "$@"'
                    '\ncat > /dev/null\n')
    stub.chmod(0o755)
    out = tmp_path / "out"
    done = subprocess.run(["bash", str(REPO / "reproduction" / "gpu_checks.sh"), str(out), "0.5", "x:1"], cwd=tmp_path,
                          env={"PATH": "/usr/bin:/bin", "PYTHON": str(stub), "BENCH": "0",
                               "CKPTS": "runs/claims/c/*/seed1"}, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    parts = sorted(out.glob("ckpt.tar.part-*"))
    assert parts and not (out / "env.txt").exists()
    packed = tmp_path / "ckpt.tar"
    packed.write_bytes(b"".join(p.read_bytes() for p in parts))
    with tarfile.open(packed) as t:
        names = sorted(t.getnames())
    c = "runs/claims/c"
    small = ("metrics.jsonl", "vocab.json")
    assert names == sorted([f"{c}/improving/seed1/{n}" for n in ("checkpoint_last.pt", *small)]
                           + [f"{c}/{r}/seed1/{n}" for r in ("worse-last", "killed-after-best")
                              for n in ("checkpoint_last.pt", "checkpoint_best.pt", *small)])
    with tarfile.open(out / "runs.tgz") as t:
        assert "logs/env.txt" in t.getnames()
        # an ended run's unit records and vocabulary travel in runs.tgz (what a comparison elsewhere reads), never a
        # checkpoint
        assert {f"{c}/stopped-early/seed1/units-test.npz", f"{c}/stopped-early/seed1/vocab.json"} <= set(t.getnames())
        assert not [n for n in t.getnames() if n.endswith(".pt")]


def test_status_says_how_long_an_unfinished_run_needs_to_its_cap_at_its_last_logs_speed(tmp_path, monkeypatch):
    """A run that has not ended: the epochs left to its cap and the hours they take at the training speed of its
    last logs (token-weighted, each log's tokens since the one before; a short log at an epoch's end counts for
    its tokens alone); a time limit's stop (it goes on) too, an ended run not."""
    import json

    monkeypatch.chdir(tmp_path)
    d = tmp_path / "runs/c/seed1"
    _folder(d, REPO / "configs/ptb/lstmn.toml", ["train.epochs=100", "train.log_every=100"],
            {"stopped": None, "finished": False, "global_step": 250})
    logs = [{"event": "train", "step": 50, "train_tokens": 70000.0, "tokens_per_s": 1.0},  # before the window
            {"event": "valid", "step": 100, "epochs_done": 2.0, "ppl": 150.0, "selection_metric": "ppl", "best": True},
            {"event": "train", "step": 100, "train_tokens": 70000.0, "tokens_per_s": 1000.0},  # 50 steps in 70 s
            {"event": "train", "step": 200, "train_tokens": 140000.0, "tokens_per_s": 500.0},  # 100 steps in 280 s
            {"event": "train", "step": 250, "train_tokens": 70000.0, "tokens_per_s": 1000.0}]  # 50 in 70 s
    (d / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in logs))
    # 200 steps in 420 s: 2.1 s a step, 50 steps an epoch: 105 s an epoch, 98 epochs left: 2.86 h
    assert claims._time_left(d, logs[1]) == "; 98 epochs to its cap of 100 at ~2 min an epoch: ~2.9 h"
    assert claims._time_left(d, logs[1], window=1) == "; 98 epochs to its cap of 100 at ~1 min an epoch: ~1.9 h"
    assert claims.run_status(d).endswith("; 98 epochs to its cap of 100 at ~2 min an epoch: ~2.9 h")
    assert claims._time_left(d, {**logs[1], "epochs_done": 100.0}) == ""  # at its cap
    import torch

    from memread.training.checkpoint import FORMAT

    for stopped, says in (("max_minutes", True), ("early", False)):
        torch.save({"format": FORMAT, "config": "{}", "vocab": "v", "model": {},
                    "loop": {"stopped": stopped, "finished": True, "global_step": 250}}, d / "checkpoint_last.pt")
        assert claims.run_status(d).startswith("done (") and claims.run_status(d).endswith("~2.9 h") == says
    (d / "metrics.jsonl").write_text(json.dumps(logs[1]) + "\n")
    assert claims._time_left(d, logs[1]) == ""  # no training log yet


def test_status_times_a_run_whose_logs_count_no_tokens_by_their_seconds(tmp_path, monkeypatch):
    """A cloze or classification run's train logs count no ``train_tokens``: their ``seconds`` (each log's since the
    one before) time it; where a log has both, its seconds win; logs with neither leave it untimed."""
    import json

    monkeypatch.chdir(tmp_path)
    d = tmp_path / "runs/c/seed1"
    _folder(d, REPO / "configs/babi/iaa.toml", ["train.epochs=20"],
            {"stopped": None, "finished": False, "global_step": 300})
    valid = {"event": "valid", "step": 300, "epochs_done": 3.0, "accuracy": 0.8, "selection_metric": "accuracy",
             "best": True}
    logs = [{"event": "train", "step": 100, "tokens_per_s": 9.0, "seconds": 50.0},
            {"event": "train", "step": 200, "tokens_per_s": 9.0, "seconds": 60.0, "train_tokens": 9.0},  # 1 s if tokens
            {"event": "train", "step": 300, "tokens_per_s": 9.0, "seconds": 60.0}, valid]
    (d / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in logs))
    # 200 steps in 120 s, 100 steps an epoch: 60 s an epoch, 17 epochs left: 0.28 h
    assert claims._time_left(d, valid) == "; 17 epochs to its cap of 20 at ~1 min an epoch: ~0.3 h"
    for r in logs[:3]:
        r.pop("seconds")
    (d / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in logs))
    assert claims._time_left(d, valid) == ""  # one log that times itself is not two


def test_resumable_lists_what_carries_each_unfinished_run_while_it_fits_what_a_call_brings_back(tmp_path, monkeypatch,
                                                                                                    capsys):
    """gpu_checks.sh's ``CKPTS`` packs ``claims.py resumable``'s files: each unfinished run's (as ``stage``), in
    order, a run that would pass the limit left behind and said; an ended run has none."""
    import json

    import torch

    from memread.training.checkpoint import FORMAT

    monkeypatch.chdir(tmp_path)

    def folder(name: str, finished: bool, stopped: str | None, pad: int) -> Path:
        d = Path("runs") / name
        d.mkdir(parents=True)
        loop = {"global_step": 40, "finished": finished, "stopped": stopped}
        torch.save({"format": FORMAT, "config": "{}", "vocab": "v", "model": {"w": torch.zeros(pad)}, "loop": loop},
                   d / "checkpoint_last.pt")
        (d / "checkpoint_best.pt").write_bytes(b"weights")
        (d / "metrics.jsonl").write_text(json.dumps({"event": "valid", "step": 40, "best": True}) + "\n")
        (d / "config.json").write_text("{}")
        return d

    a = folder("a", False, None, 2**18)  # 1 MiB
    ended = folder("e", True, "early", 2**18)
    b = folder("b", True, "max_minutes", 2**18)  # a time limit's stop goes on
    small = folder("c", False, None, 16)
    names = ["checkpoint_last.pt", "config.json", "metrics.jsonl"]  # the last is the best: no checkpoint_best
    assert claims.resumable([a, ended, b, small], 1.5) == [a / n for n in names] + [small / n for n in names]
    assert "runs/b: its checkpoints stay behind (1 MiB more than the 1.5 MiB" in capsys.readouterr().err
    assert claims.resumable([a, ended, b, small]) == [d / n for d in (a, b, small) for n in names]
    monkeypatch.setattr(sys, "argv", ["claims.py", "resumable", "runs/a", "runs/e"])
    assert claims.main() == 0
    assert capsys.readouterr().out.split() == [str(a / n) for n in names]


def _two_run_claim():
    return claims.Claim("t", "test", {"a": claims.Run("", 5, config="configs/babi/as.toml"),
                                      "b": claims.Run("", 5, config="configs/babi/as.toml")},
                        [("a", "b", "a-vs-b", 1.0)], seeds=1, paper_setup=False)


def _run_folder(root: Path, label: str, stopped: str | None, finished: bool, units: bool) -> Path:
    """A run folder of ``root/label/seed1`` as `memread train` leaves it: checkpoints and metrics, and where
    ``units``, the final evaluation's records."""
    import json

    import numpy as np
    import torch

    from memread.training.checkpoint import FORMAT
    from memread.training.units import save_units

    d = root / label / "seed1"
    d.mkdir(parents=True)
    loop = {"stopped": stopped, "finished": finished}
    torch.save({"format": FORMAT, "config": "{}", "vocab": "v", "model": {}, "loop": loop}, d / "checkpoint_last.pt")
    (d / "checkpoint_best.pt").write_bytes(b"weights")
    (d / "metrics.jsonl").write_text(json.dumps({"event": "valid", "epochs_done": 1.0, "accuracy": 0.5,
                                                 "selection_metric": "accuracy", "best": True}) + "\n")
    for name in ("config.json", "vocab.json"):
        (d / name).write_text("{}")
    if units:
        (d / "final.json").write_text('{"test": {"accuracy": 0.5}}')
        save_units(d, "test", [{"correct": np.ones(3), "count": np.ones(3)}], "best", 16, "32")
    return d


def test_run_keeps_each_run_as_it_ends_before_the_claim_has(tmp_path, monkeypatch, capsys):
    """A claim outlives sessions and a new checkout has no runs/: ``run`` copies each run's records into
    results/runs/ as soon as its training ends (session 27's ended gLSTM, never kept, was lost with runs/), not
    when the whole claim has; a run that failed or was cut short by a time limit is not kept."""
    import subprocess
    from types import SimpleNamespace

    monkeypatch.chdir(tmp_path)
    claim = _two_run_claim()
    trained = []

    def fake_train(cmd, **kw):
        label = cmd[cmd.index("--run-dir") + 1].split("/")[-2]
        trained.append(label)
        if label == "a":  # ends by early stopping
            _run_folder(tmp_path / "runs/claims/t", "a", "early", True, units=True)
            return SimpleNamespace(returncode=0, stdout="", stderr="")
        return SimpleNamespace(returncode=1, stdout="", stderr="memread: error: out of memory")

    monkeypatch.setattr(subprocess, "run", fake_train)
    assert claims.run(claim, 1) == 1  # b failed: nothing compared
    assert sorted(trained) == ["a", "b"]
    kept = tmp_path / "results/runs/claims/t/a/seed1"
    assert sorted(p.name for p in kept.iterdir()) == ["config.json", "final.json", "metrics.jsonl", "units-test.npz",
                                                       "vocab.json"]
    assert not (tmp_path / "results/runs/claims/t/b").exists()
    out = capsys.readouterr()
    assert f"ended; kept in {Path('results/runs/claims/t/a/seed1')}: commit it" in out.out
    assert "out of memory" in out.err
    # a run whose training returned without ending (a time limit: its final evaluation's records, but it goes on)
    # is left unkept
    import shutil

    shutil.rmtree(tmp_path / "results")
    shutil.rmtree(tmp_path / "runs")

    def time_limited(cmd, **kw):
        label = cmd[cmd.index("--run-dir") + 1].split("/")[-2]
        _run_folder(tmp_path / "runs/claims/t", label, "time", False, units=True)
        return SimpleNamespace(returncode=0, stdout="", stderr="")

    monkeypatch.setattr(subprocess, "run", time_limited)
    monkeypatch.setattr(claims, "finish", lambda *a: 0)
    assert claims.run(claim, 2) == 0 and not (tmp_path / "results").exists()


def test_keep_commits_an_ended_runs_records_and_run_puts_them_back_in_a_new_checkout(tmp_path, monkeypatch, capsys):
    """Run folders are git-ignored: a session that starts from a new checkout has none (session 21 lost every
    unfinished run so). ``keep`` copies an ended run's records -- no checkpoints -- into results/runs/; ``status``
    names them there and ``run`` puts them back, where they stand for the run (nothing trained again) while a run
    that has not ended is left to train."""
    monkeypatch.chdir(tmp_path)
    claim = _two_run_claim()
    folder = functools.partial(_run_folder, tmp_path / "runs/claims/t")
    ended = folder("a", "early", True, units=True)
    folder("b", "time", False, units=True)  # a time limit's final evaluation: it goes on, nothing kept
    assert claims.keep(claim) == 0
    out = capsys.readouterr().out
    assert "runs/claims/t/b/seed1: not ended" in out
    kept = tmp_path / "results/runs/claims/t/a/seed1"
    assert sorted(p.name for p in kept.iterdir()) == ["config.json", "final.json", "metrics.jsonl", "units-test.npz",
                                                       "vocab.json"]  # no checkpoints
    assert not (tmp_path / "results/runs/claims/t/b").exists()
    # the vocabulary once, content-addressed, the run's a relative link to it
    import hashlib

    vocab = (ended / "vocab.json").read_bytes()
    assert (kept / "vocab.json").is_symlink() and (kept / "vocab.json").read_bytes() == vocab
    assert os.readlink(kept / "vocab.json") == f"../../../../vocab/{hashlib.sha256(vocab).hexdigest()}.json"
    (kept / "units-valid.npz").write_bytes(b"an earlier ending's")  # kept again: only the run's present records
    (ended / "metrics.jsonl").write_text((ended / "metrics.jsonl").read_text() * 2)
    assert claims.keep(claim) == 0 and not (kept / "units-valid.npz").exists()
    assert (kept / "metrics.jsonl").read_text() == (ended / "metrics.jsonl").read_text()
    # a unit record written before memread deflated them is kept deflated, the same arrays
    import zipfile

    import numpy as np

    with np.load(ended / "units-test.npz") as z:
        arrays = {k: z[k] for k in z.files}
    np.savez(ended / "units-test.npz", **arrays)
    with zipfile.ZipFile(ended / "units-test.npz") as z:
        assert {i.compress_type for i in z.infolist()} == {zipfile.ZIP_STORED}
    assert claims.keep(claim) == 0
    with zipfile.ZipFile(kept / "units-test.npz") as z:
        assert {i.compress_type for i in z.infolist()} == {zipfile.ZIP_DEFLATED}
    with np.load(kept / "units-test.npz") as z:
        assert sorted(z.files) == sorted(arrays) and all(np.array_equal(z[k], arrays[k]) for k in arrays)
    # a new checkout: no runs/
    import shutil

    shutil.rmtree(tmp_path / "runs")
    got = {line.split()[0]: line.split(None, 1)[1] for line in claims.status(claim).splitlines()[1:]}
    assert got["runs/claims/t/a/seed1"] == "not here; kept in results/runs/claims/t/a/seed1 (`run` puts it back)"
    assert got["runs/claims/t/b/seed1"] == "not started"
    assert claims.restore(claim) == [Path("runs/claims/t/a/seed1")]
    assert (ended / "units-test.npz").read_bytes() == (kept / "units-test.npz").read_bytes()
    assert not (ended / "vocab.json").is_symlink() and (ended / "vocab.json").read_bytes() == vocab
    assert claims.train_command(claim, "a", 1) is None  # compared from its records, not trained again
    assert claims.train_command(claim, "b", 1)[:2] == ["memread", "train"]
    assert claims.run_status(ended).startswith("done (early stop)") and "compared from its records" in \
        claims.run_status(ended)
    (ended / "metrics.jsonl").write_text("")  # a folder that is here is never overwritten
    assert claims.restore(claim) == [] and (ended / "metrics.jsonl").read_text() == ""
    empty = claims.Claim("e", "test", {"a": claims.Run("", 5, config="configs/babi/as.toml")}, [], seeds=1,
                         paper_setup=False)
    assert claims.keep(empty) == 1  # nothing ended: said, and a failing exit


def test_unpack_puts_each_device_calls_runs_in_place_where_they_got_further(tmp_path, monkeypatch, capsys):
    """What device calls bring back (runs.tgz; the checkpoints in ckpt.tar.part-*) goes under runs/ run by run: a
    folder that can go on (a checkpoint) or be compared (ended, with its unit records) replaces the one here if it
    got further; one whose checkpoints stayed on the device is left, as a second call's copy of a run whose
    checkpoints only the first call brought back must be (session 21 sorted this by hand)."""
    import io
    import json
    import tarfile

    import numpy as np
    import torch

    from memread.training.checkpoint import FORMAT, loop_state
    from memread.training.units import save_units

    monkeypatch.chdir(tmp_path)

    def folder(root: Path, label: str, step: int, ckpt: bool, ended: bool = False) -> Path:
        d = root / "runs/claims/t" / label / "seed1"
        d.mkdir(parents=True)
        (d / "metrics.jsonl").write_text(json.dumps({"event": "valid", "step": step, "ppl": 100.0 - step,
                                                     "best": True}) + "\n")
        (d / "config.json").write_text("{}")
        loop = {"global_step": step, "stopped": "early" if ended else "max_minutes", "finished": ended}
        torch.save({"format": FORMAT, "config": "{}", "vocab": "v", "model": {}, "loop": loop}, d / "checkpoint_last.pt")
        if ended:
            (d / "final.json").write_text("{}")
            save_units(d, "test", [{"nll": np.ones(2), "tokens": np.ones(2)}], "last", 16, "32")
        if not ckpt:
            (d / "checkpoint_last.pt").unlink()
        return d

    def call(name: str, runs: list[tuple[str, int, bool, bool]], log: str) -> Path:
        out, src = tmp_path / name, tmp_path / f"{name}-device"
        out.mkdir()
        for label, step, ckpt, ended in runs:
            folder(src, label, step, ckpt, ended)
        (src / "logs").mkdir()
        (src / "logs" / "claim-t.log").write_text(log)
        with tarfile.open(out / "runs.tgz", "w:gz") as t:  # the small files, as gpu_checks.sh packs them
            t.add(src / "logs", "logs")
            for f in sorted((src / "runs").rglob("*")):
                if f.is_file() and not f.name.endswith(".pt"):
                    t.add(f, str(f.relative_to(src)))
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as t:  # the checkpoints, split in parts
            for f in sorted((src / "runs").rglob("*.pt")):
                t.add(f, str(f.relative_to(src)))
        data = buf.getvalue()
        if len(data) > 1024:
            for i, at in enumerate(range(0, len(data), len(data) // 2 + 1)):
                (out / f"ckpt.tar.part-a{'abc'[i]}").write_bytes(data[at:at + len(data) // 2 + 1])
        (out / "results.jsonl").write_text('{"experiment": "claim-t-a-vs-b"}\n')
        return out

    folder(tmp_path, "a", 5, ckpt=True)  # here already, at step 5
    folder(tmp_path, "d", 50, ckpt=True)  # here, further than the device got
    first = call("call1", [("a", 10, True, False), ("b", 8, False, False), ("c", 30, False, True),
                           ("d", 40, True, False)], "first")
    second = call("call2", [("a", 12, False, False), ("b", 9, True, False), ("c", 30, False, True)], "second")
    assert claims.unpack([first, second], tmp_path / "results/gpu-s21") == 0
    said: dict[str, str] = {}  # each run's lines, call by call
    for line in capsys.readouterr().out.splitlines():
        said[line.split(":")[0]] = said.get(line.split(":")[0], "") + line + "\n"
    a, b, c, d = (Path(f"runs/claims/t/{x}/seed1") for x in "abcd")
    assert loop_state(a)["global_step"] == 10 and "placed from" in said[str(a)]  # call1's, further than step 5
    assert "call2: unfinished, its checkpoints stayed on the device" in said[str(a)]
    assert "step 12" not in (a / "metrics.jsonl").read_text()  # call2's metrics without their checkpoint: left
    assert loop_state(b)["global_step"] == 9  # call1's had no checkpoint; call2's has
    assert (c / "units-test.npz").is_file() and not (c / "checkpoint_last.pt").exists()  # ended: its records
    assert "the one here kept" in said[str(c)]  # call2's copy of it is no further
    assert loop_state(d)["global_step"] == 50 and "the one here kept (step 50" in said[str(d)]
    assert (tmp_path / "results/gpu-s21/call1/claim-t.log").read_text() == "first"
    assert (tmp_path / "results/gpu-s21/call2/device-results.jsonl").is_file()
    bad = tmp_path / "call3"
    bad.mkdir()
    (bad / "runs.tgz").write_bytes(b"not a tar")
    assert claims.unpack([bad]) == 1 and "call3: its runs.tgz" in capsys.readouterr().err


def test_the_ten_seed_claims_are_their_base_claims_lstmn_vs_lstm_pair_at_ten_seeds():
    for name in ("sst-fine", "sst-binary", "sst-binary-2layer", "sst-fine-2layer"):
        base, ten = claims.CLAIMS[name], claims.CLAIMS[f"{name}-10seeds"]
        pair = next(c for c in base.compare if c[2] == "lstmn-vs-lstm")
        assert ten.seeds == 10 and ten.compare == [pair] and list(ten.runs) == [pair[0], pair[1]]
        assert all(ten.runs[label] == base.runs[label] for label in ten.runs)  # the same recipe: seeds 1-3 shared
        compare = claims.finish_commands(ten)[-1]
        assert compare[compare.index("--record") + 1] == f"claim-{name}-10seeds-lstmn-vs-lstm"
        assert compare[compare.index("--seeds") + 1] == "10"


def test_run_gives_each_training_its_threads(tmp_path, monkeypatch):
    """``--threads`` sets each run's OMP_NUM_THREADS (one by default, two jobs side by side on two cores; a claim's
    last run alone on two threads), and the comparisons after training run with the same environment."""
    import subprocess
    from types import SimpleNamespace

    monkeypatch.chdir(tmp_path)
    seen = {}

    def fake_train(cmd, env, **kw):
        seen[cmd[cmd.index("--run-dir") + 1].split("/")[-2]] = env["OMP_NUM_THREADS"]
        return SimpleNamespace(returncode=0, stdout="", stderr="")

    monkeypatch.setattr(subprocess, "run", fake_train)
    finished = []
    monkeypatch.setattr(claims, "finish", lambda claim, jobs, extra, device, env:
                        finished.append(env["OMP_NUM_THREADS"]) or 0)
    assert claims.run(_two_run_claim(), 2) == 0
    assert seen == {"a": "1", "b": "1"} and finished == ["1"]
    seen.clear()
    assert claims.run(_two_run_claim(), 1, threads=2) == 0
    assert seen == {"a": "2", "b": "2"} and finished == ["1", "2"]
    # `plan` shows the same: each command it prints with the threads `run` would give it
    commands = [line for line in claims.plan(_two_run_claim(), 1, threads=2).splitlines() if not line.startswith("#")]
    assert len(commands) >= 3 and all(line.startswith("OMP_NUM_THREADS=2 memread ") for line in commands)
    monkeypatch.setattr(sys, "argv", ["claims.py", "run", "sst-binary", "--threads", "0"])
    with pytest.raises(SystemExit):
        claims.main()
    assert len(seen) == 2 and len(finished) == 2  # nothing ran
