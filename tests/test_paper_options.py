"""Paper-literal options where memread chose a convention (issue 23), beyond the LSTMN reader's own tests
(``tape_start`` in tests/test_lstmn.py):

- the LSTMN fusion decoders' ``tape_start``: with either tape start (the paper's empty tape, the authors'
  code's zero slot) the decoder equals a naive per-step reading in float64 with padding on both sides,
  with and without autograd, its in-place tapes give the gradients of the concatenated ones, gradients
  equal the naive ones and reach every parameter, and the zero slot changes the outputs from the second
  target token on;
- the cloze criterion's ``normalize``: ``"document"`` (the default) is the papers' pointer-sum objective
  ``-log sum_{i in I(a, d)} s_i`` (hand-checked), it differs from the renormalised one ("candidates")
  exactly by the log of the candidates' attention mass (equal when the candidates' positions hold all of
  it), its gradients reach every parameter of the pointer-sum heads, a tiny stories run trains with it, a
  head without document attention is refused, and run directories written before the key read as they
  were trained ("candidates").
"""

from __future__ import annotations

import json
import math
import time

import pytest
import torch

from memread.config import ExperimentConfig, TrainConfig, experiment_from_dict
from memread.criteria import CRITERIA
from memread.criteria.cloze import ClozeNLLConfig
from memread.data.pipelines.cloze import ClozePipeline, StoriesClozeConfig
from memread.errors import MemreadError
from memread.experiment import load_trained, resume_run, start_run
from memread.heads import HEADS
from memread.heads.base import ModelOutput
from memread.modules.pointer_sum import answer_log_prob, candidate_log_probs, occurrences
from memread.heads.decoders.lstmn_fusion import FusionConfig, LSTMNFusionDecoder
from memread.readers.rnn import RNNReaderConfig
from memread.tasks import Task

from test_lstmn_fusion import E, H, MODES, SRC, TGT, concatenated_reading, naive_fusion, pairs, source_size, tape_loss

# ----------------------------------------------------------------------------- LSTMN fusion: tape_start


def make_decoder(name, tape_start, seed=0) -> LSTMNFusionDecoder:
    torch.manual_seed(seed)
    cfg = FusionConfig(name, hidden=H, tape_start=tape_start)
    return LSTMNFusionDecoder(cfg, E, source_size(name)).double().eval()


def naive_fusion_with_tape_start(dec: LSTMNFusionDecoder, y, Y, A, zero_slot: bool):
    """One pair, no padding, straight from the equations as tests/test_lstmn_fusion.py's ``naive_fusion``,
    with the target tapes started as ``tape_start`` says: with ``zero_slot`` they hold ``h_0 = c_0 = 0``
    before the first token (the authors' ``model/decoder_deep_w2v.lua``), read by (4)-(6) like any slot
    (its key ``W_h h_0`` computed as written) and not part of the returned target tape.

    Returns the outputs (n, H), the target hidden tape (n, H), the inter-attention (n, m) and the zero
    slot's intra-attention weights (n,) (zeros without it)."""
    n, m = y.size(0), Y.size(0)
    zeros = torch.zeros(H, dtype=y.dtype)
    H_tape, C_tape = ([zeros], [zeros]) if zero_slot else ([], [])
    outs, attention, s0 = [], torch.zeros(n, m, dtype=y.dtype), torch.zeros(n, dtype=y.dtype)
    h_tilde_prev, gamma_tilde_prev, h_prev = zeros, torch.zeros(Y.size(1), dtype=y.dtype), zeros

    def intra(t, x_in):  # (4)-(6) over the target slots written so far (and the zero slot)
        if not H_tape:
            return zeros, zeros
        query = dec.W_x(x_in) + dec.W_h_tilde(h_tilde_prev)
        a = torch.stack([dec.v @ torch.tanh(dec.W_h(h_i) + query) for h_i in H_tape])  # (4)
        s = torch.softmax(a, dim=0)  # (5)
        if zero_slot:
            s0[t] = s[0]
        return sum(s[i] * H_tape[i] for i in range(len(H_tape))), sum(s[i] * C_tape[i] for i in range(len(H_tape)))

    def inter(query):  # over the source hidden tape (10)-(11) / Bahdanau
        if m == 0:
            return torch.zeros(0, dtype=y.dtype)
        return torch.softmax(torch.stack([dec.u @ torch.tanh(dec.W_gamma(Y[j]) + query) for j in range(m)]), dim=0)

    for t in range(n):
        x_t = y[t]
        if dec.deep:
            h_tilde, c_tilde = intra(t, x_t)
            p = inter(dec.W_x_inter(x_t) + dec.W_gamma_tilde(gamma_tilde_prev))
            gamma_tilde, alpha_tilde = (p.unsqueeze(1) * Y).sum(0), (p.unsqueeze(1) * A).sum(0)  # (12)
            i_t, f_t, o_t, c_hat = dec.W(torch.cat([h_tilde, x_t])).chunk(4)  # (7)
            r_t = torch.sigmoid(dec.W_r(torch.cat([gamma_tilde, x_t])))  # (13)
            c_t = r_t * alpha_tilde + torch.sigmoid(f_t) * c_tilde + torch.sigmoid(i_t) * torch.tanh(c_hat)  # (14)
            h_t = out = torch.sigmoid(o_t) * torch.tanh(c_t)  # (15)
            gamma_tilde_prev = gamma_tilde
        else:
            p = inter(dec.W_s(h_prev))
            ctx = (p.unsqueeze(1) * Y).sum(0)
            x_in = torch.cat([x_t, ctx])
            h_tilde, c_tilde = intra(t, x_in)
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
    return torch.stack(outs), torch.stack(H_tape[1:] if zero_slot else H_tape), attention, s0


@pytest.mark.parametrize("name", MODES)
def test_naive_reading_with_an_empty_tape_is_the_fusion_tests_reference(name):
    dec = make_decoder(name, "empty")
    y, _, Y, A, _ = pairs(TGT, SRC, source_size(name))
    mine = naive_fusion_with_tape_start(dec, y[0], Y[0, :3], A[0, :3], False)
    theirs = naive_fusion(dec, y[0], Y[0, :3], A[0, :3])
    for a, b in zip(mine[:3], theirs):
        torch.testing.assert_close(a, b, atol=0, rtol=0)


@pytest.mark.parametrize("tape_start", ["empty", "zero_slot"])
@pytest.mark.parametrize("record", [True, False], ids=["autograd", "no_grad"])
@pytest.mark.parametrize("name", MODES)
def test_fusion_equals_naive_with_padding(name, record, tape_start):
    zero_slot = tape_start == "zero_slot"
    dec = make_decoder(name, tape_start)
    y, y_mask, Y, A, s_mask = pairs(TGT, SRC, source_size(name))
    with torch.set_grad_enabled(record):
        out = dec(y, y_mask, Y, A, s_mask, return_attention=True)
    assert out.memory.shape == (len(TGT), max(TGT), H)  # the zero slot is not on the returned tape
    for b, (n, m) in enumerate(zip(TGT, SRC)):
        states, memory, attention, s0 = naive_fusion_with_tape_start(dec, y[b, :n], Y[b, :m], A[b, :m], zero_slot)
        torch.testing.assert_close(out.states[b, :n], states, atol=1e-10, rtol=0)
        torch.testing.assert_close(out.memory[b, :n], memory, atol=1e-10, rtol=0)
        torch.testing.assert_close(out.attention[b, :n, :m], attention, atol=1e-10, rtol=0)
        if zero_slot:
            assert s0[0] == 1 and bool(((s0[1:] > 0) & (s0[1:] < 1)).all())  # the zero slot is attended


@pytest.mark.parametrize("tape_start", ["empty", "zero_slot"])
@pytest.mark.parametrize("name", MODES)
def test_fusion_gradients_equal_naive_and_the_concatenated_tapes(name, tape_start):
    dec = make_decoder(name, tape_start)
    y, y_mask, Y, A, s_mask = pairs(TGT, SRC, source_size(name))
    leaves = [y.requires_grad_(), Y.requires_grad_()] + ([A.requires_grad_()] if dec.deep else [])
    names = ["y", "Y", "A"][: len(leaves)] + [n for n, _ in dec.named_parameters()]
    w = torch.randn(max(TGT), H, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    out = dec(y, y_mask, Y, A, s_mask)  # teacher forcing: the in-place tapes, the intra-attention one node
    loss = sum(((out.states[b, :n] + out.memory[b, :n]) * w[:n]).sum() for b, n in enumerate(TGT))
    fast = torch.autograd.grad(loss, [*leaves, *dec.parameters()])
    loss_ref = 0
    for b, (n, m) in enumerate(zip(TGT, SRC)):
        zero_slot = tape_start == "zero_slot"
        states, memory, _, _ = naive_fusion_with_tape_start(dec, y[b, :n], Y[b, :m], A[b, :m], zero_slot)
        loss_ref = loss_ref + ((states + memory) * w[:n]).sum()
    ref = torch.autograd.grad(loss_ref, [*leaves, *dec.parameters()])
    for nm, g_fast, g_ref in zip(names, fast, ref):
        torch.testing.assert_close(g_fast, g_ref, atol=1e-10, rtol=0, msg=nm)
        assert g_fast.abs().sum() > 0, f"{nm} receives no gradient"
    # the in-place tapes against step by step under autograd (the tapes grown by torch.cat), the state too
    out = dec(y, y_mask, Y, A, s_mask)
    fast = torch.autograd.grad(tape_loss(out.states, out.memory, out.state, y_mask), [*leaves, *dec.parameters()])
    states, memory, state = concatenated_reading(dec, y, Y, A, s_mask)
    ref = torch.autograd.grad(tape_loss(states, memory, state, y_mask), [*leaves, *dec.parameters()])
    for nm, g_fast, g_ref in zip(names, fast, ref):
        torch.testing.assert_close(g_fast, g_ref, atol=1e-10, rtol=0, msg=nm)


@pytest.mark.parametrize("name", MODES)
def test_fusion_zero_slot_changes_the_outputs_from_the_second_token(name):
    """Fails when the option is ignored: same parameters, the zero slot takes intra-attention weight from
    h_1 at t = 2, so the outputs differ from there (at t = 1 it takes all of it and adds 0: h~_1 = 0 either way)."""
    empty, zero = make_decoder(name, "empty"), make_decoder(name, "zero_slot")
    zero.load_state_dict(empty.state_dict())
    y, y_mask, Y, A, s_mask = pairs([5, 5], [3, 2], source_size(name))
    a, b = empty(y, y_mask, Y, A, s_mask).states, zero(y, y_mask, Y, A, s_mask).states
    torch.testing.assert_close(b[:, 0], a[:, 0], atol=1e-12, rtol=0)
    assert bool(((b[:, 1:] - a[:, 1:]).abs().amax(-1) > 1e-6).all())
    with pytest.raises(MemreadError, match="tape_start"):
        LSTMNFusionDecoder(FusionConfig(name, hidden=H, tape_start="null"), E, source_size(name))
    assert FusionConfig(name).tape_start == "empty"


# ----------------------------------------------------------------------------- cloze: normalize


def criterion(normalize: str):
    return CRITERIA["cloze_nll"].build(ClozeNLLConfig(normalize=normalize), type("P", (), {"groups": []})(), None)


def cloze_output(doc_words, attention, cand_words, answer):
    """A pointer-sum head's output on a hand-made batch: log P over the candidates, the document
    attention and where each candidate occurs."""
    doc_mask = torch.ones_like(doc_words, dtype=torch.bool)
    cand_mask = torch.ones_like(cand_words, dtype=torch.bool)
    hits = occurrences(doc_words, doc_mask, cand_words, cand_mask)
    out = ModelOutput(logits=candidate_log_probs(attention, hits, cand_mask), attention=attention, extra={"hits": hits})
    return out, {"answer": torch.tensor(answer)}


def test_document_normalisation_is_the_papers_pointer_sum_nll_by_hand():
    # 5 three times, 7 twice, 9 once; position 6 holds 8, no candidate: the candidates hold 0.9 of the mass
    doc_words = torch.tensor([[5, 7, 5, 9, 7, 5, 8]], dtype=torch.long)
    attention = torch.tensor([[0.1, 0.2, 0.3, 0.1, 0.1, 0.1, 0.1]], dtype=torch.float64)
    out, batch = cloze_output(doc_words, attention, torch.tensor([[5, 7, 9]]), [1])  # the answer is 7
    paper = criterion("document")(out, batch)
    assert paper.value.item() == pytest.approx(-math.log(0.2 + 0.1))  # -log sum_{i in I(7)} s_i, by hand
    assert paper.stats["nll"].item() == pytest.approx(-math.log(0.3))
    assert answer_log_prob(attention, out.extra["hits"], batch["answer"]).item() == pytest.approx(math.log(0.3))
    ours = criterion("candidates")(out, batch)
    assert ours.value.item() == pytest.approx(-math.log(0.3 / 0.9))  # renormalised over the candidates
    # the two differ by -log of the candidates' mass, here log(1 / 0.9); accuracy is the same function
    assert paper.value.item() - ours.value.item() == pytest.approx(-math.log(0.9))
    assert paper.stats["correct"] == ours.stats["correct"] == 0  # 5 holds 0.5: the prediction is 5 either way


def test_the_two_objectives_agree_exactly_when_the_candidates_hold_all_the_mass():
    g = torch.Generator().manual_seed(0)
    attention = torch.softmax(torch.randn(3, 6, generator=g, dtype=torch.float64), dim=-1)
    answer = [0, 1, 2]
    cands = torch.tensor([[1, 2, 3]] * 3)
    # every position holds a candidate: the renormalisation divides by 1
    full = torch.tensor([[1, 2, 3, 1, 2, 3], [3, 3, 2, 1, 1, 2], [1, 1, 1, 2, 3, 3]])
    out, batch = cloze_output(full, attention, cands, answer)
    torch.testing.assert_close(criterion("document")(out, batch).value, criterion("candidates")(out, batch).value)
    # one position per row holds no candidate (word 4): the answer's share of the candidates' mass is no
    # longer its share of the document's, and the losses differ by the mean -log of the candidates' mass
    part = full.clone()
    part[:, 1] = 4
    out, batch = cloze_output(part, attention, cands, answer)
    paper, ours = criterion("document")(out, batch).value, criterion("candidates")(out, batch).value
    mass = 1 - attention[:, 1]
    assert (paper - ours).item() > 1e-3
    torch.testing.assert_close(paper - ours, -mass.log().mean())


POINTER_HEADS = [("pointer", {}), ("as_reader", {}), ("iaa", dict(steps=3, inference=8)),
                 ("iaa", dict(steps=3, inference=8, fixed_query=True))]


def stories_task(head: str, normalize: str, **options) -> Task:
    data = StoriesClozeConfig(stories=40)
    cfg = ExperimentConfig(data=data, reader=RNNReaderConfig(name="gru", hidden=6, bidirectional=True),
                           head=HEADS[head].Config(**{"emb": 8, **options}),
                           criterion=ClozeNLLConfig(emb_l2=1e-4, normalize=normalize))
    return Task(cfg, ".", data=ClozePipeline(data, "."))


@pytest.mark.parametrize("head,options", POINTER_HEADS, ids=["pointer", "as_reader", "iaa", "iaa-fixed"])
def test_document_normalisation_reaches_every_parameter_of_the_pointer_sum_heads(head, options):
    task = stories_task(head, "document", init="paper", **options) if head != "pointer" else \
        stories_task(head, "document")
    model = task.build_model(0)
    batch = task.batches("train", 8)[0]
    out = model(batch)
    loss = task.build_criterion(model)(out, batch)
    # the papers' objective, recomputed from the head's attention and hits, plus the embedding penalty
    expected = -answer_log_prob(out.attention, out.extra["hits"], batch["answer"]).mean() \
        + 1e-4 * model.embedding.weight.pow(2).sum()
    torch.testing.assert_close(loss.value, expected)
    renormalised = stories_task(head, "candidates", **options).build_criterion(model)(out, batch)
    assert loss.value.item() > renormalised.value.item() + 1e-3  # stories' documents hold non-candidate words
    loss.value.backward()
    for name, p in model.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, name


def test_document_normalisation_needs_a_pointer_sum_head():
    task = stories_task("final_state", "document")
    with pytest.raises(MemreadError, match="final state"):
        task.build_criterion(task.build_model(0))
    with pytest.raises(MemreadError, match="pointer-sum head"):  # an output without attention and hits
        criterion("document")(ModelOutput(logits=torch.zeros(1, 2)), {"answer": torch.tensor([0])})
    stories_task("final_state", "candidates").build_criterion(task.build_model(0))  # its only form


@pytest.mark.slow  # trains 60 steps
def test_a_tiny_stories_run_trains_with_the_papers_objective(tmp_path):
    torch.set_num_threads(1)
    cfg = ExperimentConfig(data=StoriesClozeConfig(stories=300, bucket=4), head=HEADS["as_reader"].Config(emb=24),
                           reader=RNNReaderConfig(name="gru", hidden=24, bidirectional=True),
                           criterion=ClozeNLLConfig(normalize="document"),
                           train=TrainConfig(lr=5e-3, batch_size=32, epochs=100, max_steps=60, seed=1, progress=False,
                                             log_every=1))
    t0 = time.perf_counter()
    start_run(cfg, tmp_path / "run", tmp_path).fit()
    wall = time.perf_counter() - t0
    records = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    losses = [r["loss"] for r in records if r["event"] == "train"]
    assert len(losses) == 60
    seconds = [r["seconds"] for r in records if r["event"] == "train"]  # what `claims.py status` times a run by
    assert min(seconds) > 0 and sum(seconds) <= wall  # each log's own, not the run's so far
    first, last = sum(losses[:10]) / 10, sum(losses[-10:]) / 10
    print(f"train loss {first:.3f} -> {last:.3f}")
    assert last < 0.7 * first, (first, last)
    saved = json.loads((tmp_path / "run" / "config.json").read_text())
    assert saved["criterion"]["normalize"] == "document"  # the run directory says which objective it trained


def test_the_papers_objective_is_the_default_and_runs_written_before_the_key_read_as_trained(tmp_path):
    """``normalize`` defaults to "document", the papers' objective; ``final_state`` (no document attention) is
    refused without "candidates", naming the key. Run directories written before the key existed trained on
    "candidates" (memread's only form then): a config.json and checkpoint without the key read as "candidates" and
    resume without a config mismatch."""
    base = {"data": {"name": "stories", "stories": 60}, "reader": {"name": "gru", "hidden": 6, "bidirectional": True},
            "criterion": {"name": "cloze_nll"}}
    assert experiment_from_dict({**base, "head": {"name": "iaa"}}, "test").criterion.normalize == "document"
    with pytest.raises(MemreadError, match=r"test: key 'criterion.normalize' is 'document'.*final_state"):
        experiment_from_dict({**base, "head": {"name": "final_state"}}, "test")
    both = {**base, "head": {"name": "final_state"}, "criterion": {"name": "cloze_nll", "normalize": "candidates"}}
    assert experiment_from_dict(both, "test").criterion.normalize == "candidates"
    # a new-form run of the candidates' objective, its config.json and checkpoint as a memread before the key
    # wrote them (without it)
    cfg = experiment_from_dict({**base, "head": {"name": "as_reader", "emb": 8},
                                "criterion": {"name": "cloze_nll", "normalize": "candidates"},
                                "train": {"max_steps": 2, "batch_size": 16, "progress": False, "seed": 1}}, "test")
    new = tmp_path / "new"
    start_run(cfg, new, tmp_path).fit()
    raw = json.loads((new / "config.json").read_text())
    del raw["criterion"]["normalize"]
    (new / "config.json").write_text(json.dumps(raw))
    payload = torch.load(new / "checkpoint_last.pt", weights_only=True)
    saved = json.loads(payload["config"])
    del saved["criterion"]["normalize"]
    payload["config"] = json.dumps(saved)
    torch.save(payload, new / "checkpoint_last.pt")
    assert load_trained(new, tmp_path)[0].criterion.normalize == "candidates"
    trainer = resume_run(new, tmp_path, ["train.max_steps=3"])
    assert trainer.cfg.criterion.normalize == "candidates" and trainer.criterion.normalize == "candidates"
    trainer.fit()
    assert json.loads((new / "config.json").read_text())["criterion"]["normalize"] == "candidates"  # now written


@pytest.mark.parametrize("data, head", [({"name": "snli"}, {"name": "pair", "encoder": "deep_fusion", "emb": 8}),
                                        ({"name": "snli"}, {"name": "pair", "encoder": "shallow_fusion", "emb": 8}),
                                        ({"name": "iwslt14"}, {"name": "lstmn_deep", "emb": 8, "tgt_emb": 8})])
def test_the_fusion_decoders_tape_starts_as_the_readers(fixtures, data, head):
    from memread.config import experiment_from_dict
    from memread.heads.decoders.lstmn_fusion import LSTMNFusionDecoder
    from memread.tasks import Task

    for start in ("empty", "zero_slot"):
        cfg = experiment_from_dict({"data": data, "reader": {"name": "lstmn", "hidden": 8, "tape_start": start},
                                    "head": head}, "t")
        model = Task(cfg, fixtures).build_model(1)
        decoders = [m for m in model.modules() if isinstance(m, LSTMNFusionDecoder)]
        assert len(decoders) == 1 and decoders[0].cfg.tape_start == start
