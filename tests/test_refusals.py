"""Bad input refused in one line before anything is written (issue 59: "nothing lost, nothing silent, no
traceback"): values torch cannot take (a seed past 64 bits), models and batches that cannot fit in memory,
damaged checkpoints and archives, flags out of range, a job for N processes whose batch does not split, Ctrl-C,
undecodable or oversized input to ``memread predict``. Each ends as ``memread: error: ...`` (exit 2) or, for
Ctrl-C, one line saying what is kept (exit 130), and no run folder, config.json or vocab.json is written for a
run that is refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from test_faults import TINY, one_error_line, run_cli, saved


@pytest.fixture
def config(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("MEMREAD_DATA", str(tmp_path))  # the built-in stories need no data
    monkeypatch.delenv("MEMREAD_DEBUG", raising=False)
    path = tmp_path / "tiny.toml"
    path.write_text(TINY)
    return path


def refused(capsys, run: Path, *argv: str) -> str:
    """``memread ARGV`` exits 2 with one error line, and ``run`` was not written: that line."""
    before = saved(run)
    code, err = run_cli(capsys, *argv)
    line = one_error_line(err)
    assert code == 2, err
    assert saved(run) == before, line
    return line


# --------------------------------------------------------------------------- values torch cannot take


@pytest.mark.parametrize("seed", ["1e20", "100000000000000000000", "-100000000000000000000"])
def test_a_seed_past_what_the_generators_take_is_refused_before_the_run_folder(config, tmp_path, capsys, seed):
    run = tmp_path / "run"
    line = refused(capsys, run, "train", str(config), "--run-dir", str(run), "--set", f"train.seed={seed}")
    assert "train.seed" in line, line  # was "ValueError: Overflow when unpacking long long" after the folder existed
    assert not run.exists()
