"""Sentence classification data: the Stanford Sentiment Treebank, or your own JSON lines; one labelled
text per example.

``[data] name = "sst"``: ``sst/{train,dev,test}.txt(.gz)`` under the data root. ``fine = true``: five
classes; ``fine = false``: binary, neutral sentences (and phrases) removed. ``phrases = true`` trains
on every labelled phrase of the training trees (NSE section 4.3); evaluation is always on whole
sentences of the dev ("valid") and test trees. ``[data] name = "jsonl-classify"``: your own
``{"text": ..., "label": ...}`` lines (:mod:`memread.data.records`), ``classes`` and/or ``labels``
naming the classes. Batches: ``{"ids", "mask", "label"}``.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Literal

import torch

from memread.data.batching import Batches, batch_order, pad
from memread.data.pipelines.base import in_order
from memread.data.pipelines.text import TextDataConfig, check_classes, words
from memread.data.records import classify_example, data_file, read_records
from memread.data.vocab import Vocab, vectors_path, vocabulary
from memread.data.sst import SentimentExample, read_sst, sst_path
from memread.errors import MemreadError
from memread.typed import NonNegInt


@dataclass
class SSTConfig(TextDataConfig):
    name: Literal["sst"] = "sst"
    fine: bool = True  # five classes; false = binary with neutral removed
    phrases: bool = False  # train on every labelled phrase (NSE), not only whole sentences

    @property
    def outputs(self) -> int:
        """Units of the classifier's output layer: one per class."""
        return 5 if self.fine else 2


@dataclass
class JsonlClassifyConfig(TextDataConfig):
    name: Literal["jsonl-classify"] = "jsonl-classify"
    train: str = ""  # JSON-lines files, relative to the data root (or absolute), .gz allowed
    valid: str = ""
    test: str = ""
    classes: NonNegInt = 0  # number of classes (0: len(labels)); a record's label is an int in [0, classes) ...
    labels: tuple[str, ...] = ()  # ... or one of these names (class i = labels[i])
    lowercase: bool = False

    def __post_init__(self) -> None:
        check_classes(self.classes, self.labels, "jsonl-classify")

    @property
    def outputs(self) -> int:
        return self.classes or len(self.labels)


def collate_sentences(items: list[tuple[list[int], int]], pad_id: int) -> dict:
    ids, mask = pad([ids for ids, _ in items], pad_id)  # (B, T)
    return {"ids": ids, "mask": mask, "label": torch.tensor([y for _, y in items], dtype=torch.long)}


class SentencePipeline:
    """Trees of each split -> lowercased words -> ids -> padded batches."""

    task = "classify"
    default_eval_batch_size = 128

    def __init__(self, cfg: SSTConfig | JsonlClassifyConfig, data_root: Path, vocab: Vocab | None = None,
                 examples: dict[str, list[SentimentExample]] | None = None):
        """``vocab`` given (a resumed or loaded run): the vectors are not read again, the checkpoint
        holds the embedding. ``examples`` (split -> examples) replaces reading the files (tests)."""
        self.cfg = cfg
        self.data_root = Path(data_root)
        self.outputs = cfg.outputs
        self._examples: dict[str, list[SentimentExample]] = dict(examples or {})
        self._encoded: dict[str, list[tuple[list[int], int]]] = {}
        self.vectors: dict[str, list[float]] | None = None  # of the vocabulary's words, for the head's embedding
        if vocab is None:
            path = vectors_path(self.data_root, cfg.vectors) if cfg.vectors else None
            others = [self._words(e) for s in ("valid", "test") for e in self.examples(s)]
            vocab, self.vectors = vocabulary((self._words(e) for e in self.examples("train")), others, path, cfg.min_count)
        self.vocab = vocab

    def _words(self, ex: SentimentExample) -> list[str]:
        return words(ex.tokens, self.cfg.lowercase)

    def examples(self, split: str) -> list[SentimentExample]:
        if split not in self._examples:
            if self.cfg.name == "jsonl-classify":
                path = data_file(self.data_root, getattr(self.cfg, split), split, self.cfg.name)
                self._examples[split] = read_records(path, lambda record, where: classify_example(
                    record, where, labels=self.cfg.labels, classes=self.outputs, lowercase=self.cfg.lowercase))
                return self._examples[split]
            phrases = self.cfg.phrases and split == "train"
            self._examples[split] = read_sst(sst_path(self.data_root, split), fine=self.cfg.fine, phrases=phrases)
            if not self._examples[split]:
                raise MemreadError(f"{sst_path(self.data_root, split)}: no examples")
        return self._examples[split]

    def encoded(self, split: str) -> list[tuple[list[int], int]]:
        if split not in self._encoded:
            self._encoded[split] = [(self.vocab.encode(self._words(e)), e.label) for e in self.examples(split)]
        return self._encoded[split]

    def batches(self, split: str, batch_size: int, epoch: int = 0, seed: int = 0) -> Batches:
        enc = self.encoded(split)
        g = torch.Generator().manual_seed(seed * 1_000_003 + epoch) if split == "train" else None
        groups = batch_order([len(ids) for ids, _ in enc], batch_size, self.cfg.bucket, g)
        return Batches(enc, groups, partial(collate_sentences, pad_id=self.vocab.pad_id))

    def example_batches(self, examples: list[SentimentExample], batch_size: int) -> Batches:
        """Examples (:func:`memread.data.records.classify_example`) encoded and batched in the given order."""
        enc = [(self.vocab.encode(self._words(e)), e.label) for e in examples]
        return Batches(enc, in_order(len(enc), batch_size), partial(collate_sentences, pad_id=self.vocab.pad_id))

    def tokens_in(self, batch: dict) -> int:
        return int(batch["mask"].sum())
