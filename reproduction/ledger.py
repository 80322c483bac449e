"""``results/results.jsonl``, the ledger of every number the reproduction recorded: one JSON object a line, read
(:func:`load_results`), appended in one write (:func:`append_lines`), each line with the commit that made it
(:func:`git_commit`); the line of a ``memread compare`` comparison (:func:`result_line`); and, for lines recorded
before they carried their own ``budget``, how far each experiment trained (``budgets.toml``)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import tomllib
from pathlib import Path
from typing import Sequence

from memread.errors import MemreadError
from reproduction import REPO

with open(Path(__file__).resolve().parent / "budgets.toml", "rb") as _f:
    _BUDGETS = tomllib.load(_f)
BUDGETS: dict[str, str] = _BUDGETS["experiments"]  # a row's experiment -> how far it trained
CLAIM_BUDGETS: dict[str, str] = _BUDGETS["claims"]  # a claim comparison -> what its runs cost

CHANGED = "changed from the config"  # what a budget says before the settings a reproduce changed outside [train]


def is_number(x) -> bool:
    """A finite int or float (not a bool): a value a results line can be judged on."""
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def results_path(explicit: str | os.PathLike | None = None) -> Path:
    """``--results``, else ``$MEMREAD_RESULTS``, else ``results/results.jsonl`` under the current folder when it has
    a ``results/`` folder, else the one of the checkout memread runs from."""
    if explicit:
        return Path(explicit)
    env = os.environ.get("MEMREAD_RESULTS")
    if env:
        return Path(env)
    here = Path("results")
    if here.is_dir() or not (REPO / "results").is_dir():
        return here / "results.jsonl"
    return REPO / "results" / "results.jsonl"


def load_results(path: str | os.PathLike) -> list[dict]:
    """The lines of a results.jsonl file (a missing file has none); a line that is not a JSON object is an error
    naming it (:func:`memread.data.text.read_jsonl`)."""
    from memread.data.text import read_jsonl

    path = Path(path)
    if not path.exists():
        return []
    return [record for _, record in read_jsonl(path)]


def append_lines(path: Path, lines: Sequence[dict]) -> None:
    """Append JSON lines in one write (after a newline when the file does not end with one)."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        lead = ""
        if path.exists() and path.stat().st_size:
            with open(path, "rb") as f:
                f.seek(-1, os.SEEK_END)
                lead = "" if f.read(1) == b"\n" else "\n"
        with open(path, "a", encoding="utf-8") as f:
            f.write(lead + "".join(json.dumps(line) + "\n" for line in lines))
    except OSError as e:
        from memread.errors import os_error_line

        raise MemreadError(os_error_line(e, path)) from None


def git_commit() -> str | None:
    """``git rev-parse --short HEAD`` of memread's checkout (else of the current folder), or None; ``MEMREAD_COMMIT``
    where it is set (a copy of the tree whose git metadata is not its own: a lent GPU machine's copy reported
    the session's first commit)."""
    if os.environ.get("MEMREAD_COMMIT"):
        return os.environ["MEMREAD_COMMIT"]
    for where in (Path(__file__).resolve().parent, Path.cwd()):
        try:
            out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=where, capture_output=True, text=True,
                                 timeout=10)
        except (OSError, subprocess.SubprocessError):
            continue
        if out.returncode == 0 and out.stdout.strip():
            return out.stdout.strip()
    return None


def seeds_field(a: list[int], b: list[int]) -> list[int] | dict[str, list[int]]:
    """A results line's ``seeds``: the seeds both sides trained with, or ``{"a": .., "b": ..}`` where they differ."""
    return list(a) if list(a) == list(b) else {"a": list(a), "b": list(b)}


def result_line(result: dict, experiment: str, dataset: str, command: str, commit: str | None, wall_s: float,
                paper_value: float | None = None) -> dict:
    """The ``results.jsonl`` line of a comparison: ``value`` is the difference A - B of the metric (of the seeds'
    means with ``--seeds``), with its p-values and interval beside it."""
    line = {"experiment": experiment, "dataset": dataset, "split": result["split"],
            "metric": f"{result['metric']}_difference"}
    if "seeds" in result:  # compare_seeds
        seeds, pool, trained = result["seeds"], result["pooled"], result["trained_seeds"]
        line.update(value=round(seeds["difference"], 6), paper_value=paper_value, commit=commit, command=command,
                    wall_s=round(wall_s, 1), seeds=seeds_field(trained["a"], trained["b"]),
                    a=[round(v, 6) for v in seeds["a"]["values"]], b=[round(v, 6) for v in seeds["b"]["values"]],
                    mean_a=round(seeds["a"]["mean"], 6), std_a=round(seeds["a"]["std"], 6),
                    mean_b=round(seeds["b"]["mean"], 6), std_b=round(seeds["b"]["std"], 6),
                    welch_p=round(seeds["welch_p"], 6), pooled_p_value=round(pool["p_value"], 6),
                    pooled_ci_95=[round(pool["ci_low"], 6), round(pool["ci_high"], 6)],
                    **({"seeds_units_p_value": round(result["seeds_and_units"]["p_value"], 6),
                        "seeds_units_ci_95": [round(result["seeds_and_units"]["ci_low"], 6),
                                              round(result["seeds_and_units"]["ci_high"], 6)]}
                       if "seeds_and_units" in result else {}),
                    per_seed_p_values=[round(r["p_value"], 6) for r in result["per_seed"]])
    else:
        line.update(value=round(result["difference"], 6), paper_value=paper_value, commit=commit, command=command,
                    wall_s=round(wall_s, 1), seeds=seeds_field([result["seed_a"]], [result["seed_b"]]),
                    a=round(result["a"], 6), b=round(result["b"], 6),
                    p_value=round(result["p_value"], 6),
                    ci_95=[round(result["ci_low"], 6), round(result["ci_high"], 6)])
    higher = result.get("higher_is_better")
    if higher is not None:  # which side a still-improving run is on matters to the verdict (claims.claim_verdict)
        line["higher_is_better"] = bool(higher)
    if result.get("data_differences"):  # runs trained on different data: the line says so, as the summary does
        line["data_differences"] = result["data_differences"]
    return line

