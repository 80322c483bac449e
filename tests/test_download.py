"""`memread data download ptb` against a local HTTP server on 127.0.0.1 serving fixture archives.

A download that fails in any way (HTTP error, refused connection, not a tar, checksum mismatch, missing
member, truncated archive, an interrupt) leaves the data root exactly as it was, and reports one line
naming the URL."""

import hashlib
import http.server
import io
import socket
import tarfile
import threading
from pathlib import Path

import pytest

from memread.cli import main
from memread.data import download as dl
from memread.data.ptb import ptb_path, read_ptb

SPLITS = ("train", "valid", "test")


def tgz(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def ptb_members(fixtures) -> dict[str, bytes]:
    """Laid out like Mikolov's ``simple-examples.tgz``."""
    members = {f"./simple-examples/data/ptb.{s}.txt": (fixtures / "ptb" / f"ptb.{s}.txt").read_bytes() for s in SPLITS}
    members["./simple-examples/README"] = b"hello"
    return members


@pytest.fixture
def archives(fixtures) -> dict[str, bytes]:
    good = tgz(ptb_members(fixtures))
    altered = ptb_members(fixtures)
    altered["./simple-examples/data/ptb.valid.txt"] += b" an extra line\n"
    no_test = ptb_members(fixtures)
    del no_test["./simple-examples/data/ptb.test.txt"]
    return {
        "simple-examples.tgz": good,
        "truncated.tgz": good[: len(good) // 2],
        "altered.tgz": tgz(altered),
        "no-test.tgz": tgz(no_test),
        "not-a-tar.tgz": b"<html><body>moved to a new home</body></html>\n" * 20,
    }


@pytest.fixture
def server(archives):
    """``/NAME`` serves ``archives[NAME]``; ``/cut-short/NAME`` promises all of it and sends half."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            name = self.path.rsplit("/", 1)[-1]
            if name not in archives:
                self.send_error(404)
                return
            body = archives[name]
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body[: len(body) // 2] if self.path.startswith("/cut-short/") else body)

        def log_message(self, *args):
            pass

    httpd = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture
def fixture_spec(fixtures, monkeypatch):
    """The ptb download with the fixture files' MD5s (the real ones cannot match a fixture archive)."""
    md5 = {f"ptb.{s}.txt": hashlib.md5((fixtures / "ptb" / f"ptb.{s}.txt").read_bytes()).hexdigest() for s in SPLITS}
    monkeypatch.setitem(dl.DATASETS, "ptb", dl.ArchiveSpec(url=dl.DATASETS["ptb"].url, files=dl.DATASETS["ptb"].files, md5=md5))


def snapshot(root: Path) -> dict[str, bytes | None] | None:
    """Every path under ``root`` (hidden ones included) with its bytes (None for a folder); None if no root."""
    if not root.exists():
        return None
    return {str(p.relative_to(root)): (p.read_bytes() if p.is_file() else None) for p in sorted(root.rglob("*"))}


def refused_url() -> str:
    with socket.socket() as s:  # a port nothing listens on once this socket is closed
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/simple-examples.tgz"


def failing_url(kind: str, server: str, archives: dict[str, bytes], tmp_path: Path) -> tuple[str, str]:
    """The URL of one kind of failing download, and a phrase its error must contain."""
    if kind == "http-404":
        return server + "/nope.tgz", "HTTP 404"
    if kind == "refused":
        return refused_url(), "refused"
    if kind == "not-a-tar":
        return server + "/not-a-tar.tgz", "not a tar archive"
    if kind == "checksum":
        return server + "/altered.tgz", "data/ptb.valid.txt has MD5"
    if kind == "missing-member":
        return server + "/no-test.tgz", "no member ending in 'data/ptb.test.txt'"
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


def one_error_line(err: str, url: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("memread: error: ") and url in lines[0], lines[0]
    assert "Traceback" not in err
    return lines[0]


def test_download_lays_out_ptb_as_the_reader_expects(server, tmp_path, fixtures, fixture_spec, monkeypatch, capsys):
    spec = dl.DATASETS["ptb"]
    monkeypatch.setitem(dl.DATASETS, "ptb", dl.ArchiveSpec(url=server + "/simple-examples.tgz", files=spec.files, md5=spec.md5))
    root = tmp_path / "data"  # not there yet: made by the download
    assert main(["data", "download", "ptb", "--data-root", str(root)]) == 0
    assert "ready" in capsys.readouterr().out
    assert sorted(snapshot(root)) == ["ptb", "ptb/ptb.test.txt", "ptb/ptb.train.txt", "ptb/ptb.valid.txt"]
    assert read_ptb(ptb_path(root, "train")) == read_ptb(fixtures / "ptb" / "ptb.train.txt")


def test_files_already_there_are_kept(server, tmp_path, fixtures, fixture_spec, capsys):
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
def test_a_failed_download_leaves_the_data_root_as_it_was(kind, state, server, archives, tmp_path, fixture_spec, capsys):
    url, phrase = failing_url(kind, server, archives, tmp_path)
    root = tmp_path / "data"
    prepare(root, state)
    before = snapshot(root)
    assert main(["data", "download", "ptb", "--data-root", str(root), "--url", url]) == 2
    line = one_error_line(capsys.readouterr().err, url)
    assert phrase in line
    assert snapshot(root) == before  # no empty ptb/, no .ptb.download-* folder, no data root made


def test_checksum_mismatch_names_both_sums_and_no_verify_accepts(server, tmp_path, capsys):
    # the real MD5s (of the full PTB) cannot match the fixture archive
    url = server + "/simple-examples.tgz"
    assert main(["data", "download", "ptb", "--data-root", str(tmp_path), "--url", url]) == 2
    line = one_error_line(capsys.readouterr().err, url)
    assert "data/ptb.train.txt has MD5" in line and "f26c4b92c5fdc7b3f8c7cdcb991d8420" in line and "nothing was written" in line
    assert snapshot(tmp_path) == {}
    assert main(["data", "download", "ptb", "--data-root", str(tmp_path), "--url", url, "--no-verify"]) == 0
    assert (tmp_path / "ptb" / "ptb.test.txt").is_file()


@pytest.mark.parametrize("state", ["no-root", "partial"])
def test_an_interrupt_after_the_fetch_leaves_the_data_root_as_it_was(state, server, tmp_path, fixture_spec, monkeypatch):
    root = tmp_path / "data"
    prepare(root, state)
    before = snapshot(root)
    fetch = dl._fetch

    def fetch_then_interrupt(url, dest, **kw):
        fetch(url, dest, **kw)
        raise KeyboardInterrupt

    monkeypatch.setattr(dl, "_fetch", fetch_then_interrupt)
    with pytest.raises(KeyboardInterrupt):
        dl.download("ptb", root, url=server + "/simple-examples.tgz")
    assert snapshot(root) == before


@pytest.mark.parametrize("state", ["no-root", "empty", "partial"])
def test_an_interrupt_while_moving_files_into_place_takes_them_out_again(state, server, tmp_path, fixture_spec, monkeypatch):
    root = tmp_path / "data"
    prepare(root, state)
    before = snapshot(root)
    replace, calls = dl.os.replace, []

    def replace_once_then_interrupt(src, dst):
        calls.append(dst)
        if len(calls) > 1:
            raise KeyboardInterrupt
        replace(src, dst)

    monkeypatch.setattr(dl.os, "replace", replace_once_then_interrupt)
    with pytest.raises(KeyboardInterrupt):
        dl.download("ptb", root, url=server + "/simple-examples.tgz")
    monkeypatch.undo()
    assert len(calls) == 2  # one file was in place when the interrupt came
    assert snapshot(root) == before
