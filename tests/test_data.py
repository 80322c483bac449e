import gzip
import shutil

import pytest
import torch

from memread.data.cbt import BLANK, read_cbt, write_cbt
from memread.data.ptb import ptb_path, read_ptb
from memread.data.stories import generate_stories, story_splits, story_text
from memread.data.stream import StreamBatches
from memread.data.vocab import Vocab
from memread.errors import MemreadError


def test_ptb_reader_appends_eos_and_reads_gz(fixtures, tmp_path):
    tokens = read_ptb(fixtures / "ptb" / "ptb.valid.txt")
    assert tokens == "the company said the shares rose <eos> the board will meet <eos>".split()
    (tmp_path / "ptb").mkdir()
    with open(fixtures / "ptb" / "ptb.valid.txt", "rb") as f, gzip.open(tmp_path / "ptb" / "ptb.valid.txt.gz", "wb") as g:
        shutil.copyfileobj(f, g)
    assert read_ptb(ptb_path(tmp_path, "valid")) == tokens


def test_malformed_file_names_file_and_line(fixtures, tmp_path):
    with pytest.raises(MemreadError, match=r"bad.txt:1: not UTF-8 text \(invalid start byte at column 19\)"):
        read_ptb(fixtures / "ptb" / "bad.txt")
    broken = tmp_path / "ptb.train.txt.gz"
    broken.write_bytes(b"this is not gzip")
    with pytest.raises(MemreadError, match="not a readable gzip file"):
        read_ptb(broken)


def test_missing_dataset_names_expected_file_and_how_to_get_it(tmp_path):
    with pytest.raises(MemreadError) as e:
        ptb_path(tmp_path, "train")
    msg = str(e.value)
    assert str(tmp_path / "ptb" / "ptb.train.txt") in msg and "memread data download ptb" in msg and "\n" not in msg


def test_vocab_order_caps_and_roundtrip(tmp_path):
    v = Vocab.build("b a c a b a d".split(), min_count=1, max_size=5)
    assert v.itos == ["<pad>", "<unk>", "a", "b", "c"]  # by count, ties alphabetical, capped
    assert v.encode(["a", "zzz"]) == [2, 1]
    assert Vocab.build("b a c a b a".split(), min_count=2).itos == ["<pad>", "<unk>", "a", "b"]
    v.save(tmp_path / "v.json")
    w = Vocab.load(tmp_path / "v.json")
    assert w.itos == v.itos and w.fingerprint() == v.fingerprint()
    assert Vocab.build("x y".split()).fingerprint() != v.fingerprint()
    (tmp_path / "bad.json").write_text("{oops")
    with pytest.raises(MemreadError, match="bad.json: not a memread vocabulary"):
        Vocab.load(tmp_path / "bad.json")


@pytest.mark.parametrize("n,batch,bptt", [(2, 1, 5), (101, 4, 7), (100, 3, 10), (37, 40, 35)])
def test_stream_scores_every_token_after_the_first_exactly_once(n, batch, bptt):
    ids = torch.arange(n) + 10
    batches = StreamBatches(ids, batch, bptt)
    targets, pairs = [], set()
    for b in batches:
        targets.extend(b["target"][b["mask"]].tolist())
        for x, y in zip(b["input"][b["mask"]].tolist(), b["target"][b["mask"]].tolist()):
            pairs.add((x, y))
    assert sorted(targets) == list(range(11, n + 10))
    assert all(y == x + 1 for x, y in pairs)  # each target follows its input in the stream


def test_stream_columns_continue_across_batches():
    ids = torch.arange(60)
    batches = StreamBatches(ids, 3, 4)
    # the last input of column j in batch i is followed by the first input of column j in batch i + 1
    for i in range(len(batches) - 1):
        a, b = batches[i], batches[i + 1]
        assert torch.equal(a["input"][:, -1] + 1, b["input"][:, 0])


def test_cbt_reader_fixture_and_errors(fixtures, tmp_path):
    exs = read_cbt(fixtures / "cbt" / "tiny.txt")
    assert len(exs) == 2
    assert exs[1].context[2] == "bill hid the key in the attic .".split()
    assert exs[1].query.index(BLANK) == 5 and exs[1].answer == "office" and exs[1].candidates == ["attic", "office", "park"]
    with pytest.raises(MemreadError, match=r"bad_number.txt:2: expected line number 2"):
        read_cbt(fixtures / "cbt" / "bad_number.txt")
    with pytest.raises(MemreadError, match=r"bad_answer.txt:2: answer 'hall' is not among the candidates"):
        read_cbt(fixtures / "cbt" / "bad_answer.txt")
    with pytest.raises(MemreadError, match=r"tiny.txt:3: 2 context lines, expected 20"):
        read_cbt(fixtures / "cbt" / "tiny.txt", context_lines=20)
    write_cbt(exs, tmp_path / "again.txt")
    assert read_cbt(tmp_path / "again.txt") == exs


def test_cbt_reader_parses_every_official_format_sample(real_data):
    root = real_data("cbt/format-samples")
    files = sorted((root / "cbt" / "format-samples").glob("cbtest_*.txt.gz"))
    assert len(files) == 12
    for path in files:
        (ex,) = read_cbt(path, context_lines=20)
        assert len(ex.candidates) == 10 and ex.answer in ex.candidates and BLANK in ex.query
    (ne,) = read_cbt(root / "cbt/format-samples/cbtest_NE_train.txt.gz")
    assert ne.answer == "Prigio" and ne.context[17] == ["CHAPTER", "II", "."]


def test_stories_are_deterministic_and_need_memory():
    a, b = generate_stories(200, seed=3), generate_stories(200, seed=3)
    assert a == b and a != generate_stories(200, seed=4)
    for ex in a:
        obj = ex.query[1]
        stated = [i for i, s in enumerate(ex.context) if obj in s]
        assert len(stated) == 1  # the answer is stated once ...
        assert ex.context[stated[0]][-2] == ex.answer
        assert len(ex.context) - stated[0] >= 2  # ... at least two sentences before the question
        assert ex.answer in ex.candidates and len(ex.candidates) >= 4
    splits = story_splits(50, 10, 10, seed=0)
    assert {len(v) for v in splits.values()} == {50, 10}
    assert splits["train"][:10] != splits["test"]
    text = story_text(splits["test"][:1])
    assert text[-1] == "" and BLANK not in " ".join(text)
