"""Reading tokenised text files (plain or ``.gz``) with errors that name the file and line."""

from __future__ import annotations

import gzip
import zlib
from pathlib import Path
from typing import Iterator

from memread.data.root import open_text
from memread.errors import MemreadError


def read_lines(path: Path) -> Iterator[tuple[int, str]]:
    """Yield ``(line_number, line)``; undecodable bytes or a broken gzip stream -> MemreadError."""
    lineno = 0
    try:
        with open_text(path) as f:
            for lineno, line in enumerate(f, 1):
                if "\x00" in line:
                    raise MemreadError(f"{path}:{lineno}: NUL byte in a text file (is this a binary file?)")
                yield lineno, line.rstrip("\n").rstrip("\r")
    except UnicodeDecodeError as e:
        raise MemreadError(f"{path}:{lineno + 1}: not UTF-8 text ({e.reason} at byte {e.start} of that read)") from None
    except (gzip.BadGzipFile, EOFError, zlib.error) as e:
        raise MemreadError(f"{path}: not a readable gzip file ({e})") from None
    except FileNotFoundError:
        raise MemreadError(f"{path}: file not found") from None
