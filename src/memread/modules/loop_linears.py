"""Linear layers applied at every step of a loop, with each weight's gradient formed once.

A recurrence that applies the same ``nn.Linear`` at T steps makes autograd compute, for every step,
the weight gradient ``dy_t^T x_t`` (a product with only the batch as its inner dimension) and add it
into the weight's gradient: T small products and T - 1 additions of a weight-sized tensor.
:class:`LoopLinears` records the two factors of every call instead, and forms each weight's gradient
once, after the loop's backward pass, as one product over all steps (the bias: one sum)::

    dL/dW = sum_t dy_t^T x_t = [dy_1; ..; dy_T]^T [x_1; ..; x_T]

The input's gradient ``dy_t W`` is computed at each step as usual (the recurrence needs it). Values
equal ``nn.Linear``'s; gradients equal autograd's up to summation order (tests/test_iaa.py). Like
:class:`memread.modules.memory_reads.MemoryReads`, this relies on autograd running the backward of
the identity node that every call reads the weight through only after all of those calls' backward.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn


class LoopLinears:
    """``linears(layer, x)`` = ``layer(x)`` with the weight gradient deferred (one object per forward)."""

    def __init__(self):
        self._calls: dict[nn.Linear, _Calls] = {}

    def __call__(self, layer: nn.Linear, x: Tensor) -> Tensor:
        if not (torch.is_grad_enabled() and layer.weight.requires_grad):
            return layer(x)
        calls = self._calls.get(layer)
        if calls is None:
            calls = self._calls[layer] = _Calls(layer)
        return _Apply.apply(x, calls.weight, calls.bias, calls)


class _Calls:
    """The recorded factors of one layer's calls, and its weight (and bias) seen through ``_Collect``."""

    def __init__(self, layer: nn.Linear):
        self.inputs: list[Tensor] = []  # x_t (.., in)
        self.grads: list[Tensor] = []  # dy_t (.., out)
        self.has_bias = layer.bias is not None
        bias = layer.bias if self.has_bias else layer.weight.new_zeros(0)
        self.weight, self.bias = _Collect.apply(layer.weight, bias, self)


class _Collect(torch.autograd.Function):
    """Identity on (weight, bias); its backward runs after every call's and forms their gradients."""

    @staticmethod
    def forward(ctx, weight: Tensor, bias: Tensor, calls: _Calls):
        ctx.calls = calls
        ctx.set_materialize_grads(False)
        return weight.view_as(weight), bias.view_as(bias)

    @staticmethod
    def backward(ctx, grad_weight: Tensor | None, grad_bias: Tensor | None):
        calls = ctx.calls
        if not calls.inputs:
            return grad_weight, grad_bias, None
        x = torch.cat([t.reshape(-1, t.size(-1)) for t in calls.inputs])  # (N, in)
        dy = torch.cat([t.reshape(-1, t.size(-1)) for t in calls.grads])  # (N, out)
        calls.inputs, calls.grads = [], []
        dw = dy.t() @ x
        dw = dw if grad_weight is None else dw + grad_weight
        db = None
        if calls.has_bias:
            db = dy.sum(0)
            db = db if grad_bias is None else db + grad_bias
        return dw, db, None


class _Apply(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: Tensor, weight: Tensor, bias: Tensor, calls: _Calls) -> Tensor:
        ctx.save_for_backward(x, weight)
        ctx.calls = calls
        return F.linear(x, weight, bias if calls.has_bias else None)

    @staticmethod
    def backward(ctx, grad: Tensor):
        x, weight = ctx.saved_tensors
        ctx.calls.inputs.append(x)  # dL/dW += grad^T x, deferred
        ctx.calls.grads.append(grad)
        grad_x = grad @ weight if ctx.needs_input_grad[0] else None
        return grad_x, None, None, None
