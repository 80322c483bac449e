"""scripts/cloze_frequency_baseline.py: the candidate that occurs most often in the document, on hand-counted
questions (jsonl-cloze files): right, wrong, and a tie that goes to the first candidate."""

from __future__ import annotations

import importlib.util
import json

import pytest

from conftest import REPO, tiny_config

spec = importlib.util.spec_from_file_location("cloze_frequency_baseline",
                                              REPO / "scripts" / "cloze_frequency_baseline.py")
baseline = importlib.util.module_from_spec(spec)
spec.loader.exec_module(baseline)

QUESTIONS = [  # (document, candidates, answer): the most frequent candidate, and whether it is the answer
    ("ann met bob . ann ran . ann sat .", ["ann", "bob"], "ann"),  # ann x3: right
    ("cy saw dee . cy ran . dee sat .", ["dee", "cy", "eve"], "dee"),  # dee and cy x2: a tie, the first (dee): right
    ("fay and gus . gus ran . gus hid .", ["fay", "gus"], "fay"),  # gus x3: wrong
    ("hal met ivy . hal ran .", ["hal", "ivy", "jo", "kim"], "ivy"),  # hal x2: wrong
]


def test_the_most_frequent_candidate_baseline_on_hand_counted_questions(tmp_path):
    lines = [json.dumps({"document": d, "query": "XXXXX ran .", "candidates": c, "answer": a})
             for d, c, a in QUESTIONS]
    for split in ("train", "valid", "test"):
        (tmp_path / f"{split}.jsonl").write_text("\n".join(lines) + "\n")
    splits = {split: f"{split}.jsonl" for split in ("train", "valid", "test")}
    config = tiny_config(tmp_path, "cloze.toml", data={"name": "jsonl-cloze", **splits},
                         reader={"name": "gru", "hidden": 4}, head={"name": "pointer", "emb": 4}, train=None)
    got = baseline.frequency_baseline(config, tmp_path)
    assert got["test"]["questions"] == 4
    assert got["test"]["most_frequent_candidate"] == pytest.approx(2 / 4)
    assert got["test"]["chance"] == pytest.approx((1 / 2 + 1 / 3 + 1 / 2 + 1 / 4) / 4)
