"""`memread data download NAME` / `memread data list` against a local HTTP server on 127.0.0.1.

For every dataset of the catalog, a small archive in the real one's format (zip or tar.gz, its member
names, a few lines per member, decoys that must not be taken) is served from the loopback server
(``MEMREAD_DOWNLOAD_BASE``), downloaded with checksums computed from the fixture, and then read by
memread's own reader for that dataset from the data root, so the layout is proven, not assumed.
IWSLT14 is fetched as 12 plain files (pcyin/pytorch_nmt's raw-file URLs, served under the same path
from the loopback server), and read back by the IWSLT reader and the ``iwslt14`` pipeline.

A download that fails in any way (HTTP error, refused connection, not an archive, checksum mismatch,
missing member, truncated archive, an interrupt) leaves the data root's datasets exactly as they were,
and reports one line naming the URL; a download cut short keeps what arrived in ``ROOT/.downloads/``
and the next run continues it with an HTTP Range request."""

from __future__ import annotations

import gzip
import hashlib
import http.server
import io
import json
import random
import re
import socket
import tarfile
import threading
import urllib.parse
import zipfile
from dataclasses import replace
from pathlib import Path

import pytest

from memread.cli import main
from memread.data import catalog
from memread.data import download as dl
from memread.data import extract, formats
from memread.data.babi import TASK_NAMES, babi_path, read_babi
from memread.data.iwslt import LANGS, check_iwslt, read_iwslt
from memread.errors import MemreadError

SPLITS = ("train", "valid", "test")


# ----------------------------------------------------------------------------- archives


def tgz(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def zipped(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in members.items():
            z.writestr(name, data)
    return buf.getvalue()


def ptb_members(fixtures) -> dict[str, bytes]:
    """Laid out like Mikolov's ``simple-examples.tgz``."""
    members = {f"./simple-examples/data/ptb.{s}.txt": (fixtures / "ptb" / f"ptb.{s}.txt").read_bytes() for s in SPLITS}
    members["./simple-examples/README"] = random.Random(0).randbytes(50_000)  # incompressible: a few chunks to cut
    return members


def story(task: int) -> bytes:
    return (f"1 Mary went to the kitchen.\n2 John went to the garden.\n3 Where is Mary? \tkitchen\t1\n"
            f"1 Sandra went to the hallway number {task}.\n2 Where is Sandra? \thallway\t1\n").encode()


def babi_members(fixtures, prefix: str) -> dict[str, bytes]:
    members = {}
    for task, name in TASK_NAMES.items():
        for split in ("train", "test"):
            f = f"qa{task}_{name}_{split}.txt"
            fixture = fixtures / "babi" / f
            members[f"{prefix}/{f}"] = fixture.read_bytes() if fixture.exists() else story(task)
    return members


def glove_line(word: str, seed: int, dim: int = 50) -> str:
    return word + " " + " ".join(f"{((seed * 31 + i * 7) % 200 - 100) / 1000:g}" for i in range(dim))


GUTENBERG = catalog._GUTENBERG_BOOKS
IMDB_REVIEWS = {"train/pos/0_9.txt": b"Bromwell High is a cartoon comedy. It ran at the same time!",
                "train/neg/1_2.txt": b"Once again Mr. Costner has dragged out a movie.<br /><br />Far too long.",
                "test/pos/3_10.txt": b"A wonderful little production. Great acting.",
                "test/neg/2_1.txt": b"This film was awful; I want my 2 hours back."}


def imdb_members() -> dict[str, bytes]:
    """Like ``aclImdb_v1.tar.gz``: not sorted, with members the benchmark layout leaves out."""
    members = {"aclImdb/train/unsup/0_0.txt": b"unlabelled", "aclImdb/README": b"Large Movie Review Dataset v1.0\n",
               "aclImdb/train/labeledBow.feat": b"0:1 1:2\n", "aclImdb/imdbEr.txt": b"0.1\n0.2\n",
               "aclImdb/imdb.vocab": b"the\nand\n", "aclImdb/train/urls_unsup.txt": b"http://x\n"}
    for split in ("test", "train"):
        for pol in ("pos", "neg"):
            members[f"aclImdb/{split}/urls_{pol}.txt"] = b"http://www.imdb.com/title/tt0000001/usercomments\n"
    for rel, text in IMDB_REVIEWS.items():
        members[f"aclImdb/{rel}"] = text
    return members


def cbt_members(fixtures) -> dict[str, bytes]:
    members = {"CBTest/README.txt": b"Children's Book Test\n"}
    for c in ("NE", "CN", "V", "P"):
        for s in ("train", "valid_2000ex", "test_2500ex"):
            source = "cbtest_P_fixture.txt" if c == "P" else "cbtest_NE_fixture.txt"
            members[f"CBTest/data/cbtest_{c}_{s}.txt"] = (fixtures / "cbt" / source).read_bytes()
    for s in ("train", "valid", "test"):
        members[f"CBTest/data/cbt_{s}.txt"] = (
            f"_BOOK_TITLE_ : Andrew_Lang___Prince_Prigio_{s}.txt.out\nCHAPTER I. How the Fairies were not Invited "
            f"to Court .\nOnce upon a time there reigned a king .\n").encode()
    return members


def cnn_members(fixtures) -> dict[str, bytes]:
    q1, q2 = (fixtures / "cnn" / "0001.question").read_bytes(), (fixtures / "cnn" / "0002.question").read_bytes()
    return {"cnn/questions/training/0001.question": q1, "cnn/questions/training/0002.question": q2,
            "cnn/questions/validation/0002.question": q2, "cnn/questions/test/0001.question": q1,
            "cnn/questions/test/0002.question": q2,
            "cnn/stories/0001.story": b"not a question",  # a decoy: not under questions/
            "cnn/questions/test/nested/0003.question": q1,  # below the folder: not taken
            "cnn/questions/test/../../../escaped.question": q1}  # a hostile name: never written


IWSLT = "iwslt14-de-en"
IWSLT_FILES = catalog._IWSLT_FILES  # train, valid, test x de, en x raw, .wmixerprep
RAW_BASE = f"/pcyin/pytorch_nmt/{catalog._PYTORCH_NMT}/data"  # the path of the raw.githubusercontent.com URLs


def iwslt_files(fixtures) -> dict[str, bytes]:
    """The 12 files of pytorch_nmt's data/ folder: valid and test from the fixtures, a train made of their
    lines (45), and each ``.wmixerprep`` the raw file with the words seen once in train (per language) as <unk>."""
    d = fixtures / "iwslt14-de-en"
    lines = {(s, lang): (d / f"{s}.de-en.{lang}").read_text(encoding="utf-8").splitlines()
             for s in ("valid", "test") for lang in LANGS}
    for lang in LANGS:
        lines["train", lang] = (lines["valid", lang] + lines["test", lang])[::-1] + lines["valid", lang]
    files = {}
    for lang in LANGS:
        counts: dict[str, int] = {}
        for line in lines["train", lang]:
            for w in line.split():
                counts[w] = counts.get(w, 0) + 1
        for s in SPLITS:
            raw = lines[s, lang]
            mapped = [" ".join(w if counts.get(w, 0) >= 2 else "<unk>" for w in line.split()) for line in raw]
            files[f"{s}.de-en.{lang}"] = ("\n".join(raw) + "\n").encode()
            files[f"{s}.de-en.{lang}.wmixerprep"] = ("\n".join(mapped) + "\n").encode()
    assert sorted(files) == sorted(IWSLT_FILES) and b"<unk>" in files["test.de-en.de.wmixerprep"]
    return files


def dataset_archives(fixtures) -> dict[str, dict[str, bytes]]:
    """Each downloadable dataset's fixture archive members, named as in the real archive (for a dataset
    of plain files, IWSLT14: its files, by name)."""
    f = fixtures
    wikiqa = {f"WikiQACorpus/WikiQA-{s}{x}": (f / "wikiqa" / f"WikiQA-{s}{x}").read_bytes()
              for s in ("train", "dev", "test") for x in (".tsv", ".ref")}
    wikiqa.update({f"WikiQACorpus/WikiQA-{s}-filtered.ref": (f / "wikiqa" / f"WikiQA-{s}-filtered.ref").read_bytes()
                   for s in ("dev", "test")})
    wikiqa.update({"WikiQACorpus/README.txt": b"Microsoft Research WikiQA Corpus\n",
                   "WikiQACorpus/LICENSE.pdf": b"%PDF-1.4 licence\n", "WikiQACorpus/eval.py": b"print(1)\n"})
    wikitext = {s: (f / "wikitext-2" / f"wiki.{s}.tokens").read_bytes() for s in SPLITS}
    books = sorted((f / "books").glob("*.txt"))
    return {
        "ptb": ptb_members(f),
        "sst": {f"trees/{s}.txt": (f / "sst" / f"{s}.txt").read_bytes() for s in ("train", "dev", "test")},
        "snli": {**{f"snli_1.0/snli_1.0_{s}.jsonl": (f / "snli" / f"snli_1.0_{s}.jsonl").read_bytes()
                    for s in ("train", "dev", "test")},
                 "snli_1.0/README.txt": b"SNLI 1.0\n", "snli_1.0/snli_1.0_dev.txt": b"gold_label\tsentence1\n",
                 "__MACOSX/snli_1.0/._snli_1.0_dev.jsonl": b"\x00\x05\x16\x07 resource fork"},
        "wikiqa": wikiqa,
        "babi-en-10k": {**babi_members(f, "tasks_1-20_v1-2/en-10k"),
                        "tasks_1-20_v1-2/en/qa1_single-supporting-fact_train.txt": story(99)},
        "babi-en-v1.1": {**babi_members(f, "tasksv11/en"), "tasksv11/README": b"bAbI v1.1\n",
                         "tasksv11/LICENSE": b"CC License\n",
                         "tasksv11/shuffled/qa1_single-supporting-fact_train.txt": story(98)},
        "glove": {"glove.6B.50d.txt": "\n".join(glove_line(w, i) for i, w in
                                                enumerate(["the", ",", "good", "bad", "movie"])).encode() + b"\n",
                  "glove.6B.100d.txt": (glove_line("the", 0, 100) + "\n").encode()},
        "gutenberg": {**{f"gutenberg/{b}.txt": books[i % len(books)].read_bytes() for i, b in enumerate(GUTENBERG)},
                      "gutenberg/README": b"Project Gutenberg Selections\n",
                      "gutenberg/bible-kjv.txt": b"In the beginning God created the heaven and the earth.\n"},
        "wikitext-2": {f"wikitext-2/wiki.{s}.tokens": wikitext[s] for s in SPLITS},
        "wikitext-103": {f"wikitext-103/wiki.{s}.tokens": wikitext[s] for s in SPLITS},
        "cbt": cbt_members(f),
        "cnn": cnn_members(f),
        "imdb-acl": imdb_members(),
        IWSLT: iwslt_files(f),
    }


def pack(name: str, members: dict[str, bytes]) -> bytes:
    """In the real archive's format: zip or tar.gz, as its file name says."""
    return zipped(members) if catalog.DATASETS[name].archive.endswith(".zip") else tgz(members)


def deterministic_tar(files: dict[str, bytes]) -> bytes:
    """What the benchmark's aclImdb_v1_train_test.tar.gz holds (MANIFEST.md): sorted, mtime 0, owner 0, GNU."""
    names = dict(files)
    for n in files:
        parts = n.split("/")
        for i in range(1, len(parts)):
            names.setdefault("/".join(parts[:i]), None)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for n in sorted(names):
            info = tarfile.TarInfo(n)
            info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
            if names[n] is None:
                info.type, info.mode = tarfile.DIRTYPE, 0o755
                tar.addfile(info)
            else:
                info.mode, info.size = 0o644, len(names[n])
                tar.addfile(info, io.BytesIO(names[n]))
    return buf.getvalue()


def imdb_expected_tar() -> bytes:
    keep = re.compile(r"aclImdb/(README|imdb\.vocab|imdbEr\.txt|(train|test)/urls_(pos|neg)\.txt|(train|test)/(pos|neg)/.*)")
    return deterministic_tar({n: d for n, d in imdb_members().items() if keep.fullmatch(n)})


def fixture_count(m: catalog.Member, data: bytes | None, members: dict[str, bytes]) -> int | None:
    """A fixture's record count, counted here independently of the checks."""
    if m.count is None:
        return None
    if m.kind == "tree":
        return sum(1 for n in members if re.fullmatch(re.escape(m.source) + r"/[^/]+\.question", n))
    if m.check in ("babi", "cbt"):
        return sum(1 for line in data.decode().splitlines() if "\t" in line)
    return data.count(b"\n")


def fixture_spec(name: str, members: dict[str, bytes]) -> catalog.Dataset:
    """``name``'s catalog entry with every pin and record count those of the fixture archive's members."""
    spec = catalog.DATASETS[name]
    out = []
    for m in spec.members:
        data = next((d for n, d in members.items() if n == m.source or n.endswith("/" + m.source)), None)
        if m.kind == "tar":
            sha = hashlib.sha256(imdb_expected_tar()).hexdigest()
        else:
            sha = hashlib.sha256(data).hexdigest() if m.sha256 is not None and data is not None else m.sha256
        out.append(replace(m, sha256=sha, count=fixture_count(m, data, members)))
    return replace(spec, members=tuple(out))


# ----------------------------------------------------------------------------- the loopback server


class Served:
    """What the server serves (``files[NAME]`` at ``/.../NAME``), and how it misbehaves."""

    def __init__(self):
        self.files: dict[str, bytes] = {}
        self.requests: list[tuple[str, dict[str, str]]] = []
        self.cut: dict[str, int] = {}  # NAME -> the next GET of it sends only this many bytes, then closes
        self.ignore_range = False


@pytest.fixture
def served():
    return Served()


@pytest.fixture
def server(served):
    """``/NAME`` serves ``served.files[NAME]`` (Range and If-Range honoured, an ETag sent);
    ``/cut-short/NAME`` promises all of it and sends half."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            served.requests.append((self.path, dict(self.headers.items())))
            name = urllib.parse.unquote(self.path.rsplit("/", 1)[-1])
            if name not in served.files:
                self.send_error(404)
                return
            body = served.files[name]
            etag = '"' + hashlib.sha1(body).hexdigest() + '"'
            start, ranged = 0, self.headers.get("Range")
            if ranged and not served.ignore_range and self.headers.get("If-Range", etag) == etag:
                start = int(re.fullmatch(r"bytes=(\d+)-", ranged).group(1))
                if start >= len(body):
                    self.send_error(416)
                    return
                self.send_response(206)
                self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
            else:
                self.send_response(200)
            self.send_header("Content-Length", str(len(body) - start))
            self.send_header("ETag", etag)
            self.end_headers()
            data = body[start:]
            if self.path.startswith("/cut-short/"):
                data = data[: len(data) // 2]
            if name in served.cut:
                data = data[: served.cut.pop(name)]
            self.wfile.write(data)

        def log_message(self, *args):
            pass

    httpd = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture
def archives(fixtures, served) -> dict[str, bytes]:
    good = tgz(ptb_members(fixtures))
    altered = ptb_members(fixtures)
    altered["./simple-examples/data/ptb.valid.txt"] += b" an extra line\n"
    no_test = ptb_members(fixtures)
    del no_test["./simple-examples/data/ptb.test.txt"]
    files = {
        "simple-examples.tgz": good,
        "truncated.tgz": good[: len(good) // 2],
        "altered.tgz": tgz(altered),
        "no-test.tgz": tgz(no_test),
        "not-a-tar.tgz": b"<html><body>moved to a new home</body></html>\n" * 20,
    }
    served.files.update(files)
    return files


@pytest.fixture
def fixture_ptb(fixtures, monkeypatch):
    """The ptb download with the fixture files' sha256s (the real ones cannot match a fixture archive)."""
    monkeypatch.setitem(catalog.DATASETS, "ptb", fixture_spec("ptb", ptb_members(fixtures)))


def snapshot(root: Path, skip_downloads: bool = False) -> dict[str, bytes | None] | None:
    """Every path under ``root`` (hidden ones included) with its bytes (None for a folder); None if no root."""
    if not root.exists():
        return None
    return {str(p.relative_to(root)): (p.read_bytes() if p.is_file() else None) for p in sorted(root.rglob("*"))
            if not (skip_downloads and p.relative_to(root).parts[0] == dl.DOWNLOADS)}


def refused_url() -> str:
    with socket.socket() as s:  # a port nothing listens on once this socket is closed
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/simple-examples.tgz"


def one_error_line(err: str, url: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("memread: error: ") and url in lines[0], lines[0]
    assert "Traceback" not in err
    return lines[0]


# ----------------------------------------------------------------------------- every dataset, read back


def read_back(name: str, root: Path, fixtures: Path) -> None:
    """Read the downloaded dataset with memread's own reader (or the pipeline's loader) for it."""
    if name == "ptb":
        from memread.data.ptb import ptb_path, read_ptb

        for s in SPLITS:
            assert read_ptb(ptb_path(root, s)) == read_ptb(fixtures / "ptb" / f"ptb.{s}.txt")
    elif name == "sst":
        from memread.data.sst import read_sst, sst_path

        for s in SPLITS:
            assert read_sst(sst_path(root, s)) == read_sst(fixtures / "sst" / f"{dict(valid='dev').get(s, s)}.txt")
    elif name == "snli":
        from memread.data.snli import is_train_sample, read_snli, snli_path

        assert not is_train_sample(snli_path(root, "train"))  # the full train file, not the 1% sample
        for s in SPLITS:
            assert read_snli(snli_path(root, s)) == read_snli(fixtures / "snli" / f"snli_1.0_{dict(valid='dev').get(s, s)}.jsonl")
    elif name == "wikiqa":
        from memread.data.wikiqa import read_ref, read_wikiqa, wikiqa_path

        for s in SPLITS:
            assert read_wikiqa(wikiqa_path(root, s)) and read_ref(wikiqa_path(root, s, ".ref"))
        assert read_ref(wikiqa_path(root, "test", "-filtered.ref")) == read_ref(fixtures / "wikiqa" / "WikiQA-test-filtered.ref")
        assert (root / "wikiqa" / "LICENSE.pdf").is_file() and not (root / "wikiqa" / "eval.py").exists()
    elif name in ("babi-en-10k", "babi-en-v1.1"):
        from memread.data.pipelines.cloze import BabiClozeConfig, load_babi

        folder = catalog.DATASETS[name].folder
        for task in TASK_NAMES:
            for s in ("train", "test"):
                assert read_babi(babi_path(root, folder, task, s))
        assert len(read_babi(babi_path(root, folder, 1, "train"))) == 9  # the fixture, not the decoy of another folder
        assert load_babi(BabiClozeConfig(dir=folder, tasks=(1, 2)), root, "test")["test"]
    elif name == "glove":
        from memread.data.vocab import vectors_path
        from memread.modules.embeddings import read_vectors

        vectors, dim = read_vectors(vectors_path(root, "glove/glove.6B.50d.txt"), {"good", "movie"})
        assert dim == 50 and set(vectors) == {"good", "movie"}
        assert sorted(p.name for p in (root / "glove").iterdir()) == ["glove.6B.50d.txt"]  # not the 100d file
    elif name == "gutenberg":
        from memread.data.pipelines.cloze import BooksClozeConfig, load_books

        # the data of configs/cloze/gutenberg-ne-iaa.toml: the glob, and the split by book
        cfg = BooksClozeConfig(books=("gutenberg/*.txt.gz",), valid_books=("chesterton-brown", "shakespeare-macbeth"),
                               test_books=("austen-sense", "shakespeare-hamlet"), word_class="NE")
        splits = load_books(cfg, root, "train")
        assert all(splits[s] for s in SPLITS)
        assert {e.source for e in splits["test"]} == {"austen-sense", "shakespeare-hamlet"}
        assert not (root / "gutenberg" / "bible-kjv.txt.gz").exists()
        assert gzip.decompress((root / "gutenberg" / "blake-poems.txt.gz").read_bytes()) == \
            sorted((fixtures / "books").glob("*.txt"))[2].read_bytes()
    elif name in ("wikitext-2", "wikitext-103"):
        from memread.data.wikitext import read_wikitext, wikitext_path

        for s in SPLITS:
            assert read_wikitext(wikitext_path(root, name, s)) == read_wikitext(fixtures / "wikitext-2" / f"wiki.{s}.tokens")
    elif name == "cbt":
        from memread.data.cbt import read_cbt
        from memread.data.cloze_builder import read_books
        from memread.data.pipelines.cloze import ClozeFilesConfig, load_cbt

        cfg = ClozeFilesConfig(name="cbt", train_file="cbt/cbtest_NE_train.txt", valid_file="cbt/cbtest_NE_valid_2000ex.txt",
                               test_file="cbt/cbtest_NE_test_2500ex.txt")
        assert load_cbt(cfg, root, "test")["test"] == read_cbt(fixtures / "cbt" / "cbtest_NE_fixture.txt")
        assert read_cbt(root / "cbt" / "cbtest_P_valid_2000ex.txt", context_lines=20)
        assert [b.name for b in read_books(root / "cbt" / "cbt_train.txt")] == ["Andrew_Lang___Prince_Prigio_train.txt.out"]
    elif name == "cnn":
        from memread.data.pipelines.cloze import ClozeFilesConfig, load_cnn

        cfg = ClozeFilesConfig(name="cnn", train_file="cnn/questions/training", valid_file="cnn/questions/validation",
                               test_file="cnn/questions/test")
        assert [len(load_cnn(cfg, root, s)[s]) for s in SPLITS] == [2, 1, 2]
        assert sorted(p.name for p in (root / "cnn" / "questions" / "test").iterdir()) == ["0001.question", "0002.question"]
        assert not list(root.parent.rglob("escaped.question")) and not (root / "cnn" / "stories").exists()
    elif name == IWSLT:
        from memread.data.pipelines import DATASETS as PIPELINES

        expected = root.parent / "iwslt-expected"  # the fixture files as they are, plain, as a second data root
        if not expected.exists():
            (expected / IWSLT).mkdir(parents=True)
            for f, data in iwslt_files(fixtures).items():
                (expected / IWSLT / f).write_bytes(data)
        assert sorted(p.name for p in (root / IWSLT).iterdir()) == sorted(f + ".gz" for f in IWSLT_FILES)
        for s in SPLITS:
            for source in LANGS:
                for unk in (False, True):
                    got = read_iwslt(root, s, source, unk_mapped=unk, max_len=0)
                    assert got == read_iwslt(expected, s, source, unk_mapped=unk, max_len=0) and got[0]
        spec = PIPELINES["iwslt14"]  # the pipeline of configs/translation: the train file, and by default valid
        pipe = spec.build(spec.Config(unk_mapped=True, train_file="train", dev_fraction=0.0), root, None)
        assert pipe.pairs("train") == read_iwslt(expected, "train", unk_mapped=True)[0]
        assert pipe.pairs("test") == read_iwslt(expected, "test", unk_mapped=True)[0]
        assert len(pipe.batches("train", 4)) and "<unk>" in pipe.src_vocab.stoi
        default = spec.build(spec.Config(), root, None)
        assert default.pairs("test") == read_iwslt(expected, "test")[0] and default.batches("train", 4)
    elif name == "imdb-acl":
        from memread.data.documents import ACL_IMDB_FILE, read_acl_imdb

        corpus = read_acl_imdb(root / ACL_IMDB_FILE)
        assert sorted(d.id for d in corpus["train"]) == ["train/neg/1", "train/pos/0"]
        assert [d.rating for d in corpus["test"]] == [1, 10]
        assert gzip.decompress((root / ACL_IMDB_FILE).read_bytes()) == imdb_expected_tar()
    else:
        raise AssertionError(f"no read-back for {name}")


DOWNLOADABLE = [n for n, d in catalog.DATASETS.items() if not d.manual]


def test_every_dataset_memread_reads_has_an_entry():
    folders = {d.folder for d in catalog.DATASETS.values()}
    assert {"ptb", "sst", "snli", "wikiqa", "babi/en-10k", "babi/en-v1.1", "glove", "gutenberg", "wikitext-2",
            "wikitext-103", "iwslt14-de-en", "cbt", "cnn", "imdb-acl"} <= folders
    for d in catalog.DATASETS.values():
        assert d.license and d.note and (d.manual or (d.url.startswith("http") and d.size > 0))


@pytest.mark.parametrize("name", DOWNLOADABLE)
def test_download_lays_out_every_dataset_as_its_reader_expects(name, server, served, tmp_path, fixtures, monkeypatch, capsys):
    members = dataset_archives(fixtures)[name]
    spec = fixture_spec(name, members)
    monkeypatch.setitem(catalog.DATASETS, name, spec)
    if spec.kind == "files":  # each file on its own, as $MEMREAD_DOWNLOAD_BASE/<file name>
        served.files.update(members)
        fetched = [f"/mirror/{urllib.parse.quote(m.source)}" for m in spec.members]
    else:
        served.files[spec.archive] = pack(name, members)
        fetched = [f"/mirror/{urllib.parse.quote(spec.archive)}"]
    monkeypatch.setenv(dl.BASE_ENV, server + "/mirror")
    root = tmp_path / "data"  # not there yet: made by the download
    assert main(["data", "download", name, "--data-root", str(root)]) == 0
    assert f"{name}: ready in {root / spec.folder}" in capsys.readouterr().out
    assert [p for p, _ in served.requests] == fetched
    assert sorted(p.name for p in root.iterdir()) == [spec.folder.split("/")[0]]  # no .downloads, no temporary folder
    read_back(name, root, fixtures)
    assert dl.status(spec, root)["state"] == "complete"
    # a second run finds everything in place: no fetch
    assert main(["data", "download", name, "--data-root", str(root)]) == 0
    assert len(served.requests) == len(fetched)


@pytest.mark.parametrize("name", ["sst", "babi-en-v1.1", "glove", "cnn", "imdb-acl"])
def test_a_changed_member_is_refused_and_nothing_is_written(name, server, served, tmp_path, fixtures, monkeypatch, capsys):
    """Zip and tar archives; sha256 pins, structure checks and counts; file, folder and repacked members."""
    members = dataset_archives(fixtures)[name]
    monkeypatch.setitem(catalog.DATASETS, name, fixture_spec(name, members))
    changed = dict(members)
    key, phrase = {
        "sst": ("trees/dev.txt", "trees/dev.txt has sha256"),
        "babi-en-v1.1": ("tasksv11/en/qa3_three-supporting-facts_train.txt", "has sha256"),
        "glove": ("glove.6B.50d.txt", "glove.6B.50d.txt:2: 49 numbers after the word, expected 50"),
        "cnn": ("cnn/questions/validation/0002.question", "cnn/questions/validation has 2 files, expected 1"),
        "imdb-acl": ("aclImdb/test/pos/3_10.txt", "aclImdb has sha256"),
    }[name]
    if name == "glove":
        lines = changed[key].decode().splitlines()
        lines[1] = lines[1].rsplit(" ", 1)[0]
        changed[key] = ("\n".join(lines) + "\n").encode()
    elif name == "cnn":
        changed["cnn/questions/validation/0001.question"] = changed[key]
    else:
        changed[key] += b"\n"
    served.files[catalog.DATASETS[name].archive] = pack(name, changed)
    url = f"{server}/{catalog.DATASETS[name].archive}"
    root = tmp_path / "data"
    assert main(["data", "download", name, "--data-root", str(root), "--url", url]) == 2
    line = one_error_line(capsys.readouterr().err, url)
    assert phrase in line and "nothing was written" in line and "--no-verify" in line
    assert snapshot(root) is None
    assert main(["data", "download", name, "--data-root", str(root), "--url", url, "--no-verify"]) == 0


# ----------------------------------------------------------------------------- failures leave the root as it was


def failing_url(kind: str, server: str, archives: dict[str, bytes], tmp_path: Path) -> tuple[str, str]:
    """The URL of one kind of failing download, and a phrase its error must contain."""
    if kind == "http-404":
        return server + "/nope.tgz", "HTTP 404"
    if kind == "refused":
        return refused_url(), "refused"
    if kind == "not-a-tar":
        return server + "/not-a-tar.tgz", "not a zip or tar archive"
    if kind == "checksum":
        return server + "/altered.tgz", "simple-examples/data/ptb.valid.txt has sha256"
    if kind == "missing-member":
        return server + "/no-test.tgz", "no member 'simple-examples/data/ptb.test.txt'"
    if kind == "truncated":
        return server + "/truncated.tgz", "truncated or corrupt"
    if kind == "cut-short":
        return server + "/cut-short/simple-examples.tgz", "connection closed"
    if kind == "file-truncated":
        path = tmp_path / "elsewhere" / "truncated.tgz"
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(archives["truncated.tgz"])
        return path.as_uri(), "truncated or corrupt"
    if kind == "file-missing":
        return (tmp_path / "elsewhere" / "missing.tgz").as_uri(), "No such file"
    raise AssertionError(kind)


def prepare(root: Path, state: str) -> None:
    if state == "no-root":
        return
    root.mkdir(exist_ok=True)
    if state == "partial":  # a dataset folder with one file already there, and another dataset
        (root / "ptb").mkdir()
        (root / "ptb" / "ptb.train.txt").write_bytes(b"mine, not the archive's\n")
        (root / "wikiqa").mkdir()
        (root / "wikiqa" / "WikiQA-train.tsv").write_bytes(b"q\ta\n")


def test_files_already_there_are_kept(server, archives, tmp_path, fixtures, fixture_ptb, capsys):
    root = tmp_path / "data"
    prepare(root, "partial")
    assert main(["data", "download", "ptb", "--data-root", str(root), "--url", server + "/simple-examples.tgz"]) == 0
    after = snapshot(root)
    assert sorted(after) == ["ptb", "ptb/ptb.test.txt", "ptb/ptb.train.txt", "ptb/ptb.valid.txt",
                             "wikiqa", "wikiqa/WikiQA-train.tsv"]
    assert after["ptb/ptb.train.txt"] == b"mine, not the archive's\n"
    assert after["ptb/ptb.valid.txt"] == (fixtures / "ptb" / "ptb.valid.txt").read_bytes()


KINDS = ["http-404", "refused", "not-a-tar", "checksum", "missing-member", "truncated", "cut-short",
         "file-truncated", "file-missing"]


@pytest.mark.parametrize("state", ["no-root", "empty", "partial"])
@pytest.mark.parametrize("kind", KINDS)
def test_a_failed_download_leaves_the_data_root_as_it_was(kind, state, server, archives, tmp_path, fixture_ptb, capsys):
    url, phrase = failing_url(kind, server, archives, tmp_path)
    root = tmp_path / "data"
    prepare(root, state)
    before = snapshot(root)
    assert main(["data", "download", "ptb", "--data-root", str(root), "--url", url]) == 2
    line = one_error_line(capsys.readouterr().err, url)
    assert phrase in line
    if kind == "cut-short":  # what arrived is kept to be continued, and nothing else changed
        assert "run the command again to continue" in line
        assert snapshot(root, skip_downloads=True) == (before or {})
        part = root / dl.DOWNLOADS / "ptb-simple-examples.tgz.part"
        assert part.read_bytes() == archives["simple-examples.tgz"][: len(archives["simple-examples.tgz"]) // 2]
    else:
        assert snapshot(root) == before  # no empty ptb/, no .ptb.download-* folder, no .downloads, no data root made


def test_url_may_be_a_local_archive_or_folder(archives, tmp_path, fixtures, fixture_ptb, fixture_iwslt, capsys,
                                             monkeypatch):
    """Offline: an archive (a folder of files, for a files dataset) fetched elsewhere is given by its path, relative or
    absolute; a path with nothing there is one line."""
    (tmp_path / "fetched").mkdir()
    (tmp_path / "fetched" / "simple-examples.tgz").write_bytes(archives["simple-examples.tgz"])
    monkeypatch.chdir(tmp_path)
    root = tmp_path / "data"
    assert main(["data", "download", "ptb", "--data-root", str(root), "--url", "fetched/simple-examples.tgz"]) == 0
    read_back("ptb", root, fixtures)
    for f, data in fixture_iwslt.items():
        (tmp_path / "fetched" / f).write_bytes(data)
    assert iwslt_download(root, str(tmp_path / "fetched")) == 0
    read_back(IWSLT, root, fixtures)
    capsys.readouterr()
    assert main(["data", "download", "wikiqa", "--data-root", str(root), "--url", "fetched/WikiQACorpus.zip"]) == 2
    assert one_error_line(capsys.readouterr().err, "fetched/WikiQACorpus.zip") == (
        "memread: error: --url fetched/WikiQACorpus.zip: no such file or folder (a URL, or the path of an archive "
        "fetched elsewhere)")
    assert sorted(p.name for p in root.iterdir()) == [IWSLT, "ptb"]


def test_offline_the_error_says_how_to_install_by_hand(tmp_path, fixture_ptb, capsys, monkeypatch):
    url = refused_url()
    monkeypatch.setenv(dl.BASE_ENV, url.rsplit("/", 1)[0])
    root = tmp_path / "data"
    assert main(["data", "download", "ptb", "--data-root", str(root)]) == 2
    line = one_error_line(capsys.readouterr().err, url)
    assert line.endswith(f"; offline? fetch simple-examples.tgz from {catalog.DATASETS['ptb'].url} elsewhere and run "
                         f"memread data download ptb --url /path/to/simple-examples.tgz; or place ptb.train.txt, "
                         f"ptb.valid.txt, ptb.test.txt in {root}/ptb/ by hand (plain or .gz)"), line
    assert main(["data", "download", "babi-en-10k", "--data-root", str(root)]) == 2  # many files: the first few named
    line = one_error_line(capsys.readouterr().err, "could not fetch")
    assert "memread data download babi-en-10k --url /path/to/tasks_1-20_v1-2.tar.gz; or place " \
           "qa1_single-supporting-fact_train.txt, qa1_single-supporting-fact_test.txt, " in line
    assert f" and 36 more (memread data list --json names them) in {root}/babi/en-10k/ by hand" in line, line
    assert main(["data", "download", IWSLT, "--data-root", str(root)]) == 2
    line = one_error_line(capsys.readouterr().err, "could not fetch")
    assert f"fetch its files from {catalog.DATASETS[IWSLT].url} elsewhere into one folder and run memread data " \
           f"download {IWSLT} --url /path/to/that/folder; or place " in line
    assert snapshot(root) is None  # nothing was written


def test_truncated_zip_archive_is_refused(server, served, tmp_path, fixtures, monkeypatch, capsys):
    members = dataset_archives(fixtures)["wikiqa"]
    monkeypatch.setitem(catalog.DATASETS, "wikiqa", fixture_spec("wikiqa", members))
    whole = zipped(members)
    for cut, name in ((len(whole) // 2, "half.zip"), (len(whole) - 30, "no-end.zip")):
        served.files[name] = whole[:cut]
        url = f"{server}/{name}"
        assert main(["data", "download", "wikiqa", "--data-root", str(tmp_path / "data"), "--url", url]) == 2
        assert "truncated or corrupt" in one_error_line(capsys.readouterr().err, url)
        assert snapshot(tmp_path / "data") is None


@pytest.mark.parametrize("mode", ["w:bz2", "w:xz", "w"])
def test_tar_archives_compressed_otherwise_are_read_too(mode, server, served, tmp_path, fixtures, fixture_ptb):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode=mode) as tar:
        for name, data in ptb_members(fixtures).items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    served.files["simple-examples.tar"] = buf.getvalue()
    root = tmp_path / "data"
    assert main(["data", "download", "ptb", "--data-root", str(root), "--url", server + "/simple-examples.tar"]) == 0
    read_back("ptb", root, fixtures)


def test_checksum_mismatch_names_both_sums_and_no_verify_accepts(server, archives, tmp_path, capsys):
    # the real pins (of the full PTB) cannot match the fixture archive
    url = server + "/simple-examples.tgz"
    assert main(["data", "download", "ptb", "--data-root", str(tmp_path), "--url", url]) == 2
    line = one_error_line(capsys.readouterr().err, url)
    assert "simple-examples/data/ptb.train.txt has sha256" in line and catalog._PTB["ptb.train.txt"] in line
    assert "nothing was written" in line
    assert snapshot(tmp_path) == {}
    assert main(["data", "download", "ptb", "--data-root", str(tmp_path), "--url", url, "--no-verify"]) == 0
    assert (tmp_path / "ptb" / "ptb.test.txt").is_file()


def test_a_dataset_without_a_download_says_why(tmp_path, monkeypatch, capsys):
    # every dataset in the catalog has a download now (IWSLT14 no longer needs Moses); the mechanism stays
    assert not any(d.manual for d in catalog.DATASETS.values())
    monkeypatch.setitem(catalog.DATASETS, "ptb", replace(catalog.DATASETS["ptb"], manual="ask the LDC for it"))
    assert main(["data", "download", "ptb", "--data-root", str(tmp_path / "data")]) == 2
    line = capsys.readouterr().err.strip()
    assert line == "memread: error: ptb: no download: ask the LDC for it"
    assert not (tmp_path / "data").exists()
    assert main(["data", "list", "--data-root", str(tmp_path / "data")]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^ptb\s+ptb/\s+missing\s+none \(see below\)", out, re.M)
    assert "ptb: no download: ask the LDC" in out


# ----------------------------------------------------------------------------- IWSLT14: plain files, one by one


@pytest.fixture
def fixture_iwslt(fixtures, served, monkeypatch) -> dict[str, bytes]:
    """The 12 fixture files served (by name, under any path), and the catalog entry pinning the 8 valid and
    test files to their sha256 (train unpinned, as in the catalog)."""
    files = iwslt_files(fixtures)
    monkeypatch.setitem(catalog.DATASETS, IWSLT, fixture_spec(IWSLT, files))
    served.files.update(files)
    return files


def iwslt_download(root: Path, base: str, *extra: str) -> int:
    return main(["data", "download", IWSLT, "--data-root", str(root), "--url", base, *extra])


def test_the_iwslt14_entry_is_pytorch_nmts_files_at_the_manifests_commit(monkeypatch):
    monkeypatch.delenv(dl.BASE_ENV, raising=False)
    spec = catalog.DATASETS[IWSLT]
    assert spec.kind == "files" and not spec.manual and spec.check == "iwslt" and spec.size_estimated
    assert [m.source for m in spec.members] == list(IWSLT_FILES) and len(IWSLT_FILES) == 12
    urls = [dl.file_url(dl.files_base(spec), m) for m in spec.members]
    assert urls[0] == ("https://raw.githubusercontent.com/pcyin/pytorch_nmt/bf28dae8a4c71e1f3f3fcb51e989fab905886f44"
                       "/data/train.de-en.de")
    assert urls[-1].endswith("/data/test.de-en.en.wmixerprep")
    pins = {m.path: m.sha256 for m in spec.members}
    assert {f: sha for f, sha in pins.items() if sha} == catalog._IWSLT and len(catalog._IWSLT) == 8
    assert all(pins[f] is None for f in IWSLT_FILES if f.startswith("train."))
    assert all(m.gzip for m in spec.members)  # the benchmark layout: {split}.de-en.{lang}[.wmixerprep].gz
    assert "train files" in spec.note and "no pinned checksum" in spec.note
    assert "pcyin/pytorch_nmt" in spec.note and "not a re-run of MIXER" in spec.note
    assert "CC BY 4.0" in spec.license and "TED" in spec.license
    assert "estimate" in spec.note


def test_iwslt14_is_fetched_file_by_file_from_the_raw_urls(server, served, fixture_iwslt, tmp_path, fixtures, capsys):
    root, base = tmp_path / "data", server + RAW_BASE
    assert iwslt_download(root, base) == 0
    assert f"{IWSLT}: ready in {root / IWSLT}" in capsys.readouterr().out
    assert [p for p, _ in served.requests] == [f"{RAW_BASE}/{f}" for f in IWSLT_FILES]
    assert all("Range" not in h for _, h in served.requests)
    for f, data in fixture_iwslt.items():  # written gzipped, byte for byte the fetched file inside
        assert gzip.decompress((root / IWSLT / (f + ".gz")).read_bytes()) == data
    assert sorted(p.name for p in root.iterdir()) == [IWSLT]  # no .downloads, no temporary folder
    read_back(IWSLT, root, fixtures)


def test_iwslt14_files_already_there_are_kept_and_not_fetched(server, served, fixture_iwslt, tmp_path, fixtures):
    root, base = tmp_path / "data", server + RAW_BASE
    (root / IWSLT).mkdir(parents=True)  # the benchmark data's valid and test, gzipped; train missing
    for f in IWSLT_FILES[4:]:
        (root / IWSLT / (f + ".gz")).write_bytes(gzip.compress(fixture_iwslt[f], mtime=0))
    before = snapshot(root)
    assert dl.status(catalog.DATASETS[IWSLT], root)["state"] == "partial"
    assert iwslt_download(root, base) == 0
    assert [p for p, _ in served.requests] == [f"{RAW_BASE}/{f}" for f in IWSLT_FILES[:4]]
    after = snapshot(root)
    assert all(after[k] == v for k, v in before.items())
    read_back(IWSLT, root, fixtures)


def _drop_last_line(data: bytes) -> bytes:
    return b"".join(data.splitlines(keepends=True)[:-1])


def _edit_line(data: bytes, n: int, edit) -> bytes:
    lines = data.decode().split("\n")
    lines[n - 1] = edit(lines[n - 1].split())
    return "\n".join(lines).encode()


IWSLT_BAD = {  # what is changed in the served file, and what the refusal says
    "checksum": ("valid.de-en.de", lambda d: d.replace(b"vielen dank", b"danke", 1), "valid.de-en.de has sha256"),
    "truncated-pinned": ("test.de-en.en", lambda d: d[: len(d) // 2], "test.de-en.en has sha256"),
    "line-count": ("train.de-en.en", _drop_last_line,
                   "train is not line-aligned: train.de-en.de has 45 lines, train.de-en.de.wmixerprep has 45 lines, "
                   "train.de-en.en has 44 lines"),
    "line-count-mapped": ("train.de-en.de.wmixerprep", lambda d: d + b"ein satz mehr .\n",
                          "train.de-en.de.wmixerprep has 46 lines"),
    "word-count": ("train.de-en.en.wmixerprep", lambda d: _edit_line(d, 2, lambda w: " ".join(w[1:])),
                   "train.de-en.en.wmixerprep:2 has"),
    "not-unk": ("train.de-en.de.wmixerprep", lambda d: _edit_line(d, 3, lambda w: " ".join(["anders"] + w[1:])),
                "train.de-en.de.wmixerprep:3: word 1 is 'anders'"),
    "truncated-train": ("train.de-en.de", lambda d: d[:-1], "train.de-en.de:45: the file does not end with a newline"),
    "not-utf8": ("train.de-en.en", lambda d: d.replace(b"you", b"y\xffu", 1), "not UTF-8"),
}


@pytest.mark.parametrize("kind", IWSLT_BAD)
@pytest.mark.parametrize("state", ["no-root", "partial"])
def test_a_bad_iwslt14_file_is_refused_and_nothing_is_written(kind, state, server, served, fixture_iwslt, tmp_path,
                                                              capsys):
    name, change, phrase = IWSLT_BAD[kind]
    served.files[name] = change(fixture_iwslt[name])
    assert served.files[name] != fixture_iwslt[name]
    root, base = tmp_path / "data", server + RAW_BASE
    prepare(root, state)
    before = snapshot(root)
    assert iwslt_download(root, base) == 2
    line = one_error_line(capsys.readouterr().err, base)
    assert phrase in line and "nothing was written" in line and "--no-verify" in line
    assert snapshot(root) == before  # no iwslt14-de-en/, no .downloads (the bad files are fetched again next time)
    if kind == "line-count-mapped":  # --no-verify takes the files as they are
        assert iwslt_download(root, base, "--no-verify") == 0
        assert gzip.decompress((root / IWSLT / "train.de-en.de.wmixerprep.gz").read_bytes()) == served.files[name]


def test_a_missing_iwslt14_file_keeps_the_others_for_the_next_run(server, served, fixture_iwslt, tmp_path, fixtures,
                                                                   capsys):
    root, base = tmp_path / "data", server + RAW_BASE
    del served.files["valid.de-en.en"]
    assert iwslt_download(root, base) == 2
    assert "HTTP 404" in one_error_line(capsys.readouterr().err, base + "/valid.de-en.en")
    assert sorted(snapshot(root)) == [dl.DOWNLOADS] + sorted(f"{dl.DOWNLOADS}/{IWSLT}-{f}.part{x}"
                                                             for f in IWSLT_FILES[:6] for x in ("", ".json"))
    served.files["valid.de-en.en"] = fixture_iwslt["valid.de-en.en"]
    n = len(served.requests)
    assert iwslt_download(root, base) == 0
    assert [p for p, _ in served.requests[n:]] == [f"{RAW_BASE}/{f}" for f in IWSLT_FILES[6:]]
    assert sorted(p.name for p in root.iterdir()) == [IWSLT]
    read_back(IWSLT, root, fixtures)


def test_a_cut_iwslt14_file_is_continued_with_a_range_request(server, served, fixture_iwslt, tmp_path, fixtures,
                                                              capsys):
    root, base, name = tmp_path / "data", server + RAW_BASE, "train.de-en.en"
    body, k = fixture_iwslt[name], IWSLT_FILES.index(name)
    assert len(body) > 1000
    served.cut[name] = 1000  # the first attempt at this file ends after 1,000 bytes
    assert iwslt_download(root, base) == 2
    line = one_error_line(capsys.readouterr().err, f"{base}/{name}")
    assert f"closed after 1,000 of {len(body):,} bytes" in line and ".downloads" in line
    assert not (root / IWSLT).exists()
    part = root / dl.DOWNLOADS / f"{IWSLT}-{name}.part"
    assert part.read_bytes() == body[:1000]
    for f in IWSLT_FILES[:k]:  # the files before it arrived whole, and are kept
        assert (root / dl.DOWNLOADS / f"{IWSLT}-{f}.part").read_bytes() == fixture_iwslt[f]
    n = len(served.requests)
    assert iwslt_download(root, base) == 0
    again = served.requests[n:]
    assert [p for p, _ in again] == [f"{RAW_BASE}/{f}" for f in IWSLT_FILES[k:]]  # nothing fetched twice
    etag = '"' + hashlib.sha1(body).hexdigest() + '"'
    assert again[0][1]["Range"] == "bytes=1000-" and again[0][1]["If-Range"] == etag
    assert all("Range" not in h for _, h in again[1:])
    assert sorted(p.name for p in root.iterdir()) == [IWSLT]  # .downloads gone
    assert gzip.decompress((root / IWSLT / (name + ".gz")).read_bytes()) == body
    read_back(IWSLT, root, fixtures)


def test_an_interrupt_while_checking_iwslt14_keeps_the_files_for_the_next_run(server, served, fixture_iwslt, tmp_path,
                                                                              fixtures, monkeypatch):
    root, base = tmp_path / "data", server + RAW_BASE

    def interrupted(*args, **kw):
        raise KeyboardInterrupt

    monkeypatch.setitem(formats.SET_CHECKS, "iwslt", interrupted)
    with pytest.raises(KeyboardInterrupt):
        dl.download(IWSLT, root, url=base)
    assert snapshot(root, skip_downloads=True) == {}
    assert all((root / dl.DOWNLOADS / f"{IWSLT}-{f}.part").read_bytes() == fixture_iwslt[f] for f in IWSLT_FILES)
    monkeypatch.setitem(formats.SET_CHECKS, "iwslt", check_iwslt)
    served.files.clear()  # the next run needs no server: every file is complete
    assert dl.download(IWSLT, root, url=base) == root / IWSLT
    assert len(served.requests) == len(IWSLT_FILES) and not (root / dl.DOWNLOADS).exists()
    read_back(IWSLT, root, fixtures)


# ----------------------------------------------------------------------------- resuming


def test_a_cut_download_is_continued_with_a_range_request(server, served, archives, tmp_path, fixtures, fixture_ptb, capsys):
    root, name, url = tmp_path / "data", "simple-examples.tgz", server + "/simple-examples.tgz"
    body = archives[name]
    served.cut[name] = 1000  # the first attempt ends after 1,000 bytes
    assert main(["data", "download", "ptb", "--data-root", str(root), "--url", url]) == 2
    line = one_error_line(capsys.readouterr().err, url)
    assert f"closed after 1,000 of {len(body):,} bytes" in line and ".downloads" in line
    assert not (root / "ptb").exists()
    assert (root / dl.DOWNLOADS / "ptb-simple-examples.tgz.part").read_bytes() == body[:1000]
    assert main(["data", "download", "ptb", "--data-root", str(root), "--url", url]) == 0
    (_, first), (_, second) = served.requests
    assert "Range" not in first
    etag = '"' + hashlib.sha1(body).hexdigest() + '"'
    assert second["Range"] == "bytes=1000-" and second["If-Range"] == etag
    assert sorted(snapshot(root)) == ["ptb", "ptb/ptb.test.txt", "ptb/ptb.train.txt", "ptb/ptb.valid.txt"]
    read_back("ptb", root, fixtures)


def test_a_server_that_ignores_range_gives_a_fresh_download(server, served, archives, tmp_path, fixtures, fixture_ptb, capsys):
    root, name, url = tmp_path / "data", "simple-examples.tgz", server + "/simple-examples.tgz"
    served.cut[name] = 1000
    assert main(["data", "download", "ptb", "--data-root", str(root), "--url", url]) == 2
    served.ignore_range = True
    assert main(["data", "download", "ptb", "--data-root", str(root), "--url", url]) == 0
    assert served.requests[1][1]["Range"] == "bytes=1000-"  # asked, answered with the whole file (200)
    read_back("ptb", root, fixtures)
    assert not (root / dl.DOWNLOADS).exists()


def test_a_partial_download_of_another_url_is_not_continued(server, served, archives, tmp_path, fixture_ptb, capsys):
    root = tmp_path / "data"
    served.files["other.tgz"] = archives["simple-examples.tgz"]
    served.cut["other.tgz"] = 1000
    assert main(["data", "download", "ptb", "--data-root", str(root), "--url", server + "/other.tgz"]) == 2
    assert main(["data", "download", "ptb", "--data-root", str(root), "--url", server + "/simple-examples.tgz"]) == 0
    assert "Range" not in served.requests[1][1]


@pytest.mark.parametrize("state", ["no-root", "partial"])
def test_an_interrupt_after_the_fetch_keeps_the_archive_for_the_next_run(state, server, served, archives, tmp_path,
                                                                          fixtures, fixture_ptb, monkeypatch):
    root = tmp_path / "data"
    prepare(root, state)
    before = snapshot(root)
    extract = dl._extract

    def interrupted(*args, **kw):
        raise KeyboardInterrupt

    monkeypatch.setattr(dl, "_extract", interrupted)
    with pytest.raises(KeyboardInterrupt):
        dl.download("ptb", root, url=server + "/simple-examples.tgz")
    assert snapshot(root, skip_downloads=True) == (before or {})
    assert (root / dl.DOWNLOADS / "ptb-simple-examples.tgz.part").read_bytes() == archives["simple-examples.tgz"]
    monkeypatch.setattr(dl, "_extract", extract)
    served.files.clear()  # the next run needs no server: the archive is complete
    dl.download("ptb", root, url=server + "/simple-examples.tgz")
    assert len(served.requests) == 1 and not (root / dl.DOWNLOADS).exists()
    assert (root / "ptb" / "ptb.valid.txt").read_bytes() == (fixtures / "ptb" / "ptb.valid.txt").read_bytes()


KILLED_WHILE_EXTRACTING = """
import os, signal, sys
from memread.data import download as dl

def killed(*args, **kw):
    os.kill(os.getpid(), signal.SIGKILL)  # no finally runs: the temp folder stays

dl._extract = killed
dl.download("ptb", sys.argv[1], url=sys.argv[2])
"""


@pytest.mark.slow
def test_the_temp_folders_of_killed_downloads_are_removed_by_the_next_one(server, archives, tmp_path, fixtures,
                                                                          fixture_ptb, capsys):
    """A download killed mid-way left ``ROOT/.ptb.download-XXXX`` that no later download removed. The next download
    removes it and says so, as it does an unlocked one an earlier memread left (once a minute old); the folder of a
    download running beside it (its lock held) and one made a moment ago stay."""
    import os
    import subprocess
    import sys
    import time

    import filelock

    from conftest import subprocess_env

    root = tmp_path / "data"
    url = server + "/simple-examples.tgz"
    child = subprocess.run([sys.executable, "-c", KILLED_WHILE_EXTRACTING, str(root), url], env=subprocess_env(),
                           capture_output=True, text=True, timeout=120)
    assert child.returncode == -9, child.stderr
    killed = [p for p in root.iterdir() if p.name.startswith(".ptb.download-")]
    assert len(killed) == 1 and (killed[0] / dl.HELD).is_file()
    old = root / ".glove.download-olderversion"  # an earlier memread's, no lock file: empty, 2 minutes old
    old.mkdir()
    os.utime(old, (time.time() - 120, time.time() - 120))
    young = root / ".snli.download-justmade"  # made this moment, its lock not taken yet
    young.mkdir()
    running = root / ".wikiqa.download-running"  # another download at work
    running.mkdir()
    (running / "staged.txt").write_bytes(b"half")
    held = filelock.FileLock(str(running / dl.HELD), blocking=False)
    held.acquire()
    try:
        capsys.readouterr()
        assert main(["data", "download", "ptb", "--data-root", str(root), "--url", url]) == 0
        err = capsys.readouterr().err
        assert f"{root}: removed {killed[0].name} (" in err and f"{root}: removed {old.name} (empty)" in err, err
        assert err.count("the temporary folder of a download that was killed") == 2, err
        left = sorted(p.name for p in root.iterdir())
        assert left == sorted([running.name, young.name, "ptb"]), left
        assert (running / "staged.txt").read_bytes() == b"half"
        assert (root / "ptb" / "ptb.valid.txt").read_bytes() == (fixtures / "ptb" / "ptb.valid.txt").read_bytes()
    finally:
        held.release()
    assert dl.clear_leftovers(root) == [f"{running.name} (4 B)"] and young.is_dir()  # its writer gone now


@pytest.mark.parametrize("state", ["no-root", "empty", "partial"])
def test_an_interrupt_while_moving_files_into_place_takes_them_out_again(state, server, archives, tmp_path,
                                                                          fixture_ptb, monkeypatch):
    root = tmp_path / "data"
    prepare(root, state)
    before = snapshot(root)
    replace_file, calls = dl.os.replace, []

    def replace_once_then_interrupt(src, dst):
        calls.append(dst)
        if len(calls) > 1:
            raise KeyboardInterrupt
        replace_file(src, dst)

    monkeypatch.setattr(dl.os, "replace", replace_once_then_interrupt)
    with pytest.raises(KeyboardInterrupt):
        dl.download("ptb", root, url=server + "/simple-examples.tgz")
    monkeypatch.undo()
    assert len(calls) == 2  # one file was in place when the interrupt came
    assert snapshot(root, skip_downloads=True) == (before or {})


# ----------------------------------------------------------------------------- memread data list


def test_data_list_says_what_is_there_what_is_missing_its_size_and_licence(tmp_path, fixtures, capsys):
    root = tmp_path / "data"
    (root / "ptb").mkdir(parents=True)  # complete (plain and gzipped files both count)
    for s in ("train", "valid"):
        (root / "ptb" / f"ptb.{s}.txt").write_bytes((fixtures / "ptb" / f"ptb.{s}.txt").read_bytes())
    (root / "ptb" / "ptb.test.txt.gz").write_bytes(gzip.compress((fixtures / "ptb" / "ptb.test.txt").read_bytes()))
    (root / "snli").mkdir()  # partial: dev and test, and the 1% train sample, which is not the train file
    for f in ("snli_1.0_dev.jsonl", "snli_1.0_test.jsonl", "snli_1.0_train_0.01.jsonl.gz"):
        (root / "snli" / f).write_bytes(b"{}\n")
    (root / "cnn" / "questions" / "test").mkdir(parents=True)  # partial folders of files
    (root / "cnn" / "questions" / "test" / "0001.question").write_bytes(b"x")
    assert main(["data", "list", "--data-root", str(root)]) == 0
    out = capsys.readouterr().out
    rows = {line.split()[0]: line for line in out.splitlines()[2:] if line and line.split()[0] in catalog.DATASETS}
    assert set(rows) == set(catalog.DATASETS)
    assert re.search(r"^ptb\s+ptb/\s+complete\s+~34\.9 MB\s+3/3 pinned\s+LDC User Agreement", rows["ptb"])
    assert re.search(r"^snli\s+snli/\s+partial, missing snli_1\.0_train\.jsonl\s+~94\.6 MB\s+2/3 pinned\s+CC BY-SA 4\.0",
                     rows["snli"])
    assert re.search(r"^glove\s+glove/\s+missing\s+~862\.2 MB\s+0/1 pinned\s+PDDL", rows["glove"])
    assert "partial, missing questions/training/, questions/validation/, questions/test/ (1 of 3,198 files)" in rows["cnn"]
    assert re.search(r"^iwslt14-de-en\s+iwslt14-de-en/\s+missing\s+~64\.0 MB \(estimate\)\s+8/12 pinned\s+CC BY 4\.0",
                     rows["iwslt14-de-en"])
    assert "no download" not in out and "Moses" not in out

    assert main(["data", "list", "--data-root", str(root), "--json"]) == 0
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    by_name = {r["name"]: r for r in records}
    assert list(by_name) == list(catalog.DATASETS)
    assert by_name["ptb"]["status"] == "complete" and by_name["ptb"]["missing"] == []
    assert by_name["snli"]["status"] == "partial" and by_name["snli"]["missing"] == ["snli_1.0_train.jsonl"]
    assert by_name["snli"]["present"] == ["snli_1.0_dev.jsonl", "snli_1.0_test.jsonl"]
    assert by_name["glove"]["status"] == "missing" and by_name["glove"]["download_bytes"] == 862_200_000
    assert "171,350,079 bytes" in by_name["glove"]["extracted"]
    iwslt = by_name["iwslt14-de-en"]
    assert iwslt["downloadable"] is True and "manual" not in iwslt and iwslt["kind"] == "files"
    assert iwslt["download_bytes"] == 64_000_000 and iwslt["download_size_estimated"] is True
    assert iwslt["checksums"] == {"pinned": 8, "files": 12} and len(iwslt["files"]) == 12
    assert iwslt["files"][0].startswith("https://raw.githubusercontent.com/pcyin/pytorch_nmt/"
                                        "bf28dae8a4c71e1f3f3fcb51e989fab905886f44/data/")
    assert by_name["ptb"]["download_size_estimated"] is False and by_name["ptb"]["kind"] == "archive"
    assert by_name["snli"]["checksums"] == {"pinned": 2, "files": 3} and by_name["snli"]["license"] == "CC BY-SA 4.0"
    assert all(r["data_root"] == str(root) for r in records)


# ----------------------------------------------------------------------------- the pins are the benchmark data's


def _benchmark_bytes(path: Path) -> bytes | None:
    for candidate in (path, path.with_name(path.name + ".gz")):
        if candidate.is_file():
            data = candidate.read_bytes()
            return gzip.decompress(data) if candidate.suffix == ".gz" else data
    return None


@pytest.mark.realdata
def test_every_pin_is_the_sha256_of_the_benchmark_file(real_data):
    """Each pinned sha256 is that of the file memread's results were computed on (../shared/data)."""
    root = real_data("MANIFEST.md")
    pinned = [(spec, m) for spec in catalog.DATASETS.values() for m in spec.members if m.sha256 and m.kind == "file"]
    assert len(pinned) == 124
    for spec, m in pinned:  # every pinned file is in the benchmark data
        data = _benchmark_bytes(root / spec.folder / m.path)
        assert data is not None, f"{spec.folder}/{m.path} is not in {root}"
        assert hashlib.sha256(data).hexdigest() == m.sha256, f"{spec.folder}/{m.path}"


@pytest.mark.realdata
@pytest.mark.slow
def test_the_aclimdb_repack_reproduces_the_benchmark_tar(real_data, tmp_path):
    """Repacking the benchmark tar's own members gives the pinned tar: the download's repack of the
    official aclImdb_v1.tar.gz (whose members these are, byte for byte) gives the benchmark's file."""
    root = real_data("imdb-acl/aclImdb_v1_train_test.tar.gz")
    member = next(m for m in catalog.DATASETS["imdb-acl"].members if m.kind == "tar")
    files = tmp_path / "files"
    with tarfile.open(root / "imdb-acl" / "aclImdb_v1_train_test.tar.gz", "r:gz") as tar:
        for info in tar:
            if info.isfile():
                rel = info.name.split("/", 1)[1]
                assert re.fullmatch(member.pattern, rel), info.name
                (files / rel).parent.mkdir(parents=True, exist_ok=True)
                (files / rel).write_bytes(tar.extractfile(info).read())
    assert extract._repack(files, "aclImdb", tmp_path / "out.tar.gz") == member.sha256


def test_the_fetch_refuses_nothing_it_should_not_touch(tmp_path):
    """Archive member names are cleaned and matched, never used as paths."""
    assert extract._below("x/cnn/questions/test/a.question", "cnn/questions/test") == "a.question"
    assert not extract._safe("../../escaped.question") and not extract._safe("a//b") and extract._safe("train/pos/0_9.txt")
    assert extract._clean("./simple-examples/data/ptb.train.txt") == "simple-examples/data/ptb.train.txt"
    assert extract._ignored("__MACOSX/snli_1.0/._snli_1.0_dev.jsonl")
    with pytest.raises(MemreadError, match="no download for 'nope'"):
        dl.download("nope", tmp_path)
