"""Daniluk et al. (2017) readers: attention, key-value, key-value-predict, N-gram RNN, and their LSTM.

The window attention's compiled pass against its tensor-op path (float32, two threads, no kernels), the
``backend`` option, the carried window, size checks, and parameter matching recovering Table 2's sizes.
That the fast readers (one fused LSTM call, the window of every position at once) equal the library's
reference reading of equations (1)-(13) step by step (``impl = "reference"``) on both backends, with
windows of 1 to 9, document starts anywhere, padding, segments and gradients, is checked for every reader
by ``tests/test_reader_contract.py`` (its ``VARIANTS``), as is "a tiny run learns".
"""

from __future__ import annotations

import dataclasses
import tomllib
from pathlib import Path

import pytest
import torch

import memread.modules.window as window_module
from memread.errors import MemreadError
from memread.params import lm_parameters, match_hidden, match_lm_hidden
from memread.readers import READERS, build_reader
from memread.readers.attention_lm import AttentionLMConfig
from memread.readers.base import flatten_state, state_structure, unflatten_state
from memread.readers.doc_lstm import DocLSTMConfig
from memread.readers.key_value import KeyValueConfig
from memread.readers.key_value_predict import KeyValuePredictConfig
from memread.readers.ngram_rnn import NGramRNNConfig

REPO = Path(__file__).parent.parent
E, K = 5, 12


# ----------------------------------------------------------------------------- the reference


def reference_of(reader):
    """The same reader (same parameters) with ``impl = "reference"``: the library's reading of its
    equations one row and one token at a time (:meth:`DocumentLSTM.reference`,
    :func:`memread.modules.window.reference_attention`, :func:`memread.readers.ngram_rnn.reference_h_star`)."""
    ref = build_reader(dataclasses.replace(reader.cfg, impl="reference"), reader.input_size).double()
    ref.load_state_dict(reader.state_dict())
    return ref.train(reader.training)


# ----------------------------------------------------------------------------- the compiled window pass


def batch():
    """3 rows x 13 steps. Row 0: documents start at 0 and 6 (mid-segment); row 1: at 4 (a segment
    start) and 5 (a one-token document); row 2: one document, padding from step 9 on."""
    g = torch.Generator().manual_seed(1)
    x = torch.randn(3, 13, E, generator=g, dtype=torch.float64)
    mask = torch.ones(3, 13, dtype=torch.bool)
    mask[2, 9:] = False
    reset = torch.zeros(3, 13, dtype=torch.bool)
    reset[0, [0, 6]] = True
    reset[1, [4, 5]] = True
    reset[2, 0] = True
    return x, mask, reset


def _window_run(reader, x, mask, reset, w):
    """Two segments (the second continues the first's window), a loss on both -> outputs and gradients."""
    reader.zero_grad()
    first = reader(x[:, :6], mask[:, :6], None, reset=reset[:, :6])
    out = reader(x[:, 6:], mask[:, 6:], first.state, return_attention=True, reset=reset[:, 6:])
    loss = (out.states * w).sum() + first.states.sum()
    loss.backward()
    return [first.states, out.states, out.attention, *(p.grad.clone() for p in reader.parameters())]


@pytest.mark.parametrize("cfg", [AttentionLMConfig(hidden=37, window=4), KeyValuePredictConfig(hidden=3 * 37, window=5)],
                         ids=["attention", "kvp"])
def test_compiled_window_equals_tensor_ops_in_float32(cfg):
    """The compiled window attention against the tensor-op path in float32, at a width where its vector
    loops run their remainders (37 = 2 x 16 + 5), with documents, padding and a carried window."""
    if window_module.kernels() is None:
        pytest.skip("the compiled window kernels are not available here (no compiler or ninja)")
    torch.manual_seed(0)
    reader = build_reader(cfg, E)
    x, mask, reset = batch()
    x = x.float()
    w = torch.randn(3, 7, reader.output_size, generator=torch.Generator().manual_seed(2))
    names = ["first", "states", "attention"] + [n for n, _ in reader.named_parameters()]
    reader.backend = "compiled"
    compiled = _window_run(reader, x, mask, reset, w)
    reader.backend = "function"
    tensor_ops = _window_run(reader, x, mask, reset, w)
    for name, a, b in zip(names, compiled, tensor_ops, strict=True):
        torch.testing.assert_close(a, b, atol=2e-5, rtol=1e-4, msg=name)
        assert b.abs().sum() > 0, name


def test_compiled_window_on_two_threads_equals_one_thread():
    """The compiled pass splits positions (forward) and rows (backward) between threads and sums dw per
    row in order: two threads give what one gives, in float64, gradients included."""
    if window_module.kernels() is None:
        pytest.skip("the compiled window kernels are not available here (no compiler or ninja)")
    torch.manual_seed(0)
    reader = build_reader(KeyValuePredictConfig(hidden=3 * 21, window=5, backend="compiled"), E).double()
    g = torch.Generator().manual_seed(4)
    x = torch.randn(40, 13, E, generator=g, dtype=torch.float64)  # 40 x 7 positions: many threads' chunks
    mask = torch.ones(40, 13, dtype=torch.bool)
    mask[::3, 10:] = False
    reset = torch.zeros(40, 13, dtype=torch.bool)
    reset[::4, 3] = True
    w = torch.randn(40, 7, reader.output_size, generator=g, dtype=torch.float64)

    def run(threads):
        torch.set_num_threads(threads)  # the autouse fixture restores the thread count afterwards
        return _window_run(reader, x, mask, reset, w)

    one, two = run(1), run(2)
    for (name, _), a, b in zip([("first", 0), ("states", 0), ("attention", 0), *reader.named_parameters()], one, two,
                               strict=True):
        torch.testing.assert_close(b, a, atol=1e-12, rtol=0, msg=name)


def test_without_compiled_kernels_the_window_uses_tensor_ops(monkeypatch):
    """Where the kernels cannot be built (here: switched off as MEMREAD_NO_EXTENSIONS does) the readers
    run the tensor-op path and still equal the equations."""
    monkeypatch.setenv("MEMREAD_NO_EXTENSIONS", "1")
    monkeypatch.setattr(window_module.kernels, "_tried", False)
    monkeypatch.setattr(window_module.kernels, "_ops", None)
    assert window_module.kernels() is None
    torch.manual_seed(0)
    reader = build_reader(KeyValueConfig(hidden=K, window=3), E).double()
    x, mask, reset = batch()
    states = reader(x, mask, None, reset=reset).states
    expected = reference_of(reader)(x, mask, None, reset=reset).states
    assert torch.allclose(states[mask], expected[mask], atol=1e-12)
    reader.backend = "compiled"  # insists: an error, not the tensor ops
    with pytest.raises(MemreadError, match="reader kv: backend = 'compiled' needs the window attention kernels"):
        reader(x, mask, None, reset=reset)


@pytest.mark.parametrize("cfg", [AttentionLMConfig(hidden=K), KeyValueConfig(hidden=K), KeyValuePredictConfig(hidden=K)],
                         ids=lambda c: c.name)
def test_the_backend_is_one_option_checked_where_it_is_set(cfg):
    """The window readers' ``backend``: "auto" by default (today's choice), passed to the window attention,
    settable on the built reader, a name it does not offer refused where it is set, and "compiled" where the
    kernels cannot run (a tensor in bfloat16) an error rather than a silent fall-back."""
    assert cfg.backend == "auto"
    reader = build_reader(dataclasses.replace(cfg, backend="function"), E)
    assert reader.backend == reader.attention.backend == "function"
    reader.backend = "auto"
    assert reader.attention.backend == "auto"
    with pytest.raises(MemreadError, match=f"reader {cfg.name}: backend must be one of"):
        reader.backend = "autograd"
    reader = build_reader(dataclasses.replace(cfg, backend="compiled"), E).bfloat16()
    x = torch.randn(2, 4, E).bfloat16()
    with pytest.raises(MemreadError, match="backend = 'compiled' runs on CPU tensors in float32 or float64"):
        reader(x)


def test_carried_state_is_nested_tensors_that_checkpoint_and_reset_forgets_it():
    torch.manual_seed(0)
    reader = build_reader(AttentionLMConfig(hidden=K, window=3), E).double()
    x, mask, reset = batch()
    out = reader(x, mask, None, reset=reset)
    assert set(out.state) == {"h", "c", "window", "valid"} and out.state["window"].shape == (3, 3, K)
    again = unflatten_state(state_structure(out.state), flatten_state(out.state))
    assert all(torch.equal(again[k], out.state[k]) for k in out.state)
    # row 2 is padded from step 9: its window holds its last three real outputs, steps 6, 7, 8
    h = reader.lstm(x, mask, None, reset & mask)[0]
    assert torch.equal(out.state["window"][2], h[2, 6:9]) and bool(out.state["valid"][2].all())
    # row 1's last document started at step 5: steps 10, 11, 12 are all in it
    assert out.state["valid"][1].tolist() == [True, True, True]
    # a document that starts the next segment sees nothing of the previous one
    nxt = x[:, :2]
    fresh = reader(nxt, None, None).states
    cont = reader(nxt, None, out.state, reset=torch.ones(3, 2, dtype=torch.bool) & torch.tensor([True, False])).states
    assert torch.allclose(cont[:, 0], fresh[:, 0], atol=1e-12)


def test_wrong_sizes_are_refused_with_the_key():
    from memread.errors import MemreadError

    with pytest.raises(MemreadError, match="reader.hidden must be a multiple of 3 for kvp"):
        build_reader(KeyValuePredictConfig(hidden=100), E)
    with pytest.raises(MemreadError, match="multiple of n - 1 = 3"):
        build_reader(NGramRNNConfig(hidden=100, n=4), E)
    with pytest.raises(MemreadError, match="reader.window must be >= 1"):
        build_reader(AttentionLMConfig(window=0), E)


# ----------------------------------------------------------------------------- parameter matching


def test_parameter_matching_recovers_the_paper_sizes():
    """Table 2 (w = 300, 77k words, LSTM k = 300: 23.9M parameters without, 47.0M with embeddings)."""
    V, w = 77_000, 300
    base = DocLSTMConfig(hidden=300)
    total = lm_parameters(base, V, w)
    assert round(total / 1e6, 1) == 47.0 and round((total - V * w) / 1e6, 1) == 23.9
    assert match_lm_hidden(AttentionLMConfig(window=10), V, w, base).hidden == 296  # Table 2c
    assert match_lm_hidden(KeyValueConfig(window=10), V, w, base).hidden == 560  # Table 2c
    # Table 2b's N-gram sizes are those of equation (13) with one more part (N parts from N steps):
    assert [match_lm_hidden(NGramRNNConfig(n=n + 1), V, w, base).hidden for n in (2, 3, 4, 5)] == [564, 786, 968, 1120]
    # ... and of equation (13) as written, N-1 parts: 968 is not a multiple of 3
    assert [match_lm_hidden(NGramRNNConfig(n=n), V, w, base).hidden for n in (2, 3, 4, 5)] == [299, 564, 786, 968]
    # Key-value-predict: Table 2c's k = 834 (three parts of 278) has 25.6M parameters without
    # embeddings, not 23.9M; at 23.9M the paper's own architecture has k = 786.
    assert match_lm_hidden(KeyValuePredictConfig(window=5), V, w, base).hidden == 786
    assert round((lm_parameters(KeyValuePredictConfig(hidden=834), V, w) - V * w) / 1e6, 1) == 25.6


def test_matching_is_nearest_on_the_reader_grid():
    m = match_hidden(KeyValuePredictConfig(), 10_000, count=lambda c: c.hidden ** 2)
    assert m.hidden % 3 == 0 and m.hidden == 99  # 99^2 = 9801 is nearer 10000 than 102^2 = 10404
    assert match_hidden(NGramRNNConfig(n=5), 400, count=lambda c: c.hidden).hidden == 400


def test_ptb_configs_have_matched_hidden_sizes():
    """configs/ptb/daniluk-*.toml: each reader's hidden is the helper's for the PTB vocabulary."""
    V = 10_001  # PTB's 10,000 words (with <unk> and <eos>) + <pad>; checked on real data in test_realdata_documents
    files = sorted((REPO / "configs" / "ptb").glob("daniluk-*.toml"))
    assert len(files) == 23  # 17 of the paper's own models, 6 of its baselines (RM windows, HORNNs)
    base = tomllib.loads((REPO / "configs" / "ptb" / "daniluk-lstm.toml").read_text())
    base_cfg = DocLSTMConfig(hidden=base["reader"]["hidden"])
    for f in files:
        raw = tomllib.loads(f.read_text())
        same = ("data", "head", "criterion", "train")
        assert all(raw.get(k) == base.get(k) for k in same), f.name  # only the reader differs
        r = dict(raw["reader"])
        cfg = READERS[r["name"]].Config(**r)
        if r["name"] != "doc_lstm":
            m = match_lm_hidden(cfg, V, raw["head"]["emb"], base_cfg)
            assert cfg.hidden == m.hidden, (f.name, cfg.hidden, m.hidden)
            assert abs(m.difference) / m.target < 0.01


