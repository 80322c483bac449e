"""What the sentence and pair tasks share: a vocabulary that knows the pretrained vectors, pooling of
reader states into one vector per text, and the MLP classifier of both papers."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Iterable

import torch
from torch import Tensor, nn

from memread.data.vocab import Vocab
from memread.errors import MemreadError
from memread.modules.embeddings import read_vectors
from memread.modules.masking import last_real, masked_mean


def vectors_path(data_root: Path, name: str) -> Path:
    """``task.vectors`` relative to the data root (or absolute); a missing file is one clear error."""
    path = Path(name) if Path(name).is_absolute() else Path(data_root) / name
    if not path.is_file():
        raise MemreadError(f"task.vectors: {path}: word-vector file not found (GloVe text format, .gz allowed)")
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


def pool(states: Tensor, mask: Tensor, how: str) -> Tensor:
    """(B, T, H) reader states -> (B, H): ``mean`` over real tokens (the LSTMN setup: the mean of the
    hidden tape), ``last`` real state (NSE: its final output h_T), or ``max`` over real tokens."""
    if how == "mean":
        return masked_mean(states, mask)
    if how == "last":
        return last_real(states, mask)
    if how == "max":
        return states.masked_fill(~mask.unsqueeze(-1), float("-inf")).amax(dim=1)
    raise MemreadError(f"unknown pooling {how!r}; expected mean, last or max")


def mlp_classifier(in_size: int, hidden: int, classes: int, dropout: float) -> nn.Sequential:
    """Both papers' classifier: dropout, a ReLU layer of ``hidden`` units, dropout, the output layer
    (softmax or, with ``classes = 1``, sigmoid, applied by the loss)."""
    return nn.Sequential(nn.Dropout(dropout), nn.Linear(in_size, hidden), nn.ReLU(), nn.Dropout(dropout),
                         nn.Linear(hidden, classes))


def classification_stats(logits: Tensor, labels: Tensor) -> tuple[Tensor, dict[str, Tensor]]:
    """Mean cross-entropy and the summed statistics every classifier reports."""
    nll = torch.nn.functional.cross_entropy(logits, labels, reduction="none")  # (B,)
    correct = (logits.argmax(dim=-1) == labels).sum()
    stats = {"nll": nll.sum().detach(), "correct": correct.detach(), "count": torch.tensor(float(len(labels)))}
    return nll.mean(), stats
