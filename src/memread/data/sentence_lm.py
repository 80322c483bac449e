"""Language modelling one sentence at a time: the LSTMN authors' protocol (``[data] context = "sentence"``).

Each sentence (a line of the corpus) is one example, read on its own::

    input   START  w_1  ..  w_n
    target  w_1    ..   w_n  END

right-padded to the longest sentence of its batch, the loss masked over the padding, nothing carried from
one sentence to the next (the batches are :class:`memread.data.batching.Batches`, which do not continue each
other, so the loop starts every batch from an empty state: an LSTMN's tape is exactly the sentence read so far).
``START`` is ``<s>`` and ``END`` is ``<eos>``, the stream's end-of-line token, so the two protocols share
every word of their vocabularies. A model trained on the stream has no ``<s>``: read per sentence it starts
each sentence with ``<eos>``, the token that precedes a sentence in the stream.

Perplexity is ``exp(NLL / N)``: NLL summed over every predicted word and every ``END``, N their number.
``START`` is never a target. It does not depend on the batch size or on the order of the sentences.

The rules for what a corpus holds:

- a blank line holds no sentence and is skipped (in the ``text`` format blank lines separate documents);
- a sentence longer than ``data.max_len`` words (0: no limit) is refused, naming its file and line: nothing
  is truncated;
- a literal ``<s>`` in a line is refused (it would read as a sentence start).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Sequence

import torch

from memread.data.batching import Batches, batch_order, pad
from memread.data.ptb import EOS
from memread.data.vocab import Vocab
from memread.errors import MemreadError

START = "<s>"


@dataclass(frozen=True)
class Sentence:
    words: tuple[str, ...]  # without START and END
    where: str  # "file:line", or the sentence's place in a generated corpus


def lines_at_eos(tokens: Sequence[str]) -> list[list[str]]:
    """A token stream with ``<eos>`` after every line -> the lines' words (an empty list for a blank line)."""
    lines: list[list[str]] = []
    current: list[str] = []
    for t in tokens:
        if t == EOS:
            lines.append(current)
            current = []
        else:
            current.append(t)
    if current:
        lines.append(current)
    return lines


def start_id(vocab: Vocab) -> int:
    """The id that starts a sentence: ``<s>``, or ``<eos>`` for a vocabulary built from a stream."""
    if START in vocab.stoi:
        return vocab.stoi[START]
    if EOS in vocab.stoi:
        return vocab.stoi[EOS]
    raise MemreadError(f"the vocabulary has neither {START} nor {EOS}: it cannot read sentences")


def check_sentences(sentences: Sequence[Sentence], max_len: int) -> None:
    """One clear error for the first sentence the rules refuse (module docstring)."""
    for s in sentences:
        if START in s.words:
            raise MemreadError(f"{s.where}: a literal {START} in the line; with data.context = \"sentence\" it "
                               f"marks a sentence's start (remove or rename it)")
        if max_len and len(s.words) > max_len:
            raise MemreadError(f"{s.where}: a sentence of {len(s.words)} words, longer than data.max_len = {max_len}; "
                               f"nothing is truncated: raise data.max_len (0: no limit) or split the line")


def encode(sentence: Sequence[str], vocab: Vocab) -> list[int]:
    """``START w_1 .. w_n END`` as ids."""
    return [start_id(vocab), *vocab.encode(sentence), vocab.stoi[EOS]]


def collate(items: list[list[int]], pad_id: int) -> dict:
    """Encoded sentences -> ``{"input", "target", "mask"}`` (B, T), T the longest sentence's n + 1."""
    ids, mask = pad(items, pad_id)  # (B, n + 2)
    mask = mask[:, 1:]  # a target's position is its input's
    return {"input": ids[:, :-1].masked_fill(~mask, pad_id), "target": ids[:, 1:], "mask": mask}


def sentence_batches(encoded: Sequence[list[int]], batch_size: int, bucket: int, pad_id: int,
                     generator: torch.Generator | None) -> Batches:
    """Batches of encoded sentences: for training (a generator) shuffled, sorted by length within pools of
    ``bucket`` batches (0: no sorting); for evaluation sorted by length (``bucket`` > 0) or in order."""
    groups = batch_order([len(e) for e in encoded], batch_size, bucket, generator)
    return Batches(encoded, groups, partial(collate, pad_id=pad_id))


def in_order_batches(encoded: Sequence[list[int]], batch_size: int, pad_id: int) -> Batches:
    """Batches of encoded sentences in the order given (``memread predict`` maps outputs back to inputs)."""
    if batch_size < 1:
        raise MemreadError(f"batch size must be at least 1, got {batch_size}")
    return Batches(encoded, batch_order([len(e) for e in encoded], batch_size, 0, None), partial(collate, pad_id=pad_id))
