"""Where benchmark data lives.

The data root is, in order: ``--data-root``, the ``MEMREAD_DATA`` environment variable, or a per-user
cache directory (``$XDG_CACHE_HOME/memread/data``, default ``~/.cache/memread/data``). Each dataset
has its own folder under it (``ptb/``, ``sst/``, ...), laid out as ``memread data download`` writes it.

A run directory records the data root it was trained with (``data_root.json``, :data:`RUN_FILE`): a verb
given a run (``eval``, ``compare``, ``predict``, ``train --resume``, ...) reads from there when neither
``--data-root`` nor ``MEMREAD_DATA`` says otherwise, and that folder still exists (a run of an earlier
version, or from another machine, falls back to the cache directory).
"""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path
from typing import IO

from memread.errors import MemreadError


def default_data_root() -> Path:
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "memread" / "data"


RUN_FILE = "data_root.json"  # in a run directory: {"data_root": "/absolute/path"}


def data_root(explicit: str | os.PathLike | None = None, run: str | os.PathLike | None = None) -> Path:
    """``explicit`` (``--data-root``), else ``$MEMREAD_DATA``, else the root ``run`` was trained with (when it
    recorded one that is still a folder), else the per-user cache directory."""
    if explicit:
        return Path(explicit)
    env = os.environ.get("MEMREAD_DATA")
    if env:
        return Path(env)
    recorded = recorded_data_root(run) if run is not None else None
    if recorded is not None and recorded.is_dir():
        return recorded
    return default_data_root()


def recorded_data_root(run: str | os.PathLike) -> Path | None:
    """The data root a run directory recorded when it was trained (:data:`RUN_FILE`), or None: none recorded
    (a run of an earlier version), or ``run`` is a model archive."""
    try:
        value = json.loads((Path(run) / RUN_FILE).read_text(encoding="utf-8")).get("data_root")
    except (OSError, ValueError, AttributeError):
        return None
    return Path(value) if isinstance(value, str) and value else None


def data_root_record(root: str | os.PathLike) -> str:
    """The text of :data:`RUN_FILE` for ``root`` (made absolute: a verb may run from another folder)."""
    return json.dumps({"data_root": str(Path(root).expanduser().absolute())}) + "\n"


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
