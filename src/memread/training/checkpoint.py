"""Checkpoints: written atomically, loaded with ``torch.load(weights_only=True)`` (no code unpickled).

A checkpoint holds the model and optimizer state, the loop's counters, the RNG state, the recurrent
state carried between BPTT segments, and the experiment config and vocabulary fingerprint it was
trained with; a checkpoint whose config or vocabulary does not match the model being built is refused.
"""

from __future__ import annotations

import json
import os
import pickle
import tempfile
import zipfile
from pathlib import Path
from typing import Any

import torch

from memread.errors import MemreadError

FORMAT = "memread-checkpoint-v1"
# sections of the config that decide the model's shape and meaning; [train] may change on resume
MODEL_SECTIONS = ("data", "reader", "head", "criterion")


def save_checkpoint(payload: dict[str, Any], path: Path) -> None:
    """Write ``payload`` to ``path`` atomically: a temp file in the same folder, fsync, rename."""
    path = Path(path)
    payload = {"format": FORMAT, **payload}
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            torch.save(payload, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def load_checkpoint(path: Path) -> dict[str, Any]:
    path = Path(path)
    if not path.is_file():
        raise MemreadError(f"{path}: checkpoint not found")
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except (pickle.UnpicklingError, RuntimeError, zipfile.BadZipFile, EOFError, ValueError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise MemreadError(f"{path}: not a loadable memread checkpoint ({first[:160]})") from None
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise MemreadError(f"{path}: not a memread checkpoint (format {FORMAT} expected)")
    return payload


def _flatten(d: dict, prefix: str = "") -> dict[str, Any]:
    out = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(_flatten(v, key + "."))
        else:
            out[key] = v
    return out


def check_compatible(payload: dict, config: dict, vocab_fingerprint: str, path: Path) -> None:
    """Refuse a checkpoint trained with another task/reader config or another vocabulary."""
    from memread.config import upgrade

    saved = upgrade(json.loads(payload["config"]), str(path))  # a checkpoint of the earlier [task] form
    a = _flatten({k: saved.get(k, {}) for k in MODEL_SECTIONS})
    b = _flatten({k: config.get(k, {}) for k in MODEL_SECTIONS})
    # a key the checkpoint does not know was added to memread after it was written: its default
    # (which keeps the old behaviour) is what the run's own config.json gives it now
    diffs = [k for k in sorted(set(a) | set(b)) if k in a and json.dumps(a.get(k)) != json.dumps(b.get(k))]
    if diffs:
        k = diffs[0]
        more = f" (and {len(diffs) - 1} more)" if len(diffs) > 1 else ""
        raise MemreadError(
            f"{path}: checkpoint does not match the config: {k} = {a.get(k)!r} in the checkpoint, "
            f"{b.get(k)!r} now{more}"
        )
    if payload.get("vocab") != vocab_fingerprint:
        raise MemreadError(f"{path}: checkpoint was trained with a different vocabulary (fingerprints differ)")


def load_model_state(model: torch.nn.Module, payload: dict, path: Path) -> None:
    try:
        model.load_state_dict(payload["model"])
    except RuntimeError as e:
        first = str(e).strip().splitlines()
        raise MemreadError(f"{path}: checkpoint weights do not fit the model ({' '.join(first[:2])[:200]})") from None
