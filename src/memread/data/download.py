"""``memread data download NAME``: fetch a dataset's canonical public archive into the data root.

Only the files the readers need are taken out of the archive (by name; nothing else in it is
written, so a hostile archive cannot write outside the target folder), checked against their
known MD5 sums, and written atomically as ``ROOT/NAME/<file>``.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tarfile
import tempfile
import urllib.error
import urllib.request
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
    except urllib.error.HTTPError as e:
        raise MemreadError(f"could not fetch {url}: HTTP {e.code} {e.reason}") from None
    except (urllib.error.URLError, OSError) as e:
        reason = getattr(e, "reason", e)
        raise MemreadError(f"could not fetch {url}: {reason}") from None


def download(name: str, root: Path, url: str | None = None, verify: bool = True) -> Path:
    """Fetch dataset ``name`` into ``root/name``; returns that folder. Existing files are kept."""
    if name not in DATASETS:
        raise MemreadError(f"no download for {name!r}; available: {', '.join(sorted(DATASETS))}")
    spec = DATASETS[name]
    target = Path(root) / name
    if all((target / f).is_file() or (target / (f + ".gz")).is_file() for f in spec.files):
        return target
    target.mkdir(parents=True, exist_ok=True)
    url = url or spec.url
    with tempfile.TemporaryDirectory(dir=target, prefix=".download-") as tmp:
        archive = Path(tmp) / "archive"
        _fetch(url, archive)
        try:
            tar = tarfile.open(archive, "r:*")
        except tarfile.TarError as e:
            raise MemreadError(f"{url}: not a tar archive ({e})") from None
        with tar:
            members = {m.name: m for m in tar.getmembers() if m.isfile()}
            payloads: dict[str, bytes] = {}
            for filename, suffix in spec.files.items():
                found = [m for n, m in members.items() if n == suffix or n.endswith("/" + suffix)]
                if not found:
                    raise MemreadError(f"{url}: archive has no member ending in {suffix!r}")
                data = tar.extractfile(found[0]).read()
                digest = hashlib.md5(data).hexdigest()
                if verify and digest != spec.md5[filename]:
                    raise MemreadError(
                        f"{url}: {suffix} has MD5 {digest}, expected {spec.md5[filename]}; "
                        f"nothing was written (use --no-verify to accept it anyway)"
                    )
                payloads[filename] = data
        for filename, data in payloads.items():  # every file checked before any is written
            part = target / (filename + ".part")
            part.write_bytes(data)
            os.replace(part, target / filename)
    return target
