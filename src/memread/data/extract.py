"""Safe extraction: a dataset's members taken from its zip or tar (gz, bz2, xz) archive into a staging folder.

**Only the named members are taken.** Each file written is named by the catalog, never by the archive; the few
members taken by pattern (CNN's ``.question`` files, aclImdb's reviews) must match a strict pattern below their
folder (no ``..``, no empty or ``.`` parts, no NUL), so an archive cannot write outside the staging folder,
whatever its member names. Only regular files are read: links, devices and folders are never written. A member
that appears twice, a member the catalog wants that the archive lacks, and a truncated or corrupt archive are
refused in one line ending "nothing was written". Members are streamed in chunks (gzipped where the layout
wants it) and hashed on the way; nothing is held in memory whole.
"""

from __future__ import annotations

import gzip
import hashlib
import lzma
import re
import shutil
import tarfile
import zipfile
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path

from memread.data.catalog import Dataset
from memread.errors import MemreadError

CHUNK = 1 << 20

# what reading a cut-off or corrupt archive raises, depending on its format and where it breaks
_CORRUPT = (tarfile.TarError, zipfile.BadZipFile, EOFError, zlib.error, lzma.LZMAError, OSError, ValueError,
            NotImplementedError, RuntimeError)



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


def copy_member(url: str, name: str, opener: Callable, dest: Path, compress: bool = False) -> str:
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


def extract_members(url: str, archive: Path, spec: Dataset, staged: Path,
                    work: Path) -> tuple[dict[str, str], dict[str, int]]:
    """Every member of ``spec`` taken from ``archive`` into ``staged`` (as the dataset folder lays it out);
    ``work`` is scratch space for members that are repacked. Returns the sha256 of each member taken (by
    member path) and the number of files taken into each folder (``tree``) or repacked tar member."""
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
            digests[member.path] = copy_member(url, name, opener, dest, compress=member.gzip)
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
                copy_member(url, name, opener, dest)
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
    return digests, counts
