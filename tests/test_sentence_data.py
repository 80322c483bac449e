"""Sentence-level data: SST trees, SNLI pairs, WikiQA answer selection (with its ranking metrics), and
pretrained word vectors (GloVe) with the LSTMN paper's first-epoch gradient scaling."""

import collections
import time

import pytest
import torch
from conftest import real_data_root
from torch import nn

from memread.data.snli import SNLI_LABELS, PairExample, is_train_sample, read_snli, snli_path
from memread.data.sst import SentimentExample, parse_tree, read_sst, sst_path
from memread.data.wikiqa import by_question, read_ref, read_wikiqa, tokenize, wikiqa_path
from memread.errors import MemreadError
from memread.metrics import average_precision, counts_for_ranking, map_mrr, reciprocal_rank
from memread.modules.embeddings import fill_pretrained_, load_pretrained_, read_vectors

# ---------------------------------------------------------------------------------------------- SST


def test_sst_fixture_sentences_phrases_and_binary(fixtures):
    path = sst_path(fixtures, "train")
    assert path == fixtures / "sst" / "train.txt" and sst_path(fixtures, "valid") == fixtures / "sst" / "dev.txt"
    sents = read_sst(path)
    assert len(sents) == 11 and sents[0] == SentimentExample(("The", "film", "is", "great", "."), 4)
    assert sents[2].tokens == ("It", "'s", "fun", "(", "really", ")", ".") and sents[2].label == 3  # -LRB- -> (
    assert [e.label for e in sents] == [4, 4, 3, 3, 4, 0, 0, 1, 1, 0, 2]
    binary = read_sst(path, fine=False)
    assert [e.label for e in binary] == [1, 1, 1, 1, 1, 0, 0, 0, 0, 0]  # the neutral sentence is dropped
    phrases = read_sst(path, phrases=True)
    assert len(phrases) == sum(2 * len(e.tokens) - 1 for e in sents)  # every node of a binary tree
    assert phrases[0] == sents[0] and phrases[1] == SentimentExample(("The",), 2)  # pre-order, root first
    assert SentimentExample(("great", "."), 4) in phrases and SentimentExample(("great",), 4) in phrases
    bin_phrases = read_sst(path, fine=False, phrases=True)
    assert len(bin_phrases) == sum(1 for e in phrases if e.label != 2)
    assert SentimentExample(("awful",), 0) in bin_phrases and SentimentExample(("great",), 1) in bin_phrases
    for split in ("valid", "test"):
        assert len(read_sst(sst_path(fixtures, split))) >= 8


def test_sst_tree_structure_and_escapes():
    tree = parse_tree(r"(3 (2 co-writer\/director) (4 (2 -LRB-) (4 (4 good) (2 -RRB-))))")
    assert tree.label == 3 and [c.label for c in tree.children] == [2, 4]
    assert tree.leaves() == ["co-writer/director", "(", "good", ")"]
    assert len(tree.nodes()) == 7
    assert parse_tree("(2 8\u00a01\\/2)").leaves() == ["8\u00a01/2"]  # a no-break space stays inside the word


@pytest.mark.parametrize("line, message", [
    ("(3 (2 a) (2 b)", "unbalanced brackets"),
    ("(3 (2 a) (2 b)))", "text after the end of the tree"),
    ("((2 a) (2 b))", "node without a label"),
    ("(3 (a) (2 b))", "label 'a' outside 0-4"),
    ("(5 (2 a) (2 b))", "label '5' outside 0-4"),
    ("(3 (2 a b))", "more than one word"),
    ("(3 )", "no word or subtree"),
    ("2 a", "must start with '('"),
])
def test_sst_malformed_lines_name_file_and_line(tmp_path, line, message):
    path = tmp_path / "bad.txt"
    path.write_text("(3 (2 fine) (3 tree))\n" + line + "\n")
    with pytest.raises(MemreadError) as err:
        read_sst(path)
    assert str(err.value).startswith(f"{path}:2: ") and message in str(err.value)
    with pytest.raises(MemreadError) as err:
        parse_tree(line, "somewhere:7")
    assert str(err.value).startswith("somewhere:7: ") and message in str(err.value)


def test_sst_missing_split_names_the_file(tmp_path):
    with pytest.raises(MemreadError, match=r"sst/dev.txt \(or dev.txt.gz\)"):
        sst_path(tmp_path, "valid")
    with pytest.raises(MemreadError, match="unknown SST split 'validation'"):
        sst_path(tmp_path, "validation")


def test_sst_real_counts(real_data):
    root = real_data("sst/train.txt.gz", "sst/dev.txt.gz", "sst/test.txt.gz")
    # (sentences, root labels 0..4, binary sentences, labelled nodes), from the data MANIFEST and SST-2
    expected = {"train": (8544, [1092, 2218, 1624, 2322, 1288], 6920, 318_582),
                "valid": (1101, [139, 289, 229, 279, 165], 872, 41_447),
                "test": (2210, [279, 633, 389, 510, 399], 1821, 82_600)}
    for split, (n, by_label, n_binary, n_nodes) in expected.items():
        path = sst_path(root, split)
        sents = read_sst(path)
        counts = collections.Counter(e.label for e in sents)
        assert (len(sents), [counts[c] for c in range(5)]) == (n, by_label), split
        assert len(read_sst(path, fine=False)) == n_binary, split
        assert len(read_sst(path, phrases=True)) == n_nodes, split
    train = read_sst(sst_path(root, "train"))
    assert " ".join(train[0].tokens).startswith("The Rock is destined to be the 21st Century 's new `` Conan ''")
    words = {w for e in train for w in e.tokens}
    assert "(" in words and ")" in words and "-LRB-" not in words and not any("\\" in w for w in words)
    assert "co-writer/director" in words


# --------------------------------------------------------------------------------------------- SNLI


def test_snli_fixture(fixtures):
    path = snli_path(fixtures, "train")
    assert path == fixtures / "snli" / "snli_1.0_train.jsonl" and not is_train_sample(path)
    assert snli_path(fixtures, "valid") == fixtures / "snli" / "snli_1.0_dev.jsonl"
    for split in ("train", "valid", "test"):
        examples, dropped = read_snli(snli_path(fixtures, split))
        assert len(examples) >= 8 and dropped == 1, split
        assert set(e.label for e in examples) == {0, 1, 2}, split
    dev, _ = read_snli(snli_path(fixtures, "valid"))
    assert dev[0] == PairExample(("A", "boy", "is", "sleeping", "outside", "."), ("A", "boy", "is", "sleeping", "."), 0)
    assert SNLI_LABELS[dev[1].label] == "contradiction" and "not" in dev[1].second


def test_snli_falls_back_to_raw_sentences_and_maps_brackets(tmp_path):
    path = tmp_path / "s.jsonl"
    path.write_text('{"gold_label": "neutral", "sentence1": "A man (tall) sleeps.", "sentence2": "He sleeps ."}\n'
                    '{"gold_label": "-", "sentence1": "x", "sentence2": "y"}\n'
                    '{"gold_label": "entailment", "sentence1_binary_parse": "( ( A ( -LRB- tall -RRB- ) ) man )",'
                    ' "sentence2_binary_parse": "", "sentence2": "A man ."}\n')
    examples, dropped = read_snli(path)
    assert dropped == 1
    assert examples[0] == PairExample(("A", "man", "(tall)", "sleeps."), ("He", "sleeps", "."), 1)
    assert examples[1] == PairExample(("A", "(", "tall", ")", "man"), ("A", "man", "."), 0)


@pytest.mark.parametrize("line, message", [
    ('{"gold_label": "neutral", "sentence1": "a"', "not valid JSON"),
    ('{"sentence1": "a", "sentence2": "b"}', "missing field 'gold_label'"),
    ('{"gold_label": "neutral", "sentence1": "a"}', "missing field 'sentence2'"),
    ('{"gold_label": "maybe", "sentence1": "a", "sentence2": "b"}', "unknown gold_label 'maybe'"),
    ('["neutral"]', "expected a JSON object"),
])
def test_snli_bad_lines_name_file_and_line(tmp_path, line, message):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"gold_label": "neutral", "sentence1": "a b", "sentence2": "c"}\n' + line + "\n")
    with pytest.raises(MemreadError) as err:
        read_snli(path)
    assert str(err.value).startswith(f"{path}:2: ") and message in str(err.value)


def test_snli_missing_split(tmp_path):
    with pytest.raises(MemreadError, match=r"snli_1.0_train.jsonl\(.gz\) or .*snli_1.0_train_0.01.jsonl\(.gz\)"):
        snli_path(tmp_path, "train")


def test_snli_real_counts(real_data):
    root = real_data("snli/snli_1.0_dev.jsonl.gz", "snli/snli_1.0_test.jsonl.gz", "snli/snli_1.0_train_0.01.jsonl.gz")
    train = snli_path(root, "train")
    assert train.name == "snli_1.0_train_0.01.jsonl.gz" and is_train_sample(train)  # only the 1% sample is here
    expected = {"train": (5498, 4, None), "valid": (9842, 158, [3329, 3235, 3278]), "test": (9824, 176, [3368, 3219, 3237])}
    for split, (n, n_dropped, by_label) in expected.items():
        examples, dropped = read_snli(snli_path(root, split))
        assert (len(examples), dropped) == (n, n_dropped), split
        if by_label:
            counts = collections.Counter(e.label for e in examples)
            assert [counts[i] for i in range(3)] == by_label, split
    dev, _ = read_snli(snli_path(root, "valid"))
    assert dev[0] == PairExample(  # the first dev line, tokens from its binary parses
        tuple("Two women are embracing while holding to go packages .".split()),
        tuple("The sisters are hugging goodbye while holding to go packages after just eating lunch .".split()), 1)
    words = {w for e in dev for w in e.first + e.second}
    assert "(" in words and "-LRB-" not in words


# ------------------------------------------------------------------------------------------- WikiQA


def test_wikiqa_tokenizer():
    assert tokenize("Who's O'Neil? He didn't earn $2.5 million.") == \
        ["Who", "'s", "O'Neil", "?", "He", "did", "n't", "earn", "$", "2.5", "million", "."]
    assert tokenize("The song reached No. 1 on August 29, 2009 (Cascada song), co-founded 21st 6,000") == \
        ["The", "song", "reached", "No", ".", "1", "on", "August", "29", ",", "2009", "(", "Cascada", "song", ")",
         ",", "co-founded", "21st", "6,000"]


def test_wikiqa_fixture(fixtures):
    path = wikiqa_path(fixtures, "valid")
    assert path == fixtures / "wikiqa" / "WikiQA-dev.tsv" and b"\r\n" in path.read_bytes()  # CRLF, as the originals
    rows = read_wikiqa(path)
    assert len(rows) == 10
    first = rows[0]
    assert (first.qid, first.sentence_id, first.label) == ("Q10", "D10-0", 1)
    assert first.question == ("what", "is", "the", "capital", "of", "spain")
    assert first.sentence == ("Madrid", "is", "the", "capital", "of", "Spain", ".")
    groups = by_question(rows)
    assert [q for q, _ in groups] == ["Q10", "Q11", "Q12", "Q13"] and [len(c) for _, c in groups] == [3, 2, 3, 2]
    for split in ("train", "valid", "test"):
        assert len(read_wikiqa(wikiqa_path(fixtures, split))) >= 8
    # the fixture refs follow the corpus's format and filter
    for split, expected_kept in (("valid", {1, 3}), ("test", {1, 2, 3, 4})):
        groups = by_question(read_wikiqa(wikiqa_path(fixtures, split)))
        ref = read_ref(wikiqa_path(fixtures, split, ".ref"))
        assert ref == [(qn, j, c.label) for qn, (_, cands) in enumerate(groups, 1) for j, c in enumerate(cands)]
        kept = {qn for qn, (_, cands) in enumerate(groups, 1) if counts_for_ranking([c.label for c in cands])}
        assert {r.question for r in read_ref(wikiqa_path(fixtures, split, "-filtered.ref"))} == kept == expected_kept
    # dev: Q11 has no correct candidate, Q13 only correct ones; both are left out


@pytest.mark.parametrize("line, message", [
    ("Q1\tq\tD1\tT\tD1-0\tsentence", "6 TAB-separated columns, expected 7"),
    ("Q1\tq\tD1\tT\tD1-0\tsentence\twith a tab\t1", "8 TAB-separated columns, expected 7"),
    ("Q1\tq\tD1\tT\tD1-0\tsentence\tyes", "label 'yes', expected 0 or 1"),
])
def test_wikiqa_bad_rows_name_file_and_line(tmp_path, line, message):
    path = tmp_path / "bad.tsv"
    header = "QuestionID\tQuestion\tDocumentID\tDocumentTitle\tSentenceID\tSentence\tLabel"
    path.write_bytes(f"{header}\r\nQ1\tq\tD1\tT\tD1-0\tok\t0\r\n{line}\r\n".encode())
    with pytest.raises(MemreadError) as err:
        read_wikiqa(path)
    assert str(err.value).startswith(f"{path}:3: ") and message in str(err.value)
    path.write_text("Question\tSentence\tLabel\n")
    with pytest.raises(MemreadError, match=r"bad.tsv:1: expected the header"):
        read_wikiqa(path)
    path.write_text("1 0 0 1\n1 0 1\n")
    with pytest.raises(MemreadError, match=r"bad.tsv:2: expected 'question 0 sentence label'"):
        read_ref(path)


def test_wikiqa_real_counts_and_refs(real_data):
    root = real_data(*(f"wikiqa/WikiQA-{s}.{e}.gz" for s in ("train", "dev", "test") for e in ("tsv", "ref")))
    expected = {"train": (20360, 2118, 1040), "valid": (2733, 296, 140), "test": (6165, 633, 293)}
    for split, (n_rows, n_questions, n_positive) in expected.items():
        rows = read_wikiqa(wikiqa_path(root, split))
        groups = by_question(rows)
        assert (len(rows), len(groups), sum(r.label for r in rows)) == (n_rows, n_questions, n_positive), split
        assert len({q for q, _ in groups}) == n_questions  # each question's rows are consecutive
        # .ref column meaning: 1-based question ordinal, 0, index within the question (= SentenceID suffix), label
        ref = read_ref(wikiqa_path(root, split, ".ref"))
        ours = [(qn, j, c.label) for qn, (_, cands) in enumerate(groups, 1) for j, c in enumerate(cands)]
        assert ref == ours, split
        assert all(c.sentence_id == f"{c.sentence_id.rsplit('-', 1)[0]}-{j}"
                   for _, cands in groups for j, c in enumerate(cands)), split
    dev = read_wikiqa(wikiqa_path(root, "valid"))
    assert dev[0].question == ("How", "are", "epithelial", "tissues", "joined", "together", "?")


def test_filter_matches_the_official_filtered_refs(real_data):
    """The filtered refs keep the questions with a correct *and* an incorrect candidate (122 dev, 237 test);
    "at least one correct" alone would keep 126 and 243."""
    root = real_data("wikiqa/WikiQA-dev.tsv.gz", "wikiqa/WikiQA-dev-filtered.ref.gz",
                     "wikiqa/WikiQA-test.tsv.gz", "wikiqa/WikiQA-test-filtered.ref.gz")
    for split, (n_kept, n_with_correct) in {"valid": (122, 126), "test": (237, 243)}.items():
        groups = by_question(read_wikiqa(wikiqa_path(root, split)))
        filtered = read_ref(wikiqa_path(root, split, "-filtered.ref"))
        in_refs = {groups[r.question - 1][0] for r in filtered}  # ordinal -> QuestionID
        kept = {qid for qid, cands in groups if counts_for_ranking([c.label for c in cands])}
        assert kept == in_refs and len(kept) == n_kept, split
        loose = {qid for qid, cands in groups if counts_for_ranking([c.label for c in cands], require_incorrect=False)}
        assert len(loose) == n_with_correct and loose != in_refs, split
        # and the filtered refs hold every row of those questions, unchanged
        full = read_ref(wikiqa_path(root, split, ".ref"))
        assert filtered == [r for r in full if groups[r.question - 1][0] in kept], split
        labels = [[c.label for c in cands] for _, cands in groups]
        assert map_mrr((labels_, labels_) for labels_ in labels)["questions"] == n_kept  # scores = labels


# ------------------------------------------------------------------------------------------ metrics


def test_ranking_metrics_by_hand():
    labels = [0, 1, 0, 1]
    assert average_precision([0.9, 0.8, 0.7, 0.6], labels) == pytest.approx((1 / 2 + 2 / 4) / 2) == 0.5
    assert reciprocal_rank([0.9, 0.8, 0.7, 0.6], labels) == 0.5
    assert average_precision([0.1, 0.9, 0.2, 0.3], labels) == 1.0 and reciprocal_rank([0.1, 0.9, 0.2, 0.3], labels) == 1.0
    # ranking: candidate 1 (wrong), 2 (right), 0 (right)
    assert average_precision([0.2, 0.9, 0.5], [1, 0, 1]) == pytest.approx((1 / 2 + 2 / 3) / 2)
    assert reciprocal_rank([0.2, 0.9, 0.5], [1, 0, 1]) == 0.5
    assert average_precision([0.5, 0.4], [0, 0]) == 0.0 and reciprocal_rank([0.5, 0.4], [0, 0]) == 0.0
    assert average_precision(torch.tensor([0.3, 0.7]), torch.tensor([1, 0])) == 0.5  # tensors work too
    with pytest.raises(ValueError, match="3 scores but 2 labels"):
        average_precision([1, 2, 3], [0, 1])


def test_ties_keep_candidate_order():
    assert reciprocal_rank([0.5, 0.5, 0.5], [0, 0, 1]) == 1 / 3
    assert reciprocal_rank([0.5, 0.5, 0.5], [1, 0, 0]) == 1.0
    assert average_precision([0.2, 0.5, 0.5], [0, 0, 1]) == 0.5  # tied with the wrong candidate 1, ranked after it


def test_map_mrr_filters_questions():
    questions = [([0.9, 0.1], [1, 0]),  # AP 1, RR 1
                 ([0.9, 0.8, 0.1], [0, 0, 1]),  # AP 1/3, RR 1/3
                 ([0.3, 0.2], [0, 0]),  # no correct candidate: never counts
                 ([0.3, 0.2], [1, 1])]  # only correct candidates: left out of the filtered refs
    result = map_mrr(questions)
    assert result == {"map": pytest.approx(2 / 3), "mrr": pytest.approx(2 / 3), "questions": 2}
    loose = map_mrr(iter(questions), require_incorrect=False)
    assert loose == {"map": pytest.approx((1 + 1 / 3 + 1) / 3), "mrr": pytest.approx((1 + 1 / 3 + 1) / 3), "questions": 3}
    assert map_mrr([]) == {"map": 0.0, "mrr": 0.0, "questions": 0}


# ------------------------------------------------------------------------------- pretrained vectors


def test_vectors_from_fixture(fixtures, tmp_path):
    path = fixtures / "glove" / "tiny.txt"
    vectors, dim = read_vectors(path, {"good", "bad", "nosuchword"})
    assert dim == 8 and set(vectors) == {"good", "bad"} and vectors["good"][:2] == [0.9, 0.0]
    emb = nn.Embedding(4, 8, padding_idx=0)
    found = load_pretrained_(emb, ["<pad>", "good", "The", "not"], path, oov="zero")
    assert found.tolist() == [False, True, False, True]  # GloVe is uncased: "The" has no vector
    assert emb.weight[1, 0].item() == pytest.approx(0.9) and not emb.weight[2].any() and emb.weight[3, 1] == 1.0
    bad = tmp_path / "v.txt"
    bad.write_text("a 1 2 3\nb 1 2\nc 1 2 3\n")
    with pytest.raises(MemreadError, match=r"v.txt:2: 2 values, earlier lines have 3"):
        read_vectors(bad, {"a"})  # a skipped line is still checked
    with pytest.raises(MemreadError, match=r"v.txt:2: 2 values, earlier lines have 3"):
        read_vectors(bad)


@pytest.fixture(scope="module")
def glove_50d():
    """The real 50d GloVe file, scanned once for this module: (vectors of a few words, dim, seconds)."""
    root = real_data_root()
    path = root / "glove" / "glove.6B.50d.txt.gz" if root else None
    if path is None or not path.is_file():
        pytest.skip(f"real data missing: {path or 'set MEMREAD_DATA'}")
    start = time.perf_counter()
    vectors, dim = read_vectors(path, {"the", ",", "zzzzqq", "(", "good"})
    return vectors, dim, time.perf_counter() - start


def test_glove_real_vectors_and_oov_rows(glove_50d):
    vectors, dim, seconds = glove_50d
    print(f"scanned 400k GloVe lines in {seconds:.2f} s")
    assert dim == 50 and set(vectors) == {"the", ",", "(", "good"}
    assert vectors["the"][:5] == [0.418, 0.24968, -0.41242, 0.1217, 0.34527]
    assert vectors[","][:2] == [0.013441, 0.23682]
    itos = ["<pad>", "the", ",", "zzzzqq"]
    emb = nn.Embedding(4, 50, padding_idx=0)
    found = fill_pretrained_(emb, itos, vectors, oov="gaussian", seed=3)
    assert found.tolist() == [False, True, True, False]
    assert torch.equal(emb.weight[1], torch.tensor(vectors["the"]))
    expected_oov = torch.randn(4, 50, generator=torch.Generator().manual_seed(3))[3]
    assert torch.equal(emb.weight[3], expected_oov) and not emb.weight[0].any()  # N(0, 1) OOV row, zero pad row
    fill_pretrained_(emb, itos, vectors, oov="zero")
    assert not emb.weight[3].any() and emb.weight[2, 0].item() == pytest.approx(0.013441)
