"""Document-level sentiment data: rated documents of sentences, bucketed by their number of sentences.

Datasets (``[data] name``): ``imdb-acl`` (``imdb-acl/aclImdb_v1_train_test.tar.gz`` under the data root;
the test split is aclImdb's test set, and ``dev_fraction`` of its train set, chosen by review id
(:func:`memread.data.documents.dev_split`), is held out as "valid") and ``tang`` (the three Tang et al.
``.ss`` files ``tang_train``, ``tang_valid``, ``tang_test``, paths under the data root) and
``jsonl-document`` (your own ``{"sentences": [...], "label": 7}`` lines, :mod:`memread.data.records`;
``ratings = [...]`` lists the rating values, one class each).

**Labels.** ``labels = "stars"``: one class per rating value (aclImdb: 1-4 and 7-10, eight classes; Tang:
1..the largest rating in the train file, 5 for Yelp, 10 for IMDB); ``"polarity"``: negative (rating <= 4
on aclImdb; below the middle of the scale on Tang files) and positive, the middle rating dropped. The
value of every class (``class_values``: the ratings, or 0 and 1 for polarity) is what the ``rating``
criterion's MSE compares (:mod:`memread.criteria.document`).

**Batching** as the NSE paper: documents with the same number of sentences (after ``max_sentences``)
form a bucket; training cuts each bucket, shuffled, into batches and shuffles all batches, by a
generator seeded from (``train.seed``, epoch); evaluation goes bucket by bucket in order. A batch is
``ids``, ``mask`` (B, S, W) (words padded inside sentences), ``sent_mask`` (B, S) (sentences padded
inside documents), ``label`` (B,).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Literal

import torch
from torch import Tensor

from memread.data.batching import Batches
from memread.data.documents import ACL_IMDB_FILE, ACL_IMDB_RATINGS, Document, dev_split, read_acl_imdb, read_tang
from memread.data.pipelines.base import in_order
from memread.data.records import data_file, document_example, read_records
from memread.data.vocab import Vocab, vectors_path, vocabulary
from memread.errors import MemreadError
from memread.typed import NonNegInt, Probability


def _check_caps(cfg) -> None:
    if cfg.max_words < 0 or cfg.max_sentences < 0:
        raise MemreadError("data.max_words and data.max_sentences must be >= 0")


@dataclass
class IMDBAclConfig:
    name: Literal["imdb-acl"] = "imdb-acl"
    labels: Literal["stars", "polarity"] = "stars"
    dev_fraction: Probability = 0.1  # share of aclImdb's train set held out as "valid"
    vectors: str = ""  # GloVe-format file under the data root: the vocabulary adds every word with a vector
    min_count: NonNegInt = 1
    max_words: NonNegInt = 50  # words kept per sentence (the first ones); 0 = no cap
    max_sentences: NonNegInt = 40  # sentences kept per document (the first ones); 0 = no cap

    def __post_init__(self) -> None:
        _check_caps(self)
        if not 0.0 <= self.dev_fraction < 1.0:
            raise MemreadError(f"data.dev_fraction must be in [0, 1), got {self.dev_fraction}")


@dataclass
class TangConfig:
    name: Literal["tang"] = "tang"
    labels: Literal["stars", "polarity"] = "stars"
    tang_train: str = "tang/imdb.train.txt.ss"  # Tang et al. files, relative to the data root
    tang_valid: str = "tang/imdb.dev.txt.ss"
    tang_test: str = "tang/imdb.test.txt.ss"
    vectors: str = ""
    min_count: NonNegInt = 1
    max_words: NonNegInt = 50
    max_sentences: NonNegInt = 40

    def __post_init__(self) -> None:
        _check_caps(self)


@dataclass
class JsonlDocumentConfig:
    name: Literal["jsonl-document"] = "jsonl-document"
    train: str = ""  # JSON-lines files, relative to the data root (or absolute), .gz allowed
    valid: str = ""
    test: str = ""
    ratings: tuple[NonNegInt, ...] = ()  # the rating values, one class each (class i = ratings[i]): [1, 2, 3, 4, 5]
    lowercase: bool = False
    vectors: str = ""
    min_count: NonNegInt = 1
    max_words: NonNegInt = 50
    max_sentences: NonNegInt = 40

    def __post_init__(self) -> None:
        _check_caps(self)
        if len(self.ratings) < 2 or len(set(self.ratings)) != len(self.ratings):
            raise MemreadError(f"[data] name = \"jsonl-document\" needs data.ratings: the rating values a label takes, "
                               f"two or more, each once (e.g. ratings = [1, 2, 3, 4, 5]); got {list(self.ratings)}")


DocumentDataConfig = IMDBAclConfig | TangConfig | JsonlDocumentConfig


# ----------------------------------------------------------------------------- batches


def sentence_buckets(counts: list[int], batch_size: int, generator: torch.Generator | None) -> list[list[int]]:
    """Batches of document indices, every batch from one bucket (equal sentence ``counts``). With a
    generator: shuffle inside every bucket, cut, shuffle all batches. Without: buckets by increasing
    count, documents in order."""
    buckets: dict[int, list[int]] = defaultdict(list)
    for i, c in enumerate(counts):
        buckets[c].append(i)
    batches = []
    for c in sorted(buckets):
        idx = buckets[c]
        if generator is not None:
            idx = [idx[j] for j in torch.randperm(len(idx), generator=generator).tolist()]
        batches.extend(idx[k : k + batch_size] for k in range(0, len(idx), batch_size))
    if generator is not None:
        batches = [batches[j] for j in torch.randperm(len(batches), generator=generator).tolist()]
    return batches


def pad_documents(docs: list[list[list[int]]], pad_id: int) -> tuple[Tensor, Tensor, Tensor]:
    """Documents of sentences of ids -> ids, mask (B, S, W) and sent_mask (B, S); True = real."""
    S = max(len(d) for d in docs)
    W = max(1, max(len(s) for d in docs for s in d))
    ids = torch.full((len(docs), S, W), pad_id, dtype=torch.long)
    for b, d in enumerate(docs):
        for s, sent in enumerate(d):
            ids[b, s, : len(sent)] = torch.tensor(sent, dtype=torch.long)
    lengths = torch.tensor([[len(s) for s in d] + [0] * (S - len(d)) for d in docs])  # (B, S)
    mask = torch.arange(W) < lengths.unsqueeze(2)
    sent_mask = torch.arange(S) < torch.tensor([len(d) for d in docs]).unsqueeze(1)
    return ids, mask, sent_mask


def collate_documents(items: list[tuple[list[list[int]], int]], pad_id: int) -> dict:
    ids, mask, sent_mask = pad_documents([d for d, _ in items], pad_id)
    return {"ids": ids, "mask": mask, "sent_mask": sent_mask, "label": torch.tensor([y for _, y in items], dtype=torch.long)}


# ----------------------------------------------------------------------------- the pipeline


class DocumentPipeline:
    """Rated documents of each split -> labels -> vocabulary -> ids -> sentence-bucketed batches."""

    task = "document"
    default_eval_batch_size = 32

    def __init__(self, cfg: DocumentDataConfig, data_root: Path, vocab: Vocab | None = None,
                 documents: dict[str, list[Document]] | None = None):
        """``documents`` (split -> documents) replaces reading the files (tests)."""
        self.cfg = cfg
        self.data_root = Path(data_root)
        self._raw: dict[str, list[Document]] = dict(documents or {})
        self._docs: dict[str, list[Document]] = {}
        self._encoded: dict[str, list[tuple[list[list[int]], int]]] = {}
        self.polarity = getattr(cfg, "labels", "stars") == "polarity"
        self.ratings = self._ratings()
        self.class_values = [0.0, 1.0] if self.polarity else [float(r) for r in self.ratings]
        self.vectors: dict[str, list[float]] | None = None  # the vocabulary's pretrained vectors, for the head
        if vocab is None:
            path = vectors_path(self.data_root, cfg.vectors) if cfg.vectors else None
            others = (s for split in ("valid", "test") for d in self.documents(split) for s in self._sentences(d))
            train = (s for d in self.documents("train") for s in self._sentences(d))
            vocab, self.vectors = vocabulary(train, others, path, cfg.min_count)
        self.vocab = vocab

    # ------------------------------------------------------------------ load
    def _read(self, split: str) -> list[Document]:
        """The split as read (every rating), cached."""
        if split not in self._raw:
            if split not in ("train", "valid", "test"):
                raise MemreadError(f"unknown split {split!r}; expected train, valid or test")
            if self.cfg.name == "jsonl-document":
                path = data_file(self.data_root, getattr(self.cfg, split), split, self.cfg.name)
                self._raw[split] = read_records(path, lambda record, where: document_example(
                    record, where, ratings=self.cfg.ratings, lowercase=self.cfg.lowercase))
            elif self.cfg.name == "imdb-acl":
                corpus = read_acl_imdb(self.data_root / ACL_IMDB_FILE)
                self._raw["train"], self._raw["valid"] = dev_split(corpus["train"], self.cfg.dev_fraction)
                self._raw["test"] = corpus["test"]
            else:
                name = {"train": self.cfg.tang_train, "valid": self.cfg.tang_valid, "test": self.cfg.tang_test}[split]
                self._raw[split] = read_tang(self.data_root / name)
        return self._raw[split]

    def documents(self, split: str) -> list[Document]:
        """The split's documents; for polarity without those of the neutral middle rating."""
        if split not in self._docs:
            docs = self._read(split)
            if self.polarity:
                docs = [d for d in docs if d.rating != self._middle()]
            if not docs:
                raise MemreadError(f"data {self.cfg.name}: split {split!r} has no documents")
            self._docs[split] = docs
        return self._docs[split]

    def _ratings(self) -> list[int]:
        """The rating of every stars class, in class order."""
        if self.cfg.name == "imdb-acl":
            return list(ACL_IMDB_RATINGS)
        if self.cfg.name == "jsonl-document":
            return list(self.cfg.ratings)
        return list(range(1, max(d.rating for d in self._read("train")) + 1))

    def _middle(self) -> float:
        """Polarity: ratings below are negative, above positive (aclImdb: 5; Tang: the scale's middle)."""
        return 5 if self.cfg.name == "imdb-acl" else (self.ratings[-1] + 1) / 2

    # ------------------------------------------------------------------ labels and encode
    def _sentences(self, doc: Document) -> list[tuple[str, ...]]:
        sents = doc.sentences[: self.cfg.max_sentences] if self.cfg.max_sentences else doc.sentences
        return [s[: self.cfg.max_words] for s in sents] if self.cfg.max_words else list(sents)

    def label(self, doc: Document) -> int:
        if self.polarity:
            if doc.rating == self._middle():
                raise MemreadError(f"{doc.id}: rating {doc.rating} is neither negative nor positive")
            return int(doc.rating > self._middle())
        if doc.rating not in self.ratings:
            raise MemreadError(f"{doc.id}: rating {doc.rating} is not one of the classes {self.ratings}")
        return self.ratings.index(doc.rating)

    def encoded(self, split: str) -> list[tuple[list[list[int]], int]]:
        if split not in self._encoded:
            self._encoded[split] = [([self.vocab.encode(s) for s in self._sentences(d)], self.label(d))
                                    for d in self.documents(split)]
        return self._encoded[split]

    # ------------------------------------------------------------------ batches
    def batches(self, split: str, batch_size: int, epoch: int = 0, seed: int = 0) -> Batches:
        enc = self.encoded(split)
        g = torch.Generator().manual_seed(seed * 1_000_003 + epoch) if split == "train" else None
        groups = sentence_buckets([len(d) for d, _ in enc], batch_size, g)
        return Batches(enc, groups, partial(collate_documents, pad_id=self.vocab.pad_id))

    def example_batches(self, examples: list[Document], batch_size: int) -> Batches:
        """Documents (:func:`memread.data.records.document_example`) capped and encoded as the splits are, and
        batched in the given order (not bucketed by their number of sentences: a batch pads them)."""
        enc = [([self.vocab.encode(s) for s in self._sentences(d)], self.label(d)) for d in examples]
        return Batches(enc, in_order(len(enc), batch_size), partial(collate_documents, pad_id=self.vocab.pad_id))

    def tokens_in(self, batch: dict) -> int:
        return int(batch["mask"].sum())

