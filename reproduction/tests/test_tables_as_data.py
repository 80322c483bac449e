"""The papers' rows (papers/*.toml) and claims (claims.toml) load to exactly the Python tables they were generated
from (memread.tools.reproduce.ROWS, scripts/claims.py's CLAIMS at the commit before the move)."""

from __future__ import annotations

import dataclasses
import importlib.util
import subprocess
import sys

from reproduction import REPO, claims, rows


def test_the_rows_are_todays_python_table():
    from memread.tools import reproduce as old

    assert rows.PAPERS == old.PAPERS
    assert [dataclasses.asdict(r) for r in rows.ROWS] == [dataclasses.asdict(r) for r in old.ROWS]


def test_the_claims_are_todays_python_table(tmp_path):
    source = subprocess.run(["git", "show", "a60a4b0:scripts/claims.py"], cwd=REPO, capture_output=True, text=True,
                            check=True).stdout
    path = tmp_path / "claims_old.py"
    path.write_text(source.replace("REPO = Path(__file__).resolve().parent.parent", f"REPO = Path({str(REPO)!r})"))
    spec = importlib.util.spec_from_file_location("claims_old", path)
    old = importlib.util.module_from_spec(spec)
    sys.modules["claims_old"] = old
    spec.loader.exec_module(old)
    assert list(claims.CLAIMS) == list(old.CLAIMS)
    for name, claim in claims.CLAIMS.items():
        was = old.CLAIMS[name]
        assert (claim.name, claim.says, claim.seeds, claim.paper_setup) == (was.name, was.says, was.seeds,
                                                                           was.paper_setup), name
        assert claim.compare == was.compare, name
        assert {k: dataclasses.asdict(r) for k, r in claim.runs.items()} == \
            {k: dataclasses.asdict(r) for k, r in was.runs.items()}, name
        assert list(claim.runs) == list(was.runs), name
