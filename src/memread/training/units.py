"""A run's unit statistics on a split, kept in its folder beside ``final.json``: ``units-{split}.npz``.

:func:`memread.training.loop.evaluate` can hand back, batch by batch, the criterion's statistics of each
**unit** (an example, a WikiQA question, one row of a language-model segment): what ``memread compare``'s
paired tests resample. ``final_evaluation`` keeps those of the best checkpoint, so a run folder can be
compared without its checkpoints: a run trained on a lent GPU comes back as its metrics, config, final.json
and these few kilobytes, its 25 MiB checkpoints staying behind, and a CPU session still pairs it with a run
it finishes itself.

A record says which checkpoint it measured (``checkpoint``: best or last, and the SHA-256 of that file), at
which batch size and precision (units are the batches' rows: a different batch size makes different units),
and the loop state of the run's ``checkpoint_last.pt`` when it was written (how the training ended, what it
cost). :func:`read_units` gives it back only while it still describes the run: the checkpoint it measured is
the one in the folder, or is no longer there. Written atomically and deflated (a bAbI record's 9,000 x 21
statistics, mostly 0 and 1: 58 KB instead of 1.5 MB); read with ``allow_pickle=False``.
"""

from __future__ import annotations

import hashlib
import io
import json
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from memread.errors import MemreadError
from memread.training.checkpoint import loop_state, write_bytes_atomically

FORMAT = "memread-units-v1"
LOOP_KEYS = ("epoch", "global_step", "finished", "stopped", "tokens_trained", "seconds_trained", "seconds_by_device")


def unit_matrix(batches: list[dict[str, np.ndarray] | None],
                criterion: str = "the criterion") -> tuple[tuple[str, ...], np.ndarray]:
    """Per-batch ``{key: (U_b,)}`` statistics as ``(keys, values (U, K))``, in batch order (keys that only some
    batches have, such as bAbI's per-task counts, are 0 in the others); ``criterion`` names it in the error for a
    batch it did not split (None)."""
    if any(b is None for b in batches):
        raise MemreadError(f"{criterion} does not split its statistics by unit on every batch, so no paired test is "
                           f"possible")
    keys = tuple(sorted({k for b in batches for k in b}))
    if not keys:
        raise MemreadError("this criterion reports no unit statistics: no paired test is possible")
    cols = []
    for b in batches:
        n = len(next(iter(b.values())))
        cols.append(np.stack([np.asarray(b.get(k, np.zeros(n)), dtype=np.float64) for k in keys], axis=1))
    return keys, np.concatenate(cols, axis=0)


def record_path(run_dir: Path, split: str) -> Path:
    return Path(run_dir) / f"units-{split}.npz"


def in_place_of(run_dir: Path, split: str, checkpoint: str) -> bool:
    """Whether the folder's record of ``split`` stands in for ``checkpoint_{checkpoint}.pt``, which is not there
    (it stayed on the machine that trained the run)."""
    run_dir = Path(run_dir)
    return record_path(run_dir, split).is_file() and not (run_dir / f"checkpoint_{checkpoint}.pt").is_file()


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def save_units(run_dir: Path, split: str, batches: list[dict[str, np.ndarray]], checkpoint: str, batch_size: int,
               precision: str) -> Path:
    """Record the unit statistics of ``checkpoint_{checkpoint}.pt`` on ``split`` (``batches``: what
    ``evaluate(..., units=batches)`` collected)."""
    run_dir = Path(run_dir)
    keys, values = unit_matrix(batches)
    last = run_dir / "checkpoint_last.pt"
    loop = loop_state(run_dir) if last.is_file() else {}
    meta = {"format": FORMAT, "split": split, "checkpoint": checkpoint,
            "sha256": file_sha256(run_dir / f"checkpoint_{checkpoint}.pt"), "batch_size": int(batch_size),
            "precision": str(precision), "loop": {k: loop.get(k) for k in LOOP_KEYS if k in loop}}
    path = record_path(run_dir, split)
    _write(path, meta, keys, values)
    return path


def _write(path: Path, meta: dict[str, Any], keys: tuple[str, ...], values: np.ndarray) -> None:
    buf = io.BytesIO()
    np.savez_compressed(buf, keys=np.array(keys, dtype=np.str_), values=values, meta=np.array(json.dumps(meta)))
    write_bytes_atomically(path, buf.getvalue())


def copy_record(src: Path, dest: Path) -> None:
    """Copy the unit record ``src`` to ``dest`` deflated, whatever wrote it (records from before memread deflated
    them are ~25 times larger); a broken record is named, not copied."""
    _write(dest, *load_record(src))


def load_record(path: Path) -> tuple[dict[str, Any], tuple[str, ...], np.ndarray]:
    try:
        with np.load(path, allow_pickle=False) as z:
            meta = json.loads(str(z["meta"]))
            keys, values = tuple(str(k) for k in z["keys"]), np.asarray(z["values"], dtype=np.float64)
    except (OSError, ValueError, KeyError, zipfile.BadZipFile, json.JSONDecodeError) as e:
        why = str(e).splitlines()[0][:120] if str(e) else type(e).__name__
        raise MemreadError(f"{path}: not a readable unit record ({why}); remove it and the comparison evaluates the "
                           f"checkpoint again") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise MemreadError(f"{path}: not a memread unit record (format {FORMAT} expected)")
    if values.ndim != 2 or values.shape[1] != len(keys):
        raise MemreadError(f"{path}: its values ({values.shape}) do not fit its {len(keys)} statistics")
    return meta, keys, values


def read_units(run_dir: Path, split: str, checkpoint: str, batch_size: int | None,
               precision: str) -> tuple[tuple[str, ...], np.ndarray, dict[str, Any]] | None:
    """The recorded ``(keys, values, meta)`` of ``checkpoint`` on ``split`` at ``batch_size`` (None: whatever
    the record holds, the run's default) and ``precision``; None where there is no record, or it measured
    something else (another checkpoint, batch size or precision, or a checkpoint file since replaced: a run
    resumed and trained further)."""
    path = record_path(run_dir, split)
    if not path.is_file():
        return None
    meta, keys, values = load_record(path)
    if (meta.get("checkpoint") != checkpoint or meta.get("precision") != str(precision)
            or (batch_size is not None and meta.get("batch_size") != batch_size)):
        return None
    ckpt = Path(run_dir) / f"checkpoint_{checkpoint}.pt"
    if ckpt.is_file() and file_sha256(ckpt) != meta.get("sha256"):
        return None
    return keys, values, meta


def recorded_loop(run_dir: Path) -> dict[str, Any] | None:
    """The loop state a unit record kept (for a folder whose ``checkpoint_last.pt`` stayed on another
    machine); None without a record."""
    for split in ("test", "valid"):
        path = record_path(run_dir, split)
        if path.is_file():
            return load_record(path)[0].get("loop") or None
    return None


def run_loop(run_dir: Path) -> dict[str, Any] | None:
    """A run folder's loop state: its ``checkpoint_last.pt``'s, else, where its checkpoints stayed on the machine
    that trained it, the one its unit record kept (:func:`recorded_loop`); None without either."""
    if (Path(run_dir) / "checkpoint_last.pt").is_file():
        return loop_state(run_dir)
    return recorded_loop(Path(run_dir))
