"""Cloze question answering: read a document, fill the blank of a query from a candidate list.

Two heads, the same reader:

- ``pointer`` (a memory reader): the reader's states over the document are its memory; the query
  state attends over them (bilinear) and the probability of a candidate is the attention summed over
  every position where it occurs (pointer-sum, as the AS Reader).
- ``final_state`` (memoryless baseline): the reader reads the document and then the query, and the
  answer is predicted from its final state alone; nothing it read can be looked at again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from memread.data.cbt import ClozeExample, read_cbt
from memread.data.stories import story_splits
from memread.data.vocab import Vocab
from memread.errors import MemreadError
from memread.modules.attention import BilinearAttention
from memread.modules.masking import last_real, masked_softmax
from memread.readers import build_reader
from memread.tasks.base import ModelOutput


@dataclass
class ClozeTaskConfig:
    name: Literal["cloze"] = "cloze"
    dataset: Literal["stories", "files"] = "stories"
    head: Literal["pointer", "final_state"] = "pointer"
    emb: int = 64
    dropout: float = 0.0
    stories: int = 4000  # dataset = "stories": training stories (valid and test get a tenth each)
    story_seed: int = 0
    train_file: str = ""  # dataset = "files": CBT-format files, relative to the data root
    valid_file: str = ""
    test_file: str = ""
    min_count: int = 1
    max_vocab: int = 0


class ClozeModel(nn.Module):
    def __init__(self, vocab_size: int, cfg: ClozeTaskConfig, reader: nn.Module, pad_id: int):
        super().__init__()
        self.head = cfg.head
        self.embedding = nn.Embedding(vocab_size, cfg.emb, padding_idx=pad_id)
        self.reader = reader
        self.drop = nn.Dropout(cfg.dropout)
        if self.head == "pointer":
            self.attention = BilinearAttention(reader.output_size, reader.output_size)
        else:
            self.out = nn.Linear(reader.output_size, vocab_size)

    def forward(self, batch: dict[str, Tensor], state=None, return_attention: bool = False) -> ModelOutput:
        doc, doc_mask = batch["doc"], batch["doc_mask"]  # (B, Td)
        query, query_mask = batch["query"], batch["query_mask"]  # (B, Tq)
        cands, cand_mask = batch["cands"], batch["cand_mask"]  # (B, C)
        d = self.reader(self.drop(self.embedding(doc)), doc_mask)
        attention = None
        if self.head == "pointer":
            q = self.reader(self.drop(self.embedding(query)), query_mask)
            q_t = last_real(q.states, query_mask)  # (B, H)
            attention = self.attention(q_t, d.states, doc_mask)  # (B, Td)
            hits = (doc.unsqueeze(2) == cands.unsqueeze(1)) & doc_mask.unsqueeze(2)  # (B, Td, C)
            p = torch.bmm(attention.unsqueeze(1), hits.to(attention.dtype)).squeeze(1)  # (B, C) pointer-sum
            scores = torch.log(p.clamp_min(1e-12))
        else:
            q = self.reader(self.drop(self.embedding(query)), query_mask, state=d.state)  # continue reading
            h = self.drop(last_real(q.states, query_mask))  # (B, H)
            scores = self.out(h).gather(1, cands)  # (B, C)
        scores = scores.masked_fill(~cand_mask, float("-inf"))
        log_p = F.log_softmax(scores, dim=-1)  # (B, C)
        answer = batch["answer"]  # (B,) index into cands
        nll = -log_p.gather(1, answer.unsqueeze(1)).squeeze(1)  # (B,)
        correct = (log_p.argmax(dim=-1) == answer).sum()
        return ModelOutput(
            loss=nll.mean(),
            stats={"nll": nll.sum().detach(), "correct": correct.detach(), "count": torch.tensor(float(len(nll)))},
            logits=log_p,
            attention=attention,
        )


def _pad(seqs: list[list[int]], pad: int) -> tuple[Tensor, Tensor]:
    width = max(1, max(len(s) for s in seqs))
    ids = torch.full((len(seqs), width), pad, dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, : len(s)] = torch.tensor(s, dtype=torch.long)
    mask = torch.arange(width).unsqueeze(0) < torch.tensor([len(s) for s in seqs]).unsqueeze(1)
    return ids, mask


class ClozeBatches(Sequence):
    def __init__(self, encoded: list[dict], order: list[int], batch_size: int, pad_id: int):
        self.encoded, self.order, self.batch_size, self.pad_id = encoded, order, batch_size, pad_id

    def __len__(self) -> int:
        return (len(self.order) + self.batch_size - 1) // self.batch_size

    def __getitem__(self, i: int) -> dict[str, Tensor]:
        if not 0 <= i < len(self):
            raise IndexError(i)
        items = [self.encoded[j] for j in self.order[i * self.batch_size : (i + 1) * self.batch_size]]
        doc, doc_mask = _pad([e["doc"] for e in items], self.pad_id)
        query, query_mask = _pad([e["query"] for e in items], self.pad_id)
        cands, cand_mask = _pad([e["cands"] for e in items], self.pad_id)
        answer = torch.tensor([e["answer"] for e in items], dtype=torch.long)
        return {"doc": doc, "doc_mask": doc_mask, "query": query, "query_mask": query_mask,
                "cands": cands, "cand_mask": cand_mask, "answer": answer}


class ClozeTask:
    name = "cloze"
    Config = ClozeTaskConfig
    selection_metric = "accuracy"
    higher_is_better = True
    default_eval_batch_size = 64

    def __init__(self, cfg: ClozeTaskConfig, data_root: Path, vocab: Vocab | None = None):
        self.cfg = cfg
        self.data_root = Path(data_root)
        self._examples: dict[str, list[ClozeExample]] = {}
        self._encoded: dict[str, list[dict]] = {}
        if vocab is None:
            words = []
            for ex in self.examples("train"):
                words.extend(ex.document)
                words.extend(ex.query)
                words.extend(ex.candidates)
            vocab = Vocab.build(words, min_count=self.cfg.min_count, max_size=self.cfg.max_vocab)
        self.vocab = vocab

    def examples(self, split: str) -> list[ClozeExample]:
        if split not in self._examples:
            if self.cfg.dataset == "stories":
                n = self.cfg.stories
                self._examples = story_splits(n, max(1, n // 10), max(1, n // 10), self.cfg.story_seed)
            else:
                name = getattr(self.cfg, f"{split}_file")
                if not name:
                    raise MemreadError(f"config key 'task.{split}_file' is empty; dataset = 'files' needs it")
                path = Path(name) if Path(name).is_absolute() else self.data_root / name
                self._examples[split] = read_cbt(path)
        return self._examples[split]

    def encoded(self, split: str) -> list[dict]:
        if split not in self._encoded:
            out = []
            for ex in self.examples(split):
                cands = self.vocab.encode(ex.candidates)
                out.append({
                    "doc": self.vocab.encode(ex.document),
                    "query": self.vocab.encode(ex.query),
                    "cands": cands,
                    "answer": ex.candidates.index(ex.answer),
                })
            self._encoded[split] = out
        return self._encoded[split]

    def batches(self, split: str, batch_size: int, epoch: int = 0, seed: int = 0) -> ClozeBatches:
        enc = self.encoded(split)
        if split == "train":
            g = torch.Generator().manual_seed(seed * 1_000_003 + epoch)
            order = torch.randperm(len(enc), generator=g).tolist()
        else:
            order = list(range(len(enc)))
        return ClozeBatches(enc, order, batch_size, self.vocab.pad_id)

    def build_model(self, reader_cfg) -> ClozeModel:
        return ClozeModel(len(self.vocab), self.cfg, build_reader(reader_cfg, self.cfg.emb), self.vocab.pad_id)

    def summarize(self, stats: dict[str, float]) -> dict[str, float]:
        n = max(stats["count"], 1.0)
        return {"accuracy": stats["correct"] / n, "nll": stats["nll"] / n, "count": stats["count"]}

    def tokens_in(self, batch: dict) -> int:
        return int(batch["doc_mask"].sum() + batch["query_mask"].sum())
