"""Sentence-pair data: natural language inference (SNLI) and answer sentence selection (WikiQA).

The pair is ``(first, second)``: SNLI (premise, hypothesis), three classes; WikiQA (candidate sentence,
question), because MMA-NSE "first encodes the answers and then the questions by accessing its own and
the answer encoding memories" (Munkhdalai & Yu, section 4.2), with a relevance label per candidate
that one output unit scores (eq. 16). Batches: ``{"first", "first_mask", "second", "second_mask",
"label"}``; WikiQA's evaluation batches hold whole questions and carry each candidate's ``question``
(an index), so the criterion can rank the candidates of every question (MAP, MRR).

``[data] name = "jsonl-pair"``: your own JSON lines (:mod:`memread.data.records`). ``kind = "classify"``
(the default): ``{"premise", "hypothesis", "label"}``, classes as SNLI's (``labels`` and/or ``classes``),
criterion ``cross_entropy``; ``kind = "rank"``: ``{"question", "answer", "label": 0|1, "qid"}``, one
relevance score per (answer, question) pair as WikiQA's, criterion ``answer_selection`` (set
``[criterion] name = "answer_selection"``). A question's candidates are gathered in the order their
``qid`` first appears, so evaluation ranks each question's candidates together.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import ClassVar, Literal

import torch

from memread.data.batching import Batches, batch_order, pad
from memread.data.pipelines.base import in_order
from memread.data.pipelines.text import TextDataConfig, check_classes, words
from memread.data.records import data_file, pair_example, read_records
from memread.data.vocab import Vocab, vectors_path, vocabulary
from memread.data.snli import PairExample, read_snli, snli_path
from memread.data.wikiqa import read_wikiqa, wikiqa_path
from memread.errors import MemreadError
from memread.typed import NonNegInt


@dataclass
class SNLIConfig(TextDataConfig):
    name: Literal["snli"] = "snli"
    outputs: ClassVar[int] = 3  # entailment, neutral, contradiction


@dataclass
class WikiQAConfig(TextDataConfig):
    name: Literal["wikiqa"] = "wikiqa"
    outputs: ClassVar[int] = 1  # one relevance score per candidate, ranked within its question


@dataclass
class JsonlPairConfig(TextDataConfig):
    name: Literal["jsonl-pair"] = "jsonl-pair"
    train: str = ""  # JSON-lines files, relative to the data root (or absolute), .gz allowed
    valid: str = ""
    test: str = ""
    kind: Literal["classify", "rank"] = "classify"  # premise/hypothesis classes, or answers ranked per question
    classes: NonNegInt = 0  # kind = "classify": number of classes (0: len(labels)), labels 0..classes-1 ...
    labels: tuple[str, ...] = ()  # ... or these names, e.g. ["entailment", "neutral", "contradiction"]
    lowercase: bool = False

    def __post_init__(self) -> None:
        if self.kind == "rank":
            if self.classes or self.labels:
                raise MemreadError("data.classes and data.labels do not apply to kind = \"rank\" (a label is 0 or 1)")
        else:
            check_classes(self.classes, self.labels, "jsonl-pair")

    @property
    def outputs(self) -> int:
        """One relevance score per candidate (rank), else one unit per class."""
        return 1 if self.kind == "rank" else self.classes or len(self.labels)


PairDataConfig = SNLIConfig | WikiQAConfig | JsonlPairConfig


def question_indices(qids: list[str]) -> list[int]:
    """Every candidate's question as an index, in the order the questions first appear."""
    index: dict[str, int] = {}
    return [index.setdefault(q, len(index)) for q in qids]


def collate_pairs(items: list[dict], pad_id: int, questions: bool) -> dict:
    """``questions``: evaluation batches of whole WikiQA questions carry each candidate's question, for
    MAP and MRR (training batches mix candidates of many questions and do not)."""
    first, first_mask = pad([e["first"] for e in items], pad_id)  # (B, T1)
    second, second_mask = pad([e["second"] for e in items], pad_id)  # (B, T2)
    batch = {"first": first, "first_mask": first_mask, "second": second, "second_mask": second_mask,
             "label": torch.tensor([e["label"] for e in items], dtype=torch.long)}
    if questions and "question" in items[0]:
        batch["question"] = torch.tensor([e["question"] for e in items], dtype=torch.long)
    return batch


def question_batches(questions: list[int], batch_size: int) -> list[list[int]]:
    """Evaluation batches of whole questions: candidates in file order, a batch closed once it holds
    ``batch_size`` candidates (a question is never split)."""
    groups: list[list[int]] = []
    current: list[int] = []
    for i, q in enumerate(questions):
        if current and questions[current[-1]] != q and len(current) >= batch_size:
            groups.append(current)
            current = []
        current.append(i)
    if current:
        groups.append(current)
    return groups


class PairPipeline:
    """Pairs of each split -> lowercased words -> ids -> padded batches (WikiQA: whole questions)."""

    task = "pair"
    default_eval_batch_size = 128

    def __init__(self, cfg: PairDataConfig, data_root: Path, vocab: Vocab | None = None,
                 examples: dict[str, list[PairExample]] | None = None, questions: dict[str, list[int]] | None = None):
        """``vocab`` given: a trained run's own vocabulary (no vectors are read). ``examples`` (split ->
        examples) replaces reading the files, and ``questions`` (split -> question index of every
        candidate) gives in-memory WikiQA its questions (tests)."""
        self.cfg = cfg
        self.data_root = Path(data_root)
        self.outputs = cfg.outputs
        self._examples: dict[str, list[PairExample]] = dict(examples or {})
        self._questions: dict[str, list[int]] = dict(questions or {})  # wikiqa: question index of every candidate
        self._encoded: dict[str, list[dict]] = {}
        self.dropped: dict[str, int] = {}  # snli: pairs without a gold label
        self.vectors: dict[str, list[float]] | None = None
        if vocab is None:
            path = vectors_path(self.data_root, cfg.vectors) if cfg.vectors else None
            others = [t for s in ("valid", "test") for e in self.examples(s) for t in (self._words(e.first), self._words(e.second))]
            train = (t for e in self.examples("train") for t in (self._words(e.first), self._words(e.second)))
            vocab, self.vectors = vocabulary(train, others, path, cfg.min_count)
        self.vocab = vocab

    def _words(self, tokens) -> list[str]:
        return words(tokens, self.cfg.lowercase)

    def examples(self, split: str) -> list[PairExample]:
        if split not in self._examples:
            if self.cfg.name == "jsonl-pair":
                self._examples[split] = self._read_jsonl(split)
            elif self.cfg.name == "snli":
                self._examples[split], self.dropped[split] = read_snli(snli_path(self.data_root, split))
            else:
                candidates = read_wikiqa(wikiqa_path(self.data_root, split))
                qids: dict[str, int] = {}
                self._questions[split] = [qids.setdefault(c.qid, len(qids)) for c in candidates]
                self._examples[split] = [PairExample(c.sentence, c.question, c.label) for c in candidates]
            if not self._examples[split]:
                raise MemreadError(f"the {split} split of {self.cfg.name} has no examples")
        return self._examples[split]

    def _read_jsonl(self, split: str) -> list[PairExample]:
        cfg = self.cfg
        path = data_file(self.data_root, getattr(cfg, split), split, cfg.name)
        options = {"kind": cfg.kind, "labels": cfg.labels, "classes": 0 if cfg.kind == "rank" else cfg.outputs}
        examples = read_records(path, lambda record, where: pair_example(record, where, lowercase=cfg.lowercase, **options))
        if cfg.kind == "rank":  # each question's candidates together, questions in order of first appearance
            questions = question_indices([e.qid for e in examples])
            order = sorted(range(len(examples)), key=lambda i: questions[i])
            examples = [examples[i] for i in order]
            self._questions[split] = [questions[i] for i in order]
        return examples

    def encoded(self, split: str) -> list[dict]:
        if split not in self._encoded:
            enc = [{"first": self.vocab.encode(self._words(e.first)), "second": self.vocab.encode(self._words(e.second)),
                    "label": e.label} for e in self.examples(split)]
            for e, q in zip(enc, self._questions.get(split, ())):
                e["question"] = q
            self._encoded[split] = enc
        return self._encoded[split]

    def batches(self, split: str, batch_size: int, epoch: int = 0, seed: int = 0) -> Batches:
        enc = self.encoded(split)
        if split == "train":
            g = torch.Generator().manual_seed(seed * 1_000_003 + epoch)
            groups = batch_order([len(e["first"]) + len(e["second"]) for e in enc], batch_size, self.cfg.bucket, g)
            return Batches(enc, groups, partial(collate_pairs, pad_id=self.vocab.pad_id, questions=False))
        if split in self._questions:
            groups = question_batches(self._questions[split], batch_size)
        else:
            groups = batch_order([len(e["first"]) + len(e["second"]) for e in enc], batch_size, self.cfg.bucket, None)
        return Batches(enc, groups, partial(collate_pairs, pad_id=self.vocab.pad_id, questions=True))

    def example_batches(self, examples: list[PairExample], batch_size: int) -> Batches:
        """Pairs (:func:`memread.data.records.pair_example`) encoded and batched in the given order. Answer
        selection pairs that all carry a ``qid`` also carry their question (an index, by first appearance),
        and a batch closes only between two questions, as evaluation batches do."""
        enc = [{"first": self.vocab.encode(self._words(e.first)), "second": self.vocab.encode(self._words(e.second)),
                "label": e.label} for e in examples]
        groups = in_order(len(enc), batch_size)
        if self.outputs == 1 and examples and all(e.qid for e in examples):
            questions = question_indices([e.qid for e in examples])
            for e, q in zip(enc, questions):
                e["question"] = q
            groups = question_batches(questions, batch_size)
        return Batches(enc, groups, partial(collate_pairs, pad_id=self.vocab.pad_id, questions=True))

    def tokens_in(self, batch: dict) -> int:
        return int(batch["first_mask"].sum() + batch["second_mask"].sum())
