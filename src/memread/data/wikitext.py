"""WikiText-2 / WikiText-103 (Merity et al. 2016), tokenised version, read as documents.

The official layout under the data root::

    wikitext-2/wiki.train.tokens   wiki.valid.tokens   wiki.test.tokens      (plain or .gz)
    wikitext-103/wiki.train.tokens wiki.valid.tokens   wiki.test.tokens

Every line becomes its tokens followed by ``<eos>`` (blank lines too), which gives the standard token
counts (WikiText-2 valid: 217,646). An article starts at its title line ``= Title =`` (one ``=`` on
each side; sections are ``= = Section = =``), so the corpus is a list of articles: the documents a
language model resets its state between, as Daniluk et al. (2017) do for their Wikipedia corpus.
Lines before the first title belong to the first article.

The paper's preprocessing options: :func:`map_numbers` replaces every number token with ``N``; the
vocabulary cap with ``<unk>`` is the LM task's ``max_vocab`` (WikiText's own ``<unk>`` is the same
symbol).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from memread.data.ptb import EOS
from memread.data.root import find_file
from memread.data.text import read_lines
from memread.errors import MemreadError

SPLITS = {"train": "wiki.train.tokens", "valid": "wiki.valid.tokens", "test": "wiki.test.tokens"}
NAMES = ("wikitext-2", "wikitext-103")
HOW_TO_GET = ("download the tokenised WikiText archive (wikitext-2-v1.zip / wikitext-103-v1.zip, Merity et al. 2016) "
              "and unpack its wiki.{train,valid,test}.tokens there (plain or gzipped)")
NUMBER = re.compile(r"^[+-]?\d+(?:[.,:/]\d+)*$")


def wikitext_path(root: Path, name: str, split: str) -> Path:
    if name not in NAMES:
        raise MemreadError(f"unknown WikiText version {name!r}; expected one of {', '.join(NAMES)}")
    return find_file(root, name, SPLITS[split], HOW_TO_GET)


def is_article_title(line: str) -> bool:
    """``= Title =`` (one ``=`` each side); ``= = Section = =`` is not an article title."""
    s = line.strip()
    return len(s) > 4 and s.startswith("= ") and s.endswith(" =") and not s.startswith("= =")


def read_wikitext(path: Path) -> list[list[str]]:
    """Articles of one WikiText file: lists of tokens, ``<eos>`` after every line.

    A title line stands between blank lines (`` \n = Title = \n \n``); that tells titles from the few
    formula lines that also look like ``= ... =`` (WikiText-2 test has two).
    """
    lines: list[tuple[int, str]] = list(read_lines(path))
    blank = [not line.strip() for _, line in lines]
    documents: list[list[str]] = []
    current: list[str] = []
    for i, (lineno, line) in enumerate(lines):
        words = [sys.intern(w) for w in line.split()]  # one string object per word type (WikiText-103: 103M tokens)
        if EOS in words:
            raise MemreadError(f"{path}:{lineno}: literal {EOS} inside a line; WikiText files have none")
        title = is_article_title(line) and (i == 0 or blank[i - 1]) and (i + 1 == len(lines) or blank[i + 1])
        if title and any(w != EOS for w in current):
            documents.append(current)
            current = []
        current.extend(words)
        current.append(EOS)
    if any(w != EOS for w in current):
        documents.append(current)
    elif documents:
        documents[-1].extend(current)  # trailing blank lines
    if not documents:
        raise MemreadError(f"{path}: empty corpus file")
    return documents


def map_numbers(tokens: list[str], symbol: str = "N") -> list[str]:
    """Every number token (``1990``, ``3.5``, ``1,000``, ``12:30``) becomes ``symbol``."""
    return [symbol if NUMBER.match(t) else t for t in tokens]


# the check `memread data download` runs on each file it extracts (memread.data.formats.CHECKS): the number of
# records, or MemreadError


def check_wikitext(path: Path) -> int:
    n, first = 0, None
    for n, line in read_lines(path):
        if first is None and line.strip():
            first = line
            if not is_article_title(line):
                raise MemreadError(f"{path.name}:{n}: expected an article title '= Title =', got {line[:40]!r}")
        if EOS in line.split():
            raise MemreadError(f"{path.name}:{n}: literal {EOS} inside a line")
    if first is None:
        raise MemreadError(f"{path.name}: no text")
    return n
