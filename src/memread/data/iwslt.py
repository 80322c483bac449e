"""IWSLT 2014 German-English in the MIXER preprocessing (Ranzato et al. 2015), the corpus of the NSE
paper's translation experiment (Munkhdalai & Yu 2016, section 4.5).

Layout under the data root (``.gz`` or plain)::

    iwslt14-de-en/{train,valid,test}.de-en.{de,en}               tokenized (Moses) and lowercased
    iwslt14-de-en/{train,valid,test}.de-en.{de,en}.wmixerprep    the same, rare words mapped to <unk>

One sentence per line; the ``de`` and ``en`` files of a split are line-aligned (line ``i`` of one is
the translation of line ``i`` of the other). Words are separated by single spaces; the English side
keeps Moses' escapes (``&apos;s``, ``&quot;``) as tokens, and so do we.

**Only valid and test are available here** (6,969 and 6,750 pairs; the 153k-pair train files were not
obtained, see the data root's MANIFEST.md). The translation task therefore trains on ``valid`` and
evaluates on ``test`` by default (:mod:`memread.data.pipelines.translation`); results from that setup are NOT
comparable with the paper's 17.02 / 17.13 / 17.93 test BLEU, which come from 110k training pairs.

**Length filter.** As in the paper, pairs with more than ``max_len`` (25) words on either side are
dropped (``max_len = 0``: none); so are pairs with an empty side (the model could not read them).
:func:`read_iwslt` returns the kept pairs and the number dropped.
"""

from __future__ import annotations

import gzip
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import zip_longest
from pathlib import Path
from typing import TYPE_CHECKING

from memread.data.root import find_file
from memread.data.text import read_lines
from memread.errors import MemreadError

if TYPE_CHECKING:
    from memread.data.catalog import Dataset

FOLDER = "iwslt14-de-en"
LANGS = ("de", "en")
SPLITS = ("train", "valid", "test")


@dataclass(frozen=True)
class TranslationPair:
    source: tuple[str, ...]
    target: tuple[str, ...]
    line: int  # 1-based line number in the files (the pair's position in the split)


def iwslt_path(root: Path, split: str, lang: str, unk_mapped: bool = False) -> Path:
    """``root/iwslt14-de-en/{split}.de-en.{lang}[.wmixerprep](.gz)``: the gzipped file if present, else
    the plain one; a missing file is one clear error naming what was expected."""
    if split not in SPLITS:
        raise MemreadError(f"unknown IWSLT14 split {split!r}; expected one of {', '.join(SPLITS)}")
    if lang not in LANGS:
        raise MemreadError(f"unknown IWSLT14 language {lang!r}; expected de or en")
    name = f"{split}.de-en.{lang}" + (".wmixerprep" if unk_mapped else "")
    how = ("get them with memread data download iwslt14-de-en (the MIXER-preprocessed files), or train on valid, "
           "see memread.data.pipelines.translation" if split == "train"
           else "memread data download iwslt14-de-en (the MIXER preprocessing of IWSLT14 de-en)")
    return find_file(Path(root), FOLDER, name, how)


def read_sentences(path: Path) -> list[tuple[str, ...]]:
    """Every line of a tokenized text file as a tuple of words (an empty line is an empty tuple)."""
    return [tuple(line.split()) for _, line in read_lines(path)]


def read_iwslt(root: Path, split: str, source: str = "en", unk_mapped: bool = False, max_len: int = 25,
               lines: slice | None = None) -> tuple[list[TranslationPair], int]:
    """Line-aligned ``(source, target)`` pairs of a split, ``source`` in {en, de} (the other language is
    the target; the NSE paper translates English to German), and the number of pairs dropped by the
    length filter. ``lines`` selects pairs by position before filtering (a held-out part of a file)."""
    if source not in LANGS:
        raise MemreadError(f"unknown source language {source!r}; expected en or de")
    target = "de" if source == "en" else "en"
    src_path = iwslt_path(root, split, source, unk_mapped)
    tgt_path = iwslt_path(root, split, target, unk_mapped)
    src, tgt = read_sentences(src_path), read_sentences(tgt_path)
    if len(src) != len(tgt):
        raise MemreadError(f"IWSLT14 {split}: the files are not line-aligned: {src_path} has {len(src):,} lines, "
                           f"{tgt_path} has {len(tgt):,} lines")
    numbered = list(enumerate(zip(src, tgt), 1))
    if lines is not None:
        numbered = numbered[lines]
    pairs, dropped = [], 0
    for lineno, (s, t) in numbered:
        if not s or not t or (max_len and (len(s) > max_len or len(t) > max_len)):
            dropped += 1
            continue
        pairs.append(TranslationPair(s, t, lineno))
    return pairs, dropped


# the check `memread data download` runs over the dataset's files together (memread.data.formats.SET_CHECKS)


def _raw_lines(path: Path, name: str) -> Iterator[tuple[str, bool]]:
    """``(line, whether it ended with a newline)`` for every line of a plain or gzipped UTF-8 file."""
    try:
        with (gzip.open if path.suffix == ".gz" else open)(path, "rb") as f:
            for lineno, raw in enumerate(f, 1):
                if b"\x00" in raw:
                    raise MemreadError(f"{name}:{lineno}: NUL byte in a text file")
                try:
                    line = raw.decode("utf-8")
                except UnicodeDecodeError as e:
                    raise MemreadError(f"{name}:{lineno}: not UTF-8 text ({e.reason} at column {e.start + 1})") \
                        from None
                yield line, line.endswith("\n")
    except (gzip.BadGzipFile, EOFError, zlib.error) as e:
        raise MemreadError(f"{name}: not a readable gzip file ({e})") from None


def check_iwslt(spec: Dataset, files: dict[str, Path], fetched: set[str]) -> None:
    """Each split with a file fetched in this run: the four files ``{de,en}[.wmixerprep]`` have the same
    number of lines, every file ends with a newline, and each ``.wmixerprep`` line has the raw line's words
    with some replaced by ``<unk>`` (MIXER's rare-word mapping: as many words, each the same or <unk>)."""
    for split in SPLITS:
        names = [f"{split}.de-en.{lang}{x}" for lang in LANGS for x in ("", ".wmixerprep")]
        if not fetched & set(names) or not all(n in files for n in names):
            continue
        streams = [_raw_lines(files[n], n) for n in names]
        counts, ended = [0] * 4, [True] * 4
        for lineno, rows in enumerate(zip_longest(*streams), 1):
            for k, row in enumerate(rows):
                if row is not None:
                    counts[k], ended[k] = lineno, row[1]
            if any(row is None for row in rows):
                continue  # the line counts differ: reported below
            for raw, mapped, raw_name, mapped_name in ((rows[0][0], rows[1][0], names[0], names[1]),
                                                       (rows[2][0], rows[3][0], names[2], names[3])):
                a, b = raw.split(), mapped.split()
                if len(a) != len(b):
                    raise MemreadError(f"{mapped_name}:{lineno} has {len(b)} words, {raw_name}:{lineno} has {len(a)}")
                bad = next((i for i, (u, v) in enumerate(zip(a, b)) if u != v and v != "<unk>"), None)
                if bad is not None:
                    raise MemreadError(f"{mapped_name}:{lineno}: word {bad + 1} is {b[bad]!r}, expected "
                                       f"{a[bad]!r} or <unk> as in {raw_name}")
        if len(set(counts)) > 1:
            raise MemreadError(f"{split} is not line-aligned: " + ", ".join(f"{n} has {c:,} lines"
                                                                           for n, c in zip(names, counts)))
        if not counts[0]:
            raise MemreadError(f"{names[0]} and the other {split} files are empty")
        for n, c, e in zip(names, counts, ended):
            if not e:
                raise MemreadError(f"{n}:{c}: the file does not end with a newline (truncated?)")
