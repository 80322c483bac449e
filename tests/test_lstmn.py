"""LSTMN reader: what its state holds; what the tape start (``tape_start``: the paper's empty tape, the
authors' code's zero slot) does to the attention, and that the zero slot takes weight and changes the
outputs from the second token on; two segments with a carried state equal the reference
(``impl = "reference"``, equations (4)-(9) and the deep variant of 3.3 read token by token) on the whole
text, the attention over the carried slots included; the hand-written backward pass checked numerically
through a carried state; token-by-token reading (``step``) equals reading at once; misuse is refused.

The fast path has two implementations of its time loops, the compiled kernels and the Python Function
loop (``backend``): the tests above that compare run on both, a float32 test compares the two at sizes
that exercise the compiled path's vector loops, and two threads give what one gives. Shapes, gradients,
padding, segments, the fast path against the reference with padding and gradients on both backends (one
and three layers, E == H, a span, the zero slot), and a tiny run that learns are checked for every reader
by ``tests/test_reader_contract.py``.
"""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch

from conftest import backend_fixture

import memread.readers._lstmn_autograd as lstmn_autograd
import memread.readers._lstmn_kernels as lstmn_kernels
from memread.errors import MemreadError
from memread.readers import READERS, build_reader
from memread.readers.base import detach_state, flatten_state, state_structure, unflatten_state
from memread.readers.lstmn import LSTMNConfig, LSTMNReader

E, H = 5, 4


backend = backend_fixture(lstmn_kernels.kernels, "LSTMN kernels")  # "compiled", then "function" (the Python loops)


TAPE_STARTS = ["empty", "zero_slot"]


def make_reader(layers=1, span=0, deep=False, input_size=E, hidden=H, seed=0, tape_start="empty",
                backend="auto") -> LSTMNReader:
    torch.manual_seed(seed)
    cfg = LSTMNConfig(hidden=hidden, layers=layers, span=span, deep_attention=deep, tape_start=tape_start,
                      backend=backend)
    return build_reader(cfg, input_size).double().eval()


# ----------------------------------------------------------------------------- the reference


def reference_of(reader: LSTMNReader) -> LSTMNReader:
    """The same reader (same parameters) with ``impl = "reference"``: the library's reading of
    equations (4)-(9) token by token (:func:`memread.readers.lstmn.reference_layer`)."""
    ref = build_reader(dataclasses.replace(reader.cfg, impl="reference"), reader.input_size).double()
    ref.load_state_dict(reader.state_dict())
    return ref.train(reader.training)


# ----------------------------------------------------------------------------- helpers


def batch(lengths, T=None, seed=1, input_size=E):
    g = torch.Generator().manual_seed(seed)
    T = T or max(lengths)
    x = torch.randn(len(lengths), T, input_size, generator=g, dtype=torch.float64)
    mask = torch.arange(T).unsqueeze(0) < torch.tensor(lengths).unsqueeze(1)
    return x, mask


CASES = [
    dict(layers=1, span=0, deep=False),
    dict(layers=1, span=3, deep=False),
    dict(layers=3, span=0, deep=False),
    dict(layers=3, span=2, deep=True),
    dict(layers=2, span=0, deep=True),
]


def case_id(c):
    return f"L{c['layers']}-span{c['span']}-deep{int(c['deep'])}"


# ----------------------------------------------------------------------------- tests


def test_registry_and_shapes():
    assert "lstmn" in READERS
    reader = build_reader(LSTMNConfig(hidden=6, layers=2), 3)
    assert (reader.input_size, reader.output_size) == (3, 6)
    x = torch.randn(2, 5, 3)
    out = reader(x, torch.ones(2, 5, dtype=torch.bool), return_attention=True)
    assert out.states.shape == (2, 5, 6)
    assert out.memory.shape == (2, 5, 6) and out.memory_mask.shape == (2, 5)
    assert out.attention.shape == (2, 5, 5)
    assert reader(x).attention is None
    st = out.state
    assert st["h"].shape == (2, 2, 5, 6) and st["c"].shape == (2, 2, 5, 6)
    assert st["h_tilde"].shape == (2, 2, 6) and st["slots"].tolist() == [5, 5]
    out2 = reader(x, state=st, return_attention=True)
    assert out2.memory.shape == (2, 10, 6) and out2.attention.shape == (2, 5, 10)
    # the state is plain tensors in a dict: the training loop can detach and checkpoint it
    flat = flatten_state(detach_state(out2.state))
    back = unflatten_state(json.loads(json.dumps(state_structure(out2.state))), flat)
    assert all(torch.equal(back[k], out2.state[k]) for k in back)


@pytest.mark.parametrize("tape_start", TAPE_STARTS)
@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_the_tape_start_decides_the_written_slots_weight(case, tape_start):
    """With padding: padded slots are never attended; the written slots take all the weight from the second
    token on with the paper's empty tape, and less than all of it (the rest is the zero slot's) with the
    authors' zero slot; the state keeps the slots within the span. (That the attention, the outputs and the
    state equal the reference's, on every backend, is ``tests/test_reader_contract.py``'s.)"""
    reader = make_reader(**case, tape_start=tape_start)
    lengths = [7, 4, 1]
    x, mask = batch(lengths)
    out = reader(x, mask, return_attention=True)
    for b, n in enumerate(lengths):
        assert not out.attention[b, :n, n:].any()  # padded slots are never attended
        total = out.attention[b, 1:n].sum(-1)
        if tape_start == "empty":
            torch.testing.assert_close(total, torch.ones_like(total))
        else:
            assert bool(((total > 0) & (total < 1 - 1e-6)).all())
    assert out.state["slots"].tolist() == [min(n, case["span"]) if case["span"] else n for n in lengths]


@pytest.mark.parametrize("tape_start", TAPE_STARTS)
@pytest.mark.parametrize("case", CASES[1:4], ids=case_id)
def test_carried_state_equals_reading_at_once(case, tape_start, backend):
    """Two segments with a carried state give what the reference gives on the whole text, also when rows
    have different lengths in either segment, the attention over the carried slots included; with the zero
    slot the state means what it means with an empty tape (the written slots only), and the zero slot is in
    reach of every token of every segment, beyond the span too."""
    reader = make_reader(**case, tape_start=tape_start, backend=backend)
    len1, len2 = [5, 2, 5], [4, 4, 0]
    x1, m1 = batch(len1, seed=2)
    x2, m2 = batch(len2, T=4, seed=3)
    out1 = reader(x1, m1)
    out2 = reader(x2, m2, state=out1.state, return_attention=True)
    assert out1.state["slots"].tolist() == [min(n, case["span"]) if case["span"] else n for n in len1]
    S0 = out1.state["h"].size(2)
    reference = reference_of(reader)
    for b in range(3):
        whole = torch.cat([x1[b, : len1[b]], x2[b, : len2[b]]])
        ref = reference(whole.unsqueeze(0), return_attention=True)  # the whole text at once, token by token
        n1, n2, kept = len1[b], len2[b], int(out1.state["slots"][b])
        torch.testing.assert_close(out1.states[b, :n1], ref.states[0, :n1], atol=1e-6, rtol=0)
        torch.testing.assert_close(out2.states[b, :n2], ref.states[0, n1:], atol=1e-6, rtol=0)
        # attention in the second segment, mapped back to positions of the whole text
        for t in range(n2):
            row = out2.attention[b, t]
            real = torch.cat([row[S0 - kept : S0], row[S0 : S0 + t]])
            torch.testing.assert_close(real, ref.attention[0, n1 + t, n1 - kept : n1 + t], atol=1e-6, rtol=0)
            if tape_start == "empty":
                assert row.sum().item() == pytest.approx(1.0)
            else:
                assert 0 < row.sum().item() < 1  # the rest is the zero slot's
        assert out2.memory_mask[b].sum() == kept + n2


@pytest.mark.parametrize("tape_start", TAPE_STARTS)
def test_gradcheck_through_a_carried_state(tape_start, backend):
    """The hand-written backward pass, checked numerically, with gradients flowing into the carried
    tapes and h~ as well (rows with different carried lengths)."""
    reader = make_reader(layers=2, span=3, deep=True, input_size=3, hidden=3, tape_start=tape_start,
                         backend=backend)
    x1, m1 = batch([4, 2], input_size=3)
    state = reader(x1, m1).state
    x2, m2 = batch([3, 2], input_size=3, seed=4)
    names = ["h", "c", "h_tilde"]
    leaves = [state[k].detach().requires_grad_(True) for k in names]
    x2.requires_grad_(True)

    def f(x, h, c, h_tilde):
        out = reader(x, m2, {"h": h, "c": c, "h_tilde": h_tilde, "slots": state["slots"]})
        return out.states * m2.unsqueeze(-1), out.state["h"], out.state["c"]

    assert torch.autograd.gradcheck(f, (x2, *leaves), atol=1e-6)


@pytest.mark.parametrize("span", [0, 2])
def test_incremental_reading_equals_batch(span, backend):
    reader = make_reader(layers=2, span=span, deep=True, backend=backend)
    x, mask = batch([6, 6])
    whole = reader(x, mask, return_attention=True)
    state = None
    for t in range(6):
        step = reader.step(x[:, t], state)
        state = step.state
        torch.testing.assert_close(step.states[:, 0], whole.states[:, t], atol=1e-10, rtol=0)
        # what token t attended to, over the slots still on the tape
        S = step.attention.size(-1)
        lo = t + 1 - S
        torch.testing.assert_close(step.attention[:, 0], whole.attention[:, t, lo : t + 1], atol=1e-10, rtol=0)
        torch.testing.assert_close(step.memory, whole.memory[:, lo : t + 1], atol=1e-10, rtol=0)
        assert state["h"].size(2) == (min(t + 1, span) if span else t + 1)


@pytest.mark.parametrize("tape_start", TAPE_STARTS)
@pytest.mark.parametrize("hidden", [37, 64])
def test_compiled_equals_python_path_in_float32(hidden, tape_start):
    """The compiled loops against the Python ones in float32, at sizes where the compiled path runs its
    vector loops and their remainders (37 = 2 x 16 + 5), with padding, a span and a carried state:
    outputs, carried state and every gradient agree to float32 precision."""
    if lstmn_kernels.kernels() is None:
        pytest.skip("the compiled LSTMN kernels are not available here (no compiler or ninja)")
    torch.manual_seed(0)
    reader = build_reader(LSTMNConfig(hidden=hidden, layers=2, span=4, deep_attention=True, tape_start=tape_start), 7)
    g = torch.Generator().manual_seed(3)
    x1, x2 = torch.randn(3, 6, 7, generator=g), torch.randn(3, 5, 7, generator=g)
    m1 = torch.tensor([[True] * 6, [True] * 3 + [False] * 3, [True] * 6])
    m2 = torch.tensor([[True] * 5, [True] * 5, [True] * 2 + [False] * 3])
    w = torch.randn(3, 5, hidden, generator=g)

    def run(compiled):
        reader.backend = "compiled" if compiled else "function"
        reader.zero_grad()
        first = reader(x1, m1)
        out = reader(x2, m2, state=first.state, return_attention=True)
        loss = (out.states * w * m2.unsqueeze(-1)).sum() + (first.states * m1.unsqueeze(-1)).sum()
        loss.backward()
        grads = {n: p.grad.clone() for n, p in reader.named_parameters()}
        return out, grads

    out_c, grads_c = run(True)
    out_p, grads_p = run(False)
    torch.testing.assert_close(out_c.states, out_p.states, atol=2e-5, rtol=1e-4)
    torch.testing.assert_close(out_c.attention, out_p.attention, atol=2e-5, rtol=1e-4)
    for key in ("h", "c", "h_tilde"):
        torch.testing.assert_close(out_c.state[key], out_p.state[key], atol=2e-5, rtol=1e-4)
    for name in grads_p:
        torch.testing.assert_close(grads_c[name], grads_p[name], atol=2e-4, rtol=1e-3, msg=name)


def test_compiled_path_on_two_threads_equals_one_thread():
    """The compiled loops split the batch rows between torch's threads (from 8 rows on): on two threads
    they give what one thread gives, in float64, with padding, a span, a carried state and gradients
    into the carried tapes (dv is summed per row, so not even its rounding depends on the threads)."""
    if lstmn_kernels.kernels() is None:
        pytest.skip("the compiled LSTMN kernels are not available here (no compiler or ninja)")
    hidden, B = 21, 10  # 21 = 16 + 5: vector loops and their remainders
    reader = make_reader(layers=2, span=4, deep=True, input_size=7, hidden=hidden, backend="compiled")
    x1, m1 = batch([6, 3, 6, 1, 5, 6, 2, 6, 4, 6], seed=6, input_size=7)
    x2, m2 = batch([5, 5, 2, 0, 5, 3, 5, 1, 5, 4], T=5, seed=7, input_size=7)
    w = torch.randn(B, 5, hidden, generator=torch.Generator().manual_seed(8), dtype=torch.float64)

    def run(threads):
        torch.set_num_threads(threads)  # the autouse fixture restores the thread count afterwards
        assert torch.get_num_threads() == threads
        x = x1.clone().requires_grad_(True)
        first = reader(x, m1)
        leaves = {k: first.state[k].detach().requires_grad_(True) for k in ("h", "c", "h_tilde")}
        out = reader(x2, m2, state={**leaves, "slots": first.state["slots"]}, return_attention=True)
        loss = (out.states * w * m2.unsqueeze(-1)).sum() + (first.states * m1.unsqueeze(-1)).sum() \
            + out.state["c"].sum()
        grads = torch.autograd.grad(loss, [x, *leaves.values(), *reader.parameters()])
        return [out.states, out.attention, out.state["h"], out.state["c"], out.state["h_tilde"], *grads]

    one, two = run(1), run(2)
    names = ["states", "attention", "h", "c", "h_tilde", "d x", "d h", "d c", "d h_tilde"] + \
        [f"d {n}" for n, _ in reader.named_parameters()]
    for name, a, b in zip(names, one, two, strict=True):
        torch.testing.assert_close(b, a, atol=1e-10, rtol=0, msg=name)
        assert a.abs().sum() > 0, f"{name} is all zero"


def test_without_compiled_kernels_the_python_path_is_used(monkeypatch):
    """Where the kernels cannot be built (here: switched off as MEMREAD_NO_EXTENSIONS does) the reader
    runs its Python loops and gives the same values."""
    monkeypatch.setenv(lstmn_kernels.DISABLE_ENV, "1")
    monkeypatch.setattr(lstmn_kernels.kernels, "_tried", False)
    monkeypatch.setattr(lstmn_kernels.kernels, "_ops", None)
    assert lstmn_kernels.kernels() is None
    reader = make_reader(layers=2, span=2)  # backend "auto"
    x, mask = batch([5, 3])
    out = reader(x, mask)
    torch.testing.assert_close(out.states[mask], reference_of(reader)(x, mask).states[mask], atol=1e-6, rtol=0)
    reader.backend = "compiled"  # asked for explicitly: refused, saying why
    with pytest.raises(MemreadError, match=f"reader lstmn: backend = 'compiled' needs the LSTMN kernels, but "
                                           f"{lstmn_kernels.DISABLE_ENV} is set"):
        reader(x, mask)


def test_the_backend_option_picks_the_time_loop(monkeypatch):
    """``backend`` (config field, or set on the built reader): "auto" runs the compiled loops for CPU tensors
    where they can be built, "function" the Python loops, "compiled" the compiled ones; other names (the
    NSE's "autograd" too: the LSTMN has no such loop) are refused."""
    if lstmn_kernels.kernels() is None:
        pytest.skip("the compiled LSTMN kernels are not available here (no compiler or ninja)")
    taken = []  # the loop each layer call ran: compiled or not
    layer_forward = lstmn_autograd._lstmn_layer_forward
    monkeypatch.setattr(lstmn_autograd, "_lstmn_layer_forward",
                        lambda *args: (f := layer_forward(*args), taken.append(f["compiled"]))[0])
    x, mask = batch([5, 3])
    for backend, compiled in [("auto", True), ("function", False), ("compiled", True)]:
        reader = make_reader(layers=2, backend=backend)
        assert reader.backend == backend
        taken.clear()
        reader(x, mask)
        assert taken == [compiled, compiled], backend
        reader.backend = "function"  # settable on the built reader
        taken.clear()
        reader(x, mask)
        assert taken == [False, False]
    with pytest.raises(MemreadError, match="reader lstmn: backend must be one of 'auto', 'compiled', 'function'"):
        make_reader(backend="autograd")
    with pytest.raises(MemreadError, match="backend must be one of"):
        make_reader().backend = "cuda"


def test_zero_slot_takes_attention_and_changes_the_outputs_from_the_second_token(backend):
    """The option is not ignored: the same parameters with an empty tape and with the zero slot give
    different attention from the first token on and different outputs from the second.

    At t = 1 the zero slot is the only slot: it takes all the weight (with an empty tape there is no
    softmax at all) and, its value being 0, h~_1 = c~_1 = 0 either way, so h_1 is the same. At t = 2 the
    tape is (h_0 = 0, h_1): the zero slot takes a weight 0 < s_0 < 1 from h_1, so h~_2 = (1 - s_0) h_1
    instead of h_1, and every output from t = 2 on differs."""
    x, mask = batch([6, 3])
    empty = make_reader(layers=2, tape_start="empty", backend=backend)
    zero = make_reader(layers=2, tape_start="zero_slot", backend=backend)
    zero.load_state_dict(empty.state_dict())  # the option adds no parameter
    a, b = empty(x, mask, return_attention=True), zero(x, mask, return_attention=True)
    torch.testing.assert_close(b.states[:, 0], a.states[:, 0], atol=1e-12, rtol=0)  # t = 1: h~_1 = 0 either way
    assert bool(((b.states[:, 1] - a.states[:, 1]).abs().amax(-1) > 1e-4).all())  # t = 2 differs, every row
    assert bool(((b.states[0, 1:] - a.states[0, 1:]).abs().amax(-1) > 1e-6).all())  # and every later token
    torch.testing.assert_close(a.attention[:, 1, 0], torch.ones(2, dtype=torch.float64))  # h_1 gets it all
    s0 = 1 - b.attention[:, 1, 0]  # the zero slot's weight at t = 2
    assert bool(((s0 > 0.05) & (s0 < 0.95)).all()), s0
    # the layer's own record of the zero slot's weights: 1 at t = 1, s0 at t = 2 (none without the slot)
    layer = zero.layers[0]
    H0 = x.new_zeros(2, 0, H)
    W_gh, W_gx = layer.W.weight.split([H, E], dim=1)
    proj = torch.nn.functional.linear(x, torch.cat([layer.W_x.weight, W_gx]))
    W_f = torch.cat([W_gh, layer.W_h_tilde.weight])
    b_f = torch.cat([layer.W.bias, layer.W.bias.new_zeros(H)])
    with torch.no_grad():
        f = {ts: lstmn_autograd._lstmn_layer_forward(proj, H0, H0, H0, x.new_zeros(2, H), None, W_f, b_f,
                                                   layer.W_h.weight, layer.v, 0, False, ts == "zero_slot",
                                                   backend)
             for ts in TAPE_STARTS}
    assert f["empty"]["s0"] is None
    torch.testing.assert_close(f["zero_slot"]["s0"][:, 0], torch.ones(2, dtype=torch.float64))
    torch.testing.assert_close(f["zero_slot"]["s0"][:, 1], 1 - f["zero_slot"]["s"][:, 1, 0])
    assert bool((f["zero_slot"]["s0"][:, 1:] > 0).all())


def test_tape_start_defaults_to_the_papers_empty_tape():
    """A config (or a run directory's config.json) without the key reads as before the option: an empty
    tape, the paper's (6); an unknown value is refused."""
    from memread.config import experiment_from_dict

    assert LSTMNConfig().tape_start == "empty"
    cfg = experiment_from_dict({"data": {"name": "stories-text"}, "reader": {"name": "lstmn", "hidden": 8},
                                "head": {"name": "lm"}, "criterion": {"name": "lm_nll"}}, "test")
    assert cfg.reader.tape_start == "empty"
    with pytest.raises(MemreadError, match="tape_start"):
        experiment_from_dict({"data": {"name": "stories-text"}, "reader": {"name": "lstmn", "tape_start": "null"},
                              "head": {"name": "lm"}, "criterion": {"name": "lm_nll"}}, "test")
    with pytest.raises(MemreadError, match="tape_start"):
        build_reader(LSTMNConfig(tape_start="null"), 2)


def test_unbounded_tape_is_refused_for_streams():
    reader = build_reader(LSTMNConfig(hidden=2), 2)
    x = torch.randn(1, 3, 2)
    state = {"h": torch.zeros(1, 1, 4094, 2), "c": torch.zeros(1, 1, 4094, 2), "h_tilde": torch.zeros(1, 1, 2),
             "slots": torch.tensor([4094])}
    with pytest.raises(MemreadError, match="span"):
        reader(x, state=state)
    with pytest.raises(MemreadError, match="positive"):
        build_reader(LSTMNConfig(hidden=0), 2)


