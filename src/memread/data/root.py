"""Where benchmark data lives.

The data root is, in order: ``--data-root``, the ``MEMREAD_DATA`` environment variable, or a per-user
cache directory (``$XDG_CACHE_HOME/memread/data``, default ``~/.cache/memread/data``). Each dataset
has its own folder under it (``ptb/``, ``sst/``, ...), laid out as ``memread data download`` writes it.
"""

from __future__ import annotations

import gzip
import os
from pathlib import Path
from typing import IO

from memread.errors import MemreadError


def default_data_root() -> Path:
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "memread" / "data"


def data_root(explicit: str | os.PathLike | None = None) -> Path:
    if explicit:
        return Path(explicit)
    env = os.environ.get("MEMREAD_DATA")
    if env:
        return Path(env)
    return default_data_root()


def find_file(root: Path, dataset: str, name: str, how_to_get: str) -> Path:
    """``root/dataset/name`` or its ``.gz``; otherwise one clear error naming the expected file."""
    base = root / dataset / name
    for candidate in (base, base.with_name(base.name + ".gz")):
        if candidate.is_file():
            return candidate
    raise MemreadError(
        f"{dataset} not found: expected {base} (or {base.name}.gz) under data root {root}; {how_to_get}"
    )


def open_text(path: Path) -> IO[str]:
    """Open plain or gzipped UTF-8 text."""
    if path.suffix == ".gz":
        return gzip.open(path, "rt", encoding="utf-8")
    return open(path, "rt", encoding="utf-8")
