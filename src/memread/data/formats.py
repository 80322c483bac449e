"""What ``memread data download`` checks in each file before it moves any into place.

A catalog member is checked by its sha256 where the catalog pins one, otherwise by its structure: the check
its catalog entry names (``Member.check``), which reads the file with the rules of memread's reader for that
dataset and returns its number of records, compared with the official count where one is known. The checks
live beside their readers (``check_wikitext`` in :mod:`memread.data.wikitext`, ``check_snli``, ``check_babi``,
``check_cbt`` and ``check_cbt_books``, ``check_rc_question`` in :mod:`memread.data.cnn`); GloVe, which memread
reads as vectors rather than a corpus, has its check here. A dataset may also name a check over its files
together (``Dataset.check``, :data:`SET_CHECKS`: IWSLT14's line alignment, :func:`memread.data.iwslt.check_iwslt`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from memread.data.babi import check_babi
from memread.data.catalog import Dataset, Member
from memread.data.cbt import check_cbt, check_cbt_books
from memread.data.cnn import check_rc_question
from memread.data.iwslt import check_iwslt
from memread.data.snli import check_snli
from memread.data.text import read_lines
from memread.data.wikitext import check_wikitext
from memread.errors import MemreadError


def check_glove(path: Path, dim: int = 50) -> int:
    """A GloVe text file: a word and ``dim`` numbers a line (the first 1,000 lines parsed); its number of lines."""
    n = 0
    for n, line in read_lines(path):
        fields = line.rstrip().split(" ")
        if len(fields) != dim + 1:
            raise MemreadError(f"{path.name}:{n}: {len(fields) - 1} numbers after the word, expected {dim}")
        if n <= 1000:
            try:
                [float(x) for x in fields[1:]]
            except ValueError:
                raise MemreadError(f"{path.name}:{n}: not a number among the {dim} values") from None
    return n


# each reads one extracted file and returns its number of records, or raises MemreadError
_UNITS = {"babi": "questions", "cbt": "questions", "cbt-books": "books"}  # what a check counts (else lines)
CHECKS: dict[str, Callable[[Path], int]] = {
    "wikitext": check_wikitext, "snli": check_snli, "glove": check_glove, "babi": check_babi, "cbt": check_cbt,
    "cbt-books": check_cbt_books, "rc-question": check_rc_question,
}

# checks over a dataset's files together: (the dataset, {member path: its file}, the member paths fetched
# in this run) -> None, or MemreadError naming the files by their source names
SET_CHECKS: dict[str, Callable[[Dataset, dict[str, Path], set[str]], None]] = {"iwslt": check_iwslt}


def _where(e: MemreadError, path: Path, source: str) -> str:
    """A check's message about an extracted file, naming the archive member instead."""
    msg = str(e)
    if str(path) in msg:
        return msg.replace(str(path), source)
    return source + msg[len(path.name):] if msg.startswith(path.name) else f"{source}: {msg}"


def verify_member(url: str, m: Member, staged: Path, digests: dict[str, str], counts: dict[str, int]) -> None:
    """Refuse member ``m`` as staged (its sha256 in ``digests``; for a folder, its file count in ``counts``)
    unless its sha256 is the pinned one, or its structure check passes and finds the official count."""

    def refuse(what: str) -> MemreadError:
        return MemreadError(f"{url}: {what}; nothing was written (use --no-verify to accept it anyway)")

    if m.kind == "file" and m.path not in digests:  # an optional member the archive lacks
        return
    if m.sha256 is not None:
        if digests[m.path] != m.sha256:
            raise refuse(f"{m.source} has sha256 {digests[m.path]}, expected {m.sha256}")
        return
    check = CHECKS[m.check] if m.check else None
    if m.kind == "tree":
        n = counts[m.path]
        if check is not None:
            for path in sorted((staged / m.path).iterdir()):
                try:
                    check(path)
                except MemreadError as e:
                    raise refuse(_where(e, path, f"{m.source}/{path.name}")) from None
    elif check is not None:
        path = staged / m.written()
        try:
            n = check(path)
        except MemreadError as e:
            raise refuse(_where(e, path, m.source)) from None
    else:
        return
    if m.count is not None and n != m.count:
        unit = "files" if m.kind == "tree" else _UNITS.get(m.check, "lines")
        raise refuse(f"{m.source} has {n:,} {unit}, expected {m.count:,}")
