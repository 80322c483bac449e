"""``memread data download NAME`` and ``memread data list``: every dataset memread reads, from its
canonical public archive (the table is :mod:`memread.data.catalog`). This module puts the steps in order;
each step lives in its own module:

- :mod:`memread.data.fetch`: the archive (or each plain file) fetched into ``ROOT/.downloads/`` over HTTP,
  resumably, and the temporary folders a download works in, locked while it works and cleared after a kill;
- :mod:`memread.data.extract`: the catalog's members taken from the archive, safely (only the named members,
  never a path the archive chose, no links);
- :mod:`memread.data.formats`: each file checked, by its sha256 or by its reader's structure check (the checks
  live beside their readers: ``check_snli`` in :mod:`memread.data.snli`, ...) and record count.

**Checked, then moved into place.** The archive's members are extracted into a temporary folder beside
the target (``ROOT/.NAME.download-XXXX``), and each is checked: its sha256 where the catalog pins one,
otherwise its structure by memread's reader for it and its record count where the official count is
known. Only when every file is good is the dataset folder created and the files moved into it; a failure
(an interrupt included) leaves the data root's datasets as they were. Files already there are kept.

**Resumable.** A download cut short keeps what arrived in ``ROOT/.downloads/NAME-ARCHIVE.part``; the next run
continues it (:mod:`memread.data.fetch`). A complete archive stays there only when the run stops after the
fetch (an interrupt while extracting), and is then used without fetching again; it is deleted once the
dataset is in place, and when it turns out to be bad.

**Nothing left behind.** The temporary folder is removed however the run ends, except by a kill; the next
download removes the folders killed ones left (:func:`memread.data.fetch.clear_leftovers`) and says so.

**Plain files** (catalog ``kind = "files"``: IWSLT14, whose MIXER-preprocessed files pcyin/pytorch_nmt
publishes one by one). Each file the dataset folder lacks is fetched as ``<url>/<its name>``, resumably,
into ``ROOT/.downloads/NAME-FILE.part`` (one ``.part`` and ``.json`` per file); a run cut short keeps the
files that arrived, and the next one fetches only what is missing and continues the partial file with
Range. When all are there, each is copied into the temporary folder (gzipped where the layout wants it)
and checked: its sha256 where pinned, and the dataset's check over its files together (IWSLT14: line
counts and words per line across languages and ``.wmixerprep``). Then, as for archives, the files are
moved into place only when every one is good; a bad file discards every ``.part`` of the dataset.

``MEMREAD_DOWNLOAD_BASE=URL`` fetches every archive as ``URL/<archive file name>`` and every plain file as
``URL/<file name>``; ``--url`` overrides one dataset's archive (for a ``files`` dataset: the folder URL its
files are under), and may be a local path: an archive fetched elsewhere (a folder of the files, for a
``files`` dataset). **Offline**, a fetch that cannot reach its server says both ways out: that ``--url`` with
a path, or the files to place by hand, by folder and name.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from pathlib import Path

from memread.data.catalog import DATASETS, Dataset, Member
from memread.data.extract import copy_member, extract_members
from memread.data.fetch import (BASE_ENV, DOWNLOADS, HELD, TEMP_FOLDER, FetchFailed, archive_url, clear_leftovers,
                                 discard, fetch, file_url, files_base, make_dirs, read_meta, remove_empty, remove_temp,
                                 size_text, source_url, temp_folder)
from memread.data.formats import CHECKS, SET_CHECKS, verify_member
from memread.errors import MemreadError

# what code and tests import from here (some of it now lives in fetch and formats)
__all__ = ["BASE_ENV", "CHECKS", "DOWNLOADS", "HELD", "SET_CHECKS", "TEMP_FOLDER", "FetchFailed", "archive_url",
           "by_hand", "clear_leftovers", "download", "file_url", "files_base", "format_listing", "listing",
           "size_text", "source_url", "status"]


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


def _extract(url: str, archive: Path, spec: Dataset, verify: bool, staged: Path, work: Path) -> None:
    """Every member of ``spec`` taken from ``archive`` into ``staged`` (as the dataset folder lays it out)
    and checked; ``work`` is scratch space for members that are repacked."""
    digests, counts = extract_members(url, archive, spec, staged, work)
    if verify:
        for m in spec.members:
            verify_member(url, m, staged, digests, counts)


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
        created += make_dirs(dest.parent)
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
        created += make_dirs(root / DOWNLOADS)
        tmp = temp_folder(root, spec.name)
        for m in wanted:
            try:
                fetch(file_url(base, m), parts[m.path])
            except FetchFailed as e:
                raise FetchFailed(f"{e}; {by_hand(spec, root)}") from None
        staged = tmp / "files"
        staged.mkdir()
        digests: dict[str, str] = {}
        for m in wanted:
            dest = staged / m.written()
            dest.parent.mkdir(parents=True, exist_ok=True)
            digests[m.path] = copy_member(file_url(base, m), m.source, lambda p=parts[m.path]: open(p, "rb"), dest,
                                    compress=m.gzip)
        if verify:
            try:
                for m in wanted:
                    verify_member(file_url(base, m), m, staged, digests, {})
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
            remove_temp(tmp)
        for part in parts.values():
            if not keep_parts or not (part.is_file() and part.stat().st_size > 0 and read_meta(part)):
                discard(part)
        remove_empty(created)
        remove_empty([root / DOWNLOADS])  # when nothing else waits there
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
        created += make_dirs(part.parent)
        tmp = temp_folder(root, name)
        try:
            fetch(url, part)
        except FetchFailed as e:
            keep_archive = part.is_file() and part.stat().st_size > 0 and bool(read_meta(part))
            raise FetchFailed(f"{e}; {by_hand(spec, root)}") from None
        except BaseException:
            keep_archive = part.is_file() and part.stat().st_size > 0 and bool(read_meta(part))
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
            remove_temp(tmp)
        if not keep_archive:
            discard(part)
        remove_empty(created)
        if not keep_archive:
            remove_empty([part.parent])  # .downloads, when nothing else waits there
    return target
