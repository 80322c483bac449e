"""Every shipped config's first two training losses, pinned (torchtune's recipe tests): a change to a
reader, head, criterion, pipeline or the loop that moves a number fails here.

The pins in fixtures/recipe_pins.json were taken by ``scripts/pin_recipes.py --write`` with the code before
the data/head/criterion split (commit 66000a0 + the loop's ``train_step``); a config whose data is not in
the data root has none (null) and is skipped, saying so. Configs that share a ``[data]`` section share one
built pipeline, so each corpus (and its word vectors) is read once.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from conftest import REPO, real_data_root
from memread.config import load_experiment
from memread.data.pipelines import DATASETS
from memread.experiment import first_losses

PINS = json.loads((Path(__file__).parent / "fixtures" / "recipe_pins.json").read_text())
CONFIGS = sorted(str(p.relative_to(REPO)) for p in (REPO / "configs").rglob("*.toml"))
_pipelines: dict[str, object] = {}


def test_every_shipped_config_is_pinned():
    assert sorted(PINS) == CONFIGS


@pytest.mark.realdata
@pytest.mark.slow
@pytest.mark.parametrize("config", CONFIGS)
def test_first_two_losses_are_the_pinned_ones(config):
    root = real_data_root()
    if root is None:
        pytest.skip("real data missing: set MEMREAD_DATA to the benchmark data root")
    if PINS.get(config) is None:
        pytest.skip(f"{config}: no pin (its data is not in the benchmark data root)")
    cfg = load_experiment(REPO / config, ["train.progress=false"])
    key = json.dumps(cfg.to_dict()["data"], sort_keys=True)
    if key not in _pipelines:
        _pipelines[key] = DATASETS[cfg.data.name].build(cfg.data, root, None)
    losses = first_losses(cfg, root, 2, _pipelines[key])
    torch.testing.assert_close(losses, PINS[config], rtol=2e-5, atol=0.0, msg=lambda m: f"{config}: {m}")
