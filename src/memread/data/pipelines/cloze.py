"""Cloze data: questions (a document, a query with a blank, candidates, the answer) -> vocabulary ->
encoded examples -> padded batches.

Datasets (``[data] name``): ``stories`` (the built-in stories with their questions), ``cbt``
(CBT-format files), ``books`` (cloze questions built from raw books by the CBT recipe,
:mod:`memread.data.cloze_builder`, split by book), ``cnn`` (folders of rc-data ``.question`` files)
``babi`` (the bAbI tasks whose answer is a word of the story; accuracy is also reported per task,
``batch["group"]``) and ``jsonl-cloze`` (your own questions as JSON lines, :mod:`memread.data.records`).
Every dataset takes ``min_count`` / ``max_vocab`` (the vocabulary of the training questions), ``vocabulary``
and ``bucket``: sort examples by document length within pools of ``bucket`` batches (train: pools drawn in a
random order fixed by (seed, epoch), so a resumed run sees the same batches), so that padding wastes little.

**The vocabulary** (``vocabulary``). ``"train"`` (memread's choice): the training questions' words; a word
only the valid or test questions hold reads as ``<unk>``. ``"all"``: those words too, each with a row of its
own after the training words, most frequent first (the AS Reader authors' code, github.com/rkadlec/asreader,
``text_comprehension_base.py``: the valid and test streams are read with ``add_dict=True``, adding their new
words to the dictionary). Their embeddings are never trained by the answer's loss (they occur in no training
question) but stay apart: on books split by book, most names of the held-out books are such words (Gutenberg
NE: 74 % of the valid answers), so under ``"train"`` every candidate name of a held-out book is the same
``<unk>`` to the encoders. The papers do not say which they used; pointer-sum occurrence is word identity
either way (``doc_words``). An embedding penalty (``[criterion] emb_l2``, Sordoni et al.'s 1e-4) reaches
every row, so under Adam the held-out rows shrink to about zero as training goes on (measured: mean norm
0.98 at initialisation, 0.54 after 36 steps, 0.04 after 396 on Gutenberg NE) and grow alike again.

A batch holds ``doc`` / ``query`` / ``cands`` ids with their masks (True = real), ``doc_words`` /
``cand_words`` (per-example word identities for pointer-sum: two positions hold the same word exactly
when their ids are equal, whatever the vocabulary does with rare words), ``answer`` (index into the
candidates), ``index`` (position in the split's encoded examples) and, for bAbI, ``group``.
"""

from __future__ import annotations

import functools
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Literal

import torch
from torch import Tensor

from memread.data.babi import babi_path, read_babi
from memread.data.batching import Batches, batch_order, pad
from memread.data.cbt import BLANK, ClozeExample, read_cbt
from memread.data.pipelines.base import in_order
from memread.data.records import cloze_example, data_file, read_records
from memread.data.stories import story_splits
from memread.data.vocab import Vocab
from memread.errors import MemreadError
from memread.typed import NonNegInt, PositiveInt


# "train": the words of the training questions (min_count, max_vocab); "all": and every other word of the valid
# and test questions, each a row of its own (the AS Reader authors' code)
Vocabulary = Literal["train", "all"]


@dataclass
class StoriesClozeConfig:
    name: Literal["stories"] = "stories"
    stories: PositiveInt = 4000  # training stories (valid and test get a tenth each)
    story_seed: int = 0
    min_count: NonNegInt = 1
    max_vocab: NonNegInt = 0  # 0 = no cap
    vocabulary: Vocabulary = "train"
    bucket: NonNegInt = 0  # sort by document length within pools of this many batches; 0 = no sorting


@dataclass
class ClozeFilesConfig:
    name: Literal["cbt", "cnn"] = "cbt"
    train_file: str = ""  # cbt: CBT-format files; cnn: folders of rc-data .question files (relative to the data root)
    valid_file: str = ""
    test_file: str = ""
    min_count: NonNegInt = 1
    max_vocab: NonNegInt = 0
    vocabulary: Vocabulary = "train"
    bucket: NonNegInt = 0


@dataclass
class BooksClozeConfig:
    name: Literal["books"] = "books"
    books: tuple[str, ...] = ()  # raw book files or glob patterns, relative to the data root
    valid_books: tuple[str, ...] = ()  # book names (file names without .txt/.gz) held out for valid
    test_books: tuple[str, ...] = ()  # ... and for test; every other book is for training
    word_class: Literal["NE", "P", "CN", "V"] = "NE"  # CN and V need a tagger (memread data cloze)
    window_stride: PositiveInt = 1  # sentences between consecutive 21-sentence windows
    min_count: NonNegInt = 1
    max_vocab: NonNegInt = 0
    vocabulary: Vocabulary = "train"
    bucket: NonNegInt = 0


@dataclass
class BabiClozeConfig:
    name: Literal["babi"] = "babi"
    dir: str = "babi/en-10k"  # folder under the data root
    tasks: tuple[int, ...] = (1, 2, 4, 5, 11, 12, 13, 14, 16)  # valid = the last tenth of each train file
    max_sentences: NonNegInt = 50  # the story's most recent statements kept as the document; 0 = all
    min_count: NonNegInt = 1
    max_vocab: NonNegInt = 0
    vocabulary: Vocabulary = "train"
    bucket: NonNegInt = 0


@dataclass
class JsonlClozeConfig:
    name: Literal["jsonl-cloze"] = "jsonl-cloze"
    train: str = ""  # JSON-lines files, relative to the data root (or absolute), .gz allowed
    valid: str = ""
    test: str = ""
    placeholder: str = BLANK  # the query's blank: a whole whitespace-separated word (read as XXXXX)
    lowercase: bool = False
    min_count: NonNegInt = 1
    max_vocab: NonNegInt = 0
    vocabulary: Vocabulary = "train"
    bucket: NonNegInt = 0

    def __post_init__(self) -> None:
        if not self.placeholder or len(self.placeholder.split()) != 1 or self.placeholder.split()[0] != self.placeholder:
            raise MemreadError(f"data.placeholder must be one word without spaces, got {self.placeholder!r}")


ClozeDataConfig = StoriesClozeConfig | ClozeFilesConfig | BooksClozeConfig | BabiClozeConfig | JsonlClozeConfig


# ----------------------------------------------------------------------------- load: one reader per dataset
# each returns the questions of ``split`` (and of other splits when it builds them together)


def _path(root: Path, cfg, key: str) -> Path:
    name = getattr(cfg, key)
    if not name:
        raise MemreadError(f"key 'data.{key}' is empty; [data] name = {cfg.name!r} needs it")
    return Path(name) if Path(name).is_absolute() else root / name


def load_stories(cfg: StoriesClozeConfig, root: Path, split: str) -> dict[str, list[ClozeExample]]:
    n = cfg.stories
    return story_splits(n, max(1, n // 10), max(1, n // 10), cfg.story_seed)


def load_cbt(cfg: ClozeFilesConfig, root: Path, split: str) -> dict[str, list[ClozeExample]]:
    return {split: read_cbt(_path(root, cfg, f"{split}_file"))}


def load_cnn(cfg: ClozeFilesConfig, root: Path, split: str) -> dict[str, list[ClozeExample]]:
    from memread.data.cnn import read_questions

    return {split: read_questions(_path(root, cfg, f"{split}_file"))}


def _glob(root: Path, pattern: str) -> list[Path]:
    base = Path(pattern) if Path(pattern).is_absolute() else root / pattern
    if any(c in pattern for c in "*?["):
        found = sorted(base.parent.glob(base.name))
        if not found:
            raise MemreadError(f"data.books: book files not found: nothing matches {base}")
        return found
    if not base.is_file():
        raise MemreadError(f"data.books: {base}: book file not found")
    return [base]


def load_books(cfg: BooksClozeConfig, root: Path, split: str) -> dict[str, list[ClozeExample]]:
    from memread.data.cloze_builder import build_cloze

    if not cfg.books or not cfg.test_books or not cfg.valid_books:
        raise MemreadError("[data] name = 'books' needs data.books, data.valid_books and data.test_books")
    paths = sorted({p for pattern in cfg.books for p in _glob(root, pattern)})
    return build_cloze(paths, cfg.word_class, list(cfg.valid_books), list(cfg.test_books), stride=cfg.window_stride)


def load_babi(cfg: BabiClozeConfig, root: Path, split: str) -> dict[str, list[ClozeExample]]:
    out = []
    for t in cfg.tasks:  # valid is the last tenth of each task's train file
        exs = read_babi(babi_path(root, cfg.dir, t, "test" if split == "test" else "train"), t, cfg.max_sentences)
        if split != "test":
            cut = len(exs) - max(1, len(exs) // 10)
            exs = exs[:cut] if split == "train" else exs[cut:]
        out.extend(exs)
    return {split: out}


def load_jsonl_cloze(cfg: JsonlClozeConfig, root: Path, split: str) -> dict[str, list[ClozeExample]]:
    path = data_file(root, getattr(cfg, split), split, cfg.name)
    return {split: read_records(path, lambda record, where: cloze_example(
        record, where, placeholder=cfg.placeholder, lowercase=cfg.lowercase))}


LOADERS: dict[str, Callable[..., dict[str, list[ClozeExample]]]] = {
    "stories": load_stories, "cbt": load_cbt, "books": load_books, "cnn": load_cnn, "babi": load_babi,
    "jsonl-cloze": load_jsonl_cloze}


# ----------------------------------------------------------------------------- encode and collate


def encode_question(ex: ClozeExample, vocab: Vocab, index: int) -> dict:
    """One question as ids and per-example word identities (pointer-sum), ``index`` its position."""
    document = ex.document
    words: dict[str, int] = {}  # per-example word identity, for pointer-sum
    doc_words = [words.setdefault(w, len(words)) for w in document]
    # an answer that is no candidate (bAbI, CNN: not in the story) is kept as one more candidate
    # that never occurs in the document: a pointer scores it wrong
    candidates = ex.candidates if ex.answer in ex.candidates else [*ex.candidates, ex.answer]
    return {
        "doc": vocab.encode(document),
        "query": vocab.encode(ex.query),
        "cands": vocab.encode(candidates),
        "doc_words": doc_words,
        "cand_words": [words.setdefault(c, len(words)) for c in candidates],
        "answer": candidates.index(ex.answer),
        "index": index,
    }


def collate(items: list[dict], pad_id: int) -> dict[str, Tensor]:
    """One batch of encoded questions (:func:`encode_question`), padded."""
    doc, doc_mask = pad([e["doc"] for e in items], pad_id)
    query, query_mask = pad([e["query"] for e in items], pad_id)
    cands, cand_mask = pad([e["cands"] for e in items], pad_id)
    doc_words, _ = pad([e["doc_words"] for e in items], -1)  # -1 and -2 at padding: never equal
    cand_words, _ = pad([e["cand_words"] for e in items], -2)
    batch = {"doc": doc, "doc_mask": doc_mask, "query": query, "query_mask": query_mask,
             "cands": cands, "cand_mask": cand_mask, "doc_words": doc_words, "cand_words": cand_words,
             "answer": torch.tensor([e["answer"] for e in items], dtype=torch.long),
             "index": torch.tensor([e["index"] for e in items], dtype=torch.long)}
    if "group" in items[0]:
        batch["group"] = torch.tensor([e["group"] for e in items], dtype=torch.long)
    return batch


def padding_fraction(batches: Batches) -> float:
    """Share of document positions in cloze batches that are padding."""
    real = total = 0
    for g in batches.groups:
        lengths = [len(batches.encoded[j]["doc"]) for j in g]
        real += sum(lengths)
        total += max(lengths) * len(lengths)
    return 1.0 - real / max(total, 1)


# ----------------------------------------------------------------------------- the pipeline


def question_words(questions: list[ClozeExample]):
    """Every word of the questions' documents, queries and candidates, in order."""
    for ex in questions:
        yield from ex.document
        yield from ex.query
        yield from ex.candidates


class ClozePipeline:
    """Questions of each split -> vocabulary (of the training questions, or of all: ``vocabulary``) -> encoded ->
    batches."""

    task = "cloze"
    default_eval_batch_size = 64

    def __init__(self, cfg: ClozeDataConfig, data_root: Path, vocab: Vocab | None = None,
                 examples: dict[str, list[ClozeExample]] | None = None):
        """``examples`` (split -> questions) replaces reading those splits of the dataset (benchmarks, tests)."""
        self.cfg = cfg
        self.data_root = Path(data_root)
        self._examples: dict[str, list[ClozeExample]] = dict(examples or {})
        self._encoded: dict[str, list[dict]] = {}
        self.dropped: dict[str, int] = {}  # training questions whose answer is not in the document
        if vocab is None:
            vocab = Vocab.build(question_words(self.examples("train")), min_count=cfg.min_count, max_size=cfg.max_vocab)
            if cfg.vocabulary == "all":  # the held-out questions' new words, each a row of its own
                new = Counter(w for split in ("valid", "test") for w in question_words(self.examples(split))
                              if w not in vocab)
                vocab = Vocab(vocab.itos + sorted(new, key=lambda w: (-new[w], w)))
        self.vocab = vocab
        self.groups: list[str] = [f"qa{t}" for t in cfg.tasks] if cfg.name == "babi" else []  # accuracy per group

    def examples(self, split: str) -> list[ClozeExample]:
        if split not in self._examples:
            for name, questions in LOADERS[self.cfg.name](self.cfg, self.data_root, split).items():
                self._examples.setdefault(name, questions)
            if not self._examples.get(split):
                raise MemreadError(f"the {split} split of this cloze dataset has no questions")
        return self._examples[split]

    def encoded(self, split: str) -> list[dict]:
        if split not in self._encoded:
            out, dropped = [], 0
            group_id = {g: i for i, g in enumerate(self.groups)}
            for ex in self.examples(split):
                if split == "train" and ex.answer not in ex.document:
                    dropped += 1  # a pointer cannot learn it
                    continue
                item = encode_question(ex, self.vocab, len(out))
                if self.groups:
                    item["group"] = group_id[ex.group]
                out.append(item)
            self.dropped[split] = dropped
            self._encoded[split] = out
        return self._encoded[split]

    def batches(self, split: str, batch_size: int, epoch: int = 0, seed: int = 0) -> Batches:
        enc = self.encoded(split)
        g = torch.Generator().manual_seed(seed * 1_000_003 + epoch) if split == "train" else None
        return self.batches_of(enc, batch_order([len(e["doc"]) for e in enc], batch_size, self.cfg.bucket, g))

    def batches_of(self, encoded: list[dict], groups: list[list[int]]) -> Batches:
        """Batches of encoded questions; ``groups[i]`` lists the question indices of batch i."""
        return Batches(encoded, groups, functools.partial(collate, pad_id=self.vocab.pad_id))

    def example_batches(self, examples: list[ClozeExample], batch_size: int) -> Batches:
        """Questions (:func:`memread.data.records.cloze_example`) encoded as evaluation encodes them (none is
        dropped; ``index`` = position in ``examples``) and batched in the given order."""
        group_id = {g: i for i, g in enumerate(self.groups)}
        encoded = []
        for i, ex in enumerate(examples):
            item = encode_question(ex, self.vocab, i)
            if self.groups:
                item["group"] = group_id.get(ex.group, 0)
            encoded.append(item)
        return self.batches_of(encoded, in_order(len(encoded), batch_size))

    def tokens_in(self, batch: dict) -> int:
        return int(batch["doc_mask"].sum() + batch["query_mask"].sum())
