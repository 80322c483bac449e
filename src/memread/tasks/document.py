"""Document-level sentiment (NSE paper, section 4.4): a sentence reader, a document reader over the
sentence vectors, a softmax over the rating classes, trained jointly.

Parts: data ``imdb-acl``, ``tang`` (:mod:`memread.data.pipelines.document`); head ``hierarchical``
(:mod:`memread.heads.hierarchical`; ``[reader]`` is the sentence reader, ``head.doc_reader`` the
document reader); criterion ``rating`` (:mod:`memread.criteria.document`: accuracy and the ratings' MSE).
"""

from __future__ import annotations

from memread.errors import MemreadError
from memread.tasks.base import TaskSpec
from memread.tasks.legacy import upgrade_sections


def check(cfg, where: str) -> None:
    cfg.head.doc_reader_config(where)  # the document reader takes head.doc_hidden and head.doc_layers


# the earlier [task] table of a document task: its keys, defaults, and where each one went
LEGACY_DEFAULTS = {"dataset": "imdb-acl", "labels": "stars", "tang_train": "tang/imdb.train.txt.ss",
                   "tang_valid": "tang/imdb.dev.txt.ss", "tang_test": "tang/imdb.test.txt.ss", "dev_fraction": 0.1,
                   "emb": 100, "vectors": "", "oov": "zero", "freeze": False, "min_count": 1, "max_words": 50,
                   "max_sentences": 40, "pool": "last", "doc_pool": "last", "doc_reader": "lstm", "doc_hidden": 100,
                   "doc_layers": 1, "emb_dropout": 0.0, "doc_dropout": 0.15, "dropout": 0.2,
                   "checkpoint_sentences": False, "sentence_chunk": 64}
DATA_KEYS = {"imdb-acl": ("labels", "vectors", "min_count", "max_words", "max_sentences", "dev_fraction"),
             "tang": ("labels", "vectors", "min_count", "max_words", "max_sentences", "tang_train", "tang_valid",
                      "tang_test")}
HEAD_KEYS = ("emb", "oov", "freeze", "pool", "doc_pool", "doc_reader", "doc_hidden", "doc_layers", "emb_dropout",
             "doc_dropout", "dropout", "checkpoint_sentences", "sentence_chunk")


def upgrade(task: dict, where: str) -> dict:
    dataset = task.get("dataset", "imdb-acl")
    if dataset not in DATA_KEYS:
        raise MemreadError(f"{where}: key 'task.dataset' must be one of {sorted(DATA_KEYS)}, got {dataset!r}")
    routes = {k: ("data", k) for k in DATA_KEYS[dataset]} | {k: ("head", k) for k in HEAD_KEYS}
    return upgrade_sections({k: v for k, v in task.items() if k != "dataset"}, where, routes, LEGACY_DEFAULTS,
                            {"data": {"name": dataset}, "head": {"name": "hierarchical"}, "criterion": {"name": "rating"}})


DOCUMENT = TaskSpec(check, upgrade, "document sentiment: sentence reader -> document reader -> rating classes")
