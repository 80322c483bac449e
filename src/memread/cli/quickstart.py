"""``memread quickstart``: a memoryless baseline and a memory reader trained on the built-in stories."""

from __future__ import annotations

import argparse
from pathlib import Path

from memread.cli.common import SEED, whole


def add_quickstart(sub) -> None:
    p = sub.add_parser("quickstart", help="baseline vs memory reader on built-in stories, in under 3 minutes")
    p.add_argument("--out", default="runs/quickstart", help="where to write the results and the attention PNG")
    p.add_argument("--steps", type=whole(1), default=600, help="training steps per model")
    p.add_argument("--seed", type=SEED, default=1)
    p.set_defaults(func=cmd_quickstart)


def cmd_quickstart(args: argparse.Namespace) -> int:
    from memread.tools.quickstart import quickstart

    quickstart(Path(args.out), steps=args.steps, seed=args.seed)
    return 0
