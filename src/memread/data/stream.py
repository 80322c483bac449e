"""Continuous-stream batching for language models (truncated BPTT).

The token stream is cut into ``batch_size`` contiguous columns; batch ``i`` is the ``i``-th window of
``bptt`` steps in every column, so a reader's state at the end of batch ``i`` is the right state to
start batch ``i + 1`` from (the loop detaches it between batches). Columns overlap by one token, so
every token after the first is a target exactly once and perplexity covers the whole stream; the
ragged end of the last column is masked out.

:class:`DocumentStreamBatches` does the same for a corpus of documents (articles, stories) whose
readers reset at document starts: each column holds whole documents back to back, every token of a
document after its first is a target exactly once (nothing is predicted across a boundary), and
``reset`` (B, T) marks the first token of each document, wherever it falls in a segment.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence

import torch
from torch import Tensor

from memread.errors import MemreadError


class _Columns(Sequence):
    """Batch ``i`` is the ``i``-th window of ``bptt`` steps of every (B, L) column tensor in ``FIELDS``."""

    FIELDS: tuple[str, ...] = ("input", "target", "mask")
    bptt: int
    continues = True  # batch i + 1 goes on where batch i stopped: the reader's state is carried between them

    def shard(self, rank: int, world: int) -> "_Columns":
        """Process ``rank``'s share of every batch for data-parallel training over ``world`` processes: a
        contiguous block of the columns, so the processes together read the batch one process would."""
        columns = self.input.size(0)
        if columns % world:
            raise MemreadError(f"train.batch_size: the stream's {columns} columns do not split evenly over {world} "
                               f"processes; use a batch size that is a multiple of {world}")
        part, n = copy.copy(self), columns // world
        for name in self.FIELDS:
            setattr(part, name, getattr(self, name)[rank * n : (rank + 1) * n])
        return part

    def __len__(self) -> int:
        return math.ceil(self.input.size(1) / self.bptt)

    def __getitem__(self, i: int) -> dict[str, Tensor]:
        if not 0 <= i < len(self):
            raise IndexError(i)
        s = slice(i * self.bptt, (i + 1) * self.bptt)
        return {name: getattr(self, name)[:, s] for name in self.FIELDS}


class StreamBatches(_Columns):
    """Indexable BPTT batches ``{"input", "target", "mask"}``, each (B, <=bptt)."""

    def __init__(self, ids: Tensor, batch_size: int, bptt: int, pad_id: int = 0):
        if ids.dim() != 1 or ids.numel() < 2:
            raise ValueError("a token stream needs at least two tokens")
        n_targets = ids.numel() - 1
        batch_size = min(batch_size, n_targets)
        length = math.ceil(n_targets / batch_size)
        self.input = torch.full((batch_size, length), pad_id, dtype=torch.long)
        self.target = torch.full((batch_size, length), pad_id, dtype=torch.long)
        self.mask = torch.zeros((batch_size, length), dtype=torch.bool)
        for j in range(batch_size):
            start, end = j * length, min((j + 1) * length, n_targets)
            if end <= start:
                continue
            self.input[j, : end - start] = ids[start:end]
            self.target[j, : end - start] = ids[start + 1 : end + 1]
            self.mask[j, : end - start] = True
        self.bptt = bptt
        self.n_targets = n_targets



class DocumentStreamBatches(_Columns):
    """Indexable BPTT batches ``{"input", "target", "mask", "reset"}``, each (B, <=bptt), over documents.

    Documents keep their order and are dealt to columns in contiguous runs of about equal length
    (column j starts with the document holding the ``j / B``-th fraction of all targets), so batch size
    1 reads the corpus in order, as evaluation does. A document contributes ``len - 1`` positions:
    its tokens but the last as inputs, its tokens but the first as targets.
    """

    def __init__(self, documents: Sequence[Tensor], batch_size: int, bptt: int, pad_id: int = 0):
        docs = [d for d in documents if d.dim() == 1 and d.numel() >= 2]
        if not docs:
            raise ValueError("a document stream needs a document of at least two tokens")
        n_targets = sum(d.numel() - 1 for d in docs)
        batch_size = min(batch_size, len(docs))
        columns: list[list[Tensor]] = [[] for _ in range(batch_size)]
        before = 0
        for d in docs:
            columns[min(batch_size - 1, before * batch_size // n_targets)].append(d)
            before += d.numel() - 1
        length = max(sum(d.numel() - 1 for d in col) for col in columns)
        self.input = torch.full((batch_size, length), pad_id, dtype=torch.long)
        self.target = torch.full((batch_size, length), pad_id, dtype=torch.long)
        self.mask = torch.zeros((batch_size, length), dtype=torch.bool)
        self.reset = torch.zeros((batch_size, length), dtype=torch.bool)
        for j, col in enumerate(columns):
            at = 0
            for d in col:
                n = d.numel() - 1
                self.input[j, at : at + n] = d[:-1]
                self.target[j, at : at + n] = d[1:]
                self.mask[j, at : at + n] = True
                self.reset[j, at] = True
                at += n
        self.bptt = bptt
        self.n_targets = n_targets
        self.n_documents = len(docs)

    FIELDS = ("input", "target", "mask", "reset")

