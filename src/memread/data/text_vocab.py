"""The vocabulary of the tasks over separate texts (sentences, pairs, documents): the training words, plus
every word of the other splits that has a pretrained vector (``data.vectors``)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Iterable

from memread.data.vocab import Vocab
from memread.errors import MemreadError
from memread.modules.embeddings import read_vectors


def vectors_path(data_root: Path, name: str) -> Path:
    """``data.vectors`` relative to the data root (or absolute); a missing file is one clear error."""
    path = Path(name) if Path(name).is_absolute() else Path(data_root) / name
    if not path.is_file():
        raise MemreadError(f"data.vectors: {path}: word-vector file not found (GloVe text format, .gz allowed)")
    return path


def vocabulary(train: Iterable[Iterable[str]], other: Iterable[Iterable[str]], vectors: Path | None,
               min_count: int = 1) -> tuple[Vocab, dict[str, list[float]] | None]:
    """Words of the training texts (``min_count``), plus, when ``vectors`` are given, every word of the
    other splits that has a vector (its row is the fixed pretrained vector: no label is seen).
    Returns the vocabulary and the vectors of its words."""
    counts = Counter(w for text in train for w in text)
    if vectors is None:
        return Vocab.build(counts, min_count=min_count), None
    others = {w for text in other for w in text}
    found, _ = read_vectors(vectors, set(counts) | others)
    keep = Counter({w: c for w, c in counts.items() if c >= min_count or w in found})
    for w in others - set(keep):
        if w in found:
            keep[w] = 0
    vocab = Vocab.build(keep, min_count=0)
    return vocab, found
