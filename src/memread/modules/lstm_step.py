"""One LSTM step written out from an ``nn.LSTM``'s weights: the readers' equation-by-equation references
(``impl = "reference"``) read their fused LSTMs through it, one token at a time::

    [i; f; g; o] = W_ih x_t + W_hh h_{t-1} + b_ih + b_hh          (torch's gate order)
    c_t = sigmoid(f) * c_{t-1} + sigmoid(i) * tanh(g)
    h_t = sigmoid(o) * tanh(c_t)
"""

from __future__ import annotations

import torch
from torch import Tensor, nn


def lstm_step(lstm: nn.LSTM, layer: int, x_t: Tensor, h: Tensor, c: Tensor) -> tuple[Tensor, Tensor]:
    """``(h_t, c_t)`` of layer ``layer`` of ``lstm`` from ``x_t`` (I,) and ``h_{t-1}``, ``c_{t-1}`` (H,)."""
    W_ih, W_hh = getattr(lstm, f"weight_ih_l{layer}"), getattr(lstm, f"weight_hh_l{layer}")
    b = getattr(lstm, f"bias_ih_l{layer}") + getattr(lstm, f"bias_hh_l{layer}")
    i, f, g, o = (W_ih @ x_t + W_hh @ h + b).chunk(4)
    c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
    return torch.sigmoid(o) * torch.tanh(c), c
