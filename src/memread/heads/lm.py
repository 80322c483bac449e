"""The language-model head: embedding -> reader -> dropout -> softmax layer over the vocabulary.

``model(batch, state)`` returns the next-word logits (B, T, V) and the reader's state to carry into the
next BPTT segment; the loss is :class:`memread.criteria.lm.LMNLL`'s.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from torch import Tensor, nn

from memread.errors import MemreadError
from memread.heads.base import ModelOutput
from memread.modules.output import VocabularyProjection
from memread.readers import READERS, build_reader, readers_with
from memread.readers.base import ReaderOutput, attention_trace
from memread.typed import DropoutRate, PositiveFloat, PositiveInt


@dataclass
class LMHeadConfig:
    name: Literal["lm"] = "lm"
    emb: PositiveInt = 150
    dropout: DropoutRate = 0.0  # on embeddings and on reader outputs
    tie_weights: bool = False  # share embedding and softmax weights (needs emb == reader output size)
    init_range: PositiveFloat = 0.1  # uniform(-r, r) for embedding and softmax weights


class LanguageModel(nn.Module):
    def __init__(self, vocab_size: int, cfg: LMHeadConfig, reader: nn.Module, reader_resets: bool = False):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, cfg.emb)
        self.reader = reader
        self.drop = nn.Dropout(cfg.dropout)
        self.decoder = VocabularyProjection(reader.output_size, vocab_size)
        nn.init.uniform_(self.embedding.weight, -cfg.init_range, cfg.init_range)
        nn.init.uniform_(self.decoder.weight, -cfg.init_range, cfg.init_range)
        nn.init.zeros_(self.decoder.bias)
        if cfg.tie_weights:
            if reader.output_size != cfg.emb:
                raise MemreadError(f"head.tie_weights needs head.emb == the reader's output size ({cfg.emb} != {reader.output_size})")
            self.decoder.weight = self.embedding.weight
        self.reader_resets = reader_resets  # can it take document starts? (ReaderSpec.resets)

    def read(self, inp: Tensor, mask: Tensor, state=None, reset: Tensor | None = None,
             return_attention: bool = False) -> ReaderOutput:
        """Embed ``inp`` (B, T) and read it; ``reset`` (B, T) marks document starts."""
        x = self.drop(self.embedding(inp))  # (B, T, E)
        if reset is None:
            return self.reader(x, mask, state, return_attention=return_attention)
        if not self.reader_resets:
            raise MemreadError(f"reader {type(self.reader).__name__} cannot reset its state at document starts; "
                               f"use one of {', '.join(readers_with('resets'))} or read without documents")
        return self.reader(x, mask, state, return_attention=return_attention, reset=reset)

    def forward(self, batch: dict[str, Tensor], state=None, return_attention: bool = False) -> ModelOutput:
        """``attention`` (with ``return_attention``): the reader's weights (B, T, S); a deep LSTMN's every layer
        in ``extra["attention_layers"]`` (B, L, T, S)."""
        out = self.read(batch["input"], batch["mask"], state, batch.get("reset"), return_attention)
        logits = self.decoder(self.drop(out.states))  # (B, T, V)
        extra = {k: v for k, v in attention_trace(out).items() if k == "attention_layers"} if return_attention else {}
        return ModelOutput(logits=logits, state=out.state, attention=out.attention, extra=extra)


def build_lm_head(cfg: LMHeadConfig, reader_cfg, pipeline) -> LanguageModel:
    reader = build_reader(reader_cfg, cfg.emb)
    return LanguageModel(len(pipeline.vocab), cfg, reader, READERS[reader_cfg.name].resets)
