"""Document-level sentiment (NSE section 4.4): the Tang et al. and aclImdb readers, sentence splitting,
bucketing by sentence count, masking at both levels, checkpointing, the metrics, and that tiny hierarchical models learn."""

from __future__ import annotations

import dataclasses
import io
import random
import tarfile
import tomllib
from collections import Counter

import pytest
import torch

from memread.config import ExperimentConfig, TrainConfig, apply_overrides, experiment_from_dict
from memread.criteria.document import RatingConfig, rating_sq_error
from memread.data.pipelines.document import DocumentPipeline, IMDBAclConfig, TangConfig, pad_documents
from memread.data.documents import ACL_IMDB_FILE, Document, dev_split, read_acl_imdb, read_tang, split_document
from memread.errors import MemreadError
from memread.heads.hierarchical import HierarchicalHeadConfig
from memread.readers.lstmn import LSTMNConfig
from memread.readers.nse import NSEConfig
from memread.readers.rnn import RNNReaderConfig
from memread.tasks import Task

READERS = {"nse": lambda h: NSEConfig(hidden=h), "lstm": lambda h: RNNReaderConfig(hidden=h),
           "lstmn": lambda h: LSTMNConfig(hidden=h)}


# ----------------------------------------------------------------------------- Tang et al. files


def test_tang_reader_on_fixtures(fixtures):
    docs = read_tang(fixtures / "tang" / "train.ss")
    assert [d.rating for d in docs] == [5, 1, 3, 4, 2]
    assert docs[0].user == "u1" and docs[0].product == "p1" and docs[0].id == "train.ss:1"
    assert docs[0].sentences == (("great", "food", ",", "friendly", "staff", "."), ("will", "come", "back", "!"))
    assert len(docs[1].sentences) == 3  # the empty sentence between two <sssss> is dropped
    assert docs[3].sentences == (("nice", "place"), ("good", "prices", "."))


@pytest.mark.parametrize("line, message", [
    ("u\tp\t3\tone tab only", r"bad.ss:2: expected 4 fields"),
    ("u\t\tp\t\tthree\t\ttext", r"bad.ss:2: rating must be an integer, got 'three'"),
    ("u\t\tp\t\t0\t\ttext", r"bad.ss:2: rating must be 1 or more"),
    ("u\t\tp\t\t3\t\t <sssss> ", r"bad.ss:2: the document has no words"),
])
def test_tang_reader_names_file_and_line(tmp_path, line, message):
    path = tmp_path / "bad.ss"
    path.write_text("u\t\tp\t\t2\t\tfine .\n" + line + "\n", encoding="utf-8")
    with pytest.raises(MemreadError, match=message):
        read_tang(path)


# ----------------------------------------------------------------------------- aclImdb


def test_split_document_sentences_and_tokens():
    text = ("Mr. Costner's film wasn't good.It was 7.5/10, well-made!!! But long<br /><br />The END? "
            "Yes")
    assert split_document(text) == [
        ["mr", ".", "costner", "'s", "film", "was", "n't", "good", "."],
        ["it", "was", "7.5/10", ",", "well-made", "!!!"],
        ["but", "long"],
        ["the", "end", "?"],
        ["yes"],
    ]
    assert split_document("<br /> <br/>") == []


def write_acl_tar(path, reviews, extra=()):
    """A tiny aclImdb-layout tar.gz: reviews are (split, polarity, id, rating, text)."""
    with tarfile.open(path, "w:gz") as tar:
        def add(name, data):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        add("aclImdb/README", b"readme")
        for split, pol, rid, rating, text in reviews:
            add(f"aclImdb/{split}/{pol}/{rid}_{rating}.txt", text.encode("utf-8"))
        for name, data in extra:
            add(name, data)


def tiny_reviews(n=20):
    out = []
    for split in ("train", "test"):
        for rid in range(n):
            out.append((split, "pos", rid, 7 + rid % 4, f"A great film {rid}. Loved it!"))
            out.append((split, "neg", rid, 1 + rid % 4, f"An awful film {rid}.<br />Boring."))
    return out


def test_acl_imdb_reader_on_a_tiny_archive(tmp_path):
    path = tmp_path / "acl.tar.gz"
    write_acl_tar(path, tiny_reviews(), extra=[("aclImdb/train/urls_pos.txt", b"http://x\n"),
                                               ("aclImdb/train/unsup/0_0.txt", b"no rating")])
    corpus = read_acl_imdb(path)
    assert read_acl_imdb(path) is corpus  # parsed once per process
    assert len(corpus["train"]) == len(corpus["test"]) == 40
    d = {doc.id: doc for doc in corpus["train"]}
    assert d["train/pos/5"].rating == 8 and d["train/neg/5"].rating == 2
    assert d["train/neg/3"].sentences == (("an", "awful", "film", "3", "."), ("boring", "."))
    assert corpus["train"][0].id == "train/neg/0" and corpus["train"][-1].id == "train/pos/19"
    assert all(doc.rating <= 4 for doc in corpus["test"] if "/neg/" in doc.id)

    train, dev = dev_split(corpus["train"], 0.1)
    assert len(dev) == 4 and len(train) == 36
    assert not {x.id for x in train} & {x.id for x in dev}
    shuffled = list(corpus["train"])
    random.Random(0).shuffle(shuffled)
    assert {x.id for x in dev_split(shuffled, 0.1)[1]} == {x.id for x in dev}  # by id, not by order


def test_acl_imdb_task_reads_the_archive_under_the_data_root(tmp_path):
    (tmp_path / ACL_IMDB_FILE).parent.mkdir(parents=True)
    write_acl_tar(tmp_path / ACL_IMDB_FILE, tiny_reviews())
    task = DocumentPipeline(IMDBAclConfig(dev_fraction=0.25), tmp_path)
    assert [len(task.documents(s)) for s in ("train", "valid", "test")] == [30, 10, 40]
    assert task.class_values == [1.0, 2.0, 3.0, 4.0, 7.0, 8.0, 9.0, 10.0]
    labels = {task.label(doc) for doc in task.documents("train")}
    assert labels <= set(range(8))
    polar = DocumentPipeline(IMDBAclConfig(labels="polarity"), tmp_path)
    assert all(polar.label(doc) == ("/pos/" in doc.id) for doc in polar.documents("test"))


@pytest.mark.parametrize("member, message", [
    ("aclImdb/train/pos/3_2.txt", "3_2.txt: rating 2 does not fit 'pos'"),
    ("aclImdb/train/neg/3_5.txt", "3_5.txt: rating 5 does not fit 'neg'"),
])
def test_acl_imdb_bad_member_is_named(tmp_path, member, message):
    path = tmp_path / "bad.tar.gz"
    write_acl_tar(path, tiny_reviews(2), extra=[(member, b"text")])
    with pytest.raises(MemreadError, match=message):
        read_acl_imdb(path)
    with pytest.raises(MemreadError, match="not found"):
        read_acl_imdb(tmp_path / "missing.tar.gz")


# ----------------------------------------------------------------------------- toy documents

GOOD, BAD, FILL = ["good", "great", "fine"], ["bad", "awful", "poor"], ["the", "film", "is", "a", "plot", "very", "and"]


def toy_docs(n: int, seed: int, ratings=(1, 2, 4, 5)) -> list[Document]:
    """Rating 4-5 documents have a positive word in one of their sentences, rating 1-2 a negative one."""
    rng = random.Random(seed)
    docs = []
    for i in range(n):
        rating = rng.choice(ratings)
        sents = [[rng.choice(FILL) for _ in range(rng.randint(1, 6))] for _ in range(rng.randint(1, 4))]
        target = sents[rng.randrange(len(sents))]
        target.insert(rng.randrange(len(target) + 1), rng.choice(GOOD if rating > 3 else BAD))
        docs.append(Document(f"toy/{seed}/{i}", tuple(tuple(s) for s in sents), rating))
    return docs


def toy_data(tmp_path, n=60, **cfg) -> DocumentPipeline:
    docs = {"train": toy_docs(n, 0), "valid": toy_docs(20, 1), "test": toy_docs(20, 2)}
    return DocumentPipeline(TangConfig(**cfg), tmp_path, documents=docs)


def toy_task(tmp_path, n=60, data=None, reader=None, **head) -> Task:
    """The hierarchical head (``head`` keys) over the toy documents (``data`` keys), a sentence LSTM of 8."""
    head = {"emb": 8, "doc_hidden": 8, "dropout": 0.0, "doc_dropout": 0.0, **head}
    cfg = ExperimentConfig(data=TangConfig(**(data or {})), reader=reader or RNNReaderConfig(hidden=8),
                           head=HierarchicalHeadConfig(**head), criterion=RatingConfig())
    return Task(cfg, tmp_path, data=toy_data(tmp_path, n, **(data or {})))


def test_bucketing_by_sentence_count_shuffled_per_seed_and_epoch(tmp_path):
    task = toy_data(tmp_path, n=80)
    counts = [len(d.sentences) for d in task.documents("train")]
    order = lambda epoch, seed=3: task.batches("train", 4, epoch, seed).groups  # noqa: E731
    groups = order(0)
    assert all(len({counts[i] for i in g}) == 1 for g in groups)
    assert sorted(i for g in groups for i in g) == list(range(80))
    assert order(0) == order(0) and order(1) != order(0) and order(0, seed=4) != order(0)
    batches = task.batches("train", 4, 0, 3)
    for i in range(len(batches)):
        b = batches[i]
        assert bool(b["sent_mask"].all())  # one bucket: no padded sentence
        assert b["ids"].shape[1] == counts[groups[i][0]] and "epoch" not in b  # the loop calls set_epoch
    ev = task.batches("valid", 4).groups
    ev_counts = [len(d.sentences) for d in task.documents("valid")]
    assert all(len({ev_counts[i] for i in g}) == 1 for g in ev)
    assert [ev_counts[g[0]] for g in ev] == sorted(ev_counts[g[0]] for g in ev)


def test_caps_on_words_and_sentences(tmp_path):
    task = toy_data(tmp_path, max_words=2, max_sentences=2)
    enc = task.encoded("train")
    assert max(len(d) for d, _ in enc) == 2 and max(len(s) for d, _ in enc for s in d) == 2


def test_mse_of_the_argmax_rating_and_accuracy(tmp_path):
    values = torch.tensor([1.0, 2.0, 3.0, 4.0, 7.0, 8.0, 9.0, 10.0], dtype=torch.float64)
    logits = torch.full((3, 8), -5.0)
    logits[0, 7], logits[1, 2], logits[2, 0] = 1.0, 1.0, 1.0  # predicted ratings 10, 3, 1
    labels = torch.tensor([5, 2, 3])  # gold ratings 8, 3, 4
    assert rating_sq_error(logits, labels, values).tolist() == [(10 - 8) ** 2, 0, (1 - 4) ** 2]  # per document
    criterion = toy_task(tmp_path).build_criterion(None)
    assert criterion.selection_metric == "accuracy" and criterion.higher_is_better
    metrics = criterion.summarize({"correct": 1.0, "count": 3.0, "sq_err": 13.0, "nll": 3.0})
    assert metrics["accuracy"] == pytest.approx(1 / 3) and metrics["mse"] == pytest.approx(13 / 3)


def test_tang_polarity_drops_the_middle_rating(fixtures):
    cfg = TangConfig(labels="polarity", tang_train="tang/train.ss", tang_valid="tang/dev.ss", tang_test="tang/test.ss")
    task = DocumentPipeline(cfg, fixtures)
    assert task.ratings == [1, 2, 3, 4, 5] and task.class_values == [0.0, 1.0]
    assert [task.label(d) for d in task.documents("train")] == [1, 0, 1, 0]  # the rating-3 doc is gone
    stars = DocumentPipeline(dataclasses.replace(cfg, labels="stars"), fixtures)
    assert [stars.label(d) for d in stars.documents("train")] == [4, 0, 2, 3, 1]


# ----------------------------------------------------------------------------- the model


def float64_model(task, sent, doc, seed=0):
    """``task``'s head with a ``sent`` sentence reader and a ``doc`` document reader, both 6 wide, seeded."""
    cfg = dataclasses.replace(task.cfg, reader=READERS[sent](6),
                              head=dataclasses.replace(task.cfg.head, doc_reader=doc, doc_hidden=6))
    return Task(cfg, task.data.data_root, data=task.data).build_model(seed).double()


@pytest.mark.parametrize("sent, doc", [("nse", "nse"), ("nse", "lstm"), ("lstm", "lstm"), ("lstmn", "nse")])
def test_padding_at_both_levels_is_masked(tmp_path, sent, doc):
    task = toy_task(tmp_path, sentence_chunk=3, pool="mean")
    model = float64_model(task, sent, doc).eval()
    enc = task.data.encoded("train")[:6]  # documents of 1-4 sentences of 2-7 words
    assert len({len(d) for d, _ in enc}) > 1

    def logits(items):
        ids, mask, sent_mask = pad_documents([d for d, _ in items], task.vocab.pad_id)
        ids = ids.masked_fill(~mask, 7)  # garbage in the padding must not matter
        batch = {"ids": ids, "mask": mask, "sent_mask": sent_mask, "label": torch.tensor([y for _, y in items])}
        return model(batch).logits

    together = logits(enc)
    alone = torch.cat([logits([item]) for item in enc])
    torch.testing.assert_close(together, alone, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("sent, doc", [("nse", "nse"), ("nse", "lstm")])
def test_checkpointed_sentence_reader_gives_the_same_loss_and_gradients(tmp_path, sent, doc):
    grads = {}
    for ckpt in (False, True):
        task = toy_task(tmp_path, checkpoint_sentences=ckpt, sentence_chunk=5, doc_dropout=0.15, dropout=0.2)
        model = float64_model(task, sent, doc)
        model.sentence_reader.cfg.dropout = 0.15  # dropout inside the checkpointed reader: same masks
        model.sentence_reader.drop.p = 0.15
        model.train()
        batch = task.batches("train", 16, 0, 0)[0]
        torch.manual_seed(11)
        loss = task.build_criterion(model)(model(batch), batch).value
        loss.backward()
        grads[ckpt] = (loss.detach(), {n: p.grad for n, p in model.named_parameters() if p.requires_grad})
    (loss0, g0), (loss1, g1) = grads[False], grads[True]
    torch.testing.assert_close(loss0, loss1, rtol=1e-12, atol=1e-12)
    assert g0.keys() == g1.keys()
    for name in g0:
        assert g0[name] is not None, f"{name} got no gradient"
        torch.testing.assert_close(g0[name], g1[name], rtol=1e-9, atol=1e-12, msg=name)


def test_a_tiny_hierarchical_model_learns(tmp_path):
    task = toy_task(tmp_path, n=96, data={"labels": "polarity"}, reader=NSEConfig(hidden=8), sentence_chunk=64)
    model = task.build_model(0)
    criterion = task.build_criterion(model)
    opt = torch.optim.Adam(model.parameters(), lr=0.03)
    for epoch in range(15):
        model.train()
        for batch in task.batches("train", 16, epoch, 0):
            opt.zero_grad()
            criterion(model(batch), batch).value.backward()
            opt.step()
    model.eval()
    stats = Counter()
    with torch.no_grad():
        for batch in task.batches("valid", 16):
            stats.update({k: float(v) for k, v in criterion(model(batch), batch).stats.items()})
    metrics = criterion.summarize(dict(stats))
    assert metrics["accuracy"] >= 0.9 and metrics["mse"] <= 0.1


def test_trains_end_to_end_on_tang_fixtures_with_the_loop(fixtures, tmp_path):
    from memread.experiment import final_evaluation, start_run

    path = fixtures.parent.parent / "configs" / "imdb" / "nse-lstm.toml"
    raw = tomllib.loads(path.read_text(encoding="utf-8"))
    assert raw["data"]["name"] == "imdb-acl" and raw["head"]["name"] == "hierarchical"
    data = {k: v for k, v in raw["data"].items() if k != "dev_fraction"}  # aclImdb's own key
    raw["data"] = {**data, "name": "tang", "vectors": "", "tang_train": "tang/train.ss", "tang_valid": "tang/dev.ss",
                   "tang_test": "tang/test.ss"}
    raw = apply_overrides(raw, ["head.emb=6", "reader.hidden=6", "head.doc_hidden=6", "train.epochs=2",
                                "train.batch_size=2", "train.progress=false", "head.freeze=false"])
    cfg = experiment_from_dict(raw, str(path))
    assert isinstance(cfg.train, TrainConfig) and cfg.head.doc_reader == "lstm" and cfg.criterion.name == "rating"
    start_run(cfg, tmp_path / "run", fixtures).fit()
    result = final_evaluation(tmp_path / "run", fixtures)
    assert set(result["test"]) == {"accuracy", "mse", "nll", "count"} and result["test"]["count"] == 2


def test_config_rejects_unknown_doc_reader():
    with pytest.raises(MemreadError, match="head.doc_reader"):
        HierarchicalHeadConfig(doc_reader="transformer")
    with pytest.raises(MemreadError, match="head.dropout"):
        HierarchicalHeadConfig(dropout=1.5)
    with pytest.raises(MemreadError, match="data.dev_fraction"):
        IMDBAclConfig(dev_fraction=1.0)


def test_a_key_of_another_dataset_is_refused():
    with pytest.raises(MemreadError, match=r"unknown key 'data.dev_fraction'"):
        experiment_from_dict({"data": {"name": "tang", "dev_fraction": 0.2}, "head": {"name": "hierarchical"},
                              "reader": {"name": "nse", "hidden": 6}}, "new.toml")


# ----------------------------------------------------------------------------- real data


@pytest.mark.slow  # reads all 50,000 reviews, then trains
def test_real_acl_imdb(real_data):
    root = real_data(ACL_IMDB_FILE)
    corpus = read_acl_imdb(root / ACL_IMDB_FILE)
    assert len(corpus["train"]) == len(corpus["test"]) == 25_000
    train_counts = Counter(d.rating for d in corpus["train"])
    assert train_counts == {1: 5100, 2: 2284, 3: 2420, 4: 2696, 7: 2496, 8: 3009, 9: 2263, 10: 4732}
    assert not {5, 6} & {d.rating for d in corpus["test"]}
    assert corpus["train"][-1].id == "train/pos/12499"
    assert any("<br" not in " ".join(w for s in d.sentences for w in s) for d in corpus["train"][:10])
    train, dev = dev_split(corpus["train"], 0.1)
    assert len(dev) == 2_500 and not {d.id for d in train} & {d.id for d in dev}

    # a few training steps on a slice: the loss on a fixed batch goes down
    docs = {"train": corpus["train"][::250], "valid": corpus["train"][1::500], "test": corpus["test"][::500]}
    data = DocumentPipeline(IMDBAclConfig(max_words=30, max_sentences=8), root, documents=docs)
    cfg = ExperimentConfig(data=data.cfg, reader=NSEConfig(hidden=16), criterion=RatingConfig(),
                           head=HierarchicalHeadConfig(emb=16, doc_hidden=16, checkpoint_sentences=True))
    task = Task(cfg, root, data=data)
    model = task.build_model(0)
    criterion = task.build_criterion(model)
    batches = task.batches("train", 8, 0, 0)
    batch = max((batches[i] for i in range(len(batches))), key=lambda b: len(b["label"]))
    loss = lambda: criterion(model(batch), batch).value  # noqa: E731  on the fixed batch
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    model.eval()
    with torch.no_grad():
        before = float(loss())
    model.train()
    for _ in range(8):
        opt.zero_grad()
        loss().backward()
        opt.step()
    model.eval()
    with torch.no_grad():
        assert float(loss()) < before - 0.1
