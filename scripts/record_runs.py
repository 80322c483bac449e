"""Record finished runs in results/: one line per (run, split, metric) in results/results.jsonl, and a
markdown table (printed) for the experiment's note.

    python scripts/record_runs.py SPEC.json [--write]

SPEC.json is a list of runs::

    [{"run": "/path/to/run_dir", "experiment": "sst-nse-fine", "dataset": "sst", "metrics": ["accuracy"],
      "paper": {"accuracy": 52.8}, "scale": 100, "commit": "abc1234",
      "command": "memread train configs/sst/nse-fine.toml --run-dir ... --set ...",
      "budget": "6 of 40 epochs (optional: what memread reproduce shows beside the number)"}, ...]

Values come from the run's ``final.json`` (the checkpoint selected on valid, evaluated on valid and
test), times ``scale`` (100: accuracy in percent); ``wall_s`` is the time from the run directory's
``config.json`` to its ``final.json``; extra ``{"file": ..., "metric": ..., "key": ...}`` entries in
``"extra"`` read a number from another JSON file of the run (e.g. ``bleu_test.json``). Without
``--write`` nothing is appended (a dry run that prints the table).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

RESULTS = Path(__file__).resolve().parent.parent / "results" / "results.jsonl"


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("spec")
    p.add_argument("--write", action="store_true")
    a = p.parse_args()
    lines, rows = [], []
    for r in json.loads(Path(a.spec).read_text()):
        run = Path(r["run"])
        final = json.loads((run / "final.json").read_text())
        wall = r.get("wall_s") or round((run / "final.json").stat().st_mtime - (run / "config.json").stat().st_mtime, 1)
        scale = r.get("scale", 1)
        cells = []
        for metric in r["metrics"]:
            for split in ("valid", "test"):
                value = round(final[split][metric] * scale, 4)
                paper = r.get("paper", {}).get(metric) if split == "test" else None
                lines.append({"experiment": r["experiment"], "dataset": r["dataset"], "split": split, "metric": metric,
                              "value": value, "paper_value": paper, "commit": r["commit"], "command": r["command"],
                              "wall_s": wall, **({"budget": r["budget"]} if "budget" in r else {})})
            cells.append(f"{final['valid'][metric] * scale:.4g} / {final['test'][metric] * scale:.4g}")
        for extra in r.get("extra", []):
            value = json.loads((run / extra["file"]).read_text())[extra["key"]]
            lines.append({"experiment": r["experiment"], "dataset": r["dataset"], "split": extra.get("split", "test"),
                          "metric": extra["metric"], "value": value, "paper_value": extra.get("paper"),
                          "commit": r["commit"], "command": extra.get("command", r["command"]), "wall_s": wall})
            cells.append(f"{value:.2f}")
        paper = ", ".join(f"{v}" for v in r.get("paper", {}).values()) or "-"
        rows.append(f"| {r['experiment']} | {' | '.join(cells)} | {paper} | {wall / 60:.1f} min |")
    print("\n".join(rows))
    if a.write:
        with open(RESULTS, "a", encoding="utf-8") as f:
            f.write("".join(json.dumps(l) + "\n" for l in lines))


if __name__ == "__main__":
    main()
