"""Vocabulary: specials first, then words by falling frequency (ties alphabetical), saved as JSON; and the
vocabulary of the tasks over separate texts, which also keeps the other splits' words that have a pretrained vector."""

from __future__ import annotations

import hashlib
import json
import os
from collections import Counter
from pathlib import Path
from typing import Iterable

from memread.errors import MemreadError
from memread.modules.embeddings import read_vectors

PAD, UNK = "<pad>", "<unk>"


class Vocab:
    """Maps words to ids. ``<pad>`` is id 0 and ``<unk>`` id 1 unless specials say otherwise."""

    def __init__(self, itos: list[str], unk: str | None = UNK, pad: str | None = PAD):
        self.itos = list(itos)
        self.stoi = {w: i for i, w in enumerate(self.itos)}
        if len(self.stoi) != len(self.itos):
            raise ValueError("duplicate words in vocabulary")
        self.unk = unk
        self.pad = pad
        self.unk_id = self.stoi[unk] if unk is not None else None
        self.pad_id = self.stoi[pad] if pad is not None else None

    @classmethod
    def build(
        cls,
        counts: Counter | Iterable[str],
        min_count: int = 1,
        max_size: int = 0,
        specials: Iterable[str] = (PAD, UNK),
        unk: str | None = UNK,
        pad: str | None = PAD,
    ) -> "Vocab":
        """Specials, then words with count >= ``min_count`` (at most ``max_size`` in all; 0 = no cap)."""
        if not isinstance(counts, Counter):
            counts = Counter(counts)
        specials = list(specials)
        words = sorted((w for w, c in counts.items() if c >= min_count and w not in specials), key=lambda w: (-counts[w], w))
        if max_size:
            words = words[: max(0, max_size - len(specials))]
        return cls(specials + words, unk=unk, pad=pad)

    def __len__(self) -> int:
        return len(self.itos)

    def __contains__(self, word: str) -> bool:
        return word in self.stoi

    def id(self, word: str) -> int:
        i = self.stoi.get(word, self.unk_id)
        if i is None:
            raise KeyError(f"{word!r} not in vocabulary and no <unk>")
        return i

    def encode(self, words: Iterable[str]) -> list[int]:
        return [self.id(w) for w in words]

    def decode(self, ids: Iterable[int]) -> list[str]:
        return [self.itos[i] for i in ids]

    def to_dict(self) -> dict:
        return {"itos": self.itos, "unk": self.unk, "pad": self.pad}

    def fingerprint(self) -> str:
        """sha256 of the word list: a checkpoint records it and refuses a different vocabulary."""
        return hashlib.sha256(json.dumps(self.itos).encode("utf-8")).hexdigest()

    def save(self, path: str | Path) -> None:
        path = Path(path)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(self.to_dict()), encoding="utf-8")
        os.replace(tmp, path)

    @classmethod
    def from_dict(cls, d: dict) -> "Vocab":
        """The inverse of :meth:`to_dict`."""
        return cls(d["itos"], unk=d.get("unk"), pad=d.get("pad"))

    @classmethod
    def load(cls, path: str | Path) -> "Vocab":
        path = Path(path)
        try:
            return cls.from_dict(json.loads(path.read_text(encoding="utf-8")))
        except FileNotFoundError:
            raise MemreadError(f"{path}: vocabulary file not found") from None
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as e:
            raise MemreadError(f"{path}: not a memread vocabulary ({e})") from None


# ----------------------------------------------------------------------------- with pretrained vectors


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
