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
    whole, d_whole, _ = run(reader, x, mask, sh, path, monkeypatch)
    seg_reader = segmented(reader, steps)
    calls = []
    real = nse_module._segment
    monkeypatch.setattr(nse_module, "_segment", lambda *a: calls.append(a[0].size(1)) or real(*a))
    parts, d_parts, out = run(seg_reader, x, mask, sh, path, monkeypatch)
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
    real = nse_module._segmented_loop
    monkeypatch.setattr(nse_module, "_segmented_loop", lambda *a: calls.append(1) or real(*a))
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

    compiled = outputs(lambda o_, c_, h_, cc_, M0_, M1_, w_: getattr(nse_module, loop).apply(
        o_, c_, None, mask, [mask, m1], L, True, h_, cc_, M0_, M1_, *w_))
    autograd = outputs(lambda o_, c_, h_, cc_, M0_, M1_, w_: nse_module._autograd_loop(
        o_, c_, None, [mask, m1], L, M0_, M1_, *w_, live=mask, h0=h_, c0=cc_, states=True))
    for a, b in zip(compiled[0], autograd[0]):
        torch.testing.assert_close(a, b, atol=1e-12, rtol=0)
    for name, a, b in zip(["o", "c_o", "h0", "c0", "M0", "M1", "W"], compiled[1], autograd[1]):
        torch.testing.assert_close(a, b, atol=1e-12, rtol=0, msg=f"d {name}")
    assert compiled[1][2].abs().sum() > 0 and compiled[1][3].abs().sum() > 0


PEAK_SCRIPT = """
import os, resource, sys, torch
from memread.readers.nse import NSEConfig, NSEReader
torch.set_num_threads(1)
steps = int(sys.argv[1])
torch.manual_seed(0)
reader = NSEReader(NSEConfig(hidden=32, checkpoint_steps=steps), 32)
x = torch.randn(8, 400, 32, requires_grad=True)
mask = torch.ones(8, 400, dtype=torch.bool)
reader(x[:, :50], mask[:, :50]).states.sum().backward()  # warm up: kernels, allocator
with open("/proc/self/statm") as f:  # the resident set now (the high-water mark may lie above it)
    before = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1024
reader(x, mask).states.sum().backward()
print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024)
"""


def test_segments_lower_the_peak_memory_of_a_training_step():
    """Peak resident memory (above the resident set before it) of a forward and backward pass over 400 steps (B = 8, k = 32; the whole loop keeps
    401 memories of 400 x 32 floats a row, 164 MB): segments of 20 keep 20 + 21 of them, so the step's peak
    grows by less than half as much. Each in a fresh process."""
    needs_kernels()
    if not os.path.exists("/proc/self/statm"):
        pytest.skip("reads the resident set from /proc (Linux)")
    import subprocess
    import sys

    def peak(steps):
        # glibc maps every block of 64 KiB and more afresh and unmaps it when freed, so the resident set follows
        # the live tensors (with its default, moving threshold, freed heap blocks made the peak vary 90-170 MiB)
        env = {**os.environ, "OMP_NUM_THREADS": "1", "MALLOC_MMAP_THRESHOLD_": "65536"}
        out = subprocess.run([sys.executable, "-c", PEAK_SCRIPT, str(steps)], capture_output=True, text=True,
                             check=True, env=env)
        return float(out.stdout.strip().splitlines()[-1])

    whole, parts = peak(0), peak(20)
    assert whole > 150, whole  # the 401 memories alone are 156 MiB
    assert parts < whole / 2, (parts, whole)
