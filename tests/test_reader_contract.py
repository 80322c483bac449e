"""One contract for every registered reader (allennlp's ``ModelTestCase`` ladder, once for all of them).

Parametrised over ``READERS``, so a reader added to the registry is checked here by adding one line to
``SMALL`` (the test fails until it has one). Most checks run on every *case*: the reader's small config and
each of its ``VARIANTS`` (options that take other code paths: a span, a zero slot, E == k, shared memories,
a window wider than the text ...), on every time-loop backend its config offers (``backend``: "compiled" and
"function", the NSE's "autograd" too; "auto" is one of them; "compiled" is skipped, saying why, where its
kernels cannot be built). For each, in float64:

- shapes: states (B, T, output_size); with ``memory_tape`` the tape in ``state["cells"]`` is (B, S, H);
- every parameter receives a non-zero gradient;
- one example alone equals the same example in a right-padded batch (garbage in the padding, which gets no
  gradient), its memory too, and with ``carries_state`` its state continues the text as the alone one does;
- ``carries_state``: the text read in segments (cut anywhere: every row full, a row ending, an empty segment,
  one token at a time; document starts at a cut, mid-segment and one-token documents where the reader
  ``resets``), the state carried with its gradients, equals one read of it: outputs, the state's
  continuation and every gradient;
- ``resets``: a document start in the middle of a row equals reading that document fresh;
- ``Config.impl`` exists: the fast path equals the library's equation-by-equation reference with garbage in
  the padding (and document starts where the reader resets): outputs, attention, memory, the whole state,
  and the gradients of all of them into every parameter, the input and the shared memories; and with nothing
  to differentiate (where fast loops keep fewer buffers) it computes the same;
- a tiny run learns: a few dozen Adam steps through the library's head and criterion (a language model for
  the readers that carry their state, which read left to right; a classifier for the others) bring the
  loss well below where it started.

The per-reader files (``test_lstmn.py``, ``test_nse.py``, ...) keep what is particular to one paper.
"""

from __future__ import annotations

import dataclasses
import math
import typing

import pytest
import torch

from memread.errors import MemreadError
from memread.readers import CAPABILITIES, READERS, build_reader, readers_with
from memread.readers.base import flatten_state

E = 4  # embedding size, different from most hidden sizes below: input maps and skips are built
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
VARIANTS = {  # name -> other configs (replacing SMALL's keys) whose fast path takes other code
    "gflstm": [dict(layers=1)],
    "dglstm": [dict(layers=1)],  # no depth gate at the bottom layer
    "attention": [dict(window=1), dict(window=9)],  # a window wider than any text read here
    "kv": [dict(window=9)],
    "kvp": [dict(window=1), dict(window=5)],
    "ngram": [dict(n=2), dict(hidden=8, n=5)],
    "lstmn": [
        dict(hidden=4, layers=1, span=0, deep_attention=False),  # E == H, one layer, an unbounded tape
        dict(layers=1, span=3, deep_attention=False, tape_start="zero_slot"),
        dict(layers=3, span=0, deep_attention=False),
        dict(layers=3, span=2, tape_start="zero_slot"),
    ],
    "nse": [
        dict(hidden=4, layers=1, shared=0),  # E == k: the input itself is the memory, no input map
        dict(hidden=4, layers=1, shared=1),
        dict(layers=2, shared=2),  # MMA-NSE with two other memories
    ],
    "rm": [dict(window=1), dict(window=15)],  # a window wider than any text read here
    "hornn": [
        dict(variant="gated", order=1), dict(variant="gated", order=4, activation="tanh"),
        dict(variant="fofe"), dict(variant="fofe", order=1, alpha=0.5), dict(variant="fofe", order=5, activation="tanh"),
    ],
}
NAMES = sorted(READERS)
ATOL = 1e-8  # float64


@pytest.fixture(autouse=True)
def float64():
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(old)


def fields(name: str) -> set[str]:
    return {f.name for f in dataclasses.fields(READERS[name].Config)}


def config(name: str, **extra):
    if name not in SMALL:
        pytest.fail(f"reader {name!r} is registered but has no small config in tests/test_reader_contract.py SMALL")
    kwargs = {"name": name} if "name" in fields(name) else {}
    return READERS[name].Config(**kwargs, **{**SMALL[name], **extra})


def make(name: str, seed: int = 0, **extra):
    torch.manual_seed(seed)
    return build_reader(config(name, **extra), E).eval()


def has_reference(name: str) -> bool:
    return "impl" in fields(name)


def backends(name: str) -> list[str | None]:
    """The time-loop backends ``name``'s config offers, "auto" left out (it runs one of the others); [None]
    for a reader without the option."""
    hints = typing.get_type_hints(READERS[name].Config)
    if "backend" not in hints:
        return [None]
    return [b for b in typing.get_args(hints["backend"]) if b != "auto"]


def cases(names) -> list:
    """``(name, options, backend)`` for each of ``names``: its small config and each variant, on each backend."""
    out = []
    for name in names:
        for options in [{}, *VARIANTS.get(name, [])]:
            for backend in backends(name):
                words = [name, *(f"{k}={v}" for k, v in options.items()), *([backend] if backend else [])]
                out.append(pytest.param(name, options, backend, id="-".join(words)))
    return out


def batch(lengths, T=None, seed=1):
    g = torch.Generator().manual_seed(seed)
    T = T or max(lengths)
    x = torch.randn(len(lengths), T, E, generator=g)
    mask = torch.arange(T).unsqueeze(0) < torch.tensor(lengths).unsqueeze(1)
    return x, mask


def shared_memories(name, reader, B, seed=7, garbage=False):
    """What an MMA-NSE reads besides its input: ``cfg.shared`` memories (B, S, H), each right-padded (with
    ``garbage`` in the padding)."""
    n = reader.cfg.shared if READERS[name].shared_memory else 0
    g = torch.Generator().manual_seed(seed)
    out = []
    for j in range(n):
        lengths = torch.tensor([5, 2, 3, 4, 1][j % 2 :][:B])
        m = torch.arange(5) < lengths.unsqueeze(1)
        M = torch.randn(B, 5, reader.output_size, generator=g)
        out.append((torch.where(m.unsqueeze(-1), M, torch.full_like(M, -1e3)) if garbage else M, m))
    return out


def read(name, reader, x, mask, state=None, reset=None, shared=None, **kw):
    """Call a reader with what it declares it takes."""
    spec = READERS[name]
    if spec.resets and reset is not None:
        kw["reset"] = reset
    if spec.shared_memory and shared:
        kw["shared"] = shared
    return reader(x, mask, state, **kw)


def make_case(name: str, options: dict, backend: str | None, seed: int = 0):
    """The case's reader; a test of the compiled loops is skipped, saying why, where they cannot run."""
    reader = make(name, seed, **options, **({"backend": backend} if backend else {}))
    if backend == "compiled":
        x, mask = batch([2, 1])
        try:
            read(name, reader, x, mask, shared=shared_memories(name, reader, 2))
        except MemreadError as e:
            if "backend = 'compiled' needs" not in str(e):
                raise
            pytest.skip(f"the compiled loops of reader {name} are not available here: {e}")
    return reader


def weighted(tensors: dict[str, torch.Tensor], seed: int) -> torch.Tensor:
    """A random linear function of every floating tensor in ``tensors`` (sorted by key), so that each gets a
    gradient of its own."""
    g = torch.Generator().manual_seed(seed)
    total = torch.zeros(())
    for key in sorted(tensors):
        t = tensors[key]
        if t.is_floating_point():
            total = total + (t * torch.randn(t.shape, generator=g)).sum()
    return total


def differentiable_state(state) -> dict[str, torch.Tensor]:
    """The state's tensors a loss may depend on: attention weights are a trace for inspection (the NSE's fast
    loop returns them without a gradient)."""
    return {k: v for k, v in flatten_state(state).items() if "attention" not in k}


# ----------------------------------------------------------------------------- the registry, shapes, gradients


def test_every_registered_reader_is_checked():
    assert NAMES == sorted(READERS) and set(SMALL) == set(READERS)
    assert set(VARIANTS) <= set(READERS)
    assert CAPABILITIES == ("resets", "shared_memory", "memory_tape", "carries_state")
    assert readers_with("memory_tape") == ["lstmn"] and readers_with("shared_memory") == ["nse"]
    with pytest.raises(ValueError, match="unknown reader capability"):
        readers_with("flies")
    # the backends are read from the configs: the window readers and the LSTMN offer two, the NSE three
    assert backends("lstmn") == ["compiled", "function"] and backends("kvp") == ["compiled", "function"]
    assert backends("nse") == ["compiled", "function", "autograd"] and backends("lstm") == [None]


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


# ----------------------------------------------------------------------------- padding, segments, resets


@pytest.mark.parametrize("name,options,backend", cases(NAMES))
def test_one_example_alone_equals_it_in_a_padded_batch(name, options, backend):
    reader = make_case(name, options, backend)
    lengths = [7, 4, 1]
    x, mask = batch(lengths)
    x[~mask] = 1e3  # garbage in the padding changes nothing
    x.requires_grad_(True)
    sh = shared_memories(name, reader, 3, garbage=True)
    leaves = [M.clone().requires_grad_(True) for M, _ in sh]
    padded = read(name, reader, x, mask, shared=[(M, m) for M, (_, m) in zip(leaves, sh)])
    # ... and receives no gradient from the real tokens' outputs
    grads = torch.autograd.grad((padded.states * mask.unsqueeze(-1)).sum(), [x, *leaves])
    assert not grads[0][~mask].any(), "padded inputs get a gradient"
    for g, (_, m) in zip(grads[1:], sh):
        assert not g[~m].any(), "padded slots of a shared memory get a gradient"
    after, after_mask = batch([3, 3, 3], seed=5)
    following = read(name, reader, after, after_mask, padded.state).states if READERS[name].carries_state else None
    for b, n in enumerate(lengths):
        alone_sh = [(M[b : b + 1, m[b]], m[b : b + 1, m[b]]) for M, m in sh]
        alone = read(name, reader, x[b : b + 1, :n], torch.ones(1, n, dtype=torch.bool), shared=alone_sh)
        torch.testing.assert_close(padded.states[b, :n], alone.states[0], atol=ATOL, rtol=0, msg=f"{name}, row {b}")
        if padded.memory is not None and padded.memory_mask is not None:
            torch.testing.assert_close(padded.memory[b][padded.memory_mask[b]], alone.memory[0][alone.memory_mask[0]],
                                       atol=ATOL, rtol=0, msg=f"{name}, row {b}: memory")
        if following is not None:  # the carried state is the row's own: it continues the text as the alone one
            alone_next = read(name, reader, after[b : b + 1], after_mask[b : b + 1], alone.state).states
            torch.testing.assert_close(following[b], alone_next[0], atol=ATOL, rtol=0, msg=f"{name}, row {b}: state")


def stream(name):
    """Three rows of 9 steps, the third padded from 8 on; where the reader resets, document starts at step 4
    (a cut below), mid-segment at 2, and a one-token document at 7."""
    x, mask = batch([9, 9, 8])
    reset = torch.zeros(3, 9, dtype=torch.bool)
    reset[0, [4, 7, 8]] = True
    reset[1, 2] = True
    reset[2, 5] = True
    return x, mask, reset


@pytest.mark.parametrize("name,options,backend", cases(readers_with("carries_state")))
def test_segments_equal_one_read(name, options, backend):
    """The state carried from segment to segment, not detached: outputs, what the final state continues
    into, and every gradient (through the carried states) equal those of one read of the whole text."""
    reader = make_case(name, options, backend)
    x, mask, reset = stream(name)
    after, after_mask = batch([3, 3, 3], seed=5)
    w = torch.randn(3, 9, reader.output_size, generator=torch.Generator().manual_seed(2)) * mask.unsqueeze(-1)
    w_after = torch.randn(3, 3, reader.output_size, generator=torch.Generator().manual_seed(3))
    params = list(reader.parameters())

    def run(cuts):
        xs = x.clone().requires_grad_(True)
        state, parts = None, []
        for a, b in zip(cuts[:-1], cuts[1:]):
            out = read(name, reader, xs[:, a:b], mask[:, a:b], state, reset=reset[:, a:b])
            assert out.states.shape == (3, b - a, reader.output_size)
            parts.append(out.states)
            state = out.state
        states = torch.cat(parts, dim=1)
        following = read(name, reader, after, after_mask, state).states  # what the final state continues into
        loss = (states * w).sum() + (following * w_after).sum()
        return states, following, torch.autograd.grad(loss, [xs, *params])

    whole, whole_next, whole_grads = run([0, 9])
    # every row full in the first segment; a row ends in the second; three; one token at a time. (A segment
    # in which a row has no token is not read: torch's packed RNNs read one padded token there.)
    for cuts in ([0, 3, 9], [0, 4, 9], [0, 2, 5, 9], [*range(8), 9]):
        states, following, grads = run(cuts)
        where = f"{name}, cuts {cuts}"
        torch.testing.assert_close(states[mask], whole[mask], atol=ATOL, rtol=0, msg=where)
        torch.testing.assert_close(following, whole_next, atol=ATOL, rtol=0, msg=f"{where}: the final state")
        for pname, ga, gb in zip(["input", *(n for n, _ in reader.named_parameters())], grads, whole_grads):
            torch.testing.assert_close(ga, gb, atol=ATOL, rtol=0, msg=f"{where}: d {pname}")


@pytest.mark.parametrize("name,options,backend", cases(readers_with("resets")))
def test_a_reset_in_the_middle_equals_a_fresh_read(name, options, backend):
    reader = make_case(name, options, backend)
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


# ----------------------------------------------------------------------------- the fast path and the reference


@pytest.mark.parametrize("name,options,backend", cases([n for n in NAMES if has_reference(n)]))
def test_fast_equals_the_reference(name, options, backend):
    fast = make_case(name, options, backend)
    ref = make(name, **options, impl="reference")  # same seed, same construction: the same parameters
    for (pname, p), (_, q) in zip(fast.named_parameters(), ref.named_parameters(), strict=True):
        assert torch.equal(p, q), pname
    x, mask = batch([10, 8, 1])
    x[~mask] = 1e3  # garbage in the padding
    x.requires_grad_(True)
    # documents of 4, 5 and 1 tokens in row 0, one from the second token on in row 1 (7 tokens: a window of 5
    # has all its slots in the document)
    reset = torch.zeros(3, 10, dtype=torch.bool)
    reset[0, 4] = reset[0, 9] = reset[1, 1] = True
    sh = shared_memories(name, fast, 3, garbage=True)
    leaves = [M.clone().requires_grad_(True) for M, _ in sh]
    w = torch.randn(3, 10, fast.output_size, generator=torch.Generator().manual_seed(2))

    def run(reader):
        out = read(name, reader, x, mask, reset=reset, shared=[(M, m) for M, (_, m) in zip(leaves, sh)],
                   return_attention=True)
        loss = (out.states * w * mask.unsqueeze(-1)).sum() + weighted(differentiable_state(out.state), seed=3)
        if out.memory is not None and out.memory_mask is not None:
            loss = loss + weighted({"memory": out.memory * out.memory_mask.unsqueeze(-1)}, seed=4)
        return out, torch.autograd.grad(loss, [x, *leaves, *reader.parameters()])

    (a, grads_a), (b, grads_b) = run(fast), run(ref)
    torch.testing.assert_close(a.states[mask], b.states[mask], atol=ATOL, rtol=0)
    if a.attention is not None:
        torch.testing.assert_close(a.attention[mask], b.attention[mask], atol=ATOL, rtol=0)
    if a.memory_mask is not None:
        torch.testing.assert_close(a.memory[a.memory_mask], b.memory[b.memory_mask], atol=ATOL, rtol=0)
    flat_a, flat_b = flatten_state(a.state), flatten_state(b.state)
    assert flat_a.keys() == flat_b.keys()
    for key in flat_a:  # attention weights (B, T, S) at the real tokens; the rest whole
        real = (lambda t: t[mask]) if "attention" in key and flat_a[key].shape[:2] == mask.shape else (lambda t: t)
        torch.testing.assert_close(real(flat_a[key]), real(flat_b[key]), atol=ATOL, rtol=0, msg=f"{name}: {key}")
    names = ["input", *(f"shared memory {j}" for j in range(len(leaves))), *(n for n, _ in fast.named_parameters())]
    for pname, ga, gb in zip(names, grads_a, grads_b, strict=True):
        torch.testing.assert_close(ga, gb, atol=ATOL, rtol=0, msg=f"{name}: d {pname}")
    if not options:  # (a window of one has nothing to weigh: its attention parameters get no gradient)
        for pname, g in zip(names[1 + len(leaves) :], grads_a[1 + len(leaves) :]):
            assert g.abs().sum() > 0, f"{name}: {pname} receives no gradient"
    fast.requires_grad_(False)  # nothing to differentiate (fast loops may keep fewer buffers): the same values
    with torch.no_grad():
        again = read(name, fast, x.detach(), mask, reset=reset, shared=sh, return_attention=True)
    torch.testing.assert_close(again.states, a.states, atol=ATOL, rtol=0)
    for key, value in flatten_state(again.state).items():
        torch.testing.assert_close(value, flat_a[key], atol=ATOL, rtol=0, msg=f"{name}, no grad: {key}")


# ----------------------------------------------------------------------------- a tiny run learns

V = 10  # the tiny tasks' vocabulary
LEARN_STEPS = 40
# what the tiny run changes in SMALL besides hidden = 24: the heads here give the NSE no shared memory, and
# three gated-feedback layers need more than 40 steps to start learning
LEARN = {"nse": dict(shared=0), "gflstm": dict(layers=2), "dglstm": dict(layers=2)}


def learn(name: str, lr: float = 0.05, steps: int = LEARN_STEPS) -> list[float]:
    """The training losses of ``steps`` Adam steps on a tiny fixed task, through the library's head and
    criterion: a reader that carries its state (it reads left to right) as a language model of a
    repetitive stream (``1 2 .. 8`` over and over: each word predicts the next); the others (the NSE reads
    the whole text, the words it would predict included) as a classifier of whether token 0 occurs in a
    text."""
    from memread.criteria.classification import CrossEntropy
    from memread.criteria.lm import LMNLL, LMNLLConfig
    from memread.heads.classifier import MLPHeadConfig, SentenceClassifier
    from memread.heads.lm import LanguageModel, LMHeadConfig

    torch.set_default_dtype(torch.float32)  # the float64 fixture restores its dtype afterwards
    torch.manual_seed(0)
    cfg = config(name, hidden=24, **LEARN.get(name, {}))  # 24: a multiple of kvp's 3 and of ngram's n - 1 = 2
    if READERS[name].carries_state:
        model = LanguageModel(V, LMHeadConfig(emb=8), build_reader(cfg, 8), READERS[name].resets)
        criterion = LMNLL(LMNLLConfig(reduction="token"))
        ids = torch.tensor([1, 2, 3, 4, 5, 6, 7, 8] * 8 + [1])
        fixed = {"input": ids[:-1].view(4, 16), "target": ids[1:].view(4, 16), "mask": torch.ones(4, 16, dtype=torch.bool)}
        batches = lambda: fixed  # noqa: E731
    else:
        model = SentenceClassifier(V, MLPHeadConfig(emb=8, mlp=16, dropout=0.0), build_reader(cfg, 8), 0, 2)
        criterion = CrossEntropy()
        g = torch.Generator().manual_seed(1)

        def batches():
            B, T = 32, 6
            lengths = torch.randint(3, T + 1, (B,), generator=g)
            mask = torch.arange(T).unsqueeze(0) < lengths.unsqueeze(1)
            ids = torch.randint(2, V, (B, T), generator=g)
            hit = torch.rand(B, generator=g) < 0.5
            pos = (torch.rand(B, generator=g) * lengths).long()
            ids[hit, pos[hit]] = 1  # the token to find (0 is the padding id)
            ids[~mask] = 0
            return {"ids": ids, "mask": mask, "label": ((ids == 1) & mask).any(1).long()}

    opt = torch.optim.Adam(model.parameters(), lr=lr)
    losses = []
    for _ in range(steps):
        b = batches()
        loss = criterion(model(b), b).value
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    return losses


@pytest.mark.parametrize("name", NAMES)
def test_a_tiny_run_learns(name):
    """The mean loss of the last five steps is below 0.4 of the first five's, which start near a uniform
    guess (a language model's log V, a classifier's log 2). Every reader gets to 0.25 or less; with the
    reader's outputs detached (the head alone learning) the losses end at 0.64 to 0.99 of where they began,
    with lr = 0 at 1."""
    losses = learn(name)
    first, last = sum(losses[:5]) / 5, sum(losses[-5:]) / 5
    guess = math.log(V) if READERS[name].carries_state else math.log(2)
    assert first > 0.8 * guess and last < 0.4 * first, (name, [round(v, 3) for v in losses])
