"""Long Short-Term Memory-Network (LSTMN) reader: Cheng, Dong and Lapata (2016), sections 3.2-3.3,
with two additions of the paper's earlier version: a bounded memory span and per-layer attention
that also looks at the lower layer's output.

The LSTM's single memory cell is replaced by two tapes that grow by one slot per token: a hidden
tape ``H = (h_1 .. h_{t-1})`` and a memory tape ``C = (c_1 .. c_{t-1})``. Reading token ``x_t``::

    a_i^t = v^T tanh(W_h h_i + W_x x_t + W_h~ h~_{t-1})          (4)  i over the tape
    s^t   = softmax(a^t)                                           (5)
    [h~_t; c~_t] = sum_i s_i^t [h_i; c_i]                          (6)  adaptive summaries
    [i_t; f_t; o_t; c^_t] = [sig; sig; sig; tanh](W [h~_t; x_t] + b)   (7)
    c_t = f_t * c~_t + i_t * c^_t                                  (8)
    h_t = o_t * tanh(c_t)                                          (9)

and ``h_t``, ``c_t`` are written to a new slot. (The paper writes no bias in (7), nor in its LSTM
equation (1); like every LSTM we give the gates one. Equation (4) has none and gets none.)

**The tape start** (``tape_start``). The paper: the sum in (6) runs over ``i = 1 .. t-1`` over the
tapes ``H_{t-1} = (h_1 .. h_{t-1})``, so the first token of a text has an empty tape: ``h~_1 = c~_1 = 0``
(the LSTM's zero initial state), and ``h~_0 = 0`` in (4). That is ``tape_start = "empty"``, the default
(and memread's only behaviour before the option existed, so configs and checkpoints without the key
read as before). The authors' Torch code (github.com/cheng6076/SNLI-attention, ``LSTMN.lua`` with
``model/encoder_lstmn_w2v.lua`` and ``model/decoder_deep_w2v.lua``) instead starts both tapes with one
zero slot, ``h_0 = c_0 = 0`` (its ``h_init``): token ``t`` attends over ``h_0 .. h_{t-1}``, so the zero
slot takes part in the softmax (5) of every token. ``tape_start = "zero_slot"`` does that: the slot's key
is ``W_h 0 = 0``, so its score is ``v^T tanh(W_x x_t + W_h~ h~_{t-1})`` and its value ``[0; 0]`` adds
nothing to (6), but its weight ``s_0^t`` is taken from the real slots, which then sum to ``1 - s_0^t``.
At ``t = 1`` it gets all the weight and ``h~_1 = c~_1 = 0`` as with an empty tape; from ``t = 2`` on
the two differ. The zero slot is not on the returned tapes: ``memory``, ``attention`` and the
state hold the written slots only (``attention`` rows sum to ``1 - s_0^t``), and a carried state
means the same thing under both options; the zero slot is in reach of every token, also beyond a
``span`` (which bounds the written slots; the authors' code has no span) and in every segment of a
stream, so reading in segments still equals reading at once.

**Deep LSTMN (3.3).** Layers are stacked; the output of layer ``k`` is its attention vector
``h~_t^k``, fed to layer ``k+1`` through a skip connection ``input_{k+1} = input_k + output_k``
(when the embedding size differs from ``hidden``, ``input_1`` enters the sum through a learned
projection, as in a ResNet shortcut). Each layer has its own tapes. With ``deep_attention`` the
attention of layer ``k+1`` also conditions on layer ``k``'s new hidden state, the earlier version's
``W_l h_t^k`` term: ``a_i^{t,k+1} = v^T tanh(W_h h_i^{k+1} + W_x input_t^{k+1} + W_l h_t^k +
W_h~ h~_{t-1}^{k+1})``. The reader's ``states`` are the top layer's ``h_t`` (its hidden tape is what
interacts with the environment), and ``memory`` is that tape.

**Memory span (early version).** With ``span = N`` a token attends only to the ``N`` most recent slots.

**State across calls (BPTT segments, sentences).** The returned ``state`` is a dict of tensors::

    {"h": (L, B, S, H), "c": (L, B, S, H), "h_tilde": (L, B, H), "slots": (B,) int64}

holding, per layer, the most recent ``span`` slots of both tapes (all slots when ``span = 0``),
right-aligned: row ``b``'s real slots are the last ``slots[b]`` ones. ``h_tilde`` is ``h~`` of the
row's last real token, for the ``W_h~ h~_{t-1}`` term of the next token. Because the state keeps
exactly the slots the next tokens may attend to, reading a text in segments gives the same values as
reading it at once (and token by token gives the same as a whole sentence). The key projections
``W_h h_i`` of carried slots are recomputed from the carried ``h`` once per call (one matmul), not
carried: the carried tape is detached between BPTT segments, but ``W_h`` still receives its gradient
through the keys read by the current segment, as an LSTM's recurrent weights do at a segment start.

For language modelling the tape therefore extends ``span`` tokens back across segment and sentence
boundaries: the model sees the same window at every position of the stream, in training and in
evaluation, however the stream is cut into BPTT segments; ``<eos>`` is an ordinary token that the
reader may learn to attend to or not, just as the LSTM baseline carries its state across sentences.
A continuous stream needs ``span > 0``: with ``span = 0`` the tape (and the cost of every step) would
grow with the stream, so a carried tape longer than ``MAX_UNBOUNDED_TAPE`` slots is refused. Read the
authors' way instead (``[data] context = "sentence"``, :mod:`memread.data.sentence_lm`), each sentence is
a text of its own: nothing is carried, and with ``span = 0`` the tape is exactly the sentence read so far.

**Fast path and backends.** Per layer, what depends only on the input is computed for all steps in
one matmul (``W_x x_t`` and the input part of the gates; with ``deep_attention`` also ``W_l h_t^k``);
the recurrence then runs as a custom autograd function with a hand-written backward pass
(:mod:`memread.readers._lstmn_autograd`, which describes it), in C++ on the CPU
(:mod:`memread.readers._lstmn_kernels`) or in Python. The config's ``backend`` picks it (settable on a
built reader, ``reader.backend = "function"``): ``"auto"`` (the default) the compiled loop where it can
run (CPU tensors in float32 or float64, a compiler to build it), else the Python loop; ``"compiled"``
the compiled loop or an error; ``"function"`` the Python loop everywhere (what a GPU runs). Same values
(to float32 precision; equal in float64).

**Autocast.** Under ``torch.autocast`` (mixed-precision training) the input projections run in the
autocast dtype and the recurrence in float32: the layer function gets its inputs cast to float32 and
runs with autocast off (:mod:`memread.modules.precision`), so the tapes and ``h~`` come out in float32
and on the CPU the compiled loops still run; the reference is read in float32 too.

**Reference.** ``impl = "reference"`` reads each text one token at a time with
:func:`reference_layer`, equations (4)-(9) as the paper writes them, with autograd: the form to check
the fast path against (``tests/test_lstmn.py`` and ``tests/test_reader_contract.py`` compare the two
in float64), far too slow to train with. Both take the same parameters, state and padding.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from memread._compiled import check_backend
from memread.errors import MemreadError
from memread.modules.precision import in_float32
from memread.readers._lstmn_autograd import BACKENDS, _LSTMNLayerFunction
from memread.readers.base import ReaderOutput
from memread.typed import DropoutRate, NonNegInt, PositiveInt

# A carried tape longer than this with ``span = 0`` is refused: set ``span`` for continuous streams.
MAX_UNBOUNDED_TAPE = 4096


@dataclass
class LSTMNConfig:
    name: Literal["lstmn"] = "lstmn"
    hidden: PositiveInt = 300  # size of h_t, c_t and of the attention layer in (4)
    layers: PositiveInt = 1  # deep LSTMN (3.3): attention vector of layer k + skip connection -> layer k+1
    span: NonNegInt = 0  # attend to at most the `span` most recent slots; the state carries as many. 0 = unbounded
    deep_attention: bool = False  # early version: layer k+1's attention also sees h_t^k (its W_l term)
    dropout: DropoutRate = 0.0  # on each layer's output before it feeds the layer above (layers > 1)
    impl: Literal["fast", "reference"] = "fast"  # "reference": equations (4)-(9) token by token, to check against
    # "empty": the paper's (6), i = 1 .. t-1 (the first token's tape is empty); "zero_slot": the authors' Torch
    # code, the tapes start with one slot h_0 = c_0 = 0 that every token may attend to (module docstring)
    tape_start: Literal["empty", "zero_slot"] = "empty"
    # the fast path's time loop: "auto" = the compiled C++ loop for CPU tensors where it builds, else "function"
    # (the hand-written autograd Function in Python, what a GPU runs); "compiled" = C++ or an error. Same values
    backend: Literal["auto", "compiled", "function"] = "auto"


class LSTMNLayer(nn.Module):
    """The parameters of one LSTMN layer, named after equations (4) and (7)."""

    def __init__(self, input_size: int, hidden: int, lower: bool):
        super().__init__()
        self.hidden = hidden
        self.W_h = nn.Linear(hidden, hidden, bias=False)  # (4) keys of the hidden tape
        self.W_x = nn.Linear(input_size, hidden, bias=False)  # (4) the current input
        self.W_h_tilde = nn.Linear(hidden, hidden, bias=False)  # (4) the previous attention vector
        self.W_l = nn.Linear(hidden, hidden, bias=False) if lower else None  # early version: h_t^{k-1}
        self.v = nn.Parameter(torch.empty(hidden))  # (4)
        self.W = nn.Linear(hidden + input_size, 4 * hidden)  # (7) over [h~_t, x_t] -> i, f, o, c^
        bound = 1.0 / math.sqrt(hidden)
        for p in self.parameters():
            nn.init.uniform_(p, -bound, bound)

    def forward(self, inp: Tensor, lower_h: Tensor | None, H0: Tensor, C0: Tensor, h_tilde0: Tensor,
                start: Tensor | None, span: int, zero_slot: bool = False,
                backend: str = "auto") -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """inp (B, T, I), lower_h (B, T, H) or None, carried H0, C0 (B, S0, H), h_tilde0 (B, H), zero_slot
        (``tape_start = "zero_slot"``), backend (the reader's) -> hidden and memory tapes (B, S0 + T, H),
        h~ (B, T, H), attention weights (B, T, S0 + T) over the written slots."""
        Hd = self.hidden
        W_gh, W_gx = self.W.weight.split([Hd, self.W.in_features - Hd], dim=1)  # (7) on h~_t, on x_t
        W_in = torch.cat([self.W_x.weight, W_gx], dim=0)  # (A + 4H, I)
        proj = torch.nn.functional.linear(inp, W_in)  # W_x x_t and the gates' input part, all steps
        if self.W_l is not None and lower_h is not None:
            proj = proj + torch.nn.functional.pad(self.W_l(lower_h), (0, 4 * Hd))  # + W_l h_t^{k-1}
        W_f = torch.cat([W_gh, self.W_h_tilde.weight], dim=0)  # (4H + A, H)
        b_f = torch.cat([self.W.bias, self.W.bias.new_zeros(Hd)])  # the gates' bias, added with W_f h~_t
        K0 = self.W_h(H0)  # keys of the carried slots  (B, S0, A)
        for_backward = torch.is_grad_enabled()
        # under autocast: the recurrence in float32 (memread.modules.precision), on the compiled loops on the CPU
        return in_float32(
            _LSTMNLayerFunction.apply,
            proj, H0, C0, K0, h_tilde0, W_f, b_f, self.W_h.weight, self.v, start, span, for_backward, zero_slot,
            backend,
        )


# ----------------------------------------------------------------------------- one layer, the reference


def reference_layer(layer: LSTMNLayer, inp: Tensor, lower_h: Tensor | None, H0: Tensor, C0: Tensor,
                    h_tilde0: Tensor, span: int, zero_slot: bool = False) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Equations (4)-(9) for one text, one token at a time, as the paper writes them (``impl = "reference"``).

    inp (n, I): the layer's input x_t; lower_h (n, H): the layer below's h_t (deep attention) or None;
    H0, C0 (n0, H): the carried slots of the hidden and memory tapes; h_tilde0 (H,): h~ before the text;
    zero_slot: ``tape_start = "zero_slot"``, the slot ``h_0 = c_0 = 0`` of the authors' code before the
    written slots of every token's window (its key ``W_h h_0`` computed as written).
    Returns the tapes (n0 + n, H) each, h~ (n, H) and the attention weights s^t (n, n0 + n) over the
    written slots (with the zero slot they sum to 1 - s_0^t).
    """
    n, n0 = inp.size(0), H0.size(0)
    H_tape, C_tape = list(H0), list(C0)  # h_1 .. h_{t-1}, c_1 .. c_{t-1}
    h_tilde_prev = h_tilde0  # h~_{t-1}
    h_tildes, weights = [], []
    for t in range(n):
        x_t = inp[t]
        slots = list(range(max(0, len(H_tape) - span) if span else 0, len(H_tape)))  # the span's last slots
        s_t = inp.new_zeros(n0 + n)
        if slots or zero_slot:
            query = layer.W_x(x_t) + layer.W_h_tilde(h_tilde_prev)
            if layer.W_l is not None and lower_h is not None:
                query = query + layer.W_l(lower_h[t])  # early version: W_l h_t^{k-1}
            h_read = [H_tape[i] for i in slots]  # the slots token t reads: (h_0 = 0,) h_lo .. h_{t-1}
            c_read = [C_tape[i] for i in slots]
            if zero_slot:
                h_read, c_read = [inp.new_zeros(layer.hidden)] + h_read, [inp.new_zeros(layer.hidden)] + c_read
            a_t = torch.stack([layer.v @ torch.tanh(layer.W_h(h_i) + query) for h_i in h_read])  # (4)
            s = torch.softmax(a_t, dim=0)  # (5)
            h_tilde = sum(s_i * h_i for s_i, h_i in zip(s, h_read))  # (6)
            c_tilde = sum(s_i * c_i for s_i, c_i in zip(s, c_read))  # (6)
            if zero_slot:
                s = s[1:]  # the written slots' weights
            if slots:
                s_t = F.pad(s, (slots[0], n0 + n - slots[-1] - 1))
        else:  # an empty tape: h~_t = c~_t = 0
            h_tilde = c_tilde = inp.new_zeros(layer.hidden)
        i_t, f_t, o_t, c_hat = layer.W(torch.cat([h_tilde, x_t])).chunk(4)  # (7)
        i_t, f_t, o_t, c_hat = torch.sigmoid(i_t), torch.sigmoid(f_t), torch.sigmoid(o_t), torch.tanh(c_hat)
        c_t = f_t * c_tilde + i_t * c_hat  # (8)
        h_t = o_t * torch.tanh(c_t)  # (9)
        H_tape.append(h_t)  # write a new slot
        C_tape.append(c_t)
        h_tildes.append(h_tilde)
        weights.append(s_t)
        h_tilde_prev = h_tilde
    empty = inp.new_zeros(0, layer.hidden)
    return (torch.stack(H_tape) if H_tape else empty, torch.stack(C_tape) if C_tape else empty,
            torch.stack(h_tildes) if h_tildes else empty, torch.stack(weights) if weights else inp.new_zeros(0, n0))


# ----------------------------------------------------------------------------- the reader


class LSTMNReader(nn.Module):
    """LSTMN reader: x (B, T, E), mask (B, T) -> states (B, T, H); see the module docstring."""

    def __init__(self, cfg: LSTMNConfig, input_size: int):
        super().__init__()
        if cfg.hidden < 1 or cfg.layers < 1 or cfg.span < 0:
            raise MemreadError(f"reader lstmn: hidden and layers must be positive and span >= 0, got {cfg}")
        if cfg.tape_start not in ("empty", "zero_slot"):
            raise MemreadError(f"reader lstmn: tape_start must be 'empty' or 'zero_slot', got {cfg.tape_start!r}")
        self.cfg = cfg
        self.backend = cfg.backend  # the fast path's time loop; settable on the built reader (benches, tests)
        self.input_size = input_size
        self.output_size = cfg.hidden
        H = cfg.hidden
        self.layers = nn.ModuleList(
            LSTMNLayer(input_size if k == 0 else H, H, lower=cfg.deep_attention and k > 0) for k in range(cfg.layers)
        )
        # input_2 = input_1 + output_1 needs input_1 in R^H: a projection shortcut when E != H
        self.skip = nn.Linear(input_size, H, bias=False) if cfg.layers > 1 and input_size != H else None
        self.drop = nn.Dropout(cfg.dropout)

    @property
    def backend(self) -> str:
        """The fast path's time loop, ``"auto"``, ``"compiled"`` or ``"function"`` (the config's ``backend``)."""
        return self._backend

    @backend.setter
    def backend(self, value: str) -> None:
        self._backend = check_backend(value, BACKENDS, "reader lstmn")

    def initial_state(self, batch: int, like: Tensor) -> dict[str, Tensor]:
        """The empty tape (what ``state=None`` means)."""
        L, H = self.cfg.layers, self.cfg.hidden
        return {
            "h": like.new_zeros(L, batch, 0, H),
            "c": like.new_zeros(L, batch, 0, H),
            "h_tilde": like.new_zeros(L, batch, H),
            "slots": torch.zeros(batch, dtype=torch.long, device=like.device),
        }

    def forward(self, x: Tensor, mask: Tensor | None = None, state: dict | None = None,
                return_attention: bool = False, return_cells: bool = False) -> ReaderOutput:
        """x (B, T, E), mask (B, T) bool (True = real, right-padded), state from a previous call.

        Returns states (B, T, H): the top layer's h_t; memory (B, S, H): the top layer's hidden tape
        over the carried slots and this segment (S = S0 + T), memory_mask (B, S); state (see the
        module docstring); attention (B, T, S): the top layer's weights s^t, if asked for. With
        ``return_cells`` the state also holds ``"cells"`` (B, S, H): the top layer's memory tape
        ``c_1 .. c_S``, aligned with ``memory`` (what a deep-fusion decoder reads as the source memory
        tape A, :mod:`memread.heads.decoders.lstmn_fusion`); passed back as a state, that key is ignored.
        With ``return_attention`` and ``layers > 1``, ``layer_attention`` holds every layer's weights s^t
        (B, T, S), bottom layer first (the last is ``attention``).
        """
        B, T, _ = x.shape
        if mask is None:
            mask = torch.ones(B, T, dtype=torch.bool, device=x.device)
        if state is None:
            state = self.initial_state(B, x)
        S0 = state["h"].size(2)
        if self.cfg.span == 0 and S0 > 0 and S0 + T > MAX_UNBOUNDED_TAPE:
            raise MemreadError(
                f"reader lstmn: the carried tape would hold {S0 + T} slots; with span = 0 (unbounded) the state "
                f"keeps the whole tape, so a continuous stream needs reader.span > 0 (e.g. span = 35)"
            )
        n0 = state["slots"]  # (B,) real carried slots, right-aligned
        start = None if bool((n0 == S0).all()) else S0 - n0  # (B,) first real carried slot

        lengths = mask.sum(dim=1)  # (B,)
        if self.cfg.impl == "reference":
            H_tapes, C_tapes, h_tildes, s = self._read_reference(x, lengths, state)
        else:
            H_tapes, C_tapes, h_tildes, s = self._read_fast(x, state, start)  # s: every layer's weights
        slot_ids = torch.arange(S0 + T, device=x.device)
        memory_mask = (slot_ids >= (S0 - n0).unsqueeze(1)) & (slot_ids < (S0 + lengths).unsqueeze(1))  # (B, S)
        carried = self._carry(state, H_tapes, C_tapes, h_tildes, lengths, uniform=start is None)
        if return_cells:
            carried["cells"] = C_tapes[-1]  # the top layer's memory tape  (B, S0 + T, H)
        return ReaderOutput(
            states=H_tapes[-1][:, S0:],  # h_t of the top layer  (B, T, H)
            memory=H_tapes[-1],  # (B, S0 + T, H)
            memory_mask=memory_mask,
            state=carried,
            attention=s[-1] if return_attention else None,
            layer_attention=s if return_attention and len(s) > 1 else None,  # a deep LSTMN: every layer's s^t
        )

    def _read_fast(self, x: Tensor, state: dict, start: Tensor | None):
        """Every layer over the whole batch: tapes (B, S0 + T, H), h~ (B, T, H) and the attention weights
        (B, T, S0 + T), one of each per layer."""
        S0 = state["h"].size(2)
        inp, lower_h = x, None
        H_tapes, C_tapes, h_tildes, weights = [], [], [], []
        for k, layer in enumerate(self.layers):
            H_tape, C_tape, h_tilde, s = layer(inp, lower_h, state["h"][k], state["c"][k], state["h_tilde"][k],
                                               start, self.cfg.span, self.cfg.tape_start == "zero_slot", self.backend)
            H_tapes.append(H_tape)
            C_tapes.append(C_tape)
            h_tildes.append(h_tilde)
            weights.append(s)
            if k + 1 < len(self.layers):  # (3.3) input_{k+1} = input_k + output_k, output_k = h~^k
                base = self.skip(inp) if k == 0 and self.skip is not None else inp
                inp = base + self.drop(h_tilde)
                lower_h = self.drop(H_tape[:, S0:]) if self.cfg.deep_attention else None
        return H_tapes, C_tapes, h_tildes, weights

    def _read_reference(self, x: Tensor, lengths: Tensor, state: dict):
        """``impl = "reference"``: what :meth:`_read_fast` returns, read one row and one token at a time
        by :func:`reference_layer`. Padding is never read: padded positions of the tapes and of h~ are 0."""
        B, T, _ = x.shape
        S0 = state["h"].size(2)
        H_tapes, C_tapes, h_tildes = [[] for _ in self.layers], [[] for _ in self.layers], [[] for _ in self.layers]
        attention = [[] for _ in self.layers]
        for b in range(B):
            n, n0 = int(lengths[b]), int(state["slots"][b])  # real tokens, real carried slots
            inp, lower_h = x[b, :n], None
            for k, layer in enumerate(self.layers):
                H_tape, C_tape, h_tilde, s = in_float32(  # in float32 under autocast, as the fast path
                    reference_layer, layer, inp, lower_h, state["h"][k, b, S0 - n0 :], state["c"][k, b, S0 - n0 :],
                    state["h_tilde"][k, b], self.cfg.span, self.cfg.tape_start == "zero_slot")
                # back to the batch's coordinates: carried slots end at S0, padding is zero
                H_tapes[k].append(F.pad(H_tape, (0, 0, S0 - n0, T - n)))
                C_tapes[k].append(F.pad(C_tape, (0, 0, S0 - n0, T - n)))
                h_tildes[k].append(F.pad(h_tilde, (0, 0, 0, T - n)))
                attention[k].append(F.pad(s, (S0 - n0, T - n, 0, T - n)))
                if k + 1 < len(self.layers):  # (3.3) input_{k+1} = input_k + output_k, output_k = h~^k
                    base = self.skip(inp) if k == 0 and self.skip is not None else inp
                    inp = base + self.drop(h_tilde)
                    lower_h = self.drop(H_tape[n0:]) if self.cfg.deep_attention else None
        stack = lambda rows: [torch.stack(r) for r in rows]  # noqa: E731
        return stack(H_tapes), stack(C_tapes), stack(h_tildes), stack(attention)

    def _carry(self, state, H_tapes, C_tapes, h_tildes, lengths, uniform) -> dict[str, Tensor]:
        """The last ``span`` real slots of every layer's tapes (all when span = 0), right-aligned."""
        S, T = H_tapes[0].size(1), h_tildes[0].size(1)
        S0 = S - T
        total = state["slots"] + lengths  # (B,) real slots after this segment
        keep = total.clamp(max=self.cfg.span) if self.cfg.span > 0 else total
        if uniform and bool((lengths == T).all()):  # every row full: the last slots, a slice
            n = S if self.cfg.span == 0 else min(S, self.cfg.span)
            return {"h": torch.stack([tape[:, S - n :] for tape in H_tapes]),  # compact copies, so that
                    "c": torch.stack([tape[:, S - n :] for tape in C_tapes]),  # a checkpoint holds only
                    "h_tilde": torch.stack([ht[:, -1] for ht in h_tildes]), "slots": keep}  # the kept slots
        S_new = int(keep.max()) if keep.numel() else 0
        pos = torch.arange(S_new, device=lengths.device)
        src = (S0 + lengths - S_new).unsqueeze(1) + pos  # (B, S_new) source slot of each kept slot
        real = (pos >= (S_new - keep).unsqueeze(1)).unsqueeze(2)  # (B, S_new, 1)
        idx = src.clamp(min=0).unsqueeze(2).expand(-1, -1, self.cfg.hidden)

        def gather(tape: Tensor) -> Tensor:
            return torch.where(real, tape.gather(1, idx), tape.new_zeros(()))

        last = (lengths - 1).clamp(min=0).view(-1, 1, 1).expand(-1, 1, self.cfg.hidden)
        has_tokens = (lengths > 0).view(-1, 1)
        return {
            "h": torch.stack([gather(tape) for tape in H_tapes]),
            "c": torch.stack([gather(tape) for tape in C_tapes]),
            "h_tilde": torch.stack([
                torch.where(has_tokens, ht.gather(1, last).squeeze(1), ht0)
                for ht, ht0 in zip(h_tildes, state["h_tilde"])
            ]),
            "slots": keep,
        }

    def step(self, x_t: Tensor, state: dict | None = None) -> ReaderOutput:
        """Read one token ``x_t`` (B, E): incremental reading, left to right as in the paper's Figure 1.

        The output's ``attention`` (B, 1, S) is what the token attended to, ``memory`` (B, S, H) the
        hidden tape after writing it, and ``state["h"]`` / ``state["c"]`` (L, B, S, H) both tapes of
        every layer (with ``span`` set, only the slots still within reach).
        """
        return self.forward(x_t.unsqueeze(1), None, state, return_attention=True)


def build_lstmn_reader(cfg: LSTMNConfig, input_size: int) -> LSTMNReader:
    return LSTMNReader(cfg, input_size)
