"""Model archives: a trained run in one portable file that loads without unpickling anything.

``memread export RUN_DIR OUT`` writes ``OUT`` as one `safetensors <https://github.com/huggingface/safetensors>`_
file: the weights of the run's best (or last) checkpoint as tensors, and in the file's string metadata the
archive format, the memread version that wrote it, the typed experiment config and the vocabulary. A
safetensors file is a JSON header and raw tensor bytes, so reading it executes nothing. An archive is
refused with one line when its format is not this memread's, when its config does not validate under this
memread, or when a tensor is missing or extra for the model the config builds.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import torch

from memread.config import ExperimentConfig, experiment_from_dict, upgrade_stored
from memread.data.vocab import Vocab
from memread.errors import MemreadError, os_error_line
from memread.training.checkpoint import check_finite, mode_for, refuse_run_file, temp_beside

FORMAT = "memread-archive-v1"


def is_archive(path: Path) -> bool:
    """Whether ``path`` is a file that starts like a safetensors file (a run directory is a folder)."""
    path = Path(path)
    if not path.is_file():
        return False
    with open(path, "rb") as f:
        head = f.read(9)
    return len(head) == 9 and head[8:9] == b"{"


def export_archive(cfg: ExperimentConfig, vocab: Vocab, model: torch.nn.Module, out: Path, version: str,
                   source: str = "") -> Path:
    """Write ``model``'s weights, ``cfg`` and ``vocab`` to ``out`` atomically (a temp file, then rename)."""
    from safetensors.torch import save_model

    out = Path(out)
    refuse_run_file(out, "a model archive", "model.safetensors")
    metadata = {"format": FORMAT, "memread_version": version, "config": cfg.to_json(),
                "vocab": json.dumps(vocab.to_dict()), "vocab_fingerprint": vocab.fingerprint(), "source": source}
    tmp = None
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = temp_beside(out)
        os.close(fd)
        save_model(model.cpu(), tmp, metadata=metadata)  # shared (tied) weights are stored once
        os.chmod(tmp, mode_for(out))  # safetensors writes its file anew, 0600
        os.replace(tmp, out)
    except OSError as e:
        raise MemreadError(os_error_line(e, out)) from None
    finally:
        if tmp and os.path.exists(tmp):
            os.unlink(tmp)
    return out


def read_archive_header(path: Path) -> dict[str, str]:
    """The archive's metadata, checked: one clear line for a file that is not a memread archive of a format
    this memread reads."""
    from safetensors import SafetensorError, safe_open

    path = Path(path)
    try:
        with safe_open(str(path), framework="pt") as f:
            meta = f.metadata() or {}
    except (SafetensorError, OSError, ValueError) as e:
        raise MemreadError(f"{path}: not a memread model archive ({str(e).splitlines()[0][:160]})") from None
    fmt = meta.get("format")
    if fmt != FORMAT:
        what = f"format {fmt!r}" if fmt else "no memread format"
        raise MemreadError(f"{path}: {what}, this memread reads {FORMAT!r} archives "
                           f"(written by memread {meta.get('memread_version', '?')}); export it again with this memread")
    for key in ("config", "vocab", "memread_version"):
        if key not in meta:
            raise MemreadError(f"{path}: incomplete memread archive (no '{key}' in its metadata)")
    return meta


def archive_config(path: Path) -> tuple[ExperimentConfig, Vocab]:
    """The typed config and the vocabulary an archive holds (validated by this memread)."""
    meta = read_archive_header(path)
    try:
        raw = json.loads(meta["config"])
        vocab = Vocab.from_dict(json.loads(meta["vocab"]))
    except (json.JSONDecodeError, KeyError, TypeError, ValueError) as e:
        raise MemreadError(f"{path}: the archive's config or vocabulary is not readable ({e})") from None
    return experiment_from_dict(upgrade_stored(raw, f"{path} (config)"), f"{path} (config)"), vocab


def load_archive(path: Path, data_root: Path, device: str = "cpu") -> tuple[ExperimentConfig, Any, torch.nn.Module]:
    """Config, task and model of an archive, ready to evaluate or predict (as ``load_trained`` gives them)."""
    from safetensors.torch import load_model

    from memread.tasks import Task
    from memread.training.distributed import resolve_device

    path = Path(path)
    cfg, vocab = archive_config(path)
    task = Task(cfg, data_root, vocab=vocab)
    _check_shapes(path, task, cfg)  # the declared config against the tensors, before the model is allocated
    model = task.build_model(cfg.train.seed, device=resolve_device(device))
    try:
        load_model(model, str(path), strict=True)
    except RuntimeError as e:
        lines = [line.strip() for line in str(e).strip().splitlines() if line.strip()]
        raise MemreadError(f"{path}: its tensors do not fit the model its config builds ({' '.join(lines[:3])[:300]})") from None
    check_finite(model.state_dict(), path)
    model.to(resolve_device(device)).eval()
    return cfg, task, model


def _check_shapes(path: Path, task: Any, cfg: ExperimentConfig) -> None:
    """Refuse an archive whose metadata declares a model its tensors are not (an edited ``reader.hidden``): the
    model its config builds, on the meta device (no memory allocated), against the tensors' names and shapes as the
    file's header gives them, before the model is built for real (a declared 1e8 hidden units was an allocation
    of petabytes). Tensors the archive leaves out (tied weights are stored once) are for ``load_model`` to judge."""
    from safetensors import SafetensorError, safe_open

    meta = task.meta_model(cfg.train.seed)
    if meta is None:  # a model that cannot be built on the meta device: load_model's check alone
        return
    wanted = {name: tuple(t.shape) for name, t in meta.state_dict().items()}
    try:
        with safe_open(str(path), framework="pt") as f:
            stored = {name: tuple(f.get_slice(name).get_shape()) for name in f.keys()}
    except (SafetensorError, OSError, ValueError) as e:
        raise MemreadError(f"{path}: not a memread model archive ({str(e).splitlines()[0][:160]})") from None
    extra = sorted(set(stored) - set(wanted))
    wrong = [n for n in stored if n in wanted and stored[n] != wanted[n]]
    if not extra and not wrong:
        return
    if wrong:
        n = wrong[0]
        what = f"size mismatch for {n}: {list(stored[n])} in the file, {list(wanted[n])} in the model it declares"
    else:
        what = f"unexpected {extra[0]}: the model it declares has no such tensor"
    more = len(wrong) + len(extra) - 1
    raise MemreadError(f"{path}: its tensors do not fit the model its config builds ({what}"
                       f"{f'; {more} more' if more else ''}; {task.sizes()}): the file was edited, or its metadata "
                       f"is another model's; export the run again. Nothing was built")
