"""Language models of sentences read alone (``[data] context = "sentence"``, the LSTMN authors' protocol):
the examples, the rules for what a corpus holds, perplexity against a sentence-by-sentence reference for every
reader a language model takes, no state carried, and the verbs (eval across protocols, predict, generate, compare)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from memread.config import experiment_from_dict
from memread.data.pipelines.lm import LMPipeline, PTBConfig, TextConfig
from memread.data.sentence_lm import START, collate, lines_at_eos
from memread.errors import MemreadError
from memread.experiment import final_evaluation, load_trained, start_run
from memread.readers import READERS
from memread.tasks import Task
from memread.training.loop import evaluate

FIXTURES = Path(__file__).parent / "fixtures"


def experiment(reader: dict | None = None, data: dict | None = None, **train):
    """A tiny sentence-level PTB experiment on the fixture corpus."""
    raw = {"data": {"name": "ptb", "context": "sentence", **(data or {})},
           "reader": reader or {"name": "lstm", "hidden": 8},
           "head": {"name": "lm", "emb": 6},
           "train": {"batch_size": 3, "epochs": 1, "progress": False, "lr": 0.5, **train}}
    return experiment_from_dict(raw, "test")


def lm_readers() -> list[str]:
    return [name for name, spec in READERS.items() if spec.carries_state]


def test_each_line_is_start_words_end_and_start_is_never_a_target():
    data = LMPipeline(PTBConfig(context="sentence"), FIXTURES)
    lines = (FIXTURES / "ptb" / "ptb.valid.txt").read_text().splitlines()
    assert [list(s.words) for s in data.sentences("valid")] == [line.split() for line in lines]
    assert [s.where for s in data.sentences("valid")] == [f"{FIXTURES / 'ptb' / 'ptb.valid.txt'}:{i}" for i in (1, 2)]
    batch = data.batches("valid", 8)[0]
    v = data.vocab
    for row in range(batch["input"].size(0)):
        n = int(batch["mask"][row].sum())
        words = v.decode(batch["target"][row, : n - 1].tolist())
        assert v.itos[int(batch["input"][row, 0])] == START
        assert v.itos[int(batch["target"][row, n - 1])] == "<eos>"
        assert batch["input"][row, 1:n].tolist() == batch["target"][row, : n - 1].tolist()
        assert words in [line.split() for line in lines]  # (the fixture's words are all in its train split)
    assert v.stoi[START] not in batch["target"][batch["mask"]].tolist()
    # the targets: every word and every <eos> of the split, as many as the stream predicts
    words = sum(len(line.split()) for line in lines)
    assert sum(int(b["mask"].sum()) for b in data.batches("valid", 1)) == words + len(lines)


def test_collate_pads_right_and_masks_the_padding():
    batch = collate([[1, 5, 6, 2], [1, 7, 2]], pad_id=0)
    assert batch["input"].tolist() == [[1, 5, 6], [1, 7, 0]]
    assert batch["target"].tolist() == [[5, 6, 2], [7, 2, 0]]
    assert batch["mask"].tolist() == [[True, True, True], [True, True, False]]


def test_lines_at_eos_keeps_blank_lines_as_empty():
    assert lines_at_eos(["a", "b", "<eos>", "<eos>", "c", "<eos>"]) == [["a", "b"], [], ["c"]]


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def text_corpus(tmp_path: Path, train: str) -> TextConfig:
    write(tmp_path / "t" / "train.txt", train)
    write(tmp_path / "t" / "valid.txt", "a b\n")
    write(tmp_path / "t" / "test.txt", "b a\n")
    return TextConfig(train="t/train.txt", valid="t/valid.txt", test="t/test.txt", context="sentence")


def test_blank_lines_hold_no_sentence_and_places_name_the_file_line(tmp_path):
    cfg = text_corpus(tmp_path, "a b c\n\nb c\n\n\nc\n")
    data = LMPipeline(cfg, tmp_path)
    assert [(s.words, s.where.rsplit(":", 1)[1]) for s in data.sentences("train")] == [
        (("a", "b", "c"), "1"), (("b", "c"), "3"), (("c",), "6")]


def test_a_sentence_over_max_len_is_refused_naming_file_and_line(tmp_path):
    cfg = text_corpus(tmp_path, "a b\na b c d e\n")
    cfg.max_len = 4
    with pytest.raises(MemreadError, match=r"train\.txt:2: a sentence of 5 words, longer than data\.max_len = 4"):
        LMPipeline(cfg, tmp_path)
    cfg.max_len = 5
    assert len(LMPipeline(cfg, tmp_path).sentences("train")) == 2  # nothing truncated


def test_a_literal_start_token_is_refused(tmp_path):
    with pytest.raises(MemreadError, match=r"train\.txt:1: a literal <s>"):
        LMPipeline(text_corpus(tmp_path, "a <s> b\n"), tmp_path)


@pytest.mark.parametrize("bad, message", [
    ({"data": {"max_len": 50}, "context": "stream"}, "data.max_len applies to data.context"),
    ({"data": {"bucket": 5}, "context": "stream"}, "data.bucket applies to data.context"),
    ({"reader": {"name": "nse", "hidden": 8}}, "reader 'nse' reads a whole sequence"),
])
def test_settings_that_do_not_fit_are_refused(bad, message):
    data = {**bad.get("data", {}), **({"context": bad["context"]} if "context" in bad else {})}
    with pytest.raises(MemreadError, match=message):
        experiment(bad.get("reader"), data)


def test_documents_and_sentences_together_are_refused():
    raw = {"data": {"name": "stories-text", "context": "sentence", "documents": True}, "reader": {"name": "lstm"},
           "head": {"name": "lm"}}
    with pytest.raises(MemreadError, match="every sentence is read alone already"):
        experiment_from_dict(raw, "test")


@torch.no_grad()
def reference_nll(model, data, split: str) -> tuple[float, int]:
    """Each sentence read alone at batch size 1 from an empty state, by the model's own parts."""
    nll, count = 0.0, 0
    for ids in data.encoded(split):
        inp, target = torch.tensor([ids[:-1]]), torch.tensor(ids[1:])
        out = model.reader(model.embedding(inp), torch.ones_like(inp, dtype=torch.bool))
        logits = model.decoder(out.states)[0]
        nll += float(F.cross_entropy(logits.double(), target, reduction="sum"))
        count += len(ids) - 1
    return nll, count


@pytest.mark.parametrize("name", lm_readers())
def test_perplexity_is_every_sentence_read_alone_at_any_batch_size(name):
    spec = READERS[name]
    reader = {"name": name, **({"hidden": 12} if "hidden" in spec.Config.__dataclass_fields__ else {})}
    cfg = experiment(reader)
    task = Task(cfg, FIXTURES)
    model = task.build_model(0).eval()
    with torch.no_grad():
        nll, count = reference_nll(model, task.data, "train")
        want = math.exp(nll / count)
        for bs in (1, 4, 40):
            got = evaluate(model, task, "train", bs)
            assert got["tokens"] == count
            assert got["ppl"] == pytest.approx(want, rel=1e-5), f"{name}, batch size {bs}"


def test_training_carries_no_state_from_one_sentence_to_the_next(tmp_path, monkeypatch):
    cfg = experiment(max_steps=3)
    seen = []
    from memread.heads.lm import LanguageModel

    real = LanguageModel.forward

    def forward(self, batch, state=None, return_attention=False):
        seen.append(state)
        return real(self, batch, state, return_attention)

    monkeypatch.setattr(LanguageModel, "forward", forward)
    with start_run(cfg, tmp_path / "run", FIXTURES) as trainer:
        trainer.fit()
    assert len(seen) >= 3 and all(s is None for s in seen)  # every training and evaluation batch starts empty


def test_training_order_is_seeded_and_bucketed_by_length():
    data = LMPipeline(PTBConfig(context="sentence", bucket=2), FIXTURES)
    a = [b["input"].tolist() for b in data.batches("train", 2, epoch=1, seed=3)]
    assert a == [b["input"].tolist() for b in data.batches("train", 2, epoch=1, seed=3)]
    assert a != [b["input"].tolist() for b in data.batches("train", 2, epoch=2, seed=3)]
    # one pool (3 batches of 2) holds all 6 training sentences: sorted by length, each batch a run of neighbours,
    # in every epoch; shuffled alone (bucket = 0) batches mix lengths in some epoch
    def neighbours(bucket: int, epoch: int) -> bool:
        data = LMPipeline(PTBConfig(context="sentence", bucket=bucket), FIXTURES)
        batches = [sorted(b["mask"].sum(1).tolist()) for b in data.batches("train", 2, epoch=epoch, seed=3)]
        return sum(sorted(batches), []) == sorted(len(ids) - 1 for ids in data.encoded("train"))

    assert all(neighbours(3, epoch) for epoch in range(10))
    assert not all(neighbours(0, epoch) for epoch in range(10))


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    run = tmp_path_factory.mktemp("sentence") / "run"
    with start_run(experiment(max_steps=4), run, FIXTURES) as trainer:
        trainer.fit()
    final_evaluation(run, FIXTURES)
    return run


def test_final_json_and_units_are_one_per_sentence(trained):
    final = json.loads((trained / "final.json").read_text())
    _, task, model = load_trained(trained, FIXTURES)
    nll, count = reference_nll(model, task.data, "test")
    assert final["test"]["ppl"] == pytest.approx(math.exp(nll / count), rel=1e-5)
    from memread.training.units import read_units

    keys, values, _ = read_units(trained, "test", "best", None, "32")
    tokens = values[:, keys.index("tokens")]
    assert len(tokens) == len(task.data.sentences("test"))
    assert sorted(tokens.tolist()) == sorted(len(s.words) + 1.0 for s in task.data.sentences("test"))


def test_eval_reads_a_run_in_the_other_protocol(trained):
    _, stream_task, model = load_trained(trained, FIXTURES, context="stream")
    assert not getattr(stream_task.data, "sentence_mode")
    metrics = evaluate(model, stream_task, "valid", 1)
    # the stream's targets: every token after the first, each line's <eos> included
    words = sum(len(line.split()) + 1 for line in (FIXTURES / "ptb" / "ptb.valid.txt").read_text().splitlines())
    assert metrics["tokens"] == words - 1
    with pytest.raises(MemreadError, match="--context must be stream or sentence"):
        load_trained(trained, FIXTURES, context="paragraph")


def test_a_stream_vocabulary_starts_each_sentence_with_eos():
    stream = LMPipeline(PTBConfig(), FIXTURES)
    per_sentence = LMPipeline(PTBConfig(context="sentence"), FIXTURES, vocab=stream.vocab)
    assert START not in stream.vocab.stoi
    first = per_sentence.encoded("valid")[0]
    assert stream.vocab.itos[first[0]] == "<eos>" and stream.vocab.itos[first[-1]] == "<eos>"


def test_predict_scores_each_line_alone_and_generate_starts_a_sentence(trained):
    from memread import load

    p = load(trained, FIXTURES)
    one = p.predict("the board said it")
    both = p.predict("the board said it\nthe board said it")
    assert one.tokens == [START, "the", "board", "said", "it", "<eos>"]
    assert len(one.logprobs) == 5
    assert both.logprobs == pytest.approx(one.logprobs * 2, abs=1e-6)  # the second line forgets the first
    _, task, model = load_trained(trained, FIXTURES)
    batch = collate([task.data.encoded("valid")[0]], task.vocab.pad_id)
    with torch.no_grad():
        logp = model(batch).logits.log_softmax(-1)[0].gather(-1, batch["target"][0].unsqueeze(-1)).squeeze(-1)
    line = " ".join(task.data.sentences("valid")[0].words)
    assert p.predict(line).logprobs == pytest.approx(logp.tolist(), abs=1e-5)
    out = p.generate("the board", steps=30)
    # greedy continuation = the argmax after <s> the board, read token by token
    ids = [task.vocab.stoi[START], task.vocab.stoi["the"], task.vocab.stoi["board"]]
    with torch.no_grad():
        logits = model({"input": torch.tensor([ids]), "target": torch.zeros(1, 3, dtype=torch.long),
                        "mask": torch.ones(1, 3, dtype=torch.bool)}).logits[0, -1]
    logits[task.vocab.pad_id] = -math.inf
    logits[task.vocab.stoi[START]] = -math.inf
    assert out.tokens[0] == task.vocab.itos[int(logits.argmax())]
    assert START not in out.tokens
    assert "<eos>" not in out.tokens[:-1] and (len(out.tokens) == 30 or out.tokens[-1] == "<eos>")
    with torch.no_grad():  # a model sure to end the sentence: the continuation stops after its <eos>
        p.model.decoder.bias[task.vocab.stoi["<eos>"]] += 1e3
    assert p.generate("the board", steps=30).tokens == ["<eos>"]
