"""scripts/claims.py: every claim names rows that exist, with configs that load with the claim's overrides,
compares rows it trains, and spreads its runs over the queues by their minutes."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from memread.config import load_experiment
from memread.tools.reproduce import config_path, find_row

REPO = Path(__file__).parent.parent
spec = importlib.util.spec_from_file_location("claims", REPO / "scripts" / "claims.py")
claims = importlib.util.module_from_spec(spec)
sys.modules["claims"] = claims  # its dataclasses look their module up
spec.loader.exec_module(claims)


@pytest.mark.parametrize("name", sorted(claims.CLAIMS))
def test_each_claim_trains_rows_that_exist_with_overrides_that_load(name):
    claim = claims.CLAIMS[name]
    for row in claim.rows:
        cfg = load_experiment(config_path(find_row(row)), [*claim.overrides(row), "train.seed=2"])
        assert cfg.train.seed == 2 and cfg.train.progress is False
    assert all(a in claim.rows and b in claim.rows and a != b for a, b, _ in claim.compare)
    assert len({n for _, _, n in claim.compare}) == len(claim.compare)
    # every (row, seed) once, over the queues
    work = [w for q in claims.queues(claim, 2) for w in q]
    assert sorted(work) == sorted((row, s) for row in claim.rows for s in range(1, claim.seeds + 1))


def test_queues_put_the_longest_runs_first_on_the_least_loaded_queue():
    claim = claims.Claim("t", "test", {"a": 50, "b": 6}, [("a", "b", "a-vs-b")])
    q1, q2 = claims.queues(claim, 2)
    assert q1 == [("a", 1), ("a", 3)] and q2 == [("a", 2), ("b", 1), ("b", 2), ("b", 3)]


def test_a_claim_off_the_papers_setup_keeps_its_runs_apart_and_records_only_comparisons(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    wikiqa = claims.CLAIMS["wikiqa"]
    assert not wikiqa.paper_setup
    cmd = claims.train_command(wikiqa, "nse-t2-wikiqa-lstm-3layer", 2)
    assert cmd[cmd.index("--run-dir") + 1] == "runs/claims/wikiqa/nse-t2-wikiqa-lstm-3layer/seed2"
    assert "reader.hidden=300" in cmd and "train.seed=2" in cmd
    finish = claims.finish_commands(wikiqa)
    assert [c[1] for c in finish] == ["compare"]  # no memread reproduce under the paper's row ids
    assert finish[0][-1] == "claim-wikiqa-mma-nse-vs-lstm-1x300"
    sst = claims.finish_commands(claims.CLAIMS["sst-fine"])
    assert [c[1] for c in sst] == ["reproduce", "reproduce", "compare"]
    # a run folder that holds a checkpoint is resumed, not started again
    run = tmp_path / "runs/claims/wikiqa/nse-t2-wikiqa-lstm-3layer/seed2"
    run.mkdir(parents=True)
    (run / "checkpoint_last.pt").write_bytes(b"")
    assert claims.train_command(wikiqa, "nse-t2-wikiqa-lstm-3layer", 2)[:3] == ["memread", "train", "--resume"]
