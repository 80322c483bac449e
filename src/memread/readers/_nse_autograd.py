"""The NSE's time loops (:mod:`memread.readers.nse`, equations (2)-(6) and (10)-(15) over all steps), one per
``backend`` (:mod:`memread._compiled`): ``_NSECompiledLoop`` (C++, :mod:`memread.readers._nse_kernels`) and
``_NSELoop``, custom ``torch.autograd.Function`` classes with hand-written backward passes, and ``_autograd_loop``,
the same loop step by step under autograd; :func:`time_loop` picks one (``"auto"``: the compiled loop where
it runs, else ``_NSELoop``), :func:`segmented_loop` runs it in checkpointed segments (``checkpoint_steps``).
The equations, the reference and the reader are in :mod:`memread.readers.nse`; the tests check every loop
against the reference in float64.

**Fast path.** Per step the work is small matmuls (``W_c^m``, the write LSTM) and a few passes over
the memory, so the loop runs in a custom autograd function with a hand-written backward pass
(``_NSELoop``): buffers are preallocated time-major and written in place, no autograd graph is
built per step, and the weight gradients are summed over all steps in one matmul each after the
backward loop. It stores every ``M_t`` (O(B T^2 k) memory, as autograd would); without gradients it
keeps two alternating buffers. The attention outputs are not differentiable. ``backend = "autograd"``
runs the same loop under autograd (``_autograd_loop``); tests check both against the equations.

**Compiled loop.** On the CPU (float32 and float64) the whole time loop and its backward pass run in
C++ when a compiler is available (``_nse_kernels.cpp``, built on first use; see
:mod:`memread.readers._nse_kernels`; ``backend = "function"`` or ``MEMREAD_NO_EXTENSIONS=1`` runs
``_NSELoop``, which is also the path on other devices), with no Python per step: per row and memory
(the own one and every shared one) the keys' scores, masked softmax, the read, the erase/write and, in
the backward pass, their gradients are single loops over the row's slots (slots with ``z_i = 0``, i.e.
padded slots and padded steps, are skipped); per step the compose product ``W_c^m [reads]`` and each
write layer's gates, one matmul with ``[W_ih W_hh]`` on ``[input_t | h_{t-1}]``, go to ATen, and the
weight gradients are still summed over all steps in one matmul each. The batch is split into blocks
of rows between torch's threads, each running the whole loop over its rows. It keeps every ``M_t`` as
one tensor per step (without gradients, one buffer updated in place). In float32 its tanh and sigmoid
are a vectorised form within 3 float32 ulps of tanh (float64 uses ``std::tanh``), so it agrees with
``_NSELoop`` to float32 precision and, in float64, both equal the reference. The NSE decoder of the
NSE-NSE translation model (:mod:`memread.heads.decoders.nse`) runs the same loops, with the
encoder's memory as its only memory, chosen by its own ``backend``.

"""

from __future__ import annotations

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable
from torch.utils.checkpoint import checkpoint

from memread.modules.masking import masked_softmax
from memread.readers._nse_kernels import kernels

# Every loop takes o (B, T, k) from (1), c_o (B, T, N) = W_c^o o_t + b_c from (4), the dropout mask
# ``keep`` (B, T, N) or None, the masks [own (B, T), shared (B, S_n) ..], the number of write layers,
# the initial memories M_0 (B, T, k), M_0^n (B, S_n, k) .., and the weights W_c^m (N, (1 + n) k) (the
# compose weights on the retrieved slots), then per write layer W_ih, W_hh and b_ih + b_hh. They
# return h (B, T, k), z (B, T, T), M_T, M_T^n .., z^n (B, T, S_n) ..

# the backends (memread._compiled): the custom autograd functions below are the fast path
# (``_NSECompiledLoop`` where the compiled loop runs, else ``_NSELoop``); ``_autograd_loop`` computes the same
# with autograd (tests compare them all with the naive equations)
BACKENDS = ("auto", "compiled", "function", "autograd")


def function_loop(like: Tensor, backend: str, who: str = "reader nse"):
    """The custom autograd function that runs the loop on tensors like ``like`` under ``backend`` (not
    ``"autograd"``): ``_NSECompiledLoop`` where the compiled loop runs and ``backend`` lets it ("auto",
    "compiled"; an error where "compiled" cannot run), else ``_NSELoop``. Decided on the float32 tensors of
    ``in_float32``."""
    return _NSECompiledLoop if kernels.for_backend(like, backend, who) is not None else _NSELoop


def time_loop(backend, o, c_o, keep, masks, layers, M0, *rest, live=None, h0=None, c0=None, states=False):
    """The loop of ``backend``: ``_autograd_loop`` for ``"autograd"``, else :func:`function_loop`'s.
    Keywords as :func:`_autograd_loop`'s."""
    if backend == "autograd":
        return _autograd_loop(o, c_o, keep, masks, layers, M0, *rest, live=live, h0=h0, c0=c0, states=states)
    loop = function_loop(o, backend)
    args = (o, c_o, keep, masks[0] if live is None else live, masks, layers, states, h0, c0, M0, *rest)
    if not torch.is_grad_enabled():  # evaluation: a Function's needs_input_grad still says True for parameters
        # under no_grad, and the loop would keep every M_t (O(B T^2 k)) for a backward pass that never comes
        args = tuple(a.detach() if isinstance(a, Tensor) else a for a in args)
    return loop.apply(*args)


def _keys(M: Tensor, o_t: Tensor, mask: Tensor, live: Tensor) -> Tensor:
    """(2), (10): z_t = softmax(o_t^T M_{t-1}) over the real slots; 0 at a padded step (live = 0)."""
    return masked_softmax(torch.bmm(M, o_t.unsqueeze(2)).squeeze(2), mask) * live  # (B, S)


def _lstm_gates(g: Tensor) -> Tensor:
    """Pre-activations (B, 4k) of torch's gate order i, f, g, o -> activations, in place."""
    k = g.size(1) // 4
    g[:, : 2 * k].sigmoid_()
    g[:, 2 * k : 3 * k].tanh_()
    g[:, 3 * k :].sigmoid_()
    return g


def _autograd_loop(o, c_o, keep, masks, layers, M0, *rest, live=None, h0=None, c0=None, states=False):
    """The loop under autograd. Keywords as ``_NSECompiledLoop``'s: ``live`` (B, T) the real steps (default
    ``masks[0]``), ``h0``, ``c0`` (layers, B, k) the write LSTM's initial states (default zero), ``states``:
    also return its final ``h^l`` then ``c^l``."""
    n = len(masks) - 1
    Ms, (W_cm, *lstm) = [M0, *rest[:n]], rest[n:]
    B, T, k = o.shape
    hw = [o.new_zeros(B, k) if h0 is None else h0[layer] for layer in range(layers)]  # the write LSTM's state
    cw = [o.new_zeros(B, k) if c0 is None else c0[layer] for layer in range(layers)]
    live = (masks[0] if live is None else live).to(o.dtype)  # (B, T): 0 at padded steps
    hs, zs = [], [[] for _ in Ms]
    for t in range(T):
        o_t = o[:, t]
        z = [_keys(M, o_t, m, live[:, t : t + 1]) for M, m in zip(Ms, masks)]  # (2), (10)
        reads = [torch.bmm(z_j.unsqueeze(1), M).squeeze(1) for z_j, M in zip(z, Ms)]  # (3), (11)
        c_t = torch.addmm(c_o[:, t], torch.cat(reads, dim=1), W_cm.t())  # (4), (12)
        inp = c_t if keep is None else c_t * keep[:, t]
        for layer in range(layers):  # (5), (13)
            W_ih, W_hh, b = lstm[3 * layer : 3 * layer + 3]
            i, f, gg, og = torch.addmm(b, inp, W_ih.t()).addmm_(hw[layer], W_hh.t()).chunk(4, dim=1)
            i, f, gg, og = torch.sigmoid(i), torch.sigmoid(f), torch.tanh(gg), torch.sigmoid(og)
            cw[layer] = f * cw[layer] + i * gg
            hw[layer] = inp = og * torch.tanh(cw[layer])
        h_t = inp
        # (6), (15): M (1 - z e_k^T) + z h^T, the outer product as a batched matmul
        Ms = [torch.baddbmm(M * (1 - z_j).unsqueeze(2), z_j.unsqueeze(2), h_t.unsqueeze(1)) for M, z_j in zip(Ms, z)]
        hs.append(h_t)
        for lst, z_j in zip(zs, z):
            lst.append(z_j)
    zs = [torch.stack(lst, dim=1) for lst in zs]
    return torch.stack(hs, dim=1), zs[0], Ms[0], *Ms[1:], *zs[1:], *((*hw, *cw) if states else ())


def _segment(backend, o, c_o, keep, live, masks, layers, h0, c0, M0, *rest):
    """One segment of the time loop of ``backend``, going on from the write LSTM's states ``h0``, ``c0``
    (layers, B, k) and the memories ``M0``, ``M0^n`` ..: the loop's outputs, then the final ``h^l`` and
    ``c^l`` of every layer."""
    return time_loop(backend, o, c_o, keep, masks, layers, M0, *rest, live=live, h0=h0, c0=c0, states=True)


def segmented_loop(steps, backend, o, c_o, keep, masks, layers, M0, *rest):
    """The loop in segments of ``steps`` steps, each under ``torch.utils.checkpoint``: the forward pass keeps
    only each segment's inputs (its first memories and write states), the backward pass runs the segment
    again, keeping its ``M_t``, and goes back through it. Peak activation memory: T / steps memories plus one
    segment's steps + 1, against T + 1; the time: one more forward pass. Same outputs as the loop."""
    n = len(masks) - 1
    Ms, weights = [M0, *rest[:n]], rest[n:]
    B, T, k = o.shape
    h0 = c0 = o.new_zeros(layers, B, k)
    hs, zs = [], [[] for _ in Ms]
    for s in range(0, T, steps):
        part = slice(s, s + steps)
        h, *out = checkpoint(_segment, backend, o[:, part], c_o[:, part], None if keep is None else keep[:, part],
                             masks[0][:, part], masks, layers, h0, c0, *Ms, *weights, use_reentrant=False)
        z, Ms, z_n, final = out[0], out[1 : n + 2], out[n + 2 : 2 * n + 2], out[2 * n + 2 :]
        h0, c0 = torch.stack(final[:layers]), torch.stack(final[layers:])
        hs.append(h)
        for lst, z_j in zip(zs, [z, *z_n]):
            lst.append(z_j)
    zs = [torch.cat(lst, dim=1) for lst in zs]
    return torch.cat(hs, dim=1), zs[0], *Ms, *zs[1:]


class _NSELoop(torch.autograd.Function):
    """The time loop with a hand-written backward pass: no autograd graph per step, every buffer
    preallocated (time-major), and the weight gradients summed over all steps in one matmul each.
    Arguments and outputs as ``_NSECompiledLoop``'s (``live``, ``states``, ``h0``, ``c0`` included)."""

    @staticmethod
    def forward(ctx, o, c_o, keep, live, masks, layers, states, h0, c0, M0, *rest):
        n = len(masks) - 1
        M0s, (W_cm, *lstm) = [M0, *rest[:n]], rest[n:]
        B, T, k = o.shape
        store = any(ctx.needs_input_grad)  # keep what the backward pass needs only when there is one
        steps = T + 1 if store else 2  # every M_t for the backward pass, else two alternating buffers
        mem = [M.new_empty(steps, B, M.size(1), k) for M in M0s]  # M_t, M_t^n  (steps, B, S, k)
        for buf, M in zip(mem, M0s):
            buf[0] = M
        live = live.t().to(o.dtype).unsqueeze(2)  # (T, B, 1)
        o_tm = o.transpose(0, 1).contiguous()  # (T, B, k)
        c_tm = c_o.transpose(0, 1)  # (T, B, N)
        keep_tm = None if keep is None else keep.transpose(0, 1)
        z_all = [o.new_empty(T, B, M.size(1)) for M in M0s]  # (2), (10)
        reads = o.new_empty(T, B, (n + 1) * k)  # [m_{r,t}; m_{r,t}^n ..]  (3), (11)
        c_in = o.new_empty(T, B, c_o.size(2))  # the write LSTM's input: c_t after dropout
        gates = o.new_empty(layers, T, B, 4 * k)  # activated gates
        cells = o.new_zeros(layers, T + 1, B, k)  # c^l_t, index 0 = the initial state (zero, or c0)
        hid = o.new_zeros(layers, T + 1, B, k)  # h^l_t
        if h0 is not None:
            hid[:, 0] = h0
        if c0 is not None:
            cells[:, 0] = c0
        W_cmT = W_cm.t()
        for t in range(T):
            cur, nxt = (t, t + 1) if store else (t % 2, (t + 1) % 2)
            for j, (buf, m, z) in enumerate(zip(mem, masks, z_all)):
                M = buf[cur]
                z_t = _keys(M, o_tm[t], m, live[t])  # (2), (10)
                z[t] = z_t
                reads[t, :, j * k : (j + 1) * k] = torch.bmm(z_t.unsqueeze(1), M).squeeze(1)  # (3), (11)
            c_t = torch.addmm(c_tm[t], reads[t], W_cmT, out=c_in[t])  # (4), (12)
            if keep_tm is not None:
                c_t.mul_(keep_tm[t])
            inp = c_t
            for layer in range(layers):  # (5), (13)
                W_ih, W_hh, b = lstm[3 * layer : 3 * layer + 3]
                g = torch.addmm(b, inp, W_ih.t(), out=gates[layer, t]).addmm_(hid[layer, t], W_hh.t())
                i, f, gg, og = _lstm_gates(g).chunk(4, dim=1)
                c = torch.mul(f, cells[layer, t], out=cells[layer, t + 1]).addcmul_(i, gg)
                inp = torch.mul(og, torch.tanh(c), out=hid[layer, t + 1])
            h_t = inp
            for buf, z in zip(mem, z_all):  # (6), (15): M (1 - z e_k^T) + z h^T
                torch.mul(buf[cur], (1 - z[t]).unsqueeze(2), out=buf[nxt])
                buf[nxt].baddbmm_(z[t].unsqueeze(2), h_t.unsqueeze(1))
        if store:
            ctx.save_for_backward(o_tm, keep_tm, *mem, *z_all, reads, c_in, gates, cells, hid, W_cm, *lstm)
        ctx.n, ctx.layers, ctx.states = n, layers, states
        final = T if store else T % 2
        h = hid[layers - 1, 1:].transpose(0, 1)  # (B, T, k)
        zs = [z.transpose(0, 1) for z in z_all]
        ctx.mark_non_differentiable(*zs)
        ctx.set_materialize_grads(False)
        last = (*(hid[layer, T].clone() for layer in range(layers)),
                *(cells[layer, T].clone() for layer in range(layers))) if states else ()
        # in training the final memories are tensors of their own: a view would keep the whole (T + 1)-step buffer
        # alive as long as M_T is (under checkpoint_steps, every segment's, since each segment's M_T starts the next)
        return h, zs[0], *(buf[final].clone() if store else buf[final] for buf in mem), *zs[1:], *last

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_h, _grad_z, *grads):
        n, L = ctx.n, ctx.layers
        o_tm, keep_tm, *saved = ctx.saved_tensors
        mem, z_all = saved[: n + 1], saved[n + 1 : 2 * n + 2]
        reads, c_in, gates, cells, hid, W_cm, *lstm = saved[2 * n + 2 :]
        T, B, k = o_tm.shape
        dM = [g.clone() if g is not None else buf.new_zeros(buf.shape[1:]) for g, buf in zip(grads[: n + 1], mem)]
        d_last = grads[2 * n + 1 :] if ctx.states else [None] * (2 * L)  # d of the final h^l, then of c^l
        # d h^l_t from step t + 1's W_hh, and d c^l_t from step t + 1 (at t = T - 1: from outside)
        dh_rec = [o_tm.new_zeros(B, k) if d is None else d.clone() for d in d_last[:L]]
        dc_rec = [o_tm.new_zeros(B, k) if d is None else d.clone() for d in d_last[L:]]
        dgates = o_tm.new_empty(L, T, B, 4 * k)
        dc_all = o_tm.new_empty(T, B, c_in.size(2))  # d c_t (before dropout) = d c_o
        do = o_tm.new_empty(T, B, k)
        grad_h_tm = None if grad_h is None else grad_h.transpose(0, 1)
        for t in reversed(range(T)):
            h_t = hid[L - 1, t + 1]
            dh = dh_rec[L - 1] if grad_h_tm is None else dh_rec[L - 1] + grad_h_tm[t]
            dz = []
            for buf, z, g in zip(mem, z_all, dM):  # (6), (15) backward; g: d M_t -> d M_{t-1}
                M, z_t = buf[t], z[t]
                dh = dh + torch.bmm(z_t.unsqueeze(1), g).squeeze(1)  # sum_i z_i dM_i
                dz.append(torch.bmm(g, h_t.unsqueeze(2)).squeeze(2) - (g * M).sum(2))  # dM_i . (h_t - M_i)
                g.mul_((1 - z_t).unsqueeze(2))
            d_inp = None  # d of the layer's input, from the layer above
            for layer in reversed(range(L)):  # (5), (13) backward
                W_ih, W_hh, _ = lstm[3 * layer : 3 * layer + 3]
                if d_inp is not None:
                    dh = d_inp + dh_rec[layer]
                i, f, gg, og = gates[layer, t].chunk(4, dim=1)
                tanh_c = torch.tanh(cells[layer, t + 1])
                dc = (dh * og * (1 - tanh_c * tanh_c)).add_(dc_rec[layer])
                d = dgates[layer, t]
                di, df, dg, dog = d.chunk(4, dim=1)
                torch.mul(dc, gg, out=di).mul_(i * (1 - i))
                torch.mul(dc, cells[layer, t], out=df).mul_(f * (1 - f))
                torch.mul(dc, i, out=dg).mul_(1 - gg * gg)
                torch.mul(dh, tanh_c, out=dog).mul_(og * (1 - og))
                dc_rec[layer] = dc * f
                dh_rec[layer] = d @ W_hh
                d_inp = d @ W_ih
            dcc = d_inp if keep_tm is None else d_inp * keep_tm[t]
            dc_all[t] = dcc
            dr = dcc @ W_cm  # d [m_{r,t}; m_{r,t}^n ..]
            o_t = o_tm[t]
            do_t = None
            for j, (buf, z, g) in enumerate(zip(mem, z_all, dM)):
                M, z_t = buf[t], z[t]
                dm = dr[:, j * k : (j + 1) * k]
                dz_j = dz[j] + torch.bmm(M, dm.unsqueeze(2)).squeeze(2)  # (3) m = z^T M
                ds = z_t * (dz_j - (z_t * dz_j).sum(1, keepdim=True))  # (2) softmax, over the real slots
                d_o = torch.bmm(ds.unsqueeze(1), M).squeeze(1)  # s = M o_t
                do_t = d_o if do_t is None else do_t + d_o
                g.baddbmm_(torch.stack([z_t, ds], dim=2), torch.stack([dm, o_t], dim=1))  # z dm^T + ds o_t^T
            do[t] = do_t
        # the weight gradients, summed over all steps at once
        flat = lambda x: x.reshape(-1, x.size(-1))  # noqa: E731
        d_weights = [flat(dc_all).t() @ flat(reads)]  # W_c^m
        for layer in range(L):
            inp = c_in if layer == 0 else hid[layer - 1, 1:]
            dg = flat(dgates[layer])
            d_weights += [dg.t() @ flat(inp), dg.t() @ flat(hid[layer, :-1]), dg.sum(0)]
        # what step 0 passed back: the gradients of the initial states h0, c0
        dh0 = torch.stack(dh_rec) if ctx.needs_input_grad[7] else None
        dc0 = torch.stack(dc_rec) if ctx.needs_input_grad[8] else None
        return (do.transpose(0, 1), dc_all.transpose(0, 1), None, None, None, None, None, dh0, dc0, *dM, *d_weights)


class _NSECompiledLoop(torch.autograd.Function):
    """The time loop of ``_NSELoop`` in C++ (``_nse_kernels.cpp``): same equations, no Python per step.

    Buffers are time-major, as in ``_NSELoop``; each write layer's input and previous output lie side by
    side, ``X^l_t = [input_t | h^l_{t-1}]``, so that its gates are one matmul with ``[W_ih W_hh]`` per step
    and its weight gradients one matmul over all steps.

    Its arguments are ``_NSELoop``'s with two more: ``live`` (B, T) bool, the real steps (the NSE reader
    passes its own memory's mask, ``masks[0]``), and ``states``: whether to return, after the outputs of
    ``_NSELoop``, the write LSTM's final states ``h^l``, ``c^l`` (B, k) per layer (all ``h`` then all ``c``),
    differentiable; and ``h0``, ``c0`` (layers, B, k) or None: the write LSTM's initial states (None: zero),
    differentiable, for a loop that goes on from a previous segment (``segmented_loop``). The NSE decoder
    (:mod:`memread.heads.decoders.nse`, no own memory) passes its target mask as ``live``, only the shared
    memory's mask in ``masks`` and ``states = True``."""

    @staticmethod
    def forward(ctx, o, c_o, keep, live, masks, layers, states, h0, c0, M0, *rest):
        n = len(masks) - 1
        M0s, (W_cm, *lstm) = [M0, *rest[:n]], rest[n:]
        B, T, k = o.shape
        N = c_o.size(2)
        store = any(ctx.needs_input_grad)  # keep what the backward pass needs only when there is one
        # every M_t for the backward pass (M_0 itself first), else one buffer updated in place; one tensor
        # per step: a block above glibc's mmap threshold (at most 32 MiB, which the whole tape exceeds at
        # B = 32, T = 30, k = 300) is mapped afresh by every call and page-faulted in as it is written,
        # which took a tenth of a training step there
        mem = [[M.contiguous(), *(M.new_empty(B, M.size(1), k) for _ in range(T))] if store
               else [M.clone(memory_format=torch.contiguous_format)] for M in M0s]
        z_all = [o.new_empty(T, B, M.size(1)) for M in M0s]
        reads = o.new_empty(T, B, (n + 1) * k)
        X = [o.new_empty(T, B, (N if layer == 0 else k) + k) for layer in range(layers)]
        for layer, x in enumerate(X):
            x[0, :, -k:] = 0 if h0 is None else h0[layer]  # h^l_{-1}
        gates = o.new_empty(layers, T, B, 4 * k)
        cells = o.new_empty(layers, T + 1, B, k)
        cells[:, 0] = 0 if c0 is None else c0  # c^l_{-1}
        H = o.new_empty(T, B, k)
        # [W_ih W_hh] for the backward pass, and its transpose made contiguous for the forward products
        # (X_t [W_ih W_hh]^T on a transposed view was 40% slower with MKL, at 32 rows, k = 300)
        W_cat = [torch.cat([lstm[3 * layer], lstm[3 * layer + 1]], dim=1) for layer in range(layers)]
        W_catT = [torch.cat([lstm[3 * layer].t(), lstm[3 * layer + 1].t()]) for layer in range(layers)]
        W_cm = W_cm.contiguous()
        bias = [lstm[3 * layer + 2].contiguous() for layer in range(layers)]
        o, c_o = o.contiguous(), c_o.contiguous()
        keep = None if keep is None else keep.contiguous()
        masks = [m.contiguous() for m in masks]
        flat_mem = [M_t for steps in mem for M_t in steps]
        kernels().forward(o, c_o, keep, live.contiguous(), masks, flat_mem, z_all, reads, X, gates, cells, H,
                          W_cm.t().contiguous(), W_catT, bias, store)
        if store:
            ctx.save_for_backward(o, keep, *masks, *flat_mem, *z_all, reads, *X, gates, cells, H, W_cm, *W_cat)
        ctx.n, ctx.layers, ctx.N, ctx.T, ctx.states = n, layers, N, T, states
        zs = [z.transpose(0, 1) for z in z_all]
        ctx.mark_non_differentiable(*zs)
        ctx.set_materialize_grads(False)
        final = ()
        if states:  # h^l after the last step: the next layer's input there, H for the top; c^l: C[l, T]
            final = (*(X[layer + 1][T - 1, :, :k].clone() for layer in range(layers - 1)), H[T - 1].clone(),
                     *(cells[layer, T].clone() for layer in range(layers)))
        return H.transpose(0, 1), zs[0], *(steps[-1] for steps in mem), *zs[1:], *final

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_h, _grad_z, *grads):
        n, L, N = ctx.n, ctx.layers, ctx.N
        d_final = grads[2 * n + 1 :] if ctx.states else ()  # after d M_T, d M_T^n .. and the z^n
        dh_T = dc_T = None
        if any(d is not None for d in d_final):
            like = next(d for d in d_final if d is not None)
            dh_T, dc_T = (torch.stack([like.new_zeros(like.shape) if d is None else d for d in part])
                          for part in (d_final[:L], d_final[L:]))
        o, keep, *saved = ctx.saved_tensors
        J = n + 1
        T = ctx.T
        masks, saved = saved[:J], saved[J:]
        mem, saved = saved[: J * (T + 1)], saved[J * (T + 1) :]
        z_all, (reads, *saved) = saved[:J], saved[J:]
        X, (gates, cells, H, W_cm, *W_cat) = saved[:L], saved[L:]
        B, k = H.size(1), H.size(2)
        dM = [g.clone(memory_format=torch.contiguous_format) if g is not None else mem[j * (T + 1)].new_zeros(
              mem[j * (T + 1)].shape) for j, g in enumerate(grads[:J])]
        dgates = o.new_empty(L, T, B, 4 * k)  # d gate pre-activations
        dc_all = o.new_empty(T, B, N)  # d c_t (before dropout) = d c_o
        do = o.new_empty(T, B, k)
        dh_0 = o.new_empty(L, B, k) if ctx.needs_input_grad[7] else None  # d h^l_{-1}, d c^l_{-1}
        dc_0 = o.new_empty(L, B, k) if ctx.needs_input_grad[8] else None
        kernels().backward(None if grad_h is None else grad_h.contiguous(), o, keep, list(masks), list(mem),
                           list(z_all), list(X), gates, cells, H, W_cm, list(W_cat), dh_T, dc_T, dM, dgates, dc_all,
                           do, dh_0, dc_0)
        # the weight gradients, summed over all steps at once
        flat = lambda x: x.reshape(-1, x.size(-1))  # noqa: E731
        d_weights = [flat(dc_all).t() @ flat(reads)]  # W_c^m
        for layer in range(L):
            dg = flat(dgates[layer])
            dW = dg.t() @ flat(X[layer])  # [d W_ih | d W_hh]
            in_l = X[layer].size(2) - k
            d_weights += [dW[:, :in_l], dW[:, in_l:], dg.sum(0)]
        return (do.transpose(0, 1), dc_all.transpose(0, 1), None, None, None, None, None, dh_0, dc_0, *dM,
                *d_weights)
