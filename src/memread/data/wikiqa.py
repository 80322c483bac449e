"""WikiQA (Yang et al. 2015): answer sentence selection over Wikipedia summary sentences.

``WikiQA-{train,dev,test}.tsv`` (CRLF line endings in the official copies) start with the header
``QuestionID, Question, DocumentID, DocumentTitle, SentenceID, Sentence, Label`` (TAB-separated);
each further row is one candidate sentence for a question, label 1 if it answers it. A question's
candidates are consecutive rows, in the order of their SentenceID suffix (``D8-0``, ``D8-1``, ...).

The ``.ref`` files are TREC qrels, one line per candidate, four space-separated integers::

    question  0  sentence  label

``question`` is the 1-based ordinal of the question in the split's ``.tsv`` (the order in which
questions first appear, not the ``Q8`` id), the second column is the unused TREC iteration (always 0),
``sentence`` is the 0-based index of the candidate within its question (equal to the number after
the ``-`` in SentenceID) and ``label`` is 0 or 1. ``WikiQA-{dev,test}-filtered.ref`` keep only the
questions that have at least one correct *and* at least one incorrect candidate (122 dev and 237 test
questions; see :func:`memread.metrics.counts_for_ranking` and tests/test_sentence_data.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from memread.data.root import find_file
from memread.data.text import read_lines
from memread.errors import MemreadError

HEADER = ("QuestionID", "Question", "DocumentID", "DocumentTitle", "SentenceID", "Sentence", "Label")
SPLIT_FILES = {"train": "train", "valid": "dev", "dev": "dev", "test": "test"}

# Roughly the PTB tokenisation of the corpus's own .txt files (and of GloVe's training text): numbers
# keep inner . and , ("2.1", "6,000"); words keep inner hyphens and apostrophes ("co-founded",
# "O'Neil"), but the clitics 's 're 've 'll 'd 'm and n't are split off ("Jackson 's", "do n't");
# every other non-space character is a token of its own ("No." -> "No", ".").
_CLITIC = r"['\u2019](?:s|re|ve|ll|d|m)\b"
_TOKEN = re.compile(
    r"\d+(?:[.,]\d+)*(?!\w)"  # numbers
    r"|\w+(?=n['\u2019]t\b)|n['\u2019]t\b"  # do n't
    rf"|{_CLITIC}"
    rf"|\w+(?:-\w+|['\u2019](?!(?:s|re|ve|ll|d|m)\b)\w+)*"  # words
    r"|[^\w\s]",
    re.IGNORECASE,
)


def tokenize(text: str) -> list[str]:
    """``"Who's O'Neil? He didn't earn $2.5 million."`` ->
    ``Who 's O'Neil ? He did n't earn $ 2.5 million .`` (a list of those tokens; case kept)."""
    return _TOKEN.findall(text)


@dataclass(frozen=True)
class AnswerCandidate:
    qid: str
    question: tuple[str, ...]
    sentence_id: str
    sentence: tuple[str, ...]
    label: int


class RefRow(NamedTuple):
    question: int  # 1-based ordinal of the question in its split
    sentence: int  # 0-based index of the candidate within the question
    label: int


def wikiqa_path(root: Path, split: str, suffix: str = ".tsv") -> Path:
    """``root/wikiqa/WikiQA-{train,dev,test}{suffix}`` (or ``.gz``); ``valid`` means dev.

    ``suffix`` may also be ``.ref`` or ``-filtered.ref`` (dev and test only).
    """
    if split not in SPLIT_FILES:
        raise MemreadError(f"unknown WikiQA split {split!r}; expected train, valid or test")
    return find_file(Path(root), "wikiqa", f"WikiQA-{SPLIT_FILES[split]}{suffix}",
                     "the Microsoft Research WikiQA Corpus v1.0")


def read_wikiqa(path: Path) -> list[AnswerCandidate]:
    """Every candidate row of a WikiQA ``.tsv``, in file order."""
    path = Path(path)
    candidates: list[AnswerCandidate] = []
    header_seen = False
    for lineno, line in read_lines(path):
        if not line.strip():
            continue
        fields = line.split("\t")
        if not header_seen:
            if tuple(fields) != HEADER:
                raise MemreadError(f"{path}:{lineno}: expected the header {' '.join(HEADER)} (TAB-separated)")
            header_seen = True
            continue
        if len(fields) != len(HEADER):
            raise MemreadError(f"{path}:{lineno}: {len(fields)} TAB-separated columns, expected {len(HEADER)}")
        qid, question, _, _, sentence_id, sentence, label = fields
        if label not in ("0", "1"):
            raise MemreadError(f"{path}:{lineno}: label {label!r}, expected 0 or 1")
        if not qid or not sentence_id:
            raise MemreadError(f"{path}:{lineno}: empty QuestionID or SentenceID")
        candidates.append(AnswerCandidate(qid, tuple(tokenize(question)), sentence_id,
                                          tuple(tokenize(sentence)), int(label)))
    if not candidates:
        raise MemreadError(f"{path}: no candidate rows found")
    return candidates


def by_question(candidates: list[AnswerCandidate]) -> list[tuple[str, list[AnswerCandidate]]]:
    """Group consecutive rows by question, in file order; the i-th group is ``.ref`` question i + 1."""
    groups: list[tuple[str, list[AnswerCandidate]]] = []
    for c in candidates:
        if groups and groups[-1][0] == c.qid:
            groups[-1][1].append(c)
        else:
            groups.append((c.qid, [c]))
    return groups


def read_ref(path: Path) -> list[RefRow]:
    """Rows of a TREC-style ``.ref`` / ``-filtered.ref`` file: ``question 0 sentence label``."""
    path = Path(path)
    rows: list[RefRow] = []
    for lineno, line in read_lines(path):
        if not line.strip():
            continue
        fields = line.split()
        if len(fields) != 4 or not all(f.isdigit() for f in fields):
            raise MemreadError(f"{path}:{lineno}: expected 'question 0 sentence label' (four integers)")
        question, _, sentence, label = map(int, fields)
        if label not in (0, 1):
            raise MemreadError(f"{path}:{lineno}: label {label}, expected 0 or 1")
        rows.append(RefRow(question, sentence, label))
    if not rows:
        raise MemreadError(f"{path}: no rows found")
    return rows
