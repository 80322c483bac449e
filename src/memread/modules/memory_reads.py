"""Repeated attention reads of one memory, with one gradient product at the end.

A reader that attends T times over the same memory ``M`` (B, S, E) computes, at each step t,
scores ``M k_t`` (B, S) and a glimpse ``a_t^T M`` (B, E). Autograd would give ``M`` a full-size
gradient for every read (a rank-1 outer product ``g_t k_t^T``) and add them up: 2T passes that
write B x S x E numbers and 2T - 1 that add them. :class:`MemoryReads` records the two factors of
every read instead, and forms the gradient of ``M`` once, after the last read's backward, as one
batched product::

    dL/dM = sum_t g_t k_t^T + a_t h_t^T = [g_1 .. g_T, a_1 .. a_T] (B, S, 2T) @ [k_1 .. k_T; h_1 .. h_T] (B, 2T, E)

Every read is a batched vector-matrix product with the vector on the left, against ``M`` or its
transpose ``M^T`` (B, E, S), kept as a contiguous copy (made on first use; the fused read needs none):
on CPU this form is about twice as fast as the matrix-vector one. Values equal ``torch.bmm``'s up to
summation order; gradients equal autograd's (tests/test_iaa.py).

**The fused read.** :meth:`MemoryReads.attend` is ``att = masked_softmax(M k, mask)`` and its glimpse
``att^T M`` at once. Composed, that is four passes over ``M`` per read (the scores, the glimpse, and in
backward ``dk = ds^T M`` and ``datt = M g``); on CPU tensors of float32 / float64 the compiled kernel
(``_attend_kernels.cpp``, built by :mod:`memread._compiled`) does it in two: the forward pass an online
softmax over each row's slots, the backward pass ``ds_i = att_i (g . m_i + e_i - g . glimpse - att . e)``
(``e`` the gradient of ``att`` from its other uses) and ``dk = sum_i ds_i m_i`` while reading each
``m_i`` once. Its factors of ``dL/dM`` (``ds`` with ``k``, ``att`` with ``g``) join the deferred ones.
Elsewhere (other devices and dtypes, no compiler, ``MEMREAD_NO_EXTENSIONS=1``, ``backend = "function"``)
:meth:`~MemoryReads.attend` is the composition ``scores -> masked_softmax -> glimpse``, the reference
the kernel is tested against (tests/test_attend_kernel.py).

**Backends.** ``MemoryReads(memory, backend)`` (the IAA head config's ``backend``): ``"auto"`` the fused
kernel where it can run (CPU float32 / float64, keys of the memory's dtype and device, the source built),
else the composition; ``"compiled"`` the fused kernel or a :class:`~memread.errors.MemreadError`;
``"function"`` the composition everywhere (its deferred-gradient Functions; what a GPU runs).
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import Tensor

from memread._compiled import CompiledOps, check_backend
from memread.errors import MemreadError
from memread.modules.masking import masked_softmax

# The fused read (``_attend_kernels.cpp``) runs for CPU float32 / float64 tensors when it could be built;
# otherwise :meth:`MemoryReads.attend` composes scores, masked_softmax and glimpse. ``backend`` chooses.
SOURCE = Path(__file__).with_name("_attend_kernels.cpp")
# ``kernels()``: ``torch.ops.memread_attend`` (ops ``forward`` and ``backward``), built on first call
kernels = CompiledOps("memread_attend", SOURCE, "memread_attend", "attention read kernels")
# :meth:`MemoryReads.attend`'s backends (module docstring): "function" = the composition
BACKENDS: tuple[str, ...] = ("auto", "compiled", "function")


class MemoryReads:
    """Reads of ``memory`` (B, S, E): :meth:`scores` against keys, :meth:`glimpse` with weights,
    :meth:`attend` both at once; ``backend`` picks :meth:`attend`'s fused kernel or composition (module
    docstring), ``who`` names the model in its errors."""

    def __init__(self, memory: Tensor, backend: str = "auto", who: str = "memory reads"):
        self.backend, self.who = check_backend(backend, BACKENDS, who), who
        self.deferred = torch.is_grad_enabled() and memory.requires_grad
        self.left: list[Tensor] = []  # (B, S) factors
        self.right: list[Tensor] = []  # (B, E) factors
        self._source = memory.detach()
        self._memory_t: Tensor | None = None
        self._memory_c: Tensor | None = None
        self.memory = _Collect.apply(memory, self) if self.deferred else memory

    @property
    def memory_t(self) -> Tensor:
        """``M^T`` (B, E, S), contiguous; made on first use."""
        if self._memory_t is None:
            self._memory_t = self._source.transpose(1, 2).contiguous()
        return self._memory_t

    @property
    def memory_c(self) -> Tensor:
        """``M`` (B, S, E), contiguous (no copy when it is); for the fused kernel."""
        if self._memory_c is None:
            self._memory_c = self._source.contiguous()
        return self._memory_c

    def fused_ops(self, key: Tensor):
        """``torch.ops.memread_attend`` when :meth:`attend` with ``key`` runs the compiled kernel, else None
        (with ``backend = "compiled"`` an error instead of None)."""
        if key.dtype != self._source.dtype or key.device != self._source.device:
            if self.backend == "compiled":
                raise MemreadError(f"{self.who}: backend = 'compiled' needs keys of the memory's dtype and device, "
                                   f"got {key.dtype} on {key.device} for {self._source.dtype} on "
                                   f"{self._source.device}; use backend = 'auto'")
            return None  # (the IAA loop runs in float32 under autocast: its keys are float32 there)
        return kernels.for_backend(self._source, self.backend, self.who)

    def attend(self, key: Tensor, mask: Tensor | None = None, glimpse: bool = True) -> tuple[Tensor, Tensor | None]:
        """``att = masked_softmax(M k, mask)`` (B, S) and, with ``glimpse``, ``att^T M`` (B, E) (else None):
        key (B, E), mask (B, S) bool, True = a real slot (a row with none gets zeros)."""
        if self.fused_ops(key) is None or (mask is not None and mask.device != key.device):
            att = masked_softmax(self.scores(key), mask)
            return att, (self.glimpse(att) if glimpse else None)
        B, S, _ = self._source.shape
        if mask is None:
            mask = torch.ones(B, S, dtype=torch.bool, device=key.device)
        mask = mask.to(torch.bool).expand(B, S).contiguous()
        att, read = _Attend.apply(self.memory, key, mask, self, glimpse)
        return att, (read if glimpse else None)

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


class _Attend(torch.autograd.Function):
    """The fused read: (memory, key, mask) -> att (B, S), glimpse (B, E) (empty without ``with_glimpse``),
    by the compiled kernel; backward in one pass, ``dL/dM``'s factors deferred to ``reads``."""

    @staticmethod
    def forward(ctx, memory: Tensor, key: Tensor, mask: Tensor, reads: MemoryReads, with_glimpse: bool):
        att, read = kernels().forward(reads.memory_c, key.contiguous(), mask, with_glimpse)
        ctx.reads = reads
        ctx.set_materialize_grads(False)
        ctx.save_for_backward(key, att, read)
        if not with_glimpse:
            ctx.mark_non_differentiable(read)
        return att, read

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, d_att: Tensor | None, d_read: Tensor | None):
        key, att, read = ctx.saved_tensors
        if read.numel() == 0:
            d_read = None
        if d_att is None and d_read is None:
            return None, None, None, None, None
        reads = ctx.reads
        empty = att.new_empty(0)
        ds, d_key = kernels().backward(reads.memory_c, att, read,
                                       empty if d_read is None else d_read.contiguous(),
                                       empty if d_att is None else d_att.contiguous())
        if reads.deferred:
            reads.left.append(ds)  # dL/dM += ds key^T, deferred
            reads.right.append(key)
            if d_read is not None:
                reads.left.append(att)  # dL/dM += att g^T, deferred
                reads.right.append(d_read)
        return None, d_key, None, None, None
