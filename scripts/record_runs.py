"""Record finished runs: for each run directory, its final.json metrics (best checkpoint, selected on
valid) become lines of results/results.jsonl, and a markdown table row is printed for the note.

    python scripts/record_runs.py --experiment-prefix sst --metric accuracy \
        --run runs/sst-nse-fine 52.8 "memread train configs/sst/nse-fine.toml ..." ...

Each ``--run`` takes the run directory, the paper's value (or "-") and the exact command. The wall
time is taken from the run's metrics.jsonl (first to last record), the commit from ``--commit``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

RESULTS = Path(__file__).resolve().parent.parent / "results" / "results.jsonl"


def wall_seconds(run: Path) -> float:
    """Training wall time: from the run directory's creation (config.json) to final.json."""
    return round((run / "final.json").stat().st_mtime - (run / "config.json").stat().st_mtime, 1)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--experiment-prefix", required=True)
    p.add_argument("--dataset", required=True)
    p.add_argument("--metric", action="append", required=True, help="metric name(s) in final.json")
    p.add_argument("--commit", required=True)
    p.add_argument("--run", nargs=3, action="append", metavar=("DIR", "PAPER", "COMMAND"), required=True)
    p.add_argument("--scale", type=float, default=1.0, help="multiply values (100 for accuracy in percent)")
    a = p.parse_args()
    lines = []
    for run_dir, paper, command in a.run:
        run = Path(run_dir)
        final = json.loads((run / "final.json").read_text())
        wall = wall_seconds(run)
        for metric in a.metric:
            for split in ("valid", "test"):
                value = final[split][metric] * a.scale
                record = {"experiment": f"{a.experiment_prefix}-{run.name}", "dataset": a.dataset, "split": split,
                          "metric": metric, "value": round(value, 4),
                          "paper_value": None if paper == "-" or split != "test" else float(paper.split("/")[a.metric.index(metric)]),
                          "commit": a.commit, "command": command, "wall_s": wall}
                lines.append(json.dumps(record))
        row = " | ".join(f"{final['valid'][m] * a.scale:.4g} / {final['test'][m] * a.scale:.4g}" for m in a.metric)
        print(f"| {run.name} | {row} | {paper} | {wall / 60:.1f} min |")
    with open(RESULTS, "a", encoding="utf-8") as f:
        f.write("".join(l + "\n" for l in lines))


if __name__ == "__main__":
    main()
