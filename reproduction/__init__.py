"""The reproduction of the four papers with memread: not part of the library, and not installed with it.

- ``papers/*.toml``: every number of the papers' results tables (one ``[[row]]`` each), :mod:`reproduction.rows`;
- ``claims.toml``: the papers' claims that compare two models, and the runs that decide them,
  :mod:`reproduction.claims` (the scheduler: ``python -m reproduction.claims list|plan|run|status|...``);
- :mod:`reproduction.ledger`: ``results/results.jsonl``, the record of every number (read, appended, a
  comparison's line);
- :mod:`reproduction.verdicts`: does a row's number, or a claim, hold;
- :mod:`reproduction.render`: ``results/REPRODUCTION.md``, the terminal listing, ``results/claims.png``;
- :mod:`reproduction.train`: the driver behind ``memread reproduce ROW --seeds N``;
- ``gpu_checks.sh``: the claims a CPU cannot finish, on a lent GPU.

``memread reproduce`` finds this folder in the checkout it runs from (or ``--repo DIR``) and imports it; the library
never imports it otherwise.
"""

from pathlib import Path

REPO = Path(__file__).resolve().parent.parent  # the checkout this package sits in
