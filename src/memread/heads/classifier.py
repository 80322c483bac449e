"""Sentence classification with any reader as the encoder (``[head] name = "mlp"``)::

    ids -> embedding (GloVe rows, frozen or trained) -> reader -> pool over real tokens
        -> dropout -> ReLU layer (``mlp`` units) -> dropout -> one output per class

as both papers build it: NSE section 4.3 (its final output h_T, ``pool = "last"``, a 1024- or
300-unit ReLU layer, fixed GloVe vectors) and LSTMN section 5.2 (the mean of the hidden tape,
``pool = "mean"``, GloVe rows whose gradient is scaled by 0.35 in the first epoch,
``first_epoch_scale = 0.35``). The number of classes comes from the data (``pipeline.outputs``);
the loss is :class:`memread.criteria.classification.CrossEntropy`'s.

Also the parts the pair head shares: the word-input options (:class:`WordInputConfig`), loading the
pipeline's pretrained vectors, and the MLP classifier of both papers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from torch import Tensor, nn

from memread.errors import MemreadError
from memread.heads.base import ModelOutput
from memread.modules.pooling import pool
from memread.modules.word_embedding import WordEmbedding
from memread.readers import build_reader
from memread.readers.base import attention_trace
from memread.typed import DropoutRate, NonNegFloat, PositiveInt


@dataclass
class WordInputConfig:
    """The ``[head]`` keys of the word input of the text heads (classifier and pair)."""

    emb: PositiveInt = 300  # must equal the vectors' size when data.vectors is set
    oov: Literal["zero", "gaussian"] = "zero"  # rows of words without a pretrained vector
    freeze: bool = False  # keep the embedding fixed (NSE)
    first_epoch_scale: NonNegFloat = 1.0  # gradient scale of pretrained rows in the first epoch (LSTMN: SST 0.35, SNLI 0.0)
    emb_dropout: DropoutRate = 0.0

    def __post_init__(self) -> None:
        if self.freeze and self.first_epoch_scale != 1.0:
            raise MemreadError("head.first_epoch_scale has no effect with head.freeze = true; set one of them")
        if not 0.0 <= self.emb_dropout < 1.0:
            raise MemreadError(f"head.emb_dropout must be in [0, 1), got {self.emb_dropout}")


def check_dropout(dropout: float) -> None:
    if not 0.0 <= dropout < 1.0:
        raise MemreadError(f"head.dropout must be in [0, 1), got {dropout}")


@dataclass
class MLPHeadConfig(WordInputConfig):
    name: Literal["mlp"] = "mlp"
    pool: Literal["mean", "last", "max"] = "mean"
    mlp: PositiveInt = 300  # units of the classifier's ReLU layer
    dropout: DropoutRate = 0.5  # before and after the ReLU layer

    def __post_init__(self) -> None:
        super().__post_init__()
        check_dropout(self.dropout)


def mlp_classifier(in_size: int, hidden: int, outputs: int, dropout: float) -> nn.Sequential:
    """Both papers' classifier: dropout, a ReLU layer of ``hidden`` units, dropout, the output layer
    (softmax or, with ``outputs = 1``, sigmoid, applied by the criterion)."""
    return nn.Sequential(nn.Dropout(dropout), nn.Linear(in_size, hidden), nn.ReLU(), nn.Dropout(dropout),
                         nn.Linear(hidden, outputs))


def load_pretrained(embedding: WordEmbedding, pipeline, oov: str) -> None:
    """The pipeline's pretrained vectors into ``embedding`` (none when the pipeline read none: no vector
    file, or a trained run's own vocabulary whose checkpoint holds the embedding)."""
    if getattr(pipeline, "vectors", None) is not None:
        embedding.load_vectors(pipeline.vocab.itos, pipeline.vectors, oov, seed=0)


class SentenceClassifier(nn.Module):
    def __init__(self, vocab_size: int, cfg: MLPHeadConfig, reader: nn.Module, pad_id: int, classes: int):
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
        """``attention`` (with ``return_attention``): the reader's weights (B, T, S); a deep LSTMN's every layer
        in ``extra["attention_layers"]`` (B, L, T, S)."""
        read = self.encode(batch["ids"], batch["mask"], return_attention)
        logits = self.classifier(pool(read.states, batch["mask"], self.pool))  # (B, C)
        extra = {k: v for k, v in attention_trace(read).items() if k == "attention_layers"} if return_attention else {}
        return ModelOutput(logits=logits, attention=read.attention, extra=extra)


def build_mlp_head(cfg: MLPHeadConfig, reader_cfg, pipeline) -> SentenceClassifier:
    # the reader is drawn before the embedding and the classifier (the order every pinned run used)
    model = SentenceClassifier(len(pipeline.vocab), cfg, build_reader(reader_cfg, cfg.emb), pipeline.vocab.pad_id,
                               pipeline.outputs)
    load_pretrained(model.embedding, pipeline, cfg.oov)
    return model
