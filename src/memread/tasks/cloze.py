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


CLOZE = TaskSpec(check, "cloze question answering: fill a query's blank from the candidates, by reading a document")
