"""The NSE's compiled time loop (``_nse_kernels.cpp``) against its Python loop (``_NSELoop``) and the
reference reading of the equations (``impl = "reference"``): values and the gradients of every input
and parameter in float64, with right padding (a row of length 1), shared memories with their own
padding, two layers, a dropout keep-mask, in float32 at sizes that run the vector loops' remainders,
on two threads as on one; and the compiled loop is what the reader runs where it can be built.
(``tests/test_nse.py`` runs its tests on the compiled loop too.)
"""

from __future__ import annotations

import dataclasses
import os
import shutil

import pytest
import torch
from torch.utils import cpp_extension

import memread.readers._nse_kernels as nse_kernels
from memread.errors import MemreadError
from memread.readers import build_reader
from memread.readers.nse import NSEConfig, NSEReader

K = 5


def needs_kernels():
    if nse_kernels.kernels() is None:
        pytest.skip("the compiled NSE kernels are not available here (no compiler or ninja)")


def make_reader(layers=1, shared=0, input_size=K, hidden=K, dropout=0.0, dtype=torch.float64) -> NSEReader:
    torch.manual_seed(0)
    cfg = NSEConfig(hidden=hidden, layers=layers, shared=shared, dropout=dropout)
    return build_reader(cfg, input_size).to(dtype).train(dropout > 0)


def padded(lengths, T=None, size=K, seed=1, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    T = T or max(lengths)
    x = torch.randn(len(lengths), T, size, generator=g, dtype=dtype)
    return x, torch.arange(T).unsqueeze(0) < torch.tensor(lengths).unsqueeze(1)


SHARED_LENGTHS = [[5, 2, 3, 4, 1, 5, 3, 2, 5, 4], [3, 3, 1, 2, 3, 1, 2, 3, 3, 2]]


def shared_memories(n, B, hidden=K, dtype=torch.float64):
    """``n`` memories (B, S_j, k) with their own right padding."""
    return [padded(SHARED_LENGTHS[j][:B], size=hidden, seed=7 + j, dtype=dtype) for j in range(n)]


def run(reader, x, mask, sh, path, seed=3):
    """Outputs and gradients (of x, of each shared memory, of every parameter) on ``path``: "compiled",
    "python" (``_NSELoop``, the reader's backend "function") or "reference"."""
    if path == "reference":
        ref = build_reader(dataclasses.replace(reader.cfg, impl="reference"), reader.input_size).to(x.dtype)
        ref.load_state_dict(reader.state_dict())
        reader = ref.train(reader.training)
    else:
        reader.backend = "compiled" if path == "compiled" else "function"
    x = x.clone().requires_grad_(True)
    leaves = [M.clone().requires_grad_(True) for M, _ in sh]
    torch.manual_seed(seed)  # the same dropout masks on both fast paths
    out = reader(x, mask, shared=[(M, m) for M, (_, m) in zip(leaves, sh)], return_attention=True)
    g = torch.Generator().manual_seed(11)
    w = torch.randn(out.states.shape, generator=g, dtype=x.dtype)
    loss = (out.states * w * mask.unsqueeze(-1)).sum() + (out.memory ** 2).sum() \
        + sum((S * torch.randn(S.shape, generator=g, dtype=x.dtype)).sum() for S in out.state["shared"])
    grads = torch.autograd.grad(loss, [x, *leaves, *reader.parameters()])
    names = ["x", *(f"shared {j}" for j in range(len(sh))), *(n for n, _ in reader.named_parameters())]
    values = {"states": out.states * mask.unsqueeze(-1), "attention": out.attention, "memory": out.memory,
              **{f"M^{j}": S for j, S in enumerate(out.state["shared"])},
              **{f"z^{j}": z for j, z in enumerate(out.state["shared_attention"])}}
    return values, dict(zip(names, grads)), out


def assert_same(a, b, atol, rtol=0.0, what=""):
    assert a.keys() == b.keys()
    for name in a:
        torch.testing.assert_close(a[name], b[name], atol=atol, rtol=rtol, msg=f"{what} {name}")


CASES = [
    dict(layers=1, shared=0),
    dict(layers=2, shared=0, input_size=3),  # E != k: the linear input map
    dict(layers=1, shared=1),
    dict(layers=2, shared=2, input_size=4),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"L{c['layers']}-shared{c['shared']}")
def test_compiled_equals_python_loop_and_reference_in_float64(case):
    needs_kernels()
    reader = make_reader(**case)
    x, mask = padded([6, 3, 1], size=case.get("input_size", K))  # right padding, a row of length 1
    sh = shared_memories(case["shared"], 3)
    x_before = x.clone()
    compiled, d_compiled, out = run(reader, x, mask, sh, "compiled")
    assert torch.equal(x, x_before)
    assert type(out.states.grad_fn).__name__ == "_NSECompiledLoopBackward"  # the compiled loop ran
    python, d_python, _ = run(reader, x, mask, sh, "python")
    reference, d_reference, _ = run(reader, x, mask, sh, "reference")
    assert_same(compiled, python, atol=1e-12, what="compiled vs Python loop:")
    assert_same(d_compiled, d_python, atol=1e-12, what="compiled vs Python loop: d")
    assert_same(compiled, reference, atol=1e-10, what="compiled vs reference:")
    assert_same(d_compiled, d_reference, atol=1e-9, what="compiled vs reference: d")
    for name, g in d_compiled.items():
        assert g.abs().sum() > 0, f"{name} receives no gradient"
    # without autograd the compiled loop updates one memory buffer in place: the same values
    with torch.no_grad():
        again = reader(x, mask, shared=sh, return_attention=True)
    torch.testing.assert_close(again.states, out.states, atol=1e-12, rtol=0)
    torch.testing.assert_close(again.memory, out.memory, atol=1e-12, rtol=0)
    for a, b in zip(again.state["shared"], out.state["shared"], strict=True):
        torch.testing.assert_close(a, b, atol=1e-12, rtol=0)
    for (M, _), (M_before, _) in zip(sh, shared_memories(case["shared"], 3), strict=True):
        assert torch.equal(M, M_before)  # the memories passed in are not written


def test_compiled_equals_python_loop_with_dropout():
    """Training mode with dropout: both loops get the same keep-mask on the write LSTM's input (drawn
    outside the loop from the same seed); values and gradients agree in float64."""
    needs_kernels()
    reader = make_reader(layers=2, shared=2, input_size=4, dropout=0.4)
    x, mask = padded([6, 3, 1], size=4)
    sh = shared_memories(2, 3)
    compiled, d_compiled, out = run(reader, x, mask, sh, "compiled")
    assert type(out.states.grad_fn).__name__ == "_NSECompiledLoopBackward"
    python, d_python, _ = run(reader, x, mask, sh, "python")
    assert_same(compiled, python, atol=1e-12, what="compiled vs Python loop:")
    assert_same(d_compiled, d_python, atol=1e-12, what="compiled vs Python loop: d")
    other, _, _ = run(reader, x, mask, sh, "compiled", seed=4)
    assert not torch.allclose(other["states"], compiled["states"])  # the mask is in use


@pytest.mark.parametrize("hidden", [21, 37])
def test_compiled_equals_python_loop_in_float32(hidden):
    """float32 at sizes where the compiled loop runs its vector loops and their remainders (37 = 2 x 16
    + 5): its tanh/sigmoid is a vectorised form within a few ulps, so to float32 precision."""
    needs_kernels()
    reader = make_reader(layers=2, shared=1, input_size=7, hidden=hidden, dtype=torch.float32)
    x, mask = padded([6, 3, 1, 5], size=7, dtype=torch.float32)
    sh = shared_memories(1, 4, hidden=hidden, dtype=torch.float32)
    compiled, d_compiled, _ = run(reader, x, mask, sh, "compiled")
    python, d_python, _ = run(reader, x, mask, sh, "python")
    assert_same(compiled, python, atol=2e-5, rtol=1e-4, what="float32:")
    assert_same(d_compiled, d_python, atol=2e-4, rtol=1e-3, what="float32: d")


def test_compiled_loop_on_two_threads_equals_one_thread():
    """The compiled loop splits the batch rows between torch's threads (from 8 rows on): on two threads
    it gives what one thread gives, in float64, with padding, two shared memories and gradients."""
    needs_kernels()
    reader = make_reader(layers=2, shared=2, input_size=4, hidden=21)  # 21 = 16 + 5
    x, mask = padded([6, 3, 6, 1, 5, 6, 2, 6, 4, 6], size=4)
    sh = shared_memories(2, 10, hidden=21)
    before = torch.get_num_threads()

    def on(threads):
        torch.set_num_threads(threads)
        try:
            assert torch.get_num_threads() == threads
            return run(reader, x, mask, sh, "compiled")[:2]
        finally:
            torch.set_num_threads(before)

    (one, d_one), (two, d_two) = on(1), on(2)
    assert_same(two, one, atol=1e-10, what="2 threads vs 1:")
    assert_same(d_two, d_one, atol=1e-10, what="2 threads vs 1: d")
    for name, g in d_one.items():
        assert g.abs().sum() > 0, f"{name} is all zero"


def test_the_compiled_loop_is_used_where_it_can_be_built():
    """Where a C++ compiler and ninja are present (and extensions are not switched off) the kernels
    build, so the reader does not silently fall back to its Python loop."""
    buildable = shutil.which(os.environ.get("CXX", "c++")) is not None and cpp_extension.is_ninja_available()
    if not buildable or os.environ.get(nse_kernels.DISABLE_ENV, "") not in ("", "0"):
        pytest.skip("no C++ compiler or ninja here, or the extensions are switched off")
    assert nse_kernels.kernels() is not None, "the NSE kernels failed to build"
    reader = make_reader(shared=1)
    x, mask = padded([4, 2])
    out = reader(x.requires_grad_(True), mask, shared=shared_memories(1, 2))
    assert type(out.states.grad_fn).__name__ == "_NSECompiledLoopBackward"
    out32 = make_reader(dtype=torch.float32)(x.float().requires_grad_(True), mask)
    assert type(out32.states.grad_fn).__name__ == "_NSECompiledLoopBackward"


def test_without_compiled_kernels_the_python_loop_is_used(monkeypatch):
    """Where the kernels cannot be built (here: switched off as MEMREAD_NO_EXTENSIONS does) the reader
    runs ``_NSELoop`` and gives the same values."""
    monkeypatch.setenv(nse_kernels.DISABLE_ENV, "1")
    monkeypatch.setattr(nse_kernels.kernels, "_tried", False)
    monkeypatch.setattr(nse_kernels.kernels, "_ops", None)
    assert nse_kernels.kernels() is None
    reader = make_reader(layers=2, shared=1)
    x, mask = padded([5, 3])
    sh = shared_memories(1, 2)
    values, _, out = run(reader, x, mask, sh, "python")
    reader.backend = "auto"  # the compiled loop where it runs: not here
    fallback = reader(x.clone().requires_grad_(True), mask, shared=sh)
    assert type(fallback.states.grad_fn).__name__ == "_NSELoopBackward"
    torch.testing.assert_close(fallback.states * mask.unsqueeze(-1), values["states"], atol=0, rtol=0)
    reader.backend = "compiled"  # asked for explicitly: refused, saying why
    with pytest.raises(MemreadError, match=f"reader nse: backend = 'compiled' needs the NSE kernels, but "
                                           f"{nse_kernels.DISABLE_ENV} is set"):
        reader(x, mask, shared=sh)
