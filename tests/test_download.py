"""`memread data download ptb` against a local HTTP server on 127.0.0.1 serving a fixture archive."""

import hashlib
import http.server
import io
import tarfile
import threading

import pytest

from memread.cli import main
from memread.data import download as dl
from memread.data.ptb import ptb_path, read_ptb


@pytest.fixture
def server(tmp_path, fixtures):
    """Serve ``simple-examples.tgz`` (built from the PTB fixtures, laid out like Mikolov's archive)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for split in ("train", "valid", "test"):
            data = (fixtures / "ptb" / f"ptb.{split}.txt").read_bytes()
            info = tarfile.TarInfo(f"./simple-examples/data/ptb.{split}.txt")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        info = tarfile.TarInfo("./simple-examples/README")
        info.size = 5
        tar.addfile(info, io.BytesIO(b"hello"))
    archive = buf.getvalue()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            if self.path == "/simple-examples.tgz":
                self.send_response(200)
                self.send_header("Content-Length", str(len(archive)))
                self.end_headers()
                self.wfile.write(archive)
            else:
                self.send_error(404)

        def log_message(self, *args):
            pass

    httpd = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def fixture_md5(fixtures):
    return {f"ptb.{s}.txt": hashlib.md5((fixtures / "ptb" / f"ptb.{s}.txt").read_bytes()).hexdigest()
            for s in ("train", "valid", "test")}


def test_download_lays_out_ptb_as_the_reader_expects(server, tmp_path, fixtures, monkeypatch, capsys):
    spec = dl.DATASETS["ptb"]
    monkeypatch.setitem(dl.DATASETS, "ptb", dl.ArchiveSpec(url=server + "/simple-examples.tgz", files=spec.files, md5=fixture_md5(fixtures)))
    assert main(["data", "download", "ptb", "--data-root", str(tmp_path)]) == 0
    assert "ready" in capsys.readouterr().out
    assert sorted(p.name for p in (tmp_path / "ptb").iterdir()) == ["ptb.test.txt", "ptb.train.txt", "ptb.valid.txt"]
    assert read_ptb(ptb_path(tmp_path, "train")) == read_ptb(fixtures / "ptb" / "ptb.train.txt")


def test_checksum_mismatch_writes_nothing(server, tmp_path, capsys):
    # the real MD5s (of the full PTB) cannot match the fixture archive
    rc = main(["data", "download", "ptb", "--data-root", str(tmp_path), "--url", server + "/simple-examples.tgz"])
    assert rc == 2
    err = capsys.readouterr().err
    assert "data/ptb.train.txt has MD5" in err and "f26c4b92c5fdc7b3f8c7cdcb991d8420" in err and "nothing was written" in err
    assert list((tmp_path / "ptb").iterdir()) == []
    assert main(["data", "download", "ptb", "--data-root", str(tmp_path), "--url", server + "/simple-examples.tgz", "--no-verify"]) == 0
    assert (tmp_path / "ptb" / "ptb.test.txt").is_file()


def test_unreachable_or_missing_archive_is_one_clear_error(server, tmp_path, capsys):
    assert main(["data", "download", "ptb", "--data-root", str(tmp_path), "--url", server + "/nope.tgz"]) == 2
    assert "HTTP 404" in capsys.readouterr().err
