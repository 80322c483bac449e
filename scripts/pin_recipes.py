"""Two training steps of every shipped config: the losses a refactor must not change.

    python scripts/pin_recipes.py [CONFIG...]   # prints {config: [loss1, loss2]} as JSON
    python scripts/pin_recipes.py --write        # rewrites tests/fixtures/recipe_pins.json

Each config is built as ``memread train`` builds it (data, vocabulary, seeded model, criterion, optimizer) and
takes two optimizer steps of the loop's own ``Trainer.train_step`` on its first two training batches
(:func:`memread.experiment.first_losses`; torchtune's recipe tests). Run under ``OMP_NUM_THREADS=1``.
A config whose data is not in the data root gets no pin (null).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PINS = REPO / "tests" / "fixtures" / "recipe_pins.json"


def two_step_losses(config: Path, data_root: Path, pipelines: dict) -> list[float]:
    """``pipelines``: a cache of built data pipelines by their ``[data]`` section (configs that differ only
    in the reader, head, criterion or [train] share their data)."""
    from memread.config import load_experiment
    from memread.data.pipelines import DATASETS
    from memread.experiment import first_losses

    cfg = load_experiment(config, ["train.progress=false"])
    key = json.dumps(cfg.to_dict()["data"], sort_keys=True)
    if key not in pipelines:
        pipelines[key] = DATASETS[cfg.data.name].build(cfg.data, data_root, None)
    return first_losses(cfg, data_root, 2, pipelines[key])


def main(argv: list[str]) -> None:
    import torch

    from memread.data.root import data_root
    from memread.errors import MemreadError

    torch.set_num_threads(1)
    write = "--write" in argv
    configs = [Path(a) for a in argv if a != "--write"] or sorted((REPO / "configs").rglob("*.toml"))
    pins, pipelines = {}, {}
    for config in configs:
        t0 = time.perf_counter()
        key = str(config.resolve().relative_to(REPO))
        try:
            pins[key] = two_step_losses(config, data_root(None), pipelines)
        except MemreadError as e:  # data that is not in the data root: no pin (the test says so)
            if "not found" not in str(e):
                raise
            pins[key] = None
            print(f"{key}: no pin, {e}", file=sys.stderr)
            continue
        print(f"{key}: {pins[key]} ({time.perf_counter() - t0:.1f} s)", file=sys.stderr, flush=True)
    if write:
        PINS.write_text(json.dumps(pins, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    else:
        print(json.dumps(pins, indent=1, sort_keys=True))


if __name__ == "__main__":
    main(sys.argv[1:])
