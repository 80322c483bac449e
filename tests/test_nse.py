"""NSE / MMA-NSE reader: shapes; the fast path (its compiled loop and its Python loop) and the
autograd loop equal the library's per-example, per-step reference reading of equations (1)-(6) and
(7)-(15) (``impl = "reference"``) in float64 (with padding in the input and in the shared memories,
two layers, a linear input map, one and two shared memories), gradients included; every parameter gets a gradient; one sequence alone equals the same sequence in a padded batch; padding values
change nothing; the keys and the memory respect the masks; a tiny classifier learns; misuse is
refused with a MemreadError.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch
import torch.nn.functional as F
from torch import nn

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


# ----------------------------------------------------------------------------- the reference


def reference_of(reader: NSEReader) -> NSEReader:
    """The same reader (same parameters) with ``impl = "reference"``: the library's reading of the
    equations for each row alone, token by token (:func:`memread.readers.nse.reference_read`)."""
    ref = build_reader(dataclasses.replace(reader.cfg, impl="reference"), reader.input_size).double()
    ref.load_state_dict(reader.state_dict())
    return ref.train(reader.training)


CASES = [
    dict(layers=1, shared=0, input_size=K),
    dict(layers=2, shared=0, input_size=3),  # E != k: the linear input map
    dict(layers=1, shared=1, input_size=K),
    dict(layers=2, shared=2, input_size=5),
]


def case_id(c):
    return f"L{c['layers']}-shared{c['shared']}-E{c['input_size']}"


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


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_fast_equals_reference_with_padding(case, path):
    reader = make_reader(**case, backend=path)
    lengths = [6, 3, 1]
    x, mask = batch(lengths, size=case["input_size"])
    sh = shared_memories(case["shared"], 3)
    out = reader(x, mask, shared=sh, return_attention=True)
    ref = reference_of(reader)(x, mask, shared=sh, return_attention=True)  # each row alone, token by token
    torch.testing.assert_close(out.states[mask], ref.states[mask], atol=1e-10, rtol=0)
    # padded slots keep their initial values, padded steps read and write nothing: whole tensors agree
    torch.testing.assert_close(out.memory, ref.memory, atol=1e-10, rtol=0)
    torch.testing.assert_close(out.attention, ref.attention, atol=1e-10, rtol=0)
    for key in ("shared", "shared_attention"):
        for j, (a, b) in enumerate(zip(out.state[key], ref.state[key], strict=True)):
            torch.testing.assert_close(a, b, atol=1e-10, rtol=0, msg=f"{key} {j}")
    # without autograd the fast path keeps two memory buffers instead of all M_t: same values
    with torch.no_grad():
        again = reader(x, mask, shared=sh, return_attention=True)
    for a, b in ((again.states, out.states), (again.memory, out.memory), (again.attention, out.attention),
                 *zip(again.state["shared"], out.state["shared"])):
        torch.testing.assert_close(a, b, atol=1e-12, rtol=0)


def test_gradients_equal_the_reference_and_reach_every_parameter(path):
    case = CASES[-1]  # two layers, two shared memories, an input map
    reader = make_reader(**case, backend=path)
    lengths = [5, 2, 4]
    x, mask = batch(lengths, size=case["input_size"])
    sh = shared_memories(2, 3)
    x.requires_grad_(True)
    leaves = [M_n.clone().requires_grad_(True) for M_n, _ in sh]
    w = torch.randn(5, K, generator=torch.Generator().manual_seed(5), dtype=torch.float64)

    def loss_of(r):
        out = r(x, mask, shared=[(M, m) for M, (_, m) in zip(leaves, sh)])
        return sum((out.states[b, :n] * w[:n]).sum() + out.memory[b, :n].sum()
                   + sum(S[b].sum() for S in out.state["shared"]) for b, n in enumerate(lengths))

    fast = torch.autograd.grad(loss_of(reader), [x, *leaves, *reader.parameters()])
    reference = reference_of(reader)
    ref_grads = torch.autograd.grad(loss_of(reference), [x, *leaves, *reference.parameters()])
    names = ["x", "shared0", "shared1"] + [n for n, _ in reader.named_parameters()]
    for name, g_fast, g_ref in zip(names, fast, ref_grads):
        torch.testing.assert_close(g_fast, g_ref, atol=1e-9, rtol=0, msg=name)
    for name, g in zip(names[3:], fast[3:]):
        assert g.abs().sum() > 0, f"{name} receives no gradient"
    assert not fast[0][~mask].any()  # padded inputs get no gradient


@pytest.mark.parametrize("shared", [0, 1])
def test_single_sequence_equals_padded_batch(shared, path):
    reader = make_reader(layers=2, shared=shared, backend=path)
    lengths = [6, 3, 5]
    x, mask = batch(lengths)
    sh = shared_memories(shared, 3)
    padded = reader(x, mask, shared=sh)
    for b, n in enumerate(lengths):
        alone = reader(x[b : b + 1, :n], shared=[(M[b : b + 1, m[b]], m[b : b + 1, m[b]]) for M, m in sh])
        torch.testing.assert_close(padded.states[b, :n], alone.states[0], atol=1e-12, rtol=0)
        torch.testing.assert_close(padded.memory[b, :n], alone.memory[0], atol=1e-12, rtol=0)
        for j, (M, m) in enumerate(sh):
            torch.testing.assert_close(padded.state["shared"][j][b, m[b]], alone.state["shared"][j][0], atol=1e-12, rtol=0)


def test_padding_values_change_nothing(path):
    reader = make_reader(layers=1, shared=2, backend=path)
    x, mask = batch([6, 3, 1])
    sh = shared_memories(2, 3)
    out = reader(x, mask, shared=sh)
    x2 = x.clone()
    x2[~mask] = 1e3
    sh2 = [(torch.where(m.unsqueeze(-1), M, torch.full_like(M, -1e3)), m) for M, m in sh]
    out2 = reader(x2, mask, shared=sh2)
    torch.testing.assert_close(out2.states[mask], out.states[mask], atol=1e-12, rtol=0)
    torch.testing.assert_close(out2.memory[mask], out.memory[mask], atol=1e-12, rtol=0)
    for (M, m), S, S2 in zip(sh, out.state["shared"], out2.state["shared"]):
        torch.testing.assert_close(S2[m], S[m], atol=1e-12, rtol=0)


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


def test_tiny_nse_classifier_learns():
    """Does token 0 occur in the sequence? An NSE over embeddings and a linear head on its last real
    state learn it in a few hundred steps."""
    torch.manual_seed(0)
    V, T, B = 10, 8, 64
    emb = nn.Embedding(V, 16)
    reader = build_reader(NSEConfig(hidden=16), 16)
    head = nn.Linear(16, 2)
    params = [*emb.parameters(), *reader.parameters(), *head.parameters()]
    opt = torch.optim.Adam(params, lr=1e-2)
    g = torch.Generator().manual_seed(1)

    def sample():
        lengths = torch.randint(3, T + 1, (B,), generator=g)
        mask = torch.arange(T).unsqueeze(0) < lengths.unsqueeze(1)
        tokens = torch.randint(1, V, (B, T), generator=g)
        hit = torch.rand(B, generator=g) < 0.5
        pos = (torch.rand(B, generator=g) * lengths).long()
        tokens[hit, pos[hit]] = 0
        y = ((tokens == 0) & mask).any(1).long()
        return tokens, mask, y

    def logits(tokens, mask):
        h = reader(emb(tokens), mask).states
        return head(h[torch.arange(B), mask.sum(1) - 1])

    losses = []
    for _ in range(150):
        tokens, mask, y = sample()
        loss = F.cross_entropy(logits(tokens, mask), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    tokens, mask, y = sample()
    with torch.no_grad():
        acc = (logits(tokens, mask).argmax(1) == y).float().mean().item()
    print(f"loss {sum(losses[:10]) / 10:.3f} -> {sum(losses[-10:]) / 10:.3f}, accuracy {acc:.2f}")
    assert sum(losses[-10:]) / 10 < 0.5 * sum(losses[:10]) / 10 and acc > 0.9
