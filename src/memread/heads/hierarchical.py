"""The hierarchical document head (NSE paper, section 4.4)::

    ids (B, S, W) -> embedding -> sentence reader ([reader]) over each real sentence -> pool
        -> sentence vectors (B, S, H) -> dropout (doc_dropout) -> document reader (doc_reader)
        -> pool over real sentences -> dropout (dropout) -> logits over the rating classes (B, C)

trained jointly end to end (the loss is :mod:`memread.criteria.document`'s). Any reader of the common
interface can sit at either level (the paper: NSE-NSE and NSE-LSTM; ``configs/imdb/``).

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
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.utils.checkpoint import checkpoint

from memread.errors import MemreadError
from memread.heads.base import ModelOutput
from memread.modules.pooling import pool
from memread.modules.word_embedding import WordEmbedding
from memread.readers import READERS, build_reader
from memread.readers.base import attention_trace
from memread.typed import DropoutRate, PositiveInt, from_dict


@dataclass
class HierarchicalHeadConfig:
    name: Literal["hierarchical"] = "hierarchical"
    emb: PositiveInt = 100  # must equal the vectors' size when data.vectors is set
    oov: Literal["zero", "gaussian"] = "zero"  # rows of words without a pretrained vector
    freeze: bool = False
    pool: Literal["mean", "last", "max"] = "last"  # sentence reader states -> sentence vector
    doc_pool: Literal["mean", "last", "max"] = "last"  # document reader states -> document vector
    doc_reader: str = "lstm"  # any reader name; built with doc_hidden and doc_layers
    doc_hidden: PositiveInt = 100
    doc_layers: PositiveInt = 1
    emb_dropout: DropoutRate = 0.0  # on the word embeddings
    doc_dropout: DropoutRate = 0.15  # on the sentence vectors, the document reader's input
    dropout: DropoutRate = 0.2  # on the document vector, before the softmax layer
    checkpoint_sentences: bool = False  # recompute the sentence reader in the backward pass
    sentence_chunk: PositiveInt = 64  # sentences per sentence-reader call (and per checkpoint)

    def __post_init__(self) -> None:
        for key in ("emb_dropout", "doc_dropout", "dropout"):
            if not 0.0 <= getattr(self, key) < 1.0:
                raise MemreadError(f"head.{key} must be in [0, 1), got {getattr(self, key)}")
        if self.doc_reader not in READERS:
            raise MemreadError(f"head.doc_reader must be one of {sorted(READERS)}, got {self.doc_reader!r}")
        if self.sentence_chunk < 1:
            raise MemreadError(f"head.sentence_chunk must be >= 1, got {self.sentence_chunk}")

    def doc_reader_config(self, where: str = "head"):
        """The document-level reader's typed config (a reader without ``hidden``/``layers`` is refused)."""
        return from_dict(READERS[self.doc_reader].Config,
                         {"name": self.doc_reader, "hidden": self.doc_hidden, "layers": self.doc_layers},
                         "head.doc_reader", where)


class HierarchicalClassifier(nn.Module):
    """Sentence reader -> document reader -> output layer. ``forward(batch)``: ``ids``, ``mask`` (B, S, W),
    ``sent_mask`` (B, S) -> ModelOutput (logits (B, C))."""

    def __init__(self, vocab_size: int, cfg: HierarchicalHeadConfig, sentence_reader: nn.Module,
                 doc_reader: nn.Module, pad_id: int, classes: int):
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
        self.output = nn.Linear(doc_reader.output_size, classes)

    def _read_sentences(self, x: Tensor, mask: Tensor) -> Tensor:
        """x (N, W, E), mask (N, W) -> sentence vectors (N, H)."""
        return pool(self.sentence_reader(x, mask).states, mask, self.cfg.pool)

    def encode_sentences(self, ids: Tensor, mask: Tensor, sent_mask: Tensor, trace: dict | None = None) -> Tensor:
        """ids, mask (B, S, W), sent_mask (B, S) -> sentence vectors (B, S, H), zero at padded sentences.
        ``trace``: a dict that gets the sentence reader's weights of every sentence, ``sentences`` (B, S, W, W)
        (and ``sentences_layers`` (B, S, L, W, W) for a deep LSTMN), zero at padding, where it has them."""
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
            if trace is not None:  # the same reading, its weights kept
                read = self.sentence_reader(x, m, return_attention=True)
                v = pool(read.states, m, self.cfg.pool)
                for name, weights in attention_trace(read, "sentences").items():
                    if torch.is_tensor(weights):  # (n, .., w, w) -> (B * S, .., W, W)
                        if name not in trace:
                            trace[name] = weights.new_zeros(B * S, *weights.shape[1:-2], W, W)
                        trace[name] = trace[name].index_copy(0, rows, F.pad(weights, (0, W - width, 0, W - width)))
            elif self.cfg.checkpoint_sentences and torch.is_grad_enabled():
                v = checkpoint(self._read_sentences, x, m, use_reentrant=False)
            else:
                v = self._read_sentences(x, m)  # (n, H)
            if out is None:
                out = v.new_zeros(B * S, v.size(1))
            out = out.index_copy(0, rows, v)
        if out is None:
            raise MemreadError("a batch with no real sentence")
        if trace is not None:
            trace.update({name: w.view(B, S, *w.shape[1:]) for name, w in trace.items()})
        return out.view(B, S, -1)

    def forward(self, batch: dict, state=None, return_attention: bool = False) -> ModelOutput:
        """With ``return_attention`` the output's ``attention`` is a dict, where the readers have weights:
        ``sentences`` (B, S, W, W) each sentence's reader over its words (NSE: z_t over the sentence's memory),
        ``document`` (B, S, S) the document reader's over the sentences (and ``*_layers`` for a deep LSTMN)."""
        sent_mask = batch["sent_mask"]
        trace: dict | None = {} if return_attention else None
        sentences = self.encode_sentences(batch["ids"], batch["mask"], sent_mask, trace)  # (B, S, H)
        read = self.doc_reader(self.doc_drop(sentences), sent_mask,
                               **({"return_attention": True} if return_attention else {}))
        if trace is not None:
            trace.update({k: v for k, v in attention_trace(read, "document").items() if torch.is_tensor(v)})
        doc = pool(read.states, sent_mask, self.cfg.doc_pool)  # (B, H_doc)
        return ModelOutput(logits=self.output(self.out_drop(doc)), attention=trace)  # (B, C)


def build_hierarchical_head(cfg: HierarchicalHeadConfig, reader_cfg, pipeline) -> HierarchicalClassifier:
    """The sentence reader, then the document reader, then the classifier around them (this order draws
    the parameters after the seed); pretrained rows from the pipeline's vectors."""
    sentence_reader = build_reader(reader_cfg, cfg.emb)
    doc_reader = build_reader(cfg.doc_reader_config(), sentence_reader.output_size)
    model = HierarchicalClassifier(len(pipeline.vocab), cfg, sentence_reader, doc_reader, pipeline.vocab.pad_id,
                                   len(pipeline.class_values))
    if pipeline.vectors is not None:
        model.embedding.load_vectors(pipeline.vocab.itos, pipeline.vectors, cfg.oov, seed=0)
    return model
