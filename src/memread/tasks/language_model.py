"""Word-level language modelling: embedding -> reader -> dropout -> softmax over the vocabulary.

Perplexity is ``exp(NLL / T)`` with NLL summed over every target token of the split and T their
number. Evaluation reads the split as one stream at batch size 1 by default, so each token is
conditioned on everything before it.

Corpora: Penn Treebank (one continuous stream), WikiText-2/-103 (articles), the built-in stories,
and CBT-format cloze files (``cbt-files``: each question, its blank filled in, is a story).
With ``documents = true`` a corpus of documents is read as documents: every batch carries ``reset``
(B, T), True at the first token of each document, the reader resets its state (and memory) there,
and nothing is predicted across a boundary (Daniluk et al. 2017 reset between Wikipedia articles
and between CBT stories). Only readers whose ``forward`` takes ``reset`` can do that.
"""

from __future__ import annotations

import inspect
import math
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from memread.data.cbt import read_cbt
from memread.data.ptb import EOS, ptb_path, read_ptb
from memread.data.stories import story_splits, story_text
from memread.data.stream import DocumentStreamBatches, StreamBatches
from memread.data.vocab import Vocab
from memread.data.wikitext import map_numbers, read_wikitext, wikitext_path
from memread.errors import MemreadError
from memread.modules.output import VocabularyProjection
from memread.readers import READERS, build_reader
from memread.readers.base import ReaderOutput
from memread.tasks.base import ModelOutput


@dataclass
class LMTaskConfig:
    name: Literal["lm"] = "lm"
    dataset: Literal["ptb", "stories", "wikitext-2", "wikitext-103", "cbt-files"] = "ptb"
    bptt: int = 35
    emb: int = 150
    dropout: float = 0.0  # on embeddings and on reader outputs
    tie_weights: bool = False  # share embedding and softmax weights (needs emb == reader output size)
    init_range: float = 0.1  # uniform(-r, r) for embedding and softmax weights
    # "sequence": the loss is summed over the time steps of a segment and averaged over the batch, the
    # convention of the Torch/Theano LM code of the papers (their lr 0.65 and clip 5 assume it);
    # "token": averaged over every token (what lr values tuned for PyTorch's example assume)
    loss_reduction: Literal["sequence", "token"] = "sequence"
    min_count: int = 1
    max_vocab: int = 0  # 0 = no cap (Daniluk et al.'s Wikipedia corpus: the 77k most frequent words)
    documents: bool = False  # read wikitext / stories as documents: reset the reader at each one's start
    numbers: bool = False  # map every number token to "N" (Daniluk et al.'s Wikipedia preprocessing)
    stories: int = 2000  # for dataset = "stories": number of training stories
    train_file: str = ""  # dataset = "cbt-files": CBT-format files (relative to the data root); each question,
    valid_file: str = ""  # its blank filled in, is one document (a story of 21 sentences)
    test_file: str = ""
    story_seed: int = 0


class LanguageModel(nn.Module):
    def __init__(self, vocab_size: int, cfg: LMTaskConfig, reader: nn.Module):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, cfg.emb)
        self.loss_reduction = cfg.loss_reduction
        self.reader = reader
        self.drop = nn.Dropout(cfg.dropout)
        self.decoder = VocabularyProjection(reader.output_size, vocab_size)
        nn.init.uniform_(self.embedding.weight, -cfg.init_range, cfg.init_range)
        nn.init.uniform_(self.decoder.weight, -cfg.init_range, cfg.init_range)
        nn.init.zeros_(self.decoder.bias)
        if cfg.tie_weights:
            if reader.output_size != cfg.emb:
                raise ValueError(f"tie_weights needs task.emb == reader output size ({cfg.emb} != {reader.output_size})")
            self.decoder.weight = self.embedding.weight
        self.reader_resets = "reset" in inspect.signature(reader.forward).parameters  # can it take document starts?

    def read(self, inp: Tensor, mask: Tensor, state=None, reset: Tensor | None = None,
             return_attention: bool = False) -> ReaderOutput:
        """Embed ``inp`` (B, T) and read it; ``reset`` (B, T) marks document starts."""
        x = self.drop(self.embedding(inp))  # (B, T, E)
        if reset is None:
            return self.reader(x, mask, state, return_attention=return_attention)
        if not self.reader_resets:
            raise MemreadError(f"reader {type(self.reader).__name__} cannot reset its state at document starts; "
                               f"use one of {', '.join(resetting_readers())} or set task.documents = false")
        return self.reader(x, mask, state, return_attention=return_attention, reset=reset)

    def forward(self, batch: dict[str, Tensor], state=None, return_attention: bool = False) -> ModelOutput:
        inp, target, mask = batch["input"], batch["target"], batch["mask"]  # (B, T) each
        out = self.read(inp, mask, state, batch.get("reset"), return_attention)
        logits = self.decoder(self.drop(out.states))  # (B, T, V)
        nll = F.cross_entropy(logits.flatten(0, 1), target.flatten(), reduction="none").view_as(target)
        m = mask.to(nll.dtype)
        nll_sum = (nll * m).sum()
        tokens = m.sum()
        if self.loss_reduction == "sequence":
            loss = nll_sum / inp.size(0)
        else:
            loss = nll_sum / tokens.clamp_min(1.0)
        return ModelOutput(
            loss=loss,
            stats={"nll": nll_sum.detach(), "tokens": tokens.detach()},
            state=out.state,
            logits=logits,
            attention=out.attention,
        )


class LanguageModelTask:
    name = "lm"
    Config = LMTaskConfig
    selection_metric = "ppl"
    higher_is_better = False
    default_eval_batch_size = 1

    def __init__(self, cfg: LMTaskConfig, data_root: Path, vocab: Vocab | None = None):
        self.cfg = cfg
        self.data_root = Path(data_root)
        self._tokens: dict[str, list[str]] = {}
        self._documents: dict[str, list[list[str]]] = {}
        self._document_ids: dict[str, list[Tensor]] = {}
        self._ids: dict[str, Tensor] = {}
        if vocab is None:
            train = self.tokens("train")
            vocab = Vocab.build(train, min_count=cfg.min_count, max_size=cfg.max_vocab, specials=("<pad>", "<unk>"))
        self.vocab = vocab

    def tokens(self, split: str) -> list[str]:
        if split not in self._tokens:
            if self.cfg.dataset == "ptb":
                tokens = read_ptb(ptb_path(self.data_root, split))
            elif self.cfg.dataset == "stories":
                tokens = [t for line in story_text(self._stories(split)) if line for t in (*line.split(), EOS)]
            else:  # corpora of documents
                tokens = [t for doc in self.documents(split) for t in doc]
            self._tokens[split] = map_numbers(tokens) if self.cfg.numbers and self.cfg.dataset in ("ptb", "stories") else tokens
        return self._tokens[split]

    def documents(self, split: str) -> list[list[str]]:
        """The split's documents (WikiText articles, stories), tokens with ``<eos>`` after each line."""
        if split not in self._documents:
            if self.cfg.dataset == "ptb":
                raise MemreadError("ptb is one continuous stream without document boundaries; set task.documents = false")
            if self.cfg.dataset in ("stories", "cbt-files"):
                stories = self._stories(split) if self.cfg.dataset == "stories" else self._cloze_file(split)
                docs = [[t for line in story_text([story]) if line for t in (*line.split(), EOS)] for story in stories]
            else:
                docs = read_wikitext(wikitext_path(self.data_root, self.cfg.dataset, split))
            self._documents[split] = [map_numbers(d) for d in docs] if self.cfg.numbers else docs
        return self._documents[split]

    def _cloze_file(self, split: str):
        name = {"train": self.cfg.train_file, "valid": self.cfg.valid_file, "test": self.cfg.test_file}[split]
        if not name:
            raise MemreadError(f"dataset = \"cbt-files\" needs task.{split}_file (a CBT-format file under the data root)")
        return read_cbt(self.data_root / name)

    def _stories(self, split: str):
        n = {"train": self.cfg.stories, "valid": max(1, self.cfg.stories // 10), "test": max(1, self.cfg.stories // 10)}
        return story_splits(n["train"], n["valid"], n["test"], self.cfg.story_seed)[split]

    def ids(self, split: str) -> Tensor:
        if split not in self._ids:
            self._ids[split] = torch.tensor(self.vocab.encode(self.tokens(split)), dtype=torch.long)
        return self._ids[split]

    def document_ids(self, split: str) -> list[Tensor]:
        if split not in self._document_ids:
            self._document_ids[split] = [torch.tensor(self.vocab.encode(d), dtype=torch.long) for d in self.documents(split)]
        return self._document_ids[split]

    def batches(self, split: str, batch_size: int, epoch: int = 0, seed: int = 0) -> StreamBatches | DocumentStreamBatches:
        if self.cfg.documents:
            return DocumentStreamBatches(self.document_ids(split), batch_size, self.cfg.bptt, pad_id=self.vocab.pad_id)
        return StreamBatches(self.ids(split), batch_size, self.cfg.bptt, pad_id=self.vocab.pad_id)

    def build_model(self, reader_cfg) -> LanguageModel:
        model = LanguageModel(len(self.vocab), self.cfg, build_reader(reader_cfg, self.cfg.emb))
        if self.cfg.documents and not model.reader_resets:
            raise MemreadError(f"task.documents = true needs a reader that resets at document starts; "
                               f"reader '{reader_cfg.name}' cannot (use one of {', '.join(resetting_readers())})")
        return model

    def summarize(self, stats: dict[str, float]) -> dict[str, float]:
        nll = stats["nll"] / max(stats["tokens"], 1.0)
        return {"ppl": math.exp(min(nll, 50.0)), "nll": nll, "tokens": stats["tokens"]}

    def tokens_in(self, batch: dict) -> int:
        return int(batch["mask"].sum())


def resetting_readers() -> list[str]:
    """Registered readers whose ``forward`` takes ``reset`` (document starts)."""
    names = []
    for name, spec in READERS.items():
        try:
            cls = typing.get_type_hints(spec.build).get("return")
        except Exception:  # an unresolvable annotation: not one we can vouch for
            continue
        if isinstance(cls, type) and "reset" in inspect.signature(cls.forward).parameters:
            names.append(name)
    return names
