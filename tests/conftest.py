"""Shared fixtures. Real-data tests read ``$MEMREAD_DATA`` (CI sets it to ../shared/data) and skip,
saying what is missing, when it is not there. The suite runs in parallel processes (pytest-xdist, ``-n auto``):
a test writes only under its ``tmp_path`` (torch's extension cache aside: torch locks it while it builds) and
sets environment variables with ``monkeypatch``."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

FIXTURES = Path(__file__).parent / "fixtures"
REPO = Path(__file__).parent.parent
# the tiny stories language model that tests train (the built-in stories: no data), section by section
TINY_LM = {
    "data": {"name": "stories-text", "stories": 300, "bptt": 12},
    "head": {"name": "lm", "emb": 24},
    "reader": {"name": "lstm", "hidden": 32},
    "train": {"optimizer": "sgd", "lr": 0.5, "batch_size": 8, "epochs": 1, "log_every": 5, "progress": False},
}


class Fresh(dict):
    """A section given whole: ``tiny_config(..., train=Fresh(max_steps=2))`` keeps none of the tiny [train]'s keys."""


def tiny_sections(**sections: dict | None) -> dict[str, dict]:
    """The tiny stories LM's sections with ``sections`` laid over them. A dict updates its section's keys (a key
    set to None is dropped); a section with another ``name`` (another dataset, head, reader), a :class:`Fresh`
    one, or one the tiny LM has not (``criterion``) is taken as given; a section set to None is left out."""
    out = {name: dict(keys) for name, keys in TINY_LM.items()}
    for name, keys in sections.items():
        if keys is None:
            out.pop(name, None)
            continue
        base = out.get(name, {})
        fresh = isinstance(keys, Fresh) or keys.get("name", base.get("name")) != base.get("name")
        merged = dict(keys) if fresh else {**base, **keys}
        out[name] = {k: str(v) if isinstance(v, Path) else v for k, v in merged.items() if v is not None}
    return out


def tiny_toml(**sections: dict | None) -> str:
    """:func:`tiny_sections` as the text of an experiment file (values written by memread's own TOML writer)."""
    import re
    import tomllib

    from memread.schema import toml_value

    sections_ = tiny_sections(**sections)
    lines = []
    for name, keys in sections_.items():
        lines.append(f"[{name}]")
        lines += [f"{k if re.fullmatch(r'[A-Za-z0-9_-]+', k) else toml_value(k)} = {toml_value(v)}"
                  for k, v in keys.items()]
        lines.append("")
    text = "\n".join(lines)
    assert tomllib.loads(text) == _as_toml_reads(sections_), text  # the writer wrote what it was given
    return text


def _as_toml_reads(value):
    if isinstance(value, dict):
        return {k: _as_toml_reads(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_as_toml_reads(v) for v in value]
    return value


def tiny_config(folder: Path, file: str = "tiny.toml", **sections: dict | None) -> Path:
    """Write :func:`tiny_toml` ``(**sections)`` to ``folder / file``; its path. E.g. the tiny LM with an LSTMN
    and 5 steps: ``tiny_config(tmp_path, reader={"name": "lstmn", "hidden": 8}, train={"max_steps": 5})``."""
    path = Path(folder) / file
    path.write_text(tiny_toml(**sections), encoding="utf-8")
    return path


TINY = tiny_toml()  # the tiny LM's experiment file as it is (the fault, refusal and reproduction tests train it)


def real_data_root() -> Path | None:
    env = os.environ.get("MEMREAD_DATA")
    if env and Path(env).is_dir():
        return Path(env)
    shared = REPO.parent / "shared" / "data"
    return shared if shared.is_dir() else None


@pytest.fixture(autouse=True)
def one_thread():
    """Tests run small ops: one intra-op thread each, so a second job on the two cores (or pytest-xdist)
    cannot make OpenMP threads spin against each other (that made some tests 100x slower)."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.fixture
def real_data():
    """The real benchmark data root; the test is skipped with a message when it is missing."""

    def need(*relative: str) -> Path:
        root = real_data_root()
        if root is None:
            pytest.skip("real data missing: set MEMREAD_DATA to the benchmark data root (../shared/data in CI)")
        for rel in relative:
            if not (root / rel).exists():
                pytest.skip(f"real data missing: {root / rel}")
        return root

    return need


@pytest.fixture
def fixtures() -> Path:
    return FIXTURES


def subprocess_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update({"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"})
    env.update(extra)
    return env


def backend_fixture(kernels, what: str):
    """A fixture that runs a test on a reader's compiled loops (skipped where ``kernels()`` cannot build
    them) and on its hand-written Function loop: its value is the reader's ``backend`` option,
    ``"compiled"`` or ``"function"``, for the test to build its readers with (or set ``reader.backend``)."""

    @pytest.fixture(params=["compiled", "function"])
    def backend(request):
        if request.param == "compiled" and kernels() is None:
            pytest.skip(f"the compiled {what} are not available here (no compiler or ninja)")
        return request.param

    return backend

