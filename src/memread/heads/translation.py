"""Encoder-decoder heads for translation: the ``[reader]`` is the encoder, the head chooses the decoder.

    source ids -> embedding (GloVe rows, frozen) -> input dropout -> encoder (the [reader])
    target ids <s> y_1 .. y_n -> embedding (learned) -> input dropout -> decoder (teacher forcing,
        reading the encoder's states, memory or tapes) -> output dropout -> logits over y_1 .. y_n </s>

``model(batch)`` returns the logits (B, T, V) (the loss is :class:`memread.criteria.translation.TokenNLL`'s);
``start``/``step``/``reorder`` are the model protocol of :mod:`memread.decoding` (greedy decoding and
beam search, incremental for every decoder). The NSE paper's IWSLT14 models (Munkhdalai & Yu 2016,
section 4.5) and the LSTMN paper's fusion decoders (Cheng et al. 2016, section 4):

- ``attention_decoder``: an LSTM (``decoder_layers``, ``hidden`` = ``reader.hidden``) with additive
  attention over the encoder's output states (:mod:`memread.heads.decoders.attention`), optional input
  feeding. With ``reader.name = "lstm"``: the paper's LSTMs-LSTMs (RNNSearch-like); ``"nse"``: NSE-LSTMs.
- ``nse_decoder``: an NSE that reads and writes the encoder's final memory (shared memory access) and
  has no memory of its own (:mod:`memread.heads.decoders.nse`); with an NSE encoder, the paper's
  NSE-NSE. The encoder must return a memory (``ReaderOutput.memory``: one slot per source word); the
  decoder's slots are the encoder's output size, its read/write LSTMs have ``reader.layers`` layers
  and ``reader.dropout``.
- ``lstmn_shallow`` / ``lstmn_deep``: an LSTMN decoder with shallow or deep attention fusion
  (:mod:`memread.heads.decoders.lstmn_fusion`, ``hidden`` = ``reader.hidden``) over an encoder with a memory
  tape (``ReaderSpec.memory_tape``: the LSTMN): its top-layer hidden tape is the source states, its
  memory tape the ``source_cells`` that deep fusion gates into the target memory.

Parameter names (checkpoints): ``src_embedding``, ``tgt_embedding``, ``encoder``, ``decoder``, ``out``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch.nn.functional as F
from torch import Tensor, nn

from memread.data.pipelines.translation import BOS, EOS
from memread.data.vocab import Vocab
from memread.errors import MemreadError
from memread.heads.base import ModelOutput
from memread.modules.word_embedding import WordEmbedding
from memread.readers import build_reader
from memread.readers.base import attention_trace
from memread.heads.decoders.attention import AttentionDecoderConfig, AttentionLSTMDecoder
from memread.heads.decoders.lstmn_fusion import FusionConfig, LSTMNFusionDecoder
from memread.heads.decoders.nse import NSEDecoder, NSEDecoderConfig
from memread.typed import DropoutRate, PositiveInt


@dataclass
class TranslatorConfig:
    """The keys every translation head has (the embeddings and dropouts around encoder and decoder); each
    head's class below names itself (``name`` stays the first field)."""

    name: str = ""
    emb: PositiveInt = 300  # source embedding size; must equal the vectors' size when data.vectors is set
    tgt_emb: PositiveInt = 300  # target embedding size (a learned lookup table)
    freeze: bool = False  # keep the source embedding fixed (the paper: fixed GloVe vectors); needs data.vectors
    oov: Literal["zero", "gaussian"] = "zero"  # source rows without a vector (with data.vectors)
    input_dropout: DropoutRate = 0.2  # on the source and target embeddings
    output_dropout: DropoutRate = 0.3  # on the decoder's output states, before the softmax layer

    def __post_init__(self) -> None:
        if not 0.0 <= self.input_dropout < 1.0 or not 0.0 <= self.output_dropout < 1.0:
            raise MemreadError("head.input_dropout and head.output_dropout must be in [0, 1)")


@dataclass
class AttentionDecoderHeadConfig(TranslatorConfig):
    name: Literal["attention_decoder"] = "attention_decoder"
    decoder_layers: PositiveInt = 2  # of the LSTM decoder
    input_feeding: bool = False  # feed h~_{t-1} into the LSTM with y_t (off: the LSTM runs fused over the target)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.decoder_layers < 1:
            raise MemreadError(f"head.decoder_layers must be >= 1, got {self.decoder_layers}")


@dataclass
class NSEDecoderHeadConfig(TranslatorConfig):
    name: Literal["nse_decoder"] = "nse_decoder"


@dataclass
class FusionHeadConfig(TranslatorConfig):
    name: Literal["lstmn_shallow", "lstmn_deep"] = "lstmn_shallow"


class Translator(nn.Module):
    """Encoder-decoder: ``forward(batch)`` is teacher forcing; ``start``/``step``/``reorder`` are the
    model protocol of :mod:`memread.decoding`. ``reads``: what the decoder reads of the encoder,
    ``"states"`` (its outputs), ``"memory"`` (its final memory) or ``"tape"`` (its hidden and memory tapes)."""

    def __init__(self, cfg: TranslatorConfig, encoder: nn.Module, decoder: nn.Module, reads: str,
                 src_vocab: Vocab, tgt_vocab: Vocab, reader_name: str = ""):
        super().__init__()
        self.src_embedding = WordEmbedding(len(src_vocab), cfg.emb, src_vocab.pad_id, cfg.freeze)
        self.tgt_embedding = nn.Embedding(len(tgt_vocab), cfg.tgt_emb, padding_idx=tgt_vocab.pad_id)
        self.encoder, self.decoder, self.reads = encoder, decoder, reads
        self.drop_in = nn.Dropout(cfg.input_dropout)
        self.drop_out = nn.Dropout(cfg.output_dropout)
        self.out = nn.Linear(decoder.output_size, len(tgt_vocab))
        self.pad_id, self.bos_id, self.eos_id = tgt_vocab.pad_id, tgt_vocab.stoi[BOS], tgt_vocab.stoi[EOS]
        self.reader_name = reader_name or type(encoder).__name__

    def encode(self, src: Tensor, src_mask: Tensor, trace: dict | None = None) -> tuple[Tensor, Tensor | None]:
        """(B, S) ids -> what the decoder reads: the encoder's states (B, S, H), or with ``reads =
        "memory"`` its final memory, and the memory tape (``reads = "tape"``) or None. ``trace``: a dict
        that gets the encoder's weights (``encoder`` (B, S, S), ``encoder_layers``; see
        :func:`memread.readers.base.attention_trace`), where it has them."""
        x = self.drop_in(self.src_embedding(src))
        traced = {"return_attention": True} if trace is not None else {}
        if self.reads == "tape":  # an LSTMN encoder: its top layer's hidden and memory tapes
            enc = self.encoder(x, src_mask, return_cells=True, **traced)
            if trace is not None:
                trace.update(attention_trace(enc, "encoder"))
            return enc.states, enc.state["cells"]
        enc = self.encoder(x, src_mask, **traced)
        if trace is not None:
            trace.update(attention_trace(enc, "encoder"))
        if self.reads == "memory":
            if enc.memory is None or enc.memory.shape[:2] != src.shape:
                raise MemreadError(f"head 'nse_decoder' reads and writes the encoder's final memory (one slot per "
                                   f"source word); reader '{self.reader_name}' returns "
                                   f"{'none' if enc.memory is None else 'a memory of another length'}")
            return enc.memory, None
        return enc.states, None

    def forward(self, batch: dict, state=None, return_attention: bool = False) -> ModelOutput:
        """Teacher forcing. With ``return_attention`` the output's ``attention`` is a dict: ``source`` (B, T, S)
        the decoder's weights over the source at each target step (:mod:`memread.decoding`'s trace, for the
        given target), ``target`` (B, T, T) the fusion decoders' intra-attention, ``encoder`` (B, S, S) and
        ``encoder_layers`` where the encoder returns attention."""
        src, src_mask = batch["src"], batch["src_mask"]
        trace: dict | None = {} if return_attention else None
        source, cells = self.encode(src, src_mask, trace)
        y = self.drop_in(self.tgt_embedding(batch["tgt_in"]))
        traced = {"return_attention": True} if return_attention else {}
        dec = self.decoder(y, batch["tgt_mask"], source, cells, src_mask, **traced)
        logits = self.out(self.drop_out(dec.states))  # (B, T, V)
        if trace is not None:
            trace["source"] = dec.attention
            if isinstance(dec.state, dict) and dec.state.get("intra_attention") is not None:
                trace["target"] = dec.state["intra_attention"]
        return ModelOutput(logits=logits, attention=trace)

    # the model protocol of memread.decoding
    def start(self, src: Tensor, src_mask: Tensor, trace: dict | None = None):
        source, cells = self.encode(src, src_mask, trace)
        return self.decoder.start(source, cells, src_mask)

    def step(self, prev: Tensor, state) -> tuple[Tensor, object]:
        out_t, state = self.decoder.step(self.tgt_embedding(prev), state)
        return F.log_softmax(self.out(out_t), dim=-1), state

    def step_trace(self, state) -> dict[str, Tensor]:
        """The decoder's weights at the step that gave ``state`` (``source`` (B, S); ``target`` for the fusion
        decoders), for :mod:`memread.decoding`'s traces."""
        return self.decoder.step_trace(state)

    def reorder(self, state, index: Tensor):
        return self.decoder.reorder(state, index)


# ----------------------------------------------------------------------------- builders (encoder first, then decoder)


def _check_vectors(cfg: TranslatorConfig, pipeline) -> None:
    if pipeline.vectors is not None and pipeline.vectors_dim != cfg.emb:
        raise MemreadError(f"data.vectors: {pipeline.cfg.vectors} has {pipeline.vectors_dim}-d vectors, head.emb is "
                           f"{cfg.emb}; set head.emb = {pipeline.vectors_dim}")


def _translator(cfg: TranslatorConfig, encoder: nn.Module, decoder: nn.Module, reads: str, reader_cfg,
                pipeline) -> Translator:
    model = Translator(cfg, encoder, decoder, reads, pipeline.src_vocab, pipeline.tgt_vocab, reader_cfg.name)
    if pipeline.vectors is not None:
        model.src_embedding.load_vectors(pipeline.src_vocab.itos, pipeline.vectors, cfg.oov, seed=0)
    return model


def build_attention_translator(cfg: AttentionDecoderHeadConfig, reader_cfg, pipeline) -> Translator:
    _check_vectors(cfg, pipeline)
    encoder = build_reader(reader_cfg, cfg.emb)
    decoder = AttentionLSTMDecoder(AttentionDecoderConfig(reader_cfg.hidden, cfg.decoder_layers, cfg.input_feeding),
                                   cfg.tgt_emb, encoder.output_size)
    return _translator(cfg, encoder, decoder, "states", reader_cfg, pipeline)


def build_nse_translator(cfg: NSEDecoderHeadConfig, reader_cfg, pipeline) -> Translator:
    _check_vectors(cfg, pipeline)
    encoder = build_reader(reader_cfg, cfg.emb)
    decoder = NSEDecoder(NSEDecoderConfig(encoder.output_size, reader_cfg.layers, reader_cfg.dropout), cfg.tgt_emb)
    return _translator(cfg, encoder, decoder, "memory", reader_cfg, pipeline)


def build_fusion_translator(cfg: FusionHeadConfig, reader_cfg, pipeline) -> Translator:
    _check_vectors(cfg, pipeline)
    encoder = build_reader(reader_cfg, cfg.emb)
    decoder = LSTMNFusionDecoder(FusionConfig(cfg.name, reader_cfg.hidden, tape_start=getattr(reader_cfg, "tape_start", "empty")), cfg.tgt_emb,
                                 encoder.output_size)  # the decoder's tape starts as the encoder's
    return _translator(cfg, encoder, decoder, "tape", reader_cfg, pipeline)
