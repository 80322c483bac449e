"""Reading tokenised text files (plain or ``.gz``) with errors that name the file and line."""

from __future__ import annotations

import gzip
import json
import zlib
from pathlib import Path
from typing import Any, Iterator

from memread.errors import MemreadError


def read_lines(path: Path) -> Iterator[tuple[int, str]]:
    """Yield ``(line_number, line)`` without its newline.

    Lines are decoded one by one, so undecodable bytes are reported at their exact line; a broken
    gzip stream or a binary file is reported too, always as a :class:`MemreadError`.
    """
    path = Path(path)
    lineno = 0
    try:
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rb") as f:
            for lineno, raw in enumerate(f, 1):
                if b"\x00" in raw:
                    raise MemreadError(f"{path}:{lineno}: NUL byte in a text file (is this a binary file?)")
                try:
                    line = raw.decode("utf-8")
                except UnicodeDecodeError as e:
                    raise MemreadError(f"{path}:{lineno}: not UTF-8 text ({e.reason} at column {e.start + 1})") from None
                yield lineno, line.rstrip("\n").rstrip("\r")
    except (gzip.BadGzipFile, EOFError, zlib.error) as e:
        raise MemreadError(f"{path}: not a readable gzip file ({e})") from None
    except FileNotFoundError:
        raise MemreadError(f"{path}: file not found") from None
    except IsADirectoryError:
        raise MemreadError(f"{path}: is a folder, expected a text file") from None


def json_line(line: str, where: str, objects: bool = True) -> Any:
    """One line of a JSON-lines file or stream, parsed; ``objects``: it must be a JSON object. One
    MemreadError naming ``where`` (``file:line``) otherwise."""
    try:
        value = json.loads(line)
    except json.JSONDecodeError as e:
        raise MemreadError(f"{where}: not valid JSON ({e.msg} at column {e.colno})") from None
    if objects and not isinstance(value, dict):
        raise MemreadError(f"{where}: expected a JSON object {{...}}, got {type(value).__name__}")
    return value


def read_jsonl(path: Path) -> Iterator[tuple[str, dict]]:
    """``(where, record)`` for every non-blank line of a JSON-lines file, ``where`` = ``path:line``."""
    for lineno, line in read_lines(path):
        if line.strip():
            where = f"{path}:{lineno}"
            yield where, json_line(line, where)
