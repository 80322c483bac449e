"""What a data pipeline is: one per task shape, flowing one way::

    corpus readers (memread.data.*)  ->  load  ->  vocabulary  ->  encode  ->  collate  ->  batches

``pipeline.batches(split, batch_size, epoch, seed)`` is an indexable sequence of dict batches (a
training epoch's order fixed by (seed, epoch), so a resumed run reads the same batches);
``pipeline.vocab`` is what the run saves in ``vocab.json``; ``tokens_in(batch)`` counts tokens for
throughput. Each dataset of a shape is one ``[data]`` config class: only its own keys are accepted.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Protocol, Sequence

from memread.data.vocab import Vocab


class Pipeline(Protocol):
    task: str  # the task shape: "lm", "cloze", "classify", "pair", "translate", "document"
    vocab: Vocab
    default_eval_batch_size: int

    def batches(self, split: str, batch_size: int, epoch: int = 0, seed: int = 0) -> Sequence[dict]: ...

    def tokens_in(self, batch: dict) -> int: ...


@dataclass(frozen=True)
class DatasetSpec:
    """A registered dataset: its ``[data]`` config class, the task shape it feeds, the criterion used
    when ``[criterion]`` is left out, and ``build(cfg, data_root, vocab) -> Pipeline`` (``vocab`` given:
    a trained run's own vocabulary, nothing is rebuilt)."""

    Config: type
    task: str
    build: Callable[[Any, Path, Vocab | None], Pipeline]
    criterion: str
    description: str
