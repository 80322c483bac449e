"""The Children's Book Test question format (also written by memread's story and cloze builders).

One question is a block of numbered lines followed by a blank line::

    1 first context sentence .
    ...
    20 last context sentence .
    21 query with XXXXX in it .<TAB>answer<TAB><TAB>cand1|cand2|...|cand10

CBT has exactly 20 context lines; the reader accepts any number >= 1 so that memread's own
generated stories can use the same format. The official ``cbtest_*_train.txt`` files also hold a
``_BOOK_TITLE_ : name`` line between books; the reader skips it (outside a question) and records the
book in :attr:`ClozeExample.source`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from memread.data.text import read_lines
from memread.errors import MemreadError

BLANK = "XXXXX"
BOOK_TITLE = "_BOOK_TITLE_"


@dataclass
class ClozeExample:
    context: list[list[str]]  # sentences of tokens
    query: list[str]  # tokens, one of them XXXXX
    answer: str
    candidates: list[str]
    source: str = ""  # the book (or story, task) the question comes from, when known
    group: str = ""  # a label to report accuracy by (the bAbI task), when there is one

    @property
    def document(self) -> list[str]:
        return [w for sentence in self.context for w in sentence]


def _split_numbered(line: str, expected: int, path: Path, lineno: int) -> str:
    number, _, rest = line.partition(" ")
    if not number.isdigit() or int(number) != expected:
        raise MemreadError(f"{path}:{lineno}: expected line number {expected}, got {line[:40]!r}")
    return rest


def read_cbt(path: Path, context_lines: int | None = None) -> list[ClozeExample]:
    """Parse a CBT-format file. ``context_lines`` (20 for CBT) enforces the context length if given."""
    examples: list[ClozeExample] = []
    context: list[list[str]] = []
    book = ""
    for lineno, line in read_lines(path):
        if line.startswith(BOOK_TITLE) and not context:
            book = line.partition(":")[2].strip()
            continue
        if not line.strip():
            if context:
                raise MemreadError(f"{path}:{lineno}: blank line inside a question (no query line after line {len(context)})")
            continue
        text = _split_numbered(line, len(context) + 1, path, lineno)
        if "\t" not in text:
            context.append(text.split())
            continue
        fields = text.split("\t")
        if len(fields) != 4 or fields[2] != "":
            raise MemreadError(f"{path}:{lineno}: query line must be 'N query<TAB>answer<TAB><TAB>c1|c2|...'")
        query, answer, _, cands = fields
        query_tokens = query.split()
        candidates = [c for c in cands.split("|") if c]
        if BLANK not in query_tokens:
            raise MemreadError(f"{path}:{lineno}: query has no {BLANK}")
        if not answer or answer not in candidates:
            raise MemreadError(f"{path}:{lineno}: answer {answer!r} is not among the candidates")
        if not context:
            raise MemreadError(f"{path}:{lineno}: query without context lines")
        if context_lines is not None and len(context) != context_lines:
            raise MemreadError(f"{path}:{lineno}: {len(context)} context lines, expected {context_lines}")
        examples.append(ClozeExample(context, query_tokens, answer, candidates, source=book))
        context = []
    if context:
        raise MemreadError(f"{path}: ends inside a question (after {len(context)} context lines, no query line)")
    if not examples:
        raise MemreadError(f"{path}: no questions found")
    return examples


def write_cbt(examples: list[ClozeExample], path: Path) -> None:
    """Write CBT format; a ``_BOOK_TITLE_`` line precedes each run of questions from a new source."""
    with open(path, "w", encoding="utf-8") as f:
        book = ""
        for ex in examples:
            if ex.source and ex.source != book:
                f.write(f"{BOOK_TITLE} : {ex.source}\n")
                book = ex.source
            for i, sentence in enumerate(ex.context, 1):
                f.write(f"{i} {' '.join(sentence)}\n")
            f.write(f"{len(ex.context) + 1} {' '.join(ex.query)}\t{ex.answer}\t\t{'|'.join(ex.candidates)}\n\n")


# the check `memread data download` runs on each file it extracts (memread.data.formats.CHECKS): the number of
# records, or MemreadError


def check_cbt(path: Path, context_lines: int = 20) -> int:
    """CBT questions, streamed (memread.data.cbt.read_cbt's rules, without keeping the questions)."""
    questions, context = 0, 0
    for lineno, line in read_lines(path):
        if line.startswith(BOOK_TITLE) and not context:
            continue
        if not line.strip():
            if context:
                raise MemreadError(f"{path.name}:{lineno}: blank line inside a question")
            continue
        number, _, text = line.partition(" ")
        if not number.isdigit() or int(number) != context + 1:
            raise MemreadError(f"{path.name}:{lineno}: expected line number {context + 1}, got {line[:40]!r}")
        if "\t" not in text:
            context += 1
            continue
        fields = text.split("\t")
        if len(fields) != 4 or fields[2] != "" or BLANK not in fields[0].split() \
                or not fields[1] or fields[1] not in fields[3].split("|"):
            raise MemreadError(f"{path.name}:{lineno}: not a CBT query line 'N query<TAB>answer<TAB><TAB>c1|c2|...'")
        if context != context_lines:
            raise MemreadError(f"{path.name}:{lineno}: {context} context lines, expected {context_lines}")
        questions, context = questions + 1, 0
    if context:
        raise MemreadError(f"{path.name}: ends inside a question")
    return questions


def check_cbt_books(path: Path) -> int:
    books = 0
    for lineno, line in read_lines(path):
        if lineno == 1 and not line.startswith(BOOK_TITLE):
            raise MemreadError(f"{path.name}:1: expected a '{BOOK_TITLE} : name' line, got {line[:40]!r}")
        books += line.startswith(BOOK_TITLE)
    if not books:
        raise MemreadError(f"{path.name}: empty")
    return books
