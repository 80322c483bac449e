"""Penn Treebank, Mikolov's language-modelling version: one sentence per line, ``<unk>`` already in.

Each line becomes its tokens followed by ``<eos>``; the corpus is one continuous stream.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from memread.data.root import find_file
from memread.data.text import read_lines
from memread.errors import MemreadError

EOS = "<eos>"
SPLITS = {"train": "ptb.train.txt", "valid": "ptb.valid.txt", "test": "ptb.test.txt"}
HOW_TO_GET = "get it with `memread data download ptb`, or point --data-root / MEMREAD_DATA at a folder holding ptb/"


def ptb_path(root: Path, split: str) -> Path:
    return find_file(root, "ptb", SPLITS[split], HOW_TO_GET)


def read_ptb(path: Path) -> list[str]:
    """Tokens of one PTB file, ``<eos>`` after every line."""
    tokens: list[str] = []
    for lineno, line in read_lines(path):
        words = line.split()
        if any(w == EOS for w in words):
            raise MemreadError(f"{path}:{lineno}: literal {EOS} inside a line; PTB files have one sentence per line")
        tokens.extend(words)
        tokens.append(EOS)
    if not tokens:
        raise MemreadError(f"{path}: empty corpus file")
    return tokens


def ptb_counts(tokens: list[str]) -> Counter:
    return Counter(tokens)
