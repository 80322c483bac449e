"""``memread config``: the JSON Schema of experiment files (``schema``), or one shown resolved (``show``)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def add_config(sub) -> None:
    p = sub.add_parser("config", help="experiment files: their JSON Schema for TOML editors, or one shown resolved")
    actions = p.add_subparsers(dest="action", required=True)
    c = actions.add_parser("schema", help="the JSON Schema of every [data]/[reader]/[head]/[criterion]/[train] choice "
                           "(editors validate and complete experiment files with it)")
    c.add_argument("--out", metavar="FILE", default=None, help="write it to FILE (default: stdout)")
    c = actions.add_parser("show", help="an experiment as memread reads it: every key, defaults filled in (TOML)")
    c.add_argument("config", metavar="CONFIG", help="the experiment file (TOML)")
    c.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE", help="override a config value")
    c.add_argument("--json", action="store_true", help="JSON (as config.json of a run) instead of TOML")
    p.set_defaults(func=cmd_config)


def cmd_config(args: argparse.Namespace) -> int:
    """``memread config schema [--out FILE]``: the JSON Schema of experiment files, for TOML editors (generated from
    the config dataclasses, :mod:`memread.schema`); ``memread config show CONFIG [--set ...] [--json]``: the
    experiment as memread reads it, every key with its default filled in, as TOML (or JSON) that loads back the
    same."""
    from memread.schema import experiment_schema, show_toml

    if args.action == "schema":
        text = json.dumps(experiment_schema(), indent=2) + "\n"
        if args.out is None or args.out == "-":
            sys.stdout.write(text)
        else:
            from memread.training.checkpoint import write_text_atomically

            write_text_atomically(Path(args.out), text)
            print(f"wrote {args.out}: add `#:schema {args.out}` (a path from the TOML file, or a URL) as the first "
                  f"line of an experiment file, or a rule in .taplo.toml, for Taplo / Even Better TOML",
                  file=sys.stderr)
        return 0
    from memread.config import load_experiment

    cfg = load_experiment(args.config, args.set)
    sys.stdout.write(cfg.to_json() + "\n" if args.json else show_toml(cfg, args.config))
    return 0
