"""Document-level sentiment (NSE paper, section 4.4): a hierarchical model over sentences.

    ids (B, S, W) -> embedding -> sentence reader ([reader]) over each real sentence -> pool
        -> sentence vectors (B, S, H) -> dropout (doc_dropout) -> document reader (doc_reader)
        -> pool over real sentences -> dropout (dropout) -> softmax over the rating classes

trained jointly end to end with cross-entropy. Any reader of the common interface can sit at either
level (the paper: NSE-NSE and NSE-LSTM; ``configs/imdb/``).

**Padding.** Words are padded inside sentences (``mask`` (B, S, W)) and sentences inside documents
(``sent_mask`` (B, S)). Only real sentences are read at the sentence level: they are gathered,
sorted by length and read in chunks each padded to its own longest sentence, then scattered back;
the document reader sees ``sent_mask``. Both readers and both poolings honour their masks, so a
document gives the same prediction alone as inside a padded batch (tested).

**Memory.** The NSE keeps its memory ``M_t`` for every step for the backward pass: O(W^2 k) floats per
sentence, so a batch of long reviews holds hundreds of MB of tapes. ``checkpoint_sentences = true``
wraps every chunk of ``sentence_chunk`` sentences in ``torch.utils.checkpoint`` (non-reentrant, RNG
state preserved, so dropout masks are the same): the forward pass keeps only the sentence vectors,
and the backward pass recomputes one chunk at a time, so the peak holds one chunk's tapes instead of
all of them (``benchmarks/document_memory.py``). Loss and gradients are the same (tested).

**Batching** as the paper: documents with the same number of sentences (after ``max_sentences``) form
a bucket; training cuts each bucket, shuffled, into batches and shuffles all batches, by a generator
seeded from (``train.seed``, epoch); evaluation goes bucket by bucket in order.

**Labels and metrics.** ``labels = "stars"``: one class per rating value (aclImdb: 1-4 and 7-10, eight
classes; Tang: 1..the largest rating in the train file, 5 for Yelp, 10 for IMDB); ``"polarity"``:
negative (rating <= 4 on aclImdb; below the middle of the scale on Tang files) and positive. Metrics are
accuracy and, as in Tang et al. (2015) and the paper's Table 4, the mean squared error between the
*predicted class's* rating (the argmax class, not an expectation) and the gold rating; for polarity
the class values are 0 and 1, so its MSE is the error rate.

**Data.** ``dataset = "imdb-acl"``: ``imdb-acl/aclImdb_v1_train_test.tar.gz`` under the data root; the
test split is aclImdb's test set, and ``dev_fraction`` of its train set (chosen by review id,
:func:`memread.data.documents.dev_split`) is held out as "valid". ``dataset = "tang"``: the three
files ``tang_train``, ``tang_valid``, ``tang_test`` (paths under the data root).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Literal

import torch
from torch import Tensor, nn
from torch.utils.checkpoint import checkpoint

from memread.typed import from_dict
from memread.data.batching import Batches
from memread.data.documents import ACL_IMDB_FILE, ACL_IMDB_RATINGS, Document, dev_split, read_acl_imdb, read_tang
from memread.data.vocab import Vocab
from memread.errors import MemreadError
from memread.modules.word_embedding import WordEmbedding
from memread.readers import READERS, build_reader
from memread.tasks.base import ModelOutput
from memread.tasks.text_inputs import classification_stats, pool, vectors_path, vocabulary


@dataclass
class DocumentTaskConfig:
    name: Literal["document"] = "document"
    dataset: Literal["imdb-acl", "tang"] = "imdb-acl"
    labels: Literal["stars", "polarity"] = "stars"
    tang_train: str = "tang/imdb.train.txt.ss"  # Tang et al. files, relative to the data root
    tang_valid: str = "tang/imdb.dev.txt.ss"
    tang_test: str = "tang/imdb.test.txt.ss"
    dev_fraction: float = 0.1  # imdb-acl: share of its train set held out as "valid"
    emb: int = 100  # must equal the vectors' size when task.vectors is set
    vectors: str = ""  # GloVe-format file under the data root
    oov: Literal["zero", "gaussian"] = "zero"
    freeze: bool = False
    min_count: int = 1
    max_words: int = 50  # words kept per sentence (the first ones); 0 = no cap
    max_sentences: int = 40  # sentences kept per document (the first ones); 0 = no cap
    pool: Literal["mean", "last", "max"] = "last"  # sentence reader states -> sentence vector
    doc_pool: Literal["mean", "last", "max"] = "last"  # document reader states -> document vector
    doc_reader: str = "lstm"  # any reader name; built with doc_hidden and doc_layers
    doc_hidden: int = 100
    doc_layers: int = 1
    emb_dropout: float = 0.0  # on the word embeddings
    doc_dropout: float = 0.15  # on the sentence vectors, the document reader's input
    dropout: float = 0.2  # on the document vector, before the softmax layer
    checkpoint_sentences: bool = False  # recompute the sentence reader in the backward pass
    sentence_chunk: int = 64  # sentences per sentence-reader call (and per checkpoint)

    def __post_init__(self) -> None:
        for key in ("emb_dropout", "doc_dropout", "dropout"):
            if not 0.0 <= getattr(self, key) < 1.0:
                raise MemreadError(f"task.{key} must be in [0, 1), got {getattr(self, key)}")
        if self.doc_reader not in READERS:
            raise MemreadError(f"task.doc_reader must be one of {sorted(READERS)}, got {self.doc_reader!r}")
        if self.max_words < 0 or self.max_sentences < 0 or self.sentence_chunk < 1:
            raise MemreadError("task.max_words and task.max_sentences must be >= 0, task.sentence_chunk >= 1")
        if not 0.0 <= self.dev_fraction < 1.0:
            raise MemreadError(f"task.dev_fraction must be in [0, 1), got {self.dev_fraction}")

    def doc_reader_config(self):
        """The document-level reader's typed config (a reader without ``hidden``/``layers`` is refused)."""
        return from_dict(READERS[self.doc_reader].Config,
                         {"name": self.doc_reader, "hidden": self.doc_hidden, "layers": self.doc_layers},
                         "task.doc_reader", "task")


class HierarchicalClassifier(nn.Module):
    """Sentence reader -> document reader -> softmax. ``forward(batch)``: ``ids``, ``mask`` (B, S, W),
    ``sent_mask`` (B, S), ``label`` (B,) -> ModelOutput (logits (B, C); stats nll, correct, count, sq_err)."""

    def __init__(self, vocab_size: int, cfg: DocumentTaskConfig, sentence_reader: nn.Module, doc_reader: nn.Module,
                 pad_id: int, class_values: list[float]):
        super().__init__()
        if doc_reader.input_size != sentence_reader.output_size:
            raise MemreadError("the document reader must read the sentence reader's outputs")
        self.cfg = cfg
        self.embedding = WordEmbedding(vocab_size, cfg.emb, pad_id, cfg.freeze)
        self.emb_drop = nn.Dropout(cfg.emb_dropout)
        self.sentence_reader = sentence_reader
        self.doc_drop = nn.Dropout(cfg.doc_dropout)
        self.doc_reader = doc_reader
        self.out_drop = nn.Dropout(cfg.dropout)
        self.output = nn.Linear(doc_reader.output_size, len(class_values))
        self.register_buffer("class_values", torch.tensor(class_values, dtype=torch.float64), persistent=False)

    def _read_sentences(self, x: Tensor, mask: Tensor) -> Tensor:
        """x (N, W, E), mask (N, W) -> sentence vectors (N, H)."""
        return pool(self.sentence_reader(x, mask).states, mask, self.cfg.pool)

    def encode_sentences(self, ids: Tensor, mask: Tensor, sent_mask: Tensor) -> Tensor:
        """ids, mask (B, S, W), sent_mask (B, S) -> sentence vectors (B, S, H), zero at padded sentences."""
        B, S, W = ids.shape
        flat_ids, flat_mask = ids.reshape(B * S, W), mask.reshape(B * S, W)
        real = sent_mask.reshape(-1).nonzero().squeeze(1)  # (N,) real sentences
        lengths = flat_mask[real].sum(1)
        order = real[torch.argsort(lengths, stable=True)]  # shortest first: less padding per chunk
        out = None
        for start in range(0, len(order), self.cfg.sentence_chunk):
            rows = order[start : start + self.cfg.sentence_chunk]
            width = max(1, int(flat_mask[rows].sum(1).max()))
            m = flat_mask[rows, :width]  # (n, w)
            x = self.emb_drop(self.embedding(flat_ids[rows, :width]))  # (n, w, E)
            if self.cfg.checkpoint_sentences and torch.is_grad_enabled():
                v = checkpoint(self._read_sentences, x, m, use_reentrant=False)
            else:
                v = self._read_sentences(x, m)  # (n, H)
            if out is None:
                out = v.new_zeros(B * S, v.size(1))
            out = out.index_copy(0, rows, v)
        if out is None:
            raise MemreadError("a batch with no real sentence")
        return out.view(B, S, -1)

    def forward(self, batch: dict, state=None) -> ModelOutput:
        sent_mask = batch["sent_mask"]
        sentences = self.encode_sentences(batch["ids"], batch["mask"], sent_mask)  # (B, S, H)
        read = self.doc_reader(self.doc_drop(sentences), sent_mask)
        doc = pool(read.states, sent_mask, self.cfg.doc_pool)  # (B, H_doc)
        logits = self.output(self.out_drop(doc))  # (B, C)
        loss, stats = classification_stats(logits, batch["label"])
        stats["sq_err"] = rating_sq_error(logits, batch["label"], self.class_values)
        return ModelOutput(loss=loss, stats=stats, logits=logits)


def rating_sq_error(logits: Tensor, labels: Tensor, class_values: Tensor) -> Tensor:
    """Summed squared error between the argmax class's rating value and the gold class's (Table 4's MSE
    once divided by the count)."""
    values = class_values.to(logits.device)
    return ((values[logits.argmax(-1)] - values[labels]) ** 2).sum().detach()


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


# ----------------------------------------------------------------------------- the task


class DocumentTask:
    name = "document"
    Config = DocumentTaskConfig
    selection_metric = "accuracy"
    higher_is_better = True
    default_eval_batch_size = 32

    def __init__(self, cfg: DocumentTaskConfig, data_root: Path, vocab: Vocab | None = None,
                 documents: dict[str, list[Document]] | None = None):
        """``documents`` (split -> documents) replaces reading the files (tests)."""
        self.cfg = cfg
        self.data_root = Path(data_root)
        self._raw: dict[str, list[Document]] = dict(documents or {})
        self._docs: dict[str, list[Document]] = {}
        self._encoded: dict[str, list[tuple[list[list[int]], int]]] = {}
        self.ratings = self._ratings()
        self.class_values = ([0.0, 1.0] if cfg.labels == "polarity" else [float(r) for r in self.ratings])
        self.vectors: dict[str, list[float]] | None = None
        if vocab is None:
            path = vectors_path(self.data_root, cfg.vectors) if cfg.vectors else None
            others = (s for split in ("valid", "test") for d in self.documents(split) for s in self._sentences(d))
            train = (s for d in self.documents("train") for s in self._sentences(d))
            vocab, self.vectors = vocabulary(train, others, path, cfg.min_count)
        self.vocab = vocab

    # ------------------------------------------------------------------ data
    def _read(self, split: str) -> list[Document]:
        """The split as read (every rating), cached."""
        if split not in self._raw:
            if split not in ("train", "valid", "test"):
                raise MemreadError(f"unknown split {split!r}; expected train, valid or test")
            if self.cfg.dataset == "imdb-acl":
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
            if self.cfg.labels == "polarity":
                docs = [d for d in docs if d.rating != self._middle()]
            if not docs:
                raise MemreadError(f"task document: split {split!r} has no documents")
            self._docs[split] = docs
        return self._docs[split]

    def _ratings(self) -> list[int]:
        """The rating of every stars class, in class order."""
        if self.cfg.dataset == "imdb-acl":
            return list(ACL_IMDB_RATINGS)
        return list(range(1, max(d.rating for d in self._read("train")) + 1))

    def _middle(self) -> float:
        """Polarity: ratings below are negative, above positive (aclImdb: 5; Tang: the scale's middle)."""
        return 5 if self.cfg.dataset == "imdb-acl" else (self.ratings[-1] + 1) / 2

    def _sentences(self, doc: Document) -> list[tuple[str, ...]]:
        sents = doc.sentences[: self.cfg.max_sentences] if self.cfg.max_sentences else doc.sentences
        return [s[: self.cfg.max_words] for s in sents] if self.cfg.max_words else list(sents)

    def label(self, doc: Document) -> int:
        if self.cfg.labels == "polarity":
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

    def batches(self, split: str, batch_size: int, epoch: int = 0, seed: int = 0) -> Batches:
        enc = self.encoded(split)
        g = torch.Generator().manual_seed(seed * 1_000_003 + epoch) if split == "train" else None
        groups = sentence_buckets([len(d) for d, _ in enc], batch_size, g)
        return Batches(enc, groups, partial(collate_documents, pad_id=self.vocab.pad_id), epoch if split == "train" else None)

    # ------------------------------------------------------------------ model and metrics
    def build_model(self, reader_cfg) -> HierarchicalClassifier:
        sentence_reader = build_reader(reader_cfg, self.cfg.emb)
        doc_reader = build_reader(self.cfg.doc_reader_config(), sentence_reader.output_size)
        model = HierarchicalClassifier(len(self.vocab), self.cfg, sentence_reader, doc_reader,
                                       self.vocab.pad_id, self.class_values)
        if self.vectors is not None:
            model.embedding.load_vectors(self.vocab.itos, self.vectors, self.cfg.oov, seed=0)
        return model

    def summarize(self, stats: dict[str, float]) -> dict[str, float]:
        n = max(stats["count"], 1.0)
        return {"accuracy": stats["correct"] / n, "mse": stats["sq_err"] / n, "nll": stats["nll"] / n,
                "count": stats["count"]}

    def tokens_in(self, batch: dict) -> int:
        return int(batch["mask"].sum())
