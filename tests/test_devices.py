"""Every reader, head and criterion on any device and under autocast (issue 20).

**No tensor on the wrong device.** There is no GPU here, so a factory call that forgets its input's
device (``torch.zeros(B, H)`` instead of ``x.new_zeros(B, H)``) is caught on the CPU: the forward
pass, the criterion and the backward pass run with the *meta* device as the default device, so such
a call makes a meta tensor, and mixing it with the CPU inputs raises ("Tensor on device meta is not
on the expected device cpu"); results and statistics are checked to be on the CPU too (a tensor that
is only stored, like a criterion's count, mixes with nothing). ``with torch.device("meta")`` covers
the forward pass and the criterion but not the Python backward passes of custom autograd Functions:
the autograd engine calls them without the torch-function mode stack (checked below), so
:func:`factories_on_meta` also runs the ``backward`` of every ``torch.autograd.Function`` defined in
memread inside the same context (they are found by subclass, so a new one is covered). Autograd's own
backward formulas are C++ and create nothing from Python. Each reader runs as a plain module (two
segments with the state carried where it carries state, resets, shared memories, attention and cell
tapes asked for) on its fast path, with its compiled loops off (``backend = "function"``: the LSTMN
and the NSE then run their Python loops, the window readers their tensor ops) and on its
``impl = "reference"`` path; and inside the LM,
pointer-cloze and classifier heads; every head runs with its default criterion (the setups of
``tests/test_head_contract.py``), the pair head with each encoder, and the translation heads also
decode (greedy and beam search). Each gives the same loss and gradients as outside the context.

**Autocast.** Training runs the model and the criterion under ``torch.autocast(device_type, dtype)``.
The custom autograd Functions and recurrences run in float32 there
(:mod:`memread.modules.precision`). For every reader inside an LM head, the IAA and AS cloze heads,
the pair head with each encoder, the translation heads and the hierarchical document head (and the
other heads of the contract), two Adam steps under ``torch.autocast("cpu", dtype=torch.bfloat16)``
give finite losses within ``BF16_RTOL`` of the same two steps in float32 from the same seed. The
compiled CPU loops still run under autocast (their inputs are cast to float32). CPU float16 autocast
is checked on the models without torch's fused LSTM (whose oneDNN kernel has no float16 on the CPU).
"""

from __future__ import annotations

import dataclasses
import math
import sys
from contextlib import contextmanager

import pytest
import torch
from torch import Tensor, nn

import memread.heads  # noqa: F401 (every head, hence every reader and module, is imported)
import memread.modules.window as window
import memread.readers._lstmn_kernels as lstmn_kernels
from memread.decoding import decode
from memread.modules.dropout import Dropout as RandDropout
from memread.modules.precision import (autocast, autocast_device_type, autocast_enabled, in_float32,
                                       to_float32)
from memread.readers import READERS, build_reader
from memread.readers.base import detach_state
from memread.tasks import Task
from test_head_contract import CASES, EXPERIMENTS, experiment
from test_reader_contract import E, SMALL, batch, config, has_reference, read, shared_memories

NAMES = sorted(READERS)
BF16_RTOL = 5e-2  # |loss(bf16 autocast) - loss(float32)| <= BF16_RTOL * |loss(float32)|, both Adam steps
F16_RTOL = 5e-2

# ----------------------------------------------------------------------------- helpers


def memread_functions() -> list[type]:
    """Every ``torch.autograd.Function`` subclass defined in memread (the modules are imported above)."""
    found, todo = [], list(torch.autograd.Function.__subclasses__())
    while todo:
        cls = todo.pop()
        todo.extend(cls.__subclasses__())
        if cls.__module__.startswith("memread.") and "backward" in cls.__dict__:
            found.append(cls)
    return sorted(found, key=lambda c: (c.__module__, c.__qualname__))


@contextmanager
def factories_on_meta(monkeypatch):
    """Factory calls without a device make meta tensors: in the forward pass and the criterion (the
    default device), and in the backward passes of memread's autograd Functions (wrapped here, since
    the autograd engine does not carry the default device into them)."""
    with monkeypatch.context() as m:
        for cls in memread_functions():
            def backward(ctx, *grads, _backward=cls.backward):
                with torch.device("meta"):
                    return _backward(ctx, *grads)

            m.setattr(cls, "backward", staticmethod(backward))
        with torch.device("meta"):
            yield


@contextmanager
def _nothing():
    yield


def tensors_in(obj, path="out"):
    """(path, tensor) for every tensor in a nested output (dataclasses, dicts, lists, tuples)."""
    if isinstance(obj, Tensor):
        yield path, obj
    elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        for f in dataclasses.fields(obj):
            yield from tensors_in(getattr(obj, f.name), f"{path}.{f.name}")
    elif isinstance(obj, dict):
        for k, v in obj.items():
            yield from tensors_in(v, f"{path}.{k}")
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            yield from tensors_in(v, f"{path}.{i}")


def assert_on_cpu(*objs):
    for obj in objs:
        wrong = [p for p, t in tensors_in(obj) if t.device.type != "cpu"]
        assert not wrong, f"tensors not on the inputs' device: {wrong}"


def no_dropout(model: nn.Module) -> nn.Module:
    """Dropout off (p = 0) but the model in training mode, so that float32 and autocast runs compare."""
    for m in model.modules():
        if isinstance(m, (nn.Dropout, RandDropout)):
            m.p = 0.0
        if isinstance(m, nn.RNNBase):
            m.dropout = 0.0
    return model


def test_the_engine_does_not_carry_the_default_device_into_backward():
    """Why :func:`factories_on_meta` wraps the backward passes: without it, a Python backward creates its
    tensors on the CPU although the backward pass is started inside ``torch.device("meta")``."""
    seen = []

    class Probe(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            seen.append(torch.zeros(1).device.type)
            return x * 2

        @staticmethod
        def backward(ctx, g):
            seen.append(torch.zeros(1).device.type)
            return g * 2

    x = torch.ones(2, requires_grad=True)
    with torch.device("meta"):
        Probe.apply(x).sum().backward()
    assert seen[0] == "meta"
    if seen[1] == "meta":
        pytest.skip("this torch carries the default device into backward passes: the wrapping is redundant here")
    assert seen[1] == "cpu"


def test_every_memread_function_is_wrapped(monkeypatch):
    functions = memread_functions()
    assert {"memread.readers._lstmn_autograd._LSTMNLayerFunction", "memread.readers._nse_autograd._NSELoop",
            "memread.heads.decoders.lstmn_fusion._TapeRead", "memread.heads.decoders.lstmn_fusion._TapeWrite",
            "memread.heads.decoders.lstmn_fusion._TapeView", "memread.modules.window._BandedAttention",
            "memread.modules.memory_reads._Collect", "memread.modules.memory_reads._Scores",
            "memread.modules.memory_reads._Glimpse", "memread.modules.loop_linears._Collect",
            "memread.modules.loop_linears._Apply"} <= {f"{c.__module__}.{c.__qualname__}" for c in functions}
    before = {cls: cls.__dict__["backward"] for cls in functions}
    with factories_on_meta(monkeypatch):
        assert all(cls.__dict__["backward"] is not before[cls] for cls in functions)
    assert all(cls.__dict__["backward"] is before[cls] for cls in functions)  # restored as they were


# ----------------------------------------------------------------------------- the paths of each reader

# readers whose fast path has a fall-back chosen by their ``backend`` option ("function": the Python loops
# of the LSTMN and the NSE, the tensor ops of the window attention) ...
BACKENDS = {"lstmn", "nse", "attention", "kv", "kvp"}
# ... and the heads with one (the IAA's attention reads: "function" = their composition)
HEAD_BACKENDS = {"iaa"}


def test_every_backend_is_exercised():
    """Every reader and head config with a ``backend`` option (a compiled path and its fall-back) runs both
    here, and no memread module keeps a module-global switch for it."""
    assert BACKENDS == {n for n in NAMES if "backend" in {f.name for f in dataclasses.fields(READERS[n].Config)}}
    from memread.heads.cloze import ClozeHeadConfig

    heads = {c.__dataclass_fields__["name"].default for c in ClozeHeadConfig.__args__
             if "backend" in c.__dataclass_fields__}
    assert HEAD_BACKENDS == heads
    switches = {m.__name__ for m in list(sys.modules.values()) if getattr(m, "__name__", "").startswith("memread.")
                and any(hasattr(m, flag) for flag in ("USE_COMPILED", "USE_FUNCTION"))}
    assert not switches, switches


def reader_paths(name: str) -> list[str]:
    fallback = name in BACKENDS
    return ["fast"] + (["fallback"] if fallback else []) + (["reference"] if has_reference(name) else [])


READER_PATHS = [(n, p) for n in NAMES for p in reader_paths(n)]


def make_reader(name: str, path: str, dropout: float = 0.25, **extra):
    """The reader's small contract config, on ``path``, in training mode; ``dropout`` where it has one."""
    if path == "fallback":
        extra["backend"] = "function"
    if path == "reference":
        extra["impl"] = "reference"
    torch.manual_seed(0)
    fields = {f.name for f in dataclasses.fields(READERS[name].Config)}
    if "dropout" in fields:  # the training-mode paths (dropout masks, drawn alike in both runs from one seed)
        extra["dropout"] = dropout
    return build_reader(config(name, **extra), E).train()


def segment_inputs(name: str, reader) -> dict:
    """Two segments of three rows with padding, a document start and (NSE) shared memories, made on the
    CPU outside any context."""
    x1, m1 = batch([6, 4, 1])
    x2, m2 = batch([5, 5, 2], seed=3)
    reset = torch.zeros(3, 6, dtype=torch.bool)
    reset[0, 3] = True
    w = torch.randn(3, 6, reader.output_size, generator=torch.Generator().manual_seed(5))
    return dict(x1=x1.requires_grad_(True), m1=m1, x2=x2, m2=m2, reset=reset, w=w,
                shared=shared_memories(name, reader, 3))


def read_segments(name: str, reader, inp: dict) -> tuple[Tensor, list]:
    """The inputs read as one segment, or as two with the state carried (not detached) where the reader
    carries state, asking for attention and cell tapes; a scalar loss over everything differentiable
    that comes out (states, memory, carried state)."""
    spec = READERS[name]
    torch.manual_seed(11)  # dropout masks
    kw = {"return_attention": True, **({"return_cells": True} if spec.memory_tape else {})}
    outs = [read(name, reader, inp["x1"], inp["m1"], reset=inp["reset"], shared=inp["shared"], **kw)]
    if spec.carries_state:
        outs.append(read(name, reader, inp["x2"], inp["m2"], outs[0].state, reset=inp["reset"][:, :5], **kw))
    loss = sum((out.states * inp["w"][:, : out.states.size(1)]).sum() for out in outs)
    for out in outs:
        for _, t in tensors_in((out.memory, out.state)):
            if t.is_floating_point() and t.requires_grad:
                loss = loss + t.square().mean()
    return loss, outs


@pytest.mark.parametrize("name,path", READER_PATHS, ids=[f"{n}-{p}" for n, p in READER_PATHS])
def test_reader_creates_nothing_on_another_device(name, path, monkeypatch):
    reader = make_reader(name, path)
    results = []
    for on_meta in (False, True):
        reader.zero_grad(set_to_none=True)
        inp = segment_inputs(name, reader)
        x = inp["x1"]
        with factories_on_meta(monkeypatch) if on_meta else _nothing():
            loss, outs = read_segments(name, reader, inp)
            loss.backward()
        assert_on_cpu(outs, loss, x.grad, [p.grad for p in reader.parameters()])
        results.append((loss.detach(), x.grad, [p.grad for p in reader.parameters()]))
    (loss_a, dx_a, grads_a), (loss_b, dx_b, grads_b) = results
    assert torch.equal(loss_a, loss_b), (float(loss_a), float(loss_b))
    torch.testing.assert_close(dx_b, dx_a, rtol=0, atol=0)
    for (pname, _), ga, gb in zip(reader.named_parameters(), grads_a, grads_b):
        torch.testing.assert_close(gb, ga, rtol=0, atol=0, msg=f"{name}: d {pname}")


# ----------------------------------------------------------------------------- heads and criteria

_PIPELINES: dict[str, object] = {}


def head_task(fixtures, head: str, data: dict, reader: dict, keys: dict) -> Task:
    """The experiment's task; the data pipeline is built once per data config for the whole file."""
    cfg = experiment(data, reader, keys, head)
    key = repr(sorted(data.items()))
    if key not in _PIPELINES:
        _PIPELINES[key] = Task(cfg, fixtures).data
    return Task(cfg, fixtures, data=_PIPELINES[key])


def reader_dict(name: str) -> dict:
    small = dict(SMALL[name])
    if name == "nse":
        small["shared"] = 0  # a head's only NSE has no second memory
    return {"name": name, **small}


LM_DATA, CLOZE_DATA, SST_DATA, SNLI_DATA = (EXPERIMENTS[h][0] for h in ("lm", "pointer", "mlp", "pair"))
# (head, data, reader, head keys): every reader inside the LM, pointer-cloze and classifier heads, every
# head with its default criterion as the head contract builds it, the pair head with each encoder
# (a language model takes only the readers that read left to right: READERS[name].carries_state)
READER_HEADS = [(h, d, reader_dict(n), k) for n in NAMES
                for h, d, k in (("lm", LM_DATA, {"emb": 6}), ("pointer", CLOZE_DATA, {"emb": 6}),
                                ("mlp", SST_DATA, {"emb": 6, "mlp": 8}))
                if h != "lm" or READERS[n].carries_state]
PAIR_ENCODERS = {"siamese": "nse", "two": "lstmn", "attention": "lstm", "mma": "nse", "mma_attention": "nse",
                 "shallow_fusion": "lstmn", "deep_fusion": "lstmn"}
PAIRS = [("pair", SNLI_DATA, reader_dict(r), {"emb": 6, "mlp": 8, "encoder": e}) for e, r in PAIR_ENCODERS.items()]


def unique(cases: list) -> list:
    """Cases without repeats (the contract's cases include an LM over an LSTM and a pair head over MMA-NSE)."""
    seen, out = set(), []
    for c in cases:
        if case_id(c) not in seen:
            seen.add(case_id(c))
            out.append(c)
    return out


def case_id(case) -> str:
    head, data, reader, keys = case
    return "-".join([head, data["name"], reader["name"]] + ([keys["encoder"]] if "encoder" in keys else []))


HEAD_CASES = unique(READER_HEADS + CASES + PAIRS)


def test_the_pair_cases_cover_every_encoder():
    from memread.heads.pair import Encoder

    assert set(PAIR_ENCODERS) == set(Encoder.__args__)


def some_batches(task: Task, n: int) -> list[dict]:
    batches = task.batches("train", 4, 0, 1)
    return [batches[i] for i in range(min(n, len(batches)))]


def forward_loss(model, criterion, batches, carries: bool):
    """Forward and criterion over the batches in turn, the model's state carried (detached) as training
    does; the summed loss and what came out."""
    state, total, outs = None, 0.0, []
    for b in batches:
        out = model(b, state if carries else None)
        loss = criterion(out, b)
        total = total + loss.value
        state = detach_state(out.state)
        outs.append((out, loss.stats))
    return total, outs


# the heads with a compiled path run a second time with it off (``backend = "function"``)
HEAD_PATHS = [(c, path) for c in HEAD_CASES for path in ("fast", *(("fallback",) if c[0] in HEAD_BACKENDS else ()))]


@pytest.mark.parametrize("case,path", HEAD_PATHS, ids=[f"{case_id(c)}-{p}" for c, p in HEAD_PATHS])
def test_head_and_criterion_create_nothing_on_another_device(fixtures, case, path, monkeypatch):
    head, data, reader, keys = case
    if path == "fallback":
        keys = {**keys, "backend": "function"}
    task = head_task(fixtures, head, data, reader, keys)
    model = task.build_model()
    criterion = task.build_criterion(model)
    batches = some_batches(task, 2)
    carries = head == "lm" and READERS[reader["name"]].carries_state
    results = []
    for on_meta in (False, True):
        model.train()
        model.zero_grad(set_to_none=True)
        torch.manual_seed(3)  # the same dropout masks in both runs
        with factories_on_meta(monkeypatch) if on_meta else _nothing():
            loss, outs = forward_loss(model, criterion, batches, carries)
            loss.backward()
            model.eval()
            with torch.no_grad():  # the evaluation paths (no tapes kept for a backward pass)
                eval_loss, eval_outs = forward_loss(model, criterion, batches, carries)
            hyps = None
            if hasattr(model, "start"):  # translation: decoding, greedy and beam search
                b = batches[0]
                hyps = [decode(model, b["src"], b["src_mask"], beam=k, max_len=4) for k in (1, 2)]
        grads = {n: p.grad for n, p in model.named_parameters() if p.grad is not None}
        assert_on_cpu(loss, outs, eval_loss, eval_outs, grads)
        results.append((loss.detach(), eval_loss, grads, hyps))
    (loss_a, eval_a, grads_a, hyps_a), (loss_b, eval_b, grads_b, hyps_b) = results
    assert torch.equal(loss_a, loss_b) and torch.equal(eval_a, eval_b)
    assert grads_a.keys() == grads_b.keys()
    for n in grads_a:
        torch.testing.assert_close(grads_b[n], grads_a[n], rtol=0, atol=0, msg=n)
    assert hyps_a == hyps_b


# ----------------------------------------------------------------------------- autocast

# every reader under autocast: inside a language model where it reads left to right, else inside a classifier
LM_READERS = [("lm", LM_DATA, reader_dict(n), {"emb": 6}) if READERS[n].carries_state else
              ("mlp", SST_DATA, reader_dict(n), {"emb": 6, "mlp": 8}) for n in NAMES]
AUTOCAST_CASES = unique(LM_READERS + CASES + PAIRS)


def train_two_steps(fixtures, case, dtype: torch.dtype | None) -> list[float]:
    """Two Adam steps from the same seed, the model and the criterion under CPU autocast to ``dtype``
    (None: float32), the backward pass and the step outside it, as the training loop does."""
    head, data, reader, keys = case
    task = head_task(fixtures, head, data, reader, keys)
    model = no_dropout(task.build_model(seed=0)).train()
    criterion = task.build_criterion(model)
    optimizer = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    carries = head == "lm" and READERS[reader["name"]].carries_state
    batches = some_batches(task, 2)
    seen = []  # whether each forward pass ran under autocast (the model's own pre-hook)
    hook = model.register_forward_pre_hook(lambda m, i: seen.append(autocast_enabled("cpu")))
    state, losses = None, []
    for b in batches * (2 // len(batches)):
        with autocast("cpu", dtype):  # as the training loop enters it
            out = model(b, state if carries else None)
            loss = criterion(out, b)
        # every criterion's loss and sums in float32 (cross-entropy is float32 under autocast; cloze casts)
        assert loss.value.dtype == torch.float32 and all(v.dtype != dtype for v in loss.stats.values())
        optimizer.zero_grad(set_to_none=True)
        loss.value.backward()
        assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)
        optimizer.step()
        state = detach_state(out.state)
        losses.append(float(loss.value.detach()))
    hook.remove()
    assert seen == [dtype is not None] * 2
    return losses


@pytest.mark.parametrize("case", AUTOCAST_CASES, ids=[case_id(c) for c in AUTOCAST_CASES])
def test_two_training_steps_under_bf16_autocast(fixtures, case):
    full = train_two_steps(fixtures, case, None)
    low = train_two_steps(fixtures, case, torch.bfloat16)
    assert all(math.isfinite(v) for v in full + low)
    gaps = tuple(abs(a - b) / abs(a) for a, b in zip(full, low))
    print(f"{case_id(case)}: float32 {full}, bf16 {low}, relative gaps {gaps}")
    assert max(gaps) <= BF16_RTOL, (full, low)


F16_CASES = [c for c in AUTOCAST_CASES if c[2]["name"] == "lstmn" and c[0] in ("lm", "lstmn_shallow", "lstmn_deep")]


@pytest.mark.parametrize("case", F16_CASES, ids=[case_id(c) for c in F16_CASES])
def test_two_training_steps_under_float16_autocast(fixtures, case):
    """CPU float16 autocast on the models without torch's fused LSTM (its oneDNN CPU kernel refuses float16)."""
    full = train_two_steps(fixtures, case, None)
    low = train_two_steps(fixtures, case, torch.float16)
    assert all(math.isfinite(v) for v in low)
    assert max(abs(a - b) / abs(a) for a, b in zip(full, low)) <= F16_RTOL, (full, low)


@pytest.mark.parametrize("name,path", READER_PATHS, ids=[f"{n}-{p}" for n, p in READER_PATHS])
def test_reader_under_bf16_autocast(name, path):
    """Each path of each reader, alone: forward and backward under autocast, near its float32 values."""
    reader = make_reader(name, path, dropout=0.0)
    inp = segment_inputs(name, reader)
    full, outs_full = read_segments(name, reader, inp)
    full.backward()
    g_full = [p.grad.clone() for p in reader.parameters()]
    reader.zero_grad(set_to_none=True)
    with autocast("cpu", torch.bfloat16):
        low, outs_low = read_segments(name, reader, inp)
    low.backward()
    low, full = float(low.detach()), float(full.detach())
    assert math.isfinite(low) and abs(low - full) <= BF16_RTOL * abs(full)
    for a, b in zip(outs_full, outs_low):
        torch.testing.assert_close(b.states.float(), a.states, rtol=0, atol=0.05)
    for (pname, _), ga, p in zip(reader.named_parameters(), g_full, reader.parameters()):
        assert p.grad.dtype == torch.float32 and torch.isfinite(p.grad).all(), pname


@pytest.mark.parametrize("name", ["lstmn", "attention"])
def test_the_compiled_loops_run_under_autocast(name, monkeypatch):
    """Under CPU autocast the recurrences get float32 inputs, so the compiled loops still run."""
    kernels = lstmn_kernels.kernels if name == "lstmn" else window.kernels
    if kernels() is None:
        pytest.skip(f"the compiled loops of {name} are not available here")
    calls = []
    real = kernels.for_backend

    def spy(like, backend, who):
        ops = real(like, backend, who)
        calls.append((like.dtype, autocast_enabled("cpu"), ops is not None))
        return ops

    monkeypatch.setattr(kernels, "for_backend", spy)
    reader = make_reader(name, "fast", dropout=0.0)
    inp = segment_inputs(name, reader)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss, _ = read_segments(name, reader, inp)
    loss.backward()
    assert calls and all(c == (torch.float32, False, True) for c in calls), calls


# ----------------------------------------------------------------------------- the helper itself


def test_in_float32_only_acts_under_autocast():
    x = torch.randn(3, dtype=torch.bfloat16)
    seen = []

    def fn(a, b, c):
        seen.append((a.dtype, b[0].dtype, c["m"].dtype, autocast_enabled("cpu")))
        return a

    in_float32(fn, x, [x], c={"m": torch.ones(2, dtype=torch.bool)})
    assert seen[-1] == (torch.bfloat16, torch.bfloat16, torch.bool, False)  # no autocast: as given
    assert autocast_device_type(x) is None
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert autocast_device_type("not a tensor", [x]) == "cpu"
        out = in_float32(fn, x, [x], c={"m": torch.ones(2, dtype=torch.bool)})
        assert autocast_enabled("cpu")  # switched back on after the call
    assert seen[-1] == (torch.float32, torch.float32, torch.bool, False) and out.dtype == torch.float32
    d = torch.randn(2, dtype=torch.float64)
    assert to_float32((d, 1, "s")) == (d, 1, "s")  # float64 stays, as autocast leaves it


def test_autocast_turns_onednn_off_only_where_its_fused_lstm_refuses_the_dtype(monkeypatch):
    """On an AVX2-only CPU (session 21's AMD EPYC) oneDNN will not build its bfloat16 LSTM, and every model with
    an ``nn.LSTM`` failed under bf16 autocast: memread's autocast then turns oneDNN off for its extent (ATen's own
    LSTM runs) and back on after; where the kernel runs, or off the CPU, or without autocast, nothing changes."""
    from memread.modules import precision

    lstm = torch.nn.LSTM(3, 4, batch_first=True)
    x = torch.randn(2, 5, 3)
    for runs in (True, False):
        monkeypatch.setitem(precision._ONEDNN_RNN, torch.bfloat16, runs)
        assert torch.backends.mkldnn.enabled
        with autocast("cpu", torch.bfloat16):
            assert torch.backends.mkldnn.enabled == runs and autocast_enabled("cpu")
            if not runs:  # what failed here: it runs, forward and backward
                out, _ = lstm(x)
                out.float().sum().backward()
        assert torch.backends.mkldnn.enabled and not autocast_enabled("cpu")
    with autocast("cpu", None):
        assert torch.backends.mkldnn.enabled and not autocast_enabled("cpu")
    with pytest.raises(ValueError):  # an error inside still restores the flag
        with autocast("cpu", torch.bfloat16):
            raise ValueError
    assert torch.backends.mkldnn.enabled
    # this machine's answer, tried for real: where the kernel refuses, the probe says so rather than raising
    monkeypatch.delitem(precision._ONEDNN_RNN, torch.bfloat16)
    answer = precision.onednn_rnn_runs(torch.bfloat16)
    assert isinstance(answer, bool)
    # asked first where evaluation asks it, under no_grad or inference_mode: the probe's backward still has its
    # graph (an LSTM that runs everywhere stands in, so that a probe broken by no_grad would answer False here too)
    class Runs(torch.nn.Module):
        def __init__(self, *args, **kwargs):
            super().__init__()
            self.w = torch.nn.Parameter(torch.ones(1))

        def forward(self, x):
            return x * self.w, None

    monkeypatch.setattr(torch.nn, "LSTM", Runs)
    for context in (torch.no_grad, torch.inference_mode):
        del precision._ONEDNN_RNN[torch.bfloat16]
        with context():
            assert precision.onednn_rnn_runs(torch.bfloat16)
