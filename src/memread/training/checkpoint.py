"""Checkpoints: written atomically, loaded with ``torch.load(weights_only=True)`` (no code unpickled).

A checkpoint holds the model and optimizer state, the loop's counters, the RNG state, the recurrent
state carried between BPTT segments, and the experiment config and vocabulary fingerprint it was
trained with; a checkpoint whose config or vocabulary does not match the model being built is refused.
"""

from __future__ import annotations

import json
import os
import pickle
import re
import tempfile
import zipfile
from pathlib import Path
from typing import Any

import torch

from memread.errors import MemreadError, os_error_line

FORMAT = "memread-checkpoint-v1"
# sections of the config that decide the model's shape and meaning; [train] may change on resume
MODEL_SECTIONS = ("data", "reader", "head", "criterion")


def _umask() -> int:
    """The process's umask, read without setting it where the system tells it (Linux: /proc/self/status), as setting
    it to read it back would race with other threads' file creation."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except OSError:
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def mode_for(path: Path) -> int:
    """The permissions a file written at ``path`` should have: the replaced file's, or for a new file the ones
    ``open`` would give (0666 less the umask), not mkstemp's 0600, so that a run folder or archive shared with a
    group stays readable by it."""
    try:
        return Path(path).stat().st_mode & 0o777  # its permissions; no set-id or sticky bit on a new file
    except FileNotFoundError:
        return 0o666 & ~_umask()


def temp_beside(path: Path) -> tuple[int, str]:
    """A new temp file beside ``path`` (``<name>.XXXXXXXX.tmp``), for an atomic replace of it, with
    :func:`mode_for`'s permissions: its descriptor and name."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    try:
        os.chmod(tmp, mode_for(path))  # by name: os.fchmod is Unix-only before Python 3.13
    except BaseException:
        os.close(fd)
        os.unlink(tmp)
        raise
    return fd, tmp


def _write_atomically(path: Path, write) -> None:
    """``write(f)`` into a temp file beside ``path``, fsync, rename: ``path`` is the old file or the whole new
    one, never half of either. A failure (disk full, read-only folder) is one MemreadError naming ``path``;
    the old file is untouched and no temp file is left."""
    path = Path(path)
    tmp = None
    try:
        fd, tmp = temp_beside(path)
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except (OSError, RuntimeError) as e:  # torch.save reports a full disk as RuntimeError ("unexpected pos")
        if tmp and os.path.exists(tmp):
            os.unlink(tmp)
        if isinstance(e, OSError):
            line = os_error_line(e, path)
        else:
            first = (str(e).strip().splitlines() or [type(e).__name__])[0][:160]
            line = f"{path}: could not be written ({first}){_free_space(path.parent)}"
        kept = f"; the previous {path.name} is unchanged" if path.exists() else ""
        raise MemreadError(line + kept) from None
    except BaseException:
        if tmp and os.path.exists(tmp):
            os.unlink(tmp)
        raise


# the temp files of a run's writer: ``_write_atomically``'s "<file>.<8 random chars>.tmp" (tempfile.mkstemp) beside
# a file only the lock's holder writes, and the vocabulary's "vocab.json.tmp"; a writer killed while saving leaves
# one behind. Not units-*.npz: ``memread compare`` may write one without the lock (a few KB when it is killed).
_RUN_TEMP = re.compile(r"^(checkpoint_\w+\.pt|config\.json|final\.json)\.[a-z0-9_]{8}\.tmp$|^vocab\.json\.tmp$")


def clear_leftover_temps(run_dir: Path) -> list[str]:
    """Remove the temp files a killed writer of ``run_dir`` left half-written; call it holding the run's writer
    lock (no live writer of the run is then saving). Other files, ``*.tmp`` of the user's among them, stay.
    Returns one "NAME (SIZE)" per file removed."""
    removed = []
    for path in sorted(Path(run_dir).iterdir()):
        if _RUN_TEMP.match(path.name) and path.is_file():
            size = path.stat().st_size
            path.unlink(missing_ok=True)
            removed.append(f"{path.name} ({size / 2**20:.1f} MiB)")
    return removed


# a run directory's own files: what training, the final evaluation and `memread compare` keep there, the data root
# it was trained with (data_root.json), its loggers' state and MLflow store, and the lock's
RUN_FILES = re.compile(r"^(config\.json|vocab\.json|metrics\.jsonl|final\.json|checkpoint_[^/]*\.pt|units-[^/]*\.npz"
                       r"|data_root\.json|loggers\.json|mlflow\.db.*|\.lock.*)$")


def _holds_a_run(folder: Path) -> bool:
    return any((folder / name).is_file() for name in ("config.json", "metrics.jsonl", "checkpoint_last.pt",
                                                       "checkpoint_best.pt"))


def refuse_run_file(path: Path, what: str, instead: str) -> None:
    """Refuse ``path`` as where a verb writes ``what`` (an archive, a PNG) when it is one of a run's own files
    (:data:`RUN_FILES`, in a run folder or already there: ``memread export RUN RUN/checkpoint_best.pt`` replaced the
    best weights with an archive); a link is judged by what it points to. ``instead``: a name to suggest."""
    path = Path(path)
    for p in dict.fromkeys((path, path.resolve())):
        if RUN_FILES.match(p.name) and (p.exists() or _holds_a_run(p.parent)):
            raise MemreadError(f"{path}: that is a run's own file ({p.name} in {p.parent}); writing {what} there "
                               f"would replace it. Nothing was written: give another path, e.g. {p.parent / instead}")


def _free_space(folder: Path) -> str:
    try:
        st = os.statvfs(folder)
    except (OSError, AttributeError):
        return ""
    free = st.f_bavail * st.f_frsize
    return f"; is the disk full? {free / 2**20:.1f} MiB free in {folder}" if free < 2**30 else ""


def save_checkpoint(payload: dict[str, Any], path: Path) -> None:
    """Write ``payload`` to ``path`` atomically: a temp file in the same folder, fsync, rename."""
    payload = {"format": FORMAT, **payload}
    _write_atomically(Path(path), lambda f: torch.save(payload, f))


def write_text_atomically(path: Path, text: str) -> None:
    """A run directory's text file (``config.json``, ``final.json``), written as checkpoints are."""
    _write_atomically(Path(path), lambda f: f.write(text.encode("utf-8")))


def write_bytes_atomically(path: Path, data: bytes) -> None:
    """A run directory's binary file (a unit record), written as checkpoints are."""
    _write_atomically(Path(path), lambda f: f.write(data))


def load_checkpoint(path: Path) -> dict[str, Any]:
    path = Path(path)
    if not path.is_file():
        raise MemreadError(f"{path}: checkpoint not found")
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except (pickle.UnpicklingError, RuntimeError, zipfile.BadZipFile, EOFError, ValueError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise MemreadError(f"{path}: not a loadable memread checkpoint ({first[:160]})") from None
    except OSError as e:
        raise MemreadError(os_error_line(e, path)) from None
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise MemreadError(f"{path}: not a memread checkpoint (format {FORMAT} expected)")
    for key, kind in (("config", str), ("vocab", str), ("model", dict)):
        if not isinstance(payload.get(key), kind):
            raise MemreadError(f"{path}: not a complete memread checkpoint ('{key}' is missing or not a {kind.__name__})")
    try:
        config = json.loads(payload["config"])
    except json.JSONDecodeError as e:
        raise MemreadError(f"{path}: the checkpoint's config is not valid JSON ({e.msg} at {e.lineno}:{e.colno})") from None
    if not isinstance(config, dict):
        raise MemreadError(f"{path}: the checkpoint's config is not a JSON object")
    return payload


def loop_state(run_dir: Path) -> dict[str, Any]:
    """The training loop's state saved in ``run_dir/checkpoint_last.pt`` (step, epoch, why it stopped, tokens
    trained); an empty dict for a checkpoint without one."""
    loop = load_checkpoint(Path(run_dir) / "checkpoint_last.pt").get("loop")
    return loop if isinstance(loop, dict) else {}


def _whole(x: Any) -> bool:
    return type(x) is int and x >= 0


def _number(x: Any) -> bool:
    return type(x) in (int, float)


# the loop state a resume reads (memread.training.state.build_payload writes it): each key's test and what it must be, in words
LOOP_KEYS: dict[str, tuple[Any, str]] = {
    "epoch": (_whole, "a whole number >= 0"),
    "step_in_epoch": (_whole, "a whole number >= 0"),
    "global_step": (_whole, "a whole number >= 0"),
    "finished": (lambda x: type(x) is bool, "true or false"),
    "stopped": (lambda x: x is None or isinstance(x, str), "a reason's name or none"),
    "schedule": (lambda x: isinstance(x, dict) and _whole(x.get("bad_evals"))
                 and all(x.get(k) is None or _number(x.get(k)) for k in ("best", "best_value")),
                 "a table of best, best_value and bad_evals"),
    "first_loss": (lambda x: x is None or _number(x), "a number or none"),
    "tokens_trained": (_whole, "a whole number >= 0"),
    "seconds_trained": (lambda x: x is None or _number(x), "a number or none"),
    "seconds_by_device": (lambda x: x is None or isinstance(x, dict) and all(map(_number, x.values())),
                          "a table of numbers or none"),
    "running": (lambda x: isinstance(x, dict), "a table"),
}
LOOP_REQUIRED = ("epoch", "step_in_epoch", "global_step", "finished", "schedule")


def check_loop_state(payload: dict, path: Path) -> dict:
    """The checkpoint's loop state, checked before a resume reads it: every key it needs there, each of the type the
    loop wrote (an edited ``global_step = "sixty"`` was a TypeError traceback). One line naming the key otherwise."""
    loop = payload.get("loop")
    if not isinstance(loop, dict) or not set(LOOP_REQUIRED) <= set(loop):
        raise MemreadError(f"{path}: not a resumable checkpoint (its 'loop' state is missing or incomplete)")
    for key, (ok, what) in LOOP_KEYS.items():
        if key in loop and not ok(loop[key]):
            raise MemreadError(f"{path}: not a resumable checkpoint (its loop state's {key!r} is {loop[key]!r}, not "
                               f"{what}): it was edited or damaged; put back the one memread wrote. Nothing was "
                               f"changed")
    return loop


def _flatten(d: dict, prefix: str = "") -> dict[str, Any]:
    out = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(_flatten(v, key + "."))
        else:
            out[key] = v
    return out


def check_compatible(payload: dict, config: dict, vocab_fingerprint: str, path: Path,
                     sections: tuple[str, ...] = MODEL_SECTIONS, ignore: tuple[str, ...] = ()) -> None:
    """Refuse a checkpoint trained with another config (in ``sections``; keys in ``ignore``, ``train.lr`` say,
    are not compared) or another vocabulary, naming the first key that differs."""
    from memread.config import refuse_task_form

    saved = refuse_task_form(json.loads(payload["config"]), str(path))
    a = _flatten({k: saved.get(k, {}) for k in sections})
    b = _flatten({k: config.get(k, {}) for k in sections})
    # a key the checkpoint does not know was added to memread after it was written: its default
    # (which keeps the old behaviour) is what the run's own config.json gives it now
    diffs = [k for k in sorted(set(a) | set(b))
             if k in a and k not in ignore and json.dumps(a.get(k)) != json.dumps(b.get(k))]
    if diffs:
        k = diffs[0]
        more = f" (and {len(diffs) - 1} more)" if len(diffs) > 1 else ""
        if all(d.startswith("train.") for d in diffs):  # config.json edited, or a kill as a resume took new values
            raise MemreadError(
                f"{path}: the run's config.json says {k} = {b.get(k)!r}{more}, but the checkpoint was trained with "
                f"{a.get(k)!r}; resume with --set {k}={json.dumps(a.get(k))} (or the value you want)")
        raise MemreadError(
            f"{path}: checkpoint does not match the config: {k} = {a.get(k)!r} in the checkpoint, "
            f"{b.get(k)!r} now{more}"
        )
    if payload.get("vocab") != vocab_fingerprint:
        raise MemreadError(f"{path}: checkpoint was trained with a different vocabulary (fingerprints differ)")


def check_finite(state: dict[str, Any], path: Path) -> None:
    """Refuse weights that are not finite (``memread eval`` of such a checkpoint printed ``ppl: NaN`` and exited 0),
    naming the file and the first tensor that holds nan or inf."""
    for name, t in state.items():
        if isinstance(t, torch.Tensor) and t.is_floating_point() and not bool(torch.isfinite(t).all()):
            bad = int((~torch.isfinite(t)).sum())
            raise MemreadError(f"{path}: its weights are not finite ({bad} of the {t.numel()} values of '{name}' are "
                               f"nan or inf: the run diverged before they were saved); use the run's other checkpoint "
                               f"(--checkpoint best or last), or train again with a lower train.lr")


def load_model_state(model: torch.nn.Module, payload: dict, path: Path) -> None:
    if isinstance(payload.get("model"), dict):
        check_finite(payload["model"], path)
    try:
        model.load_state_dict(payload["model"])
    except (RuntimeError, TypeError, AttributeError) as e:
        first = str(e).strip().splitlines()
        raise MemreadError(f"{path}: checkpoint weights do not fit the model ({' '.join(first[:2])[:200]})") from None
