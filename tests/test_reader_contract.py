"""One contract for every registered reader (allennlp's ``ModelTestCase`` ladder, once for all of them).

Parametrised over ``READERS``, so a reader added to the registry is checked here by adding one line to
``SMALL`` (the test fails until it has one). For each reader, in float64:

- shapes: states (B, T, output_size); with ``memory_tape`` the tape in ``state["cells"]`` is (B, S, H);
- every parameter receives a non-zero gradient;
- one example alone equals the same example in a right-padded batch (garbage in the padding);
- ``carries_state``: two segments with the state carried equal one read of both;
- ``resets``: a document start in the middle of a row equals reading that document fresh;
- ``Config.impl`` exists: the fast path equals the library's equation-by-equation reference, with
  padding (and document starts where the reader resets), gradients included.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

from memread.readers import CAPABILITIES, READERS, build_reader, readers_with
from memread.readers.base import detach_state, flatten_state

E = 4  # embedding size, different from every hidden size below: input maps and skips are built
SMALL = {  # name -> small config kwargs
    "lstm": dict(hidden=6),
    "gru": dict(hidden=6),
    "rnn": dict(hidden=6),
    "gflstm": dict(hidden=5, layers=3),
    "dglstm": dict(hidden=5, layers=3),
    "doc_lstm": dict(hidden=6),
    "attention": dict(hidden=6, window=3),
    "kv": dict(hidden=8, window=3),
    "kvp": dict(hidden=9, window=3),
    "ngram": dict(hidden=6, n=3),
    "lstmn": dict(hidden=5, layers=2, span=3, deep_attention=True),
    "nse": dict(hidden=5, layers=2, shared=1),
    "rm": dict(hidden=6, window=3),
    "hornn": dict(hidden=6, variant="gated"),
}
NAMES = sorted(READERS)
ATOL = 1e-8  # float64


@pytest.fixture(autouse=True)
def float64():
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(old)


def config(name: str, **extra):
    if name not in SMALL:
        pytest.fail(f"reader {name!r} is registered but has no small config in tests/test_reader_contract.py SMALL")
    fields = {f.name for f in dataclasses.fields(READERS[name].Config)}
    kwargs = {"name": name} if "name" in fields else {}
    return READERS[name].Config(**kwargs, **SMALL[name], **extra)


def make(name: str, seed: int = 0, **extra):
    torch.manual_seed(seed)
    return build_reader(config(name, **extra), E).eval()


def has_reference(name: str) -> bool:
    return "impl" in {f.name for f in dataclasses.fields(READERS[name].Config)}


def batch(lengths, T=None, seed=1):
    g = torch.Generator().manual_seed(seed)
    T = T or max(lengths)
    x = torch.randn(len(lengths), T, E, generator=g)
    mask = torch.arange(T).unsqueeze(0) < torch.tensor(lengths).unsqueeze(1)
    return x, mask


def shared_memories(name, reader, B, seed=7):
    """What an MMA-NSE reads besides its input: ``shared`` memories (B, S, H), each right-padded."""
    n = SMALL[name].get("shared", 0) if READERS[name].shared_memory else 0
    g = torch.Generator().manual_seed(seed)
    lengths = torch.tensor([5, 2, 3, 4, 1][:B])
    return [(torch.randn(B, 5, reader.output_size, generator=g), torch.arange(5) < lengths.unsqueeze(1))
            for _ in range(n)]


def read(name, reader, x, mask, state=None, reset=None, shared=None, **kw):
    """Call a reader with what it declares it takes."""
    spec = READERS[name]
    if spec.resets and reset is not None:
        kw["reset"] = reset
    if spec.shared_memory and shared:
        kw["shared"] = shared
    return reader(x, mask, state, **kw)


def test_every_registered_reader_is_checked():
    assert NAMES == sorted(READERS) and set(SMALL) == set(READERS)
    assert CAPABILITIES == ("resets", "shared_memory", "memory_tape", "carries_state")
    assert readers_with("memory_tape") == ["lstmn"] and readers_with("shared_memory") == ["nse"]
    with pytest.raises(ValueError, match="unknown reader capability"):
        readers_with("flies")


@pytest.mark.parametrize("name", NAMES)
def test_shapes(name):
    reader = make(name)
    assert reader.input_size == E
    x, mask = batch([6, 4, 1])
    out = read(name, reader, x, mask, shared=shared_memories(name, reader, 3))
    assert out.states.shape == (3, 6, reader.output_size)
    if out.memory is not None:
        assert out.memory.dim() == 3 and out.memory.shape[0] == 3
        assert out.memory_mask is None or out.memory_mask.shape == out.memory.shape[:2]
    if READERS[name].memory_tape:
        cells = read(name, reader, x, mask, return_cells=True).state["cells"]
        assert cells.shape == out.memory.shape


@pytest.mark.parametrize("name", NAMES)
def test_every_parameter_gets_a_gradient(name):
    reader = make(name)
    x, mask = batch([7, 5, 3])
    w = torch.randn(3, 7, reader.output_size, generator=torch.Generator().manual_seed(2))
    reset = torch.zeros(3, 7, dtype=torch.bool)
    reset[0, 4] = True
    out = read(name, reader, x, mask, reset=reset, shared=shared_memories(name, reader, 3))
    (out.states * w * mask.unsqueeze(-1)).sum().backward()
    for pname, p in reader.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, f"{name}: {pname} receives no gradient"


@pytest.mark.parametrize("name", NAMES)
def test_one_example_alone_equals_it_in_a_padded_batch(name):
    reader = make(name)
    lengths = [7, 4, 1]
    x, mask = batch(lengths)
    x[~mask] = 1e3  # garbage in the padding changes nothing
    sh = shared_memories(name, reader, 3)
    sh = [(torch.where(m.unsqueeze(-1), M, torch.full_like(M, -1e3)), m) for M, m in sh]
    padded = read(name, reader, x, mask, shared=sh).states
    for b, n in enumerate(lengths):
        alone_sh = [(M[b : b + 1, m[b]], m[b : b + 1, m[b]]) for M, m in sh]
        alone = read(name, reader, x[b : b + 1, :n], torch.ones(1, n, dtype=torch.bool), shared=alone_sh).states
        torch.testing.assert_close(padded[b, :n], alone[0], atol=ATOL, rtol=0, msg=f"{name}, row {b}")


@pytest.mark.parametrize("name", readers_with("carries_state"))
def test_two_segments_equal_one_read(name):
    reader = make(name)
    x, mask = batch([9, 6, 3])
    whole = read(name, reader, x, mask).states
    # cut at 3: every row full in the first segment; at 4: the third row ends there; and three segments
    for cuts in ([0, 3, 9], [0, 4, 9], [0, 2, 5, 9]):
        state, parts = None, []
        for a, b in zip(cuts[:-1], cuts[1:]):
            out = read(name, reader, x[:, a:b], mask[:, a:b], state)
            parts.append(out.states)
            state = detach_state(out.state)
        joined = torch.cat(parts, dim=1)
        torch.testing.assert_close(joined[mask], whole[mask], atol=ATOL, rtol=0, msg=f"{name}, cuts {cuts}")


@pytest.mark.parametrize("name", readers_with("resets"))
def test_a_reset_in_the_middle_equals_a_fresh_read(name):
    reader = make(name)
    x, mask = batch([8, 8])
    starts = [3, 5]
    reset = torch.zeros(2, 8, dtype=torch.bool)
    reset[0, 3] = reset[1, 5] = True
    states = read(name, reader, x, mask, reset=reset).states
    for b, r in enumerate(starts):
        before = read(name, reader, x[b : b + 1, :r], mask[b : b + 1, :r]).states[0]
        fresh = read(name, reader, x[b : b + 1, r:], mask[b : b + 1, r:]).states[0]
        torch.testing.assert_close(states[b, :r], before, atol=ATOL, rtol=0)
        torch.testing.assert_close(states[b, r:], fresh, atol=ATOL, rtol=0, msg=f"{name}, row {b}")


@pytest.mark.parametrize("name", [n for n in NAMES if has_reference(n)])
def test_fast_equals_the_reference(name):
    fast = make(name)
    ref = make(name, impl="reference")  # same seed, same construction: the same parameters
    for (pname, p), (_, q) in zip(fast.named_parameters(), ref.named_parameters(), strict=True):
        assert torch.equal(p, q), pname
    x, mask = batch([7, 4, 1])
    reset = torch.zeros(3, 7, dtype=torch.bool)
    reset[0, 3] = reset[1, 1] = True
    w = torch.randn(3, 7, fast.output_size, generator=torch.Generator().manual_seed(2))
    results = []
    for reader in (fast, ref):
        out = read(name, reader, x, mask, reset=reset, shared=shared_memories(name, reader, 3), return_attention=True)
        loss = (out.states * w * mask.unsqueeze(-1)).sum()
        results.append((out, torch.autograd.grad(loss, list(reader.parameters()))))
    (a, grads_a), (b, grads_b) = results
    torch.testing.assert_close(a.states[mask], b.states[mask], atol=ATOL, rtol=0)
    if a.attention is not None:
        torch.testing.assert_close(a.attention[mask], b.attention[mask], atol=ATOL, rtol=0)
    if a.memory_mask is not None:
        torch.testing.assert_close(a.memory[a.memory_mask], b.memory[b.memory_mask], atol=ATOL, rtol=0)
    flat_a, flat_b = flatten_state(a.state), flatten_state(b.state)
    assert flat_a.keys() == flat_b.keys()
    for key in flat_a:
        torch.testing.assert_close(flat_a[key], flat_b[key], atol=ATOL, rtol=0, msg=f"{name}: {key}")
    for (pname, _), ga, gb in zip(fast.named_parameters(), grads_a, grads_b):
        torch.testing.assert_close(ga, gb, atol=ATOL, rtol=0, msg=f"{name}: d {pname}")
