"""The NSE decoder's teacher forcing on the compiled loop (``_nse_kernels.cpp`` through ``_NSECompiledLoop``,
the shared memory as its only memory, the target mask for the real steps) and on ``_NSELoop`` (no kernels: a
GPU) against its Python loop under autograd: values and the gradients of the target inputs, of the shared (source) memory and of every
parameter in float64, with padded targets and padded sources of other lengths, one and two layers, a
dropout keep-mask, the final write LSTM states as differentiable outputs; float32; two threads as one;
teacher forcing = stepping word by word; and the compiled loop is what it runs where it can be built.
(The decoder takes the NSE reader's backends: ``dec.backend``, "auto", "compiled", "function" or "autograd".)
"""

from __future__ import annotations

import os
import shutil

import pytest
import torch
from torch.utils import cpp_extension

import memread.readers._nse_kernels as nse_kernels
from memread.errors import MemreadError
from memread.heads.decoders.nse import NSEDecoder, NSEDecoderConfig
from memread.modules.precision import autocast

K, E = 5, 4
COMPILED = "_NSECompiledLoopBackward"


def needs_kernels():
    if nse_kernels.kernels() is None:
        pytest.skip("the compiled NSE kernels are not available here (no compiler or ninja)")


def make_decoder(layers=1, hidden=K, input_size=E, dropout=0.0, dtype=torch.float64) -> NSEDecoder:
    torch.manual_seed(0)
    return NSEDecoder(NSEDecoderConfig(hidden=hidden, layers=layers, dropout=dropout), input_size).to(dtype) \
        .train(dropout > 0)


def padded(lengths, size, T=None, seed=1, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    T = T or max(lengths)
    x = torch.randn(len(lengths), T, size, generator=g, dtype=dtype)
    return x, torch.arange(T).unsqueeze(0) < torch.tensor(lengths).unsqueeze(1)


TARGETS, SOURCES = [6, 3, 1], [4, 7, 2]  # padded on both sides, sources of other lengths than the targets


LOOPS = {"compiled": COMPILED, "function": "_NSELoopBackward"}  # the Python loop's grad_fn is torch's own


def run(dec, y, y_mask, M, s_mask, compiled, seed=3, parts=("states", "memory", "write")):
    """Outputs and gradients (of y, of the shared memory, of every parameter) on the compiled loop (``compiled``
    True or "compiled"), ``_NSELoop`` ("function") or the Python one under autograd (False or "python"); the loss
    weighs the real steps' states, the final memory and the final write LSTM states (``parts``)."""
    path = {True: "compiled", False: "python"}.get(compiled, compiled)
    dec.backend = {"python": "autograd"}.get(path, path)
    y = y.clone().requires_grad_(True)
    M = M.clone().requires_grad_(True)
    torch.manual_seed(seed)  # the same dropout masks on both paths
    out = dec(y, y_mask, M, None, s_mask, return_attention=True)
    assert type(out.states.grad_fn).__name__ == LOOPS.get(path, type(out.states.grad_fn).__name__), path
    assert path in LOOPS or type(out.states.grad_fn).__name__ not in LOOPS.values()
    g = torch.Generator().manual_seed(11)
    rand = lambda x: torch.randn(x.shape, generator=g, dtype=x.dtype)  # noqa: E731
    loss = 0
    if "states" in parts:
        loss = loss + (out.states * rand(out.states) * y_mask.unsqueeze(-1)).sum()
    if "memory" in parts:
        loss = loss + (out.memory ** 2).sum()
    if "write" in parts:
        loss = loss + sum((h * rand(h)).sum() for h, _ in out.state["write"])
    if "cells" in parts:
        loss = loss + sum((c * rand(c)).sum() for _, c in out.state["write"])
    grads = torch.autograd.grad(loss, [y, M, *dec.parameters()])
    names = ["y", "shared memory", *(n for n, _ in dec.named_parameters())]
    values = {"states": out.states * y_mask.unsqueeze(-1), "attention": out.attention, "memory": out.memory,
              **{f"write h{layer}": h for layer, (h, _) in enumerate(out.state["write"])},
              **{f"write c{layer}": c for layer, (_, c) in enumerate(out.state["write"])},
              "read h": out.state["read"][0], "read c": out.state["read"][1]}
    return values, dict(zip(names, grads)), out


def assert_same(a, b, atol, rtol=0.0, what=""):
    assert a.keys() == b.keys()
    for name in a:
        torch.testing.assert_close(a[name], b[name], atol=atol, rtol=rtol, msg=f"{what} {name}")


def inputs(B=3, hidden=K, input_size=E, dtype=torch.float64, targets=TARGETS, sources=SOURCES):
    y, y_mask = padded(targets[:B], input_size, dtype=dtype)
    M, s_mask = padded(sources[:B], hidden, seed=7, dtype=dtype)
    return y, y_mask, M, s_mask


@pytest.mark.parametrize("layers", [1, 2])
def test_compiled_equals_python_loop_in_float64(layers):
    needs_kernels()
    dec = make_decoder(layers)
    y, y_mask, M, s_mask = inputs()
    y_before, M_before = y.clone(), M.clone()
    compiled, d_compiled, out = run(dec, y, y_mask, M, s_mask, True)
    python, d_python, _ = run(dec, y, y_mask, M, s_mask, False)
    assert_same(compiled, python, atol=1e-12, what="compiled vs Python loop:")
    assert_same(d_compiled, d_python, atol=1e-12, what="compiled vs Python loop: d")
    for name, g in d_compiled.items():
        assert g.abs().sum() > 0, f"{name} receives no gradient"
    # padded source slots are never read or written; the memories passed in are not written
    torch.testing.assert_close(out.memory[~s_mask], M[~s_mask], atol=0, rtol=0)
    assert torch.equal(y, y_before) and torch.equal(M, M_before)
    # without autograd the compiled loop updates one memory buffer in place: the same values
    with torch.no_grad():
        again = dec(y, y_mask, M, None, s_mask, return_attention=True)
    torch.testing.assert_close(again.states, out.states, atol=1e-12, rtol=0)
    torch.testing.assert_close(again.memory, out.memory, atol=1e-12, rtol=0)
    assert torch.equal(M, M_before)


@pytest.mark.parametrize("dropout", [0.0, 0.4])
@pytest.mark.parametrize("layers", [1, 2])
def test_nse_loop_equals_python_loop_in_float64(layers, dropout):
    """``_NSELoop`` (the loop a GPU runs: no compiled kernels there) against the Python loop under autograd:
    values and every gradient, padded targets and sources, with and without a dropout keep-mask; and the final
    write states alone."""
    dec = make_decoder(layers, dropout=dropout)
    y, y_mask, M, s_mask = inputs()
    function, d_function, _ = run(dec, y, y_mask, M, s_mask, "function")
    python, d_python, _ = run(dec, y, y_mask, M, s_mask, "python")
    assert_same(function, python, atol=1e-12, what="_NSELoop vs Python loop:")
    assert_same(d_function, d_python, atol=1e-12, what="_NSELoop vs Python loop: d")
    assert all(g.abs().sum() > 0 for g in d_function.values())
    _, d_cells, _ = run(dec, y, y_mask, M, s_mask, "function", parts=("cells",))
    _, d_cells_python, _ = run(dec, y, y_mask, M, s_mask, "python", parts=("cells",))
    assert_same(d_cells, d_cells_python, atol=1e-12, what="final cells: d")


@pytest.mark.parametrize("parts", [("cells",), ("write", "cells")], ids=["cells-only", "final-states-only"])
def test_the_final_write_states_are_differentiable(parts):
    """A loss on the final write LSTM states alone (no gradient into the states h_t or the memory):
    the compiled loop's gradients are the Python loop's."""
    needs_kernels()
    dec = make_decoder(2)
    y, y_mask, M, s_mask = inputs()
    _, d_compiled, _ = run(dec, y, y_mask, M, s_mask, True, parts=parts)
    _, d_python, _ = run(dec, y, y_mask, M, s_mask, False, parts=parts)
    assert_same(d_compiled, d_python, atol=1e-12, what="final states: d")
    assert d_compiled["y"].abs().sum() > 0 and d_compiled["shared memory"].abs().sum() > 0


@pytest.mark.parametrize("layers", [1, 2])
def test_compiled_equals_python_loop_with_dropout(layers):
    """Training mode with dropout: both loops get the same keep-masks (on the read LSTM's input, and one
    mask for all steps on the write LSTM's input c_t, drawn before the loop from the same seed)."""
    needs_kernels()
    dec = make_decoder(layers, dropout=0.4)
    y, y_mask, M, s_mask = inputs()
    compiled, d_compiled, _ = run(dec, y, y_mask, M, s_mask, True)
    python, d_python, _ = run(dec, y, y_mask, M, s_mask, False)
    assert_same(compiled, python, atol=1e-12, what="dropout: compiled vs Python loop:")
    assert_same(d_compiled, d_python, atol=1e-12, what="dropout: compiled vs Python loop: d")
    other, _, _ = run(dec, y, y_mask, M, s_mask, True, seed=4)
    assert not torch.allclose(other["states"], compiled["states"])  # the masks are in use
    dec.eval()
    evaluated, _, _ = run(dec, y, y_mask, M, s_mask, True)
    assert not torch.allclose(evaluated["states"], compiled["states"])


@pytest.mark.parametrize("hidden", [21, 37])
def test_compiled_equals_python_loop_in_float32(hidden):
    """float32 at sizes where the kernels run their vector loops and their remainders (37 = 2 x 16 + 5)."""
    needs_kernels()
    dec = make_decoder(2, hidden=hidden, input_size=7, dtype=torch.float32)
    y, y_mask, M, s_mask = inputs(4, hidden, 7, torch.float32, [6, 3, 1, 5], [4, 7, 2, 7])
    compiled, d_compiled, _ = run(dec, y, y_mask, M, s_mask, True)
    python, d_python, _ = run(dec, y, y_mask, M, s_mask, False)
    assert_same(compiled, python, atol=2e-5, rtol=1e-4, what="float32:")
    assert_same(d_compiled, d_python, atol=2e-4, rtol=1e-3, what="float32: d")


def test_compiled_loop_on_two_threads_equals_one_thread():
    """The kernels split the batch rows between torch's threads (from 8 rows on): on two threads the
    decoder gives what one thread gives, in float64, with padding, two layers and gradients."""
    needs_kernels()
    dec = make_decoder(2, hidden=21)
    y, y_mask, M, s_mask = inputs(10, 21, E, torch.float64, [6, 3, 6, 1, 5, 6, 2, 6, 4, 6],
                                  [4, 7, 2, 7, 7, 1, 5, 3, 7, 6])
    before = torch.get_num_threads()

    def on(threads):
        torch.set_num_threads(threads)
        try:
            assert torch.get_num_threads() == threads
            return run(dec, y, y_mask, M, s_mask, True)[:2]
        finally:
            torch.set_num_threads(before)

    (one, d_one), (two, d_two) = on(1), on(2)
    assert_same(two, one, atol=1e-10, what="2 threads vs 1:")
    assert_same(d_two, d_one, atol=1e-10, what="2 threads vs 1: d")


@pytest.mark.parametrize("layers", [1, 2])
def test_teacher_forcing_on_the_compiled_loop_equals_stepping(layers):
    """``step()`` (Python, one word at a time) gives the compiled teacher forcing's states at the real
    steps and, from the state ``forward`` returns, continues as teacher forcing over the longer target."""
    needs_kernels()
    dec = make_decoder(layers).eval()
    dec.backend = "compiled"
    y, y_mask, M, s_mask = inputs()
    out = dec(y, y_mask, M, None, s_mask)
    assert type(out.states.grad_fn).__name__ == COMPILED
    state = dec.start(M, None, s_mask)
    for t in range(y.size(1)):
        h_t, state = dec.step(y[:, t], state)
        real = y_mask[:, t]
        torch.testing.assert_close(h_t[real], out.states[real, t], atol=1e-12, rtol=0)
    # every row read to its end (no padding): forward over a prefix, then steps = forward over all
    full = torch.ones_like(y_mask)
    whole = dec(y, full, M, None, s_mask)
    state = dec(y[:, :2], full[:, :2], M, None, s_mask).state
    for t in range(2, y.size(1)):
        h_t, state = dec.step(y[:, t], state)
        torch.testing.assert_close(h_t, whole.states[:, t], atol=1e-12, rtol=0)
    torch.testing.assert_close(state["memory"], whole.memory, atol=1e-12, rtol=0)


def test_under_cpu_autocast_the_compiled_loop_runs_in_float32():
    needs_kernels()
    dec = make_decoder(2, dtype=torch.float32)
    y, y_mask, M, s_mask = inputs(dtype=torch.float32)
    with autocast("cpu", torch.bfloat16):  # as the training loop enters it
        out = dec(y.requires_grad_(True), y_mask, M, None, s_mask)
    assert type(out.states.grad_fn).__name__ == COMPILED
    assert out.states.dtype == out.memory.dtype == torch.float32
    out.states.sum().backward()
    assert y.grad is not None and all(p.grad is not None for p in dec.parameters())


def test_the_compiled_loop_is_used_where_it_can_be_built():
    """Where a C++ compiler and ninja are present (and extensions are not switched off) the kernels
    build, so teacher forcing does not silently fall back to the Python loop, in float64 and float32."""
    buildable = shutil.which(os.environ.get("CXX", "c++")) is not None and cpp_extension.is_ninja_available()
    if not buildable or os.environ.get(nse_kernels.DISABLE_ENV, "") not in ("", "0"):
        pytest.skip("no C++ compiler or ninja here, or the extensions are switched off")
    assert nse_kernels.kernels() is not None, "the NSE kernels failed to build"
    assert make_decoder().backend == "auto"
    for dtype in (torch.float64, torch.float32):
        y, y_mask, M, s_mask = inputs(dtype=dtype)
        out = make_decoder(dtype=dtype)(y.requires_grad_(True), y_mask, M, None, s_mask)
        assert type(out.states.grad_fn).__name__ == COMPILED, dtype


def test_without_compiled_kernels_the_nse_loop_is_used(monkeypatch):
    """Where the kernels cannot be built (here: switched off as MEMREAD_NO_EXTENSIONS does) teacher
    forcing runs ``_NSELoop`` and gives the same values."""
    needs_kernels()
    dec = make_decoder(2)
    y, y_mask, M, s_mask = inputs()
    values, _, _ = run(dec, y, y_mask, M, s_mask, True)
    monkeypatch.setenv(nse_kernels.DISABLE_ENV, "1")
    monkeypatch.setattr(nse_kernels.kernels, "_tried", False)
    monkeypatch.setattr(nse_kernels.kernels, "_ops", None)
    assert nse_kernels.kernels() is None
    dec.backend = "auto"  # the compiled loop where it runs: not here
    fallback = dec(y.clone().requires_grad_(True), y_mask, M, None, s_mask)
    assert type(fallback.states.grad_fn).__name__ == LOOPS["function"]
    torch.testing.assert_close(fallback.states * y_mask.unsqueeze(-1), values["states"], atol=1e-12, rtol=0)
    dec.backend = "compiled"  # asked for explicitly: refused, saying why
    with pytest.raises(MemreadError, match="NSE decoder: backend = 'compiled' needs the NSE kernels"):
        dec(y, y_mask, M, None, s_mask)
    dec.backend = "cuda"
    with pytest.raises(MemreadError, match="NSE decoder: backend must be one of"):
        dec(y, y_mask, M, None, s_mask)


def test_bench_runs_on_tiny_sizes():
    """``memread bench nse-decoder``'s function: the NSE decoder against nn.LSTM, sizes from --set."""
    from memread.bench.nse_decoder import bench_nse_decoder, bench_nse_decoder_command
    from memread.cli import build_parser
    from memread.errors import MemreadError

    out = bench_nse_decoder(batch=2, source=3, target=4, emb=5, hidden=4, layers=2, repeats=2, warmup=0)
    assert out["decoder"] == "nse_decoder" and out["ratio"] > 0 and out["tokens_per_s"] > 0 and out["layers"] == 2
    args = build_parser().parse_args(["bench", "nse-decoder", "--batch", "2", "--set", "source=3", "--set", "target=2",
                                      "--set", "emb=3", "--set", "hidden=4", "--set", "repeats=1"])
    out = bench_nse_decoder_command(args)
    assert (out["batch"], out["source"], out["target"], out["emb"], out["hidden"]) == (2, 3, 2, 3, 4)
    with pytest.raises(MemreadError, match="--set"):
        bench_nse_decoder_command(build_parser().parse_args(["bench", "nse-decoder", "--emb", "7"]))
    with pytest.raises(MemreadError, match="unknown key"):
        bench_nse_decoder_command(build_parser().parse_args(["bench", "nse-decoder", "--set", "fusion=x"]))
