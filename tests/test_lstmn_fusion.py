"""LSTMN fusion decoder (Cheng et al. 2016, section 4): shapes and errors; the fast path equals a naive
per-example, per-step reading of equations (4)-(9) with (10)-(15) (deep fusion) or of our shallow
fusion definition, in float64 with padding on both sides, with and without autograd recording;
gradients equal the naive ones and reach every parameter; the in-place tapes of teacher forcing
under autograd give the gradients of the tapes grown by concatenation (``step`` under autograd),
also through the returned state, over repeated and partial backward passes, and no tape is
concatenated per step; one pair alone equals the same pair in a padded batch; ``step`` equals
teacher forcing; ``reorder`` selects rows; the LSTMN encoder's memory
tape; a tiny copy task and toy SNLI pairs (both fusion encoders) learn."""

from __future__ import annotations

import random

import pytest
import torch
import torch.nn.functional as F

from memread.data.snli import PairExample
from memread.errors import MemreadError
from memread.readers.lstmn import LSTMNConfig, LSTMNReader
from memread.heads.decoders.lstmn_fusion import FusionConfig, LSTMNFusionDecoder
from memread.readers.rnn import RNNReaderConfig

from test_text_tasks import _train, entailment, pair_task

E, H = 5, 4
MODES = ["lstmn_shallow", "lstmn_deep"]


def make_decoder(name, source_size=H, seed=0) -> LSTMNFusionDecoder:
    torch.manual_seed(seed)
    return LSTMNFusionDecoder(FusionConfig(name, hidden=H), E, source_size).double().eval()


def source_size(name) -> int:
    return H if name == "lstmn_deep" else 3  # shallow fusion takes any source size


# ----------------------------------------------------------------------------- the naive reference


def naive_fusion(dec: LSTMNFusionDecoder, y, Y, A):
    """One pair, no padding: target y (n, E), source tapes Y, A (m, Hs), straight from the equations.

    Returns the outputs (n, H), the target hidden tape (n, H) and the inter-attention (n, m).
    """
    n, m = y.size(0), Y.size(0)
    zeros = torch.zeros(H, dtype=y.dtype)
    H_tape, C_tape, outs, attention = [], [], [], torch.zeros(n, m, dtype=y.dtype)
    h_tilde_prev, gamma_tilde_prev, h_prev = zeros, torch.zeros(Y.size(1), dtype=y.dtype), zeros

    def intra(x_in):  # (4)-(6) over the target slots written so far
        if not H_tape:
            return zeros, zeros
        query = dec.W_x(x_in) + dec.W_h_tilde(h_tilde_prev)
        a = torch.stack([dec.v @ torch.tanh(dec.W_h(h_i) + query) for h_i in H_tape])  # (4)
        s = torch.softmax(a, dim=0)  # (5)
        return sum(s[i] * H_tape[i] for i in range(len(H_tape))), sum(s[i] * C_tape[i] for i in range(len(H_tape)))

    def inter(query):  # additive attention over the source hidden tape: weights p (m,)
        if m == 0:
            return torch.zeros(0, dtype=y.dtype)
        b = torch.stack([dec.u @ torch.tanh(dec.W_gamma(Y[j]) + query) for j in range(m)])  # (10)
        return torch.softmax(b, dim=0)  # (11)

    for t in range(n):
        x_t = y[t]
        if dec.deep:
            h_tilde, c_tilde = intra(x_t)
            p = inter(dec.W_x_inter(x_t) + dec.W_gamma_tilde(gamma_tilde_prev))
            gamma_tilde = (p.unsqueeze(1) * Y).sum(0)  # (12)
            alpha_tilde = (p.unsqueeze(1) * A).sum(0)
            i_t, f_t, o_t, c_hat = dec.W(torch.cat([h_tilde, x_t])).chunk(4)  # (7)
            r_t = torch.sigmoid(dec.W_r(torch.cat([gamma_tilde, x_t])))  # (13)
            c_t = r_t * alpha_tilde + torch.sigmoid(f_t) * c_tilde + torch.sigmoid(i_t) * torch.tanh(c_hat)  # (14)
            h_t = torch.sigmoid(o_t) * torch.tanh(c_t)  # (15)
            out = h_t
            gamma_tilde_prev = gamma_tilde
        else:
            p = inter(dec.W_s(h_prev))  # Bahdanau: query the previous hidden state
            ctx = (p.unsqueeze(1) * Y).sum(0)
            x_in = torch.cat([x_t, ctx])  # the LSTMN's input [x_t; ctx_t]
            h_tilde, c_tilde = intra(x_in)
            i_t, f_t, o_t, c_hat = dec.W(torch.cat([h_tilde, x_in])).chunk(4)  # (7)
            c_t = torch.sigmoid(f_t) * c_tilde + torch.sigmoid(i_t) * torch.tanh(c_hat)  # (8)
            h_t = torch.sigmoid(o_t) * torch.tanh(c_t)  # (9)
            out = torch.tanh(dec.W_o(torch.cat([h_t, ctx])))
        if m:
            attention[t] = p
        H_tape.append(h_t)
        C_tape.append(c_t)
        outs.append(out)
        h_tilde_prev, h_prev = h_tilde, h_t
    return torch.stack(outs), torch.stack(H_tape), attention


# ----------------------------------------------------------------------------- helpers


def pairs(tgt_lengths, src_lengths, Hs, seed=1):
    g = torch.Generator().manual_seed(seed)
    B, T, S = len(tgt_lengths), max(tgt_lengths), max(src_lengths)
    y = torch.randn(B, T, E, generator=g, dtype=torch.float64)
    Y = torch.randn(B, S, Hs, generator=g, dtype=torch.float64)
    A = torch.randn(B, S, Hs, generator=g, dtype=torch.float64)
    y_mask = torch.arange(T) < torch.tensor(tgt_lengths).unsqueeze(1)
    s_mask = torch.arange(S) < torch.tensor(src_lengths).unsqueeze(1)
    return y, y_mask, Y, A, s_mask


TGT, SRC = [6, 2, 4, 1], [3, 5, 1, 0]  # padding on both sides; the last row has no source at all


# ----------------------------------------------------------------------------- tests


def test_shapes_and_errors():
    dec = LSTMNFusionDecoder(FusionConfig("lstmn_shallow", hidden=6), 5, 7)
    assert (dec.input_size, dec.source_size, dec.output_size) == (5, 7, 6)
    out = dec(torch.randn(2, 4, 5), None, torch.randn(2, 3, 7), None, None, return_attention=True)
    assert out.states.shape == (2, 4, 6) and out.memory.shape == (2, 4, 6) and out.memory_mask.shape == (2, 4)
    assert out.attention.shape == (2, 4, 3)
    assert dec(torch.randn(2, 4, 5), None, torch.randn(2, 3, 7), None, None).attention is None
    with pytest.raises(MemreadError, match="source size"):
        LSTMNFusionDecoder(FusionConfig("lstmn_deep", hidden=6), 5, 7)
    with pytest.raises(MemreadError, match="source_cells"):
        LSTMNFusionDecoder(FusionConfig("lstmn_deep", hidden=6), 5, 6)(
            torch.randn(2, 4, 5), None, torch.randn(2, 3, 6), None, None)
    with pytest.raises(MemreadError, match="name"):
        LSTMNFusionDecoder(FusionConfig("lstmn_middle", hidden=6), 5, 6)


@pytest.mark.parametrize("record", [True, False], ids=["autograd", "no_grad"])
@pytest.mark.parametrize("name", MODES)
def test_fast_equals_naive_with_padding(name, record):
    dec = make_decoder(name, source_size(name))
    y, y_mask, Y, A, s_mask = pairs(TGT, SRC, source_size(name))
    with torch.set_grad_enabled(record):
        out = dec(y, y_mask, Y, A, s_mask, return_attention=True)
    for b, (n, m) in enumerate(zip(TGT, SRC)):
        states, memory, attention = naive_fusion(dec, y[b, :n], Y[b, :m], A[b, :m])
        torch.testing.assert_close(out.states[b, :n], states, atol=1e-10, rtol=0)
        torch.testing.assert_close(out.memory[b, :n], memory, atol=1e-10, rtol=0)
        torch.testing.assert_close(out.attention[b, :n, :m], attention, atol=1e-10, rtol=0)
        assert not out.attention[b, :, m:].any()  # padded source slots are never attended


@pytest.mark.parametrize("name", MODES)
def test_gradients_equal_naive_and_reach_every_parameter(name):
    dec = make_decoder(name, source_size(name))
    y, y_mask, Y, A, s_mask = pairs(TGT[:3], SRC[:3], source_size(name))
    leaves = [y.requires_grad_(), Y.requires_grad_()] + ([A.requires_grad_()] if dec.deep else [])
    w = torch.randn(max(TGT), H, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    out = dec(y, y_mask, Y, A, s_mask)
    loss = sum(((out.states[b, :n] + out.memory[b, :n]) * w[:n]).sum() for b, n in enumerate(TGT[:3]))
    fast = torch.autograd.grad(loss, [*leaves, *dec.parameters()])
    loss_ref = 0
    for b, (n, m) in enumerate(zip(TGT[:3], SRC[:3])):
        states, memory, _ = naive_fusion(dec, y[b, :n], Y[b, :m], A[b, :m])
        loss_ref = loss_ref + ((states + memory) * w[:n]).sum()
    ref = torch.autograd.grad(loss_ref, [*leaves, *dec.parameters()])
    names = ["y", "Y", "A"][: len(leaves)] + [n for n, _ in dec.named_parameters()]
    for nm, g_fast, g_ref in zip(names, fast, ref):
        torch.testing.assert_close(g_fast, g_ref, atol=1e-10, rtol=0, msg=nm)
        assert g_fast.abs().sum() > 0, f"{nm} receives no gradient"
    # nothing flows into padded source slots
    assert not fast[1][~s_mask].any()


def concatenated_reading(dec: LSTMNFusionDecoder, y, Y, A, s_mask):
    """Teacher forcing the old way under autograd: ``step`` by ``step``, the tapes grown by ``torch.cat``."""
    state = dec.start(Y, A, s_mask, capacity=0)
    outs = []
    for t in range(y.size(1)):
        out, state = dec.step(y[:, t], state)
        outs.append(out)
    return torch.stack(outs, dim=1), state["HC"][..., :H], state


def tape_loss(states, memory, state, y_mask, seed=7):
    """A loss reaching the outputs (real steps), the memory and the state's tapes and queries."""
    g = torch.Generator().manual_seed(seed)
    parts = [states * y_mask.unsqueeze(-1), memory, state["HC"], state["K"], state["q_rec"], state["p_rec"]]
    return sum((x * torch.randn(x.shape, generator=g, dtype=x.dtype)).sum() for x in parts)


@pytest.mark.parametrize("name", MODES)
def test_in_place_tapes_give_the_concatenated_tapes_gradients(name):
    dec = make_decoder(name, source_size(name))
    y, y_mask, Y, A, s_mask = pairs(TGT, SRC, source_size(name))
    leaves = [y.requires_grad_(), Y.requires_grad_()] + ([A.requires_grad_()] if dec.deep else [])
    names = ["y", "Y", "A"][: len(leaves)] + [n for n, _ in dec.named_parameters()]
    out = dec(y, y_mask, Y, A, s_mask)
    assert out.state["HC"].shape == (len(TGT), max(TGT), 2 * H) and out.state["K"].shape == (len(TGT), max(TGT), H)
    loss = tape_loss(out.states, out.memory, out.state, y_mask)
    fast = torch.autograd.grad(loss, [*leaves, *dec.parameters()], retain_graph=True)
    states, memory, state = concatenated_reading(dec, y, Y, A, s_mask)
    for key in ("HC", "K", "q_rec", "p_rec"):
        torch.testing.assert_close(out.state[key], state[key], atol=1e-12, rtol=0, msg=key)
    ref = torch.autograd.grad(tape_loss(states, memory, state, y_mask), [*leaves, *dec.parameters()])
    for nm, g_fast, g_ref in zip(names, fast, ref):
        torch.testing.assert_close(g_fast, g_ref, atol=1e-10, rtol=0, msg=nm)
        assert g_fast.abs().sum() > 0, f"{nm} receives no gradient"
    # the tapes' gradients start from zero in every backward pass: a pass that runs only part of the
    # graph (v's gradient needs no write of slot 0), then the whole graph again, give the same
    torch.autograd.grad(loss, [dec.v], retain_graph=True)
    again = torch.autograd.grad(loss, [*leaves, *dec.parameters()])
    for nm, g_fast, g_again in zip(names, fast, again):
        torch.testing.assert_close(g_again, g_fast, atol=1e-12, rtol=0, msg=nm)


@pytest.mark.parametrize("name", MODES)
def test_teacher_forcing_concatenates_no_tape_per_step(name, monkeypatch):
    dec = make_decoder(name, source_size(name))
    calls = []
    cat = torch.cat

    def counting_cat(*args, **kwargs):
        calls.append(1)
        return cat(*args, **kwargs)

    monkeypatch.setattr(torch, "cat", counting_cat)
    counts = []
    for T in (2, 9):
        y, y_mask, Y, A, s_mask = pairs([T, T - 1], [3, 2], source_size(name))
        calls.clear()
        out = dec(y.requires_grad_(), y_mask, Y, A, s_mask)  # autograd records
        counts.append(len(calls))
        out.states.sum().backward()
    assert counts[0] == counts[1], f"torch.cat calls grow with the target length: {counts}"


@pytest.mark.parametrize("name", MODES)
def test_single_pair_equals_padded_batch(name):
    dec = make_decoder(name, source_size(name))
    y, y_mask, Y, A, s_mask = pairs(TGT[:3], SRC[:3], source_size(name))
    padded = dec(y, y_mask, Y, A, s_mask, return_attention=True)
    for b, (n, m) in enumerate(zip(TGT[:3], SRC[:3])):
        alone = dec(y[b : b + 1, :n], None, Y[b : b + 1, :m], A[b : b + 1, :m], None, return_attention=True)
        torch.testing.assert_close(padded.states[b, :n], alone.states[0], atol=1e-12, rtol=0)
        torch.testing.assert_close(padded.attention[b, :n, :m], alone.attention[0], atol=1e-12, rtol=0)
    # garbage in padded positions, on either side, does not change real ones
    y2, Y2, A2 = y.clone(), Y.clone(), A.clone()
    y2[~y_mask], Y2[~s_mask], A2[~s_mask] = 1e3, 1e3, -1e3
    garbled = dec(y2, y_mask, Y2, A2, s_mask).states
    torch.testing.assert_close(garbled[y_mask], padded.states[y_mask], atol=1e-12, rtol=0)


@pytest.mark.parametrize("record", [True, False], ids=["autograd", "no_grad"])
@pytest.mark.parametrize("name", MODES)
def test_step_equals_teacher_forcing(name, record):
    dec = make_decoder(name, source_size(name))
    T = 7
    y, _, Y, A, s_mask = pairs([T, T, T], [3, 5, 1], source_size(name))
    whole = dec(y, None, Y, A, s_mask)
    with torch.set_grad_enabled(record):
        state = dec.start(Y, A, s_mask, capacity=2)  # the tapes grow past their first capacity
        for t in range(T):
            out, state = dec.step(y[:, t], state)
            torch.testing.assert_close(out, whole.states[:, t], atol=1e-12, rtol=0)
            assert state["n"] == t + 1
    torch.testing.assert_close(state["HC"][:, :T, :H], whole.memory, atol=1e-12, rtol=0)


@pytest.mark.parametrize("name", MODES)
def test_reorder_selects_rows(name):
    dec = make_decoder(name, source_size(name))
    y, _, Y, A, s_mask = pairs([5, 5, 5], [3, 5, 2], source_size(name))
    index = torch.tensor([2, 0, 0])
    with torch.no_grad():
        state = dec.start(Y, A, s_mask)
        for t in range(2):
            _, state = dec.step(y[:, t], state)
        state = dec.reorder(state, index)
        outs = []
        for t in range(2, 5):
            out, state = dec.step(y[index, t], state)
            outs.append(out)
        ref = dec(y[index], None, Y[index], A[index], s_mask[index]).states
    torch.testing.assert_close(torch.stack(outs, dim=1), ref[:, 2:], atol=1e-12, rtol=0)


def test_lstmn_encoder_returns_its_memory_tape():
    torch.manual_seed(0)
    reader = LSTMNReader(LSTMNConfig(hidden=H, layers=2), E).double()
    x = torch.randn(2, 4, E, dtype=torch.float64)
    mask = torch.tensor([[True] * 4, [True, True, False, False]])
    out = reader(x, mask, return_cells=True)
    plain = reader(x, mask)
    assert "cells" not in plain.state
    assert out.state["cells"].shape == out.memory.shape == (2, 4, H)
    torch.testing.assert_close(out.state["cells"][0], plain.state["c"][-1, 0], atol=0, rtol=0)  # the top layer's c-tape
    torch.testing.assert_close(out.state["cells"][1, :2], plain.state["c"][-1, 1, -2:], atol=0, rtol=0)
    # h_t = o_t * tanh(c_t): |h| <= tanh|c|
    assert torch.all(out.memory.abs() <= out.state["cells"].abs().tanh() + 1e-12)
    out.state["cells"].sum().backward()  # gradients flow through the memory tape
    assert all(p.grad is not None for p in reader.parameters())


@pytest.mark.slow  # trains 250 steps
@pytest.mark.parametrize("name", MODES)
def test_tiny_copy_task_learns(name):
    """Decode a copy of a random source sequence (vocabulary 6, lengths 3-6) read by an LSTMN encoder."""
    torch.manual_seed(0)
    V, D, BOS = 8, 24, 7
    emb = torch.nn.Embedding(V, D)
    encoder = LSTMNReader(LSTMNConfig(hidden=D), D)
    decoder = LSTMNFusionDecoder(FusionConfig(name, hidden=D), D, D)
    head = torch.nn.Linear(D, V)
    params = [*emb.parameters(), *encoder.parameters(), *decoder.parameters(), *head.parameters()]
    opt = torch.optim.Adam(params, lr=0.01)
    g = torch.Generator().manual_seed(1)

    def sample(B):
        lengths = torch.randint(3, 7, (B,), generator=g)
        src = torch.randint(1, 7, (B, 6), generator=g)
        mask = torch.arange(6) < lengths.unsqueeze(1)
        src = src * mask
        tgt_in = torch.cat([torch.full((B, 1), BOS), src[:, :-1]], dim=1)
        return src, mask, tgt_in

    def run(src, mask, tgt_in):
        enc = encoder(emb(src), mask, return_cells=True)
        out = decoder(emb(tgt_in), mask, enc.memory, enc.state["cells"], mask)
        return head(out.states)  # (B, T, V)

    for _ in range(250):
        src, mask, tgt_in = sample(32)
        loss = F.cross_entropy(run(src, mask, tgt_in)[mask], src[mask])
        opt.zero_grad()
        loss.backward()
        opt.step()
    with torch.no_grad():
        src, mask, tgt_in = sample(200)
        accuracy = (run(src, mask, tgt_in).argmax(-1)[mask] == src[mask]).double().mean().item()
    print(f"{name}: copy token accuracy {accuracy:.3f}")
    assert accuracy > 0.9


@pytest.mark.slow  # trains 200 steps
@pytest.mark.parametrize("encoder", ["shallow_fusion", "deep_fusion"])
def test_tiny_snli_fusion_learns(tmp_path, encoder):
    ex = {"train": entailment(600, 0), "valid": entailment(50, 1), "test": entailment(150, 2)}
    task = pair_task(tmp_path, ex, LSTMNConfig(hidden=16), encoder=encoder, features="concat", emb=16, mlp=32, dropout=0.0,
                     pool="mean")
    assert _train(task, 200)["accuracy"] >= 0.9


def membership(n: int, seed: int) -> list[PairExample]:
    """A one-word hypothesis is entailed (0) when the premise holds the word, else neutral (1): unlike
    ``entailment`` the label cannot be read off the hypothesis alone."""
    rng = random.Random(seed)
    words = [f"w{i}" for i in range(8)]
    out = []
    for _ in range(n):
        prem = rng.sample(words, rng.randint(2, 4))
        y = rng.randrange(2)
        hyp = rng.choice(prem) if y == 0 else rng.choice([w for w in words if w not in prem])
        out.append(PairExample(tuple(prem), (hyp,), y))
    return out


@pytest.mark.slow  # trains 600 steps
@pytest.mark.parametrize("encoder", ["shallow_fusion", "deep_fusion"])
def test_tiny_snli_fusion_learns_what_needs_the_premise(tmp_path, encoder):
    """(Two independent LSTMNs, encoder = "two", reach about 0.83 here with the same budget.)"""
    ex = {"train": membership(1000, 0), "valid": membership(50, 1), "test": membership(300, 2)}
    task = pair_task(tmp_path, ex, LSTMNConfig(hidden=16), encoder=encoder, features="concat", emb=16, mlp=32, dropout=0.0,
                     pool="mean")
    assert _train(task, 600)["accuracy"] >= 0.88


@pytest.mark.parametrize("encoder", ["shallow_fusion", "deep_fusion"])
def test_snli_fusion_needs_lstmn_and_reads_the_premise(tmp_path, encoder):
    ex = {s: entailment(12, i) for i, s in enumerate(("train", "valid", "test"))}
    with pytest.raises(MemreadError, match="reader.name"):
        pair_task(tmp_path, ex, RNNReaderConfig(hidden=8), encoder=encoder, emb=8)
    task = pair_task(tmp_path, ex, LSTMNConfig(hidden=6), encoder=encoder, features="concat", pool="mean", emb=6, mlp=8)
    model = task.build_model(0).double().eval()
    batch = task.batches("test", 12)[0]
    full = model(batch).logits
    for i in range(len(batch["label"])):  # a pair alone equals the same pair in a padded batch
        n1, n2 = int(batch["first_mask"][i].sum()), int(batch["second_mask"][i].sum())
        one = {"first": batch["first"][i : i + 1, :n1], "first_mask": batch["first_mask"][i : i + 1, :n1],
               "second": batch["second"][i : i + 1, :n2], "second_mask": batch["second_mask"][i : i + 1, :n2],
               "label": batch["label"][i : i + 1]}
        torch.testing.assert_close(model(one).logits, full[i : i + 1], atol=1e-10, rtol=0)
    enc = model.encode(batch)
    changed = dict(batch, first=batch["first"].flip(1) * batch["first_mask"])  # a different premise
    assert not torch.allclose(model.encode(changed).v, enc.v)  # the hypothesis' reading saw the premise
    model.train()
    task.build_criterion(model)(model(batch), batch).value.backward()
    missing = [n for n, p in model.named_parameters() if p.requires_grad and (p.grad is None or not p.grad.abs().sum())]
    assert not missing, missing


def test_bench_runs_on_tiny_sizes():
    from memread.bench.fusion import bench_deep_fusion, bench_deep_fusion_command
    from memread.cli import build_parser

    out = bench_deep_fusion(batch=2, source=3, target=4, emb=5, hidden=4, repeats=2, warmup=0, source_grad=True)
    assert out["decoder"] == "lstmn_deep" and out["ratio"] > 0 and out["tokens_per_s"] > 0
    args = build_parser().parse_args(["bench", "lstmn-deep-fusion", "--batch", "2", "--set", "source=3",
                                      "--set", "target=2", "--set", "emb=3", "--set", "hidden=4", "--set", "repeats=1",
                                      "--set", "fusion=lstmn_shallow"])
    out = bench_deep_fusion_command(args)
    assert (out["decoder"], out["batch"], out["target"], out["emb"]) == ("lstmn_shallow", 2, 2, 3)
    with pytest.raises(MemreadError, match="--set"):
        bench_deep_fusion_command(build_parser().parse_args(["bench", "lstmn-deep-fusion", "--emb", "7"]))
    with pytest.raises(MemreadError, match="unknown key"):
        bench_deep_fusion_command(build_parser().parse_args(["bench", "lstmn-deep-fusion", "--set", "layers=2"]))
