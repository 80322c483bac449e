"""The papers' rows (papers/*.toml) and claims (claims.toml) are the Python tables they were generated from:
``memread.tools.reproduce.ROWS`` and ``scripts/claims.py``'s ``CLAIMS`` at commit a60a4b0, the last before the move
(read from git; skipped where the history is not there, a shallow clone say). The lasting check that the move
changed no number is ``test_reproduce.py::test_reproduction_md_is_current``: results/REPRODUCTION.md, regenerated
from these files, is byte for byte the committed one. A row or claim edited on purpose later: update BEFORE's
expectations here, or drop the row from the comparison."""

from __future__ import annotations

import dataclasses
import importlib.util
import subprocess
import sys

import pytest

from reproduction import REPO, claims, rows

BEFORE = "a60a4b0"


def old_module(tmp_path, monkeypatch, path: str, name: str, fix=lambda s: s):
    """The file ``path`` as it was at BEFORE, imported as module ``name`` (for this test only)."""
    done = subprocess.run(["git", "show", f"{BEFORE}:{path}"], cwd=REPO, capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"no git history of {path} at {BEFORE} here: {done.stderr.strip()[:80]}")
    file = tmp_path / f"{name.replace('.', '_')}.py"
    file.write_text(fix(done.stdout), encoding="utf-8")
    spec = importlib.util.spec_from_file_location(name, file)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, name, module)  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_the_rows_are_the_python_table_they_came_from(tmp_path, monkeypatch):
    old_module(tmp_path, monkeypatch, "src/memread/tools/claims.py", "memread.tools.claims")  # reproduce.py's import
    old = old_module(tmp_path, monkeypatch, "src/memread/tools/reproduce.py", "memread.tools.reproduce")
    assert rows.PAPERS == old.PAPERS
    fields = [f.name for f in dataclasses.fields(old.Row)]
    # LSTMN Table 1 read each sentence alone: rows added since, each beside its stream row
    kept = [r for r in rows.ROWS if r.protocol != "sentence"]
    assert [{k: getattr(r, k) for k in fields} for r in kept] == [dataclasses.asdict(r) for r in old.ROWS]
    # the fields added since (issue 59: a number at memread's recipe is not judged against the paper's): LSTMN
    # Table 1's rows alone, each naming only experiments of its own
    added = [r for r in rows.ROWS if r.recipe_differs or r.recipe or r.recipe_claim]
    assert {r.table for r in added} == {"Table 1"} and {r.paper for r in added} == {"lstmn"}
    assert all(set(r.recipe_differs) <= set(r.experiments) and r.recipe for r in added)
    assert all(r.recipe_claim in claims.CLAIMS for r in added if r.recipe_claim)


def test_the_claims_are_the_python_table_they_came_from(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(REPO))
    old_module(tmp_path, monkeypatch, "src/memread/tools/claims.py", "memread.tools.claims")
    old_module(tmp_path, monkeypatch, "src/memread/tools/reproduce.py", "memread.tools.reproduce")
    old = old_module(tmp_path, monkeypatch, "scripts/claims.py", "claims_before",
                     lambda s: s.replace("REPO = Path(__file__).resolve().parent.parent", f"REPO = Path({str(REPO)!r})"))
    assert list(claims.CLAIMS) == list(old.CLAIMS)
    for name, claim in claims.CLAIMS.items():
        was = old.CLAIMS[name]
        assert (claim.name, claim.says, claim.seeds, claim.paper_setup) == (was.name, was.says, was.seeds,
                                                                           was.paper_setup), name
        assert claim.compare == was.compare, name
        assert list(claim.runs) == list(was.runs), name
        # the sentence claims' runs of a Table 1 row's config as it is name that row since (its config the same),
        # so that their numbers are recorded under it (record_rows)
        mine = {k: dataclasses.asdict(r) for k, r in claim.runs.items()}
        if claim.record_rows:
            for k, r in claim.runs.items():
                if r.row and not r.sets:
                    assert str(r.config_path) == was.runs[k].config, (name, k)
                    mine[k].update(row="", config=was.runs[k].config)
        assert mine == {k: dataclasses.asdict(r) for k, r in was.runs.items()}, name
