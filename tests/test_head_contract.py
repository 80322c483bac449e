"""One contract for every registered head (and the criteria they feed): built around a small reader on small
data, it returns a ModelOutput and no loss, its default criterion turns that into a finite scalar loss and
summable statistics, every trainable parameter gets a gradient, and evaluation gives the criterion's
selection metric. A head added later is checked by adding one line to EXPERIMENTS."""

from __future__ import annotations

import math

import pytest
import torch

from memread.config import experiment_from_dict
from memread.criteria import CRITERIA
from memread.heads import HEADS, ModelOutput
from memread.tasks import Task
from memread.training.loop import evaluate

# head -> a small experiment over the test fixtures (or built-in data): data, reader, head keys
TANG = {"name": "tang", "tang_train": "tang/train.ss", "tang_valid": "tang/dev.ss", "tang_test": "tang/test.ss"}
EXPERIMENTS = {
    "lm": ({"name": "stories-text", "stories": 20, "bptt": 6}, {"name": "lstm", "hidden": 8}, {"emb": 6}),
    "pointer": ({"name": "stories", "stories": 30}, {"name": "gru", "hidden": 6}, {"emb": 6}),
    "final_state": ({"name": "stories", "stories": 30}, {"name": "lstm", "hidden": 6}, {"emb": 6}),
    "as_reader": ({"name": "stories", "stories": 30}, {"name": "gru", "hidden": 6, "bidirectional": True}, {"emb": 6}),
    "iaa": ({"name": "stories", "stories": 30}, {"name": "gru", "hidden": 6, "bidirectional": True},
            {"emb": 6, "steps": 3, "inference": 6}),  # T = 3: the GRU state s_1 != 0 reaches H
    "mlp": ({"name": "sst"}, {"name": "lstmn", "hidden": 6}, {"emb": 6, "mlp": 8}),
    "pair": ({"name": "snli"}, {"name": "nse", "hidden": 6}, {"emb": 6, "mlp": 8, "encoder": "mma_attention"}),
    "attention_decoder": ({"name": "iwslt14"}, {"name": "lstm", "hidden": 6}, {"emb": 6, "tgt_emb": 5}),
    "nse_decoder": ({"name": "iwslt14"}, {"name": "nse", "hidden": 6}, {"emb": 6, "tgt_emb": 5}),
    "lstmn_shallow": ({"name": "iwslt14"}, {"name": "lstmn", "hidden": 6}, {"emb": 6, "tgt_emb": 5}),
    "lstmn_deep": ({"name": "iwslt14"}, {"name": "lstmn", "hidden": 6}, {"emb": 6, "tgt_emb": 5}),
    "hierarchical": (TANG, {"name": "lstm", "hidden": 6}, {"emb": 6, "doc_hidden": 5}),
}
MORE = [  # further criteria, so that each registered one is driven once
    ({"name": "wikiqa"}, {"name": "lstm", "hidden": 6}, {"name": "pair", "emb": 6, "mlp": 8}),
]


def test_every_head_and_criterion_has_a_contract_entry():
    assert sorted(EXPERIMENTS) == sorted(HEADS)
    used = {experiment(*e, head=h).criterion.name for h, e in EXPERIMENTS.items()}
    used |= {experiment(d, r, {k: v for k, v in h.items() if k != "name"}, head=h["name"]).criterion.name for d, r, h in MORE}
    assert used == set(CRITERIA)


# the data's default criterion with a key a head needs: final_state has no document attention for the papers'
# pointer-sum objective (cloze_nll's default), so it trains on the candidates' renormalised one
CRITERION_KEYS = {"final_state": {"normalize": "candidates"}}


def experiment(data, reader, head_keys, head):
    return experiment_from_dict({"data": data, "reader": reader, "head": {"name": head, **head_keys},
                                 "criterion": CRITERION_KEYS.get(head, {}),
                                 "train": {"batch_size": 4, "progress": False}}, f"contract:{head}")


CASES = [(h, *e) for h, e in EXPERIMENTS.items()] + [(h["name"], d, r, {k: v for k, v in h.items() if k != "name"}) for d, r, h in MORE]


@pytest.mark.parametrize("head,data,reader,keys", CASES, ids=[f"{c[0]}-{c[1]['name']}" for c in CASES])
def test_head_contract(fixtures, head, data, reader, keys):
    cfg = experiment(data, reader, keys, head)
    task = Task(cfg, fixtures)
    model = task.build_model()
    criterion = task.build_criterion(model)
    batches = task.batches("train", 4, 0, 1)
    batch = max((batches[i] for i in range(min(len(batches), 20))), key=task.tokens_in)  # long texts: every weight acts
    model.train()
    out = model(batch, None)
    assert isinstance(out, ModelOutput) and not hasattr(out, "loss")  # scores only; the loss is the criterion's
    loss = criterion(out, batch)
    assert loss.value.dim() == 0 and math.isfinite(float(loss.value.detach()))
    assert all(not v.requires_grad for v in loss.stats.values())  # detached sums
    loss.value.backward()
    missing = [n for n, p in model.named_parameters() if p.requires_grad and (p.grad is None or not p.grad.abs().sum() > 0)]
    assert not missing, f"{head}: no gradient for {missing}"
    with torch.no_grad():
        metrics = evaluate(model, task, "valid", 8)
    assert criterion.selection_metric in metrics and math.isfinite(metrics[criterion.selection_metric])
