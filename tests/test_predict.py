"""Trained readers on new text (issue 21): ``memread.load(...).predict`` and ``memread predict`` for every
task shape, from a run directory and from its archive alike, agreeing with the evaluation numbers; malformed
input lines named and nothing predicted."""

from __future__ import annotations

import io
import json
import math
from pathlib import Path

import pytest

import memread
from memread import cli
from memread.errors import MemreadError
from memread.experiment import final_evaluation, start_run
from memread.inference.predictor import ClozeAnswer, Label, Rating, Score, TokenScores, Translation

from test_own_data import experiment, make_data

SHAPES = ["text", "jsonl-classify", "jsonl-pair", "jsonl-rank", "jsonl-cloze", "jsonl-document", "parallel"]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """One tiny trained run per format, its archive, and its test inputs as JSON lines."""
    out = {}
    for fmt in SHAPES:
        root = tmp_path_factory.mktemp(fmt)
        cfg = experiment(make_data(root, fmt), fmt, max_steps=6)
        with start_run(cfg, root / "run", root) as trainer:
            trainer.fit()
        final = final_evaluation(root / "run", root)
        cli.main(["export", str(root / "run"), str(root / "model.safetensors")])
        if fmt == "text":
            inputs = [{"text": (root / fmt / "test.txt").read_text()}]
        elif fmt == "parallel":
            inputs = [{"source": line} for line in (root / fmt / "test.src").read_text().splitlines()]
        else:
            inputs = [json.loads(line) for line in (root / fmt / "test.jsonl").read_text().splitlines()]
        (root / "inputs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in inputs))
        out[fmt] = (root, final, inputs)
    return out


def run_predict(capsys, *argv: str) -> tuple[int, list[dict], str]:
    capsys.readouterr()
    code = cli.main(["predict", *argv])
    captured = capsys.readouterr()
    return code, [json.loads(line) for line in captured.out.splitlines()], captured.err


@pytest.mark.parametrize("fmt", SHAPES)
def test_predict_from_a_run_and_from_its_archive_agree_with_evaluation(trained, capsys, monkeypatch, fmt):
    root, final, inputs = trained[fmt]
    monkeypatch.setenv("MEMREAD_DATA", str(root))
    code, from_run, err = run_predict(capsys, str(root / "run"), str(root / "inputs.jsonl"))
    assert code == 0, err
    code, from_archive, err = run_predict(capsys, str(root / "model.safetensors"), str(root / "inputs.jsonl"))
    assert code == 0, err
    assert from_run == from_archive
    assert [r["line"] for r in from_run] == list(range(1, len(inputs) + 1))

    model = memread.load(root / "run", data_root=root)
    results = model.predict(inputs)
    assert len(results) == len(inputs)
    test = final["test"]
    if fmt == "text":  # the whole test text as one input: the evaluation's stream at batch size 1
        (r,) = results
        assert isinstance(r, TokenScores) and len(r.logprobs) == len(r.tokens) - 1
        assert r.ppl == pytest.approx(test["ppl"], rel=1e-5)
        assert from_run[0]["ppl"] == pytest.approx(test["ppl"], rel=1e-5)
    elif fmt in ("jsonl-classify", "jsonl-pair"):
        assert all(isinstance(r, Label) for r in results)
        labels = ["neg", "pos"] if fmt == "jsonl-classify" else ["entailment", "neutral", "contradiction"]
        gold = [labels[x["label"]] if isinstance(x["label"], int) else x["label"] for x in inputs]
        accuracy = sum(r.label == g for r, g in zip(results, gold)) / len(gold)
        assert accuracy == pytest.approx(test["accuracy"])
        assert all(sum(r.probabilities.values()) == pytest.approx(1.0) for r in results)
    elif fmt == "jsonl-rank":
        assert all(isinstance(r, Score) and 0 < r.probability < 1 for r in results)
        correct = sum((r.score > 0) == (x["label"] == 1) for r, x in zip(results, inputs)) / len(inputs)
        assert correct == pytest.approx(test["accuracy"])
    elif fmt == "jsonl-cloze":
        assert all(isinstance(r, ClozeAnswer) and r.answer in x["candidates"] for r, x in zip(results, inputs))
        accuracy = sum(r.answer == x["answer"] for r, x in zip(results, inputs)) / len(inputs)
        assert accuracy == pytest.approx(test["accuracy"])
    elif fmt == "jsonl-document":
        assert all(isinstance(r, Rating) and 1 <= r.rating <= 3 for r in results)
        accuracy = sum(r.label == x["label"] for r, x in zip(results, inputs)) / len(inputs)
        assert accuracy == pytest.approx(test["accuracy"])
    else:
        assert all(isinstance(r, Translation) for r in results)
        assert [r["tokens"] for r in from_run] == [t.tokens for t in model.predict(inputs, beam=5)]


def test_malformed_lines_are_named_and_nothing_is_predicted(trained, capsys, monkeypatch, tmp_path):
    root, _, inputs = trained["jsonl-classify"]
    monkeypatch.setenv("MEMREAD_DATA", str(root))
    lines = [json.dumps(inputs[0]), "{not json", json.dumps({"txt": "x"}), "", json.dumps(["a list"]), json.dumps(inputs[1])]
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join(lines) + "\n")
    code, out, err = run_predict(capsys, str(root / "run"), str(bad))
    assert code == 2 and out == []
    errors = [line for line in err.splitlines() if line.startswith("memread: error:")]
    assert errors[0] == f"memread: error: {bad}:2: not valid JSON (Expecting property name enclosed in double quotes at column 2)"
    assert errors[1].startswith(f"memread: error: {bad}:3: field 'text' is missing")
    assert errors[2].startswith(f"memread: error: {bad}:5: an input must be a string or a JSON object")
    assert errors[3] == f"memread: error: {bad}: 3 of 5 input lines are malformed; nothing was predicted"
    assert "Traceback" not in err


def test_predict_reads_stdin_and_keeps_ids(trained, capsys, monkeypatch):
    root, _, inputs = trained["jsonl-classify"]
    monkeypatch.setenv("MEMREAD_DATA", str(root))
    monkeypatch.setattr("sys.stdin", io.StringIO("".join(json.dumps(x) + "\n" for x in inputs[:3])))
    code, out, err = run_predict(capsys, str(root / "run"), "--batch-size", "2")
    assert code == 0, err
    assert [r["id"] for r in out] == [x["id"] for x in inputs[:3]] and all("probabilities" in r for r in out)


def test_a_language_model_continues_a_prompt(trained, capsys, monkeypatch):
    root, _, _ = trained["text"]
    model = memread.load(root / "model.safetensors", data_root=root)
    greedy = model.generate("the cat", steps=5)
    assert greedy.prompt == ["the", "cat"] and len(greedy.tokens) == 5
    assert model.generate("the cat", steps=5).tokens == greedy.tokens  # greedy is deterministic
    a, b = model.generate("the cat", 8, sample=True, seed=3), model.generate("the cat", 8, sample=True, seed=3)
    assert a.tokens == b.tokens and all(math.isfinite(x) for x in a.logprobs)
    # the greedy token is the most probable next token of the model's own reading
    (scored,) = model.predict_examples([["the", "cat", greedy.tokens[0]]])  # token lists: no <eos> added
    assert scored.logprobs[-1] == pytest.approx(greedy.logprobs[0], rel=1e-5)
    assert greedy.logprobs[0] == pytest.approx(max(model.predict_examples([["the", "cat", w]])[0].logprobs[-1]
                                                   for w in model.task.vocab.itos if w != "<pad>"), rel=1e-5)
    monkeypatch.setenv("MEMREAD_DATA", str(root))
    monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps({"text": "the cat"}) + "\n"))
    code, out, err = run_predict(capsys, str(root / "run"), "--generate", "4")
    assert code == 0 and len(out[0]["tokens"]) == 4 and out[0]["text"] == " ".join(out[0]["tokens"])


def test_predict_generate_is_pythons_generate(trained, capsys, monkeypatch):
    """`memread predict --generate` continues the prompt's words (no <eos> appended: it does not start a new
    sentence) and --seed N is generate(seed=N), on every line."""
    root, _, _ = trained["text"]
    model = memread.load(root / "run", data_root=root)
    monkeypatch.setenv("MEMREAD_DATA", str(root))
    lines = [json.dumps({"text": "the cat"}), json.dumps("a big dog")]
    monkeypatch.setattr("sys.stdin", io.StringIO("\n".join(lines) + "\n"))
    code, out, err = run_predict(capsys, str(root / "run"), "--generate", "12", "--sample", "--temperature", "4",
                                 "--seed", "1")
    assert code == 0, err
    for prompt, result in zip(("the cat", "a big dog"), out):
        python = model.generate(prompt, 12, sample=True, temperature=4.0, seed=1)
        assert result["prompt"] == prompt.split() == python.prompt
        assert result["tokens"] == python.tokens
        assert result["logprobs"] == pytest.approx(python.logprobs, rel=1e-6)
    monkeypatch.setattr("sys.stdin", io.StringIO(lines[0] + "\n"))
    code, out, err = run_predict(capsys, str(root / "run"), "--generate", "5")
    greedy = model.generate("the cat", 5)
    assert code == 0 and out[0]["tokens"] == greedy.tokens
    assert out[0]["logprobs"] == pytest.approx(greedy.logprobs, rel=1e-6)


def test_wrong_inputs_for_the_task_are_one_line(trained):
    root, _, _ = trained["jsonl-pair"]
    model = memread.load(root / "run", data_root=root)
    with pytest.raises(MemreadError, match="input:1: a pair model reads records"):
        model.predict(["just a string"])
    with pytest.raises(MemreadError, match="generate needs a language model"):
        model.generate("x", 3)


def test_attention_traces_come_with_the_prediction(tmp_path, monkeypatch):
    from memread.config import experiment_from_dict

    monkeypatch.setenv("MEMREAD_DATA", str(tmp_path))
    cfg = experiment_from_dict({"data": {"name": "stories-text", "stories": 100, "bptt": 10},
                                "reader": {"name": "lstmn", "hidden": 8}, "head": {"name": "lm", "emb": 8},
                                "train": {"max_steps": 2, "progress": False}}, "t")
    with start_run(cfg, tmp_path / "run", tmp_path) as trainer:
        trainer.fit()
    model = memread.load(tmp_path / "run", data_root=tmp_path)
    plain = model.predict("the cat sat on the mat")
    traced = model.predict("the cat sat on the mat", attention=True)
    assert plain.attention is None and traced.attention is not None
    assert traced.logprobs == plain.logprobs
