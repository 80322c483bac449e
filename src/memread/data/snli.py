"""SNLI 1.0 (Bowman et al. 2015): premise/hypothesis pairs labelled entailment, neutral or contradiction.

The official ``snli_1.0_{train,dev,test}.jsonl`` files hold one JSON object per line with the fields
``gold_label``, ``sentence1`` (premise), ``sentence2`` (hypothesis), their ``*_binary_parse`` and
``*_parse``, ``annotator_labels``, ``captionID`` and ``pairID``. Pairs whose ``gold_label`` is ``-``
(no annotator majority) are dropped and counted, as everyone does (9,842 dev and 9,824 test pairs
remain). Tokens come from the binary parses (brackets removed; ``-LRB-``/``-RRB-`` -> ``(``/``)``);
a line without a parse falls back to splitting the raw sentence on whitespace.

Train data: the benchmark data root may hold only ``snli_1.0_train_0.01.jsonl.gz``, a random 1%
sample (5,498 labelled pairs) of the official 550k-pair train file. :func:`snli_path` prefers the
full ``snli_1.0_train.jsonl(.gz)`` when present; :func:`is_train_sample` says which one a path is,
so that results trained on the sample are never reported as full-SNLI numbers.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from memread.data.sst import unescape_ptb
from memread.data.text import read_jsonl, read_lines
from memread.errors import MemreadError

SNLI_LABELS = ("entailment", "neutral", "contradiction")
NO_LABEL = "-"
TRAIN_FULL = "snli_1.0_train.jsonl"
TRAIN_SAMPLE = "snli_1.0_train_0.01.jsonl"
SPLIT_FILES = {"train": (TRAIN_FULL, TRAIN_SAMPLE), "valid": ("snli_1.0_dev.jsonl",),
               "dev": ("snli_1.0_dev.jsonl",), "test": ("snli_1.0_test.jsonl",)}


@dataclass(frozen=True)
class PairExample:
    first: tuple[str, ...]  # SNLI: the premise
    second: tuple[str, ...]  # SNLI: the hypothesis
    label: int  # index into SNLI_LABELS
    qid: str = ""  # answer selection: the question the pair belongs to (memread.data.records; "" = none)


def snli_path(root: Path, split: str) -> Path:
    """``root/snli/snli_1.0_{split}.jsonl(.gz)``; ``valid`` means dev; train falls back to the 1% sample."""
    if split not in SPLIT_FILES:
        raise MemreadError(f"unknown SNLI split {split!r}; expected train, valid or test")
    folder = Path(root) / "snli"
    for name in SPLIT_FILES[split]:
        for candidate in (folder / f"{name}.gz", folder / name):
            if candidate.is_file():
                return candidate
    expected = " or ".join(f"{folder / n}(.gz)" for n in SPLIT_FILES[split])
    raise MemreadError(f"SNLI {split} not found: expected {expected} under data root {root}")


def is_train_sample(path: Path) -> bool:
    """True for the 1% train sample (``snli_1.0_train_0.01.jsonl``), not the official train file."""
    return Path(path).name.startswith(TRAIN_SAMPLE)


def parse_tokens(binary_parse: str) -> list[str]:
    """``"( ( Two women ) ( are ... ) )"`` -> ``["Two", "women", "are", ...]``."""
    return [unescape_ptb(t) for t in binary_parse.split() if t not in ("(", ")")]


def _tokens(record: dict, which: str, where: str) -> tuple[str, ...]:
    parse = record.get(f"{which}_binary_parse")
    if isinstance(parse, str) and parse.strip():
        tokens = parse_tokens(parse)
    else:
        if which not in record:
            raise MemreadError(f"{where}: missing field {which!r} (and {which}_binary_parse)")
        if not isinstance(record[which], str):
            raise MemreadError(f"{where}: field {which!r} is not a string")
        tokens = record[which].split()
    if not tokens:
        raise MemreadError(f"{where}: {which} is empty")
    return tuple(tokens)


def read_snli(path: Path) -> tuple[list[PairExample], int]:
    """``(labelled pairs in file order, number of '-' pairs dropped)``."""
    path = Path(path)
    examples: list[PairExample] = []
    dropped = 0
    for where, record in read_jsonl(path):
        if "gold_label" not in record:
            raise MemreadError(f"{where}: missing field 'gold_label'")
        gold = record["gold_label"]
        if gold == NO_LABEL:
            dropped += 1
            continue
        if gold not in SNLI_LABELS:
            raise MemreadError(f"{where}: unknown gold_label {gold!r}; expected one of {', '.join(SNLI_LABELS)} or '-'")
        examples.append(PairExample(_tokens(record, "sentence1", where), _tokens(record, "sentence2", where),
                                    SNLI_LABELS.index(gold)))
    if not examples:
        raise MemreadError(f"{path}: no labelled pairs found")
    return examples, dropped


# the check `memread data download` runs on each file it extracts (memread.data.formats.CHECKS): the number of
# records, or MemreadError


def check_snli(path: Path) -> int:
    n = 0
    for lineno, line in read_lines(path):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as e:
            raise MemreadError(f"{path.name}:{lineno}: invalid JSON ({e.msg})") from None
        if not isinstance(record, dict) or record.get("gold_label") not in (*SNLI_LABELS, NO_LABEL) \
                or not isinstance(record.get("sentence1"), str) or not isinstance(record.get("sentence2"), str):
            raise MemreadError(f"{path.name}:{lineno}: not an SNLI record (gold_label, sentence1, sentence2)")
        n += 1
    return n
