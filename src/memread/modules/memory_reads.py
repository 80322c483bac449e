"""Repeated attention reads of one memory, with one gradient product at the end.

A reader that attends T times over the same memory ``M`` (B, S, E) computes, at each step t,
scores ``M k_t`` (B, S) and a glimpse ``a_t^T M`` (B, E). Autograd would give ``M`` a full-size
gradient for every read (a rank-1 outer product ``g_t k_t^T``) and add them up: 2T passes that
write B x S x E numbers and 2T - 1 that add them. :class:`MemoryReads` records the two factors of
every read instead, and forms the gradient of ``M`` once, after the last read's backward, as one
batched product::

    dL/dM = sum_t g_t k_t^T + a_t h_t^T = [g_1 .. g_T, a_1 .. a_T] (B, S, 2T) @ [k_1 .. k_T; h_1 .. h_T] (B, 2T, E)

Every read is a batched vector-matrix product with the vector on the left, against ``M`` or its
transpose ``M^T`` (B, E, S), kept as a contiguous copy: on CPU this form is about twice as fast as
the matrix-vector one. Values equal ``torch.bmm``'s up to summation order; gradients equal
autograd's (tests/test_iaa.py).
"""

from __future__ import annotations

import torch
from torch import Tensor


class MemoryReads:
    """Reads of ``memory`` (B, S, E): :meth:`scores` against keys, :meth:`glimpse` with weights."""

    def __init__(self, memory: Tensor):
        self.deferred = torch.is_grad_enabled() and memory.requires_grad
        self.left: list[Tensor] = []  # (B, S) factors
        self.right: list[Tensor] = []  # (B, E) factors
        self.memory_t = memory.detach().transpose(1, 2).contiguous()  # (B, E, S)
        self.memory = _Collect.apply(memory, self) if self.deferred else memory

    def scores(self, key: Tensor) -> Tensor:
        """``M k``: key (B, E) -> (B, S)."""
        if self.deferred:
            return _Scores.apply(self.memory, key, self)
        return torch.bmm(key.unsqueeze(1), self.memory_t).squeeze(1)

    def glimpse(self, weights: Tensor) -> Tensor:
        """``a^T M``: weights (B, S) -> (B, E)."""
        if self.deferred:
            return _Glimpse.apply(self.memory, weights, self)
        return torch.bmm(weights.unsqueeze(1), self.memory).squeeze(1)


class _Collect(torch.autograd.Function):
    """Identity on the memory; its backward runs after every read's and sums their factors."""

    @staticmethod
    def forward(ctx, memory: Tensor, reads: MemoryReads) -> Tensor:
        ctx.reads = reads
        ctx.set_materialize_grads(False)
        return memory.view_as(memory)

    @staticmethod
    def backward(ctx, grad: Tensor | None):
        reads = ctx.reads
        if not reads.left:
            return grad, None
        left = torch.stack(reads.left, dim=-1)  # (B, S, n)
        right = torch.stack(reads.right, dim=1)  # (B, n, E)
        reads.left, reads.right = [], []
        grad_memory = torch.bmm(left, right)  # (B, S, E)
        return (grad_memory if grad is None else grad + grad_memory), None


class _Scores(torch.autograd.Function):
    @staticmethod
    def forward(ctx, memory: Tensor, key: Tensor, reads: MemoryReads) -> Tensor:
        ctx.save_for_backward(memory, key)
        ctx.reads = reads
        return torch.bmm(key.unsqueeze(1), reads.memory_t).squeeze(1)  # (B, S)

    @staticmethod
    def backward(ctx, grad: Tensor):
        memory, key = ctx.saved_tensors
        ctx.reads.left.append(grad)  # dL/dM += grad key^T, deferred
        ctx.reads.right.append(key)
        grad_key = torch.bmm(grad.unsqueeze(1), memory).squeeze(1)  # (B, E)
        return None, grad_key, None


class _Glimpse(torch.autograd.Function):
    @staticmethod
    def forward(ctx, memory: Tensor, weights: Tensor, reads: MemoryReads) -> Tensor:
        ctx.save_for_backward(memory, weights)
        ctx.reads = reads
        return torch.bmm(weights.unsqueeze(1), memory).squeeze(1)  # (B, E)

    @staticmethod
    def backward(ctx, grad: Tensor):
        _, weights = ctx.saved_tensors
        ctx.reads.left.append(weights)  # dL/dM += weights grad^T, deferred
        ctx.reads.right.append(grad)
        grad_weights = torch.bmm(grad.unsqueeze(1), ctx.reads.memory_t).squeeze(1)  # (B, S)
        return None, grad_weights, None
