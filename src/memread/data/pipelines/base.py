"""What a data pipeline is: one per task shape, flowing one way::

    corpus readers (memread.data.*)  ->  load  ->  vocabulary  ->  encode  ->  collate  ->  batches

``pipeline.batches(split, batch_size, epoch, seed)`` is an indexable sequence of dict batches (a
training epoch's order fixed by (seed, epoch), so a resumed run reads the same batches);
``pipeline.vocab`` is what the run saves in ``vocab.json``; ``tokens_in(batch)`` counts tokens for
throughput. Each dataset of a shape is one ``[data]`` config class: only its own keys are accepted.

``pipeline.example_batches(examples, batch_size)`` encodes raw examples of the pipeline's task (as
:func:`memread.data.records.record_example` makes them from records) with the pipeline's vocabulary and
batches them as evaluation does, but in the order given (no shuffling, no length sorting), so that a
caller can map the outputs back to its inputs (``memread predict``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Protocol, Sequence

from memread.data.vocab import Vocab
from memread.errors import MemreadError


class Pipeline(Protocol):
    task: str  # the task shape: "lm", "cloze", "classify", "pair", "translate", "document"
    vocab: Vocab
    default_eval_batch_size: int

    def batches(self, split: str, batch_size: int, epoch: int = 0, seed: int = 0) -> Sequence[dict]: ...

    def tokens_in(self, batch: dict) -> int: ...

    def example_batches(self, examples: list, batch_size: int) -> Sequence[dict]: ...


def in_order(n: int, batch_size: int) -> list[list[int]]:
    """Indices ``0 .. n-1`` cut into consecutive batches of ``batch_size`` (the last may be shorter)."""
    if batch_size < 1:
        raise MemreadError(f"batch size must be at least 1, got {batch_size}")
    return [list(range(k, min(k + batch_size, n))) for k in range(0, n, batch_size)]


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
