"""The README's quickstart figure, generated from the recorded run ``results/quickstart.json``.

    python scripts/quickstart_figure.py                    # rewrite the README's figure from the record
    python scripts/quickstart_figure.py --check            # exit 1 when the README's figure differs from it
    python scripts/quickstart_figure.py --record runs/quickstart/results.json
                                                           # make a fresh run the record, then rewrite

``memread quickstart`` writes ``OUT/results.json`` (both models' valid and test accuracy, the total
time, and ``run``: command, commit, threads, CPU, torch, date); ``--record`` copies those fields into
``results/quickstart.json``. The figure is the "ours" cell of the README's results-table row for the
quickstart: memoryless baseline / memory reader test accuracy, e.g. ``14.8% / 95.5%``. Standard
library only (the README test imports it).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
RECORD = REPO / "results" / "quickstart.json"

# the README's results-table row of the quickstart; its second cell ("ours") is the figure
README_ROW = "| `memread quickstart`: memoryless baseline / memory reader, test accuracy |"
KEYS = ("baseline", "memory", "total_seconds", "run")  # what a record keeps of a run's results.json


def figure(record: dict) -> str:
    """``"14.8% / 95.5%"``: the memoryless baseline's and the memory reader's test accuracy."""
    return f"{record['baseline']['test_accuracy']:.1%} / {record['memory']['test_accuracy']:.1%}"


def _row(readme: str) -> re.Pattern:
    pattern = re.compile(r"^(" + re.escape(README_ROW) + r" )([^|]*?)( \|)", re.MULTILINE)
    if len(pattern.findall(readme)) != 1:
        raise SystemExit(f"the README has no single results-table row starting {README_ROW!r}")
    return pattern


def stated(readme: str) -> str:
    """The figure the README states now."""
    return _row(readme).search(readme).group(2).strip()


def with_figure(readme: str, record: dict) -> str:
    """``readme`` with the quickstart figure of ``record``."""
    return _row(readme).sub(lambda m: m.group(1) + figure(record) + m.group(3), readme)


def record_from_run(results: dict) -> dict:
    missing = [k for k in KEYS if k not in results]
    if missing:
        raise SystemExit(f"a quickstart results.json needs {', '.join(KEYS)}; missing {', '.join(missing)} "
                         f"(written by an older memread?)")
    return {k: results[k] for k in KEYS}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--record", type=Path, help="a quickstart's results.json to make the record first")
    p.add_argument("--check", action="store_true", help="only compare; exit 1 when the README differs")
    p.add_argument("--readme", type=Path, default=README)
    p.add_argument("--results", type=Path, default=RECORD, help="the record (default: results/quickstart.json)")
    a = p.parse_args(argv)
    if a.record:
        record = record_from_run(json.loads(a.record.read_text(encoding="utf-8")))
        a.results.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
        print(f"{a.results}: recorded {a.record}")
    record = json.loads(a.results.read_text(encoding="utf-8"))
    text = a.readme.read_text(encoding="utf-8")
    now, want = stated(text), figure(record)
    if now == want:
        print(f"{a.readme}: quickstart figure {want}, as recorded")
        return 0
    if a.check:
        print(f"{a.readme}: quickstart figure {now}, but {a.results} records {want}", file=sys.stderr)
        return 1
    a.readme.write_text(with_figure(text, record), encoding="utf-8")
    print(f"{a.readme}: quickstart figure {now} -> {want}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
