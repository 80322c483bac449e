"""Every shipped config's first two training losses, pinned (torchtune's recipe tests): a change to a
reader, head, criterion, pipeline or the loop that moves a number fails here.

The pins in fixtures/recipe_pins.json were taken by ``scripts/pin_recipes.py --write`` with the code before
the data/head/criterion split (commit 66000a0 + the loop's ``train_step``), the cloze and bAbI ones taken
again when their configs took the papers' pointer-sum objective (issue 23); a config whose data is not in
the data root has none (null) and is skipped, saying so. Configs that share a ``[data]`` section share one
built pipeline, so each corpus (and its word vectors) is read once.

Each config runs as shipped (``train.device = "auto"``) and with ``train.device = "cpu"`` set explicitly
(issue 20). The pins are the CPU's numbers: where the default device is a GPU, dropout draws from the GPU's
own generator, so the shipped config is skipped there (tests/test_cuda.py trains on the GPU) and the
explicit ``cpu`` run must still give the pins. Where the default resolves to the CPU the two are one
computation (the same config on the same device): its losses are taken once and checked for both.
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
from memread.training.distributed import resolve_device

PINS = json.loads((Path(__file__).parent / "fixtures" / "recipe_pins.json").read_text())
CONFIGS = sorted(str(p.relative_to(REPO)) for p in (REPO / "configs").rglob("*.toml"))
_pipelines: dict[str, object] = {}
_losses: dict[str, list[float]] = {}  # by the config with its resolved device: one computation, two checks


def test_every_shipped_config_is_pinned():
    assert sorted(PINS) == CONFIGS


@pytest.mark.realdata
@pytest.mark.slow
@pytest.mark.parametrize("device", ["cpu", None], ids=["cpu", "shipped"])
@pytest.mark.parametrize("config", CONFIGS)
def test_first_two_losses_are_the_pinned_ones(config, device):
    root = real_data_root()
    if root is None:
        pytest.skip("real data missing: set MEMREAD_DATA to the benchmark data root")
    if PINS.get(config) is None:
        pytest.skip(f"{config}: no pin (its data is not in the benchmark data root)")
    cfg = load_experiment(REPO / config, ["train.progress=false"] + ([f'train.device="{device}"'] if device else []))
    assert cfg.train.device == (device or "auto")
    where = resolve_device(cfg.train.device)
    if where.type != "cpu":
        pytest.skip(f"{config}: train.device = {cfg.train.device!r} is {where} here, and the pins are the CPU's "
                    f"numbers (tests/test_cuda.py trains on the GPU)")
    run = cfg.to_dict()
    run["train"]["device"] = str(where)
    run_key = json.dumps(run, sort_keys=True)
    if run_key not in _losses:
        key = json.dumps(cfg.to_dict()["data"], sort_keys=True)
        if key not in _pipelines:
            _pipelines[key] = DATASETS[cfg.data.name].build(cfg.data, root, None)
        _losses[run_key] = first_losses(cfg, root, 2, _pipelines[key])
    torch.testing.assert_close(_losses[run_key], PINS[config], rtol=2e-5, atol=0.0, msg=lambda m: f"{config}: {m}")
