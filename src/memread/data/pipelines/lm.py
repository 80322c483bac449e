"""Language-model data: a corpus read as one token stream, or as documents, cut into BPTT batches.

Corpora (``[data] name``): ``ptb`` (one continuous stream), ``wikitext-2`` / ``wikitext-103`` (articles),
``stories-text`` (the built-in stories as text), ``cbt-text`` (CBT-format cloze files: each question,
its blank filled in, is a story) and ``text`` (your own plain text files, one sentence per line, blank
lines between documents: :mod:`memread.data.records`). With ``documents = true`` a corpus of documents is read as documents:
every batch carries ``reset`` (B, T), True at the first token of each document, the reader resets its
state (and memory) there, and nothing is predicted across a boundary (Daniluk et al. 2017 reset between
Wikipedia articles and between CBT stories). Evaluation reads a split at batch size 1 by default, so
each token is conditioned on everything before it.

``example_batches(texts, batch_size=1)`` reads token lists (:func:`memread.data.records.lm_tokens`) as
one more split: one stream (documents mode: each text a document), at batch size 1 in order, so the
model's per-token log-probabilities follow the texts' tokens after the first.

With ``context = "sentence"`` (the LSTMN authors' protocol, :mod:`memread.data.sentence_lm`) every line of a
corpus is an example of its own, ``<s> w_1 .. w_n <eos>``, batched right-padded and bucketed by length
(``bucket``: pools of that many batches sorted by length), the loss masked, no state carried between
sentences; perplexity counts every word and every ``<eos>``, never ``<s>``. ``max_len`` refuses longer
sentences (0: no limit). The stream stays the default.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import torch
from torch import Tensor

from memread.data.cbt import read_cbt
from memread.data.ptb import EOS, ptb_path, read_ptb
from memread.data import sentence_lm
from memread.data.records import data_file, read_text
from memread.data.text import read_lines
from memread.data.stories import story_splits, story_text
from memread.data.batching import Batches
from memread.data.stream import DocumentStreamBatches, StreamBatches
from memread.data.vocab import Vocab
from memread.data.wikitext import map_numbers, read_wikitext, wikitext_path
from memread.errors import MemreadError
from memread.typed import NonNegInt, PositiveInt


@dataclass
class ContextKeys:
    """How a corpus is read: one stream (or documents) cut into BPTT segments, or each sentence on its own."""

    context: Literal["stream", "sentence"] = "stream"
    max_len: NonNegInt = 0  # context "sentence": refuse longer sentences (words); 0 = no limit
    bucket: NonNegInt = 20  # context "sentence": training batches sorted by length within pools of this many


@dataclass
class PTBConfig(ContextKeys):
    name: Literal["ptb"] = "ptb"
    bptt: PositiveInt = 35
    min_count: NonNegInt = 1
    max_vocab: NonNegInt = 0  # 0 = no cap
    numbers: bool = False  # map every number token to "N" (Daniluk et al.'s Wikipedia preprocessing)


@dataclass
class WikiTextConfig(ContextKeys):
    name: Literal["wikitext-2", "wikitext-103"] = "wikitext-2"
    bptt: PositiveInt = 35
    min_count: NonNegInt = 1
    max_vocab: NonNegInt = 0  # Daniluk et al.'s Wikipedia corpus: the 77k most frequent words
    numbers: bool = False
    documents: bool = False  # reset the reader at each article's start


@dataclass
class StoriesTextConfig(ContextKeys):
    name: Literal["stories-text"] = "stories-text"
    bptt: PositiveInt = 35
    min_count: NonNegInt = 1
    max_vocab: NonNegInt = 0
    numbers: bool = False
    documents: bool = False  # reset the reader at each story's start
    stories: PositiveInt = 2000  # training stories (valid and test get a tenth each)
    story_seed: int = 0


@dataclass
class CBTTextConfig(ContextKeys):
    name: Literal["cbt-text"] = "cbt-text"
    bptt: PositiveInt = 35
    min_count: NonNegInt = 1
    max_vocab: NonNegInt = 0
    numbers: bool = False
    documents: bool = False  # reset the reader at each story's start
    train_file: str = ""  # CBT-format files, relative to the data root
    valid_file: str = ""
    test_file: str = ""


@dataclass
class TextConfig(ContextKeys):
    name: Literal["text"] = "text"
    train: str = ""  # plain UTF-8 text files, relative to the data root (or absolute), .gz allowed
    valid: str = ""
    test: str = ""
    bptt: PositiveInt = 35
    min_count: NonNegInt = 1
    max_vocab: NonNegInt = 0
    documents: bool = False  # blank lines separate documents; reset the reader at each one's start
    lowercase: bool = False


LMDataConfig = PTBConfig | WikiTextConfig | StoriesTextConfig | CBTTextConfig | TextConfig


class LMPipeline:
    """Tokens (or documents) of each split -> ids -> BPTT batches ``{"input", "target", "mask"[, "reset"]}``."""

    task = "lm"
    default_eval_batch_size = 1

    def __init__(self, cfg: LMDataConfig, data_root: Path, vocab: Vocab | None = None):
        self.cfg = cfg
        self.data_root = Path(data_root)
        self.documents_mode = bool(getattr(cfg, "documents", False))
        self.sentence_mode = cfg.context == "sentence"
        # any batch size gives the same perplexity of sentences read alone; a stream is exact at batch size 1
        self.default_eval_batch_size = 64 if self.sentence_mode else 1
        self._tokens: dict[str, list[str]] = {}
        self._sentences: dict[str, list[sentence_lm.Sentence]] = {}
        self._encoded: dict[str, list[list[int]]] = {}
        self._documents: dict[str, list[list[str]]] = {}
        self._document_ids: dict[str, list[Tensor]] = {}
        self._ids: dict[str, Tensor] = {}
        if vocab is None:
            specials = ("<pad>", "<unk>", sentence_lm.START) if self.sentence_mode else ("<pad>", "<unk>")
            vocab = Vocab.build(self.tokens("train"), min_count=cfg.min_count, max_size=cfg.max_vocab, specials=specials)
            if self.sentence_mode:  # a new run: every split's sentences checked before anything is written
                for split in ("train", "valid", "test"):
                    sentence_lm.check_sentences(self.sentences(split), cfg.max_len)
        self.vocab = vocab

    # ------------------------------------------------------------------ load
    def tokens(self, split: str) -> list[str]:
        if split not in self._tokens:
            name = self.cfg.name
            if name == "ptb":
                tokens = read_ptb(ptb_path(self.data_root, split))
            elif name == "stories-text":
                tokens = [t for line in story_text(self._stories(split)) if line for t in (*line.split(), EOS)]
            else:  # corpora of documents
                tokens = [t for doc in self.documents(split) for t in doc]
            numbers = getattr(self.cfg, "numbers", False) and name in ("ptb", "stories-text")
            self._tokens[split] = map_numbers(tokens) if numbers else tokens
        return self._tokens[split]

    def documents(self, split: str) -> list[list[str]]:
        """The split's documents (WikiText articles, stories), tokens with ``<eos>`` after each line."""
        if split not in self._documents:
            name = self.cfg.name
            if name == "ptb":
                raise MemreadError("ptb is one continuous stream without document boundaries")
            if name == "text":
                docs = read_text(data_file(self.data_root, getattr(self.cfg, split), split, name), self.cfg.lowercase)
            elif name in ("stories-text", "cbt-text"):
                stories = self._stories(split) if name == "stories-text" else self._cloze_file(split)
                docs = [[t for line in story_text([story]) if line for t in (*line.split(), EOS)] for story in stories]
            else:
                docs = read_wikitext(wikitext_path(self.data_root, name, split))
            self._documents[split] = [map_numbers(d) for d in docs] if getattr(self.cfg, "numbers", False) else docs
        return self._documents[split]

    def sentences(self, split: str) -> list[sentence_lm.Sentence]:
        """The split's sentences (its non-blank lines), each with the file and line it came from."""
        if split not in self._sentences:
            name = self.cfg.name
            if name in ("ptb", "wikitext-2", "wikitext-103"):  # every line of the file, blank ones too, ends in <eos>
                path = ptb_path(self.data_root, split) if name == "ptb" else wikitext_path(self.data_root, name, split)
                lines = sentence_lm.lines_at_eos(self.tokens(split))
                places = [f"{path}:{i}" for i in range(1, len(lines) + 1)]
            elif name == "text":  # read_text skips blank lines
                path = data_file(self.data_root, getattr(self.cfg, split), split, name)
                places = [f"{path}:{n}" for n, line in read_lines(path) if line.strip()]
                lines = sentence_lm.lines_at_eos(self.tokens(split))
            else:  # generated stories: a story's lines
                places, lines = [], []
                for d, doc in enumerate(self.documents(split), 1):
                    story = sentence_lm.lines_at_eos(doc)
                    places += [f"{name} {split} split, story {d} line {k}" for k in range(1, len(story) + 1)]
                    lines += story
            self._sentences[split] = [sentence_lm.Sentence(tuple(words), where)
                                      for words, where in zip(lines, places) if words]
        return self._sentences[split]

    def _cloze_file(self, split: str):
        name = {"train": self.cfg.train_file, "valid": self.cfg.valid_file, "test": self.cfg.test_file}[split]
        if not name:
            raise MemreadError(f"[data] name = \"cbt-text\" needs data.{split}_file (a CBT-format file under the data root)")
        return read_cbt(self.data_root / name)

    def _stories(self, split: str):
        n = {"train": self.cfg.stories, "valid": max(1, self.cfg.stories // 10), "test": max(1, self.cfg.stories // 10)}
        return story_splits(n["train"], n["valid"], n["test"], self.cfg.story_seed)[split]

    # ------------------------------------------------------------------ encode and batch
    def ids(self, split: str) -> Tensor:
        if split not in self._ids:
            self._ids[split] = torch.tensor(self.vocab.encode(self.tokens(split)), dtype=torch.long)
        return self._ids[split]

    def document_ids(self, split: str) -> list[Tensor]:
        if split not in self._document_ids:
            self._document_ids[split] = [torch.tensor(self.vocab.encode(d), dtype=torch.long) for d in self.documents(split)]
        return self._document_ids[split]

    def encoded(self, split: str) -> list[list[int]]:
        """Context "sentence": the split's sentences as ``<s> w_1 .. w_n <eos>`` ids."""
        if split not in self._encoded:
            self._encoded[split] = [sentence_lm.encode(s.words, self.vocab) for s in self.sentences(split)]
        return self._encoded[split]

    def batches(self, split: str, batch_size: int, epoch: int = 0,
                seed: int = 0) -> StreamBatches | DocumentStreamBatches | Batches:
        if self.sentence_mode:
            g = torch.Generator().manual_seed(seed * 1_000_003 + epoch) if split == "train" else None
            return sentence_lm.sentence_batches(self.encoded(split), batch_size, self.cfg.bucket, self.vocab.pad_id, g)
        if self.documents_mode:
            return DocumentStreamBatches(self.document_ids(split), batch_size, self.cfg.bptt, pad_id=self.vocab.pad_id)
        return StreamBatches(self.ids(split), batch_size, self.cfg.bptt, pad_id=self.vocab.pad_id)

    def example_batches(self, examples: list[list[str]], batch_size: int = 1) -> StreamBatches | DocumentStreamBatches | Batches:
        """Token lists (texts, ``<eos>`` after each line) as a split of their own, read as evaluation reads
        one: one stream of the texts in order, or, with ``documents = true``, each text a document (the
        reader resets at its start). At ``batch_size`` 1 the targets are every token after the first, in order.
        With ``context = "sentence"``: every line of every text a sentence read alone, in order; the targets are
        each line's words and its ``<eos>``."""
        if batch_size < 1:
            raise MemreadError(f"batch size must be at least 1, got {batch_size}")
        if self.sentence_mode:  # every line of every text a sentence of its own, in order
            lines = [words for t in examples for words in sentence_lm.lines_at_eos(t) if words]
            if not lines:
                raise MemreadError("nothing to predict: a text needs at least one word")
            sentence_lm.check_sentences([sentence_lm.Sentence(tuple(w), "input") for w in lines], 0)
            return sentence_lm.in_order_batches([sentence_lm.encode(w, self.vocab) for w in lines], batch_size,
                                                self.vocab.pad_id)
        ids = [torch.tensor(self.vocab.encode(t), dtype=torch.long) for t in examples]
        try:
            if self.documents_mode:
                return DocumentStreamBatches(ids, batch_size, self.cfg.bptt, pad_id=self.vocab.pad_id)
            return StreamBatches(torch.cat(ids) if ids else torch.zeros(0, dtype=torch.long), batch_size, self.cfg.bptt,
                                 pad_id=self.vocab.pad_id)
        except ValueError:
            raise MemreadError("nothing to predict: a text needs at least two tokens (a word and its line's <eos>)") from None

    def tokens_in(self, batch: dict) -> int:
        return int(batch["mask"].sum())
