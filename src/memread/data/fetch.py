"""Fetching a dataset's archive or files over HTTP, resumably, and the folders a download works in.

**Resumable.** A file is fetched into ``ROOT/.downloads/NAME-FILE.part`` (with a ``.json`` beside it: the URL,
its size and validator). A fetch cut short keeps what arrived; the next one continues it with an HTTP ``Range``
request (``If-Range`` with the ETag or Last-Modified seen first), or starts again from scratch when the server
ignores Range or the file changed. A ``.part`` whose size is the one announced is complete and is not fetched
again.

**Nothing left behind.** A download works in a temporary folder beside the dataset's (``ROOT/.NAME.download-XXXX``,
:func:`temp_folder`), removed however the run ends, except by a kill (SIGKILL, a power cut). Its writer holds a
lock on ``.held`` inside it while it works, so :func:`clear_leftovers` removes every ``ROOT/.*.download-*``
folder whose lock nobody holds (one without a lock file, from an earlier memread, once it is a minute old); a
download running beside it keeps its own. :func:`make_dirs` says which folders it made, so that a failed run
removes them again (:func:`remove_empty`).

``MEMREAD_DOWNLOAD_BASE=URL`` fetches every archive as ``URL/<archive file name>`` and every plain file as
``URL/<file name>`` (a mirror, or the tests' loopback server); ``--url`` overrides one dataset's archive (for a
``files`` dataset: the folder URL its files are under), and may be a local path (:func:`source_url`).
"""

from __future__ import annotations

import http.client
import json
import os
import re
import shutil
import sys
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import filelock

from memread.data.catalog import Dataset, Member
from memread.errors import MemreadError

DOWNLOADS = ".downloads"  # under the data root: partial (and interrupted) archive downloads
BASE_ENV = "MEMREAD_DOWNLOAD_BASE"
CHUNK = 1 << 20
PROGRESS_MIN_BYTES = 1 << 20  # no progress bar for archives smaller than this


class FetchFailed(MemreadError):
    """The server could not be reached or refused the file (offline, a proxy, HTTP errors)."""


def source_url(url: str | None) -> str | None:
    """``--url`` as a URL: one with a scheme as it is; a local path (an archive, or the folder of a ``files``
    dataset) as its ``file://`` URL, refused in one line when nothing is there."""
    if not url or len(urllib.parse.urlsplit(url).scheme) > 1:  # http:, https:, file:, ...; not a drive letter
        return url
    path = Path(url).expanduser()
    if not path.exists():
        raise MemreadError(f"--url {url}: no such file or folder (a URL, or the path of an archive fetched elsewhere)")
    return path.resolve().as_uri()



def archive_url(spec: Dataset, url: str | None = None) -> str:
    """``url``, else ``$MEMREAD_DOWNLOAD_BASE/<archive>``, else the catalog's canonical URL."""
    if url:
        return url
    base = os.environ.get(BASE_ENV)
    if base:
        return base.rstrip("/") + "/" + urllib.parse.quote(spec.archive)
    return spec.url


def files_base(spec: Dataset, url: str | None = None) -> str:
    """The folder URL a ``files`` dataset's files are under: ``url``, else ``$MEMREAD_DOWNLOAD_BASE``, else
    the catalog's."""
    return (url or os.environ.get(BASE_ENV) or spec.url).rstrip("/")


def file_url(base: str, m: Member) -> str:
    return base + "/" + urllib.parse.quote(m.source)


# ----------------------------------------------------------------------------- fetching, resumably


def _meta_path(part: Path) -> Path:
    return part.with_name(part.name + ".json")


def read_meta(part: Path) -> dict:
    try:
        meta = json.loads(_meta_path(part).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return meta if isinstance(meta, dict) else {}


def discard(part: Path) -> None:
    part.unlink(missing_ok=True)
    _meta_path(part).unlink(missing_ok=True)


def _content_range(value: str | None) -> tuple[int | None, int | None]:
    """``bytes START-END/TOTAL`` -> (START, TOTAL); None for what is not there."""
    m = re.fullmatch(r"\s*bytes\s+(\d+)-\d+/(\d+|\*)\s*", value or "")
    if not m:
        return None, None
    return int(m.group(1)), (int(m.group(2)) if m.group(2) != "*" else None)


def _validator(headers) -> str | None:
    etag = headers.get("ETag")
    if etag and not etag.startswith("W/"):  # If-Range needs a strong validator
        return etag
    return headers.get("Last-Modified")


def _progress(total: int | None, initial: int, label: str):
    from tqdm import tqdm

    show = sys.stderr.isatty() and (total is None or total >= PROGRESS_MIN_BYTES)
    return tqdm(total=total, initial=initial, unit="B", unit_scale=True, unit_divisor=1024, desc=label,
                file=sys.stderr, disable=not show, leave=False, dynamic_ncols=True)


def fetch(url: str, part: Path, timeout: float = 60.0, _retry: bool = True) -> None:
    """Fetch ``url`` into ``part``, continuing the partial download already there for the same URL."""
    meta = read_meta(part)
    have = part.stat().st_size if part.is_file() else 0
    if have and meta.get("url") != url:  # a partial download of something else: start again
        discard(part)
        have, meta = 0, {}
    total = meta.get("total") if have else None
    if have and isinstance(total, int) and have >= total:
        if have == total:  # complete already (kept after an interrupt)
            return
        discard(part)
        have = 0
    resumable = urllib.parse.urlsplit(url).scheme in ("http", "https")
    if have and not resumable:
        have = 0
    headers = {"User-Agent": "memread (dataset download; Python urllib)"}
    if have:
        headers["Range"] = f"bytes={have}-"
        if meta.get("validator"):
            headers["If-Range"] = meta["validator"]
    try:
        response = urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=timeout)
    except urllib.error.HTTPError as e:
        if e.code == 416 and have and _retry:  # nothing after what we have: the file changed; start again
            discard(part)
            return fetch(url, part, timeout, _retry=False)
        raise FetchFailed(f"could not fetch {url}: HTTP {e.code} {e.reason}") from None
    except (urllib.error.URLError, http.client.HTTPException, OSError, ValueError) as e:
        reason = getattr(e, "reason", None) or e
        raise FetchFailed(f"could not fetch {url}: {reason}") from None
    with response:
        status = getattr(response, "status", None)
        if have and status == 206:
            start, total = _content_range(response.headers.get("Content-Range"))
            if start != have:  # not the part asked for: start again from scratch
                if not _retry:
                    raise MemreadError(f"could not fetch {url}: the server sent bytes from {start}, asked for {have}")
                response.close()
                discard(part)
                return fetch(url, part, timeout, _retry=False)
            mode = "ab"
        else:  # a fresh download (or the server ignored Range, or the file changed): from the start
            length = response.headers.get("Content-Length")
            total = int(length) if length is not None and length.isdigit() else None
            have, mode = 0, "wb"
            _meta_path(part).write_text(json.dumps({"url": url, "total": total,
                                                    "validator": _validator(response.headers)}), encoding="utf-8")
        with open(part, mode) as f, _progress(total, have, part.name.removesuffix(".part")) as bar:
            try:
                while True:
                    chunk = response.read(CHUNK)
                    if not chunk:
                        break
                    f.write(chunk)
                    bar.update(len(chunk))
            except (http.client.HTTPException, ConnectionError, TimeoutError):
                pass  # the connection broke: what arrived is kept, and reported below
    got = part.stat().st_size
    if total is not None and got < total:
        kept = f"; the {got:,} bytes received are kept in {part}: run the command again to continue" if got else ""
        raise MemreadError(f"could not fetch {url}: the connection closed after {got:,} of {total:,} bytes{kept}")



# ----------------------------------------------------------------------------- temporary folders and their cleanup


# the temp folders of downloads (``ROOT/.NAME.download-XXXX``) and the lock their writer holds in each
TEMP_FOLDER = re.compile(r"^\.[^/]+\.download-[^/]+$")
HELD = ".held"
UNLOCKED_AGE_S = 60.0  # a temp folder without a lock file: its writer's (an earlier memread's) once this old
_held: dict[Path, filelock.BaseFileLock] = {}


def temp_folder(root: Path, name: str) -> Path:
    """A new temp folder ``root/.NAME.download-XXXX``, locked by this process until :func:`remove_temp`."""
    tmp = Path(tempfile.mkdtemp(dir=root, prefix=f".{name}.download-"))
    lock = filelock.FileLock(str(tmp / HELD), blocking=False)
    try:
        lock.acquire()
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    _held[tmp] = lock
    return tmp


def remove_temp(tmp: Path) -> None:
    lock = _held.pop(tmp, None)
    if lock is not None:
        lock.release()
    shutil.rmtree(tmp, ignore_errors=True)


def _size(folder: Path) -> int:
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file() and not f.is_symlink())


def clear_leftovers(root: Path) -> list[str]:
    """Remove the temp folders downloads killed mid-way left in ``root`` (no process holds their lock; one without
    a lock file once it is :data:`UNLOCKED_AGE_S` old); a download running now keeps its own. One "NAME (SIZE)"
    per folder removed."""
    import time

    removed = []
    try:
        entries = sorted(Path(root).iterdir())
    except OSError:
        return removed
    for folder in entries:
        if not TEMP_FOLDER.match(folder.name) or not folder.is_dir() or folder.is_symlink() or folder in _held:
            continue
        try:
            if (folder / HELD).is_file():
                probe = filelock.FileLock(str(folder / HELD), blocking=False)
                try:
                    probe.acquire()
                except filelock.Timeout:
                    continue  # a download at work
                probe.release()
            elif time.time() - folder.stat().st_mtime < UNLOCKED_AGE_S:
                continue  # maybe one being made this moment
            size = _size(folder)
            shutil.rmtree(folder)
        except OSError:
            continue  # not ours to remove (permissions): left as it is
        removed.append(f"{folder.name} ({size_text(size) if size else 'empty'})")
    return removed


def make_dirs(path: Path) -> list[Path]:
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
        remove_empty(missing[::-1])
        raise MemreadError(f"cannot create {path}: {e.strerror or e}") from None
    return missing[::-1]


def remove_empty(folders: list[Path]) -> None:
    for folder in reversed(folders):
        try:
            folder.rmdir()
        except OSError:  # not empty (something else wrote there meanwhile): leave it
            pass



def size_text(n: int) -> str:
    if n <= 0:
        return "n/a"
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"
