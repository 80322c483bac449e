"""LSTM decoder with additive attention over the source states: the RNNSearch-like decoder of the
``lstm-lstm`` and ``nse-lstm`` translation models (Munkhdalai & Yu 2016, section 4.5; the baseline of
Bahdanau et al. 2015). See :mod:`memread.heads.translation` for where it sits::

    h_t   = LSTM(y_t [; h~_{t-1}])                     (input feeding optional)
    a_tj  = softmax_j(v^T tanh(W_k s_j + W_q h_t))      source keys W_k s_j projected once
    ctx_t = sum_j a_tj s_j
    h~_t  = tanh(W_c [h_t; ctx_t])                      the output that predicts y_{t+1}

The decoder protocol of :mod:`memread.decoding`: ``start``, ``forward`` (teacher forcing), ``step``
(one token, O(source)), ``reorder`` (beam rows).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from memread.modules.attention import AdditiveAttention
from memread.modules.masking import masked_mean, masked_softmax
from memread.readers.base import ReaderOutput
from memread.typed import PositiveInt


@dataclass
class AttentionDecoderConfig:
    hidden: PositiveInt = 300
    layers: PositiveInt = 2
    input_feeding: bool = False


class AttentionLSTMDecoder(nn.Module):
    """LSTM decoder with additive attention over the source states (module docstring, ``lstm-lstm``):
    y (B, T, E) -> states h~ (B, T, hidden)."""

    def __init__(self, cfg: AttentionDecoderConfig, input_size: int, source_size: int):
        super().__init__()
        self.cfg = cfg
        H = cfg.hidden
        self.input_size, self.output_size = input_size, H
        self.lstm = nn.LSTM(input_size + (H if cfg.input_feeding else 0), H, num_layers=cfg.layers, batch_first=True)
        self.attention = AdditiveAttention(source_size, H, H)  # v^T tanh(W_k s_j + W_q h_t)
        self.init = nn.Linear(source_size, cfg.layers * H)  # h_0 = tanh(W_0 mean_j s_j)
        self.combine = nn.Linear(H + source_size, H, bias=False)  # h~_t = tanh(W_c [h_t; ctx_t])

    def start(self, source_states: Tensor, source_cells: Tensor | None, source_mask: Tensor) -> dict:
        B = source_states.size(0)
        L, H = self.cfg.layers, self.cfg.hidden
        h0 = torch.tanh(self.init(masked_mean(source_states, source_mask))).view(B, L, H).transpose(0, 1).contiguous()
        return {"source": source_states, "keys": self.attention.project_keys(source_states), "mask": source_mask,
                "lstm": (h0, torch.zeros_like(h0)), "feed": source_states.new_zeros(B, H)}

    def _output(self, h: Tensor, state: dict) -> tuple[Tensor, Tensor]:
        """Queries h (B, T, H) -> outputs h~ (B, T, H) and attention (B, T, S), all steps at once."""
        scores = self.attention.score_queries(h, state["keys"])  # v^T tanh(W_k s_j + W_q h_t)  (B, T, S)
        alpha = masked_softmax(scores, state["mask"].unsqueeze(1))
        ctx = torch.bmm(alpha, state["source"])  # (B, T, Hs)
        return torch.tanh(self.combine(torch.cat([h, ctx], dim=-1))), alpha

    def forward(self, y: Tensor, y_mask: Tensor | None, source_states: Tensor, source_cells: Tensor | None,
                source_mask: Tensor, return_attention: bool = False) -> ReaderOutput:
        state = self.start(source_states, source_cells, source_mask)
        if self.cfg.input_feeding:  # h~_{t-1} feeds step t: one step at a time
            outs, alphas = [], []
            for t in range(y.size(1)):
                out_t, state = self.step(y[:, t], state)
                outs.append(out_t)
                alphas.append(state["alpha"])
            out, alpha = torch.stack(outs, dim=1), torch.stack(alphas, dim=1)
        else:  # padded steps sit at the end: their outputs are ignored, no packing needed
            h, lstm = self.lstm(y, state["lstm"])  # (B, T, H)
            out, alpha = self._output(h, state)
            state = {**state, "lstm": lstm}
        return ReaderOutput(states=out, state=state, attention=alpha if return_attention else None)

    def step(self, y_t: Tensor, state: dict) -> tuple[Tensor, dict]:
        inp = torch.cat([y_t, state["feed"]], dim=-1) if self.cfg.input_feeding else y_t
        h, lstm = self.lstm(inp.unsqueeze(1), state["lstm"])  # (B, 1, H)
        out, alpha = self._output(h, state)
        out = out.squeeze(1)
        return out, {**state, "lstm": lstm, "feed": out, "alpha": alpha.squeeze(1)}

    @staticmethod
    def step_trace(state: dict) -> dict[str, Tensor]:
        """The weights of the step that gave ``state``: ``"source"`` a_t (B, S) over the source states."""
        return {"source": state["alpha"]}

    def reorder(self, state: dict, index: Tensor) -> dict:
        h, c = state["lstm"]
        new = {k: v.index_select(0, index) for k, v in state.items() if k != "lstm"}
        return {**new, "lstm": (h.index_select(1, index), c.index_select(1, index))}
