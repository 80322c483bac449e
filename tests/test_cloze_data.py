"""Cloze data: the CBT format (official samples parsed exactly), CNN rc-data questions, bAbI, and
cloze questions built from raw books by the CBT recipe."""

import json

import pytest

from memread.data.babi import POINTER_TASKS, answer_in_story, babi_path, read_babi, tokenize
from memread.data.cbt import BLANK, read_cbt, write_cbt
from memread.data.cloze_builder import (PREPOSITIONS, book_questions, build_cloze, names_of, read_books,
                                        tokenize_book, write_cloze)
from memread.data.cnn import read_question, read_questions
from memread.errors import MemreadError

# (answer, first candidate, last candidate, document tokens, query tokens, blank position); document
# and query lengths were checked against awk over the raw lines
CBT_SAMPLES = {
    "cbtest_CN_test_2500ex": ("man", "birds", "wings", 534, 15, 8),
    "cbtest_CN_train": ("queen", "ancestors", "walls", 414, 24, 2),
    "cbtest_CN_valid_2000ex": ("dog", "Cousin", "steps", 272, 29, 22),
    "cbtest_NE_test_2500ex": ("Keddah", "Assamese", "right", 400, 80, 14),
    "cbtest_NE_train": ("Prigio", "CHAPTER", "wishing-cap", 528, 16, 10),
    "cbtest_NE_valid_2000ex": ("Chuck", "Chuck", "morning", 323, 12, 1),
    "cbtest_P_test_2500ex": ("as", "across", "while", 260, 22, 1),
    "cbtest_P_train": ("of", "With", "upon", 427, 11, 6),
    "cbtest_P_valid_2000ex": ("on", "Above", "that", 394, 33, 11),
    "cbtest_V_test_2500ex": ("am", "am", "thinking", 286, 13, 1),
    "cbtest_V_train": ("said", "christening", "wearing", 419, 29, 12),
    "cbtest_V_valid_2000ex": ("stuck", "came", "weeping", 451, 33, 20),
}


def test_every_official_cbt_sample_parses_exactly(real_data):
    root = real_data("cbt/format-samples")
    for name, (answer, first, last, n_doc, n_query, blank) in CBT_SAMPLES.items():
        (ex,) = read_cbt(root / "cbt" / "format-samples" / f"{name}.txt.gz", context_lines=20)
        assert (ex.answer, ex.candidates[0], ex.candidates[-1]) == (answer, first, last), name
        assert len(ex.candidates) == 10 and ex.candidates == sorted(ex.candidates), name
        assert (len(ex.document), len(ex.query), ex.query.index(BLANK)) == (n_doc, n_query, blank), name
    (ne,) = read_cbt(root / "cbt/format-samples/cbtest_NE_train.txt.gz")
    assert ne.context[19] == "Well , the little prince grew up .".split()


def test_cbt_book_title_lines_are_skipped_and_written_back(fixtures, tmp_path):
    exs = read_cbt(fixtures / "cbt" / "tiny.txt")
    text = (fixtures / "cbt" / "tiny.txt").read_text()
    (tmp_path / "t.txt").write_text("_BOOK_TITLE_ : Some_Book.txt.out\n" + text)
    read = read_cbt(tmp_path / "t.txt")
    assert [e.source for e in read] == ["Some_Book.txt.out"] * 2 and read[0].query == exs[0].query
    write_cbt(read, tmp_path / "again.txt")
    assert (tmp_path / "again.txt").read_text().startswith("_BOOK_TITLE_ : Some_Book.txt.out\n1 ")
    assert read_cbt(tmp_path / "again.txt") == read


def test_cnn_question_format(fixtures):
    exs = read_questions(fixtures / "cnn")  # *.question only, sorted by name
    assert [e.source for e in exs] == ["0001.question", "0002.question"]
    a, b = exs
    assert a.candidates == ["@entity0", "@entity1", "@entity2", "@entity3", "@entity4"]  # document order
    assert a.answer == "@entity2" and "@placeholder" in a.query and a.document[:3] == ["@entity0", "(", "@entity1"]
    assert b.candidates == ["@entity7", "@entity9", "@entity8"] and b.answer == "@entity7"
    with pytest.raises(MemreadError, match=r"bad_query.question.txt:5: query has no @placeholder"):
        read_question(fixtures / "cnn" / "bad_query.question.txt")
    with pytest.raises(MemreadError, match="no .question files"):
        read_questions(fixtures / "babi")


def test_babi_reader(fixtures):
    exs = read_babi(fixtures / "babi" / "qa1_single-supporting-fact_train.txt")
    assert len(exs) == 9 and {e.group for e in exs} == {"qa1"}
    first, third = exs[0], exs[2]
    assert first.context == [tokenize("Mary moved to the bathroom."), tokenize("John went to the hallway.")]
    assert first.query == ["Where", "is", "Mary", "?"] and first.answer == "bathroom"
    assert len(third.context) == 6  # questions are not statements
    assert third.candidates[:4] == ["Mary", "moved", "to", "the"] and "." not in third.candidates
    assert exs[3].context[0] == tokenize("Sandra travelled to the office.")  # a new story
    last = read_babi(fixtures / "babi" / "qa1_single-supporting-fact_train.txt", max_sentences=2)[-1]
    assert last.context == [tokenize("Sandra went to the garden."), tokenize("Daniel went to the bedroom.")]
    assert all(answer_in_story(e) for e in exs)
    assert not any(answer_in_story(e) for e in read_babi(fixtures / "babi" / "qa6_yes-no-questions_test.txt"))
    with pytest.raises(MemreadError, match="bAbI task 2 not found"):
        babi_path(fixtures, "babi", 2, "train")


def test_babi_pointer_tasks_answer_with_a_word_of_the_story(real_data):
    root = real_data("babi/en-10k")
    for task in POINTER_TASKS:
        exs = read_babi(babi_path(root, "babi/en-10k", task, "test"), task, max_sentences=50)
        assert len(exs) == 1000 and all(answer_in_story(e) for e in exs), task


def test_tokenizer_sentences_quotes_and_abbreviations():
    book = tokenize_book(['"Come here, Anna," said Mr. Brown. "The mill', 'is near!" She went.', "",
                          "G. K. Chesterton wrote it... Then he left?"], "b")
    assert book.sentences == [
        ["``", "Come", "here", ",", "Anna", ",", "''", "said", "Mr.", "Brown", "."],
        ["``", "The", "mill", "is", "near", "!", "''"],
        ["She", "went", "."],
        ["G.", "K.", "Chesterton", "wrote", "it", "..."],
        ["Then", "he", "left", "?"],
    ]
    assert book.forced[0][:2] == [True, True] and book.forced[0][4] is False  # after `` vs mid-sentence
    assert book.forced[1][2] is False and book.forced[1][3] is True  # "is" starts a line of the text


def test_cloze_builder_follows_the_cbt_recipe(fixtures):
    (book,) = read_books(fixtures / "books" / "alpha.txt")
    assert book.name == "alpha"
    names = names_of(book)
    assert {"Anna", "Boris", "Lev"} <= names and not names & {"Then", "Come", "Mr.", "The"}
    for word_class in ("NE", "P"):
        exs = book_questions(book, word_class)
        assert exs == book_questions(book, word_class)  # deterministic
        assert len(exs) > 10
        for ex in exs:
            assert len(ex.context) == 20 and ex.query.count(BLANK) == 1
            assert len(ex.candidates) == 10 and ex.candidates == sorted(set(ex.candidates))
            assert ex.answer in ex.candidates and ex.answer in ex.document and ex.answer not in ex.query
            context_words = set(ex.document)
            assert all(c in context_words for c in ex.candidates)
            same_class = names if word_class == "NE" else PREPOSITIONS
            assert all(c in same_class for c in ex.candidates)
    with pytest.raises(MemreadError, match="needs a part-of-speech tagger"):
        book_questions(book, "CN")
    tagged = book_questions(book, "CN", tagger=lambda words: ["NN" if w.islower() and len(w) > 4 else "DT" for w in words])
    assert tagged and all(len(c) > 4 and c.islower() for ex in tagged for c in ex.candidates)


def test_cloze_builder_splits_by_book(fixtures, tmp_path):
    books = sorted((fixtures / "books").glob("*.txt"))
    splits = build_cloze(books, "NE", valid=["beta"], test=["gamma"])
    assert {e.source for e in splits["train"]} == {"alpha"}
    assert {e.source for e in splits["valid"]} == {"beta"} and {e.source for e in splits["test"]} == {"gamma"}
    manifest = write_cloze(books, tmp_path / "out", ["NE", "P"], valid=["beta"], test=["gamma"])
    assert manifest["questions"]["NE"]["test"] == len(splits["test"])
    assert read_cbt(tmp_path / "out" / "cloze_NE_test.txt") == splits["test"]
    assert json.loads((tmp_path / "out" / "manifest.json").read_text())["books"]["train"]["alpha"]["sentences"] > 60
    with pytest.raises(MemreadError, match="both valid and test"):
        build_cloze(books, "NE", valid=["beta"], test=["beta"])
    with pytest.raises(MemreadError, match="test book.s. delta not among the books"):
        build_cloze(books, "NE", valid=["beta"], test=["delta"])


def test_gutenberg_books_give_cloze_questions(real_data):
    root = real_data("gutenberg/shakespeare-caesar.txt.gz", "gutenberg/chesterton-brown.txt.gz")
    paths = [root / "gutenberg" / f"{b}.txt.gz" for b in ("shakespeare-caesar", "chesterton-brown", "blake-poems")]
    ne = build_cloze(paths, "NE", valid=["blake-poems"], test=["chesterton-brown"])
    assert len(ne["train"]) > 100 and len(ne["test"]) > 100 and not ne["valid"]  # Blake names too few people
    assert {e.source for e in ne["train"]} == {"shakespeare-caesar"}
    p = build_cloze(paths, "P", valid=["blake-poems"], test=["chesterton-brown"])
    assert len(p["test"]) > 1000 and all(e.answer in PREPOSITIONS for e in p["test"])


def test_the_vocabulary_of_all_splits_gives_held_out_words_rows_of_their_own():
    """``data.vocabulary``: "train" (memread's) reads the valid and test questions' new words as <unk>; "all" (the
    AS Reader authors' code) adds them after the training words, most frequent first, each an id of its own, and
    changes nothing else: the training words keep their ids, and pointer-sum occurrence is word identity under
    both (two held-out names are two candidates either way)."""
    from memread.data.cbt import ClozeExample
    from memread.data.pipelines.cloze import ClozePipeline, StoriesClozeConfig

    def q(names: list[str], answer: str) -> ClozeExample:
        return ClozeExample([["the", *names, "ran", "."]], ["XXXXX", "ran", "."], answer, sorted(names))

    splits = {"train": [q(["Ann", "Bob"], "Ann"), q(["Bob", "Cy"], "Cy")],
              "valid": [q(["Dora", "Eve", "Eve"], "Eve")], "test": [q(["Eve", "Fox"], "Fox"), q(["Gil", "Ann"], "Gil")]}
    train = ClozePipeline(StoriesClozeConfig(), ".", examples=splits)
    every = ClozePipeline(StoriesClozeConfig(vocabulary="all"), ".", examples=splits)
    assert every.vocab.itos[:len(train.vocab)] == train.vocab.itos  # the training words keep their ids
    assert every.vocab.itos[len(train.vocab):] == ["Eve", "Dora", "Fox", "Gil"]  # by count (Eve 4), then A-Z
    assert {train.vocab.id(w) for w in ("Dora", "Eve", "Fox", "Gil")} == {train.vocab.unk_id}
    for pipeline in (train, every):
        (batch,) = pipeline.batches("test", 2)
        ids = {tuple(pipeline.vocab.decode(row[m].tolist())) for row, m in zip(batch["cands"], batch["cand_mask"])}
        known = pipeline is every
        assert ids == ({("Eve", "Fox"), ("Ann", "Gil")} if known else {("<unk>", "<unk>"), ("Ann", "<unk>")})
        # occurrence by word identity: each candidate's hits are its own words, held out or not
        words = batch["cand_words"]
        assert all(len(set(row[m].tolist())) == int(m.sum()) for row, m in zip(words, batch["cand_mask"]))
