"""The reproduction's tests' fixtures (pytest runs them from the repository root: ``python -m pytest -q -n auto``).
Like the library's tests (tests/conftest.py), real-data tests read ``$MEMREAD_DATA`` and skip, saying what is
missing, when it is not there, and every test runs torch on one thread."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from reproduction import REPO

# the tiny stories LM a row of the tests trains (the library's fault tests train the same)
TINY = """
[data]
name = "stories-text"
stories = 300
bptt = 12
[head]
name = "lm"
emb = 24
[reader]
name = "lstm"
hidden = 32
[train]
optimizer = "sgd"
lr = 0.5
batch_size = 8
epochs = 1
log_every = 5
progress = false
"""


def real_data_root() -> Path | None:
    env = os.environ.get("MEMREAD_DATA")
    if env and Path(env).is_dir():
        return Path(env)
    shared = REPO.parent / "shared" / "data"
    return shared if shared.is_dir() else None


@pytest.fixture(autouse=True)
def one_thread():
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


def subprocess_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update({"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"})
    env.update(extra)
    return env
