"""Cloze question answering: read a document, fill the blank of a query from a candidate list.

Parts: data ``stories``, ``cbt``, ``books``, ``cnn``, ``babi`` (:mod:`memread.data.pipelines.cloze`);
heads ``pointer``, ``final_state``, ``as_reader``, ``iaa`` (:mod:`memread.heads.cloze`); criterion
``cloze_nll`` (:mod:`memread.criteria.cloze`). The ``final_state`` head continues reading the query
from the document's state, so it needs a reader that carries state (``ReaderSpec.carries_state``).
"""

from __future__ import annotations

from memread.data.babi import TASK_NAMES
from memread.errors import MemreadError
from memread.readers import READERS, readers_with
from memread.tasks.base import TaskSpec
from memread.tasks.legacy import upgrade_sections


def check(cfg, where: str) -> None:
    if cfg.head.name == "final_state" and not READERS[cfg.reader.name].carries_state:
        raise MemreadError(f"{where}: head 'final_state' continues reading the query from the document's state; "
                           f"reader '{cfg.reader.name}' carries no state (use one of {', '.join(readers_with('carries_state'))})")
    if cfg.head.name == "final_state" and getattr(cfg.criterion, "normalize", None) == "document":
        raise MemreadError(f"{where}: key 'criterion.normalize' is 'document' (the default: the papers' pointer-sum "
                           f"objective over the document attention); head 'final_state' answers from its final "
                           f"state, without document attention: set normalize = \"candidates\" in [criterion]")
    if cfg.head.name == "iaa" and cfg.head.steps < 1:
        raise MemreadError(f"{where}: key 'head.steps' must be at least 1, got {cfg.head.steps}")
    if cfg.data.name == "babi" and not set(cfg.data.tasks) <= set(TASK_NAMES):
        raise MemreadError(f"{where}: key 'data.tasks' holds bAbI task numbers 1-20, got {list(cfg.data.tasks)}")


# the earlier [task] table of a cloze experiment: its keys, defaults, and where each one went
LEGACY_DEFAULTS = {
    "dataset": "stories", "head": "pointer", "emb": 64, "dropout": 0.0, "stories": 4000, "story_seed": 0,
    "train_file": "", "valid_file": "", "test_file": "", "books": (), "valid_books": (), "test_books": (),
    "word_class": "NE", "window_stride": 1, "babi_dir": "babi/en-10k", "babi_tasks": (1, 2, 4, 5, 11, 12, 13, 14, 16),
    "babi_max_sentences": 50, "min_count": 1, "max_vocab": 0, "bucket": 0, "init": "torch", "emb_l2": 0.0,
    "share_encoder": False, "steps": 8, "inference": 512, "gate_hidden": 0, "fixed_query": False}
LEGACY_DATASETS = {"stories": "stories", "files": "cbt", "books": "books", "cnn": "cnn", "babi": "babi"}
HEADS = ("pointer", "final_state", "as_reader", "iaa")
DATA_KEYS = {  # dataset -> {old key: [data] key}
    "stories": {"stories": "stories", "story_seed": "story_seed"},
    "files": {k: k for k in ("train_file", "valid_file", "test_file")},
    "cnn": {k: k for k in ("train_file", "valid_file", "test_file")},
    "books": {k: k for k in ("books", "valid_books", "test_books", "word_class", "window_stride")},
    "babi": {"babi_dir": "dir", "babi_tasks": "tasks", "babi_max_sentences": "max_sentences"}}
HEAD_KEYS = {"pointer": (), "final_state": (), "as_reader": ("share_encoder",),
             "iaa": ("share_encoder", "steps", "inference", "gate_hidden", "fixed_query")}


def upgrade(task: dict, where: str) -> dict:
    """The earlier form predates ``criterion.normalize``: it trained on the candidates' renormalised pointer-sum."""
    dataset, head = task.get("dataset", "stories"), task.get("head", "pointer")
    if dataset not in LEGACY_DATASETS:
        raise MemreadError(f"{where}: key 'task.dataset' must be one of {sorted(LEGACY_DATASETS)}, got {dataset!r}")
    if head not in HEADS:
        raise MemreadError(f"{where}: key 'task.head' must be one of {list(HEADS)}, got {head!r}")
    routes = {k: ("data", k) for k in ("min_count", "max_vocab", "bucket")}
    routes |= {old: ("data", new) for old, new in DATA_KEYS[dataset].items()}
    routes |= {k: ("head", k) for k in ("emb", "dropout", "init", *HEAD_KEYS[head])}
    routes["emb_l2"] = ("criterion", "emb_l2")
    rest = {k: v for k, v in task.items() if k not in ("dataset", "head")}
    return upgrade_sections(rest, where, routes, LEGACY_DEFAULTS, {"data": {"name": LEGACY_DATASETS[dataset]},
                            "head": {"name": head}, "criterion": {"name": "cloze_nll", "normalize": "candidates"}})


CLOZE = TaskSpec(check, upgrade, "cloze question answering: fill a query's blank from the candidates, by reading a document")
