"""Model archives (issue 21): ``memread export`` writes one safetensors file that evaluates exactly as the
run it came from, loads without unpickling, and is refused in one line when it does not fit."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from memread import cli
from memread.config import experiment_from_dict
from memread.errors import MemreadError
from memread.experiment import load_trained, start_run
from memread.inference.archive import FORMAT, is_archive, load_archive
from memread.training.loop import evaluate

RUNS = {
    "lm": {"data": {"name": "stories-text", "stories": 200, "bptt": 10},
           "reader": {"name": "lstmn", "hidden": 16}, "head": {"name": "lm", "emb": 16, "tie_weights": True}},
    "cloze": {"data": {"name": "stories", "stories": 200}, "reader": {"name": "lstm", "hidden": 16},
              "head": {"name": "iaa", "emb": 16}},
}


@pytest.fixture(params=sorted(RUNS))
def run(request, tmp_path, monkeypatch):
    monkeypatch.setenv("MEMREAD_DATA", str(tmp_path))
    cfg = experiment_from_dict({**RUNS[request.param], "train": {"max_steps": 3, "batch_size": 8, "progress": False}},
                               "t")
    with start_run(cfg, tmp_path / "run", tmp_path) as trainer:
        trainer.fit()
    return tmp_path / "run"


def export(run: Path, out: Path, capsys) -> dict:
    capsys.readouterr()
    assert cli.main(["export", str(run), str(out)]) == 0
    return json.loads(capsys.readouterr().out)


def test_an_archive_evaluates_as_its_run(run, tmp_path, capsys):
    out = tmp_path / "model.safetensors"
    info = export(run, out, capsys)
    assert info["archive"] == str(out) and is_archive(out) and not is_archive(run)
    cfg, task, model = load_trained(run, tmp_path)
    cfg2, task2, model2 = load_archive(out, tmp_path)
    assert cfg2.to_dict() == cfg.to_dict() and task2.vocab.itos == task.vocab.itos
    a = evaluate(model, task, "test", 8)
    b = evaluate(model2, task2, "test", 8)
    assert a == b
    for k, v in model.state_dict().items():
        assert torch.equal(v, model2.state_dict()[k]), k
    capsys.readouterr()
    assert cli.main(["eval", str(out), "--split", "valid"]) == 0  # every verb that takes a run takes an archive
    assert json.loads(capsys.readouterr().out)["split"] == "valid"


def _rewrite(path: Path, tensors=None, metadata=None) -> None:
    from safetensors import safe_open

    with safe_open(str(path), "pt") as f:
        meta = dict(f.metadata())
    t = load_file(str(path))
    save_file(tensors(t) if tensors else t, str(path), metadata=metadata(meta) if metadata else meta)


def _one_row_more(tensors: dict) -> dict:
    """The archive's tensors with the last one a row longer than the model it builds wants (every name there)."""
    name = sorted(tensors)[-1]
    t = tensors[name]
    return {**tensors, name: torch.cat([t, t[:1]])}


@pytest.mark.parametrize("damage, message", [
    (lambda p: _rewrite(p, metadata=lambda m: {**m, "format": "memread-archive-v0"}), "format 'memread-archive-v0', this memread reads"),
    (lambda p: _rewrite(p, metadata=lambda m: {k: v for k, v in m.items() if k != "vocab"}), "no 'vocab' in its metadata"),
    (lambda p: _rewrite(p, metadata=lambda m: {k: v for k, v in m.items() if k != "format"}), "no memread format"),
    (lambda p: _rewrite(p, metadata=lambda m: {**m, "config": m["config"].replace('"hidden": 16', '"hiden": 16')}),
     "unknown key 'reader.hiden'"),
    (lambda p: _rewrite(p, tensors=lambda t: {k: v for i, (k, v) in enumerate(t.items()) if i}), "do not fit the model"),
    (lambda p: _rewrite(p, tensors=lambda t: {**t, "extra.weight": torch.zeros(2)}), "do not fit the model"),
    (lambda p: _rewrite(p, tensors=_one_row_more), "do not fit the model its config builds .*size mismatch for "),
    (lambda p: _rewrite(p, tensors=lambda t: {**t, min(t): t[min(t)] * float("nan")}), "its weights are not finite"),
    (lambda p: p.write_bytes(p.read_bytes()[: len(p.read_bytes()) // 2]), "not a memread model archive"),
], ids=["old-format", "no-vocab", "not-memread", "config-key", "missing-tensor", "extra-tensor", "wrong-shape",
        "nan-weights", "truncated"])
def test_a_damaged_archive_is_one_line(run, tmp_path, capsys, damage, message):
    out = tmp_path / "model.safetensors"
    export(run, out, capsys)
    damage(out)
    with pytest.raises(MemreadError, match=message):
        load_archive(out, tmp_path)
    capsys.readouterr()
    assert cli.main(["eval", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("memread: error:") == 1 and "Traceback" not in err and message.split(",")[0][:20] in err


def test_a_pickle_is_not_an_archive(tmp_path):
    evil = tmp_path / "evil.safetensors"
    torch.save({"format": FORMAT, "obj": Path("x")}, evil)
    assert not is_archive(evil)
    with pytest.raises(MemreadError, match="not a memread model archive"):
        load_archive(evil, tmp_path)


def test_the_verbs_that_take_a_run_take_an_archive(run, tmp_path, capsys):
    out = tmp_path / "model.safetensors"
    export(run, out, capsys)
    capsys.readouterr()
    if (run / "config.json").read_text().count('"lstmn"'):  # the LM: its intra-attention
        assert cli.main(["attend", str(out), "the cat sat on the mat"]) == 0
        assert (tmp_path / "model.attention.png").stat().st_size > 0  # beside the archive, not inside it
    else:  # the cloze run: its attention picture, and an ensemble that equals its evaluation
        assert cli.main(["picture", str(out), "--split", "valid"]) == 0
        assert (tmp_path / "model.attention_valid_0.png").stat().st_size > 0
        capsys.readouterr()
        assert cli.main(["ensemble", str(out), str(run), "--split", "valid"]) == 0
        ensemble = json.loads(capsys.readouterr().out)
        assert cli.main(["eval", str(run), "--split", "valid"]) == 0
        assert ensemble["accuracy"] == pytest.approx(json.loads(capsys.readouterr().out)["accuracy"])
