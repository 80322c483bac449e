"""The deep LSTM baselines of the LSTMN paper's Table 1 (issue 22): the gated-feedback LSTM (gLSTM,
Chung et al. 2015, ``gflstm``) and the depth-gated LSTM (dLSTM, Yao et al. 2015, ``dglstm``); the
stacked LSTM (sLSTM) is the ``lstm`` reader with three layers.

For both readers, in float64: the fast path equals the equation-by-equation reference from a non-zero
state over two BPTT segments in which a row may have no token, gradients included (1e-10); one layer is
torch's ``nn.LSTM`` where the papers make it one (GF-LSTM with its global reset gates at 1/2 and the
candidate's recurrent weights halved accordingly; DGLSTM with its peepholes at zero, and not without); the
depth gate adds the lower cell; an empty segment keeps the state. The PTB configs of Table 1 share the
LSTMN rows' recipe, and the token bench and the parameter matching build both readers. Gradients reaching
every parameter, padding, segments, and a tiny run that learns are checked for every reader by
``tests/test_reader_contract.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn

from memread.readers import READERS, build_reader

E, H, L = 4, 5, 3
NAMES = ["gflstm", "dglstm"]
ATOL = 1e-10
REPO = Path(__file__).parent.parent


@pytest.fixture(autouse=True)
def float64():
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(old)


def make(name: str, seed: int = 0, input_size: int = E, **kw):
    torch.manual_seed(seed)
    cfg = READERS[name].Config(**{"hidden": H, "layers": L, **kw})
    return build_reader(cfg, input_size).eval()


def batch(lengths, T=None, seed=1, E=E):
    g = torch.Generator().manual_seed(seed)
    T = T or max(lengths)
    x = torch.randn(len(lengths), T, E, generator=g)
    mask = torch.arange(T).unsqueeze(0) < torch.tensor(lengths).unsqueeze(1)
    return x, mask


def random_state(B: int, seed: int = 4) -> dict:
    g = torch.Generator().manual_seed(seed)
    return {"h": torch.randn(L, B, H, generator=g) * 0.5, "c": torch.randn(L, B, H, generator=g)}


# ----------------------------------------------------------------------------- fast == reference


@pytest.mark.parametrize("name", NAMES)
def test_fast_equals_the_reference_with_padding_and_two_segments(name):
    """Two BPTT segments, rows of different lengths in each (a row with no token in the second), a
    non-zero initial state; the state is carried (not detached, so gradients flow through it)."""
    fast, ref = make(name), make(name, impl="reference")
    for (pname, p), (_, q) in zip(fast.named_parameters(), ref.named_parameters(), strict=True):
        assert torch.equal(p, q), pname
    x1, m1 = batch([6, 6, 3, 6])
    x2, m2 = batch([5, 2, 0, 4], T=5, seed=2)
    x1[~m1] = 7.0  # garbage in the padding
    x2[~m2] = -7.0
    w = torch.randn(4, 11, H, generator=torch.Generator().manual_seed(3))
    results = []
    for reader in (fast, ref):
        state0 = random_state(4)
        first = reader(x1, m1, state0)
        second = reader(x2, m2, first.state)
        loss = (first.states * w[:, :6] * m1.unsqueeze(-1)).sum() + (second.states * w[:, 6:] * m2.unsqueeze(-1)).sum()
        loss = loss + second.state["h"].square().sum() + second.state["c"].sum()
        results.append((first, second, torch.autograd.grad(loss, list(reader.parameters()))))
    (a1, a2, grads_a), (b1, b2, grads_b) = results
    torch.testing.assert_close(a1.states[m1], b1.states[m1], atol=ATOL, rtol=0)
    torch.testing.assert_close(a2.states[m2], b2.states[m2], atol=ATOL, rtol=0)
    for key in ("h", "c"):
        torch.testing.assert_close(a1.state[key], b1.state[key], atol=ATOL, rtol=0)
        torch.testing.assert_close(a2.state[key], b2.state[key], atol=ATOL, rtol=0)
    # the row with no token in the second segment kept the state it came with
    torch.testing.assert_close(a2.state["h"][:, 2], a1.state["h"][:, 2], atol=0, rtol=0)
    for (pname, _), ga, gb in zip(fast.named_parameters(), grads_a, grads_b):
        torch.testing.assert_close(ga, gb, atol=ATOL, rtol=0, msg=f"{name}: d {pname}")


# ----------------------------------------------------------------------------- one layer and nn.LSTM


def _torch_lstm(W_ih, W_hh, b, input_size: int) -> nn.LSTM:
    """A one-layer ``nn.LSTM`` (gate order i, f, g, o) with these weights, its ``bias_hh`` zero."""
    lstm = nn.LSTM(input_size, H, batch_first=True)
    with torch.no_grad():
        lstm.weight_ih_l0.copy_(W_ih)
        lstm.weight_hh_l0.copy_(W_hh)
        lstm.bias_ih_l0.copy_(b)
        lstm.bias_hh_l0.zero_()
    return lstm


def _against_torch(reader, lstm):
    x, _ = batch([7, 7])
    state = random_state(2)
    h0, c0 = state["h"][:1], state["c"][:1]
    ours = reader(x, None, {"h": h0, "c": c0})
    theirs, (h_n, c_n) = lstm(x, (h0, c0))
    return ours, theirs, h_n, c_n


def test_one_layer_gflstm_with_its_gates_at_one_half_is_torchs_lstm():
    """With one layer the GF-LSTM keeps one global reset gate g^{1->1} on the candidate's recurrent term:
    no plain LSTM unless the gate is constant. With w_g = u_g = 0 it is 1/2: torch's LSTM whose
    candidate rows of weight_hh are U_c / 2."""
    reader = make("gflstm", layers=1, seed=5)
    layer = reader.layers[0]
    with torch.no_grad():
        layer.w_g.zero_()
        layer.u_g.zero_()
    W_i, W_f, W_o, W_c = layer.W.weight.chunk(4)  # ours: i, f, o, c~; torch's: i, f, g, o
    b_i, b_f, b_o, b_c = layer.W.bias.chunk(4)
    U_i, U_f, U_o = layer.U.weight.chunk(3)
    lstm = _torch_lstm(torch.cat([W_i, W_f, W_c, W_o]), torch.cat([U_i, U_f, 0.5 * layer.U_c[0], U_o]),
                       torch.cat([b_i, b_f, b_c, b_o]), E)
    ours, theirs, h_n, c_n = _against_torch(reader, lstm)
    torch.testing.assert_close(ours.states, theirs, atol=ATOL, rtol=0)
    torch.testing.assert_close(ours.state["h"], h_n, atol=ATOL, rtol=0)
    torch.testing.assert_close(ours.state["c"], c_n, atol=ATOL, rtol=0)
    with torch.no_grad():  # a gate that moves is no longer that LSTM
        layer.u_g.fill_(0.3)
    assert (reader(*batch([7, 7])).states - lstm(batch([7, 7])[0])[0]).abs().max() > 1e-3


def test_one_layer_dglstm_is_torchs_lstm_with_its_peepholes_at_zero():
    """The bottom layer has no depth gate: a one-layer DGLSTM is the paper's peephole LSTM, torch's LSTM
    when the cell-to-gate weights are zero (and not otherwise)."""
    reader = make("dglstm", layers=1, seed=6)
    layer = reader.layers[0]
    assert not hasattr(layer, "w_cd") and layer.W_x.out_features == 4 * H  # no depth gate at the bottom
    lstm = _torch_lstm(layer.W_x.weight, layer.W_h.weight, layer.W_x.bias, E)  # both i, f, c (g), o
    ours, theirs, _, _ = _against_torch(reader, lstm)
    assert (ours.states - theirs).abs().max() > 1e-3  # the peepholes are there
    with torch.no_grad():
        for p in (layer.w_ci, layer.w_cf, layer.w_co):
            p.zero_()
    ours, theirs, h_n, c_n = _against_torch(reader, lstm)
    torch.testing.assert_close(ours.states, theirs, atol=ATOL, rtol=0)
    torch.testing.assert_close(ours.state["h"], h_n, atol=ATOL, rtol=0)
    torch.testing.assert_close(ours.state["c"], c_n, atol=ATOL, rtol=0)


def test_the_depth_gate_adds_the_lower_cell():
    """c_t^{L+1} = d * c_t^L + f * c_{t-1} + i * tanh(...): at the first step from a zero state, the
    depth gate fully open (d = 1) rather than shut (d = 0) adds exactly the lower layer's new cell."""
    reader = make("dglstm", layers=2, seed=7)
    x, _ = batch([1, 1])
    cells = []
    for b_d in (-1e4, 1e4):  # shut, open
        with torch.no_grad():
            reader.layers[1].W_x.bias[4 * H :].fill_(b_d)
        cells.append(reader(x).state["c"])
    shut, opened = cells
    torch.testing.assert_close(opened[1] - shut[1], opened[0], atol=ATOL, rtol=0)
    assert opened[0].abs().min() > 0


# ----------------------------------------------------------------------------- shapes


@pytest.mark.parametrize("name", NAMES)
def test_shapes_and_an_empty_segment(name):
    reader = make(name, input_size=6)
    x, m = batch([3, 2], E=6)
    out = reader(x, m)
    assert out.states.shape == (2, 3, H) and out.memory is out.states and out.memory_mask is m
    assert out.state["h"].shape == out.state["c"].shape == (L, 2, H)
    for impl in ("fast", "reference"):
        empty = make(name, input_size=6, impl=impl)(x[:, :0], m[:, :0], out.state)
        assert empty.states.shape == (2, 0, H)
        torch.testing.assert_close(empty.state["h"], out.state["h"], atol=0, rtol=0)


# ----------------------------------------------------------------------------- Table 1's configs, bench, size


def test_ptb_table1_deep_baselines_share_the_lstmn_recipe():
    """sLSTM, gLSTM and dLSTM rows: the 3-layer LSTMN row's data, head and training, 3 layers of 300."""
    from memread.config import load_experiment

    lstmn = load_experiment(REPO / "configs" / "ptb" / "lstmn-3layer.toml")
    expected = {"slstm-3layer.toml": "lstm", "gflstm-3layer.toml": "gflstm", "dglstm-3layer.toml": "dglstm"}
    for file, reader in expected.items():
        cfg = load_experiment(REPO / "configs" / "ptb" / file)
        assert cfg.reader.name == reader and (cfg.reader.layers, cfg.reader.hidden) == (3, 300), file
        assert cfg.reader.dropout == lstmn.reader.dropout, file
        assert (cfg.data, cfg.head, cfg.train) == (lstmn.data, lstmn.head, lstmn.train), file


@pytest.mark.parametrize("name", NAMES)
def test_the_token_bench_and_parameter_matching_build_it(name):
    torch.set_default_dtype(torch.float32)
    from memread.bench.readers import bench, reader_config
    from memread.params import lm_parameters, match_lm_hidden

    result = bench(name, batch=2, steps=3, emb=4, hidden=5, repeats=1, warmup=0, reader_options=["layers=2"])
    assert result["reader"] == name and result["tokens_per_s"] > 0
    cfg = reader_config(name, 300, ["layers=3"])
    base = reader_config("lstm", 300, ["layers=3"])
    m = match_lm_hidden(cfg, 10001, 150, base)
    assert abs(m.difference) < lm_parameters(base, 10001, 150) * 0.01 and m.hidden < 300
