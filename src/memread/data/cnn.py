"""The CNN / Daily Mail reading-comprehension format of DeepMind's rc-data (Hermann et al. 2015).

One question per ``.question`` file; named entities are anonymised as ``@entityN`` and the blank of
the query is ``@placeholder``::

    http://web.archive.org/web/.../some-article       <- URL
                                                       <- blank
    @entity0 ( @entity1 ) -- the whole article on one line
                                                       <- blank
    the query , with @placeholder in it
                                                       <- blank
    @entity3                                           <- the answer
                                                       <- blank
    @entity0:Some Name                                 <- entity mapping, one per line
    ...

The candidates are the distinct entities of the document, in order of first appearance, as in
Kadlec et al. and Chen et al.; their number varies from question to question.
"""

from __future__ import annotations

from pathlib import Path

from memread.data.cbt import ClozeExample
from memread.data.text import read_lines
from memread.errors import MemreadError

PLACEHOLDER = "@placeholder"
ENTITY = "@entity"


def read_question(path: Path) -> ClozeExample:
    """One ``.question`` file; the document is kept as a single context "sentence"."""
    path = Path(path)
    lines = [line for _, line in read_lines(path)]
    if len(lines) < 7 or lines[1].strip() or lines[3].strip() or lines[5].strip():
        raise MemreadError(f"{path}: not an rc-data .question file (expected URL, blank, document, blank, "
                           f"query, blank, answer, blank, entity mapping)")
    document, query, answer = lines[2].split(), lines[4].split(), lines[6].strip()
    if not document:
        raise MemreadError(f"{path}:3: empty document")
    if PLACEHOLDER not in query:
        raise MemreadError(f"{path}:5: query has no {PLACEHOLDER}")
    if not answer.startswith(ENTITY):
        raise MemreadError(f"{path}:7: answer {answer[:40]!r} is not an {ENTITY}N token")
    for lineno, line in enumerate(lines[8:], 9):
        if line.strip() and not (line.startswith(ENTITY) and ":" in line):
            raise MemreadError(f"{path}:{lineno}: expected an entity mapping '@entityN:name', got {line[:40]!r}")
    candidates = list(dict.fromkeys(w for w in document if w.startswith(ENTITY)))
    return ClozeExample(context=[document], query=query, answer=answer, candidates=candidates, source=path.name)


def read_questions(folder: Path) -> list[ClozeExample]:
    """Every ``*.question`` file of a folder (e.g. ``cnn/questions/test``), sorted by file name."""
    folder = Path(folder)
    if not folder.is_dir():
        raise MemreadError(f"{folder}: expected a folder of rc-data .question files")
    paths = sorted(folder.glob("*.question"))
    if not paths:
        raise MemreadError(f"{folder}: no .question files")
    return [read_question(p) for p in paths]


# the check `memread data download` runs on each file it extracts (memread.data.formats.CHECKS): the number of
# records, or MemreadError


def check_rc_question(path: Path) -> int:
    read_question(path)
    return 1
