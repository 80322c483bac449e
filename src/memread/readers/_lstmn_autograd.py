"""The LSTMN's fast path (:mod:`memread.readers.lstmn`): one layer's time loop over a segment as a custom
``torch.autograd.Function`` with a hand-written backward pass (``_LSTMNLayerFunction``), in Python or, on the
CPU, in C++ (:mod:`memread.readers._lstmn_kernels`). Which of the two runs is the reader's ``backend``
option (``"auto"``, ``"compiled"``, ``"function"``; :mod:`memread._compiled`). The equations, the
reference and the reader are in :mod:`memread.readers.lstmn`; ``tests/test_lstmn.py`` checks both loops
against the reference in float64.

**Fast path.** Per layer, everything that depends only on the input is computed for all steps in one
matmul (``W_x x_t`` and the input part of the gates; with ``deep_attention`` also ``W_l h_t^k``).
The recurrence then runs in a custom autograd function (``backend = "function"``) with a hand-written
backward pass, so no autograd graph is built per step and the tapes can be preallocated and written in place:

- forward, per step: the window's scores ``v^T tanh(K_i + q_t)`` (keys ``K_i = W_h h_i`` computed once,
  when slot ``i`` is written; with the zero slot also ``v^T tanh(q_t)``), a softmax, one batched
  product for ``[h~_t | c~_t]`` over the joint ``[h | c]`` tape, and one matmul of ``h~_t`` with
  ``[W_gates_h~; W_h~]`` that gives both the gates' recurrent part and the next token's ``W_h~ h~_t``;
  the gates' local derivatives are kept while in cache;
- backward, steps in reverse: slot ``t``'s gradient is complete once the later tokens that read it
  are undone, so it is pulled in with one batched product over their summaries' gradients; the
  ``tanh`` of (4) is recomputed rather than stored (the zero slot's score sends a gradient to ``q_t``
  and ``v`` only, as its key is constant); key and weight gradients are accumulated in
  preallocated buffers and the weight gradients summed in one matmul each after the loop.

Attention windows are slices of the tapes (a token attends to ``t - 1`` slots, or ``span``). Padding
needs no per-example loop: sequences are right-padded, so every real token's window is the same
slice for all rows, and padded steps only write slots that no real token reads.

**Compiled loops.** On the CPU both time loops run in C++ when a compiler is available
(``_lstmn_kernels.cpp``, built on first use; see :mod:`memread.readers._lstmn_kernels`), filling the
same buffers as the Python loops below, which are the fall-back (and the path on other devices):
``backend = "auto"`` (the default) runs them where they can run, ``"compiled"`` insists on them,
``"function"`` runs the Python loops everywhere.
There the window's passes are single loops per row: ``v^T tanh(K_i + q_t)`` is summed as the tanh is
computed, the backward pass recomputes it slot by slot while updating ``dK``, ``d q_t`` and ``dv`` (both
``tape_start`` options run there: the zero slot is one more score per step);
the gates' local derivatives are recomputed in the backward loop instead of stored, and the product
with ``W_f`` takes ``[d gates_t | d q_{t+1}]`` in one matmul. In float32 its tanh and sigmoid are a
vectorised form within 3 float32 ulps of tanh (float64 uses ``std::tanh``), so the two paths agree to
float32 precision and, in float64, both equal the naive reading of the equations.
"""

from __future__ import annotations

import torch
from torch.autograd.function import once_differentiable

from memread.modules.masking import masked_softmax
from memread.readers._lstmn_kernels import kernels

# the backends this loop offers (memread._compiled): the compiled loop where it runs, else the Python one
BACKENDS = ("auto", "compiled", "function")


def _window(t: int, s0: int, span: int, first: int) -> tuple[int, int]:
    """Slots that token ``t`` of the segment may attend to: ``[lo, hi)`` in tape coordinates, where
    the carried slots are ``0 .. s0-1`` and token ``t`` writes slot ``s0 + t``."""
    hi = s0 + t
    lo = max(first, hi - span) if span > 0 else first
    return lo, hi


def _lstmn_layer_forward(proj, H0, C0, K0, h_tilde0, start, W_f, b_f, W_h, v, span, for_backward, zero_slot=False,
                         backend="auto"):
    """Equations (4)-(9) over one segment for one layer, without autograd.

    proj (B, T, A + 4H) = [W_x x_t (+ W_l h_t^{k-1}) | W_gx x_t] for all steps;
    H0, C0 (B, S0, H), K0 = W_h H0 (B, S0, A): the carried tapes; h_tilde0 (B, H): h~ before the segment;
    start (B,) or None: first real carried slot of each row (None: all S0 slots are real);
    W_f (4H + A, H) = [W_gates_h~; W_h~], b_f (4H + A,) = [b; 0]: the gates' bias (its last A entries
    are a constant 0, given no gradient); W_h (A, H); v (A,); zero_slot: the tapes start with the zero
    slot (``tape_start = "zero_slot"``), one more score ``v^T tanh(q_t)`` in every softmax; backend: the
    reader's option, ``"auto"`` (the compiled loop where it runs), ``"compiled"`` or ``"function"``.
    Returns a dict: the tapes HC (B, S, 2H) = [h | c] and K (B, S, A) over carried + new slots, the
    attention weights s (B, T, S) over them, the zero slot's weights s0 (B, T) (None without it),
    [h~ | c~] (B, T, 2H), the activated gates (B, T, 4H), and with
    ``for_backward`` what the backward pass needs: the queries q (B, T, A) and, on the Python path,
    the local derivatives of the gates ``dgate`` (B, T, 4H) and ``o (1 - tanh^2 c)`` (B, T, H) (the
    compiled path recomputes them per step in its backward loop, which is cheaper than storing them).
    """
    B, T, _ = proj.shape
    S0, Hd = H0.size(1), H0.size(2)
    A = v.numel()
    S = S0 + T
    HC = proj.new_empty(B, S, 2 * Hd)  # hidden tape | memory tape
    K = proj.new_empty(B, S, A)  # W_h h_i, written once per slot
    HC[:, :S0, :Hd] = H0
    HC[:, :S0, Hd:] = C0
    K[:, :S0] = K0
    s_all = proj.new_zeros(B, T, S)
    s0_all = proj.new_empty(B, T) if zero_slot else None
    q_all = proj.new_empty(B, T, A)
    hc_tilde = proj.new_empty(B, T, 2 * Hd)
    gates = proj.new_empty(B, T, 4 * Hd)
    W_fT, W_hT = W_f.t(), W_h.t()
    first = 0 if start is None else int(start.min())
    q_rec = h_tilde0 @ W_fT[:, 4 * Hd :]  # W_h~ h~_0 (B, A)
    ops = kernels.for_backend(proj, backend, "reader lstmn")  # decided here, on the float32 tensors of in_float32
    out = dict(HC=HC, K=K, s=s_all, s0=s0_all, hc_tilde=hc_tilde, gates=gates, q=q_all, compiled=ops is not None)
    if ops is not None:
        ops.forward(proj, HC, K, s_all, q_all, hc_tilde, gates, q_rec.contiguous(), W_fT, b_f,
                    W_hT.contiguous(), v, start, first, S0, span, s0_all)
        return out
    dgate = proj.new_empty(B, T, 4 * Hd) if for_backward else None
    o_dtanh_c = proj.new_empty(B, T, Hd) if for_backward else None
    _forward_loop(proj, HC, K, s_all, q_all, hc_tilde, gates, dgate, o_dtanh_c, q_rec, W_fT, b_f, W_hT, v,
                  start, first, S0, span, for_backward, s0_all)
    out.update(dgate=dgate, o_dtanh_c=o_dtanh_c)
    return out


def _forward_loop(proj, HC, K, s_all, q_all, hc_tilde, gates, dgate, o_dtanh_c, q_rec, W_fT, b_f, W_hT, v,
                  start, first, S0, span, for_backward, s0_all=None):
    """The Python path of the forward time loop: fills the buffers of ``_lstmn_layer_forward`` (and the
    zero slot's weights ``s0_all`` (B, T) when the tapes start with it)."""
    B, T, _ = proj.shape
    Hd, A, S = HC.size(2) // 2, v.numel(), HC.size(1)
    xq, xg = proj[..., :A], proj[..., A:]
    tanh_c = proj.new_empty(B, Hd)
    one = proj.new_ones(())
    slot_ids = None if start is None else torch.arange(S, device=proj.device)
    for t in range(T):
        q = torch.add(xq[:, t], q_rec, out=q_all[:, t])  # W_x x_t + W_h~ h~_{t-1}  (B, A)
        lo, hi = _window(t, S0, span, first)
        if hi > lo:
            u = torch.add(K[:, lo:hi], q.unsqueeze(1)).tanh_()  # (B, w, A)
            a = torch.matmul(u, v)  # (4)  (B, w)
            if s0_all is not None:  # the zero slot first: key W_h 0 = 0, score v^T tanh(q_t)
                a = torch.cat([torch.matmul(torch.tanh(q), v).unsqueeze(1), a], dim=1)  # (B, 1 + w)
            if start is not None and bool((start > lo).any()):  # rows with fewer carried slots
                real = slot_ids[lo:hi].unsqueeze(0) >= start.unsqueeze(1)  # (B, w)
                if s0_all is not None:
                    real = torch.cat([real.new_ones(B, 1), real], dim=1)
                s = masked_softmax(a, real)  # (5)
            else:
                s = torch.softmax(a, dim=-1)  # (5)  (B, w) or (B, 1 + w)
            if s0_all is not None:
                s0_all[:, t] = s[:, 0]
                s = s[:, 1:]
            s_all[:, t, lo:hi] = s
            torch.bmm(s.unsqueeze(1), HC[:, lo:hi], out=hc_tilde[:, t : t + 1])  # (6)  [h~_t | c~_t]
        else:  # empty tape: h~_t = c~_t = 0 (with the zero slot: all the weight on it, and its value is 0)
            hc_tilde[:, t] = 0
            if s0_all is not None:
                s0_all[:, t] = 1
        h_tilde, c_tilde = hc_tilde[:, t, :Hd], hc_tilde[:, t, Hd:]
        z = torch.addmm(b_f, h_tilde, W_fT)  # (B, 4H + A): gates' recurrent part + b, and W_h~ h~_t for t + 1
        g = torch.add(xg[:, t], z[:, : 4 * Hd], out=gates[:, t])  # (7) pre-activations
        g[:, : 3 * Hd].sigmoid_()  # i, f, o
        g[:, 3 * Hd :].tanh_()  # c^
        i_t, f_t, o_t, c_hat = g.split(Hd, dim=1)
        c_t = torch.mul(f_t, c_tilde, out=HC[:, S0 + t, Hd:]).addcmul_(i_t, c_hat)  # (8)
        h_t = torch.mul(o_t, torch.tanh(c_t, out=tanh_c), out=HC[:, S0 + t, :Hd])  # (9)
        torch.mm(h_t, W_hT, out=K[:, S0 + t])  # W_h h_t, once for every later token
        q_rec = z[:, 4 * Hd :]
        if for_backward:  # local derivatives, while they are in cache
            d = dgate[:, t]
            torch.addcmul(g[:, : 3 * Hd], g[:, : 3 * Hd], g[:, : 3 * Hd], value=-1, out=d[:, : 3 * Hd])  # sig'
            d[:, :Hd].mul_(c_hat)  # d c_t / d i-gate pre-activation
            d[:, Hd : 2 * Hd].mul_(c_tilde)  # ... f
            d[:, 2 * Hd : 3 * Hd].mul_(tanh_c)  # d h_t / d o-gate pre-activation
            torch.addcmul(one, c_hat, c_hat, value=-1, out=d[:, 3 * Hd :]).mul_(i_t)  # ... c^
            torch.addcmul(one, tanh_c, tanh_c, value=-1, out=o_dtanh_c[:, t]).mul_(o_t)  # d h_t / d c_t


class _LSTMNLayerFunction(torch.autograd.Function):
    """One LSTMN layer over a segment, with a hand-written backward pass (see the module docstring);
    its arguments those of :meth:`memread.readers.lstmn.LSTMNLayer.forward`'s call, with the backend last."""

    @staticmethod
    def forward(ctx, proj, H0, C0, K0, h_tilde0, W_f, b_f, W_h, v, start, span, for_backward, zero_slot=False,
                backend="auto"):
        f = _lstmn_layer_forward(proj.contiguous(), H0, C0, K0, h_tilde0, start, W_f, b_f, W_h, v, span,
                                 for_backward, zero_slot, backend)
        S0, Hd = H0.size(1), H0.size(2)
        HC, s_all = f["HC"], f["s"]
        if for_backward:
            ctx.save_for_backward(HC, f["K"], f["q"], s_all, f["hc_tilde"], f["gates"], f.get("dgate"),
                                  f.get("o_dtanh_c"), h_tilde0, W_f, W_h, v, start, f["s0"])
        ctx.span, ctx.S0, ctx.compiled = span, S0, f["compiled"]
        ctx.mark_non_differentiable(s_all)
        ctx.set_materialize_grads(False)  # outputs nobody used send None, not zeros
        # the whole tapes (B, S0 + T, H) and h~ (B, T, H); the reader slices memory and state from them
        return HC[:, :, :Hd], HC[:, :, Hd:], f["hc_tilde"][:, :, :Hd], s_all

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_H, grad_C, grad_h_tilde, _grad_s):
        HC, K, q_all, s_all, hc_tilde, gates, dgate, o_dtanh_c, h_tilde0, W_f, W_h, v, start, s0_all = ctx.saved_tensors
        span, S0 = ctx.span, ctx.S0
        B, T, H4 = gates.shape
        Hd, A = H4 // 4, v.numel()
        first = 0 if start is None else int(start.min())
        grad_h = None if grad_H is None else grad_H[:, S0:]
        grad_c = None if grad_C is None else grad_C[:, S0:]
        W_hv = v.unsqueeze(1) * W_h  # (A, H): dK below is kept without the factor v of (4)
        s_T = s_all.transpose(1, 2).contiguous()  # (B, S, T): who read slot j, and how much

        dproj = HC.new_empty(B, T, A + 4 * Hd)  # [d q_t | d gate pre-activations]
        D = HC.new_empty(B, T, 2 * Hd)  # d [h~_t | c~_t]
        dK = HC.new_zeros(B, HC.size(1), A)
        dv = v.new_zeros(1, A)
        if ctx.compiled:
            kernels().backward(grad_h, grad_c, grad_h_tilde, HC, K, q_all, s_all, hc_tilde, gates, W_f, W_hv, v,
                               start, first, S0, span, dproj, D, dK, dv, s0_all)  # the path the forward pass took
        else:
            _backward_loop(grad_h, grad_c, grad_h_tilde, HC, K, q_all, s_all, s_T, gates, dgate, o_dtanh_c, W_f,
                           W_hv, v, start, first, S0, span, dproj, D, dK, dv, s0_all)
        h_tilde_prev = torch.cat([h_tilde0.unsqueeze(1), hc_tilde[:, :-1, :Hd]], dim=1)  # h~_{t-1}  (B, T, H)
        dW_f = W_f.new_empty(W_f.shape)  # (4H + A, H), both halves written in place
        torch.mm(dproj[:, :, A:].reshape(B * T, 4 * Hd).t(), hc_tilde[:, :, :Hd].reshape(B * T, Hd),
                 out=dW_f[: 4 * Hd])
        torch.mm(dproj[:, :, :A].reshape(B * T, A).t(), h_tilde_prev.reshape(B * T, Hd), out=dW_f[4 * Hd :])
        dh_tilde0 = dproj[:, 0, :A] @ W_f[4 * Hd :]  # W_h~
        dW_h = v.unsqueeze(1) * (dK[:, S0:].reshape(B * T, A).t() @ HC[:, S0:, :Hd].reshape(B * T, Hd))
        dHC0 = torch.bmm(s_T[:, :S0], D)  # the carried slots: read by this segment's tokens  (B, S0, 2H)
        dH0, dC0 = dHC0[..., :Hd], dHC0[..., Hd:]
        if S0 and grad_H is not None:
            dH0 = dH0 + grad_H[:, :S0]
        if S0 and grad_C is not None:
            dC0 = dC0 + grad_C[:, :S0]
        dK0 = dK[:, :S0] * v
        db_f = torch.cat([dproj[:, :, A:].sum((0, 1)), dproj.new_zeros(A)])  # b_f[4H:] is a constant 0
        return (dproj, dH0, dC0, dK0, dh_tilde0, dW_f, db_f, dW_h, dv.squeeze(0),
                None, None, None, None, None)


def _backward_loop(grad_h, grad_c, grad_h_tilde, HC, K, q_all, s_all, s_T, gates, dgate, o_dtanh_c, W_f, W_hv, v,
                   start, first, S0, span, dproj, D, dK, dv, s0_all=None):
    """The Python path of the backward time loop: fills dproj, D, dK and dv (see the module docstring).

    With the zero slot (``s0_all`` (B, T) its weights) the real slots' score gradients are unchanged (its
    value is 0, so ``d s_0 = 0``), and its own, ``da_0 = -s_0 sum_i s_i d s_i``, reaches q_t and v."""
    B, T, H4 = gates.shape
    Hd, A = H4 // 4, v.numel()
    f_g = gates[:, :, Hd : 2 * Hd]
    W_g, W_q = W_f[: 4 * Hd], W_f[4 * Hd :]  # gates' recurrent weight, W_h~
    one = HC.new_ones(())
    for t in reversed(range(T)):
        slot = S0 + t
        # d h_t: from outside, through its key (4), through the summaries of later tokens (6)
        if grad_h is not None:
            dh = torch.addmm(grad_h[:, t], dK[:, slot], W_hv)
        else:
            dh = dK[:, slot] @ W_hv
        end = T if span == 0 else min(T, t + 1 + span)  # later tokens that can see this slot
        if end > t + 1:
            read = torch.bmm(s_T[:, slot : slot + 1, t + 1 : end], D[:, t + 1 : end]).squeeze(1)  # (B, 2H)
            dh += read[:, :Hd]
            dc = read[:, Hd:] if grad_c is None else read[:, Hd:] + grad_c[:, t]
        else:
            dc = grad_c[:, t] if grad_c is not None else torch.zeros_like(dh)
        dc = torch.addcmul(dc, dh, o_dtanh_c[:, t])  # (9)
        dg = dproj[:, t, A:]  # (8), (7)
        torch.mul(dgate[:, t], torch.cat([dc, dc, dh, dc], dim=1), out=dg)
        d_h_tilde = D[:, t, :Hd]
        if grad_h_tilde is not None:
            torch.addmm(grad_h_tilde[:, t], dg, W_g, out=d_h_tilde)
        else:
            torch.mm(dg, W_g, out=d_h_tilde)
        if t + 1 < T:
            d_h_tilde.addmm_(dproj[:, t + 1, :A], W_q)  # W_h~ h~_t was token t+1's query
        torch.mul(dc, f_g[:, t], out=D[:, t, Hd:])  # d c~_t  (8)
        lo, hi = _window(t, S0, span, first)
        if hi > lo:
            s = s_all[:, t, lo:hi]  # (B, w)
            ds = torch.bmm(D[:, t].unsqueeze(1), HC[:, lo:hi].transpose(1, 2)).squeeze(1)  # (6)  (B, w)
            sds = (s * ds).sum(dim=1, keepdim=True)  # (B, 1)
            da = s * (ds - sds)  # (5)
            u = torch.add(K[:, lo:hi], q_all[:, t].unsqueeze(1)).tanh_()  # (4) again  (B, w, A)
            dv.addmm_(da.reshape(1, -1), u.reshape(-1, A))
            g_u = torch.addcmul(one, u, u, value=-1)  # tanh' = 1 - u^2
            dK[:, lo:hi].addcmul_(da.unsqueeze(2), g_u)
            dq = torch.bmm(da.unsqueeze(1), g_u).squeeze(1)  # (B, A)
            if s0_all is not None:  # the zero slot's score v^T tanh(q_t): da_0 = -s_0 sum_i s_i ds_i
                da0 = -s0_all[:, t : t + 1] * sds  # (B, 1)
                u0 = torch.tanh(q_all[:, t])  # (B, A)
                dv.addmm_(da0.t(), u0)
                dq.addcmul_(da0, torch.addcmul(one, u0, u0, value=-1))
            torch.mul(dq, v, out=dproj[:, t, :A])  # d q_t
        else:
            dproj[:, t, :A] = 0
