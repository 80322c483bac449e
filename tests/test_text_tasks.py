"""Sentence classification and sentence-pair tasks (SST, SNLI, WikiQA heads) on in-memory examples:
vocabulary with vectors, the embedding's first-epoch scaling, pooling, padding invariance, per-question
ranking statistics, and that tiny models learn."""

from __future__ import annotations

import random

import pytest
import torch

from memread import metrics
from memread.config import ExperimentConfig, experiment_from_dict
from memread.criteria.answer_selection import AnswerSelectionConfig
from memread.criteria.classification import CrossEntropyConfig
from memread.data.pipelines.pair import PairPipeline, SNLIConfig, WikiQAConfig, question_batches
from memread.data.pipelines.sentence import SentencePipeline, SSTConfig
from memread.data.snli import PairExample
from memread.data.sst import SentimentExample
from memread.data.vocab import vocabulary
from memread.errors import MemreadError
from memread.heads.classifier import MLPHeadConfig
from memread.heads.pair import PairHeadConfig
from memread.modules.pooling import pool
from memread.modules.word_embedding import WordEmbedding
from memread.readers.nse import NSEConfig
from memread.readers.rnn import RNNReaderConfig
from memread.tasks import TASKS, Task
from memread.training.loop import set_epoch

POS, NEG, FILL = ["good", "great", "fine"], ["bad", "awful", "poor"], ["the", "film", "is", "a", "plot", "very"]


def sentence_task(root, examples, reader, data: SSTConfig | None = None, **head) -> Task:
    """An SST task over in-memory examples: ``data`` the [data] section, ``head`` the mlp head's keys."""
    data = data or SSTConfig(fine=False)
    cfg = ExperimentConfig(data, reader, MLPHeadConfig(**head), CrossEntropyConfig())
    TASKS["classify"].check(cfg, "test")
    return Task(cfg, root, data=SentencePipeline(data, root, examples=examples))


def pair_task(root, examples, reader, data: SNLIConfig | WikiQAConfig | None = None, questions=None, **head) -> Task:
    """A pair task over in-memory examples (``questions``: split -> question index of every candidate)."""
    data = data or SNLIConfig()
    criterion = AnswerSelectionConfig() if data.outputs == 1 else CrossEntropyConfig()
    cfg = ExperimentConfig(data, reader, PairHeadConfig(**head), criterion)
    TASKS["pair"].check(cfg, "test")
    return Task(cfg, root, data=PairPipeline(data, root, examples=examples, questions=questions))


def sentiment(n: int, seed: int) -> list[SentimentExample]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        y = rng.randrange(2)
        words = [rng.choice(FILL) for _ in range(rng.randint(2, 7))]
        words.insert(rng.randrange(len(words) + 1), rng.choice(POS if y else NEG))
        out.append(SentimentExample(tuple(words), y))
    return out


def write_vectors(path, words, dim=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    with open(path, "w", encoding="utf-8") as f:
        for w in words:
            f.write(w + " " + " ".join(f"{v:.4f}" for v in torch.randn(dim, generator=g).tolist()) + "\n")


def test_vocabulary_adds_other_split_words_only_when_they_have_vectors(tmp_path):
    vec = tmp_path / "v.txt"
    write_vectors(vec, ["good", "unseen", "the"])
    vocab, found = vocabulary([["good", "movie"]], [["unseen", "nowhere"]], vec)
    assert "unseen" in vocab and "nowhere" not in vocab and "movie" in vocab
    assert set(found) == {"good", "unseen"}  # only words the texts use are kept
    vocab2, none = vocabulary([["good", "movie"]], [["unseen"]], None)
    assert "unseen" not in vocab2 and none is None


def test_sentence_task_loads_vectors_and_oov_policy(tmp_path):
    write_vectors(tmp_path / "v.txt", ["good", "bad"], dim=4)
    ex = {"train": [SentimentExample(("Good", "zzz"), 1)], "valid": [SentimentExample(("bad",), 0)],
          "test": [SentimentExample(("qqq",), 0)]}
    data = SSTConfig(fine=False, vectors="v.txt")
    task = sentence_task(tmp_path, ex, RNNReaderConfig(hidden=5), data, emb=4, oov="zero")
    model = task.build_model()
    emb = model.embedding
    v = task.vocab
    assert "bad" in v and "qqq" not in v  # a dev word with a vector joins; one without does not
    assert emb.pretrained[v.id("good")] and emb.pretrained[v.id("bad")] and not emb.pretrained[v.id("zzz")]
    assert torch.all(emb.weight[v.id("zzz")] == 0)
    emb_g = sentence_task(tmp_path, ex, RNNReaderConfig(hidden=5), data, emb=4, oov="gaussian").build_model().embedding
    assert emb_g.weight[v.id("zzz")].abs().sum() > 0
    assert torch.equal(emb_g.weight[v.id("good")], emb.weight[v.id("good")])
    with pytest.raises(MemreadError, match="4 dimensions|dimensions"):
        sentence_task(tmp_path, ex, RNNReaderConfig(hidden=5), SSTConfig(vectors="v.txt"), emb=6).build_model()
    with pytest.raises(MemreadError, match="data.vectors"):
        sentence_task(tmp_path, ex, RNNReaderConfig(hidden=5), SSTConfig(vectors="missing.txt"), emb=4)


def test_first_epoch_scale_and_freeze():
    def grads(scale, epoch, freeze=False):
        torch.manual_seed(0)
        e = WordEmbedding(5, 3, 0, freeze=freeze, first_epoch_scale=scale)
        e.pretrained[torch.tensor([1, 2])] = True
        e.set_epoch(epoch)
        if freeze:
            return e.weight.requires_grad
        e(torch.tensor([1, 2, 3, 4])).pow(2).sum().backward()
        return e.weight.grad

    full, scaled = grads(1.0, 0), grads(0.35, 0)
    assert torch.allclose(scaled[1:3], 0.35 * full[1:3]) and torch.equal(scaled[3:], full[3:])
    assert torch.equal(grads(0.35, 1), full)  # second epoch: all rows updated normally
    assert torch.all(grads(0.0, 0)[1:3] == 0)  # SNLI LSTMN: only OOV rows move in the first epoch
    assert grads(1.0, 0, freeze=True) is False
    with pytest.raises(MemreadError, match="first_epoch_scale"):
        MLPHeadConfig(freeze=True, first_epoch_scale=0.35)
    with pytest.raises(MemreadError, match="first_epoch_scale"):
        PairHeadConfig(freeze=True, first_epoch_scale=0.0)


def test_pool_ignores_padding():
    states = torch.tensor([[[1.0], [3.0], [100.0]], [[2.0], [4.0], [6.0]]])
    mask = torch.tensor([[True, True, False], [True, True, True]])
    assert pool(states, mask, "mean").flatten().tolist() == [2.0, 4.0]
    assert pool(states, mask, "last").flatten().tolist() == [3.0, 6.0]
    assert pool(states, mask, "max").flatten().tolist() == [3.0, 6.0]


def _train(task, steps, lr=0.01, batch=16):
    """Adam on the task's training batches (the loop's first-epoch signal each epoch), then the test metrics."""
    model = task.build_model(0)
    criterion = task.build_criterion(model)
    opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=lr)
    epoch = 0
    done = 0
    while done < steps:
        set_epoch(model, epoch)
        for b in task.batches("train", batch, epoch, seed=1):
            model.train()
            loss = criterion(model(b), b).value
            opt.zero_grad()
            loss.backward()
            opt.step()
            done += 1
            if done == steps:
                break
        epoch += 1
    model.eval()
    stats = {}
    with torch.no_grad():
        for b in task.batches("test", 64):
            for k, v in criterion(model(b), b).stats.items():
                stats[k] = stats.get(k, 0.0) + float(v)
    return criterion.summarize(stats)


@pytest.mark.parametrize("reader", [RNNReaderConfig(hidden=16), NSEConfig(hidden=16)])
def test_tiny_sentence_classifier_learns(tmp_path, reader):
    ex = {"train": sentiment(400, 0), "valid": sentiment(50, 1), "test": sentiment(100, 2)}
    task = sentence_task(tmp_path, ex, reader, emb=16, mlp=16, dropout=0.0, pool="mean")
    assert _train(task, 120)["accuracy"] >= 0.95


def entailment(n: int, seed: int) -> list[PairExample]:
    """Entailment: the hypothesis repeats two premise words; contradiction: adds "not"; neutral: new words."""
    rng = random.Random(seed)
    words = [f"w{i}" for i in range(20)]
    out = []
    for _ in range(n):
        prem = [rng.choice(words) for _ in range(rng.randint(3, 7))]
        y = rng.randrange(3)
        if y == 0:
            hyp = rng.sample(prem, 2)
        elif y == 2:
            hyp = ["not", *rng.sample(prem, 2)]
        else:
            hyp = ["maybe", rng.choice(words)]
        out.append(PairExample(tuple(prem), tuple(hyp), y))
    return out


@pytest.mark.slow  # trains 200 steps
@pytest.mark.parametrize("encoder,reader", [("siamese", RNNReaderConfig(hidden=16)), ("two", RNNReaderConfig(hidden=16)),
                                            ("attention", RNNReaderConfig(hidden=16)),
                                            ("mma", NSEConfig(hidden=16)), ("mma_attention", NSEConfig(hidden=16))])
def test_tiny_pair_classifier_learns(tmp_path, encoder, reader):
    ex = {"train": entailment(600, 0), "valid": entailment(50, 1), "test": entailment(150, 2)}
    task = pair_task(tmp_path, ex, reader, encoder=encoder, emb=16, mlp=32, dropout=0.0, pool="mean")
    assert _train(task, 200)["accuracy"] >= 0.9


def test_mma_needs_nse_and_uses_the_first_memory(tmp_path):
    ex = {s: entailment(8, i) for i, s in enumerate(("train", "valid", "test"))}
    with pytest.raises(MemreadError, match="reader.name"):
        pair_task(tmp_path, ex, RNNReaderConfig(hidden=8), encoder="mma", emb=8)
    raw = {"data": {"name": "snli"}, "reader": {"name": "lstm", "hidden": 8}, "head": {"name": "pair", "encoder": "mma"}}
    with pytest.raises(MemreadError, match=r"exp.toml: head.encoder = 'mma' needs a reader with shared_memory.*reader.name = 'lstm'.*nse"):
        experiment_from_dict(raw, "exp.toml")
    task = pair_task(tmp_path, ex, NSEConfig(hidden=8), encoder="mma_attention", emb=8, mlp=8)
    model = task.build_model(0).double().eval()
    b = task.batches("test", 8)[0]
    enc = model.encode(b)
    assert torch.allclose(enc.attention.sum(-1), torch.ones(len(b["label"]), dtype=torch.float64))
    assert torch.all(enc.attention[~b["first_mask"]] == 0)
    changed = dict(b, first=b["first"].flip(1) * b["first_mask"])  # a different first text
    assert not torch.allclose(model.encode(changed).v, enc.v)  # the second text's reading saw the first's memory


@pytest.mark.parametrize("encoder,reader", [("two", RNNReaderConfig(hidden=6)), ("mma_attention", NSEConfig(hidden=6))])
def test_pair_alone_equals_pair_in_padded_batch(tmp_path, encoder, reader):
    ex = {s: entailment(12, i) for i, s in enumerate(("train", "valid", "test"))}
    task = pair_task(tmp_path, ex, reader, encoder=encoder, emb=6, mlp=8)
    model = task.build_model(0).double().eval()
    batch = task.batches("test", 12)[0]
    full = model(batch).logits
    for i in range(len(batch["label"])):
        n1, n2 = int(batch["first_mask"][i].sum()), int(batch["second_mask"][i].sum())
        one = {"first": batch["first"][i : i + 1, :n1], "first_mask": batch["first_mask"][i : i + 1, :n1],
               "second": batch["second"][i : i + 1, :n2], "second_mask": batch["second_mask"][i : i + 1, :n2],
               "label": batch["label"][i : i + 1]}
        assert torch.allclose(model(one).logits, full[i : i + 1], atol=1e-10)


def test_question_batches_keep_questions_whole():
    q = [0, 0, 0, 1, 1, 2, 3, 3, 3, 3, 4]
    groups = question_batches(q, 4)
    assert [i for g in groups for i in g] == list(range(len(q)))
    for g in groups:
        assert all(q[i] not in {q[j] for h in groups if h is not g for j in h} for i in g)
    assert groups == [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9], [10]]


def test_wikiqa_statistics_equal_map_mrr_of_all_scores(tmp_path):
    rng = random.Random(0)
    ex, questions = [], []
    for q in range(9):
        labels = [int(rng.random() < 0.3) for _ in range(rng.randint(1, 5))]
        for y in labels:
            ex.append(PairExample(("what", f"w{q}"), (f"w{rng.randrange(9)}", "is"), y))
            questions.append(q)
    task = pair_task(tmp_path, {"train": ex, "valid": ex, "test": ex}, RNNReaderConfig(hidden=6), WikiQAConfig(),
                     questions={"test": questions}, emb=6, mlp=8)
    model = task.build_model(0).eval()
    criterion = task.build_criterion(model)
    assert criterion.selection_metric == "map"
    stats, scores = {}, []
    with torch.no_grad():
        for b in task.batches("test", 4):
            out = model(b)
            scores.extend(out.logits.tolist())
            for k, v in criterion(out, b).stats.items():
                stats[k] = stats.get(k, 0.0) + float(v)
    got = criterion.summarize(stats)
    per_q = {}
    for s, e, q in zip(scores, ex, questions):
        per_q.setdefault(q, ([], []))
        per_q[q][0].append(s)
        per_q[q][1].append(e.label)
    want = metrics.map_mrr(per_q.values())
    assert got["questions"] == want["questions"] > 0
    assert got["map"] == pytest.approx(want["map"]) and got["mrr"] == pytest.approx(want["mrr"])


# ------------------------------------------------------------------ the experiment file: sections

@pytest.mark.parametrize("raw, message", [
    ({"data": {"name": "sst", "pool": "mean"}, "head": {"name": "mlp"}}, "unknown key 'data.pool'"),
    ({"data": {"name": "sst"}, "head": {"name": "mlp", "vectors": "g.txt"}}, "unknown key 'head.vectors'"),
    ({"data": {"name": "snli", "fine": True}, "head": {"name": "pair"}}, "unknown key 'data.fine'"),
    ({"data": {"name": "sst"}, "head": {"name": "mlp", "encoder": "two"}}, "unknown key 'head.encoder'"),
    ({"data": {"name": "sst"}, "head": {"name": "pair"}}, "head 'pair' does not serve 'classify' data"),
    ({"data": {"name": "snli"}, "head": {"name": "mlp"}}, "head 'mlp' does not serve 'pair' data"),
    ({"data": {"name": "sst"}, "head": {"name": "mlp"}, "criterion": {"name": "answer_selection"}}, "does not serve 'classify'"),
    ({"data": {"name": "wikiqa"}, "head": {"name": "pair"}, "criterion": {"name": "cross_entropy"}},
     "criterion 'cross_entropy' does not fit data 'wikiqa' .one relevance score per candidate.; use criterion.name = 'answer_selection'"),
    ({"data": {"name": "snli"}, "head": {"name": "pair"}, "criterion": {"name": "answer_selection"}},
     "criterion 'answer_selection' does not fit data 'snli' .3 classes.; use criterion.name = 'cross_entropy'"),
    ({"data": {"name": "snli"}, "head": {"name": "pair", "encoder": "deep_fusion"}},
     "head.encoder = 'deep_fusion' needs a reader with memory_tape .*reader.name = 'lstm' has none .use one of lstmn."),
    ({"data": {"name": "sst"}, "head": {"name": "mlp", "dropout": 1.0}}, "key 'head.dropout' must be in"),
])
def test_sections_are_airtight(raw, message):
    with pytest.raises(MemreadError, match=message):
        experiment_from_dict({"reader": {"name": "lstm"}, **raw}, "exp.toml")


def test_dataset_default_criteria():
    for data, criterion in (("sst", "cross_entropy"), ("snli", "cross_entropy"), ("wikiqa", "answer_selection")):
        head = "mlp" if data == "sst" else "pair"
        cfg = experiment_from_dict({"data": {"name": data}, "reader": {"name": "lstm"}, "head": {"name": head}}, "exp")
        assert cfg.criterion.name == criterion


def test_the_loop_epoch_reaches_the_embedding(tmp_path):
    """Batches carry no epoch: the loop's set_epoch tells the embedding (first_epoch_scale = 0: pretrained
    rows frozen in epoch 0 only)."""
    write_vectors(tmp_path / "v.txt", ["good", "bad"], dim=4)
    ex = {s: sentiment(16, i) for i, s in enumerate(("train", "valid", "test"))}
    task = sentence_task(tmp_path, ex, RNNReaderConfig(hidden=5), SSTConfig(fine=False, vectors="v.txt"), emb=4,
                         first_epoch_scale=0.0)
    model = task.build_model(0)
    criterion = task.build_criterion(model)
    b = task.batches("train", 16, 0, 1)[0]
    assert "epoch" not in b
    rows = model.embedding.pretrained.nonzero().flatten()
    assert len(rows) == 2
    for epoch, frozen in ((0, True), (1, False)):
        set_epoch(model, epoch)
        model.zero_grad()
        criterion(model(b), b).value.backward()
        assert bool((model.embedding.weight.grad[rows] == 0).all()) == frozen
