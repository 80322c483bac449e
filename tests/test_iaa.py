"""The iterative alternating attention reader, the AS Reader and pointer-sum (Sordoni et al. 2016).

Test ladder: hand-checked pointer-sum; shapes; the batched IAA equals a naive per-example,
per-step reference of the paper's equations (float64, padded batch); the fixed-query ablation is
uniform; every parameter gets a gradient; one question alone equals the same question in a padded
batch; a tiny model learns; ensembles average distributions; the CLI runs end to end."""

import json
import math
import unittest.mock

import pytest
import torch

from conftest import Fresh, tiny_config
from memread.cli import main
from memread.config import ExperimentConfig, TrainConfig, experiment_from_dict
from memread.criteria.cloze import ClozeNLLConfig
from memread.data.cbt import ClozeExample
from memread.data.pipelines.cloze import BabiClozeConfig, ClozeFilesConfig, ClozePipeline, StoriesClozeConfig
from memread.tools.ensemble import answer_distributions, ensemble
from memread.errors import MemreadError
from memread.experiment import load_trained, start_run
from memread.modules.dropout import Dropout
from memread.modules.loop_linears import LoopLinears
from memread.modules.memory_reads import MemoryReads
from memread.modules.pointer_sum import candidate_log_probs, occurrences, pointer_sum
from memread.heads.as_reader import AttentionSumReader
from memread.readers.birnn import BiRNNReader, reversal_index
from memread.heads import HEADS
from memread.heads.cloze import ASReaderHeadConfig, IAAHeadConfig
from memread.heads.iaa import IterativeAlternatingAttention
from memread.readers.rnn import RNNReader, RNNReaderConfig
from memread.data.batching import length_buckets
from memread.tasks import Task

BIGRU = RNNReaderConfig(name="gru", hidden=6, bidirectional=True)


def cloze_task(head="iaa", data=None, root=".", examples=None, emb_l2=0.0, **options) -> Task:
    """A cloze task (data + BIGRU + head + cloze_nll); ``options`` go to the head's config."""
    data = data if data is not None else StoriesClozeConfig(stories=40)
    cfg = ExperimentConfig(data=data, reader=BIGRU, head=HEADS[head].Config(**{"emb": 8, **options}),
                           criterion=ClozeNLLConfig(emb_l2=emb_l2))
    return Task(cfg, root, data=ClozePipeline(data, root, examples=examples))


def stories_task(head="iaa", n=40, bucket=0, **options) -> Task:
    return cloze_task(head, StoriesClozeConfig(stories=n, bucket=bucket), **options)


def loss_of(task: Task, model, batch):
    return task.build_criterion(model)(model(batch), batch)


# ----------------------------------------------------------------------------- pointer-sum


def test_pointer_sum_hand_checked_with_a_repeated_candidate():
    doc_words = torch.tensor([[5, 7, 5, 9, 7, 5, 8]])  # 5 three times, 7 twice; 8 is no candidate
    attention = torch.tensor([[0.1, 0.2, 0.3, 0.1, 0.1, 0.1, 0.1]])
    cand_words = torch.tensor([[5, 7, 9, -2]])  # the last one is padding
    doc_mask, cand_mask = torch.ones(1, 7, dtype=torch.bool), torch.tensor([[True, True, True, False]])
    hits = occurrences(doc_words, doc_mask, cand_words, cand_mask)  # (1, 7, 4)
    assert hits.shape == (1, 7, 4) and hits[0, :, 0].tolist() == [True, False, True, False, False, True, False]
    assert pointer_sum(attention, hits)[0].tolist() == pytest.approx([0.5, 0.3, 0.1, 0.0])
    log_p = candidate_log_probs(attention, hits, cand_mask)  # renormalised over the candidates: / 0.9
    assert log_p[0, :3].exp().tolist() == pytest.approx([0.5 / 0.9, 0.3 / 0.9, 0.1 / 0.9])
    assert log_p[0, 3] == float("-inf")


def test_occurrences_never_count_the_documents_padding():
    """A padded document position holds whatever id the batch pads with, which may be a candidate's: the document
    mask keeps it out of the candidate's occurrences and so out of its pointer sum."""
    doc_words = torch.tensor([[5, 7, 5, 0, 0], [7, 0, 0, 0, 0]])  # padded with 0, the first example's candidate
    doc_mask = torch.tensor([[True, True, True, False, False], [True, False, False, False, False]])
    cand_words = torch.tensor([[5, 0], [7, 0]])  # 0: a real candidate of the first, padding in the second
    cand_mask = torch.tensor([[True, True], [True, False]])
    hits = occurrences(doc_words, doc_mask, cand_words, cand_mask)
    assert hits[0, :, 0].tolist() == [True, False, True, False, False]
    assert not hits[0, :, 1].any() and not hits[1, :, 1].any()  # the pad id occurs only where there is no document
    assert hits[1, :, 0].tolist() == [True, False, False, False, False]
    attention = torch.tensor([[0.2, 0.3, 0.1, 0.25, 0.15], [0.6, 0.1, 0.1, 0.1, 0.1]])
    assert pointer_sum(attention, hits).flatten().tolist() == pytest.approx([0.3, 0.0, 0.6, 0.0])


def test_pointer_sum_tells_apart_words_the_vocabulary_does_not_know():
    train = [ClozeExample([["Anna", "met", "Boris", "."]], ["XXXXX", "met", "Boris"], "Anna", ["Anna", "Boris"])]
    test = [ClozeExample([["Zed", "met", "Yul", "and", "Zed", "."]], ["XXXXX", "met", "Yul"], "Zed", ["Yul", "Zed"])]
    task = cloze_task("iaa", emb=4, examples={"train": train, "test": test})
    batch = task.batches("test", 1)[0]
    assert batch["doc"][0, 0] == batch["doc"][0, 2] == task.vocab.unk_id  # both unknown to the vocabulary
    assert batch["doc_words"][0].tolist() == [0, 1, 2, 3, 0, 4] and batch["cand_words"][0].tolist() == [2, 0]


# ----------------------------------------------------------------------------- the IAA equations


def naive_iaa(m: IterativeAlternatingAttention, q: torch.Tensor, d: torch.Tensor, fixed: bool):
    """Sections 3.2-3.3 for one unpadded example, one step and one position at a time."""
    S, T = m.cfg.inference, m.cfg.steps
    s = torch.zeros(S, dtype=q.dtype)
    sigmoid = torch.sigmoid

    def softmax(scores):
        e = [math.exp(x - max(scores)) for x in scores]
        return torch.tensor([x / sum(e) for x in e], dtype=q.dtype)

    def gate(g, x):  # 2-layer feed-forward, sigmoid output
        return sigmoid(g.out.weight @ torch.relu(g.hidden.weight @ x + g.hidden.bias) + g.out.bias)

    q_atts, d_atts = [], []
    for _ in range(T):
        if fixed:
            q_att = torch.full((len(q),), 1.0 / len(q), dtype=q.dtype)
        else:
            key = m.A_q.weight @ s + m.A_q.bias  # A_q s_{t-1} + a_q
            q_att = softmax([float(q[i] @ key) for i in range(len(q))])
        q_t = sum(q_att[i] * q[i] for i in range(len(q)))
        key = m.A_d.weight @ torch.cat([s, q_t]) + m.A_d.bias  # A_d [s, q_t] + a_d
        d_att = softmax([float(d[i] @ key) for i in range(len(d))])
        d_t = sum(d_att[i] * d[i] for i in range(len(d)))
        q_atts.append(q_att)
        d_atts.append(d_att)
        x = torch.cat([s, q_t, d_t, q_t * d_t])
        r_q, r_d = gate(m.query_gate, x), gate(m.doc_gate, x)
        inp = torch.cat([r_q * q_t, r_d * d_t])
        I, b = m.gru.I.weight, m.gru.I.bias
        H_r, H_u, H_h = m.gru.H_ru.weight[:S], m.gru.H_ru.weight[S:], m.gru.H_h.weight
        r = sigmoid(I[:S] @ inp + b[:S] + H_r @ s)  # equation (1)
        u = sigmoid(I[S : 2 * S] @ inp + b[S : 2 * S] + H_u @ s)
        h_bar = torch.tanh(I[2 * S :] @ inp + b[2 * S :] + H_h @ (r * s))
        s = (1 - u) * s + u * h_bar
    return q_atts, d_atts


@pytest.mark.parametrize("fixed", [False, True])
def test_batched_iaa_equals_the_naive_reference_on_a_padded_batch(fixed):
    torch.manual_seed(0)
    m = IterativeAlternatingAttention(IAAHeadConfig(steps=4, inference=5, gate_hidden=6, fixed_query=fixed), enc_size=4).double()
    for p in m.parameters():
        torch.nn.init.normal_(p, 0.0, 0.5)  # large enough that every term matters
    q_len, d_len = [3, 5, 1], [7, 4, 2]
    q = torch.randn(3, 5, 4, dtype=torch.float64)
    d = torch.randn(3, 7, 4, dtype=torch.float64)
    q_mask = torch.arange(5) < torch.tensor(q_len).unsqueeze(1)
    d_mask = torch.arange(7) < torch.tensor(d_len).unsqueeze(1)
    out = m(q, q_mask, d, d_mask, trace=True)
    assert out.query_trace.shape == (3, 4, 5) and out.doc_trace.shape == (3, 4, 7) and out.doc_attention.shape == (3, 7)
    assert torch.equal(out.doc_attention, out.doc_trace[:, -1])
    for b in range(3):
        with torch.no_grad():
            q_atts, d_atts = naive_iaa(m, q[b, : q_len[b]], d[b, : d_len[b]], fixed)
        for t in range(4):
            torch.testing.assert_close(out.query_trace[b, t, : q_len[b]], q_atts[t], rtol=1e-10, atol=1e-12)
            torch.testing.assert_close(out.doc_trace[b, t, : d_len[b]], d_atts[t], rtol=1e-10, atol=1e-12)
        assert out.query_trace[b, :, q_len[b] :].abs().sum() == 0 and out.doc_trace[b, :, d_len[b] :].abs().sum() == 0


def test_memory_reads_give_autograd_gradients():
    torch.manual_seed(0)
    D = torch.randn(3, 7, 5, dtype=torch.float64, requires_grad=True)
    W = torch.randn(5, 5, dtype=torch.float64, requires_grad=True)

    def loss(deferred: bool):
        reads = MemoryReads(D)
        k, total = torch.ones(3, 5, dtype=torch.float64), 0
        for _ in range(4):  # scores, attention, glimpse, next key: the shape of the IAA loop
            s = reads.scores(k) if deferred else torch.bmm(D, k.unsqueeze(-1)).squeeze(-1)
            g = reads.glimpse(torch.softmax(s, -1)) if deferred else torch.bmm(torch.softmax(s, -1).unsqueeze(1), D).squeeze(1)
            k = torch.tanh(g @ W)
            total = total + (g ** 2).sum() + s.sin().sum()
        return total + D.pow(3).sum()  # a use of D outside the reads

    grads = [torch.autograd.grad(loss(deferred), (D, W)) for deferred in (False, True)]
    for plain, deferred in zip(*grads):
        torch.testing.assert_close(deferred, plain, rtol=1e-12, atol=1e-12)
    with torch.no_grad():
        assert not MemoryReads(D).deferred


def test_gate_and_attention_shapes():
    m = IterativeAlternatingAttention(IAAHeadConfig(steps=2, inference=7, gate_hidden=0), enc_size=6)
    assert m.query_gate.hidden.in_features == 7 + 3 * 6 and m.query_gate.out.out_features == 6  # R^{s+6h} -> R^{2h}
    assert m.query_gate.hidden.out_features == 6  # gate_hidden 0 = 2h
    assert m.A_d.in_features == 7 + 6 and m.A_d.out_features == 6  # A_d in R^{2h x (s+2h)}
    assert m.A_q.in_features == 7 and m.A_q.bias.shape == (6,)  # A_q, a_q
    assert m.gru.I.in_features == 12 and m.gru.hidden_size == 7
    r = m.doc_gate(torch.randn(3, 7 + 18))
    assert r.shape == (3, 6) and bool(((r > 0) & (r < 1)).all())
    assert IterativeAlternatingAttention(IAAHeadConfig(fixed_query=True), 6).A_q is None


def test_fixed_query_attention_is_uniform_at_every_step():
    task = stories_task(fixed_query=True, steps=3, inference=8)
    model = task.build_model(0).eval()
    batch = task.batches("valid", 4)[0]
    reading = model.read(batch, trace=True)
    lengths = batch["query_mask"].sum(1, keepdim=True).double()
    expected = batch["query_mask"].double() / lengths  # (B, Tq)
    for t in range(3):
        torch.testing.assert_close(reading.iaa.query_trace[:, t].double(), expected)


# T = 3: the answer reads d_{i,T}, so the inference GRU updates T - 1 times, and its recurrent
# weights multiply s_0 = 0 in the first update: they get a gradient from the second update on
@pytest.mark.parametrize("head,options", [("iaa", dict(steps=3, inference=8)), ("iaa", dict(steps=3, inference=8, fixed_query=True)),
                                          ("as_reader", {}), ("iaa", dict(steps=3, inference=8, share_encoder=True))])
def test_every_parameter_gets_a_gradient(head, options):
    task = stories_task(head, init="paper", **options)
    model = task.build_model(0)
    loss_of(task, model, task.batches("train", 8)[0]).value.backward()
    for name, p in model.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, name
    assert (model.query_reader is None) == bool(options.get("share_encoder"))


@pytest.mark.parametrize("head", ["iaa", "as_reader"])
def test_one_question_alone_equals_it_in_a_padded_batch(head):
    task = stories_task(head, steps=3, inference=8) if head == "iaa" else stories_task(head)
    model = task.build_model(0).eval()
    enc = task.data.encoded("valid")
    order = sorted(range(len(enc)), key=lambda i: len(enc[i]["doc"]))
    group = [order[0], order[-1], order[len(order) // 2]]  # shortest among longer ones: padded
    together = model(task.data.batches_of(enc, [group])[0])
    for row, i in enumerate(group):
        alone = model(task.data.batches_of(enc, [[i]])[0])
        n, c = len(enc[i]["doc"]), len(enc[i]["cands"])
        torch.testing.assert_close(together.logits[row, :c], alone.logits[0], rtol=1e-5, atol=1e-6)
        assert bool((together.logits[row, c:] == float("-inf")).all())
        torch.testing.assert_close(together.attention[row, :n], alone.attention[0], rtol=1e-5, atol=1e-6)
        assert together.attention[row, n:].abs().sum() == 0


@pytest.mark.parametrize("cell,layers", [("gru", 1), ("lstm", 2)])
def test_unpacked_bidirectional_encoder_equals_the_packed_one(cell, layers):
    torch.manual_seed(0)
    cfg = RNNReaderConfig(name=cell, hidden=5, layers=layers, bidirectional=True)
    packed, unpacked = RNNReader(cfg, 3), BiRNNReader(cfg, 3)
    with torch.no_grad():  # the same weights: direction d of layer l
        for rnns, suffix in ((unpacked.forward_rnns, ""), (unpacked.backward_rnns, "_reverse")):
            for layer, rnn in enumerate(rnns):
                for name, p in rnn.named_parameters():  # weight_ih_l0 of layer l -> weight_ih_l{l}
                    p.copy_(getattr(packed.rnn, name.replace("l0", f"l{layer}") + suffix))
    x = torch.randn(3, 6, 3)
    mask = torch.arange(6) < torch.tensor([[6], [2], [4]])
    a, b = packed(x, mask).states, unpacked(x, mask).states
    torch.testing.assert_close(a[mask], b[mask])
    assert reversal_index(mask)[1].tolist() == [1, 0, 2, 3, 4, 5]


def test_as_reader_equals_its_equations():
    torch.manual_seed(0)
    gru = torch.nn.GRU(3, 4, batch_first=True, bidirectional=True)
    q, d = torch.randn(1, 5, 3), torch.randn(1, 9, 3)
    q_states, d_states = gru(q)[0], gru(d)[0]
    g = torch.cat([q_states[0, -1, :4], q_states[0, 0, 4:]])  # forward last, backward first
    expected = torch.softmax(d_states[0] @ g, dim=0)
    got = AttentionSumReader(bidirectional=True)(q_states, torch.ones(1, 5, dtype=torch.bool), d_states, torch.ones(1, 9, dtype=torch.bool))
    torch.testing.assert_close(got[0], expected)
    assert sum(p.numel() for p in AttentionSumReader(True).parameters()) == 0


def test_paper_init_and_embedding_l2():
    task = stories_task("iaa", steps=2, inference=8, init="paper", emb_l2=1e-3)
    model = task.build_model()
    for name, p in model.named_parameters():
        if "bias" in name.rsplit(".", 1)[-1]:
            assert p.abs().sum() == 0, name
    W = model.reader.backward_rnns[0].weight_hh_l0  # (3h, h): one orthogonal block per gate
    for block in W.split(6):
        torch.testing.assert_close(block @ block.T, torch.eye(6), atol=1e-5, rtol=0)
    H = model.iaa.gru.H_h.weight
    torch.testing.assert_close(H @ H.T, torch.eye(8), atol=1e-5, rtol=0)
    assert 0.04 < model.iaa.A_d.weight.std() < 0.06
    assert model.embedding.weight[task.vocab.pad_id].abs().sum() == 0
    loss = loss_of(task, model, task.batches("train", 8)[0])
    nll = loss.stats["nll"] / loss.stats["count"]
    assert loss.value.item() == pytest.approx(nll.item() + 1e-3 * model.embedding.weight.pow(2).sum().item(), rel=1e-5)


def test_config_rejects_options_of_another_head_or_dataset():
    def experiment(data=None, head=None, reader=None):
        return experiment_from_dict({"data": data or {"name": "stories"}, "head": head or {"name": "pointer"},
                                     "reader": reader or {"name": "gru"}}, "exp.toml")

    with pytest.raises(MemreadError, match="unknown key 'head.steps'"):
        experiment(head={"name": "pointer", "steps": 3})
    with pytest.raises(MemreadError, match="unknown key 'data.tasks'"):
        experiment(data={"name": "stories", "tasks": [1]})
    with pytest.raises(MemreadError, match="unknown key 'head.share_encoder'"):
        experiment(head={"name": "final_state", "share_encoder": True})
    with pytest.raises(MemreadError, match="key 'head.steps' must be at least 1"):
        experiment(head={"name": "iaa", "steps": 0})
    with pytest.raises(MemreadError, match="head 'final_state' .* reader 'nse' carries no state"):
        experiment(head={"name": "final_state"}, reader={"name": "nse"})
    with pytest.raises(MemreadError, match=r"key 'data.tasks' holds bAbI task numbers 1-20, got \[1, 21\]"):
        experiment(data={"name": "babi", "tasks": [1, 21]})
    with pytest.raises(MemreadError, match="head 'lm' does not serve 'cloze' data"):
        experiment(head={"name": "lm"})
    assert ASReaderHeadConfig(share_encoder=True).share_encoder
    assert experiment(head={"name": "as_reader", "share_encoder": True}).head.share_encoder


def test_length_buckets_are_deterministic_complete_and_pad_less():
    lengths = [int(x) for x in torch.randint(5, 500, (1000,), generator=torch.Generator().manual_seed(0))]
    g = lambda epoch: torch.Generator().manual_seed(7 * 1_000_003 + epoch)  # noqa: E731
    a, b = length_buckets(lengths, 32, 10, g(0)), length_buckets(lengths, 32, 10, g(0))
    assert a == b and a != length_buckets(lengths, 32, 10, g(1))
    assert sorted(i for batch in a for i in batch) == list(range(1000))

    def padding(batches):
        return 1 - sum(lengths[i] for bt in batches for i in bt) / sum(max(lengths[i] for i in bt) * len(bt) for bt in batches)

    plain = [list(range(k, min(k + 32, 1000))) for k in range(0, 1000, 32)]
    assert padding(a) < 0.1 < 0.3 < padding(plain)
    task = stories_task("iaa", n=200, bucket=4)
    assert task.batches("train", 16, 3, 1).groups == task.batches("train", 16, 3, 1).groups  # resume sees the same


def test_cnn_and_babi_questions_through_the_task(fixtures):
    cnn = cloze_task("as_reader", ClozeFilesConfig(name="cnn", train_file="cnn", valid_file="cnn", test_file="cnn"), root=fixtures)
    batch = cnn.batches("test", 2)[0]
    assert batch["cand_mask"].sum(1).tolist() == [5, 3]  # candidates: the entities of each document
    out = cnn.build_model(0)(batch)
    assert out.logits.shape == (2, 5) and out.logits[1, 3:].eq(float("-inf")).all()
    babi = cloze_task("iaa", BabiClozeConfig(dir="babi", tasks=(1, 6)), root=fixtures, steps=2, inference=8)
    assert [len(babi.data.examples(s)) for s in ("train", "valid", "test")] == [8 + 3, 1 + 1, 4 + 4]  # valid: last tenth
    assert len(babi.data.encoded("train")) == 8 and babi.data.dropped["train"] == 3  # yes/no answers are not in the story
    model = babi.build_model()
    criterion = babi.build_criterion(model)
    batch = babi.batches("test", 10)[0]
    stats = criterion(model(batch), batch).stats
    metrics = criterion.summarize({k: float(v) for k, v in stats.items()})
    assert metrics["count"] == 8 and metrics["accuracy_qa6"] == 0.0 and 0.0 <= metrics["accuracy_qa1"] <= 1.0


# ----------------------------------------------------------------------------- training and runs


def tiny_experiment(head="iaa", seed=1, steps=4, stories=200, **options):
    if head == "iaa":
        options = {"steps": 3, "inference": 24, **options}
    return ExperimentConfig(data=StoriesClozeConfig(stories=stories, bucket=4), head=HEADS[head].Config(emb=24, **options),
                            reader=RNNReaderConfig(name="gru", hidden=24, bidirectional=True), criterion=ClozeNLLConfig(),
                            train=TrainConfig(lr=5e-3, batch_size=32, epochs=100, max_steps=steps, seed=seed,
                                              progress=False, log_every=1000))


@pytest.mark.slow  # trains 120 steps
def test_tiny_iaa_learns_the_stories(tmp_path):
    torch.set_num_threads(1)
    start_run(tiny_experiment(steps=120, stories=1000), tmp_path / "run", tmp_path).fit()
    valid = [json.loads(l) for l in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines() if '"valid"' in l]
    assert valid[-1]["accuracy"] > 0.8 > 0.4 > valid[0]["accuracy"] - 0.2  # chance is about 1 in 6


def test_ensemble_averages_the_answer_distributions(tmp_path):
    runs = [tmp_path / "a", tmp_path / "b"]
    start_run(tiny_experiment("iaa", seed=1), runs[0], tmp_path).fit()
    start_run(tiny_experiment("as_reader", seed=2), runs[1], tmp_path).fit()
    result = ensemble(runs, tmp_path, split="valid")
    members = [load_trained(r, tmp_path) for r in runs]
    probs = [answer_distributions(m, t, "valid", 7) for _, t, m in members]
    answers = [e["answer"] for e in members[0][1].data.encoded("valid")]
    mean = [(p + q) / 2 for p, q in zip(*probs)]
    assert all(math.isclose(float(p.sum()), 1.0, rel_tol=1e-5) for p in mean)
    assert result["accuracy"] == pytest.approx(sum(int(p.argmax()) == a for p, a in zip(mean, answers)) / len(answers))
    for member, p in zip(result["members"], probs):
        assert member["accuracy"] == pytest.approx(sum(int(x.argmax()) == a for x, a in zip(p, answers)) / len(answers))
    start_run(tiny_experiment("iaa", stories=100), tmp_path / "other", tmp_path).fit()
    with pytest.raises(MemreadError, match="reads other valid questions"):
        ensemble([runs[0], tmp_path / "other"], tmp_path, split="valid")


def test_cli_data_cloze_train_picture_ensemble_bench(fixtures, tmp_path, capsys):
    books = sorted(str(p) for p in (fixtures / "books").glob("*.txt"))
    out = tmp_path / "cloze"
    assert main(["data", "cloze", *books, "--out", str(out), "--valid-books", "beta", "--test-books", "gamma"]) == 0
    built = json.loads(capsys.readouterr().out)
    assert built["questions"]["NE"]["test"] > 0 and (out / "cloze_P_train.txt").exists()
    files = {f"{split}_file": out / f"cloze_NE_{split}.txt" for split in ("train", "valid", "test")}
    cfg = tiny_config(tmp_path, "iaa.toml", data={"name": "cbt", **files, "bucket": 2},
                      head={"name": "iaa", "steps": 3, "inference": 8, "emb": 8, "init": "paper", "dropout": 0.2},
                      criterion={"name": "cloze_nll", "emb_l2": 1e-4},
                      reader={"name": "gru", "hidden": 4, "bidirectional": True},
                      train=Fresh(max_steps=2, batch_size=8, progress=False))
    run = tmp_path / "run"
    assert main(["train", str(cfg), "--run-dir", str(run), "--data-root", str(tmp_path)]) == 0
    final = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert final["test"]["count"] == built["questions"]["NE"]["test"]
    assert main(["picture", str(run), "--index", "1", "--data-root", str(tmp_path)]) == 0
    pic = json.loads(capsys.readouterr().out)
    assert pic["steps"] == 3 and open(pic["png"], "rb").read(8) == b"\x89PNG\r\n\x1a\n"
    assert main(["ensemble", str(run), str(run), "--data-root", str(tmp_path)]) == 0
    ens = json.loads(capsys.readouterr().out)
    assert ens["accuracy"] == pytest.approx(final["test"]["accuracy"]) and ens["size"] == 2
    assert main(["bench", "iaa", "--batch", "2", "--set", "emb=8", "--set", "hidden=4", "--set", "inference=8",
                 "--set", "steps=2", "--set", "doc_len=30", "--set", "vocab=50", "--set", "n_batches=2",
                 "--set", "repeats=1"]) == 0
    bench = json.loads(capsys.readouterr().out)
    assert {"ratio", "step", "model", "padding_fraction", "padding_fraction_unbucketed"} <= bench.keys()
    assert bench["ratio"] == bench["step"]["ratio"] > 0
    assert main(["bench", "iaa", "--hidden", "8"]) == 2
    assert "takes its sizes from --set" in capsys.readouterr().err


def test_loop_linears_give_autograd_gradients():
    """The IAA loop with each weight's gradient formed once equals the loop with plain layer calls."""
    torch.manual_seed(0)
    m = IterativeAlternatingAttention(IAAHeadConfig(steps=4, inference=5, gate_hidden=6), enc_size=4).double()
    q = torch.randn(3, 5, 4, dtype=torch.float64, requires_grad=True)
    d = torch.randn(3, 7, 4, dtype=torch.float64, requires_grad=True)
    q_mask = torch.arange(5) < torch.tensor([3, 5, 1]).unsqueeze(1)
    d_mask = torch.arange(7) < torch.tensor([7, 4, 2]).unsqueeze(1)
    params = [q, d, *m.parameters()]

    def grads(plain: bool):
        if plain:  # every call through the layer itself: autograd sums the weight gradients step by step
            with unittest.mock.patch("memread.heads.iaa.LoopLinears", lambda: (lambda layer, x: layer(x))):
                loss = m(q, q_mask, d, d_mask).doc_attention.pow(2).sum()
        else:
            loss = m(q, q_mask, d, d_mask).doc_attention.pow(2).sum()
        return torch.autograd.grad(loss, params)

    for plain, deferred in zip(grads(True), grads(False)):
        torch.testing.assert_close(deferred, plain, rtol=1e-12, atol=1e-12)


def test_loop_linears_add_to_a_use_outside_the_loop():
    torch.manual_seed(0)
    layer = torch.nn.Linear(3, 2).double()
    xs = [torch.randn(4, 3, dtype=torch.float64) for _ in range(3)]

    def loss(deferred: bool):
        call = LoopLinears() if deferred else (lambda lay, x: lay(x))
        h = torch.zeros(4, 2, dtype=torch.float64)
        for x in xs:  # a recurrence through the layer
            h = torch.tanh(call(layer, x) + h.flip(-1))
        return h.sum() + layer(xs[0]).pow(2).sum()  # and a plain use

    for plain, deferred in zip(torch.autograd.grad(loss(False), list(layer.parameters())),
                               torch.autograd.grad(loss(True), list(layer.parameters()))):
        torch.testing.assert_close(deferred, plain, rtol=1e-12, atol=1e-12)


def test_dropout_keeps_units_with_probability_1_minus_p_and_rescales():
    torch.manual_seed(0)
    drop = Dropout(0.2)
    y = drop(torch.ones(200_000))
    kept = y != 0
    assert abs(kept.float().mean().item() - 0.8) < 0.005
    assert torch.allclose(y[kept], torch.full_like(y[kept], 1.25))
    assert torch.equal(drop.eval()(torch.ones(5)), torch.ones(5))
