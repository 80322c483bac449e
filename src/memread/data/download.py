"""``memread data download NAME``: fetch a dataset's canonical public archive into the data root.

Only the files the readers need are taken out of the archive (by name; nothing else in it is
written, so a hostile archive cannot write outside the target folder), checked against their
known MD5 sums in a temporary folder beside the target, and only then moved into place as
``ROOT/NAME/<file>``: a download that fails (or is interrupted) leaves the data root as it was.
"""

from __future__ import annotations

import hashlib
import http.client
import lzma
import os
import shutil
import tarfile
import tempfile
import urllib.error
import urllib.request
import zlib
from dataclasses import dataclass
from pathlib import Path

from memread.errors import MemreadError


@dataclass(frozen=True)
class ArchiveSpec:
    url: str
    files: dict[str, str]  # file written -> path suffix of its member in the archive
    md5: dict[str, str]  # file written -> MD5 of its bytes


DATASETS: dict[str, ArchiveSpec] = {
    # Mikolov's simple-examples.tgz: the Penn Treebank LM version every paper here uses
    "ptb": ArchiveSpec(
        url="http://www.fit.vutbr.cz/~imikolov/rnnlm/simple-examples.tgz",
        files={"ptb.train.txt": "data/ptb.train.txt", "ptb.valid.txt": "data/ptb.valid.txt",
               "ptb.test.txt": "data/ptb.test.txt"},
        md5={"ptb.train.txt": "f26c4b92c5fdc7b3f8c7cdcb991d8420", "ptb.valid.txt": "aa0affc06ff7c36e977d7cd49e3839bf",
             "ptb.test.txt": "8b80168b89c18661a38ef683c0dc3721"},
    ),
}


def _fetch(url: str, dest: Path, timeout: float = 60.0) -> None:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response, open(dest, "wb") as f:
            shutil.copyfileobj(response, f, length=1 << 20)
            expected, got = response.headers.get("Content-Length"), f.tell()
    except urllib.error.HTTPError as e:
        raise MemreadError(f"could not fetch {url}: HTTP {e.code} {e.reason}") from None
    except http.client.IncompleteRead as e:  # the connection closed before Content-Length bytes came
        raise MemreadError(f"could not fetch {url}: the connection closed after {len(e.partial)} bytes "
                           f"of the archive") from None
    except (urllib.error.URLError, http.client.HTTPException, OSError, ValueError) as e:
        reason = getattr(e, "reason", None) or e
        raise MemreadError(f"could not fetch {url}: {reason}") from None
    if expected is not None and expected.isdigit() and got < int(expected):
        raise MemreadError(f"could not fetch {url}: the connection closed after {got} of {expected} bytes")


# what reading a cut-off or corrupt archive raises, depending on where it breaks and how it is compressed
_CORRUPT = (tarfile.TarError, EOFError, zlib.error, OSError, lzma.LZMAError, ValueError)


def _extract(url: str, archive: Path, spec: ArchiveSpec, verify: bool, into: Path) -> None:
    """Every file of ``spec`` taken from ``archive`` and checked, written as ``into/<file>``."""
    try:
        tar = tarfile.open(archive, "r:*")
    except tarfile.ReadError:
        with open(archive, "rb") as f:
            head = f.read(24)
        raise MemreadError(f"{url}: not a tar archive (nor a gzip, bzip2 or xz one); it begins {head!r}") from None
    except _CORRUPT as e:
        raise MemreadError(f"{url}: the archive is truncated or corrupt ({type(e).__name__}: {e})") from None
    with tar:
        try:
            members = {m.name: m for m in tar.getmembers() if m.isfile()}
        except _CORRUPT as e:
            raise MemreadError(f"{url}: the archive is truncated or corrupt ({type(e).__name__}: {e})") from None
        for filename, suffix in spec.files.items():
            found = [m for n, m in members.items() if n == suffix or n.endswith("/" + suffix)]
            if not found:
                raise MemreadError(f"{url}: archive has no member ending in {suffix!r}; nothing was written")
            try:
                data = tar.extractfile(found[0]).read()
            except _CORRUPT as e:
                raise MemreadError(f"{url}: the archive is truncated or corrupt at {found[0].name} "
                                   f"({type(e).__name__}: {e}); nothing was written") from None
            digest = hashlib.md5(data).hexdigest()
            if verify and digest != spec.md5[filename]:
                raise MemreadError(
                    f"{url}: {suffix} has MD5 {digest}, expected {spec.md5[filename]}; "
                    f"nothing was written (use --no-verify to accept it anyway)"
                )
            (into / filename).write_bytes(data)


def _make_dirs(path: Path) -> list[Path]:
    """``mkdir -p path``; returns the folders it created, outermost first."""
    missing = []
    p = path
    while not p.exists():
        missing.append(p)
        if p.parent == p:
            break
        p = p.parent
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        _remove_empty(missing[::-1])
        raise MemreadError(f"cannot create the data root {path}: {e.strerror or e}") from None
    return missing[::-1]


def _remove_empty(folders: list[Path]) -> None:
    for folder in reversed(folders):
        try:
            folder.rmdir()
        except OSError:  # not empty (something else wrote there meanwhile): leave it
            pass


def download(name: str, root: Path, url: str | None = None, verify: bool = True) -> Path:
    """Fetch dataset ``name`` into ``root/name``; returns that folder. Existing files are kept.

    The archive is fetched and every file checked in a temporary folder beside the target
    (``root/.NAME.download-XXXX``); the target folder is created and the files moved into it only
    when all of them are good. On any failure, an interrupt included, the data root is left as it was.
    """
    if name not in DATASETS:
        raise MemreadError(f"no download for {name!r}; available: {', '.join(sorted(DATASETS))}")
    spec = DATASETS[name]
    root = Path(root)
    target = root / name

    def present(f: str) -> bool:
        return (target / f).is_file() or (target / (f + ".gz")).is_file()

    if all(present(f) for f in spec.files):
        return target
    url = url or spec.url
    created: list[Path] = []  # folders this call made (data root, target), removed again on failure
    moved: list[Path] = []  # files this call put into the target, removed again on failure
    tmp: Path | None = None
    try:
        created += _make_dirs(root)
        tmp = Path(tempfile.mkdtemp(dir=root, prefix=f".{name}.download-"))
        archive = tmp / "archive"
        _fetch(url, archive)
        staged = tmp / "files"
        staged.mkdir()
        _extract(url, archive, spec, verify, staged)
        if not target.exists():
            target.mkdir()
            created.append(target)
        for filename in spec.files:  # every file checked before any is moved into place
            if present(filename):  # a file already there is kept as it is
                continue
            os.replace(staged / filename, target / filename)
            moved.append(target / filename)
    except BaseException:
        for path in moved:
            path.unlink(missing_ok=True)
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
            tmp = None
        _remove_empty(created)
        raise
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    return target
