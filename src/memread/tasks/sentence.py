"""Sentence classification (the Stanford Sentiment Treebank) with any reader as the encoder.

Parts: data ``sst`` (:mod:`memread.data.pipelines.sentence`); head ``mlp`` (embedding -> reader ->
pool -> MLP, :mod:`memread.heads.classifier`); criterion ``cross_entropy``
(:mod:`memread.criteria.classification`). Any reader fits: the sections' own checks are all there is.
"""

from __future__ import annotations

from memread.errors import MemreadError
from memread.tasks.base import TaskSpec
from memread.tasks.legacy import upgrade_sections


def check(cfg, where: str) -> None:
    """Every reader reads a sentence; nothing to cross-check."""


# the earlier [task] table of sentence classification: its keys, defaults, and where each one went
LEGACY_DEFAULTS = {"dataset": "sst", "fine": True, "phrases": False, "emb": 300, "vectors": "", "oov": "zero",
                   "freeze": False, "first_epoch_scale": 1.0, "lowercase": True, "emb_dropout": 0.0, "pool": "mean",
                   "mlp": 300, "dropout": 0.5, "min_count": 1, "bucket": 0}
DATA_KEYS = ("fine", "phrases", "vectors", "lowercase", "min_count", "bucket")
HEAD_KEYS = ("emb", "oov", "freeze", "first_epoch_scale", "emb_dropout", "pool", "mlp", "dropout")


def upgrade(task: dict, where: str) -> dict:
    dataset = task.get("dataset", "sst")
    if dataset != "sst":
        raise MemreadError(f"{where}: key 'task.dataset' must be 'sst', got {dataset!r}")
    routes = {k: ("data", k) for k in DATA_KEYS} | {k: ("head", k) for k in HEAD_KEYS}
    return upgrade_sections({k: v for k, v in task.items() if k != "dataset"}, where, routes, LEGACY_DEFAULTS,
                            {"data": {"name": "sst"}, "head": {"name": "mlp"}, "criterion": {"name": "cross_entropy"}})


CLASSIFY = TaskSpec(check, upgrade, "sentence classification: accuracy over the classes of whole sentences")
