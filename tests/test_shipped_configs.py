"""Every experiment file under configs/ is read against the typed configs and its reader is built:
a key renamed in a dataclass, a typo in a file, or a size a reader refuses (a kvp hidden size that is
not a multiple of 3) fails here, not hours into somebody's run."""

import tomllib
from pathlib import Path

import pytest

from memread.config import load_experiment
from memread.readers import build_reader
from memread.tasks import TASKS

REPO = Path(__file__).parent.parent
SHIPPED = sorted((REPO / "configs").rglob("*.toml"))


def test_configs_are_shipped():
    assert len(SHIPPED) >= 60
    assert {p.parent.name for p in SHIPPED} >= {"ptb", "sst", "snli", "wikiqa", "iwslt14", "imdb", "cloze", "babi"}


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_shipped_config_loads_and_builds(path):
    cfg = load_experiment(path)
    assert cfg.task in TASKS and "task" not in tomllib.loads(path.read_text())  # the data/head/criterion form
    reader = build_reader(cfg.reader, cfg.head.emb)
    assert sum(p.numel() for p in reader.parameters()) > 0


def test_ptb_lstmn_rows_share_the_recipe():
    """The two LSTMN rows of Table 1 differ from each other only in depth (and the dropout between
    layers, which a single layer does not have): same tape span, task and training schedule."""
    one, three = (load_experiment(REPO / "configs" / "ptb" / f) for f in ("lstmn.toml", "lstmn-3layer.toml"))
    assert (one.reader.layers, three.reader.layers) == (1, 3)
    assert one.reader.span == three.reader.span > 1  # span 1 would leave the attention nothing to choose
    assert one.task == three.task and one.train == three.train
