"""Append measured numbers to results/results.jsonl (one JSON line per number).

    python scripts/record_result.py --experiment ptb-lstm --dataset ptb --split test \
        --metric ppl --value 110.2 --paper-value 115 --command "memread eval runs/ptb-lstm" --wall-s 5400

The commit defaults to the current HEAD. Only numbers from runs actually made go here.
"""

from __future__ import annotations

import argparse
import json
import subprocess
from pathlib import Path

KEYS = ("experiment", "dataset", "split", "metric", "value", "paper_value", "commit", "command", "wall_s")


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--experiment", required=True)
    p.add_argument("--dataset", required=True)
    p.add_argument("--split", required=True)
    p.add_argument("--metric", required=True)
    p.add_argument("--value", type=float, required=True)
    p.add_argument("--paper-value", type=float, default=None)
    p.add_argument("--commit", default=None)
    p.add_argument("--command", required=True)
    p.add_argument("--wall-s", type=float, required=True)
    a = p.parse_args()
    commit = a.commit or subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    record = dict(zip(KEYS, (a.experiment, a.dataset, a.split, a.metric, a.value, a.paper_value, commit, a.command, a.wall_s)))
    path = Path(__file__).resolve().parent.parent / "results" / "results.jsonl"
    path.parent.mkdir(exist_ok=True)
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(record) + "\n")
    print(json.dumps(record))


if __name__ == "__main__":
    main()
