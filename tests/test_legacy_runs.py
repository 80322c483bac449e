"""Run directories written before the data/head/criterion split still evaluate and resume, to the numbers the
earlier code gave (tests/fixtures/legacy-runs, written by commit 66000a0)."""

from __future__ import annotations

import json
import shutil

import pytest

from memread.experiment import final_evaluation, load_trained, resume_run

RUNS = ["lm-stories-lstm", "cloze-stories-iaa"]


@pytest.fixture
def legacy(fixtures, tmp_path):
    def copy(name: str):
        run = tmp_path / name
        shutil.copytree(fixtures / "legacy-runs" / name, run)
        return run

    return copy


@pytest.mark.parametrize("name", RUNS)
def test_an_earlier_run_evaluates_to_its_own_numbers(legacy, tmp_path, name):
    run = legacy(name)
    expected = json.loads((run / "final.json").read_text())
    cfg, task, model = load_trained(run, tmp_path)
    assert json.loads((run / "config.json").read_text()).keys() == {"task", "reader", "train"}  # untouched by loading
    assert cfg.head.name in ("lm", "iaa") and cfg.task in ("lm", "cloze")
    got = final_evaluation(run, tmp_path)
    for split in ("valid", "test"):
        for key, value in expected[split].items():
            assert got[split][key] == pytest.approx(value, rel=1e-6), (split, key)


@pytest.mark.parametrize("name", RUNS)
def test_an_earlier_run_resumes_to_the_losses_the_earlier_code_gave(legacy, fixtures, tmp_path, name):
    run = legacy(name)
    resume_run(run, tmp_path, ["train.max_steps=5"]).fit()
    records = [r for r in map(json.loads, (run / "metrics.jsonl").read_text().splitlines()) if r["event"] == "train"]
    expected = json.loads((fixtures / "legacy-runs" / f"{name}-continued.json").read_text())
    assert [r["step"] for r in records] == [r["step"] for r in expected] == [1, 2, 3, 4, 5]
    for r, e in zip(records, expected):
        assert r["loss"] == pytest.approx(e["loss"], rel=1e-5), r["step"]
    assert {"data", "head", "criterion"} <= json.loads((run / "config.json").read_text()).keys()  # rewritten in the new form
