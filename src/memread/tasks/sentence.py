"""Sentence classification (the Stanford Sentiment Treebank) with any reader as the encoder.

    ids -> embedding (GloVe rows, frozen or trained) -> reader -> pool over real tokens
        -> dropout -> ReLU layer (``mlp`` units) -> dropout -> softmax over the classes

as both papers build it: NSE section 4.3 (its final output h_T, ``pool = "last"``, a 1024- or
300-unit ReLU layer, fixed GloVe vectors, training on every labelled phrase with ``phrases = true``)
and LSTMN section 5.2 (the mean of the hidden tape, ``pool = "mean"``, GloVe rows whose gradient is
scaled by 0.35 in the first epoch, ``first_epoch_scale = 0.35``).

``fine = true``: five classes; ``fine = false``: binary, neutral sentences (and phrases) removed.
Evaluation is always on whole sentences of the dev ("valid") and test trees.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Literal

import torch
from torch import Tensor, nn

from memread.data.batching import Batches, batch_order, pad
from memread.data.sst import SentimentExample, read_sst, sst_path
from memread.data.vocab import Vocab
from memread.errors import MemreadError
from memread.modules.word_embedding import WordEmbedding
from memread.readers import build_reader
from memread.tasks.base import ModelOutput
from memread.tasks.text_inputs import classification_stats, mlp_classifier, pool, vectors_path, vocabulary


@dataclass
class SentenceTaskConfig:
    name: Literal["classify"] = "classify"
    dataset: Literal["sst"] = "sst"  # sst/{train,dev,test}.txt(.gz) under the data root
    fine: bool = True  # five classes; false = binary with neutral removed
    phrases: bool = False  # train on every labelled phrase (NSE), not only whole sentences
    emb: int = 300  # must equal the vectors' size when task.vectors is set
    vectors: str = ""  # GloVe-format file under the data root, e.g. "glove/glove.6B.50d.txt.gz"
    oov: Literal["zero", "gaussian"] = "zero"  # rows of words without a vector
    freeze: bool = False  # keep the embedding fixed (NSE)
    first_epoch_scale: float = 1.0  # gradient scale of pretrained rows in the first epoch (LSTMN: 0.35)
    lowercase: bool = True  # GloVe 6B is uncased
    emb_dropout: float = 0.0
    pool: Literal["mean", "last", "max"] = "mean"
    mlp: int = 300  # units of the classifier's ReLU layer
    dropout: float = 0.5  # before and after the ReLU layer
    min_count: int = 1
    bucket: int = 0  # sort by length within pools of this many batches; 0 = no sorting

    def __post_init__(self) -> None:
        if self.freeze and self.first_epoch_scale != 1.0:
            raise MemreadError("task.first_epoch_scale has no effect with task.freeze = true; set one of them")
        if not 0.0 <= self.dropout < 1.0 or not 0.0 <= self.emb_dropout < 1.0:
            raise MemreadError("task.dropout and task.emb_dropout must be in [0, 1)")


class SentenceClassifier(nn.Module):
    def __init__(self, vocab_size: int, cfg: SentenceTaskConfig, reader: nn.Module, pad_id: int, classes: int):
        super().__init__()
        self.embedding = WordEmbedding(vocab_size, cfg.emb, pad_id, cfg.freeze, cfg.first_epoch_scale)
        self.drop = nn.Dropout(cfg.emb_dropout)
        self.reader = reader
        self.pool = cfg.pool
        self.classifier = mlp_classifier(reader.output_size, cfg.mlp, classes, cfg.dropout)

    def encode(self, ids: Tensor, mask: Tensor, return_attention: bool = False):
        """(B, T) ids -> the reader's output over them."""
        return self.reader(self.drop(self.embedding(ids)), mask, return_attention=return_attention)

    def forward(self, batch: dict, state=None, return_attention: bool = False) -> ModelOutput:
        if self.training and "epoch" in batch:
            self.embedding.set_epoch(batch["epoch"])
        read = self.encode(batch["ids"], batch["mask"], return_attention)
        logits = self.classifier(pool(read.states, batch["mask"], self.pool))  # (B, C)
        loss, stats = classification_stats(logits, batch["label"])
        return ModelOutput(loss=loss, stats=stats, logits=logits, attention=read.attention)


def collate_sentences(items: list[tuple[list[int], int]], pad_id: int) -> dict:
    ids, mask = pad([ids for ids, _ in items], pad_id)
    return {"ids": ids, "mask": mask, "label": torch.tensor([y for _, y in items], dtype=torch.long)}


class SentenceTask:
    name = "classify"
    Config = SentenceTaskConfig
    selection_metric = "accuracy"
    higher_is_better = True
    default_eval_batch_size = 128

    def __init__(self, cfg: SentenceTaskConfig, data_root: Path, vocab: Vocab | None = None,
                 examples: dict[str, list[SentimentExample]] | None = None):
        """``vocab`` given (a resumed or loaded run): the vectors are not read again, the checkpoint
        holds the embedding. ``examples`` (split -> examples) replaces reading the files (tests)."""
        self.cfg = cfg
        self.data_root = Path(data_root)
        self.classes = 5 if cfg.fine else 2
        self._examples: dict[str, list[SentimentExample]] = dict(examples or {})
        self._encoded: dict[str, list[tuple[list[int], int]]] = {}
        self.vectors: dict[str, list[float]] | None = None
        if vocab is None:
            path = vectors_path(self.data_root, cfg.vectors) if cfg.vectors else None
            others = [self._words(e) for s in ("valid", "test") for e in self.examples(s)]
            vocab, self.vectors = vocabulary((self._words(e) for e in self.examples("train")), others, path, cfg.min_count)
        self.vocab = vocab

    def _words(self, ex: SentimentExample) -> list[str]:
        return [w.lower() for w in ex.tokens] if self.cfg.lowercase else list(ex.tokens)

    def examples(self, split: str) -> list[SentimentExample]:
        if split not in self._examples:
            phrases = self.cfg.phrases and split == "train"
            self._examples[split] = read_sst(sst_path(self.data_root, split), fine=self.cfg.fine, phrases=phrases)
            if not self._examples[split]:
                raise MemreadError(f"{sst_path(self.data_root, split)}: no examples")
        return self._examples[split]

    def batches(self, split: str, batch_size: int, epoch: int = 0, seed: int = 0) -> Batches:
        if split not in self._encoded:
            self._encoded[split] = [(self.vocab.encode(self._words(e)), e.label) for e in self.examples(split)]
        enc = self._encoded[split]
        g = torch.Generator().manual_seed(seed * 1_000_003 + epoch) if split == "train" else None
        groups = batch_order([len(ids) for ids, _ in enc], batch_size, self.cfg.bucket, g)
        return Batches(enc, groups, partial(collate_sentences, pad_id=self.vocab.pad_id), epoch if split == "train" else None)

    def build_model(self, reader_cfg) -> SentenceClassifier:
        model = SentenceClassifier(len(self.vocab), self.cfg, build_reader(reader_cfg, self.cfg.emb),
                                   self.vocab.pad_id, self.classes)
        if self.vectors is not None:
            model.embedding.load_vectors(self.vocab.itos, self.vectors, self.cfg.oov, seed=0)
        return model

    def summarize(self, stats: dict[str, float]) -> dict[str, float]:
        n = max(stats["count"], 1.0)
        return {"accuracy": stats["correct"] / n, "nll": stats["nll"] / n, "count": stats["count"]}

    def tokens_in(self, batch: dict) -> int:
        return int(batch["mask"].sum())
