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

from dataclasses import dataclass
from pathlib import Path

from memread.data.root import find_file
from memread.data.text import read_lines
from memread.errors import MemreadError

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
