"""Bad input refused in one line before anything is written (issue 59: "nothing lost, nothing silent, no
traceback"): values torch cannot take (a seed past 64 bits), models and batches that cannot fit in memory,
damaged checkpoints and archives, flags out of range, a job for N processes whose batch does not split, Ctrl-C,
undecodable or oversized input to ``memread predict``. Each ends as ``memread: error: ...`` (exit 2) or, for
Ctrl-C, one line saying what is kept (exit 130), and no run folder, config.json or vocab.json is written for a
run that is refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from test_faults import config, one_error_line, run_cli, saved  # noqa: F401 (config: a fixture)



def refused(capsys, run: Path, *argv: str) -> str:
    """``memread ARGV`` exits 2 with one error line, nothing on stdout, and ``run`` was not written: that line."""
    from memread import cli

    before = saved(run)
    capsys.readouterr()
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    line = one_error_line(err)
    assert code == 2, err
    assert out == "", (line, out)  # nothing printed first (curves printed its table)
    assert saved(run) == before, line
    return line


# --------------------------------------------------------------------------- values torch cannot take


@pytest.mark.parametrize("seed", ["1e20", "100000000000000000000", "-100000000000000000000"])
def test_a_seed_past_what_the_generators_take_is_refused_before_the_run_folder(config, tmp_path, capsys, seed):
    run = tmp_path / "run"
    line = refused(capsys, run, "train", str(config), "--run-dir", str(run), "--set", f"train.seed={seed}")
    assert "train.seed" in line, line  # was "ValueError: Overflow when unpacking long long" after the folder existed
    assert not run.exists()


# --------------------------------------------------------------------------- what cannot fit in memory


def test_a_model_that_cannot_fit_is_refused_before_anything_is_allocated_or_written(config, tmp_path, capsys):
    run = tmp_path / "run"
    line = refused(capsys, run, "train", str(config), "--run-dir", str(run), "--set", "reader.hidden=100000000")
    # was "RuntimeError: DefaultCPUAllocator: can't allocate memory: you tried to allocate 38400000000 bytes"
    assert "does not fit in memory" in line and "reader.hidden = 100000000" in line and "parameters" in line, line
    assert "weights and their gradients" in line and "lower those sizes" in line, line  # sgd: weights + gradients
    assert not run.exists()


def test_where_the_memory_cannot_be_told_a_failed_allocation_is_one_line(config, tmp_path, capsys, monkeypatch):
    """No free-memory figure (another system), or a model that cannot be built on the meta device: the allocator's
    failure itself becomes the line."""
    from memread.training import memory

    monkeypatch.setattr(memory, "available_memory", lambda device="cpu": None)
    run = tmp_path / "run"
    line = refused(capsys, run, "train", str(config), "--run-dir", str(run), "--set", "reader.hidden=100000000")
    assert "does not fit in memory" in line and "allocate" in line and "reader.hidden = 100000000" in line, line
    assert not run.exists()


@pytest.mark.parametrize("batch_size, whole", [(8, False), (1_000_000_000, True)])
def test_a_batch_that_cannot_fit_is_refused_before_the_run_folder(config, tmp_path, capsys, monkeypatch, batch_size,
                                                                  whole):
    """``train.batch_size = 1000000000`` on PTB: 929,588 columns of one token, 35.7 GiB of embeddings and scores at
    the first step, which failed to allocate after config.json and vocab.json were written. A batch larger than the
    split is the whole split (as before); what it needs at the least is checked against the memory there is (here a
    machine with 16 KiB free)."""
    from memread import experiment

    monkeypatch.setattr(experiment, "available_memory", lambda device="cpu": 16 * 1024)
    run = tmp_path / "run"
    line = refused(capsys, run, "train", str(config), "--run-dir", str(run), "--set", f"train.batch_size={batch_size}")
    assert f"train.batch_size = {batch_size}: one training batch" in line and "16.0 KiB free" in line, line
    assert "scores over" in line and "lower train.batch_size" in line, line
    assert ("the whole training split" in line) == whole, line
    assert not run.exists()


# --------------------------------------------------------------------------- damaged checkpoints and archives


@pytest.mark.parametrize("key, value", [("global_step", "sixty"), ("epoch", -1), ("finished", "no"),
                                        ("step_in_epoch", 2.5), ("schedule", {"best": "low", "bad_evals": 0}),
                                        ("first_loss", "x"), ("tokens_trained", None)])
def test_a_checkpoint_whose_loop_state_has_a_wrong_type_is_one_line_on_resume(config, tmp_path, capsys, key, value):
    import torch

    run = tmp_path / "run"
    assert run_cli(capsys, "train", str(config), "--run-dir", str(run), "--set", "train.max_steps=2")[0] == 0
    path = run / "checkpoint_last.pt"
    payload = torch.load(path, weights_only=True)
    payload["loop"][key] = value
    torch.save(payload, path)
    line = refused(capsys, run, "train", "--resume", str(run), "--set", "train.max_steps=4")
    # global_step = "sixty" was "TypeError: '>' not supported between instances of 'str' and 'int'"
    assert "checkpoint_last.pt: not a resumable checkpoint" in line and repr(key) in line and repr(value) in line, line
    assert "Nothing was changed" in line, line


@pytest.mark.parametrize("hidden", [100_000_000, 64])
def test_an_archive_whose_metadata_declares_another_model_is_refused_before_it_is_built(config, tmp_path, capsys,
                                                                                       hidden):
    """An archive of a 32-unit model whose metadata says ``reader.hidden = 1e8`` was built from the metadata
    (petabytes asked of the allocator) before its tensors were compared with it."""
    from safetensors import safe_open
    from safetensors.torch import load_file, save_file

    run, archive = tmp_path / "run", tmp_path / "model.safetensors"
    assert run_cli(capsys, "train", str(config), "--run-dir", str(run), "--set", "train.max_steps=2")[0] == 0
    assert run_cli(capsys, "export", str(run), str(archive))[0] == 0
    with safe_open(str(archive), "pt") as f:
        meta = dict(f.metadata())
    assert '"hidden": 32' in meta["config"]
    save_file(load_file(str(archive)), str(archive),
              metadata={**meta, "config": meta["config"].replace('"hidden": 32', f'"hidden": {hidden}')})
    (tmp_path / "in.jsonl").write_text('{"text": "the cat"}\n')
    for argv in (["eval", str(archive)], ["predict", str(archive), str(tmp_path / "in.jsonl")]):
        line = refused(capsys, run, *argv)
        assert "its tensors do not fit the model its config builds" in line and "in the file, " in line, line
        assert f"reader.hidden = {hidden}" in line and "Nothing was built" in line, line


# --------------------------------------------------------------------------- flags out of range


@pytest.fixture
def trained(config, tmp_path, capsys) -> Path:
    run = tmp_path / "run"
    assert run_cli(capsys, "train", str(config), "--run-dir", str(run), "--set", "train.max_steps=2")[0] == 0
    return run


def test_flags_out_of_range_are_one_line_before_any_work(trained, tmp_path, capsys):
    (tmp_path / "in.jsonl").write_text('{"text": "the cat"}\n')
    inputs = str(tmp_path / "in.jsonl")
    cases = [  # each was a traceback (RuntimeError: negative dimension, NaN probabilities) or matplotlib's ValueError
        (["eval", str(trained), "--batch-size", "-3"], "eval: argument --batch-size: must be at least 0, got -3"),
        (["match-params", "kvp", "--vocab", "-5"], "argument --vocab: must be at least 1, got -5"),
        (["predict", str(trained), inputs, "--generate", "3", "--sample", "--temperature", "nan"],
         "argument --temperature: must be a finite number greater than 0, got nan"),
        (["predict", str(trained), inputs, "--generate", "3", "--temperature", "-1"], "--temperature: must be"),
        (["predict", str(trained), inputs, "--generate", "100000"], "--generate must be in [0, 10000]"),
        (["predict", str(trained), inputs, "--batch-size", "0"], "--batch-size: must be at least 1, got 0"),
        (["curves", str(trained), "--out", str(tmp_path / "x.pt")], "matplotlib writes no .pt pictures"),
        # each a traceback or a silent acceptance before the flags were typed (memread.cli.common.whole / real)
        (["compare", str(trained), str(trained), "--batch-size", "-1"], "compare: argument --batch-size: must be "
         "at least 0, got -1 (`memread compare --help` shows the usage)"),
        (["compare", str(trained), str(trained), "--resamples", "0"], "--resamples: must be at least 1, got 0"),
        (["compare", str(trained), str(trained), "--confidence", "1"], "--confidence: must be a finite number "
         "greater than 0 and less than 1, got 1"),
        (["compare", str(trained), str(trained), "--paper-value", "inf"], "--paper-value: must be a finite number"),
        (["ensemble", str(trained), "--batch-size", "-2"], "ensemble: argument --batch-size: must be at least 0"),
        (["quickstart", "--steps", "0", "--out", str(tmp_path / "q")], "--steps: must be at least 1, got 0"),
        (["data", "stories", str(tmp_path / "s"), "--seed", "-1"], "data stories: argument --seed: must be from 0 "
         "to 4294967295, got -1"),
        (["data", "stories", str(tmp_path / "s"), "-n", "0"], "argument -n: must be at least 1, got 0"),
        (["data", "cloze", str(tmp_path / "book.txt"), "--out", str(tmp_path / "c"), "--stride", "0"],
         "argument --stride: must be at least 1, got 0"),
        (["predict", str(trained), inputs, "--batch-size", "x"], "argument --batch-size: 'x' is not a whole number"),
        (["train", "--nproc", "0", "x.toml"], "train: argument --nproc: must be at least 1, got 0"),
        (["reproduce", "lstmn-t1-lstm", "--seeds", "0"], "reproduce: argument --seeds: must be at least 1, got 0"),
        (["explore", str(trained), "--port", "70000"], "explore: argument --port: must be from 0 to 65535, got 70000"),
        (["explore", str(trained), "--beam", "21"], "explore: argument --beam: must be from 1 to 20, got 21"),
        (["attention-span", str(trained), "--batch-size", "0"], "argument --batch-size: must be at least 1, got 0"),
    ]
    for argv, message in cases:
        line = refused(capsys, trained, *argv)
        assert message in line, (argv, line)
    assert not (tmp_path / "x.pt").exists() and not (tmp_path / "q").exists() and not (tmp_path / "s").exists()


# --------------------------------------------------------------------------- memread predict's input


@pytest.mark.parametrize("stdin_encoding", ["utf-8", "latin-1"])  # strict: a traceback; the locale's: silent
def test_undecodable_input_is_one_line_naming_its_line_from_stdin_as_from_a_file(trained, tmp_path, capsys,
                                                                                 monkeypatch, stdin_encoding):
    import io

    data = '{"text": "the cat"}\n{"text": "the café"}\n'.encode("latin-1")
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(data), encoding=stdin_encoding))
    line = refused(capsys, trained, "predict", str(trained))
    assert "stdin:2: not UTF-8 text" in line and "Nothing was predicted" in line, line
    (tmp_path / "in.jsonl").write_bytes(data)
    line = refused(capsys, trained, "predict", str(trained), str(tmp_path / "in.jsonl"))
    assert f"{tmp_path / 'in.jsonl'}:2: not UTF-8 text" in line, line


def test_an_input_over_the_size_limit_is_refused_and_nothing_is_predicted(trained, tmp_path, capsys):
    """A 50 MB cloze document took 14.7 GB and ended in std::bad_alloc; a 50 MB text 90 s with no end in sight."""
    from memread.errors import MemreadError
    from memread.inference.predictor import MAX_GENERATE, MAX_INPUT_CHARS, load

    big = "the cat " * (MAX_INPUT_CHARS // 8 + 1)
    path = tmp_path / "in.jsonl"
    path.write_text('{"text": "the cat"}\n' + json.dumps({"text": big}) + "\n")
    line = refused(capsys, trained, "predict", str(trained), str(path))
    assert f"in.jsonl:2: an input line of {len(json.dumps({'text': big})):,} characters is over the limit of " \
           f"{MAX_INPUT_CHARS:,}" in line and "Nothing was predicted" in line, line
    predictor = load(trained, tmp_path)
    with pytest.raises(MemreadError, match=rf"input:1: an input of {len(big):,} characters is over the limit"):
        predictor.predict([big])
    with pytest.raises(MemreadError, match=rf"steps must be in \[0, {MAX_GENERATE}\]"):
        predictor.generate("the cat", MAX_GENERATE + 1)
    with pytest.raises(MemreadError, match="temperature a number > 0, got 3 and nan"):
        predictor.generate("the cat", 3, sample=True, temperature=float("nan"))
    assert len(predictor.generate("the cat", 3).tokens) == 3


# --------------------------------------------------------------------------- Ctrl-C


def interrupted(capsys, *argv: str) -> str:
    """``memread ARGV`` interrupted: exit status 130, one line, no traceback: that line."""
    from memread import cli

    capsys.readouterr()
    code = cli.main(list(argv))
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 130 and "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert len(lines) == 1 or lines[0].startswith("run directory:") and len(lines) == 2, err
    return lines[-1]


def interrupt(*_, **__):
    raise KeyboardInterrupt


def test_ctrl_c_at_start_up_in_the_final_evaluation_and_in_eval_says_what_is_kept(config, tmp_path, capsys,
                                                                                   monkeypatch):
    """Only fit() caught KeyboardInterrupt: at start-up, in the final evaluation or in memread eval it was a
    traceback. Each way out the line names is taken here."""
    from memread import experiment
    from memread.training import loop

    run = tmp_path / "run"
    train = ["train", str(config), "--run-dir", str(run), "--set", "train.max_steps=2"]
    with monkeypatch.context() as m:
        m.setattr(experiment, "build_task", interrupt)
        line = interrupted(capsys, *train)
    assert line == "memread: interrupted before training began: nothing was trained; the same command starts the " \
                   "run again", line
    assert not run.exists()

    with monkeypatch.context() as m:
        m.setattr(experiment, "final_evaluation", interrupt)
        line = interrupted(capsys, *train)
    assert "interrupted in the final evaluation" in line and "checkpoints are saved" in line, line
    assert f"memread train --resume {run} runs the final evaluation again" in line, line
    assert (run / "checkpoint_best.pt").exists() and not (run / "final.json").exists()
    code, err = run_cli(capsys, "train", "--resume", str(run))  # the way out it names
    assert code == 0 and (run / "final.json").exists(), err

    with monkeypatch.context() as m:
        m.setattr(experiment, "resume_run", interrupt)
        line = interrupted(capsys, "train", "--resume", str(run), "--set", "train.max_steps=4")
    assert line == f"memread: interrupted before training went on: the run is as its last checkpoint left it; " \
                   f"continue with: memread train --resume {run}", line

    before = saved(run)
    with monkeypatch.context() as m:
        m.setattr(loop, "evaluate", interrupt)
        line = interrupted(capsys, "eval", str(run))
    assert line == "memread: interrupted in the evaluation: nothing was written", line
    assert saved(run) == before


# --------------------------------------------------------------------------- --nproc N


def test_a_batch_that_does_not_split_over_the_processes_is_refused_before_torchrun(config, tmp_path, capsys,
                                                                                    monkeypatch):
    """``--nproc 3`` with a stream of 8 columns: the right line came from the processes, after they had written
    the run folder, then about 50 lines of torchrun's ChildFailedError."""
    import torch.distributed.run

    monkeypatch.setattr(torch.distributed.run, "main", lambda *a, **k: pytest.fail("torchrun was started"))
    run = tmp_path / "run"
    line = refused(capsys, run, "train", str(config), "--run-dir", str(run), "--nproc", "3")
    assert "the stream's 8 columns do not split evenly over 3 processes" in line, line
    assert "multiple of 3" in line and "Nothing was started or written" in line, line
    assert not run.exists()


@pytest.mark.slow
def test_a_process_that_fails_under_torchrun_is_one_line_without_torchruns_report(config, tmp_path, capsys):
    import subprocess
    import sys

    import torch.distributed as dist

    from conftest import subprocess_env

    if not dist.is_available() or not dist.is_gloo_available():
        pytest.skip("torch.distributed with gloo is not available here")
    run = tmp_path / "run"
    assert run_cli(capsys, "train", str(config), "--run-dir", str(run), "--set", "train.max_steps=2")[0] == 0
    before = saved(run)
    done = subprocess.run([sys.executable, "-m", "memread", "train", str(config), "--run-dir", str(run), "--nproc", "2",
                           "--set", 'train.device="cpu"'], env=subprocess_env(MEMREAD_DATA=str(tmp_path)),
                          capture_output=True, text=True, timeout=600)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2 and len(lines) == 1, done.stderr  # was ~50 lines: Failures, Root Cause, W/E logs
    assert lines[0].startswith("memread: error:") and "already holds a run" in lines[0], lines
    assert saved(run) == before


# --------------------------------------------------------------------------- output cut short, pictures named


@pytest.mark.slow
def test_a_reader_that_leaves_the_pipe_early_gets_no_error_line():
    """`memread reproduce list --long | head -1`: the verb's output stops where the reader left, silently, status
    141 (128 + SIGPIPE, as a shell reports it); it was ``memread: error: : Broken pipe``."""
    import subprocess
    import sys

    from conftest import REPO, subprocess_env

    proc = subprocess.Popen([sys.executable, "-m", "memread", "reproduce", "list", "--long"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=subprocess_env(), cwd=REPO)
    assert proc.stdout.readline().startswith(b"row id")
    proc.stdout.close()  # the listing (~240 kB, a line at a time) is more than the pipe holds: a write finds no reader
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141 and err == "", err


def test_a_picture_named_without_a_suffix_is_written_as_png_and_said_so(trained, tmp_path, capsys):
    code, err = run_cli(capsys, "curves", str(trained), "--out", str(tmp_path / "curve"))
    assert code == 0, err
    assert (tmp_path / "curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and not (tmp_path / "curve").exists()
    assert f"wrote {tmp_path / 'curve.png'}" in err
