"""Two texts in, one decision out (``[head] name = "pair"``): SNLI and WikiQA with any reader as the
encoder. The pair is ``(first, second)`` (:mod:`memread.data.pipelines.pair`). Encoders (``encoder``):

- ``siamese``: one reader encodes both texts (NSE on SNLI, section 4.1);
- ``two``: two readers of the same ``[reader]`` config, one per text (the LSTMN paper's two LSTMs or
  LSTMNs, section 5.3);
- ``mma``: the reader encodes the first text; a second one of the same config with ``shared = 1``
  (MMA-NSE, eq. 7-15) reads the second text while reading and writing the first text's final memory
  (needs a reader with ``ReaderSpec.shared_memory``);
- ``attention``: ``two``, and the first text is summarised by attention over its reader's outputs
  ``{h^1_t}`` with respect to the second text's representation ``v``:
  ``u = sum_t alpha_t h^1_t``, ``alpha = softmax(w^T tanh(W_y h^1_t + W_h v))`` (the "LSTMs attention"
  baselines of both NSE tables, Rocktaschel et al. 2016 and Miao et al. 2016, with their readers);
- ``mma_attention``: ``mma`` with that attention over the first text's outputs (section 4.1,
  "MMA-NSE attention");
- ``shallow_fusion`` / ``deep_fusion``: the reader (one with a memory tape, ``ReaderSpec.memory_tape``:
  the LSTMN) reads the first text; an LSTMN decoder of the same ``hidden``
  (:class:`memread.heads.decoders.lstmn_fusion.LSTMNFusionDecoder`) reads the second conditioned on the
  first's tapes (the LSTMN paper's "LSTMN shallow / deep fusion", sections 4 and 5.3): shallow fusion
  attends to the first text's hidden tape RNNSearch-style, deep fusion also gates its attended memory
  tape into the decoder's memory (eq. 10-15). The second text is represented by the decoder's outputs:
  for deep fusion its hidden tape ``h_t``; for shallow fusion the outputs ``tanh(W_o [h_t; ctx_t])``
  that combine it with the attended first text (see that module).

Each text is pooled into one vector (``pool``: ``last`` = NSE's h_T, ``mean`` = the LSTMN's mean of
its hidden tape), and the classifier sees ``features``: ``nse`` = ``[u; v; |u - v|; u * v]`` (NSE,
following Bowman et al. 2016) or ``concat`` = ``[u; v]`` (LSTMN), through one ReLU layer (``mlp``:
1024 in both papers) to the data's outputs (``pipeline.outputs``): three SNLI classes, or one WikiQA
relevance score (eq. 16; the logits are then (B,)).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Literal

import torch
from torch import Tensor, nn

from memread.errors import MemreadError
from memread.heads.base import ModelOutput
from memread.heads.classifier import WordInputConfig, check_dropout, load_pretrained, mlp_classifier
from memread.modules.attention import AdditiveAttention
from memread.modules.pooling import pool
from memread.modules.word_embedding import WordEmbedding
from memread.readers import READERS, build_reader, readers_with
from memread.readers.base import attention_trace
from memread.heads.decoders.lstmn_fusion import FusionConfig, LSTMNFusionDecoder
from memread.typed import DropoutRate, PositiveInt

Encoder = Literal["siamese", "two", "attention", "mma", "mma_attention", "shallow_fusion", "deep_fusion"]


@dataclass
class PairHeadConfig(WordInputConfig):
    name: Literal["pair"] = "pair"
    encoder: Encoder = "siamese"
    features: Literal["nse", "concat"] = "nse"
    pool: Literal["mean", "last", "max"] = "last"
    mlp: PositiveInt = 1024  # units of the classifier's ReLU layer
    dropout: DropoutRate = 0.3  # before and after the ReLU layer

    def __post_init__(self) -> None:
        super().__post_init__()
        check_dropout(self.dropout)


MMA = ("mma", "mma_attention")
FUSION = {"shallow_fusion": "lstmn_shallow", "deep_fusion": "lstmn_deep"}  # encoder -> fusion decoder
# what an encoder needs of its reader (a ReaderSpec capability) and why
NEEDS = {**{e: ("shared_memory", "a second reader shares the first text's memory (MMA-NSE)") for e in MMA},
         **{e: ("memory_tape", "the fusion decoder reads the first text's memory tape") for e in FUSION}}


def check_reader(encoder: str, reader: str, where: str) -> None:
    """One clear error when ``reader`` lacks the capability that ``encoder`` needs."""
    if encoder not in NEEDS:
        return
    capability, why = NEEDS[encoder]
    if not getattr(READERS[reader], capability):
        raise MemreadError(f"{where}: head.encoder = {encoder!r} needs a reader with {capability} ({why}); "
                           f"reader.name = {reader!r} has none (use one of {', '.join(readers_with(capability))})")


@dataclass
class PairEncoding:
    u: Tensor  # (B, H) the first text
    v: Tensor  # (B, H) the second text
    attention: Tensor | None = None  # (B, T1) attention encoders: the weights over the first text
    trace: dict | None = None  # with return_attention: every weight the encoder has (PairEncoder.forward)


class PairEncoder(nn.Module):
    """Two texts' embeddings -> one vector each, by the ``encoder`` scheme above."""

    def __init__(self, encoder: str, how: str, first: nn.Module, second: nn.Module | None):
        super().__init__()
        self.encoder, self.how = encoder, how
        self.first = first
        self.second = second  # None: siamese
        self.attention = None
        if encoder in ("attention", "mma_attention"):
            H = first.output_size
            self.attention = AdditiveAttention(H, H, H)

    def forward(self, x1: Tensor, m1: Tensor, x2: Tensor, m2: Tensor, return_attention: bool = False) -> PairEncoding:
        """With ``return_attention`` the encoding's ``trace`` holds, where the encoder has them: ``first``
        (B, T1, S1) and ``second`` (B, T2, S2) each reader's own weights (with ``first_layers``/``second_layers``
        for a deep LSTMN; see :func:`memread.readers.base.attention_trace`); ``second_shared``: [(B, T2, T1)]
        MMA-NSE's keys over the first text's memory; for the fusion decoders ``second`` is the intra-attention
        over the second text's tape and ``inter`` (B, T2, T1) the inter-attention over the first's; ``pooling``
        (B, T1) the attention encoders' weights."""
        traced = {"return_attention": True} if return_attention else {}
        trace: dict | None = {} if return_attention else None
        if self.encoder in FUSION:  # the decoder reads the second text over the first's tapes (Y, A)
            r1 = self.first(x1, m1, return_cells=self.encoder == "deep_fusion", **traced)
            cells = r1.state["cells"] if self.encoder == "deep_fusion" else None
            r2 = self.second(x2, m2, r1.memory, cells, m1, **traced)
            if trace is not None:
                trace.update(attention_trace(r1, "first"))
                trace.update({"second": r2.state["intra_attention"], "inter": r2.attention})
            return PairEncoding(pool(r1.states, m1, self.how), pool(r2.states, m2, self.how), trace=trace)
        r1 = self.first(x1, m1, **traced)
        second = self.second if self.second is not None else self.first
        shared = {"shared": [(r1.memory, m1)]} if self.encoder in MMA else {}
        r2 = second(x2, m2, **shared, **traced)
        if trace is not None:
            trace.update({**attention_trace(r1, "first"), **attention_trace(r2, "second")})
        v = pool(r2.states, m2, self.how)
        if self.attention is not None:
            alpha = self.attention(v, r1.states, m1)  # (B, T1)
            u = torch.bmm(alpha.unsqueeze(1), r1.states).squeeze(1)  # (B, H)
            if trace is not None:
                trace["pooling"] = alpha
            return PairEncoding(u, v, alpha, trace)
        return PairEncoding(pool(r1.states, m1, self.how), v, trace=trace)


def pair_features(u: Tensor, v: Tensor, kind: str) -> Tensor:
    if kind == "nse":
        return torch.cat([u, v, (u - v).abs(), u * v], dim=-1)  # (B, 4H)
    return torch.cat([u, v], dim=-1)  # (B, 2H)


class PairClassifier(nn.Module):
    def __init__(self, vocab_size: int, cfg: PairHeadConfig, encoder: PairEncoder, pad_id: int, outputs: int):
        super().__init__()
        self.features = cfg.features
        self.embedding = WordEmbedding(vocab_size, cfg.emb, pad_id, cfg.freeze, cfg.first_epoch_scale)
        self.drop = nn.Dropout(cfg.emb_dropout)
        self.encoder = encoder
        H = encoder.first.output_size
        self.classifier = mlp_classifier((4 if cfg.features == "nse" else 2) * H, cfg.mlp, outputs, cfg.dropout)
        self.score = outputs == 1  # one relevance score per pair: logits (B,)

    def encode(self, batch: dict, return_attention: bool = False) -> PairEncoding:
        x1 = self.drop(self.embedding(batch["first"]))  # (B, T1, E)
        x2 = self.drop(self.embedding(batch["second"]))  # (B, T2, E)
        return self.encoder(x1, batch["first_mask"], x2, batch["second_mask"], return_attention)

    def forward(self, batch: dict, state=None, return_attention: bool = False) -> ModelOutput:
        """With ``return_attention`` the output's ``attention`` is the encoder's trace, a dict of named weights
        (:meth:`PairEncoder.forward`)."""
        enc = self.encode(batch, return_attention)
        logits = self.classifier(pair_features(enc.u, enc.v, self.features))  # (B, C) or (B, 1)
        return ModelOutput(logits=logits.squeeze(-1) if self.score else logits, attention=enc.trace)


def build_pair_head(cfg: PairHeadConfig, reader_cfg, pipeline) -> PairClassifier:
    check_reader(cfg.encoder, reader_cfg.name, "[head]")
    # the readers are drawn first, then the attention, the embedding and the classifier (the order every
    # pinned run used)
    if cfg.encoder in MMA:
        first = build_reader(dataclasses.replace(reader_cfg, shared=0), cfg.emb)
        second = build_reader(dataclasses.replace(reader_cfg, shared=1), cfg.emb)
    elif cfg.encoder in FUSION:
        first = build_reader(reader_cfg, cfg.emb)
        second = LSTMNFusionDecoder(FusionConfig(FUSION[cfg.encoder], hidden=reader_cfg.hidden,
                                                 tape_start=getattr(reader_cfg, "tape_start", "empty")), cfg.emb, first.output_size)
    else:
        first = build_reader(reader_cfg, cfg.emb)
        second = build_reader(reader_cfg, cfg.emb) if cfg.encoder != "siamese" else None
    encoder = PairEncoder(cfg.encoder, cfg.pool, first, second)
    model = PairClassifier(len(pipeline.vocab), cfg, encoder, pipeline.vocab.pad_id, pipeline.outputs)
    load_pretrained(model.embedding, pipeline, cfg.oov)
    return model
