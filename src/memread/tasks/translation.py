"""Machine translation with encoder-decoder models: the NSE paper's IWSLT14 experiment (Munkhdalai &
Yu 2016, section 4.5).

    source ids -> embedding (GloVe rows, frozen) -> input dropout -> encoder (any reader)
    target ids <s> y_1 .. y_n -> embedding (learned) -> input dropout -> decoder (teacher forcing,
        reading the encoder's states or memory) -> output dropout -> softmax over y_1 .. y_n </s>

trained on the token-level cross-entropy. The loop's evaluation reports ``ppl``, ``nll`` (per target
token, ``</s>`` included) and ``accuracy`` (the arg-max word is right) on teacher-forced batches, and
picks checkpoints by ``ppl``; BLEU needs decoding and is a separate evaluation: ``memread bleu RUN_DIR``
(greedy by default, as the paper, "we do not use a beam search"; see :mod:`memread.decoding`).

**Models** (``task.model``; ``[reader]`` configures the encoder, and the decoder gets its ``hidden``):

- ``lstm-lstm``: the RNNSearch-like baseline. Encoder ``reader.name = "lstm"`` (2 layers of 300 in the
  paper). Decoder: an LSTM (``decoder_layers``) with additive attention over the encoder's output
  states (:class:`memread.readers.attention_decoder.AttentionLSTMDecoder`): ``h_t = LSTM(y_t [; h~_{t-1}])``, ``a_t = softmax_j(v^T
  tanh(W_k s_j + W_q h_t))``, ``ctx_t = sum_j a_tj s_j``, output ``h~_t = tanh(W_c [h_t; ctx_t])``
  (attention with the current state as query, as Luong et al. 2015 with Bahdanau's additive score;
  RNNSearch scores with the previous state instead). Input feeding (``input_feeding = true``: the
  LSTM's input is ``[y_t; h~_{t-1}]``) is optional and off by default: without it the decoder LSTM
  runs fused over the whole target and attention is one batched computation. The decoder LSTM starts
  from ``h_0 = tanh(W_0 mean_j s_j)`` in every layer and ``c_0 = 0``.
- ``nse-lstm``: encoder ``reader.name = "nse"`` (its outputs ``h_t`` are the attended states), the same
  LSTM decoder.
- ``nse-nse``: NSE encoder; the decoder is an NSE that reads and writes the encoder's final memory
  (shared memory access) and has no memory of its own, so it cannot see future target words under
  teacher forcing (:mod:`memread.readers.nse_decoder`). Its read/write LSTMs have ``reader.layers``
  layers and ``reader.hidden`` units (the memory's slot size).
- ``lstmn-shallow`` / ``lstmn-deep``: an LSTMN encoder (``reader.name = "lstmn"``) and an LSTMN decoder
  with shallow or deep attention fusion (Cheng et al. 2016, section 4;
  :mod:`memread.readers.lstmn_fusion`). The decoder reads the encoder's top-layer hidden tape as the
  source states and its memory tape as ``source_cells`` (deep fusion writes ``alpha~_t`` from it into
  the target memory); its ``hidden`` is ``reader.hidden``.

Every decoder implements the protocol of :mod:`memread.decoding` (``start``, ``forward``, ``step``,
``reorder``), so greedy decoding and beam search run incrementally for all of them.

**Data and splits.** IWSLT14 de-en in the MIXER preprocessing (:mod:`memread.data.iwslt`), English to
German by default (``source = "en"``, the paper's direction). Only the valid and test files exist in
the benchmark data, so by default the model TRAINS ON THE VALID FILE minus its last ``dev_fraction``
(10%), which is held out as the dev split ("valid": model selection, lr schedule), and is evaluated
on the test file. RESULTS OF THIS SETUP ARE NOT COMPARABLE WITH THE PAPER'S 17.02 / 17.13 / 17.93 TEST
BLEU: 4,691 training pairs instead of 110,439 (and 529 dev, 4,995 test pairs after the filter), GloVe
6B 50d instead of 840B 300d, and the test set is the whole MIXER test file (filtered to 25 words), not
the paper's 4,793-pair tst2010-2012 selection. With a train
file present, ``train_file = "train"`` and ``dev_fraction = 0`` give the usual train/valid/test split.
Pairs with more than ``max_len`` words on either side are dropped from every split (the paper's 25).

**Vocabularies.** Source: the training split's words (the ``src_vocab`` most frequent; 0 = all), plus,
with ``vectors``, every word of any split that has a pretrained vector (its row is the fixed GloVe
vector). Target: the ``tgt_vocab`` most frequent training words (the paper kept 25,000 German words)
and ``<s>``, ``</s>``. Both sides are saved in the run's one ``vocab.json`` as a single word list whose
entries are prefixed ``"src "`` and ``"tgt "`` (:func:`joint_vocab`, :func:`split_vocab`), so the
experiment machinery stores and fingerprints them like any vocabulary.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from memread.data.batching import Batches, batch_order, pad
from memread.data.iwslt import TranslationPair, iwslt_path, read_iwslt, read_sentences
from memread.data.vocab import PAD, UNK, Vocab
from memread.errors import MemreadError
from memread.modules.embeddings import read_vectors
from memread.modules.word_embedding import WordEmbedding
from memread.readers import build_reader
from memread.readers.attention_decoder import AttentionDecoderConfig, AttentionLSTMDecoder
from memread.readers.lstmn_fusion import FusionConfig, LSTMNFusionDecoder
from memread.readers.nse_decoder import NSEDecoder, NSEDecoderConfig
from memread.tasks.base import ModelOutput
from memread.tasks.text_inputs import vectors_path

BOS, EOS = "<s>", "</s>"

# task.model -> (the reader names its encoder may be, what the decoder reads of the encoder)
ENCODER_DECODER: dict[str, tuple[tuple[str, ...], str]] = {
    "lstm-lstm": (("lstm",), "states"),
    "nse-lstm": (("nse",), "states"),
    "nse-nse": (("nse",), "memory"),
    "lstmn-shallow": (("lstmn",), "tape"),
    "lstmn-deep": (("lstmn",), "tape"),
}


@dataclass
class TranslationTaskConfig:
    name: Literal["translate"] = "translate"
    dataset: Literal["iwslt14"] = "iwslt14"
    model: Literal["lstm-lstm", "nse-lstm", "nse-nse", "lstmn-shallow", "lstmn-deep"] = "lstm-lstm"
    source: Literal["en", "de"] = "en"  # the NSE paper translates English -> German
    unk_mapped: bool = False  # read the .wmixerprep files (MIXER's rare words already <unk>)
    train_file: Literal["train", "valid"] = "valid"  # no IWSLT14 train file in the benchmark data
    dev_fraction: float = 0.1  # the last part of train_file held out as the dev ("valid") split; 0: the valid file
    test_file: Literal["valid", "test"] = "test"
    max_len: int = 25  # drop pairs with more words on either side (the paper: 25); 0 = keep all
    src_vocab: int = 0  # most frequent source training words kept (0 = all); specials included
    tgt_vocab: int = 25000  # most frequent target training words kept (the paper: 25,000); specials included
    min_count: int = 1
    emb: int = 300  # source embedding size; must equal the vectors' size when task.vectors is set
    tgt_emb: int = 300  # target embedding size (a learned lookup table)
    vectors: str = ""  # GloVe-format file under the data root, for the source side
    freeze: bool = False  # keep the source embedding fixed (the paper: fixed GloVe vectors)
    oov: Literal["zero", "gaussian"] = "zero"  # source rows without a vector
    decoder_layers: int = 2  # of the LSTM decoder (the NSE decoder has reader.layers)
    input_feeding: bool = False  # LSTM decoder: feed h~_{t-1} into the LSTM with y_t
    input_dropout: float = 0.2  # on the source and target embeddings
    output_dropout: float = 0.3  # on the decoder's output states, before the softmax layer
    bucket: int = 0  # sort training batches by length within pools of this many batches; 0 = no sorting

    def __post_init__(self) -> None:
        if not 0.0 <= self.input_dropout < 1.0 or not 0.0 <= self.output_dropout < 1.0:
            raise MemreadError("task.input_dropout and task.output_dropout must be in [0, 1)")
        if not 0.0 <= self.dev_fraction < 1.0:
            raise MemreadError(f"task.dev_fraction must be in [0, 1), got {self.dev_fraction}")
        if self.train_file == "valid" and self.dev_fraction == 0:
            raise MemreadError("task.train_file = \"valid\" needs task.dev_fraction > 0: the dev split would be the training data")
        if self.train_file == self.test_file:
            raise MemreadError(f"task.train_file and task.test_file are both {self.test_file!r}: the test split would be training data")
        if self.freeze and not self.vectors:
            raise MemreadError("task.freeze = true needs task.vectors (a frozen random embedding learns nothing)")
        if self.max_len < 0 or self.src_vocab < 0 or self.tgt_vocab < 0 or self.decoder_layers < 1:
            raise MemreadError("task.max_len, task.src_vocab and task.tgt_vocab must be >= 0, task.decoder_layers >= 1")


# ----------------------------------------------------------------------------- the LSTM decoder


# ----------------------------------------------------------------------------- the model


class Translator(nn.Module):
    """Encoder-decoder: ``forward(batch)`` is teacher forcing; ``start``/``step``/``reorder`` are the
    model protocol of :mod:`memread.decoding`."""

    def __init__(self, cfg: TranslationTaskConfig, encoder: nn.Module, decoder: nn.Module, reads: str,
                 src_vocab: Vocab, tgt_vocab: Vocab):
        super().__init__()
        self.src_embedding = WordEmbedding(len(src_vocab), cfg.emb, src_vocab.pad_id, cfg.freeze)
        self.tgt_embedding = nn.Embedding(len(tgt_vocab), cfg.tgt_emb, padding_idx=tgt_vocab.pad_id)
        self.encoder, self.decoder, self.reads = encoder, decoder, reads
        self.drop_in = nn.Dropout(cfg.input_dropout)
        self.drop_out = nn.Dropout(cfg.output_dropout)
        self.out = nn.Linear(decoder.output_size, len(tgt_vocab))
        self.pad_id, self.bos_id, self.eos_id = tgt_vocab.pad_id, tgt_vocab.stoi[BOS], tgt_vocab.stoi[EOS]

    def encode(self, src: Tensor, src_mask: Tensor) -> tuple[Tensor, Tensor | None]:
        """(B, S) ids -> what the decoder reads: the encoder's states (B, S, H), or with ``reads =
        "memory"`` its final memory, and the memory tape (``reads = "tape"``) or None."""
        x = self.drop_in(self.src_embedding(src))
        if self.reads == "tape":  # an LSTMN encoder: its top layer's hidden and memory tapes
            enc = self.encoder(x, src_mask, return_cells=True)
            return enc.states, enc.state["cells"]
        enc = self.encoder(x, src_mask)
        if self.reads == "memory":
            return enc.memory, None
        return enc.states, None

    def forward(self, batch: dict, state=None, return_attention: bool = False) -> ModelOutput:
        src, src_mask = batch["src"], batch["src_mask"]
        source, cells = self.encode(src, src_mask)
        y = self.drop_in(self.tgt_embedding(batch["tgt_in"]))
        dec = self.decoder(y, batch["tgt_mask"], source, cells, src_mask)
        logits = self.out(self.drop_out(dec.states))  # (B, T, V)
        mask = batch["tgt_mask"]
        nll = F.cross_entropy(logits[mask], batch["tgt_out"][mask], reduction="sum")
        tokens = mask.sum()
        correct = (logits.argmax(-1) == batch["tgt_out"])[mask].sum()
        stats = {"nll": nll.detach(), "tokens": tokens.detach().float(), "correct": correct.detach().float()}
        return ModelOutput(loss=nll / tokens.clamp_min(1), stats=stats, logits=logits, attention=dec.attention)

    # the model protocol of memread.decoding
    def start(self, src: Tensor, src_mask: Tensor):
        source, cells = self.encode(src, src_mask)
        return self.decoder.start(source, cells, src_mask)

    def step(self, prev: Tensor, state) -> tuple[Tensor, object]:
        out_t, state = self.decoder.step(self.tgt_embedding(prev), state)
        return F.log_softmax(self.out(out_t), dim=-1), state

    def reorder(self, state, index: Tensor):
        return self.decoder.reorder(state, index)


def build_translator(cfg: TranslationTaskConfig, reader_cfg, src_vocab: Vocab, tgt_vocab: Vocab) -> Translator:
    names, reads = ENCODER_DECODER[cfg.model]
    if reader_cfg.name not in names:
        raise MemreadError(f"task.model = {cfg.model!r} needs reader.name = {' or '.join(map(repr, names))} "
                           f"(the encoder), got {reader_cfg.name!r}")
    if getattr(reader_cfg, "shared", 0):
        raise MemreadError("task.model: the encoder NSE reads no shared memory; set reader.shared = 0")
    encoder = build_reader(reader_cfg, cfg.emb)
    if cfg.model == "nse-nse":
        decoder = NSEDecoder(NSEDecoderConfig(reader_cfg.hidden, reader_cfg.layers, reader_cfg.dropout), cfg.tgt_emb)
    elif reads == "tape":
        fusion = "lstmn_deep" if cfg.model == "lstmn-deep" else "lstmn_shallow"
        decoder = LSTMNFusionDecoder(FusionConfig(fusion, reader_cfg.hidden), cfg.tgt_emb, encoder.output_size)
    else:
        decoder = AttentionLSTMDecoder(AttentionDecoderConfig(reader_cfg.hidden, cfg.decoder_layers, cfg.input_feeding),
                                       cfg.tgt_emb, encoder.output_size)
    return Translator(cfg, encoder, decoder, reads, src_vocab, tgt_vocab)


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


# ----------------------------------------------------------------------------- batches and the task


def collate_translations(items: list[tuple[list[int], list[int]]], src_pad: int, tgt_pad: int, bos: int, eos: int) -> dict:
    src, src_mask = pad([s for s, _ in items], src_pad)
    tgt_in, tgt_mask = pad([[bos] + t for _, t in items], tgt_pad)
    tgt_out, _ = pad([t + [eos] for _, t in items], tgt_pad)
    return {"src": src, "src_mask": src_mask, "tgt_in": tgt_in, "tgt_out": tgt_out, "tgt_mask": tgt_mask}


class TranslationTask:
    name = "translate"
    Config = TranslationTaskConfig
    selection_metric = "ppl"
    higher_is_better = False
    default_eval_batch_size = 128

    def __init__(self, cfg: TranslationTaskConfig, data_root: Path, vocab: Vocab | None = None,
                 pairs: dict[str, list[TranslationPair]] | None = None):
        """``vocab`` given (a loaded run): the joint vocabulary of the run; ``pairs`` (split -> pairs)
        replaces reading the files (tests)."""
        self.cfg = cfg
        self.data_root = Path(data_root)
        self._pairs: dict[str, list[TranslationPair]] = dict(pairs or {})
        self._encoded: dict[str, list[tuple[list[int], list[int]]]] = {}
        self.dropped: dict[str, int] = {}
        self.vectors: dict[str, list[float]] | None = None
        if vocab is None:
            src_vocab, tgt_vocab = self._build_vocabs()
            vocab = joint_vocab(src_vocab, tgt_vocab)
        self.vocab = vocab
        self.src_vocab, self.tgt_vocab = split_vocab(vocab)

    def _build_vocabs(self) -> tuple[Vocab, Vocab]:
        cfg = self.cfg
        train = self.pairs("train")
        src_counts = Counter(w for p in train for w in p.source)
        tgt_counts = Counter(w for p in train for w in p.target)
        src_words = _capped(src_counts, cfg.src_vocab, cfg.min_count, [PAD, UNK])
        if cfg.vectors:
            others = {w for s in ("valid", "test") for p in self.pairs(s) for w in p.source}
            found, dim = read_vectors(vectors_path(self.data_root, cfg.vectors), set(src_counts) | others)
            if dim != cfg.emb:
                raise MemreadError(f"task.vectors: {cfg.vectors} has {dim}-d vectors, task.emb is {cfg.emb}; set task.emb = {dim}")
            kept = set(src_words)
            src_words += sorted(w for w in found if w not in kept)  # fixed pretrained rows: no training signal needed
            self.vectors = found
        tgt_words = _capped(tgt_counts, cfg.tgt_vocab, cfg.min_count, [PAD, UNK, BOS, EOS])
        return Vocab(src_words), Vocab(tgt_words)

    def pairs(self, split: str) -> list[TranslationPair]:
        """``train``: ``train_file`` without its held-out part; ``valid``: that part (or the valid file
        when ``dev_fraction = 0``); ``test``: ``test_file``. Length-filtered."""
        if split not in self._pairs:
            cfg = self.cfg
            if split not in ("train", "valid", "test"):
                raise MemreadError(f"unknown split {split!r}; expected train, valid or test")
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

    def encode_source(self, words) -> list[int]:
        return self.src_vocab.encode(words)

    def batches(self, split: str, batch_size: int, epoch: int = 0, seed: int = 0) -> Batches:
        if split not in self._encoded:
            self._encoded[split] = [(self.src_vocab.encode(p.source), self.tgt_vocab.encode(p.target))
                                    for p in self.pairs(split)]
        enc = self._encoded[split]
        g = torch.Generator().manual_seed(seed * 1_000_003 + epoch) if split == "train" else None
        groups = batch_order([len(s) + len(t) for s, t in enc], batch_size, self.cfg.bucket, g)
        collate = partial(collate_translations, src_pad=self.src_vocab.pad_id, tgt_pad=self.tgt_vocab.pad_id,
                          bos=self.tgt_vocab.stoi[BOS], eos=self.tgt_vocab.stoi[EOS])
        return Batches(enc, groups, collate, epoch if split == "train" else None)

    def build_model(self, reader_cfg) -> Translator:
        model = build_translator(self.cfg, reader_cfg, self.src_vocab, self.tgt_vocab)
        if self.vectors is not None:
            model.src_embedding.load_vectors(self.src_vocab.itos, self.vectors, self.cfg.oov, seed=0)
        return model

    def summarize(self, stats: dict[str, float]) -> dict[str, float]:
        n = max(stats.get("tokens", 0.0), 1.0)
        nll = stats.get("nll", 0.0) / n
        return {"ppl": math.exp(min(nll, 50.0)), "nll": nll, "accuracy": stats.get("correct", 0.0) / n,
                "tokens": stats.get("tokens", 0.0)}

    def tokens_in(self, batch: dict) -> int:
        return int(batch["tgt_mask"].sum())

    # ------------------------------------------------------------------ decoding
    @torch.no_grad()
    def translate(self, model: Translator, sources: list[list[str]], beam: int = 1, alpha: float = 1.0,
                  max_len: int = 50, batch_size: int = 64) -> list[list[str]]:
        """Source sentences (lists of words) -> translations (lists of target words, without </s>),
        decoded in batches of similar length; empty sentences give empty translations."""
        from memread.decoding import decode

        model.eval()
        device = next(model.parameters()).device
        out: list[list[str]] = [[] for _ in sources]
        order = sorted((i for i, s in enumerate(sources) if s), key=lambda i: len(sources[i]))
        for k in range(0, len(order), batch_size):
            rows = order[k : k + batch_size]
            src, src_mask = pad([self.src_vocab.encode(sources[i]) for i in rows], self.src_vocab.pad_id)
            hyps = decode(model, src.to(device), src_mask.to(device), beam, max_len, alpha)
            for i, ids in zip(rows, hyps):
                out[i] = self.tgt_vocab.decode(ids)
        return out
