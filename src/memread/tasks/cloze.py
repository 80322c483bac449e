"""Cloze question answering: read a document, fill the blank of a query from a candidate list.

Four heads over the same embeddings and any registered reader as encoder:

- ``pointer`` (a memory reader): the reader's states over the document are its memory; the query
  state attends over them (bilinear) and the probability of a candidate is the attention summed over
  every position where it occurs (pointer-sum).
- ``final_state`` (memoryless baseline): the reader reads the document and then the query, and the
  answer is predicted from its final state alone; nothing it read can be looked at again.
- ``as_reader``: the Attention-Sum Reader (Kadlec et al. 2016, ``memread.readers.as_reader``).
- ``iaa``: iterative alternating attention (Sordoni et al. 2016, ``memread.readers.iaa``); with
  ``fixed_query = true`` the uniform-query ablation.

``as_reader`` and ``iaa`` encode the query and the document with two readers of the ``[reader]``
config (one with ``share_encoder = true``) over shared embeddings, as both papers do; a
bidirectional torch RNN is built as ``BiRNNReader`` (the same network, exact under padding without
packing, whose CPU backward is O(T^2); see ``memread.readers.birnn``).
``init = "paper"`` initialises as Sordoni et al. section 4 (N(0, 0.05), orthogonal recurrent
weights, zero biases) and ``emb_l2`` adds their embedding L2 penalty to the loss.

Data (``dataset``): the built-in ``stories``; CBT-format ``files``; ``books``: cloze questions built
from raw books by the CBT recipe (``memread.data.cloze_builder``), split by book; ``cnn``: folders
of rc-data ``.question`` files; ``babi``: the bAbI tasks whose answer is a word of the story, with
accuracy per task. ``bucket = N`` sorts examples by document length within pools of N batches
(train: pools drawn in a random order fixed by (seed, epoch), so a resumed run sees the same
batches), so that padding wastes little.

``ModelOutput.logits`` are log-probabilities over each example's candidates (B, C);
``ModelOutput.attention`` is the answer's document attention (B, Td) for the pointer-sum heads.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from memread.data.babi import babi_path, read_babi
from memread.data.batching import Batches, batch_order, pad
from memread.data.cbt import ClozeExample, read_cbt
from memread.data.stories import story_splits
from memread.data.vocab import Vocab
from memread.errors import MemreadError
from memread.modules.attention import BilinearAttention
from memread.modules.masking import last_real
from memread.modules.pointer_sum import candidate_log_probs, occurrences
from memread.readers import build_reader
from memread.readers.as_reader import AttentionSumReader
from memread.readers.birnn import BiRNNReader
from memread.readers.iaa import IAAConfig, IAAOutput, IterativeAlternatingAttention, paper_init_
from memread.readers.rnn import RNNReaderConfig
from memread.tasks.base import ModelOutput

SPLITS = ("train", "valid", "test")


@dataclass
class ClozeTaskConfig:
    name: Literal["cloze"] = "cloze"
    dataset: Literal["stories", "files", "books", "cnn", "babi"] = "stories"
    head: Literal["pointer", "final_state", "as_reader", "iaa"] = "pointer"
    emb: int = 64
    dropout: float = 0.0  # on the embeddings (and, for iaa, on its gates and attention inputs)
    stories: int = 4000  # dataset = "stories": training stories (valid and test get a tenth each)
    story_seed: int = 0
    train_file: str = ""  # dataset = "files": CBT-format files; "cnn": folders of .question files
    valid_file: str = ""  # (relative to the data root)
    test_file: str = ""
    books: tuple[str, ...] = ()  # dataset = "books": raw book files (relative to the data root)
    valid_books: tuple[str, ...] = ()  # book names (file names without .txt/.gz) held out for valid
    test_books: tuple[str, ...] = ()  # ... and for test; every other book is for training
    word_class: Literal["NE", "P", "CN", "V"] = "NE"  # CN and V need a tagger (memread data cloze)
    window_stride: int = 1  # sentences between consecutive 21-sentence windows
    babi_dir: str = "babi/en-10k"  # dataset = "babi": folder under the data root
    babi_tasks: tuple[int, ...] = (1, 2, 4, 5, 11, 12, 13, 14, 16)  # valid = last tenth of each train file
    babi_max_sentences: int = 50  # the story's most recent statements kept as the document; 0 = all
    min_count: int = 1
    max_vocab: int = 0
    bucket: int = 0  # sort by document length within pools of this many batches; 0 = no sorting
    init: Literal["torch", "paper"] = "torch"  # "paper": Sordoni et al. section 4
    emb_l2: float = 0.0  # embedding L2 penalty added to the loss (Sordoni et al.: 1e-4)
    share_encoder: bool = False  # as_reader / iaa: one reader for query and document
    steps: int = 8  # iaa: T
    inference: int = 512  # iaa: s, the inference GRU's size
    gate_hidden: int = 0  # iaa: hidden units of each search gate (0 = the encoding size 2h)
    fixed_query: bool = False  # iaa: the uniform query attention ablation

    def __post_init__(self) -> None:
        defaults = {f.name: f.default for f in dataclasses.fields(self)}
        for key, (switch, allowed) in _APPLIES.items():
            if getattr(self, key) != defaults[key] and getattr(self, switch) not in allowed:
                raise MemreadError(
                    f"key 'task.{key}' applies only to {switch} = {' or '.join(map(repr, allowed))}, "
                    f"this config has {switch} = {getattr(self, switch)!r}"
                )
        if self.head == "iaa" and self.steps < 1:
            raise MemreadError(f"key 'task.steps' must be at least 1, got {self.steps}")

    def iaa(self) -> IAAConfig:
        return IAAConfig(steps=self.steps, inference=self.inference, gate_hidden=self.gate_hidden,
                         fixed_query=self.fixed_query, dropout=self.dropout)


_APPLIES = {
    "stories": ("dataset", ("stories",)), "story_seed": ("dataset", ("stories",)),
    "train_file": ("dataset", ("files", "cnn")), "valid_file": ("dataset", ("files", "cnn")),
    "test_file": ("dataset", ("files", "cnn")),
    "books": ("dataset", ("books",)), "valid_books": ("dataset", ("books",)), "test_books": ("dataset", ("books",)),
    "word_class": ("dataset", ("books",)), "window_stride": ("dataset", ("books",)),
    "babi_dir": ("dataset", ("babi",)), "babi_tasks": ("dataset", ("babi",)),
    "babi_max_sentences": ("dataset", ("babi",)),
    "share_encoder": ("head", ("as_reader", "iaa")),
    "steps": ("head", ("iaa",)), "inference": ("head", ("iaa",)), "gate_hidden": ("head", ("iaa",)),
    "fixed_query": ("head", ("iaa",)),
}


@dataclass
class ClozeReading:
    """What a cloze model read: log P over candidates, the answer's document attention, the IAA trace."""

    log_p: Tensor  # (B, C)
    attention: Tensor | None = None  # (B, Td)
    iaa: IAAOutput | None = None


class ClozeModel(nn.Module):
    def __init__(self, vocab_size: int, cfg: ClozeTaskConfig, reader: nn.Module, pad_id: int,
                 query_reader: nn.Module | None = None, bidirectional: bool = False):
        super().__init__()
        self.head = cfg.head
        self.emb_l2 = cfg.emb_l2
        self.embedding = nn.Embedding(vocab_size, cfg.emb, padding_idx=pad_id)
        self.reader = reader  # reads the document (and, unless given its own, the query)
        self.query_reader = query_reader
        self.drop = nn.Dropout(cfg.dropout)
        if self.head == "pointer":
            self.attention = BilinearAttention(reader.output_size, reader.output_size)
        elif self.head == "final_state":
            self.out = nn.Linear(reader.output_size, vocab_size)
        elif self.head == "as_reader":
            self.as_reader = AttentionSumReader(bidirectional)
        else:
            self.iaa = IterativeAlternatingAttention(cfg.iaa(), reader.output_size)
        if cfg.init == "paper":
            paper_init_(self)

    def _encode(self, batch: dict[str, Tensor]) -> tuple[Tensor, Tensor]:
        """Document and query encodings (B, Td, H), (B, Tq, H) from their own (or the shared) reader."""
        d = self.reader(self.drop(self.embedding(batch["doc"])), batch["doc_mask"]).states
        query_reader = self.query_reader if self.query_reader is not None else self.reader
        q = query_reader(self.drop(self.embedding(batch["query"])), batch["query_mask"]).states
        return d, q

    def read(self, batch: dict[str, Tensor], trace: bool = False) -> ClozeReading:
        doc_mask, query_mask = batch["doc_mask"], batch["query_mask"]  # (B, Td), (B, Tq)
        cand_mask = batch["cand_mask"]  # (B, C)
        if self.head == "final_state":
            d = self.reader(self.drop(self.embedding(batch["doc"])), doc_mask)
            q = self.reader(self.drop(self.embedding(batch["query"])), query_mask, state=d.state)  # continue reading
            h = self.drop(last_real(q.states, query_mask))  # (B, H)
            scores = self.out(h).gather(1, batch["cands"]).masked_fill(~cand_mask, float("-inf"))  # (B, C)
            return ClozeReading(F.log_softmax(scores, dim=-1))
        d_states, q_states = self._encode(batch)
        iaa = None
        if self.head == "pointer":
            attention = self.attention(last_real(q_states, query_mask), d_states, doc_mask)  # (B, Td)
        elif self.head == "as_reader":
            attention = self.as_reader(q_states, query_mask, d_states, doc_mask)  # (B, Td)
        else:
            iaa = self.iaa(q_states, query_mask, d_states, doc_mask, trace=trace)
            attention = iaa.doc_attention  # (B, Td) d_{i,T}
        hits = occurrences(batch["doc_words"], doc_mask, batch["cand_words"], cand_mask)  # (B, Td, C)
        return ClozeReading(candidate_log_probs(attention, hits, cand_mask), attention, iaa)

    def forward(self, batch: dict[str, Tensor], state=None, return_attention: bool = False) -> ModelOutput:
        reading = self.read(batch)
        log_p = reading.log_p  # (B, C)
        answer = batch["answer"]  # (B,) index into cands
        nll = -log_p.gather(1, answer.unsqueeze(1)).squeeze(1)  # (B,)
        hit = log_p.argmax(dim=-1) == answer  # (B,)
        stats = {"nll": nll.sum().detach(), "correct": hit.sum().detach(), "count": torch.tensor(float(len(nll)))}
        if "group" in batch:  # accuracy per bAbI task
            for g in batch["group"].unique().tolist():
                in_g = batch["group"] == g
                stats[f"correct_g{g}"] = hit[in_g].sum().detach()
                stats[f"count_g{g}"] = in_g.sum().detach().float()
        loss = nll.mean()
        if self.emb_l2:
            loss = loss + self.emb_l2 * self.embedding.weight.pow(2).sum()
        return ModelOutput(loss=loss, stats=stats, logits=log_p, attention=reading.attention)


def collate_cloze(items: list[dict], pad_id: int) -> dict[str, Tensor]:
    """One batch of encoded cloze examples (see :meth:`ClozeTask.encoded`), padded."""
    doc, doc_mask = pad([e["doc"] for e in items], pad_id)
    query, query_mask = pad([e["query"] for e in items], pad_id)
    cands, cand_mask = pad([e["cands"] for e in items], pad_id)
    doc_words, _ = pad([e["doc_words"] for e in items], -1)  # -1 and -2 at padding: never equal
    cand_words, _ = pad([e["cand_words"] for e in items], -2)
    batch = {"doc": doc, "doc_mask": doc_mask, "query": query, "query_mask": query_mask,
             "cands": cands, "cand_mask": cand_mask, "doc_words": doc_words, "cand_words": cand_words,
             "answer": torch.tensor([e["answer"] for e in items], dtype=torch.long),
             "index": torch.tensor([e["index"] for e in items], dtype=torch.long)}
    if "group" in items[0]:
        batch["group"] = torch.tensor([e["group"] for e in items], dtype=torch.long)
    return batch


def cloze_batches(encoded: list[dict], groups: list[list[int]], pad_id: int) -> Batches:
    """Batches of encoded examples; ``groups[i]`` lists the example indices of batch i."""
    return Batches(encoded, groups, functools.partial(collate_cloze, pad_id=pad_id))


def padding_fraction(batches: Batches) -> float:
    """Share of document positions in cloze batches that are padding."""
    real = total = 0
    for g in batches.groups:
        lengths = [len(batches.encoded[j]["doc"]) for j in g]
        real += sum(lengths)
        total += max(lengths) * len(lengths)
    return 1.0 - real / max(total, 1)


def build_encoder(reader_cfg, input_size: int) -> nn.Module:
    """The ``[reader]`` as an encoder of whole sequences (its states only): a bidirectional torch RNN
    as :class:`BiRNNReader` (no packing), any other reader from the registry."""
    if isinstance(reader_cfg, RNNReaderConfig) and reader_cfg.bidirectional:
        return BiRNNReader(reader_cfg, input_size)
    return build_reader(reader_cfg, input_size)


class ClozeTask:
    name = "cloze"
    Config = ClozeTaskConfig
    selection_metric = "accuracy"
    higher_is_better = True
    default_eval_batch_size = 64

    def __init__(self, cfg: ClozeTaskConfig, data_root: Path, vocab: Vocab | None = None,
                 examples: dict[str, list[ClozeExample]] | None = None):
        """``examples`` (split -> questions) replaces reading the configured dataset (benchmarks, tests)."""
        self.cfg = cfg
        self.data_root = Path(data_root)
        self._examples: dict[str, list[ClozeExample]] = dict(examples or {})
        self._encoded: dict[str, list[dict]] = {}
        self.dropped: dict[str, int] = {}  # training questions whose answer is not in the document
        if vocab is None:
            words = []
            for ex in self.examples("train"):
                words.extend(ex.document)
                words.extend(ex.query)
                words.extend(ex.candidates)
            vocab = Vocab.build(words, min_count=self.cfg.min_count, max_size=self.cfg.max_vocab)
        self.vocab = vocab
        self.groups: list[str] = [f"qa{t}" for t in cfg.babi_tasks] if cfg.dataset == "babi" else []

    # ------------------------------------------------------------------ data
    def _path(self, name: str, key: str) -> Path:
        if not name:
            raise MemreadError(f"config key 'task.{key}' is empty; dataset = {self.cfg.dataset!r} needs it")
        return Path(name) if Path(name).is_absolute() else self.data_root / name

    def _load(self, split: str) -> list[ClozeExample]:
        cfg = self.cfg
        if cfg.dataset in ("files", "cnn"):
            path = self._path(getattr(cfg, f"{split}_file"), f"{split}_file")
            if cfg.dataset == "files":
                return read_cbt(path)
            from memread.data.cnn import read_questions

            return read_questions(path)
        if cfg.dataset == "books":
            from memread.data.cloze_builder import build_cloze

            if not cfg.books or not cfg.test_books or not cfg.valid_books:
                raise MemreadError("dataset = 'books' needs task.books, task.valid_books and task.test_books")
            paths = sorted({p for pattern in cfg.books for p in self._glob(pattern)})
            built = build_cloze(paths, cfg.word_class, list(cfg.valid_books), list(cfg.test_books),
                                stride=cfg.window_stride)
            self._examples.update({k: v for k, v in built.items() if k != split})
            return built[split]
        # babi: valid is the last tenth of each task's train file
        out = []
        for t in cfg.babi_tasks:
            file_split = "test" if split == "test" else "train"
            exs = read_babi(babi_path(self.data_root, cfg.babi_dir, t, file_split), t, cfg.babi_max_sentences)
            if split != "test":
                cut = len(exs) - max(1, len(exs) // 10)
                exs = exs[:cut] if split == "train" else exs[cut:]
            out.extend(exs)
        return out

    def _glob(self, pattern: str) -> list[Path]:
        base = Path(pattern) if Path(pattern).is_absolute() else self.data_root / pattern
        if any(c in pattern for c in "*?["):
            found = sorted(base.parent.glob(base.name))
            if not found:
                raise MemreadError(f"task.books: no file matches {base}")
            return found
        if not base.is_file():
            raise MemreadError(f"task.books: {base}: book file not found")
        return [base]

    def examples(self, split: str) -> list[ClozeExample]:
        if split not in self._examples:
            if self.cfg.dataset == "stories":
                n = self.cfg.stories
                self._examples = story_splits(n, max(1, n // 10), max(1, n // 10), self.cfg.story_seed)
            else:
                self._examples[split] = self._load(split)
            if not self._examples.get(split):
                raise MemreadError(f"the {split} split of this cloze dataset has no questions")
        return self._examples[split]

    def encoded(self, split: str) -> list[dict]:
        if split not in self._encoded:
            out = []
            dropped = 0
            group_id = {g: i for i, g in enumerate(self.groups)}
            for ex in self.examples(split):
                document = ex.document
                if split == "train" and ex.answer not in document:
                    dropped += 1  # a pointer cannot learn it
                    continue
                words: dict[str, int] = {}  # per-example word identity, for pointer-sum
                doc_words = [words.setdefault(w, len(words)) for w in document]
                # an answer that is no candidate (bAbI, CNN: not in the story) is kept as one more
                # candidate that never occurs in the document: a pointer scores it wrong
                candidates = ex.candidates if ex.answer in ex.candidates else [*ex.candidates, ex.answer]
                item = {
                    "doc": self.vocab.encode(document),
                    "query": self.vocab.encode(ex.query),
                    "cands": self.vocab.encode(candidates),
                    "doc_words": doc_words,
                    "cand_words": [words.setdefault(c, len(words)) for c in candidates],
                    "answer": candidates.index(ex.answer),
                    "index": len(out),  # position in this split's encoded examples
                }
                if self.groups:
                    item["group"] = group_id[ex.group]
                out.append(item)
            self.dropped[split] = dropped
            self._encoded[split] = out
        return self._encoded[split]

    def batches(self, split: str, batch_size: int, epoch: int = 0, seed: int = 0) -> Batches:
        enc = self.encoded(split)
        g = torch.Generator().manual_seed(seed * 1_000_003 + epoch) if split == "train" else None
        groups = batch_order([len(e["doc"]) for e in enc], batch_size, self.cfg.bucket, g)
        return cloze_batches(enc, groups, self.vocab.pad_id)

    # ------------------------------------------------------------------ model and metrics
    def build_model(self, reader_cfg) -> ClozeModel:
        if self.cfg.head in ("as_reader", "iaa"):
            reader = build_encoder(reader_cfg, self.cfg.emb)
            query_reader = None if self.cfg.share_encoder else build_encoder(reader_cfg, self.cfg.emb)
        else:
            reader, query_reader = build_reader(reader_cfg, self.cfg.emb), None
        return ClozeModel(len(self.vocab), self.cfg, reader, self.vocab.pad_id, query_reader=query_reader,
                          bidirectional=bool(getattr(reader_cfg, "bidirectional", False)))

    def summarize(self, stats: dict[str, float]) -> dict[str, float]:
        n = max(stats["count"], 1.0)
        out = {"accuracy": stats["correct"] / n, "nll": stats["nll"] / n, "count": stats["count"]}
        for i, g in enumerate(self.groups):
            if stats.get(f"count_g{i}"):
                out[f"accuracy_{g}"] = stats[f"correct_g{i}"] / stats[f"count_g{i}"]
        return out

    def tokens_in(self, batch: dict) -> int:
        return int(batch["doc_mask"].sum() + batch["query_mask"].sum())
