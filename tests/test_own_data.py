"""Your own data (:mod:`memread.data.records`): one plain format per task shape, each trained a few steps
and evaluated end to end; every malformed input is one MemreadError naming ``file:line`` and the field;
and ``pipeline.example_batches`` of records (as ``memread predict`` reads them) gives the same model
outputs as the dataset's own evaluation batches of the same examples."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pytest
import torch

from memread.config import experiment_from_dict
from memread.data.cbt import BLANK
from memread.data.pipelines import DATASETS
from memread.data.records import (classify_example, cloze_example, document_example, lm_tokens, pair_example,
                                  read_jsonl, record_example, translation_example)
from memread.data.snli import PairExample
from memread.errors import MemreadError
from memread.experiment import final_evaluation, load_trained, start_run

# ----------------------------------------------------------------------------- tiny data, one format each

WORDS = "the a cat dog sat ran on under mat rug big small red blue".split()


def sentence(rng: random.Random, n: int = 5) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def write_jsonl(path: Path, records: list) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")


def classify_records(n: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        y = i % 2
        label = ["neg", "pos"][y] if i % 3 else y  # names and class indices mixed
        out.append({"text": f"{sentence(rng)} {'good' if y else 'bad'} {sentence(rng, rng.randint(1, 4))}",
                    "label": label, "id": i})
    return out


def pair_records(n: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    return [{"premise": sentence(rng, rng.randint(3, 7)), "hypothesis": sentence(rng, rng.randint(2, 5)),
             "label": ["entailment", "neutral", "contradiction"][i % 3]} for i in range(n)]


def rank_records(questions: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    out = [{"qid": f"q{q}", "question": f"what {sentence(rng, 3)} ?", "answer": sentence(rng, rng.randint(3, 6)),
            "label": int(c == q % 3)} for q in range(questions) for c in range(3)]
    rng.shuffle(out)  # a question's candidates need not be adjacent
    return out


def cloze_records(n: int, seed: int, placeholder: str = "@blank") -> list[dict]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        a, b = rng.sample(["cat", "dog", "mat", "rug"], 2)
        out.append({"document": f"the {a} sat on the {b} . {sentence(rng)}", "query": f"the {placeholder} sat on the {b}",
                    "candidates": [b, a] if rng.random() < 0.5 else [a, b], "answer": a})
    return out


def document_records(n: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        sentences = [sentence(rng, rng.randint(2, 5)) + " ." for _ in range(rng.randint(1, 4))]
        record = {"sentences": sentences} if i % 2 else {"text": " ".join(sentences)}
        out.append({**record, "label": [1, 2, 3][i % 3]})
    return out


def write_parallel(root: Path, prefix: str, n: int, seed: int) -> None:
    rng = random.Random(seed)
    src = [sentence(rng, rng.randint(2, 6)) for _ in range(n)]
    tgt = [" ".join(w.upper() for w in reversed(s.split())) for s in src]
    (root / f"{prefix}.src").write_text("\n".join(src) + "\n", encoding="utf-8")
    (root / f"{prefix}.tgt").write_text("\n".join(tgt) + "\n", encoding="utf-8")


def write_text(path: Path, documents: int, seed: int) -> None:
    rng = random.Random(seed)
    docs = ["\n".join(sentence(rng, rng.randint(3, 8)) for _ in range(rng.randint(2, 4))) for _ in range(documents)]
    path.write_text("\n\n".join(docs) + "\n", encoding="utf-8")


def make_data(root: Path, fmt: str) -> dict:
    """Write the three splits of ``fmt`` under ``root``; return its ``[data]`` table."""
    split_sizes = {"train": (12, 0), "valid": (5, 1), "test": (7, 2)}
    data: dict = {"name": fmt, **{s: f"{fmt}/{s}.jsonl" for s in split_sizes}}
    for split, (n, seed) in split_sizes.items():
        path = root / fmt / f"{split}.jsonl"
        if fmt == "jsonl-classify":
            write_jsonl(path, classify_records(n, seed))
            data["labels"] = ["neg", "pos"]
        elif fmt == "jsonl-pair":
            write_jsonl(path, pair_records(n, seed))
            data["labels"] = ["entailment", "neutral", "contradiction"]
        elif fmt == "jsonl-rank":
            write_jsonl(path, rank_records(max(2, n // 3), seed))
            data["name"], data["kind"] = "jsonl-pair", "rank"
        elif fmt == "jsonl-cloze":
            write_jsonl(path, cloze_records(n, seed))
            data["placeholder"] = "@blank"
        elif fmt == "jsonl-document":
            write_jsonl(path, document_records(n, seed))
            data["ratings"] = [1, 2, 3]
        elif fmt == "parallel":
            path.parent.mkdir(parents=True, exist_ok=True)
            write_parallel(root / fmt, split, n, seed)
            data[split] = f"{fmt}/{split}"
        elif fmt in ("text", "text-documents"):
            path.parent.mkdir(parents=True, exist_ok=True)
            write_text(root / fmt / f"{split}.txt", max(2, n // 3), seed)
            data["name"], data[split] = "text", f"{fmt}/{split}.txt"
            data["documents"] = fmt == "text-documents"
    return data


# format -> reader, head, criterion (None: the dataset's default)
SETUPS = {
    "text": ({"name": "lstm", "hidden": 6}, {"name": "lm", "emb": 6}, None),
    "text-documents": ({"name": "doc_lstm", "hidden": 6}, {"name": "lm", "emb": 6}, None),
    "jsonl-classify": ({"name": "lstm", "hidden": 6}, {"name": "mlp", "emb": 6, "mlp": 8}, None),
    "jsonl-pair": ({"name": "lstm", "hidden": 6}, {"name": "pair", "emb": 6, "mlp": 8}, None),
    "jsonl-rank": ({"name": "lstm", "hidden": 6}, {"name": "pair", "emb": 6, "mlp": 8}, "answer_selection"),
    "jsonl-cloze": ({"name": "gru", "hidden": 6}, {"name": "pointer", "emb": 6}, None),
    "jsonl-document": ({"name": "lstm", "hidden": 6}, {"name": "hierarchical", "emb": 6, "doc_hidden": 5}, None),
    "parallel": ({"name": "lstm", "hidden": 6}, {"name": "attention_decoder", "emb": 6, "tgt_emb": 5}, None),
}


def experiment(data: dict, fmt: str, **train):
    reader, head, criterion = SETUPS[fmt]
    raw = {"data": data, "reader": reader, "head": head,
           "train": {"batch_size": 2, "max_steps": 3, "progress": False, "log_every": 1, **train}}
    if criterion:
        raw["criterion"] = {"name": criterion}
    return experiment_from_dict(raw, f"{fmt}.toml")


def train_and_evaluate(root: Path, fmt: str) -> dict:
    cfg = experiment(make_data(root, fmt), fmt)
    with start_run(cfg, root / "run", root) as trainer:
        trainer.fit()
    return final_evaluation(root / "run", root)


# ----------------------------------------------------------------------------- every format trains


@pytest.mark.parametrize("fmt", sorted(SETUPS))
def test_each_format_trains_and_evaluates(tmp_path, fmt):
    result = train_and_evaluate(tmp_path, fmt)
    metric = {"text": "ppl", "text-documents": "ppl", "jsonl-rank": "map", "parallel": "ppl"}.get(fmt, "accuracy")
    for split in ("valid", "test"):
        assert metric in result[split] and math.isfinite(result[split][metric]), result
    steps = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert max(r.get("step", 0) for r in steps) == 3


def test_the_datasets_are_registered_with_their_task_shapes():
    shapes = {name: DATASETS[name].task for name in
              ("text", "jsonl-classify", "jsonl-pair", "jsonl-cloze", "jsonl-document", "parallel")}
    assert shapes == {"text": "lm", "jsonl-classify": "classify", "jsonl-pair": "pair", "jsonl-cloze": "cloze",
                      "jsonl-document": "document", "parallel": "translate"}


def test_text_reads_lines_with_eos_and_blank_lines_between_documents(tmp_path):
    (tmp_path / "t.txt").write_text("The cat sat\n\n\nA dog ran\nit  ran\n", encoding="utf-8")
    data = {"name": "text", "train": "t.txt", "valid": str(tmp_path / "t.txt"), "test": "t.txt", "lowercase": True}
    pipe = DATASETS["text"].build(DATASETS["text"].Config(**data), tmp_path, None)
    assert pipe.tokens("train") == "the cat sat <eos> a dog ran <eos> it ran <eos>".split()
    docs = DATASETS["text"].build(DATASETS["text"].Config(**data, documents=True), tmp_path, None)
    assert docs.documents("valid") == [["the", "cat", "sat", "<eos>"], "a dog ran <eos> it ran <eos>".split()]


def test_a_gzipped_file_stands_in_for_a_missing_plain_one(tmp_path):
    import gzip

    records = classify_records(6, 0)
    with gzip.open(tmp_path / "train.jsonl.gz", "wt", encoding="utf-8") as f:
        f.write("".join(json.dumps(r) + "\n" for r in records))
    cfg = DATASETS["jsonl-classify"].Config(train="train.jsonl", valid="train.jsonl", test="train.jsonl", classes=2,
                                            labels=("neg", "pos"))
    pipe = DATASETS["jsonl-classify"].build(cfg, tmp_path, None)
    assert [e.label for e in pipe.examples("train")] == [0, 1, 0, 1, 0, 1]


def test_rank_pairs_gather_each_questions_candidates_for_evaluation(tmp_path):
    data = make_data(tmp_path, "jsonl-rank")
    pipe = DATASETS["jsonl-pair"].build(DATASETS["jsonl-pair"].Config(**{k: v for k, v in data.items() if k != "name"}),
                                        tmp_path, None)
    questions = pipe._questions["test"]
    assert questions == sorted(questions) and len(set(questions)) == 2  # 6 candidates of 2 questions
    batches = pipe.batches("test", 4)
    assert [b["question"].tolist() for b in batches] == [[0, 0, 0, 1, 1, 1]]  # a question is never split


def test_the_criterion_must_fit_the_pair_kind(tmp_path):
    data = make_data(tmp_path, "jsonl-rank")
    raw = {"data": data, "reader": {"name": "lstm", "hidden": 6}, "head": {"name": "pair", "emb": 6, "mlp": 8}}
    with pytest.raises(MemreadError, match=r"criterion 'cross_entropy' does not fit .* use criterion.name = 'answer_selection'"):
        experiment_from_dict(raw, "x.toml")


# ----------------------------------------------------------------------------- configs are airtight


@pytest.mark.parametrize("data,message", [
    ({"name": "jsonl-classify"}, r"needs its classes: data.labels = .* or data.classes = N"),
    ({"name": "jsonl-classify", "classes": 3, "labels": ["a", "b"]}, r"data.classes = 3 but data.labels names 2"),
    ({"name": "jsonl-classify", "labels": ["a", "a"]}, r"data.labels: a name appears twice"),
    ({"name": "jsonl-classify", "classes": 2, "documents": True}, r"unknown key 'data.documents'"),
    ({"name": "jsonl-classify", "classes": -1}, r"key 'data.classes' must be at least 0"),
    ({"name": "jsonl-pair", "kind": "rank", "labels": ["a", "b"]}, r"do not apply to kind = \"rank\""),
    ({"name": "jsonl-pair", "kind": "sort", "classes": 2}, r"key 'data.kind' expects 'classify' or 'rank'"),
    ({"name": "jsonl-cloze", "placeholder": "two words"}, r"data.placeholder must be one word"),
    ({"name": "jsonl-document"}, r"needs data.ratings"),
    ({"name": "jsonl-document", "ratings": [1, 1, 2]}, r"needs data.ratings.*each once"),
    ({"name": "parallel", "source": "en", "target": "en"}, r"data.source and data.target must be two different"),
    ({"name": "text", "bptt": 0}, r"key 'data.bptt' must be at least 1"),
    ({"name": "text", "numbers": True}, r"unknown key 'data.numbers'"),
], ids=lambda x: x if isinstance(x, str) else None)
def test_config_errors(data, message):
    fmt = {"jsonl-pair": "jsonl-pair", "jsonl-cloze": "jsonl-cloze", "jsonl-document": "jsonl-document",
           "parallel": "parallel", "text": "text"}.get(data["name"], "jsonl-classify")
    with pytest.raises(MemreadError, match=message):
        experiment({**data}, fmt)


# ----------------------------------------------------------------------------- malformed input: one line each

def classify_data(tmp_path: Path, lines: list[str], split: str = "train") -> dict:
    """jsonl-classify over good files, ``split`` holding ``lines`` as written."""
    data = make_data(tmp_path, "jsonl-classify")
    (tmp_path / data[split]).write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return data


def fails(tmp_path: Path, data: dict, fmt: str, message: str) -> str:
    with pytest.raises(MemreadError) as e:
        start_run(experiment(data, fmt), tmp_path / "run", tmp_path)
    text = str(e.value)
    assert "\n" not in text and "Traceback" not in text
    assert __import__("re").search(message, text), text
    return text


GOOD = json.dumps({"text": "a fine line", "label": 1})


@pytest.mark.parametrize("lines,message", [
    ([GOOD, '{"text": "a", "label": 1'], r"train.jsonl:2: not valid JSON \(.* at column \d+\)$"),
    ([GOOD, "", '["a", 1]'], r"train.jsonl:3: expected a JSON object \{\.\.\.\}, got list$"),
    ([GOOD, GOOD, json.dumps({"text": "no label"})], r"train.jsonl:3: field 'label' is missing$"),
    ([json.dumps({"label": 0})], r"train.jsonl:1: field 'text' is missing$"),
    ([json.dumps({"text": "x", "label": "maybe"})], r"train.jsonl:1: field 'label': 'maybe' is not one of \['neg', 'pos'\]$"),
    ([json.dumps({"text": "x", "label": 2})], r"train.jsonl:1: field 'label' = 2 is outside \[0, 2\)"),
    ([json.dumps({"text": "x", "label": True})], r"train.jsonl:1: field 'label' must be an int in \[0, 2\) or one of"),
    ([json.dumps({"text": "x", "label": 1.0})], r"train.jsonl:1: field 'label' must be an int"),
    ([json.dumps({"text": ["x"], "label": 1})], r"train.jsonl:1: field 'text' must be a string, got \['x'\]$"),
    ([json.dumps({"text": "   ", "label": 1})], r"train.jsonl:1: field 'text' is empty \(no words\)$"),
    (["", "  "], r"train.jsonl: empty file \(no JSON records\)$"),
], ids=["invalid-json", "not-an-object", "label-missing", "text-missing", "label-not-a-name", "label-out-of-range",
        "label-bool", "label-float", "text-not-a-string", "text-empty", "empty-file"])
def test_malformed_classify_lines(tmp_path, lines, message):
    fails(tmp_path, classify_data(tmp_path, lines), "jsonl-classify", message)


def test_a_malformed_line_of_the_test_split_fails_before_training(tmp_path):
    fails(tmp_path, classify_data(tmp_path, [GOOD, "{oops"], split="test"), "jsonl-classify", r"test.jsonl:2: not valid JSON")
    assert not (tmp_path / "run" / "checkpoint_last.pt").exists()


def test_not_utf8_names_the_line(tmp_path):
    data = make_data(tmp_path, "jsonl-classify")
    (tmp_path / data["train"]).write_bytes(GOOD.encode() + b"\n" + b'{"text": "caf\xe9", "label": 0}\n')
    fails(tmp_path, data, "jsonl-classify", r"train.jsonl:2: not UTF-8 text")


def test_missing_file_and_empty_key(tmp_path):
    data = make_data(tmp_path, "jsonl-classify")
    fails(tmp_path, {**data, "valid": "nowhere/valid.jsonl"}, "jsonl-classify",
          rf"^data.valid not found: expected {tmp_path}/nowhere/valid.jsonl \(or valid.jsonl.gz\); relative paths are "
          rf"read under the data root {tmp_path}")
    fails(tmp_path, {**data, "test": ""}, "jsonl-classify", r"^key 'data.test' is empty; \[data\] name = 'jsonl-classify' needs it")


@pytest.mark.parametrize("record,message", [
    ({"premise": "a b", "label": "neutral"}, r"field 'hypothesis' is missing"),
    ({"premise": "a b", "hypothesis": "c", "label": "maybe"}, r"field 'label': 'maybe' is not one of \['entailment'"),
], ids=["hypothesis-missing", "label-unknown"])
def test_malformed_pair_lines(tmp_path, record, message):
    data = make_data(tmp_path, "jsonl-pair")
    write_jsonl(tmp_path / data["valid"], [pair_records(1, 0)[0], record])
    fails(tmp_path, data, "jsonl-pair", r"valid.jsonl:2: " + message)


@pytest.mark.parametrize("record,message", [
    ({"question": "q ?", "answer": "a", "label": 2, "qid": "q1"}, r"field 'label' must be 0 or 1 .*got 2$"),
    ({"question": "q ?", "answer": "a", "label": 1}, r"field 'qid' is missing$"),
    ({"question": "q ?", "answer": "a", "label": 1, "qid": ""}, r"field 'qid' must be a non-empty string or an int"),
], ids=["label-not-0-or-1", "qid-missing", "qid-empty"])
def test_malformed_rank_lines(tmp_path, record, message):
    data = make_data(tmp_path, "jsonl-rank")
    write_jsonl(tmp_path / data["train"], [rank_records(1, 0)[0], record])
    fails(tmp_path, data, "jsonl-rank", r"train.jsonl:2: " + message)


@pytest.mark.parametrize("change,message", [
    ({"query": "the cat sat"}, r"field 'query' has no placeholder '@blank' \(a whitespace-separated word\)$"),
    ({"answer": "bird"}, r"field 'answer': 'bird' is not one of the candidates"),
    ({"candidates": ["cat", "big dog"]}, r"field 'candidates\[1\]' must be one word, got 'big dog'$"),
    ({"candidates": []}, r"field 'candidates' must be a non-empty list of words, got \[\]$"),
    ({"document": 3}, r"field 'document' must be a string, got 3$"),
    ({"document": "the dog sat on the mat .", "candidates": ["cat", "dog"], "answer": "cat"},
     r"field 'answer': 'cat' never occurs in the document, so no reader can point at it .*put it in the document "
     r"or leave the question out$"),
    ({"candidates": ["cat", "dog", "cat"], "answer": "cat"},
     r"field 'candidates' holds 'cat' twice \(candidates\[0\] and candidates\[2\]\); list each candidate once$"),
    ({"query": "the @blank sat on the @blank"}, r"field 'query' holds the placeholder '@blank' 2 times; a question has "
                                               r"one blank"),
], ids=["no-placeholder", "answer-not-a-candidate", "candidate-of-two-words", "no-candidates", "document-not-text",
        "answer-not-in-the-document", "candidate-twice", "two-placeholders"])
def test_malformed_cloze_lines(tmp_path, change, message):
    data = make_data(tmp_path, "jsonl-cloze")
    good = cloze_records(1, 0)[0]
    write_jsonl(tmp_path / data["test"], [good, good, {**good, **change}])
    fails(tmp_path, data, "jsonl-cloze", r"test.jsonl:3: " + message)


@pytest.mark.parametrize("record,message", [
    ({"sentences": ["a b ."], "label": 4}, r"field 'label' = 4 is not one of the ratings \[1, 2, 3\]$"),
    ({"sentences": ["a b ."], "text": "a b .", "label": 1}, r"fields 'sentences' and 'text' are both given"),
    ({"label": 1}, r"field 'sentences' \(or 'text'\) is missing$"),
    ({"sentences": "a b .", "label": 1}, r"field 'sentences' must be a list of strings"),
    ({"sentences": ["", " "], "label": 1}, r"field 'sentences' is empty \(no words\)$"),
    ({"sentences": ["a b .", " ", "c d ."], "label": 1}, r"field 'sentences\[1\]' is empty \(no words\); remove it"),
], ids=["rating-unknown", "sentences-and-text", "no-sentences", "sentences-not-a-list", "sentences-empty",
        "one-sentence-empty"])
def test_malformed_document_lines(tmp_path, record, message):
    data = make_data(tmp_path, "jsonl-document")
    write_jsonl(tmp_path / data["train"], [document_records(1, 0)[0], record])
    fails(tmp_path, data, "jsonl-document", r"train.jsonl:2: " + message)


def test_parallel_files_that_are_not_line_aligned(tmp_path):
    data = make_data(tmp_path, "parallel")
    (tmp_path / "parallel" / "valid.tgt").write_text("A B\nC\n", encoding="utf-8")  # valid.src has 5 lines
    fails(tmp_path, data, "parallel", rf"the parallel files are not line-aligned: {tmp_path}/parallel/valid.src has 5 "
                                      rf"lines, {tmp_path}/parallel/valid.tgt has 2 lines \(line N of each is a pair\)$")


def test_parallel_empty_line_and_missing_side(tmp_path):
    data = make_data(tmp_path, "parallel")
    (tmp_path / "parallel" / "train.tgt").write_text("\n".join(["A B"] * 5 + ["  "] + ["C"] * 6) + "\n", encoding="utf-8")
    fails(tmp_path, data, "parallel", r"parallel/train.tgt:6: empty line \(line 6 of train.src and train.tgt is a pair\)$")
    (tmp_path / "parallel" / "test.tgt").unlink()
    (tmp_path / "parallel" / "train.tgt").write_text("A B\n" * 12, encoding="utf-8")
    fails(tmp_path, data, "parallel", r"^data.test not found: expected .*parallel/test.tgt \(or test.tgt.gz\)")
    (tmp_path / "parallel" / "test.tgt").write_text("", encoding="utf-8")
    (tmp_path / "parallel" / "test.src").write_text("", encoding="utf-8")
    fails(tmp_path, data, "parallel", r"parallel/test.src: empty file \(no sentences\)$")


@pytest.mark.parametrize("side,marker", [("src", "<eos>"), ("tgt", "<eos>"), ("tgt", "</s>"), ("src", "<s>")])
def test_parallel_lines_holding_a_marker_are_refused(tmp_path, side, marker):
    data = make_data(tmp_path, "parallel")
    path = tmp_path / "parallel" / f"valid.{side}"
    lines = path.read_text(encoding="utf-8").splitlines()
    lines[2] = f"{lines[2]} {marker} more"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    fails(tmp_path, data, "parallel", rf"parallel/valid.{side}:3: the line holds a literal {marker}; memread marks "
                                      rf"where a sentence starts and ends itself: remove it$")
    assert not (tmp_path / "run").exists()


def test_text_errors(tmp_path):
    data = make_data(tmp_path, "text")
    (tmp_path / data["valid"]).write_text("a b\nc <eos> d\n", encoding="utf-8")
    fails(tmp_path, data, "text", r"text/valid.txt:2: the line holds a literal <eos>; memread appends it after every line$")
    (tmp_path / data["valid"]).write_text("\n  \n", encoding="utf-8")
    fails(tmp_path, data, "text", r"text/valid.txt: empty file \(no words\)$")


# ----------------------------------------------------------------------------- records for prediction


def test_records_without_labels_take_a_dummy_and_name_where():
    ex = classify_example({"text": "Good film"}, "stdin:1", labels=("neg", "pos"), lowercase=True, labelled=False)
    assert ex.tokens == ("good", "film") and ex.label == 0
    assert classify_example({"text": "x", "label": "pos"}, "stdin:2", labels=("neg", "pos"), labelled=False).label == 1
    with pytest.raises(MemreadError, match=r"^stdin:3: field 'label': 'maybe' is not one of \['neg', 'pos'\]$"):
        classify_example({"text": "x", "label": "maybe"}, "stdin:3", labels=("neg", "pos"), labelled=False)
    with pytest.raises(MemreadError, match=r"^stdin:4: field 'text' is missing$"):
        classify_example({"txt": "x"}, "stdin:4", classes=2, labelled=False)
    with pytest.raises(MemreadError, match=r"^stdin:5: expected a JSON object \{\.\.\.\}, got list$"):
        classify_example(["x"], "stdin:5", classes=2)
    pair = pair_example({"question": "who ?", "answer": "me"}, "stdin:6", kind="rank", labelled=False)
    assert pair == PairExample(("me",), ("who", "?"), 0, "")
    cloze = cloze_example({"document": ["A b .", "c d"], "query": "@ b", "candidates": ["B", "d"]}, "stdin:7",
                          placeholder="@", lowercase=True, labelled=False)
    assert (cloze.context, cloze.query, cloze.candidates, cloze.answer) == ([["a", "b", "."], ["c", "d"]], [BLANK, "b"], ["b", "d"], "b")
    doc = document_example({"text": "Great film! Loved it. really"}, "stdin:8", ratings=(1, 5), labelled=False)
    assert doc.sentences == (("Great", "film!"), ("Loved", "it."), ("really",)) and doc.rating == 1 and doc.id == "stdin:8"
    pair = translation_example({"source": "ein Haus"}, "stdin:9", lowercase=True, labelled=False)
    assert (pair.source, pair.target) == (("ein", "haus"), ())
    with pytest.raises(MemreadError, match=r"^stdin:10: field 'target' is missing$"):
        translation_example({"source": "ein Haus"}, "stdin:10")
    assert lm_tokens({"text": "a b\n\nc"}, "stdin:11") == ["a", "b", "<eos>", "c", "<eos>"]
    with pytest.raises(MemreadError, match=r"^stdin:12: field 'text' holds a literal <eos>"):
        lm_tokens({"text": "a <eos> b"}, "stdin:12")
    with pytest.raises(MemreadError, match=r"^stdin:13: field 'source' holds a literal <eos>; memread marks"):
        translation_example({"source": "ein <EOS> Haus"}, "stdin:13", lowercase=True, labelled=False)
    with pytest.raises(MemreadError, match=r"^stdin:14: field 'target' holds a literal </s>"):
        translation_example({"source": "ein Haus", "target": "a house </s>"}, "stdin:14", labelled=False)
    # an answer, when given, is checked even for prediction: one that the document never holds is refused
    with pytest.raises(MemreadError, match=r"^stdin:15: field 'answer': 'd' never occurs in the document"):
        cloze_example({"document": "a b c", "query": "@ b", "candidates": ["a", "d"], "answer": "d"}, "stdin:15",
                      placeholder="@", labelled=False)


def run_outputs(model, batches) -> list[torch.Tensor]:
    """The logits of every batch, the state carried from batch to batch (as evaluation does)."""
    out, state = [], None
    with torch.no_grad():
        for i in range(len(batches)):
            o = model(batches[i], state)
            state = o.state
            out.append(o.logits)
    return out


def dataset_rows(pipe, model, split: str, batch_size: int) -> dict[int, torch.Tensor]:
    """Example index (in the split's encoded order) -> its logits row, from the dataset's own batches."""
    batches = pipe.batches(split, batch_size)
    rows = {}
    for group, logits in zip(batches.groups, run_outputs(model, batches)):
        for j, row in zip(group, logits):
            rows[j] = row
    return rows


@pytest.mark.parametrize("fmt", ["jsonl-classify", "jsonl-pair", "jsonl-rank", "jsonl-cloze", "jsonl-document"])
def test_example_batches_of_records_give_the_datasets_outputs(tmp_path, fmt):
    train_and_evaluate(tmp_path, fmt)
    cfg, task, model = load_trained(tmp_path / "run", tmp_path)
    pipe = task.data
    path = tmp_path / cfg.data.test
    examples = [record_example(pipe, record, where, labelled=False) for where, record in read_jsonl(path)]
    mine = [row for logits in run_outputs(model, pipe.example_batches(examples, 3)) for row in logits]
    assert len(mine) == len(examples) == 7 if fmt != "jsonl-rank" else len(mine) == 6
    theirs = dataset_rows(pipe, model, "test", 4)
    order = list(range(len(examples)))  # file position of each encoded test example
    if fmt == "jsonl-rank":  # the dataset gathers each question's candidates
        qids = [e.qid for e in examples]
        first = {q: qids.index(q) for q in qids}
        order = sorted(order, key=lambda i: first[qids[i]])
    for j, i in enumerate(order):
        a, b = mine[i], theirs[j]
        if fmt == "jsonl-cloze":  # candidates beyond the example's own are padding
            n = len(examples[i].candidates)
            a, b = a[:n], b[:n]
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
    if fmt == "jsonl-rank":
        assert all("question" in b for b in pipe.example_batches(examples, 3))


def test_translation_example_batches_give_the_datasets_outputs(tmp_path):
    train_and_evaluate(tmp_path, "parallel")
    cfg, task, model = load_trained(tmp_path / "run", tmp_path)
    pipe = task.data
    src = (tmp_path / "parallel" / "test.src").read_text().splitlines()
    tgt = (tmp_path / "parallel" / "test.tgt").read_text().splitlines()
    examples = [record_example(pipe, {"source": s, "target": t}, f"stdin:{i}") for i, (s, t) in enumerate(zip(src, tgt), 1)]
    assert [(p.source, p.target) for p in examples] == [(p.source, p.target) for p in pipe.pairs("test")]
    mine = [row for logits in run_outputs(model, pipe.example_batches(examples, 3)) for row in logits]
    theirs = dataset_rows(pipe, model, "test", 4)
    for i, ex in enumerate(examples):
        n = len(ex.target) + 1  # y_1 .. y_n </s>
        torch.testing.assert_close(mine[i][:n], theirs[i][:n], rtol=1e-5, atol=1e-5)
    unlabelled = pipe.example_batches([record_example(pipe, {"source": s}, "stdin:1", labelled=False) for s in src[:2]], 8)
    assert unlabelled[0]["tgt_in"].tolist() == [[pipe.tgt_vocab.stoi["<s>"]]] * 2


@pytest.mark.parametrize("fmt", ["text", "text-documents"])
def test_lm_example_batches_read_a_text_as_the_split_is_read(tmp_path, fmt):
    train_and_evaluate(tmp_path, fmt)
    cfg, task, model = load_trained(tmp_path / "run", tmp_path)
    pipe = task.data
    text = (tmp_path / cfg.data.test).read_text(encoding="utf-8")
    if cfg.data.documents:
        texts = [lm_tokens({"text": doc}, f"doc {i}") for i, doc in enumerate(text.split("\n\n"))]
    else:
        texts = [record_example(pipe, {"text": text}, "stdin:1")]
    mine = pipe.example_batches(texts, 1)
    theirs = pipe.batches("test", 1)
    assert len(mine) == len(theirs)
    for a, b in zip(run_outputs(model, mine), run_outputs(model, theirs)):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
    # one text at batch size 1: every token after the first is a target, in order
    one = pipe.example_batches([texts[0]], 1)
    targets = torch.cat([one[i]["target"][0][one[i]["mask"][0]] for i in range(len(one))])
    assert targets.tolist() == pipe.vocab.encode(texts[0][1:])
    with pytest.raises(MemreadError, match="a text needs at least two tokens"):
        pipe.example_batches([["<eos>"]], 1)


# a record of each task shape, as memread predict reads it
RECORDS = {"lm": {"text": "the cat sat\non the mat"}, "classify": {"text": "a fine film"},
           "pair": {"premise": "a man sleeps", "hypothesis": "a man is awake", "question": "who sleeps ?",
                    "answer": "a man sleeps"},
           "cloze": {"document": "the cat sat on the mat", "query": "the XXXXX sat", "candidates": ["cat", "mat"]},
           "document": {"text": "a fine film . i liked it ."}, "translate": {"source": "das haus"}}
BENCHMARKS = [{"name": "ptb"}, {"name": "stories", "stories": 30}, {"name": "sst"}, {"name": "snli"}, {"name": "wikiqa"},
              {"name": "iwslt14"}, {"name": "tang", "tang_train": "tang/train.ss", "tang_valid": "tang/dev.ss",
                                    "tang_test": "tang/test.ss"}]


@pytest.mark.parametrize("data", BENCHMARKS, ids=lambda d: d["name"])
def test_records_read_for_a_benchmark_datasets_pipeline_too(fixtures, data):
    """A run trained on a benchmark dataset predicts from records: the options come from its [data] config."""
    spec = DATASETS[data["name"]]
    pipe = spec.build(spec.Config(**data), fixtures, None)
    examples = [record_example(pipe, RECORDS[pipe.task], f"stdin:{i}", labelled=False) for i in (1, 2, 3)]
    batches = pipe.example_batches(examples, 2)
    reference = pipe.batches("test", 2)[0]
    assert set(batches[0]) == set(reference) - {"question", "reset"}
    assert len(batches) == (1 if pipe.task == "lm" else 2)
