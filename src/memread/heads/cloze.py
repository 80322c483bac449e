"""Cloze heads: shared word embeddings -> the ``[reader]`` over document and query -> an answer
distribution over each question's candidates.

- ``pointer`` (a memory reader): the reader's states over the document are its memory; the query
  state attends over them (bilinear) and the probability of a candidate is the attention summed over
  every position where it occurs (pointer-sum, :mod:`memread.modules.pointer_sum`).
- ``final_state`` (memoryless baseline): the reader reads the document and then the query, and the
  answer is predicted from its final state alone; nothing it read can be looked at again.
- ``as_reader``: the Attention-Sum Reader (Kadlec et al. 2016, :mod:`memread.heads.as_reader`).
- ``iaa``: iterative alternating attention (Sordoni et al. 2016, :mod:`memread.heads.iaa`); with
  ``fixed_query = true`` the uniform-query ablation.

``as_reader`` and ``iaa`` encode the query and the document with two readers of the ``[reader]``
config (one with ``share_encoder = true``) over shared embeddings, as both papers do; a bidirectional
torch RNN is built as ``BiRNNReader`` (the same network, exact under padding without packing, whose
CPU backward is O(T^2); see :mod:`memread.readers.birnn`). ``init = "paper"`` initialises as Sordoni
et al. section 4 (N(0, 0.05), orthogonal recurrent weights, zero biases); their embedding L2 penalty
is the criterion's (``[criterion] emb_l2``).

``model(batch)`` returns ``ModelOutput(logits=log P over the candidates (B, C), attention=the
answer's document attention (B, Td) for the pointer-sum heads, extra={"hits": (B, Td, C)}``: where
each candidate occurs); the loss is :mod:`memread.criteria.cloze`'s: by default the papers' pointer-sum
objective ``-log sum_{i in I(a, d)} s_i`` from ``attention`` and ``hits`` (the pointer-sum heads:
``answers_by_pointer_sum``), with ``[criterion] normalize = "candidates"`` the NLL of those logits
(renormalised over the candidates; the only form for ``final_state``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch.nn.functional as F
from torch import Tensor, nn

from memread.heads.base import ModelOutput
from memread.modules.attention import BilinearAttention
from memread.modules.masking import last_real
from memread.modules.pointer_sum import candidate_log_probs, occurrences
from memread.readers import build_reader
from memread.heads.as_reader import AttentionSumReader
from memread.readers.birnn import BiRNNReader
from memread.heads.iaa import IAAOutput, IterativeAlternatingAttention, paper_init_
from memread.readers.rnn import RNNReaderConfig
from memread.typed import DropoutRate, NonNegInt, PositiveInt

Init = Literal["torch", "paper"]  # "paper": Sordoni et al. section 4


@dataclass
class PointerHeadConfig:
    name: Literal["pointer"] = "pointer"
    emb: PositiveInt = 64
    dropout: DropoutRate = 0.0  # on the embeddings
    init: Init = "torch"


@dataclass
class FinalStateHeadConfig:
    name: Literal["final_state"] = "final_state"
    emb: PositiveInt = 64
    dropout: DropoutRate = 0.0  # on the embeddings and on the final state
    init: Init = "torch"


@dataclass
class ASReaderHeadConfig:
    name: Literal["as_reader"] = "as_reader"
    emb: PositiveInt = 64
    dropout: DropoutRate = 0.0  # on the embeddings
    init: Init = "torch"
    share_encoder: bool = False  # one reader for query and document


@dataclass
class IAAHeadConfig:
    """The iaa head, and the options of :class:`~memread.heads.iaa.IterativeAlternatingAttention`
    (this is its config: the options are written here only)."""

    name: Literal["iaa"] = "iaa"
    emb: PositiveInt = 64
    dropout: DropoutRate = 0.0  # on the embeddings, the search gates' input and the attentions' search inputs
    init: Init = "torch"
    share_encoder: bool = False  # one reader for query and document
    steps: PositiveInt = 8  # T, inference steps
    inference: PositiveInt = 512  # s, size of the inference GRU state
    gate_hidden: NonNegInt = 0  # hidden units of each search gate; 0 = the encoding size 2h
    fixed_query: bool = False  # ablation: uniform query attention q_{i,t} = 1/|Q|
    # the attention reads: "auto" = the compiled fused read (C++) for CPU float32/float64 where it builds, else
    # "function" (scores, masked softmax, glimpse in tensor ops; what a GPU runs); "compiled" = C++ or an error
    backend: Literal["auto", "compiled", "function"] = "auto"


ClozeHeadConfig = PointerHeadConfig | FinalStateHeadConfig | ASReaderHeadConfig | IAAHeadConfig


@dataclass
class ClozeReading:
    """What a cloze model read: log P over candidates, the answer's document attention, the IAA trace."""

    log_p: Tensor  # (B, C)
    attention: Tensor | None = None  # (B, Td)
    iaa: IAAOutput | None = None
    hits: Tensor | None = None  # (B, Td, C) position i holds candidate c


class ClozeModel(nn.Module):
    """Embeddings and the reader(s) every cloze head shares; each head's subclass adds the module that
    answers (under the attribute name checkpoints know it by) and its :meth:`read`."""

    answers_by_pointer_sum = True  # returns the document attention and hits (the criterion's "document" form)

    def __init__(self, vocab_size: int, cfg: ClozeHeadConfig, reader: nn.Module, pad_id: int,
                 query_reader: nn.Module | None = None):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, cfg.emb, padding_idx=pad_id)
        self.reader = reader  # reads the document (and, unless given its own, the query)
        self.query_reader = query_reader
        self.drop = nn.Dropout(cfg.dropout)

    def encode(self, batch: dict[str, Tensor]) -> tuple[Tensor, Tensor]:
        """Document and query encodings (B, Td, H), (B, Tq, H) from their own (or the shared) reader."""
        d = self.reader(self.drop(self.embedding(batch["doc"])), batch["doc_mask"]).states
        query_reader = self.query_reader if self.query_reader is not None else self.reader
        q = query_reader(self.drop(self.embedding(batch["query"])), batch["query_mask"]).states
        return d, q

    def pointer_sum(self, batch: dict[str, Tensor], attention: Tensor, iaa: IAAOutput | None = None) -> ClozeReading:
        """log P(a) of each candidate from the document attention (B, Td), summed over its occurrences."""
        hits = occurrences(batch["doc_words"], batch["doc_mask"], batch["cand_words"], batch["cand_mask"])  # (B, Td, C)
        return ClozeReading(candidate_log_probs(attention, hits, batch["cand_mask"]), attention, iaa, hits)

    def read(self, batch: dict[str, Tensor], trace: bool = False) -> ClozeReading:
        raise NotImplementedError

    def forward(self, batch: dict[str, Tensor], state=None, return_attention: bool = False) -> ModelOutput:
        reading = self.read(batch)
        extra = {} if reading.hits is None else {"hits": reading.hits}
        return ModelOutput(logits=reading.log_p, attention=reading.attention, extra=extra)


class PointerModel(ClozeModel):
    def __init__(self, vocab_size: int, cfg: PointerHeadConfig, reader: nn.Module, pad_id: int):
        super().__init__(vocab_size, cfg, reader, pad_id)
        self.attention = BilinearAttention(reader.output_size, reader.output_size)

    def read(self, batch: dict[str, Tensor], trace: bool = False) -> ClozeReading:
        d_states, q_states = self.encode(batch)
        query = last_real(q_states, batch["query_mask"])  # (B, H)
        return self.pointer_sum(batch, self.attention(query, d_states, batch["doc_mask"]))  # (B, Td)


class FinalStateModel(ClozeModel):
    answers_by_pointer_sum = False

    def __init__(self, vocab_size: int, cfg: FinalStateHeadConfig, reader: nn.Module, pad_id: int):
        super().__init__(vocab_size, cfg, reader, pad_id)
        self.out = nn.Linear(reader.output_size, vocab_size)

    def read(self, batch: dict[str, Tensor], trace: bool = False) -> ClozeReading:
        query_mask = batch["query_mask"]
        d = self.reader(self.drop(self.embedding(batch["doc"])), batch["doc_mask"])
        q = self.reader(self.drop(self.embedding(batch["query"])), query_mask, state=d.state)  # continue reading
        h = self.drop(last_real(q.states, query_mask))  # (B, H)
        scores = self.out(h).gather(1, batch["cands"]).masked_fill(~batch["cand_mask"], float("-inf"))  # (B, C)
        return ClozeReading(F.log_softmax(scores, dim=-1))


class ASReaderModel(ClozeModel):
    def __init__(self, vocab_size: int, cfg: ASReaderHeadConfig, reader: nn.Module, pad_id: int,
                 query_reader: nn.Module | None, bidirectional: bool):
        super().__init__(vocab_size, cfg, reader, pad_id, query_reader)
        self.as_reader = AttentionSumReader(bidirectional)

    def read(self, batch: dict[str, Tensor], trace: bool = False) -> ClozeReading:
        d_states, q_states = self.encode(batch)
        return self.pointer_sum(batch, self.as_reader(q_states, batch["query_mask"], d_states, batch["doc_mask"]))


class IAAModel(ClozeModel):
    def __init__(self, vocab_size: int, cfg: IAAHeadConfig, reader: nn.Module, pad_id: int,
                 query_reader: nn.Module | None):
        super().__init__(vocab_size, cfg, reader, pad_id, query_reader)
        self.iaa = IterativeAlternatingAttention(cfg, reader.output_size)

    def read(self, batch: dict[str, Tensor], trace: bool = False) -> ClozeReading:
        d_states, q_states = self.encode(batch)
        iaa = self.iaa(q_states, batch["query_mask"], d_states, batch["doc_mask"], trace=trace)
        return self.pointer_sum(batch, iaa.doc_attention, iaa)  # d_{i,T} (B, Td)


# ----------------------------------------------------------------------------- builders (reader(s) first, as before)


def build_encoder(reader_cfg, input_size: int) -> nn.Module:
    """The ``[reader]`` as an encoder of whole sequences (its states only): a bidirectional torch RNN
    as :class:`BiRNNReader` (no packing), any other reader from the registry."""
    if isinstance(reader_cfg, RNNReaderConfig) and reader_cfg.bidirectional:
        return BiRNNReader(reader_cfg, input_size)
    return build_reader(reader_cfg, input_size)


def _encoders(cfg: ASReaderHeadConfig | IAAHeadConfig, reader_cfg) -> tuple[nn.Module, nn.Module | None]:
    reader = build_encoder(reader_cfg, cfg.emb)
    return reader, None if cfg.share_encoder else build_encoder(reader_cfg, cfg.emb)


def _initialised(model: ClozeModel, cfg: ClozeHeadConfig) -> ClozeModel:
    if cfg.init == "paper":
        paper_init_(model)
    return model


def build_pointer_head(cfg: PointerHeadConfig, reader_cfg, pipeline) -> PointerModel:
    reader = build_reader(reader_cfg, cfg.emb)
    return _initialised(PointerModel(len(pipeline.vocab), cfg, reader, pipeline.vocab.pad_id), cfg)


def build_final_state_head(cfg: FinalStateHeadConfig, reader_cfg, pipeline) -> FinalStateModel:
    reader = build_reader(reader_cfg, cfg.emb)
    return _initialised(FinalStateModel(len(pipeline.vocab), cfg, reader, pipeline.vocab.pad_id), cfg)


def build_as_reader_head(cfg: ASReaderHeadConfig, reader_cfg, pipeline) -> ASReaderModel:
    reader, query_reader = _encoders(cfg, reader_cfg)
    bidirectional = bool(getattr(reader_cfg, "bidirectional", False))
    return _initialised(ASReaderModel(len(pipeline.vocab), cfg, reader, pipeline.vocab.pad_id, query_reader,
                                      bidirectional), cfg)


def build_iaa_head(cfg: IAAHeadConfig, reader_cfg, pipeline) -> IAAModel:
    reader, query_reader = _encoders(cfg, reader_cfg)
    return _initialised(IAAModel(len(pipeline.vocab), cfg, reader, pipeline.vocab.pad_id, query_reader), cfg)
