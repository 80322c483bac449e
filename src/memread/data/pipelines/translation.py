"""Translation data: IWSLT14 de-en sentence pairs, or your own parallel files -> source and target
vocabularies -> padded batches.

``[data] name = "parallel"``: your own line-aligned files ``{train}.{source}`` / ``{train}.{target}``
(and ``valid``, ``test``), one sentence per line (:mod:`memread.data.records`), read whole (no length
filter); vocabularies as below.

**Splits.** IWSLT14 in the MIXER preprocessing (:mod:`memread.data.iwslt`), English to German by default
(``source = "en"``, the NSE paper's direction). Only the valid and test files exist in the benchmark
data, so by default the model TRAINS ON THE VALID FILE minus its last ``dev_fraction`` (10%), which is
held out as the dev split ("valid": model selection, lr schedule), and is evaluated on the test file.
RESULTS OF THIS SETUP ARE NOT COMPARABLE WITH THE PAPER'S 17.02 / 17.13 / 17.93 TEST BLEU: 4,691
training pairs instead of 110,439 (and 529 dev, 4,995 test pairs after the filter), GloVe 6B 50d
instead of 840B 300d, and the test set is the whole MIXER test file (filtered to 25 words), not the
paper's 4,793-pair tst2010-2012 selection. With a train file present, ``train_file = "train"`` and
``dev_fraction = 0`` give the usual train/valid/test split. Pairs with more than ``max_len`` words on
either side are dropped from every split (the paper's 25).

**Vocabularies.** Source: the training split's words (the ``src_vocab`` most frequent; 0 = all), plus,
with ``vectors``, every word of any split that has a pretrained vector (its row is the fixed GloVe
vector, loaded by the head). Target: the ``tgt_vocab`` most frequent training words (the paper kept
25,000 German words) and ``<s>``, ``</s>``. Both sides are saved in the run's one ``vocab.json`` as a
single word list whose entries are prefixed ``"src "`` and ``"tgt "`` (:func:`joint_vocab`,
:func:`split_vocab`), so the experiment machinery stores and fingerprints them like any vocabulary.

**Batches** ``{"src", "src_mask" (B, S); "tgt_in" = <s> y_1 .. y_n, "tgt_out" = y_1 .. y_n </s>,
"tgt_mask" (B, T)}``, training batches shuffled by (seed, epoch), optionally length-bucketed.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Literal

import torch

from memread.data.batching import Batches, batch_order, pad
from memread.data.iwslt import TranslationPair, iwslt_path, read_iwslt, read_sentences
from memread.data.pipelines.base import in_order
from memread.data.records import data_file, read_parallel
from memread.data.vocab import PAD, UNK, Vocab, vectors_path
from memread.errors import MemreadError
from memread.modules.embeddings import read_vectors
from memread.typed import NonNegInt, Probability

BOS, EOS = "<s>", "</s>"


@dataclass
class IWSLT14Config:
    name: Literal["iwslt14"] = "iwslt14"
    source: Literal["en", "de"] = "en"  # the NSE paper translates English -> German
    unk_mapped: bool = False  # read the .wmixerprep files (MIXER's rare words already <unk>)
    train_file: Literal["train", "valid"] = "valid"  # no IWSLT14 train file in the benchmark data
    dev_fraction: Probability = 0.1  # the last part of train_file held out as the dev ("valid") split; 0: the valid file
    test_file: Literal["valid", "test"] = "test"
    max_len: NonNegInt = 25  # drop pairs with more words on either side (the paper: 25); 0 = keep all
    src_vocab: NonNegInt = 0  # most frequent source training words kept (0 = all); specials included
    tgt_vocab: NonNegInt = 25000  # most frequent target training words kept (the paper: 25,000); specials included
    min_count: NonNegInt = 1
    vectors: str = ""  # GloVe-format file under the data root, for the source side (head.emb = its size)
    bucket: NonNegInt = 0  # sort training batches by length within pools of this many batches; 0 = no sorting

    def __post_init__(self) -> None:
        if not 0.0 <= self.dev_fraction < 1.0:
            raise MemreadError(f"data.dev_fraction must be in [0, 1), got {self.dev_fraction}")
        if self.train_file == "valid" and self.dev_fraction == 0:
            raise MemreadError("data.train_file = \"valid\" needs data.dev_fraction > 0: the dev split would be the training data")
        if self.train_file == self.test_file:
            raise MemreadError(f"data.train_file and data.test_file are both {self.test_file!r}: the test split would be training data")
        if self.max_len < 0 or self.src_vocab < 0 or self.tgt_vocab < 0:
            raise MemreadError("data.max_len, data.src_vocab and data.tgt_vocab must be >= 0")


@dataclass
class ParallelConfig:
    name: Literal["parallel"] = "parallel"
    train: str = ""  # path prefixes, relative to the data root (or absolute): {train}.{source} and {train}.{target}
    valid: str = ""
    test: str = ""
    source: str = "src"  # the source files' suffix
    target: str = "tgt"  # the target files' suffix
    lowercase: bool = False
    src_vocab: NonNegInt = 0  # most frequent source training words kept (0 = all); specials included
    tgt_vocab: NonNegInt = 0  # most frequent target training words kept (0 = all); specials included
    min_count: NonNegInt = 1
    vectors: str = ""  # GloVe-format file under the data root, for the source side (head.emb = its size)
    bucket: NonNegInt = 0

    def __post_init__(self) -> None:
        if not self.source or not self.target or self.source == self.target:
            raise MemreadError(f"data.source and data.target must be two different file suffixes, got "
                               f"{self.source!r} and {self.target!r}")


TranslationDataConfig = IWSLT14Config | ParallelConfig


# ----------------------------------------------------------------------------- vocabularies


def joint_vocab(src: Vocab, tgt: Vocab) -> Vocab:
    """Both vocabularies as one word list (``"src w"``, ``"tgt w"``), for the run's vocab.json."""
    return Vocab([f"src {w}" for w in src.itos] + [f"tgt {w}" for w in tgt.itos], unk=None, pad=None)


def split_vocab(joint: Vocab) -> tuple[Vocab, Vocab]:
    src = [w[4:] for w in joint.itos if w.startswith("src ")]
    tgt = [w[4:] for w in joint.itos if w.startswith("tgt ")]
    if not src or not tgt or len(src) + len(tgt) != len(joint) or not {PAD, UNK, BOS, EOS} <= set(tgt):
        raise MemreadError("vocab.json: not a translation vocabulary (expected 'src ...' and 'tgt ...' entries)")
    return Vocab(src), Vocab(tgt)


def _capped(counts: Counter, size: int, min_count: int, specials: list[str]) -> list[str]:
    words = sorted((w for w, c in counts.items() if c >= min_count and w not in specials), key=lambda w: (-counts[w], w))
    return specials + (words[: max(0, size - len(specials))] if size else words)


# ----------------------------------------------------------------------------- the pipeline


def collate_pairs(items: list[tuple[list[int], list[int]]], src_pad: int, tgt_pad: int, bos: int, eos: int) -> dict:
    src, src_mask = pad([s for s, _ in items], src_pad)
    tgt_in, tgt_mask = pad([[bos] + t for _, t in items], tgt_pad)
    tgt_out, _ = pad([t + [eos] for _, t in items], tgt_pad)
    return {"src": src, "src_mask": src_mask, "tgt_in": tgt_in, "tgt_out": tgt_out, "tgt_mask": tgt_mask}


class TranslationPipeline:
    """IWSLT14 pairs of each split -> (source ids, target ids) -> padded batches."""

    task = "translate"
    default_eval_batch_size = 128

    def __init__(self, cfg: TranslationDataConfig, data_root: Path, vocab: Vocab | None = None,
                 pairs: dict[str, list[TranslationPair]] | None = None):
        """``vocab`` given (a loaded run): the run's joint vocabulary, nothing is rebuilt (and no vectors
        read: the checkpoint holds the embedding); ``pairs`` (split -> pairs) replaces reading the files
        (tests)."""
        self.cfg = cfg
        self.data_root = Path(data_root)
        self._pairs: dict[str, list[TranslationPair]] = dict(pairs or {})
        self._encoded: dict[str, list[tuple[list[int], list[int]]]] = {}
        self.dropped: dict[str, int] = {}
        self.vectors: dict[str, list[float]] | None = None  # source words' pretrained vectors
        self.vectors_dim = 0
        if vocab is None:
            vocab = joint_vocab(*self._build_vocabs())
        self.vocab = vocab
        self.src_vocab, self.tgt_vocab = split_vocab(vocab)

    # ------------------------------------------------------------------ load
    def pairs(self, split: str) -> list[TranslationPair]:
        """``train``: ``train_file`` without its held-out part; ``valid``: that part (or the valid file
        when ``dev_fraction = 0``); ``test``: ``test_file``. Length-filtered."""
        if split not in self._pairs:
            cfg = self.cfg
            if split not in ("train", "valid", "test"):
                raise MemreadError(f"unknown split {split!r}; expected train, valid or test")
            if cfg.name == "parallel":
                prefix = getattr(cfg, split)
                files = [data_file(self.data_root, f"{prefix}.{side}" if prefix else "", split, cfg.name)
                         for side in (cfg.source, cfg.target)]
                self._pairs[split], self.dropped[split] = read_parallel(*files, lowercase=cfg.lowercase), 0
                return self._pairs[split]
            read = lambda f, lines=None: read_iwslt(self.data_root, f, cfg.source, cfg.unk_mapped, cfg.max_len, lines)  # noqa: E731
            if split == "test":
                pairs, dropped = read(cfg.test_file)
            elif cfg.dev_fraction == 0:
                pairs, dropped = read(cfg.train_file if split == "train" else "valid")
            else:
                n = len(read_sentences(iwslt_path(self.data_root, cfg.train_file, cfg.source, cfg.unk_mapped)))
                cut = n - max(1, round(n * cfg.dev_fraction))
                pairs, dropped = read(cfg.train_file, slice(None, cut) if split == "train" else slice(cut, None))
            if not pairs:
                raise MemreadError(f"IWSLT14: the {split} split has no pairs of at most {cfg.max_len} words")
            self._pairs[split], self.dropped[split] = pairs, dropped
        return self._pairs[split]

    # ------------------------------------------------------------------ vocabularies
    def _build_vocabs(self) -> tuple[Vocab, Vocab]:
        cfg = self.cfg
        train = self.pairs("train")
        src_counts = Counter(w for p in train for w in p.source)
        tgt_counts = Counter(w for p in train for w in p.target)
        src_words = _capped(src_counts, cfg.src_vocab, cfg.min_count, [PAD, UNK])
        if cfg.vectors:
            others = {w for s in ("valid", "test") for p in self.pairs(s) for w in p.source}
            found, self.vectors_dim = read_vectors(vectors_path(self.data_root, cfg.vectors), set(src_counts) | others)
            kept = set(src_words)
            src_words += sorted(w for w in found if w not in kept)  # fixed pretrained rows: no training signal needed
            self.vectors = found
        tgt_words = _capped(tgt_counts, cfg.tgt_vocab, cfg.min_count, [PAD, UNK, BOS, EOS])
        return Vocab(src_words), Vocab(tgt_words)

    # ------------------------------------------------------------------ encode and batch
    def batches(self, split: str, batch_size: int, epoch: int = 0, seed: int = 0) -> Batches:
        if split not in self._encoded:
            self._encoded[split] = [(self.src_vocab.encode(p.source), self.tgt_vocab.encode(p.target))
                                    for p in self.pairs(split)]
        enc = self._encoded[split]
        g = torch.Generator().manual_seed(seed * 1_000_003 + epoch) if split == "train" else None
        groups = batch_order([len(s) + len(t) for s, t in enc], batch_size, self.cfg.bucket, g)
        return Batches(enc, groups, self._collate())

    def example_batches(self, examples: list[TranslationPair], batch_size: int) -> Batches:
        """Pairs (:func:`memread.data.records.translation_example`; an empty target to translate) encoded
        and batched in the given order."""
        enc = [(self.src_vocab.encode(p.source), self.tgt_vocab.encode(p.target)) for p in examples]
        return Batches(enc, in_order(len(enc), batch_size), self._collate())

    def _collate(self):
        return partial(collate_pairs, src_pad=self.src_vocab.pad_id, tgt_pad=self.tgt_vocab.pad_id,
                       bos=self.tgt_vocab.stoi[BOS], eos=self.tgt_vocab.stoi[EOS])

    def tokens_in(self, batch: dict) -> int:
        return int(batch["tgt_mask"].sum())
