"""Time-segment checkpointing of the NSE's loop (``NSEConfig.checkpoint_steps``): the reader gives the same
outputs and the same gradients (of the input, the shared memories and every parameter) with the memories
kept every C steps as with every step, in float64 with right padding, shared memories, two layers and a
dropout keep-mask, on the compiled loop and on the Python one; segments that do not divide T; the
segments' backward passes really recompute (the loop runs twice per segment); and the saved memory is
smaller. The loops' initial write states (compiled and ``_NSELoop``) and their gradients are checked against
autograd."""

from __future__ import annotations

import dataclasses
import os

import pytest
import torch

import memread.readers._nse_autograd as nse_autograd
import memread.readers.nse as nse_module
from memread.readers import build_reader
from tests.test_nse_compiled import K, make_reader, needs_kernels, padded, run, shared_memories, assert_same

CASES = [
    dict(layers=1, shared=0, steps=2),
    dict(layers=2, shared=2, input_size=4, steps=3),  # 7 steps: segments of 3, 3, 1
    dict(layers=2, shared=1, dropout=0.3, steps=4),
]


def segmented(reader, steps):
    other = build_reader(dataclasses.replace(reader.cfg, checkpoint_steps=steps), reader.input_size).to(torch.float64)
    other.load_state_dict(reader.state_dict())
    other.backend = reader.backend
    return other.train(reader.training)


@pytest.mark.parametrize("path", ["compiled", "python"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"L{c['layers']}-shared{c['shared']}-C{c['steps']}")
def test_segments_give_the_loops_numbers(case, path, monkeypatch):
    if path == "compiled":
        needs_kernels()
    case = dict(case)
    steps = case.pop("steps")
    reader = make_reader(**case)
    x, mask = padded([7, 4, 1], size=case.get("input_size", K))
    sh = shared_memories(case["shared"], 3)
    whole, d_whole, _ = run(reader, x, mask, sh, path)
    seg_reader = segmented(reader, steps)
    calls = []
    real = nse_autograd._segment
    monkeypatch.setattr(nse_autograd, "_segment", lambda *a: calls.append(a[1].size(1)) or real(*a))  # a[0]: backend
    parts, d_parts, out = run(seg_reader, x, mask, sh, path)
    n_seg = -(-7 // steps)
    # each segment ran in the forward pass and again in the backward pass
    assert len(calls) == 2 * n_seg, calls
    assert sorted(calls[:n_seg]) == sorted(calls[n_seg:])
    assert sum(calls[:n_seg]) == 7
    assert_same(parts, whole, atol=1e-12, what=f"{path}, segments of {steps} vs whole:")
    assert_same(d_parts, d_whole, atol=1e-12, what=f"{path}, segments of {steps} vs whole: d")
    for name, g in d_parts.items():
        assert g.abs().sum() > 0, f"{name} receives no gradient"


def test_segments_only_in_training_with_gradients(monkeypatch):
    reader = segmented(make_reader(), 2)
    calls = []
    real = nse_module.segmented_loop  # as the reader calls it
    monkeypatch.setattr(nse_module, "segmented_loop", lambda *a: calls.append(1) or real(*a))
    x, mask = padded([5, 2])
    with torch.no_grad():
        reader(x, mask)
    assert calls == []
    reader(x, mask)
    assert calls == [1]
    short = padded([2, 1])
    reader(*short)  # T <= C: one segment is the whole loop
    assert calls == [1]


@pytest.mark.parametrize("loop", ["_NSECompiledLoop", "_NSELoop"])
def test_initial_states_and_their_gradients_match_autograd(loop):
    """``_NSECompiledLoop`` and ``_NSELoop`` started from given write states h0, c0 equal ``_autograd_loop``
    started from them: outputs, final states and every gradient, h0 and c0 included (float64, padding, two
    layers, a shared memory)."""
    if loop == "_NSECompiledLoop":
        needs_kernels()
    torch.manual_seed(0)
    B, T, k, L, n = 3, 5, K, 2, 1
    N = (2 + n) * k
    dt = torch.float64
    o, c_o = torch.randn(B, T, k, dtype=dt), torch.randn(B, T, N, dtype=dt)
    mask = torch.arange(T).unsqueeze(0) < torch.tensor([5, 3, 1]).unsqueeze(1)
    M0, M1 = torch.randn(B, T, k, dtype=dt), torch.randn(B, 4, k, dtype=dt)
    m1 = torch.arange(4).unsqueeze(0) < torch.tensor([4, 2, 3]).unsqueeze(1)
    h0, c0 = torch.randn(L, B, k, dtype=dt) * 0.5, torch.randn(L, B, k, dtype=dt) * 0.5
    weights = [torch.randn(N, (1 + n) * k, dtype=dt) * 0.2]
    for layer in range(L):
        weights += [torch.randn(4 * k, N if layer == 0 else k, dtype=dt) * 0.2,
                    torch.randn(4 * k, k, dtype=dt) * 0.2, torch.randn(4 * k, dtype=dt) * 0.1]
    leaves = [o, c_o, h0, c0, M0, M1, *weights]

    def outputs(fn):
        ins = [t.clone().requires_grad_(True) for t in leaves]
        o_, c_, h_, cc_, M0_, M1_, *w_ = ins
        out = fn(o_, c_, h_, cc_, M0_, M1_, w_)
        h, z, MT, M1T, z1, *final = out
        g = torch.Generator().manual_seed(5)
        loss = sum((t * torch.randn(t.shape, generator=g, dtype=dt)).sum() for t in [h, MT, M1T, *final])
        return [h, z, MT, M1T, z1, *final], torch.autograd.grad(loss, ins)

    compiled = outputs(lambda o_, c_, h_, cc_, M0_, M1_, w_: getattr(nse_autograd, loop).apply(
        o_, c_, None, mask, [mask, m1], L, True, h_, cc_, M0_, M1_, *w_))
    autograd = outputs(lambda o_, c_, h_, cc_, M0_, M1_, w_: nse_autograd._autograd_loop(
        o_, c_, None, [mask, m1], L, M0_, M1_, *w_, live=mask, h0=h_, c0=cc_, states=True))
    for a, b in zip(compiled[0], autograd[0]):
        torch.testing.assert_close(a, b, atol=1e-12, rtol=0)
    for name, a, b in zip(["o", "c_o", "h0", "c0", "M0", "M1", "W"], compiled[1], autograd[1]):
        torch.testing.assert_close(a, b, atol=1e-12, rtol=0, msg=f"d {name}")
    assert compiled[1][2].abs().sum() > 0 and compiled[1][3].abs().sum() > 0


@pytest.mark.parametrize("path", ["compiled", "python"])
def test_segments_keep_fewer_memories_alive(monkeypatch, path):
    """How many per-step memories (B, T, k) of the compiled loop (one tensor each) or of ``_NSELoop`` (the GPU's:
    one buffer of steps + 1) are alive at once during a training step
    over 60 steps: the whole loop keeps all 61 until its backward pass; segments of 6 keep the 10 segments'
    first memories and one segment's 7 (counted as they are allocated and freed: deterministic, unlike the
    process's resident set, which the benchmark in benchmarks/document_memory.py --flat reports)."""
    import weakref

    if path == "compiled":
        needs_kernels()
    backend = "compiled" if path == "compiled" else "function"
    B, T, k = 2, 60, K
    real_new_empty = torch.Tensor.new_empty
    count = {"live": 0, "peak": 0}

    def freed(steps):
        count["live"] -= steps

    def new_empty(self, *size, **kw):
        out = real_new_empty(self, *size, **kw)
        if tuple(out.shape[-3:]) == (B, T, k) and out.dim() in (3, 4):  # M_t, or _NSELoop's (steps, B, T, k)
            steps = out.size(0) if out.dim() == 4 else 1
            count["live"] += steps
            count["peak"] = max(count["peak"], count["live"])
            weakref.finalize(out, freed, steps)
        return out

    def peak(reader):
        count.update(live=0, peak=0)
        x, mask = padded([T, 41], size=K, seed=2)
        monkeypatch.setattr(torch.Tensor, "new_empty", new_empty)
        try:
            reader(x.requires_grad_(True), mask).states.sum().backward()
        finally:
            monkeypatch.setattr(torch.Tensor, "new_empty", real_new_empty)
        return count["peak"]

    whole = make_reader()
    whole.backend = backend
    assert peak(whole) == T + (path == "python")  # M_1 .. M_T (and M_0 in _NSELoop's buffer)
    # the 10 segments' last memories (each the next one's start) and, in a segment's backward pass, its 6
    # recomputed ones (15 counted)
    assert peak(segmented(whole, 6)) <= T // 6 + 6 + 1
