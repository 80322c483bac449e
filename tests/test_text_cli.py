"""Sentence and pair tasks end to end: ``memread train`` / ``memread eval`` on the fixture data root
(SST trees, SNLI jsonl, WikiQA tsv and a tiny GloVe file in their official formats), and a few steps
on the real SST, SNLI and WikiQA files with the real GloVe vectors (skipped when missing)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

from conftest import Fresh, subprocess_env, tiny_config
from memread.config import ExperimentConfig, TrainConfig
from memread.criteria.answer_selection import AnswerSelectionConfig
from memread.criteria.classification import CrossEntropyConfig
from memread.data.pipelines.pair import SNLIConfig, WikiQAConfig
from memread.data.pipelines.sentence import SSTConfig
from memread.experiment import build_model, build_task
from memread.heads.classifier import MLPHeadConfig
from memread.heads.pair import PairHeadConfig
from memread.readers.nse import NSEConfig
from memread.readers.rnn import RNNReaderConfig
from memread.training.loop import evaluate



def memread(*args, data_root):
    return subprocess.run([sys.executable, "-m", "memread", *map(str, args)], capture_output=True, text=True,
                          timeout=300, env=subprocess_env(MEMREAD_DATA=str(data_root)))


@pytest.mark.slow
@pytest.mark.parametrize("data,head,reader,keys", [
    # [data] and [head] (+ the dataset's default criterion), with the tiny GloVe vectors; [reader]
    ({"name": "sst", "fine": False}, {"name": "mlp", "freeze": True, "pool": "last"}, {"name": "nse", "hidden": 8},
     {"accuracy", "nll"}),
    ({"name": "sst"}, {"name": "mlp", "first_epoch_scale": 0.35}, {"name": "lstmn", "hidden": 8, "span": 0}, {"accuracy"}),
    ({"name": "snli"}, {"name": "pair", "encoder": "mma_attention"}, {"name": "nse", "hidden": 8}, {"accuracy"}),
    ({"name": "wikiqa"}, {"name": "pair", "encoder": "attention"}, {"name": "lstm", "hidden": 8},
     {"map", "mrr", "questions"}),
    ({"name": "sst", "fine": False}, {"name": "mlp", "first_epoch_scale": 0.35}, {"name": "lstm", "hidden": 8},
     {"accuracy"}),
    ({"name": "wikiqa"}, {"name": "pair", "encoder": "mma"}, {"name": "nse", "hidden": 8}, {"map", "mrr", "questions"}),
])
def test_train_and_eval_on_fixtures(tmp_path, fixtures, data, head, reader, keys):
    cfg = tiny_config(tmp_path, "exp.toml", data={**data, "vectors": "glove/tiny.txt"},
                      head={**head, "emb": 8, "mlp": 8}, reader=reader,
                      train=Fresh(max_steps=6, batch_size=4, progress=False, log_every=2))
    run = tmp_path / "run"
    r = memread("train", cfg, "--run-dir", run, data_root=fixtures)
    assert r.returncode == 0, r.stderr
    final = json.loads((run / "final.json").read_text())
    assert keys <= set(final["test"]) and 0.0 <= final["test"]["accuracy"] <= 1.0
    r = memread("eval", run, "--split", "test", data_root=fixtures)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout.strip().splitlines()[-1])["accuracy"] == pytest.approx(final["test"]["accuracy"])
    if "questions" in keys:  # the fixture's filtered test ref keeps these questions
        kept = {line.split()[0] for line in (fixtures / "wikiqa" / "WikiQA-test-filtered.ref").read_text().splitlines()}
        assert final["test"]["questions"] == len(kept)


def _overfit_one_batch(cfg: ExperimentConfig, root, steps: int = 40) -> tuple[float, float]:
    task = build_task(cfg, root)
    model = build_model(cfg, task)
    criterion = task.build_criterion(model)
    batch = task.batches("train", cfg.train.batch_size, 0, 1)[0]
    opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    model.train()
    losses = []
    for _ in range(steps):
        loss = criterion(model(batch), batch).value
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    return losses[0], losses[-1]


GLOVE = "glove/glove.6B.50d.txt.gz"


@pytest.mark.slow  # 40 steps on real SST with GloVe
def test_real_sst_with_glove_learns_a_batch(real_data):
    root = real_data("sst/train.txt.gz", GLOVE)
    cfg = ExperimentConfig(SSTConfig(fine=True, vectors=GLOVE), NSEConfig(hidden=32),
                           MLPHeadConfig(emb=50, freeze=True, pool="last", mlp=32, dropout=0.0), CrossEntropyConfig(),
                           TrainConfig(batch_size=16))
    first, last = _overfit_one_batch(cfg, root)
    assert last < 0.5 * first


@pytest.mark.slow  # 40 steps on real SNLI, then all of WikiQA's test split
def test_real_snli_and_wikiqa_protocols(real_data):
    root = real_data("snli/snli_1.0_dev.jsonl.gz", "wikiqa/WikiQA-test.tsv.gz", GLOVE)
    cfg = ExperimentConfig(SNLIConfig(vectors=GLOVE), NSEConfig(hidden=32),
                           PairHeadConfig(encoder="mma", emb=50, freeze=True, mlp=32, dropout=0.0), CrossEntropyConfig(),
                           TrainConfig(batch_size=16))
    first, last = _overfit_one_batch(cfg, root)
    assert last < 0.5 * first
    task = build_task(cfg, root)
    assert len(task.data.examples("valid")) == 9842 and task.data.dropped["valid"] == 158
    assert sum(w in task.vocab for w in ("the", "dog", "running")) == 3
    # WikiQA: evaluation covers exactly the 237 test questions of the filtered protocol
    cfg = ExperimentConfig(WikiQAConfig(), RNNReaderConfig(hidden=8), PairHeadConfig(encoder="siamese", emb=8, mlp=8),
                           AnswerSelectionConfig(), TrainConfig())
    task = build_task(cfg, root)
    torch.manual_seed(0)
    metrics = evaluate(build_model(cfg, task), task, "test", 256)
    assert metrics["questions"] == 237 and metrics["count"] == 6165 and 0.0 < metrics["map"] <= 1.0
