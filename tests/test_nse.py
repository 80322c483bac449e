"""NSE / MMA-NSE reader: shapes and what the state holds; the keys and the memory respect the masks (on
every loop: compiled, the Python Function, autograd); dropout on the read and write inputs, the same on
the fast loop and the autograd loop; the ``backend`` option; misuse is refused with a MemreadError.

That every loop equals the library's per-example, per-step reference reading of equations (1)-(6) and
(7)-(15) (``impl = "reference"``) in float64 (garbage in the padding of the input and of the shared
memories; one and two layers; E == k and a linear input map; none, one and two shared memories), gradients
into every parameter, the input and the shared memories included, also with nothing to differentiate;
that one sequence alone equals it in a padded batch; and that a tiny classifier learns: all checked for
every reader by ``tests/test_reader_contract.py``.
"""

from __future__ import annotations

import pytest
import torch

import memread.readers._nse_kernels as nse_kernels
from memread.errors import MemreadError
from memread.readers import READERS, build_reader
from memread.readers.nse import NSEConfig, NSEReader

K = 4


@pytest.fixture(params=["compiled", "function", "autograd"])
def path(request):
    """Run a test on the fast path's two loops with a hand-written backward pass, the compiled one
    (skipped where it cannot be built) and the Python one, and on the autograd loop: the reader's
    ``backend``, for the test to build its readers with."""
    if request.param == "compiled" and nse_kernels.kernels() is None:
        pytest.skip("the compiled NSE kernels are not available here (no compiler or ninja)")
    return request.param


def make_reader(layers=1, shared=0, input_size=K, hidden=K, seed=0, backend="auto") -> NSEReader:
    torch.manual_seed(seed)
    cfg = NSEConfig(hidden=hidden, layers=layers, shared=shared, backend=backend)
    return build_reader(cfg, input_size).double().eval()


def batch(lengths, T=None, seed=1, size=K):
    g = torch.Generator().manual_seed(seed)
    T = T or max(lengths)
    x = torch.randn(len(lengths), T, size, generator=g, dtype=torch.float64)
    mask = torch.arange(T).unsqueeze(0) < torch.tensor(lengths).unsqueeze(1)
    return x, mask


def shared_memories(n, B, seed=7, S_lengths=((5, 2, 3), (3, 3, 1))):
    """``n`` shared memories (B, S_j, K) with their own right padding."""
    return [batch(list(S_lengths[j][:B]), seed=seed + j) for j in range(n)]


# ----------------------------------------------------------------------------- tests


def test_registry_and_shapes():
    assert "nse" in READERS and READERS["nse"].Config is NSEConfig
    reader = build_reader(NSEConfig(hidden=6, layers=2, shared=2), 3)
    assert (reader.input_size, reader.output_size) == (3, 6)
    x = torch.randn(2, 5, 3)
    mask = torch.tensor([[True] * 5, [True] * 2 + [False] * 3])
    sh = [(torch.randn(2, 4, 6), torch.ones(2, 4, dtype=torch.bool)), (torch.randn(2, 7, 6), torch.ones(2, 7, dtype=torch.bool))]
    out = reader(x, mask, shared=sh, return_attention=True)
    assert out.states.shape == (2, 5, 6)
    assert out.memory.shape == (2, 5, 6) and out.memory_mask is mask
    assert out.attention.shape == (2, 5, 5)
    assert out.state["memory"] is out.memory
    assert [m.shape for m in out.state["shared"]] == [(2, 4, 6), (2, 7, 6)]
    assert [z.shape for z in out.state["shared_attention"]] == [(2, 5, 4), (2, 5, 7)]
    plain = reader(x, mask, shared=sh)
    assert plain.attention is None and "shared_attention" not in plain.state
    assert build_reader(NSEConfig(hidden=6), 6).input_map is None  # E = k: x is the baby memory


def test_keys_and_memory_respect_the_masks(path):
    reader = make_reader(layers=1, shared=1, backend=path)
    x, mask = batch([6, 3, 1])
    sh = shared_memories(1, 3)
    out = reader(x, mask, shared=sh, return_attention=True)
    z, z_sh = out.attention, out.state["shared_attention"][0]
    (M_sh, m_sh), = sh
    for keys, slot_mask in ((z, mask), (z_sh, m_sh)):
        real = mask.unsqueeze(2) & slot_mask.unsqueeze(1)  # (B, T, S): real step, real slot
        torch.testing.assert_close(keys.sum(-1)[mask], torch.ones(int(mask.sum()), dtype=torch.float64))
        assert not keys[~real].any()  # padded slots, and every slot at padded steps
        assert (keys[real] > 0).all()
    # a padded slot is never written: it keeps its initial value (x itself, E = k)
    assert torch.equal(out.memory[~mask], x[~mask])
    assert torch.equal(out.state["shared"][0][~m_sh], M_sh[~m_sh])
    # and the real slots were rewritten
    assert not torch.isclose(out.memory[mask], x[mask]).all(dim=-1).any()


def test_dropout_on_read_and_write_inputs_only_in_training():
    torch.manual_seed(0)
    reader = build_reader(NSEConfig(hidden=K, layers=2, dropout=0.5), K).double()
    x, mask = batch([5, 4])
    reader.train()
    a, b = reader(x, mask).states, reader(x, mask).states
    assert not torch.allclose(a, b)
    # both paths apply the same dropout masks: same values and gradients under the same seed
    results = []
    for backend in ("auto", "autograd"):  # the fast path (compiled where it can be built) and the autograd loop
        reader.backend = backend
        torch.manual_seed(3)
        reader.zero_grad()
        out = reader(x, mask)
        (out.states * mask.unsqueeze(-1)).sum().backward()
        results.append((out.states, [p.grad.clone() for p in reader.parameters()]))
    torch.testing.assert_close(results[0][0], results[1][0], atol=1e-12, rtol=0)
    for g1, g2 in zip(results[0][1], results[1][1]):
        torch.testing.assert_close(g1, g2, atol=1e-10, rtol=0)
    reader.eval()
    torch.testing.assert_close(reader(x, mask).states, reader(x, mask).states, atol=0, rtol=0)


def test_the_backend_option_picks_the_time_loop():
    """``backend`` (config field, or set on the built reader) picks the loop: "auto" the compiled one for CPU
    tensors where it can be built, "function" ``_NSELoop``, "compiled" the compiled one, "autograd" the loop
    under autograd; unknown names are refused."""
    if nse_kernels.kernels() is None:
        pytest.skip("the compiled NSE kernels are not available here (no compiler or ninja)")
    x, mask = batch([5, 3])
    loops = {"auto": "_NSECompiledLoopBackward", "compiled": "_NSECompiledLoopBackward",
             "function": "_NSELoopBackward", "autograd": "StackBackward0"}  # autograd: torch.stack of the h_t
    for backend, grad_fn in loops.items():
        reader = make_reader(backend=backend)
        assert reader.backend == backend
        assert type(reader(x, mask).states.grad_fn).__name__ == grad_fn, backend
        reader.backend = "function"  # settable on the built reader
        assert type(reader(x, mask).states.grad_fn).__name__ == "_NSELoopBackward"
    with pytest.raises(MemreadError, match="reader nse: backend must be one of 'auto', 'compiled', 'function', "
                                           "'autograd'"):
        make_reader(backend="cuda")


@pytest.mark.parametrize("backend", ["compiled", "function"])
def test_evaluation_keeps_two_memory_buffers_not_every_step(backend, monkeypatch):
    """Under ``torch.no_grad`` the hand-written loops keep two alternating memory buffers, not every M_t
    (O(B T^2 k)) for a backward pass: a Function's ``needs_input_grad`` says True for parameters even under
    no_grad, so the loop is handed its inputs detached. The outputs are the same either way."""
    import memread.readers._nse_autograd as loops

    if backend == "compiled" and nse_kernels.kernels() is None:
        pytest.skip("the compiled NSE kernels are not available here (no compiler or ninja)")
    seen = []
    real = loops.function_loop

    class Spy:
        def __init__(self, loop):
            self.loop = loop

        def apply(self, *args):
            seen.append(any(isinstance(a, torch.Tensor) and a.requires_grad for a in args))
            return self.loop.apply(*args)

    monkeypatch.setattr(loops, "function_loop", lambda o, b: Spy(real(o, b)))
    reader = make_reader(shared=1, backend=backend)
    x, mask = batch([5, 3])
    (M, M_mask), = shared_memories(1, 2)
    with torch.no_grad():
        evaluated = reader(x, mask, shared=[(M, M_mask)]).states
    trained = reader(x, mask, shared=[(M, M_mask)]).states
    assert seen == [False, True]  # nothing to differentiate in evaluation; the parameters in training
    assert torch.equal(evaluated, trained.detach())


def test_misuse_is_refused():
    reader = build_reader(NSEConfig(hidden=K, shared=1), K)
    x = torch.randn(2, 3, K)
    with pytest.raises(MemreadError, match="shared"):
        reader(x)
    with pytest.raises(MemreadError, match="shared"):
        reader(x, shared=[(torch.randn(2, 3, K), torch.ones(2, 3, dtype=torch.bool))] * 2)
    with pytest.raises(MemreadError, match="shared memory 0"):
        reader(x, shared=[(torch.randn(2, 3, K + 1), torch.ones(2, 3, dtype=torch.bool))])
    with pytest.raises(MemreadError, match="whole sequences"):
        reader(x, state={"memory": x}, shared=[(torch.randn(2, 3, K), torch.ones(2, 3, dtype=torch.bool))])
    with pytest.raises(MemreadError, match="positive"):
        build_reader(NSEConfig(hidden=0), K)


