"""Padding and length bucketing for tasks whose examples are separate texts (cloze, sentences, pairs)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import Tensor


def pad(seqs: list[list[int]], value: int) -> tuple[Tensor, Tensor]:
    """Right-pad id lists to (B, T) with ``value``; also return the mask (B, T), True = real."""
    width = max(1, max(len(s) for s in seqs))
    ids = torch.full((len(seqs), width), value, dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, : len(s)] = torch.tensor(s, dtype=torch.long)
    mask = torch.arange(width).unsqueeze(0) < torch.tensor([len(s) for s in seqs]).unsqueeze(1)
    return ids, mask


def length_buckets(lengths: list[int], batch_size: int, pool: int, generator: torch.Generator | None) -> list[list[int]]:
    """Batches of indices. With a generator: shuffle, sort by length within pools of ``pool`` batches,
    cut, and shuffle the batches. Without one (evaluation): sort everything by length and cut."""
    n = len(lengths)
    if generator is None:
        order = sorted(range(n), key=lambda i: lengths[i])
        return [order[k : k + batch_size] for k in range(0, n, batch_size)]
    perm = torch.randperm(n, generator=generator).tolist()
    size = pool * batch_size
    batches = []
    for k in range(0, n, size):
        chunk = sorted(perm[k : k + size], key=lambda i: lengths[i])
        batches.extend(chunk[j : j + batch_size] for j in range(0, len(chunk), batch_size))
    return [batches[i] for i in torch.randperm(len(batches), generator=generator).tolist()]


def batch_order(lengths: list[int], batch_size: int, bucket: int, generator: torch.Generator | None) -> list[list[int]]:
    """Example indices per batch: length buckets when ``bucket`` > 0, else shuffled (train, with a
    generator) or in file order (evaluation)."""
    if bucket:
        return length_buckets(lengths, batch_size, bucket, generator)
    n = len(lengths)
    order = torch.randperm(n, generator=generator).tolist() if generator is not None else list(range(n))
    return [order[k : k + batch_size] for k in range(0, n, batch_size)]


class Batches(Sequence):
    """Batches made on demand from encoded examples: batch ``i`` is ``collate(items)`` for the examples
    ``groups[i]``. Every pipeline over separate texts batches this way."""

    def __init__(self, encoded: Sequence, groups: list[list[int]], collate: Callable[[list], dict]):
        self.encoded, self.groups, self.collate = encoded, groups, collate

    def __len__(self) -> int:
        return len(self.groups)

    def __getitem__(self, i: int) -> dict:
        if not 0 <= i < len(self):
            raise IndexError(i)
        return self.collate([self.encoded[j] for j in self.groups[i]])

    continues = False  # every batch stands alone

    def shard(self, rank: int, world: int) -> "Batches":
        """Process ``rank``'s share of every batch for data-parallel training over ``world`` processes: a
        contiguous part of its examples, the parts differing in size by at most one (the criterion's
        ``Loss.weight`` makes the processes' losses add up to the loss of the whole batch). Every process
        gets the same number of batches; a batch of fewer than ``world`` examples is left out."""
        groups = []
        for g in self.groups:
            if len(g) < world:
                continue
            n, extra = divmod(len(g), world)
            start = rank * n + min(rank, extra)
            groups.append(g[start : start + n + (rank < extra)])
        return Batches(self.encoded, groups, self.collate)
