"""Neural Semantic Encoder (NSE) reader: Munkhdalai and Yu (2016), section 3; with ``shared > 0`` the
multiple memory access NSE (MMA-NSE) of section 3.2.

NSE keeps an encoding memory ``M`` with one slot per token of the input, initialised with the
input itself (the *baby* memory, ``M_0 = (x_1 .. x_l)``), and rewrites it while reading the input
left to right. With ``e_l``, ``e_k`` vectors of ones, step ``t`` reads, composes and writes::

    o_t     = f_r^LSTM(x_t)                                                    (1)  read
    z_t     = softmax(o_t^T M_{t-1})                                           (2)  key over the slots
    m_{r,t} = z_t^T M_{t-1}                                                    (3)  retrieved slot
    c_t     = f_c^MLP(o_t, m_{r,t})                                            (4)  compose
    h_t     = f_w^LSTM(c_t)                                                    (5)  write
    M_t     = M_{t-1} (1 - (z_t (x) e_k)^T) + (h_t (x) e_l)(z_t (x) e_k)^T       (6)

i.e. ``M_t = M_{t-1} * (1 - z_t) + z_t h_t^T`` row by row: the slots read are erased in proportion
to ``z_t`` and ``h_t`` is written there. The reader's ``states`` are the write LSTM's outputs
``h_t`` and its ``memory`` is the final memory ``M_T``.

**MMA-NSE (3.2, equations 7-15).** Given ``shared`` other memories ``M^n`` (e.g. the final memory of
an NSE that read the premise, the answer or the source sentence), every step also reads each of them
with its own key and writes ``h_t`` into each of them::

    z_t^n     = softmax(o_t^T M_{t-1}^n)                                       (10)
    m_{r,t}^n = z_t^{nT} M_{t-1}^n                                             (11)
    c_t       = f_c^MLP(o_t, m_{r,t}, m_{r,t}^1 .. m_{r,t}^N)                  (12)
    M_t^n     = M_{t-1}^n (1 - (z_t^n (x) e_k)^T) + (h_t (x) e_n)(z_t^n (x) e_k)^T   (15)

(7)-(9), (13) and (14) are (1)-(3), (5) and (6). The updated shared memories ``M_T^n`` are returned
in ``state["shared"]``.

**The modules** follow the paper and the authors' Chainer code (their ``snli/NSE.py`` and
``NSE_MMA.py``):

- ``f_r^LSTM`` is an LSTM over the inputs, ``layers`` deep. It does not depend on the memory, so it
  runs once over the whole sequence (one fused ``nn.LSTM`` call); only compose and write loop over t.
- ``f_c^MLP`` is one affine layer with no activation, ``c_t = W_c [o_t; m_{r,t}; m_{r,t}^1 ..] + b_c``,
  from ``(2 + shared) k`` to ``(2 + shared) k`` units, as in the authors' code (``compose_l1 =
  Linear(2k, 2k)``, and ``Linear(3k, 3k)`` for MMA-NSE; they concatenate the shared slot before the
  own one, we use the paper's order (12), which is the same model). Having no activation, its
  ``W_c^o o_t + b_c`` part is computed for all steps at once.
- ``f_w^LSTM`` is an LSTM over ``c_t`` (so its input has ``(2 + shared) k`` units), ``layers`` deep,
  whose state is carried from step to step; its top layer's output is ``h_t``.
- ``dropout`` (the paper regularises "the write/read neural nets" with dropout; the authors' code puts
  it on their inputs) is applied to the read LSTM's input ``x_t`` and to the write LSTM's input
  ``c_t``; not between stacked layers, and not to the memory, which is initialised with the
  undropped inputs.
- When the embedding size ``E`` differs from ``k``, a linear map without bias (the WikiQA setup's
  "linear mapping layer" from 300-D embeddings to the 512-D LSTM inputs) takes ``x_t`` to ``R^k``
  first; the mapped vectors are both the read LSTM's input and the baby memory. With ``E = k`` the
  embeddings themselves are.
- Every parameter is initialised uniformly in [-0.1, 0.1], as in the authors' code.

**Padding.** Sequences are right-padded (``mask`` True = real). Padded slots get zero weight in every
key ``z_t`` (own memory and, with their own masks, shared ones), so a real token's result never
depends on what is in the padding; at a padded step ``z_t = 0`` (and ``z_t^n = 0``): nothing is read
and nothing is written, so ``M`` and ``M^n`` keep their values there and ``M_T`` is the memory after
each row's last real token. The authors' code pads with a padding vector and lets the keys attend to
those slots (and writes at padded steps); we do not, so that a sequence gives the same encoding alone
as inside a padded batch.

**Fast path and backends.** The read LSTM and the ``W_c^o o_t`` part of compose run once over all
steps; the time loop over (2)-(6) and (10)-(15) is in :mod:`memread.readers._nse_autograd`, which
describes its forms: a custom autograd function with a hand-written backward pass, in C++ on the CPU
(``_NSECompiledLoop``, :mod:`memread.readers._nse_kernels`) or in Python (``_NSELoop``), and the same
loop under autograd (``_autograd_loop``). The config's ``backend`` picks one (settable on a built
reader, ``reader.backend = "autograd"``): ``"auto"`` (the default) the compiled loop where it can run
(CPU tensors in float32 or float64, a compiler to build it), else ``_NSELoop``; ``"compiled"`` the
compiled loop or an error; ``"function"`` ``_NSELoop`` everywhere (what a GPU runs); ``"autograd"`` the
loop under autograd. Same values (to float32 precision; equal in float64).
**Long sequences.** The backward pass needs every ``M_t``: B (T + 1) T k floats, O(T^2). For a flat NSE over
long documents (2,000 tokens at batch 32 and k = 100: 51 GB) ``checkpoint_steps = C`` runs the loop in
segments of C steps under ``torch.utils.checkpoint`` (``segmented_loop``): the forward pass keeps only each
segment's first memories and write-LSTM states, the backward pass recomputes a segment keeping its C + 1
memories, so (T / C + C + 1) memories are kept, about 2 sqrt(T) at C = sqrt(T), for one more forward pass.
Every backend's loop (the compiled one, ``_NSELoop``, ``_autograd_loop``) takes the write LSTM's
initial states and returns their gradients for this. Same numbers; in training only (without gradients
nothing is kept anyway).

**Autocast.** Under ``torch.autocast`` the read LSTM and the ``W_c^o o_t`` part run in the autocast
dtype and the time loop (either one) in float32, on float32 inputs with autocast off
(:mod:`memread.modules.precision`): the memories and ``h`` come out in float32.

**Reference.** ``impl = "reference"`` reads each sequence alone, one token at a time, with the
memories as ``k x l`` matrices as the paper writes them (:func:`reference_read`): the form to check the
fast path against, far too slow to train with.

**State.** The memory is initialised from the whole input at t = 0, so an NSE reads whole sequences:
continuing a previous call (``state`` not None) is refused. The returned ``state`` is
``{"memory": M_T, "shared": [M_T^1 ..]}`` (and with ``return_attention`` also
``"shared_attention": [z^1 (B, T, S_1) ..]``), for a second NSE that accesses this one's memory.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from memread._compiled import check_backend
from memread.errors import MemreadError
from memread.modules.lstm_step import lstm_step
from memread.modules.precision import in_float32, to_float32
from memread.readers._nse_autograd import BACKENDS, segmented_loop, time_loop
from memread.readers.base import ReaderOutput
from memread.typed import DropoutRate, NonNegInt, PositiveInt

INIT_RANGE = 0.1  # the authors' uniform(-0.1, 0.1) for every parameter


@dataclass
class NSEConfig:
    name: Literal["nse"] = "nse"
    hidden: PositiveInt = 300  # k: memory slot size = read/write LSTM size
    layers: PositiveInt = 1  # layers of the read LSTM and of the write LSTM (WikiQA setup: 2)
    dropout: DropoutRate = 0.0  # on the read LSTM's input x_t and on the write LSTM's input c_t
    shared: NonNegInt = 0  # MMA-NSE: number of other memories read and written each step (eq. 7-15)
    impl: Literal["fast", "reference"] = "fast"  # "reference": equations (1)-(15) token by token, to check against
    # time-segment checkpointing: in training, keep the memories only every this many steps and recompute a
    # segment's steps in the backward pass (long flat sequences: memory O(B T (T / C + C) k) for O(B T^2 k));
    # 0 = off. The same numbers either way.
    checkpoint_steps: NonNegInt = 0
    # the fast path's time loop: "auto" = the compiled C++ loop for CPU tensors where it builds, else "function"
    # (the hand-written autograd Function in Python, what a GPU runs); "compiled" = C++ or an error; "autograd" =
    # the same loop under autograd, step by step (slow). Same values
    backend: Literal["auto", "compiled", "function", "autograd"] = "auto"


class NSEReader(nn.Module):
    """NSE / MMA-NSE reader: x (B, T, E), mask (B, T) -> states h (B, T, k); see the module docstring."""

    def __init__(self, cfg: NSEConfig, input_size: int):
        super().__init__()
        if cfg.hidden < 1 or cfg.layers < 1 or cfg.shared < 0 or not 0.0 <= cfg.dropout < 1.0:
            raise MemreadError(f"reader nse: hidden and layers must be positive, shared >= 0 and dropout "
                               f"in [0, 1), got {cfg}")
        self.cfg = cfg
        self.backend = cfg.backend  # the fast path's time loop; settable on the built reader (benches, tests)
        self.input_size = input_size
        self.output_size = k = cfg.hidden
        n_in = (2 + cfg.shared) * k  # [o_t; m_{r,t}; m_{r,t}^1 ..]
        self.input_map = nn.Linear(input_size, k, bias=False) if input_size != k else None
        self.read = nn.LSTM(k, k, num_layers=cfg.layers, batch_first=True)  # f_r^LSTM (1)
        self.compose = nn.Linear(n_in, n_in)  # f_c^MLP (4), (12)
        # f_w^LSTM (5): its weights, stepped by hand (its input c_t depends on the memory)
        self.write = nn.LSTM(n_in, k, num_layers=cfg.layers)
        self.drop = nn.Dropout(cfg.dropout)
        for p in self.parameters():
            nn.init.uniform_(p, -INIT_RANGE, INIT_RANGE)

    @property
    def backend(self) -> str:
        """The fast path's time loop: ``"auto"``, ``"compiled"``, ``"function"`` or ``"autograd"`` (the config's
        ``backend``)."""
        return self._backend

    @backend.setter
    def backend(self, value: str) -> None:
        self._backend = check_backend(value, BACKENDS, "reader nse")

    def forward(self, x: Tensor, mask: Tensor | None = None, state=None,
                shared: list[tuple[Tensor, Tensor]] | None = None, return_attention: bool = False) -> ReaderOutput:
        """x (B, T, E), mask (B, T) bool (True = real, right-padded); ``shared``: ``cfg.shared`` pairs
        ``(M^n (B, S_n, k), mask^n (B, S_n))``.

        Returns states (B, T, k): h_t; memory (B, T, k): M_T, memory_mask: mask; state
        ``{"memory": M_T, "shared": [M_T^n]}``; attention (B, T, T): the keys z_t over the own memory
        (and ``state["shared_attention"]``: z_t^n (B, T, S_n)), if asked for.
        """
        if state is not None:
            raise MemreadError("reader nse reads whole sequences: its memory is initialised with the whole "
                               "input, so it cannot continue a previous call (pass state=None)")
        shared = list(shared or [])
        if len(shared) != self.cfg.shared:
            raise MemreadError(f"reader nse: configured with shared = {self.cfg.shared} memories, "
                               f"got {len(shared)}")
        B, T, _ = x.shape
        k = self.cfg.hidden
        if mask is None:
            mask = torch.ones(B, T, dtype=torch.bool, device=x.device)
        for n, (M_n, mask_n) in enumerate(shared):
            if M_n.dim() != 3 or M_n.size(0) != B or M_n.size(2) != k or tuple(mask_n.shape) != tuple(M_n.shape[:2]):
                raise MemreadError(f"reader nse: shared memory {n} must be (B={B}, S, k={k}) with a (B, S) mask, "
                                   f"got {tuple(M_n.shape)} and {tuple(mask_n.shape)}")

        u = self.input_map(x) if self.input_map is not None else x  # (B, T, k): also the baby memory M_0
        if self.cfg.impl == "reference":
            h, z, M, Ms, zs_n = in_float32(reference_read, self, u, mask, shared)  # float32 under autocast
            return self._output(h, z, M, Ms, zs_n, mask, return_attention)
        o, _ = self.read(self.drop(u))  # (1) all steps at once  (B, T, k)
        W_co, W_cm = self.compose.weight.split([k, self.compose.in_features - k], dim=1)
        c_o = F.linear(o, W_co, self.compose.bias)  # (4) W_c^o o_t + b_c, all steps  (B, T, N)
        # dropout on the write LSTM's input c_t, as one scaled 0/1 mask drawn for all steps
        # (in float32 under autocast, where c_o is not: 1 / (1 - p) rounded to bfloat16 would bias the scale)
        keep = self.drop(to_float32(torch.ones_like(c_o))) if self.training and self.cfg.dropout > 0 else None
        weights = [W_cm]
        for layer in range(self.cfg.layers):
            w = self.write
            weights += [getattr(w, f"weight_ih_l{layer}"), getattr(w, f"weight_hh_l{layer}"),
                        getattr(w, f"bias_ih_l{layer}") + getattr(w, f"bias_hh_l{layer}")]
        M0s = [M_n for M_n, _ in shared]
        masks = [mask, *(mask_n for _, mask_n in shared)]
        loop = functools.partial(time_loop, self.backend)
        C = self.cfg.checkpoint_steps
        if C and T > C and torch.is_grad_enabled():
            loop = functools.partial(segmented_loop, C, self.backend)
        # under autocast the loop runs in float32 (memread.modules.precision)
        h, z, M, *rest = in_float32(loop, o, c_o, keep, masks, self.cfg.layers, u, *M0s, *weights)
        Ms, zs_n = rest[: len(shared)], rest[len(shared) :]
        return self._output(h, z, M, Ms, zs_n, mask, return_attention)

    @staticmethod
    def _output(h, z, M, Ms, zs_n, mask, return_attention) -> ReaderOutput:
        new_state = {"memory": M, "shared": list(Ms)}
        if return_attention:
            new_state["shared_attention"] = list(zs_n)
        return ReaderOutput(states=h, memory=M, memory_mask=mask, state=new_state,
                            attention=z if return_attention else None)


# ----------------------------------------------------------------------------- the reference


def reference_read(reader: NSEReader, u: Tensor, mask: Tensor, shared: list[tuple[Tensor, Tensor]]):
    """Equations (1)-(6) and (7)-(15) for each row alone, one token at a time, memories as k x l
    matrices (column i = slot i), as the paper writes them (``impl = "reference"``).

    u (B, T, k): the (mapped) inputs, also the baby memory; mask (B, T); shared: pairs (M^n (B, S_n, k),
    mask^n (B, S_n)). Returns what the fast loop returns: h (B, T, k), z (B, T, T), M_T (B, T, k),
    [M_T^n (B, S_n, k)], [z^n (B, T, S_n)]; padded steps are 0 and padded slots keep their values.
    """
    B, T, k = u.shape
    layers = reader.cfg.layers
    hs, zs, Ms = [], [], []
    Ms_n, zs_n = [[] for _ in shared], [[] for _ in shared]
    for b in range(B):
        n = int(mask[b].sum())
        x = reader.drop(u[b, :n])  # the read LSTM's input
        M = u[b, :n].T  # M_0 in R^{k x l}: column t is x_t
        real_n = [m_n[b] for _, m_n in shared]
        M_sh = [M_n[b, r].T for (M_n, _), r in zip(shared, real_n)]  # M^n in R^{k x S_n}: its real slots
        e_k = u.new_ones(k)
        hr, cr = [u.new_zeros(k)] * layers, [u.new_zeros(k)] * layers  # f_r^LSTM's state, per layer
        hw, cw = [u.new_zeros(k)] * layers, [u.new_zeros(k)] * layers  # f_w^LSTM's
        h_row, z_row, z_sh_rows = [], [], [[] for _ in shared]
        for t in range(n):
            inp = x[t]
            for layer in range(layers):
                hr[layer], cr[layer] = lstm_step(reader.read, layer, inp, hr[layer], cr[layer])
                inp = hr[layer]
            o_t = inp  # (1)
            z_t = torch.softmax(o_t @ M, dim=0)  # (2)
            m_rt = M @ z_t  # (3)  z_t^T M_{t-1} with slots as columns
            z_n = [torch.softmax(o_t @ M_n, dim=0) for M_n in M_sh]  # (10)
            m_rt_n = [M_n @ z for M_n, z in zip(M_sh, z_n)]  # (11)
            c_t = reader.compose(torch.cat([o_t, m_rt, *m_rt_n]))  # (4), (12)
            inp = reader.drop(c_t)
            for layer in range(layers):
                hw[layer], cw[layer] = lstm_step(reader.write, layer, inp, hw[layer], cw[layer])
                inp = hw[layer]
            h_t = inp  # (5), (13)
            Z = torch.outer(z_t, e_k).T  # (z_t (x) e_k)^T  (k, l)
            M = M * (1 - Z) + torch.outer(h_t, u.new_ones(n)) * Z  # (6)
            for j, (M_n, z) in enumerate(zip(M_sh, z_n)):
                Z_n = torch.outer(z, e_k).T
                M_sh[j] = M_n * (1 - Z_n) + torch.outer(h_t, u.new_ones(M_n.size(1))) * Z_n  # (15)
                z_sh_rows[j].append(z)
            h_row.append(h_t)
            z_row.append(z_t)
        # back to the batch's layout: padded steps 0, padded slots as they were
        hs.append(F.pad(torch.stack(h_row), (0, 0, 0, T - n)) if n else u.new_zeros(T, k))
        zs.append(F.pad(torch.stack(z_row), (0, T - n, 0, T - n)) if n else u.new_zeros(T, T))
        Ms.append(torch.cat([M.T, u[b, n:]]))
        for j, ((M_n, _), r) in enumerate(zip(shared, real_n)):
            Ms_n[j].append(M_n[b].masked_scatter(r.unsqueeze(1), M_sh[j].T))
            z_full = u.new_zeros(T, M_n.size(1))
            if n:
                z_full = z_full.masked_scatter((torch.arange(T, device=u.device) < n).unsqueeze(1) & r.unsqueeze(0),
                                               torch.stack(z_sh_rows[j]))
            zs_n[j].append(z_full)
    return (torch.stack(hs), torch.stack(zs), torch.stack(Ms), [torch.stack(m) for m in Ms_n],
            [torch.stack(z) for z in zs_n])


def build_nse_reader(cfg: NSEConfig, input_size: int) -> NSEReader:
    return NSEReader(cfg, input_size)
