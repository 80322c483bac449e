"""NSE decoder with shared memory access: the decoder of the NSE paper's NSE-NSE translation model
(Munkhdalai & Yu 2016, section 4.5: "the decoder NSE now uses the output state and has an access to
the encoder memory, i.e., the encoder and the decoder NSEs access a shared memory. The memory is
encoded by the first NSEs and then read/written by the decoder NSEs").

**No own memory.** An NSE's own memory is initialised with its whole input (the *baby* memory
``M_0 = (x_1 .. x_l)``). For a decoder under teacher forcing the input is the target sentence, so
step ``t`` could read the embeddings of target words ``t+1 ..`` out of its own memory: the model would
learn to copy the answer and could not decode. This decoder therefore has only the shared memory
``M^n``, the encoder NSE's final memory ``M_T`` (one slot per source word), and runs MMA-NSE's
equations restricted to it: for target input ``y_t``::

    o_t       = f_r^LSTM(y_t)                                                   (7)  read
    z_t^n     = softmax(o_t^T M_{t-1}^n)        over the real source slots      (10) key
    m_{r,t}^n = z_t^{nT} M_{t-1}^n                                              (11) retrieved slot
    c_t       = f_c^MLP(o_t, m_{r,t}^n) = W_c [o_t; m_{r,t}^n] + b_c            (12) compose
    h_t       = f_w^LSTM(c_t)                                                   (13) write
    M_t^n     = M_{t-1}^n (1 - (z_t^n (x) e_k)^T) + (h_t (x) e_n)(z_t^n (x) e_k)^T  (15)

(8), (9) and (14), the own memory's key, read and write, are left out.) ``h_t`` is the decoder's
output state, fed to the softmax over the target vocabulary by the task. Every step only depends on
``y_1 .. y_t`` and the source, so teacher forcing and step-by-step decoding give the same values.

The modules are the NSE reader's (:mod:`memread.readers.nse`): ``f_r`` an ``nn.LSTM`` (``layers``
deep), ``f_c`` one affine layer without activation from ``2k`` to ``2k`` units, ``f_w`` an LSTM over
``c_t`` stepped by hand, uniform(-0.1, 0.1) initialisation, ``dropout`` on the read LSTM's input and on
``c_t``. The read LSTM and the ``W_c^o o_t + b_c`` part of (12) run once over all target steps; only
(10)-(15) loop over ``t``.

**Dropout.** Under teacher forcing the dropout on ``c_t`` is one scaled 0/1 keep-mask (B, T, 2k) drawn
for all steps before the loop (as the NSE reader does): the same distribution as a mask drawn at each
step (every entry is an independent draw either way), only the random stream differs; ``step()`` draws
its mask at each step.

**Compiled loop.** On the CPU in float32 and float64, teacher forcing runs the time loop (10)-(15) and
its backward pass in C++ when the NSE kernels can be built (:mod:`memread.readers._nse_kernels`,
``_NSECompiledLoop`` of :mod:`memread.readers._nse_autograd` with the shared memory as its only memory and
the target mask for the real steps): no Python and no autograd graph per step. Elsewhere (other devices,
``dec.backend = "function"``: the NSE reader's backends, :mod:`memread.readers.nse`; ``MEMREAD_NO_EXTENSIONS=1``;
no compiler) it runs the NSE reader's ``_NSELoop`` (a hand-written backward pass, preallocated buffers, no
autograd graph per step: what a GPU runs); with ``dec.backend = "autograd"``, step by step in
Python under autograd (:meth:`NSEDecoder._python_loop`, the readable reference). Tests check all three against
each other. Under
``torch.autocast`` the loop (either one) runs in float32 (:mod:`memread.modules.precision`).

**Padding.** At a padded target step ``z_t^n = 0``: nothing is read from or written to the shared
memory, so ``out.memory`` is the memory after each row's last real word; the read and write LSTMs
still run there (their states are not masked), so ``out.state``'s LSTM states are those after all
``T`` steps, padded ones included, and ``states`` at padded steps are not meaningful.

**Interface** (the decoder protocol of :mod:`memread.decoding`)::

    state = dec.start(source_states, source_cells, source_mask)   # source_states: the encoder NSE's M_T
    out = dec(y, y_mask, source_states, source_cells, source_mask)  # teacher forcing: states (B, T, k)
    out_t, state = dec.step(y_t, state)                            # one step: (B, k), O(source) work
    state = dec.reorder(state, index)                               # beam search

``source_cells`` is unused (it is for decoders over an LSTMN encoder's memory tape). ``out.memory`` is
the shared memory after the last real target word, ``out.attention`` (with ``return_attention``) the
keys ``z_t^n`` (B, T, S), ``out.state`` the state after the last step (``step()`` continues from it;
its memory and write LSTM states are differentiable on both paths).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from memread.errors import MemreadError
from memread.modules.precision import in_float32, to_float32
from memread.readers.base import ReaderOutput
from memread._compiled import check_backend
from memread.readers._nse_autograd import BACKENDS, _keys, function_loop
from memread.readers.nse import INIT_RANGE
from memread.typed import DropoutRate, PositiveInt


@dataclass
class NSEDecoderConfig:
    hidden: PositiveInt = 300  # k: must equal the encoder NSE's slot size
    layers: PositiveInt = 1  # of the read LSTM and of the write LSTM
    dropout: DropoutRate = 0.0  # on the read LSTM's input y_t and on the write LSTM's input c_t


class NSEDecoder(nn.Module):
    """y (B, T, E) target input embeddings + the encoder's memory (B, S, k) -> states h (B, T, k)."""

    def __init__(self, cfg: NSEDecoderConfig, input_size: int):
        super().__init__()
        if cfg.hidden < 1 or cfg.layers < 1 or not 0.0 <= cfg.dropout < 1.0:
            raise MemreadError(f"NSE decoder: hidden and layers must be positive and dropout in [0, 1), got {cfg}")
        self.cfg = cfg
        self.backend = "auto"  # the time loop, as the NSE reader's backend: "auto", "compiled", "function", "autograd"
        self.input_size = input_size
        self.output_size = k = cfg.hidden
        self.read = nn.LSTM(input_size, k, num_layers=cfg.layers, batch_first=True)  # f_r^LSTM (7)
        self.compose = nn.Linear(2 * k, 2 * k)  # f_c^MLP (12)
        self.write = nn.ModuleList(nn.LSTMCell(2 * k if layer == 0 else k, k) for layer in range(cfg.layers))  # (13)
        self.drop = nn.Dropout(cfg.dropout)
        for p in self.parameters():
            nn.init.uniform_(p, -INIT_RANGE, INIT_RANGE)

    # ------------------------------------------------------------------ the protocol
    def start(self, source_states: Tensor, source_cells: Tensor | None, source_mask: Tensor) -> dict:
        """The state before the first target word: the shared memory M_0^n = the encoder's M_T
        (B, S, k), its mask (B, S), and zero read and write LSTM states."""
        B, S, k = source_states.shape
        if k != self.cfg.hidden:
            raise MemreadError(f"NSE decoder: the shared memory's slots have {k} units, the decoder has hidden = "
                               f"{self.cfg.hidden}; they must be equal")
        zeros = source_states.new_zeros(self.cfg.layers, B, k)
        return {"memory": source_states, "mask": source_mask, "read": (zeros, zeros.clone()),
                "write": [(zeros[0].clone(), zeros[0].clone()) for _ in range(self.cfg.layers)]}

    def forward(self, y: Tensor, y_mask: Tensor | None, source_states: Tensor, source_cells: Tensor | None,
                source_mask: Tensor, return_attention: bool = False) -> ReaderOutput:
        """Teacher forcing over the whole target input y (B, T, E), y_mask (B, T) (True = real)."""
        state = self.start(source_states, source_cells, source_mask)
        B, T, _ = y.shape
        if y_mask is None:
            y_mask = torch.ones(B, T, dtype=torch.bool, device=y.device)
        o, read = self.read(self.drop(y), state["read"])  # (7) all steps at once  (B, T, k)
        k = self.cfg.hidden
        W_co, W_cm = self.compose.weight.split([k, k], dim=1)
        c_o = F.linear(o, W_co, self.compose.bias)  # (12) W_c^o o_t + b_c  (B, T, 2k)
        # dropout on the write LSTM's input c_t: one scaled 0/1 mask drawn for all steps (in float32 under
        # autocast, where c_o is not: 1 / (1 - p) rounded to bfloat16 would bias the scale)
        keep = self.drop(to_float32(torch.ones_like(c_o))) if self.training and self.cfg.dropout > 0 else None
        # under autocast the loop runs in float32 (memread.modules.precision)
        h, z, M, *write = in_float32(self._loop, o, c_o, keep, y_mask, source_states, source_mask, W_cm)
        L = self.cfg.layers
        state = {**state, "memory": M, "read": read, "write": list(zip(write[:L], write[L:]))}
        return ReaderOutput(states=h, memory=M, memory_mask=source_mask, state=state,
                            attention=z if return_attention else None)

    def _loop(self, o, c_o, keep, y_mask, M0, source_mask, W_cm):
        """(10)-(15) over all steps: h (B, T, k), z (B, T, S), M_T, then the write LSTM's final h^l (B, k)
        of every layer and its final c^l of every layer: the NSE reader's fast loops (compiled where it runs,
        else ``_NSELoop``, the GPU's), or in Python under autograd with ``backend = "autograd"`` (the tests'
        reference)."""
        if check_backend(self.backend, BACKENDS, "NSE decoder") == "autograd":
            return self._python_loop(o, c_o, keep, y_mask, M0, source_mask, W_cm)
        weights = [W_cm]
        for cell in self.write:
            weights += [cell.weight_ih, cell.weight_hh, cell.bias_ih + cell.bias_hh]
        loop = function_loop(o, self.backend, "NSE decoder")  # _NSECompiledLoop where it runs, else _NSELoop
        return loop.apply(o, c_o, keep, y_mask.bool(), [source_mask.bool()], self.cfg.layers, True, None, None, M0,
                          *weights)

    def _python_loop(self, o, c_o, keep, y_mask, M0, source_mask, W_cm):
        """The loop of :meth:`_loop` step by step under autograd (the step of :meth:`step`)."""
        B, T, k = o.shape
        zeros = o.new_zeros(B, k)
        state = {"memory": M0, "mask": source_mask, "write": [(zeros, zeros) for _ in range(self.cfg.layers)]}
        live = y_mask.to(o.dtype)  # (B, T): nothing is read or written at padded steps
        hs, zs = [], []
        for t in range(T):
            keep_t = None if keep is None else keep[:, t]
            h_t, z_t, state = self._compose_write(o[:, t], c_o[:, t], W_cm, live[:, t : t + 1], state, keep_t)
            hs.append(h_t)
            zs.append(z_t)
        hw, cw = zip(*state["write"])
        return torch.stack(hs, dim=1), torch.stack(zs, dim=1), state["memory"], *hw, *cw

    def step(self, y_t: Tensor, state: dict) -> tuple[Tensor, dict]:
        """One target word y_t (B, E) -> h_t (B, k) and the next state."""
        o_t, read = self.read(self.drop(y_t).unsqueeze(1), state["read"])  # (7)
        o_t = o_t.squeeze(1)
        k = self.cfg.hidden
        W_co, W_cm = self.compose.weight.split([k, k], dim=1)
        c_o = F.linear(o_t, W_co, self.compose.bias)
        live = o_t.new_ones(o_t.size(0), 1)
        h_t, z_t, state = self._compose_write(o_t, c_o, W_cm, live, {**state, "read": read})
        return h_t, {**state, "attention": z_t}  # z_t kept for inspection (step_trace)

    @staticmethod
    def step_trace(state: dict) -> dict[str, Tensor]:
        """The weights of the step that gave ``state``: ``"source"`` the key z_t^n (B, S) over the shared
        memory's slots (one per source word), which is also where the step erased and wrote (15)."""
        return {"source": state["attention"]}

    def reorder(self, state: dict, index: Tensor) -> dict:
        h, c = state["read"]
        return {"memory": state["memory"].index_select(0, index), "mask": state["mask"].index_select(0, index),
                "read": (h.index_select(1, index), c.index_select(1, index)),
                "write": [(hw.index_select(0, index), cw.index_select(0, index)) for hw, cw in state["write"]]}

    # ------------------------------------------------------------------ one step of (10)-(15)
    def _compose_write(self, o_t: Tensor, c_o_t: Tensor, W_cm: Tensor, live: Tensor, state: dict,
                       keep_t: Tensor | None = None):
        """``keep_t`` (B, 2k): the dropout keep-mask of this step, drawn by the caller; None: drawn here."""
        M, mask = state["memory"], state["mask"]
        z_t = _keys(M, o_t, mask, live)  # (10)  (B, S)
        m_t = torch.bmm(z_t.unsqueeze(1), M).squeeze(1)  # (11)  (B, k)
        c_t = torch.addmm(c_o_t, m_t, W_cm.t())  # (12)
        inp = self.drop(c_t) if keep_t is None else c_t * keep_t  # dropout on the write LSTM's input
        write = []
        for cell, (hw, cw) in zip(self.write, state["write"]):  # (13)
            hw, cw = cell(inp, (hw, cw))
            write.append((hw, cw))
            inp = hw
        h_t = inp
        M = torch.baddbmm(M * (1 - z_t).unsqueeze(2), z_t.unsqueeze(2), h_t.unsqueeze(1))  # (15)
        return h_t, z_t, {**state, "memory": M, "write": write}


def build_nse_decoder(cfg: NSEDecoderConfig, input_size: int) -> NSEDecoder:
    return NSEDecoder(cfg, input_size)
