"""What the sentence and pair datasets share: their common ``[data]`` keys and the words they read.

With ``vectors`` set, the vocabulary holds the training words (``min_count``) and every word of the
valid and test texts that has a pretrained vector (:func:`memread.data.vocab.vocabulary`); the
vectors of its words stay on the pipeline (``pipeline.vectors``) for the head's embedding. A run's own
saved vocabulary (a resumed or loaded run) reads no vectors: the checkpoint holds the embedding.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence

from memread.errors import MemreadError

from memread.typed import NonNegInt


@dataclass
class TextDataConfig:
    """The ``[data]`` keys of every sentence and pair dataset (each dataset's class adds its own)."""

    lowercase: bool = True  # GloVe 6B is uncased
    vectors: str = ""  # GloVe-format file under the data root, e.g. "glove/glove.6B.50d.txt.gz" ("" = none)
    min_count: NonNegInt = 1  # training words seen fewer times are <unk> (unless they have a vector)
    bucket: NonNegInt = 0  # sort training batches by length within pools of this many batches; 0 = no sorting


def words(tokens: Iterable[str], lowercase: bool) -> list[str]:
    return [w.lower() for w in tokens] if lowercase else list(tokens)


def check_classes(classes: int, labels: Sequence[str], name: str) -> None:
    """``classes`` and ``labels`` of a classifying dataset of your own agree and name two classes or more."""
    if len(set(labels)) != len(labels):
        raise MemreadError(f"data.labels: a name appears twice in {list(labels)}")
    if classes and labels and classes != len(labels):
        raise MemreadError(f"data.classes = {classes} but data.labels names {len(labels)} classes")
    if (classes or len(labels)) < 2:
        raise MemreadError(f"[data] name = {name!r} needs its classes: data.labels = [\"neg\", \"pos\", ...] "
                           f"(labels by name) or data.classes = N (labels 0..N-1), two or more")
