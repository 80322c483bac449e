"""reproduction.protocol_effect: a run read in both protocols, each number what `memread eval --context` gives,
recorded on demand."""

from __future__ import annotations

import json

import pytest

from memread import cli
from memread.config import experiment_from_dict
from memread.errors import MemreadError
from memread.experiment import final_evaluation, read_run_config, start_run
from reproduction import protocol_effect


def tiny_lm(tmp_path, name: str, context: str) -> str:
    cfg = experiment_from_dict({"data": {"name": "stories-text", "stories": 60, "context": context},
                                "reader": {"name": "lstm", "hidden": 8}, "head": {"name": "lm", "emb": 8},
                                "train": {"max_steps": 3, "batch_size": 8, "progress": False}}, name)
    run = tmp_path / name
    with start_run(cfg, run, tmp_path) as trainer:
        trainer.fit()
    final_evaluation(run, tmp_path)
    return str(run)


def eval_line(capsys, run: str, context: str, root) -> dict:
    assert cli.main(["eval", run, "--context", context, "--data-root", str(root)]) == 0
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def test_each_run_is_read_both_ways_as_memread_eval_reads_it(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("MEMREAD_RESULTS", str(tmp_path / "results.jsonl"))
    stream, sentence = tiny_lm(tmp_path, "stream", "stream"), tiny_lm(tmp_path, "sentence", "sentence")
    rows = {(r["trained"], r["read"]): r for run in (stream, sentence)
            for r in protocol_effect.read_both_ways(run, tmp_path)}
    assert sorted(rows) == [("sentence", "sentence"), ("sentence", "stream"), ("stream", "sentence"),
                            ("stream", "stream")]
    for (trained, read), row in rows.items():
        want = eval_line(capsys, stream if trained == "stream" else sentence, read, tmp_path)
        assert row["ppl"] == pytest.approx(want["ppl"], rel=1e-9) and row["tokens"] == want["tokens"]
    # a run read in its own protocol gives its final.json; the protocols count different targets
    own = json.loads((tmp_path / "sentence" / "final.json").read_text())["test"]["ppl"]
    assert rows["sentence", "sentence"]["ppl"] == pytest.approx(own, rel=1e-9)
    assert rows["stream", "stream"]["tokens"] != rows["stream", "sentence"]["tokens"]
    assert protocol_effect.main([stream, sentence, "--data-root", str(tmp_path), "--record", "tiny"]) == 0
    lines = [json.loads(x) for x in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert [x["experiment"] for x in lines] == ["tiny-stream-trained-read-as-stream", "tiny-stream-trained-read-as-sentence",
                                               "tiny-sentence-trained-read-as-stream",
                                               "tiny-sentence-trained-read-as-sentence"]
    assert lines[1]["value"] == round(rows["stream", "sentence"]["ppl"], 4) and lines[1]["metric"] == "ppl"
    seeds = {str(tmp_path / name): read_run_config(tmp_path / name).train.seed for name in ("stream", "sentence")}
    assert [x["seeds"] for x in lines] == [[seeds[x["run"]]] for x in lines]  # each line its run's seed


def test_a_run_that_is_no_language_model_is_refused(tmp_path):
    cfg = experiment_from_dict({"data": {"name": "stories", "stories": 60}, "reader": {"name": "lstm", "hidden": 8},
                                "head": {"name": "pointer", "emb": 8},
                                "train": {"max_steps": 1, "batch_size": 8, "progress": False}}, "cloze")
    run = tmp_path / "cloze"
    with start_run(cfg, run, tmp_path) as trainer:
        trainer.fit()
    with pytest.raises(MemreadError, match="not a language model"):
        protocol_effect.read_both_ways(run, tmp_path)
