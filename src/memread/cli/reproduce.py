"""``memread reproduce``: the papers' table rows, listed with memread's numbers and verdicts, or one rerun."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from memread.cli.common import add_data_root, add_device, whole
from memread.errors import MemreadError


def add_reproduce(sub) -> None:
    p = sub.add_parser("reproduce",
                       help="the papers' table rows: list them with our numbers and verdicts, or rerun one")
    p.add_argument("target", metavar="list|ROW_ID", help="'list': every row; a row id: train its config and record it")
    p.add_argument("--markdown", action="store_true", help="with list: the markdown of results/REPRODUCTION.md")
    p.add_argument("--long", action="store_true", help="with list: every row in full (long lines), not one short line")
    p.add_argument("--details", metavar="ROW_ID", help="with list: everything about one row")
    p.add_argument("--plot", metavar="PNG", help="with list: also draw the claims' differences beside the papers' "
                   "(results/claims.png)")
    p.add_argument("--seeds", type=whole(1), default=1, metavar="N", help="train seeds 1..N (default 1)")
    p.add_argument("--run-root", default="runs/reproduce", help="run directories: RUN_ROOT/ROW_ID/seedS")
    p.add_argument("--runs", metavar="DIR", default=None, help="the seed folders are DIR/seedS instead (a claim's "
                   "runs of the row: runs/claims/CLAIM/LABEL)")
    p.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE", help="override a config value")
    p.add_argument("--results", default=None,
                   help="results file to read and append to (default: $MEMREAD_RESULTS, else results/results.jsonl)")
    p.add_argument("--repo", metavar="DIR", default=None, help="the memread checkout whose reproduction/ folder to "
                   "use (default: the first folder from here up holding reproduction/ and results/results.jsonl)")
    add_device(p, "train.device: ")
    add_data_root(p)
    p.set_defaults(func=cmd_reproduce)


def reproduction(repo: str | None, who: str = "memread reproduce"):
    """The ``reproduction`` package of a memread checkout (its ``reproduction/`` folder, which is not installed with
    memread): ``repo`` where given, else the first folder from the current one up that holds ``reproduction/`` and
    ``results/results.jsonl``. Its modules are imported from there (``reproduction.rows``, ``.ledger``, ...).
    Outside a checkout: one line that says so."""
    import importlib

    here = Path.cwd().resolve()
    found = [Path(repo).resolve()] if repo else [d for d in (here, *here.parents)
                                                  if (d / "results" / "results.jsonl").is_file()]
    found = [d for d in found if (d / "reproduction" / "__init__.py").is_file()]
    if not found:
        raise MemreadError(f"{who} needs a memread checkout (its reproduction/ folder): run it from a clone, or pass "
                           f"--repo DIR" if who == "memread reproduce" else
                           f"{who} needs a memread checkout (its reproduction/ folder and results/results.jsonl): run "
                           f"it from a clone")
    checkout = found[0]
    loaded = sys.modules.get("reproduction")
    if loaded is not None and Path(loaded.__file__).resolve().parent.parent != checkout:
        raise MemreadError(f"{who}: the reproduction package of {Path(loaded.__file__).parent.parent} is loaded "
                           f"already; run it from that checkout")
    if str(checkout) not in sys.path:
        sys.path.insert(0, str(checkout))
    package = importlib.import_module("reproduction")
    for name in ("rows", "ledger", "verdicts", "render", "train"):
        importlib.import_module(f"reproduction.{name}")
    return package


def cmd_reproduce(args: argparse.Namespace) -> int:
    """``memread reproduce list [--markdown]``: every table row of the four papers, memread's config and best recorded
    number for it, and a verdict; ``memread reproduce ROW_ID --seeds N``: train the row's config with seeds 1..N
    (resuming runs that are there), append valid and test numbers to the results file, print the mean lines. Both
    need a checkout (:func:`reproduction`)."""
    r = reproduction(args.repo)
    if args.target == "list":
        table, results = r.rows.rows(), r.ledger.load_results(r.ledger.results_path(args.results))
        if args.plot:
            print(f"wrote {r.render.claims_png(results, Path(args.plot))}", file=sys.stderr)
        if args.markdown:
            print(r.render.render_markdown(table, results), end="")
        elif args.details:
            print(r.render.row_details(r.rows.find_row(args.details, table), results, table))
        elif args.long:
            print(r.render.format_listing_long(table, results))
        else:
            print(r.render.format_listing(table, results))
        return 0
    if args.markdown or args.plot or args.long or args.details:
        flag = next(f for f, on in (("--markdown", args.markdown), ("--plot", args.plot), ("--long", args.long),
                                    ("--details", args.details)) if on)
        raise MemreadError(f"{flag} goes with `memread reproduce list`")
    try:
        lines = r.train.reproduce(args.target, seeds=args.seeds, run_root=args.run_root, runs=args.runs,
                                  overrides=args.set, data_root=args.data_root, results=args.results, device=args.device)
    except KeyboardInterrupt:
        print("\ninterrupted; the same command resumes its runs", file=sys.stderr)
        return 130
    for line in lines:
        if "seed" not in line:
            print(json.dumps(line))
    return 0
