"""``memread data download NAME`` and ``memread data list``: every dataset memread reads, from its
canonical public archive (the table is :mod:`memread.data.catalog`).

**Only the named members are taken.** Each file written is named by the catalog, never by the archive;
the few members taken by pattern (CNN's ``.question`` files, aclImdb's reviews) must match a strict
pattern, so an archive cannot write outside the dataset folder, whatever its member names.

**Checked, then moved into place.** The archive's members are extracted into a temporary folder beside
the target (``ROOT/.NAME.download-XXXX``), and each is checked: its sha256 where the catalog pins one,
otherwise its structure by memread's reader for it and its record count where the official count is
known. Only when every file is good is the dataset folder created and the files moved into it; a failure
(an interrupt included) leaves the data root's datasets as they were. Files already there are kept.

**Resumable.** The archive is fetched into ``ROOT/.downloads/NAME-ARCHIVE.part`` (with a ``.json`` beside
it: the URL, its size and validator). A download cut short keeps what arrived; the next run continues it
with an HTTP ``Range`` request (``If-Range`` with the ETag or Last-Modified seen first), or starts again
from scratch when the server ignores Range or the file changed. A complete archive stays there only when
the run stops after the fetch (an interrupt while extracting), and is then used without fetching again;
it is deleted once the dataset is in place, and when it turns out to be bad.

**Nothing left behind.** The temporary folder is removed however the run ends, except by a kill (SIGKILL, a
power cut). Its writer holds a lock on ``.held`` inside it while it works, so the next download removes every
``ROOT/.*.download-*`` folder whose lock nobody holds (one without a lock file, from an earlier memread, once it
is a minute old) and says so; a download running beside it keeps its own.

**Plain files** (catalog ``kind = "files"``: IWSLT14, whose MIXER-preprocessed files pcyin/pytorch_nmt
publishes one by one). Each file the dataset folder lacks is fetched as ``<url>/<its name>``, resumably,
into ``ROOT/.downloads/NAME-FILE.part`` (one ``.part`` and ``.json`` per file); a run cut short keeps the
files that arrived, and the next one fetches only what is missing and continues the partial file with
Range. When all are there, each is copied into the temporary folder (gzipped where the layout wants it)
and checked: its sha256 where pinned, and the dataset's check over its files together (IWSLT14: line
counts and words per line across languages and ``.wmixerprep``). Then, as for archives, the files are
moved into place only when every one is good; a bad file discards every ``.part`` of the dataset.

``MEMREAD_DOWNLOAD_BASE=URL`` fetches every archive as ``URL/<archive file name>`` and every plain file as
``URL/<file name>`` (a mirror, or the tests' loopback server); ``--url`` overrides one dataset's archive
(for a ``files`` dataset: the folder URL its files are under), and may be a local path: an archive fetched
elsewhere (a folder of the files, for a ``files`` dataset). **Offline**, a fetch that cannot reach its
server says both ways out: that ``--url`` with a path, or the files to place by hand, by folder and name.
"""

from __future__ import annotations

import gzip
import hashlib
import http.client
import json
import lzma
import os
import re
import shutil
import sys
import tarfile
import tempfile
import urllib.error
import urllib.parse
import urllib.request
import zipfile
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path

import filelock

from memread.data.catalog import DATASETS, Dataset, Member
from memread.errors import MemreadError

DOWNLOADS = ".downloads"  # under the data root: partial (and interrupted) archive downloads
BASE_ENV = "MEMREAD_DOWNLOAD_BASE"
CHUNK = 1 << 20
PROGRESS_MIN_BYTES = 1 << 20  # no progress bar for archives smaller than this

# what reading a cut-off or corrupt archive raises, depending on its format and where it breaks
_CORRUPT = (tarfile.TarError, zipfile.BadZipFile, EOFError, zlib.error, lzma.LZMAError, OSError, ValueError,
            NotImplementedError, RuntimeError)


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


def by_hand(spec: Dataset, root: Path) -> str:
    """How to install ``spec`` without this machine reaching its server: the archive (or files) fetched elsewhere
    and given by path, or the files placed by hand (their folder and names)."""
    target = Path(root) / spec.folder
    missing = [_label(target, m) for m in spec.required if not _present(target, m)] or [m.path for m in spec.required]
    shown = ", ".join(missing[:4]) + (f" and {len(missing) - 4} more (memread data list --json names them)"
                                      if len(missing) > 4 else "")
    if spec.kind == "files":
        fetched = f"fetch its files from {spec.url} elsewhere into one folder and run memread data download " \
                  f"{spec.name} --url /path/to/that/folder"
    else:
        fetched = f"fetch {spec.archive} from {spec.url} elsewhere and run memread data download {spec.name} " \
                  f"--url /path/to/{spec.archive}"
    return f"offline? {fetched}; or place {shown} in {target}/ by hand (plain or .gz)"


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


def _read_meta(part: Path) -> dict:
    try:
        meta = json.loads(_meta_path(part).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return meta if isinstance(meta, dict) else {}


def _discard(part: Path) -> None:
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


def _fetch(url: str, part: Path, timeout: float = 60.0, _retry: bool = True) -> None:
    """Fetch ``url`` into ``part``, continuing the partial download already there for the same URL."""
    meta = _read_meta(part)
    have = part.stat().st_size if part.is_file() else 0
    if have and meta.get("url") != url:  # a partial download of something else: start again
        _discard(part)
        have, meta = 0, {}
    total = meta.get("total") if have else None
    if have and isinstance(total, int) and have >= total:
        if have == total:  # complete already (kept after an interrupt)
            return
        _discard(part)
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
            _discard(part)
            return _fetch(url, part, timeout, _retry=False)
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
                _discard(part)
                return _fetch(url, part, timeout, _retry=False)
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


# ----------------------------------------------------------------------------- reading archives


def _corrupt(url: str, e: BaseException, where: str = "") -> MemreadError:
    at = f" at {where}" if where else ""
    return MemreadError(f"{url}: the archive is truncated or corrupt{at} ({type(e).__name__}: {e}); "
                        f"nothing was written")


def _iter_archive(url: str, path: Path) -> Iterator[tuple[str, Callable]]:
    """``(member name, open it)`` for every regular file of a zip or tar (gz, bz2, xz) archive, in order."""
    with open(path, "rb") as f:
        head = f.read(24)
    if head[:4] in (b"PK\x03\x04", b"PK\x05\x06"):
        try:
            zf = zipfile.ZipFile(path)
        except _CORRUPT as e:
            raise _corrupt(url, e) from None
        with zf:
            for info in zf.infolist():
                if not info.is_dir():
                    yield info.filename, (lambda info=info: zf.open(info))
        return
    try:
        tar = tarfile.open(path, "r:*")
    except tarfile.ReadError:
        raise MemreadError(f"{url}: not a zip or tar archive (nor a gzip, bzip2 or xz one); it begins {head!r}; "
                           f"nothing was written") from None
    except _CORRUPT as e:
        raise _corrupt(url, e) from None
    with tar:
        while True:
            try:
                member = tar.next()
            except _CORRUPT as e:
                raise _corrupt(url, e) from None
            if member is None:
                return
            if member.isfile():  # links, devices and folders are never written
                yield member.name, (lambda member=member: tar.extractfile(member))


def _clean(name: str) -> str:
    name = name.replace("\\", "/")
    while name.startswith("./"):
        name = name[2:]
    return name.lstrip("/")


def _ignored(name: str) -> bool:
    return name.startswith("__MACOSX/") or name.rsplit("/", 1)[-1].startswith("._")


def _is(name: str, source: str) -> bool:
    return name == source or name.endswith("/" + source)


def _below(name: str, source: str) -> str | None:
    """The part of ``name`` below folder ``source`` (at any depth), or None."""
    if name.startswith(source + "/"):
        return name[len(source) + 1:]
    i = name.find("/" + source + "/")
    return name[i + len(source) + 2:] if i >= 0 else None


def _safe(rel: str) -> bool:
    parts = rel.split("/")
    return all(p not in ("", ".", "..") and "\x00" not in p for p in parts)


def _copy(url: str, name: str, opener: Callable, dest: Path, compress: bool = False) -> str:
    """Stream one member into ``dest`` (gzipped when ``compress``); the sha256 of its bytes."""
    sha = hashlib.sha256()
    try:
        src = opener()
    except _CORRUPT as e:
        raise _corrupt(url, e, name) from None
    with src, open(dest, "wb") as raw:
        out = gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=9) if compress else raw
        try:
            while True:
                try:
                    chunk = src.read(CHUNK)
                except _CORRUPT as e:
                    raise _corrupt(url, e, name) from None
                if not chunk:
                    break
                sha.update(chunk)
                out.write(chunk)
        finally:
            if compress:
                out.close()
    return sha.hexdigest()


class _Hashing:
    def __init__(self, out):
        self.out, self.sha = out, hashlib.sha256()

    def write(self, data: bytes) -> int:
        self.sha.update(data)
        return self.out.write(data)


def _repack(files: Path, top: str, dest: Path) -> str:
    """The files under ``files`` as ``dest`` (tar.gz) with names ``top/...``, deterministically: folders
    and files sorted by name, mtime 0, owner 0, folders 0755 and files 0644, GNU format, gzip -9 -n.
    Returns the sha256 of the uncompressed tar."""
    entries: dict[str, Path | None] = {top: None}
    for p in files.rglob("*"):
        if p.is_file():
            rel = p.relative_to(files).as_posix()
            entries[f"{top}/{rel}"] = p
            parts = rel.split("/")
            for i in range(1, len(parts)):
                entries.setdefault(f"{top}/{'/'.join(parts[:i])}", None)
    with open(dest, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=9) as gz:
        out = _Hashing(gz)
        with tarfile.open(fileobj=out, mode="w|", format=tarfile.GNU_FORMAT) as tar:
            for name in sorted(entries):
                info = tarfile.TarInfo(name)
                info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
                path = entries[name]
                if path is None:
                    info.type, info.mode = tarfile.DIRTYPE, 0o755
                    tar.addfile(info)
                else:
                    info.mode, info.size = 0o644, path.stat().st_size
                    with open(path, "rb") as f:
                        tar.addfile(info, f)
    return out.sha.hexdigest()


# ----------------------------------------------------------------------------- structure checks
# each reads one extracted file and returns its number of records, or raises MemreadError


def _lines(path: Path):
    from memread.data.text import read_lines

    return read_lines(path)


def check_wikitext(path: Path) -> int:
    from memread.data.ptb import EOS
    from memread.data.wikitext import is_article_title

    n, first = 0, None
    for n, line in _lines(path):
        if first is None and line.strip():
            first = line
            if not is_article_title(line):
                raise MemreadError(f"{path.name}:{n}: expected an article title '= Title =', got {line[:40]!r}")
        if EOS in line.split():
            raise MemreadError(f"{path.name}:{n}: literal {EOS} inside a line")
    if first is None:
        raise MemreadError(f"{path.name}: no text")
    return n


def check_snli(path: Path) -> int:
    from memread.data.snli import NO_LABEL, SNLI_LABELS

    n = 0
    for lineno, line in _lines(path):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as e:
            raise MemreadError(f"{path.name}:{lineno}: invalid JSON ({e.msg})") from None
        if not isinstance(record, dict) or record.get("gold_label") not in (*SNLI_LABELS, NO_LABEL) \
                or not isinstance(record.get("sentence1"), str) or not isinstance(record.get("sentence2"), str):
            raise MemreadError(f"{path.name}:{lineno}: not an SNLI record (gold_label, sentence1, sentence2)")
        n += 1
    return n


def check_glove(path: Path, dim: int = 50) -> int:
    n = 0
    for n, line in _lines(path):
        fields = line.rstrip().split(" ")
        if len(fields) != dim + 1:
            raise MemreadError(f"{path.name}:{n}: {len(fields) - 1} numbers after the word, expected {dim}")
        if n <= 1000:
            try:
                [float(x) for x in fields[1:]]
            except ValueError:
                raise MemreadError(f"{path.name}:{n}: not a number among the {dim} values") from None
    return n


def check_babi(path: Path) -> int:
    from memread.data.babi import read_babi

    return len(read_babi(path, max_sentences=1))  # one sentence of context each: little memory


def check_cbt(path: Path, context_lines: int = 20) -> int:
    """CBT questions, streamed (memread.data.cbt.read_cbt's rules, without keeping the questions)."""
    from memread.data.cbt import BLANK, BOOK_TITLE

    questions, context = 0, 0
    for lineno, line in _lines(path):
        if line.startswith(BOOK_TITLE) and not context:
            continue
        if not line.strip():
            if context:
                raise MemreadError(f"{path.name}:{lineno}: blank line inside a question")
            continue
        number, _, text = line.partition(" ")
        if not number.isdigit() or int(number) != context + 1:
            raise MemreadError(f"{path.name}:{lineno}: expected line number {context + 1}, got {line[:40]!r}")
        if "\t" not in text:
            context += 1
            continue
        fields = text.split("\t")
        if len(fields) != 4 or fields[2] != "" or BLANK not in fields[0].split() \
                or not fields[1] or fields[1] not in fields[3].split("|"):
            raise MemreadError(f"{path.name}:{lineno}: not a CBT query line 'N query<TAB>answer<TAB><TAB>c1|c2|...'")
        if context != context_lines:
            raise MemreadError(f"{path.name}:{lineno}: {context} context lines, expected {context_lines}")
        questions, context = questions + 1, 0
    if context:
        raise MemreadError(f"{path.name}: ends inside a question")
    return questions


def check_cbt_books(path: Path) -> int:
    from memread.data.cbt import BOOK_TITLE

    books = 0
    for lineno, line in _lines(path):
        if lineno == 1 and not line.startswith(BOOK_TITLE):
            raise MemreadError(f"{path.name}:1: expected a '{BOOK_TITLE} : name' line, got {line[:40]!r}")
        books += line.startswith(BOOK_TITLE)
    if not books:
        raise MemreadError(f"{path.name}: empty")
    return books


def check_rc_question(path: Path) -> int:
    from memread.data.cnn import read_question

    read_question(path)
    return 1


_UNITS = {"babi": "questions", "cbt": "questions", "cbt-books": "books"}  # what a check counts (else lines)
CHECKS: dict[str, Callable[[Path], int]] = {
    "wikitext": check_wikitext, "snli": check_snli, "glove": check_glove, "babi": check_babi, "cbt": check_cbt,
    "cbt-books": check_cbt_books, "rc-question": check_rc_question,
}


# checks over a dataset's files together: (the dataset, {member path: its file}, the member paths fetched
# in this run) -> None, or MemreadError naming the files by their source names


def _raw_lines(path: Path, name: str) -> Iterator[tuple[str, bool]]:
    """``(line, whether it ended with a newline)`` for every line of a plain or gzipped UTF-8 file."""
    try:
        with (gzip.open if path.suffix == ".gz" else open)(path, "rb") as f:
            for lineno, raw in enumerate(f, 1):
                if b"\x00" in raw:
                    raise MemreadError(f"{name}:{lineno}: NUL byte in a text file")
                try:
                    line = raw.decode("utf-8")
                except UnicodeDecodeError as e:
                    raise MemreadError(f"{name}:{lineno}: not UTF-8 text ({e.reason} at column {e.start + 1})") \
                        from None
                yield line, line.endswith("\n")
    except (gzip.BadGzipFile, EOFError, zlib.error) as e:
        raise MemreadError(f"{name}: not a readable gzip file ({e})") from None


def check_iwslt(spec: Dataset, files: dict[str, Path], fetched: set[str]) -> None:
    """Each split with a file fetched in this run: the four files ``{de,en}[.wmixerprep]`` have the same
    number of lines, every file ends with a newline, and each ``.wmixerprep`` line has the raw line's words
    with some replaced by ``<unk>`` (MIXER's rare-word mapping: as many words, each the same or <unk>)."""
    from itertools import zip_longest

    from memread.data.iwslt import LANGS, SPLITS

    for split in SPLITS:
        names = [f"{split}.de-en.{lang}{x}" for lang in LANGS for x in ("", ".wmixerprep")]
        if not fetched & set(names) or not all(n in files for n in names):
            continue
        streams = [_raw_lines(files[n], n) for n in names]
        counts, ended = [0] * 4, [True] * 4
        for lineno, rows in enumerate(zip_longest(*streams), 1):
            for k, row in enumerate(rows):
                if row is not None:
                    counts[k], ended[k] = lineno, row[1]
            if any(row is None for row in rows):
                continue  # the line counts differ: reported below
            for raw, mapped, raw_name, mapped_name in ((rows[0][0], rows[1][0], names[0], names[1]),
                                                       (rows[2][0], rows[3][0], names[2], names[3])):
                a, b = raw.split(), mapped.split()
                if len(a) != len(b):
                    raise MemreadError(f"{mapped_name}:{lineno} has {len(b)} words, {raw_name}:{lineno} has {len(a)}")
                bad = next((i for i, (u, v) in enumerate(zip(a, b)) if u != v and v != "<unk>"), None)
                if bad is not None:
                    raise MemreadError(f"{mapped_name}:{lineno}: word {bad + 1} is {b[bad]!r}, expected "
                                       f"{a[bad]!r} or <unk> as in {raw_name}")
        if len(set(counts)) > 1:
            raise MemreadError(f"{split} is not line-aligned: " + ", ".join(f"{n} has {c:,} lines"
                                                                           for n, c in zip(names, counts)))
        if not counts[0]:
            raise MemreadError(f"{names[0]} and the other {split} files are empty")
        for n, c, e in zip(names, counts, ended):
            if not e:
                raise MemreadError(f"{n}:{c}: the file does not end with a newline (truncated?)")


SET_CHECKS: dict[str, Callable[[Dataset, dict[str, Path], set[str]], None]] = {"iwslt": check_iwslt}


# ----------------------------------------------------------------------------- extracting and checking


def _extract(url: str, archive: Path, spec: Dataset, verify: bool, staged: Path, work: Path) -> None:
    """Every member of ``spec`` taken from ``archive`` into ``staged`` (as the dataset folder lays it out)
    and checked; ``work`` is scratch space for members that are repacked."""
    files = [m for m in spec.members if m.kind == "file"]
    groups = [m for m in spec.members if m.kind in ("tree", "tar")]
    for m in groups:
        (staged / m.path if m.kind == "tree" else work / m.path).mkdir(parents=True, exist_ok=True)
    taken: dict[str, str] = {}  # member path -> archive name
    digests: dict[str, str] = {}
    counts: dict[str, int] = {m.path: 0 for m in groups}
    for raw_name, opener in _iter_archive(url, archive):
        name = _clean(raw_name)
        if _ignored(name):
            continue
        member = next((m for m in files if _is(name, m.source)), None)
        copied = None  # where this member's bytes already are, as they are in the archive
        if member is not None:
            if member.path in taken:
                raise MemreadError(f"{url}: two members match {member.source!r} ({taken[member.path]}, {name}); "
                                   f"nothing was written")
            taken[member.path] = name
            dest = staged / member.written()
            dest.parent.mkdir(parents=True, exist_ok=True)
            digests[member.path] = _copy(url, name, opener, dest, compress=member.gzip)
            copied = None if member.gzip else dest
        for m in groups:  # (a member may also go into a folder or a repacked tar: aclImdb's README)
            rel = _below(name, m.source)
            if rel is None or not _safe(rel) or not re.fullmatch(m.pattern, rel) or (m.kind == "tree" and "/" in rel):
                continue
            dest = (staged if m.kind == "tree" else work) / m.path / rel
            if dest.exists():
                raise MemreadError(f"{url}: {name} appears twice in the archive; nothing was written")
            dest.parent.mkdir(parents=True, exist_ok=True)
            if copied is not None:  # not read from the archive twice (a gzip stream cannot seek back cheaply)
                shutil.copyfile(copied, dest)
            else:
                _copy(url, name, opener, dest)
            counts[m.path] += 1
            break
    for m in spec.members:
        if m.kind == "file" and m.path not in taken and not m.optional:
            raise MemreadError(f"{url}: archive has no member {m.source!r}; nothing was written")
        if m.kind != "file" and not counts[m.path]:
            raise MemreadError(f"{url}: archive has no member {m.source}/<{m.pattern}>; nothing was written")
    for m in groups:
        if m.kind == "tar":
            digests[m.path] = _repack(work / m.path, m.source.rsplit("/", 1)[-1], staged / m.path)
    if verify:
        for m in spec.members:
            _verify(url, m, staged, digests, counts)


def _where(e: MemreadError, path: Path, source: str) -> str:
    """A check's message about an extracted file, naming the archive member instead."""
    msg = str(e)
    if str(path) in msg:
        return msg.replace(str(path), source)
    return source + msg[len(path.name):] if msg.startswith(path.name) else f"{source}: {msg}"


def _verify(url: str, m: Member, staged: Path, digests: dict[str, str], counts: dict[str, int]) -> None:
    def refuse(what: str) -> MemreadError:
        return MemreadError(f"{url}: {what}; nothing was written (use --no-verify to accept it anyway)")

    if m.kind == "file" and m.path not in digests:  # an optional member the archive lacks
        return
    if m.sha256 is not None:
        if digests[m.path] != m.sha256:
            raise refuse(f"{m.source} has sha256 {digests[m.path]}, expected {m.sha256}")
        return
    check = CHECKS[m.check] if m.check else None
    if m.kind == "tree":
        n = counts[m.path]
        if check is not None:
            for path in sorted((staged / m.path).iterdir()):
                try:
                    check(path)
                except MemreadError as e:
                    raise refuse(_where(e, path, f"{m.source}/{path.name}")) from None
    elif check is not None:
        path = staged / m.written()
        try:
            n = check(path)
        except MemreadError as e:
            raise refuse(_where(e, path, m.source)) from None
    else:
        return
    if m.count is not None and n != m.count:
        unit = "files" if m.kind == "tree" else _UNITS.get(m.check, "lines")
        raise refuse(f"{m.source} has {n:,} {unit}, expected {m.count:,}")


# ----------------------------------------------------------------------------- what is there


def _files_in(folder: Path, pattern: str) -> int:
    try:
        return sum(1 for e in os.scandir(folder) if e.is_file() and re.fullmatch(pattern, e.name))
    except OSError:
        return 0


def _present(target: Path, m: Member) -> bool:
    if m.kind == "tree":
        n = _files_in(target / m.path, m.pattern)
        return n >= m.count if m.count is not None else n > 0
    return (target / m.path).is_file() or (target / (m.path + ".gz")).is_file()


def _label(target: Path, m: Member) -> str:
    if m.kind == "tree" and m.count is not None:
        n = _files_in(target / m.path, m.pattern)
        if n:
            return f"{m.path}/ ({n:,} of {m.count:,} files)"
        return m.path + "/"
    return m.path


def status(spec: Dataset, root: Path) -> dict:
    """Whether ``spec`` is in the data root: ``complete`` / ``partial`` / ``missing``, and which files."""
    target = Path(root) / spec.folder
    present = [m.path for m in spec.required if _present(target, m)]
    missing = [_label(target, m) for m in spec.required if not _present(target, m)]
    some = present or any(m.kind == "tree" and _files_in(target / m.path, m.pattern) for m in spec.required)
    state = "complete" if not missing else ("partial" if some else "missing")
    return {"state": state, "present": present, "missing": missing}


def size_text(n: int) -> str:
    if n <= 0:
        return "n/a"
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def listing(root: Path) -> list[dict]:
    """One record per dataset: where it goes, whether it is there, its download, checksums and licence."""
    rows = []
    for spec in DATASETS.values():
        st = status(spec, root)
        pinned, files = spec.pinned()
        rows.append({
            "name": spec.name, "folder": spec.folder, "title": spec.title, "status": st["state"],
            "present": st["present"], "missing": st["missing"],
            "downloadable": not spec.manual, "url": spec.url, "archive": spec.archive, "kind": spec.kind,
            **({"files": [file_url(spec.url.rstrip("/"), m) for m in spec.members]} if spec.kind == "files" else {}),
            "download_bytes": spec.size, "download_size": size_text(spec.size),
            "download_size_estimated": spec.size_estimated,
            "checksums": {"pinned": pinned, "files": files}, "license": spec.license, "note": spec.note,
            **({"manual": spec.manual} if spec.manual else {}),
            **({"extracted": spec.extracted} if spec.extracted else {}),
        })
    return rows


def format_listing(rows: list[dict], root: Path) -> str:
    def state(r: dict) -> str:
        if r["status"] != "partial":
            return r["status"]
        shown = r["missing"][:3]
        more = f" (+{len(r['missing']) - 3} more)" if len(r["missing"]) > 3 else ""
        return f"partial, missing {', '.join(shown)}{more}"

    table = [("dataset", "folder", "in the data root", "download", "checksums", "licence")]
    for r in rows:
        download = (f"~{r['download_size']}" + (" (estimate)" if r["download_size_estimated"] else "")
                    if r["downloadable"] else "none (see below)")
        sums = f"{r['checksums']['pinned']}/{r['checksums']['files']} pinned"
        table.append((r["name"], r["folder"] + "/", state(r), download, sums, r["license"]))
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]) - 1)]
    lines = [f"data root: {root}"]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths)) + "  " + row[-1] for row in table]
    for r in rows:
        if not r["downloadable"]:
            lines.append(f"{r['name']}: no download: {r['manual']}")
    lines.append("unpinned files are checked by their structure and record counts; "
                 "`memread data list --json` has the details")
    return "\n".join(lines)


# ----------------------------------------------------------------------------- download


# the temp folders of downloads (``ROOT/.NAME.download-XXXX``) and the lock their writer holds in each
TEMP_FOLDER = re.compile(r"^\.[^/]+\.download-[^/]+$")
HELD = ".held"
UNLOCKED_AGE_S = 60.0  # a temp folder without a lock file: its writer's (an earlier memread's) once this old
_held: dict[Path, filelock.BaseFileLock] = {}


def _temp_folder(root: Path, name: str) -> Path:
    """A new temp folder ``root/.NAME.download-XXXX``, locked by this process until :func:`_remove_temp`."""
    tmp = Path(tempfile.mkdtemp(dir=root, prefix=f".{name}.download-"))
    lock = filelock.FileLock(str(tmp / HELD), blocking=False)
    try:
        lock.acquire()
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    _held[tmp] = lock
    return tmp


def _remove_temp(tmp: Path) -> None:
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
        raise MemreadError(f"cannot create {path}: {e.strerror or e}") from None
    return missing[::-1]


def _remove_empty(folders: list[Path]) -> None:
    for folder in reversed(folders):
        try:
            folder.rmdir()
        except OSError:  # not empty (something else wrote there meanwhile): leave it
            pass


def _staged_files(staged: Path, spec: Dataset) -> list[tuple[Path, Member, Path]]:
    """(staged file, its member, its path relative to the dataset folder), in catalog order."""
    out = []
    for m in spec.members:
        if m.kind == "tree":
            out += [(f, m, Path(m.path) / f.name) for f in sorted((staged / m.path).iterdir())]
        elif (staged / m.written()).is_file():
            out.append((staged / m.written(), m, Path(m.written())))
    return out


def _move_into_place(staged: Path, spec: Dataset, target: Path, created: list[Path], moved: list[Path]) -> None:
    """Every staged (and checked) file into ``target``; a file already there is kept as it is."""
    for src, member, rel in _staged_files(staged, spec):
        dest = target / rel
        if member.kind == "tree" and dest.exists() or member.kind != "tree" and _present(target, member):
            continue
        created += _make_dirs(dest.parent)
        os.replace(src, dest)
        moved.append(dest)


def _in_place(target: Path, m: Member) -> Path | None:
    for p in (target / m.path, target / (m.path + ".gz")):
        if p.is_file():
            return p
    return None


def _download_files(spec: Dataset, root: Path, target: Path, url: str | None, verify: bool) -> Path:
    """A ``files`` dataset: each file the target lacks fetched, checked, then all moved into place."""
    base = files_base(spec, url)
    wanted = [m for m in spec.members if not _present(target, m)]
    parts = {m.path: root / DOWNLOADS / f"{spec.name}-{m.source}.part" for m in wanted}
    created: list[Path] = []
    moved: list[Path] = []
    tmp: Path | None = None
    keep_parts = True  # a fetch cut short or an interrupt keeps what arrived; a bad file discards them all
    try:
        created += _make_dirs(root / DOWNLOADS)
        tmp = _temp_folder(root, spec.name)
        for m in wanted:
            try:
                _fetch(file_url(base, m), parts[m.path])
            except FetchFailed as e:
                raise FetchFailed(f"{e}; {by_hand(spec, root)}") from None
        staged = tmp / "files"
        staged.mkdir()
        digests: dict[str, str] = {}
        for m in wanted:
            dest = staged / m.written()
            dest.parent.mkdir(parents=True, exist_ok=True)
            digests[m.path] = _copy(file_url(base, m), m.source, lambda p=parts[m.path]: open(p, "rb"), dest,
                                    compress=m.gzip)
        if verify:
            try:
                for m in wanted:
                    _verify(file_url(base, m), m, staged, digests, {})
                if spec.check:
                    files = {m.path: p for m in spec.members
                             if (p := staged / m.written() if m.path in digests else _in_place(target, m)) is not None}
                    try:
                        SET_CHECKS[spec.check](spec, files, set(digests))
                    except MemreadError as e:
                        raise MemreadError(f"{base}: {e}; nothing was written (use --no-verify to accept it "
                                           f"anyway)") from None
            except MemreadError:
                keep_parts = False  # bad files: fetch them again next time
                raise
        _move_into_place(staged, spec, target, created, moved)
        keep_parts = False
    except BaseException:
        for path in moved:
            path.unlink(missing_ok=True)
        raise
    finally:
        if tmp is not None:
            _remove_temp(tmp)
        for part in parts.values():
            if not keep_parts or not (part.is_file() and part.stat().st_size > 0 and _read_meta(part)):
                _discard(part)
        _remove_empty(created)
        _remove_empty([root / DOWNLOADS])  # when nothing else waits there
    return target


def download(name: str, root: Path, url: str | None = None, verify: bool = True) -> Path:
    """Fetch dataset ``name`` into ``root/<its folder>``; returns that folder. Existing files are kept.

    The archive is fetched into ``root/.downloads/`` (continuing a partial download), and every file is
    extracted and checked in a temporary folder beside the target (``root/.NAME.download-XXXX``); the
    dataset folder is created and the files moved into it only when all of them are good. On any failure,
    an interrupt included, the data root's datasets are left as they were (a partial archive is kept in
    ``.downloads/`` to be continued).
    """
    if name not in DATASETS:
        raise MemreadError(f"no download for {name!r}; available: {', '.join(DATASETS)}")
    spec = DATASETS[name]
    if spec.manual:
        raise MemreadError(f"{name}: no download: {spec.manual}")
    root = Path(root)
    for left in clear_leftovers(root):
        print(f"{root}: removed {left}, the temporary folder of a download that was killed", file=sys.stderr)
    target = root / spec.folder
    url = source_url(url)  # a local path: that archive (or folder of files)
    if all(_present(target, m) for m in spec.required):
        return target
    if spec.kind == "files":
        return _download_files(spec, root, target, url, verify)
    url = archive_url(spec, url)
    part = root / DOWNLOADS / f"{spec.name}-{spec.archive}.part"
    created: list[Path] = []  # folders this call made (data root, .downloads, target, ...), removed on failure
    moved: list[Path] = []  # files this call put into the target, removed again on failure
    tmp: Path | None = None
    keep_archive = False  # a failed run keeps what was fetched only when it is worth continuing or reusing
    try:
        created += _make_dirs(part.parent)
        tmp = _temp_folder(root, name)
        try:
            _fetch(url, part)
        except FetchFailed as e:
            keep_archive = part.is_file() and part.stat().st_size > 0 and bool(_read_meta(part))
            raise FetchFailed(f"{e}; {by_hand(spec, root)}") from None
        except BaseException:
            keep_archive = part.is_file() and part.stat().st_size > 0 and bool(_read_meta(part))
            raise
        keep_archive = True  # complete: an interrupt from here on keeps it for the next run
        staged, work = tmp / "files", tmp / "work"
        staged.mkdir()
        work.mkdir()
        try:
            _extract(url, part, spec, verify, staged, work)
        except MemreadError:
            keep_archive = False  # a bad archive: fetch it again next time
            raise
        shutil.rmtree(work)
        _move_into_place(staged, spec, target, created, moved)  # every file checked before any is moved
        keep_archive = False
    except BaseException:
        for path in moved:
            path.unlink(missing_ok=True)
        raise
    finally:
        if tmp is not None:
            _remove_temp(tmp)
        if not keep_archive:
            _discard(part)
        _remove_empty(created)
        if not keep_archive:
            _remove_empty([part.parent])  # .downloads, when nothing else waits there
    return target
