"""Verdicts: does a paper's number hold in memread (:func:`verdict`, a row of the tables), and does a paper's claim
that compares two models hold (:func:`claim_verdict`, a ``claim-*`` comparison of the ledger).

**A row's verdict** is judged on our best recorded number for it (:func:`best_recorded`), by the rule of
:func:`verdict`. **A claim's verdict** is judged from the comparisons that ``memread compare --record claim-NAME``
appends to ``results/results.jsonl`` (``python -m reproduction.claims`` records them). A claim line holds the
difference A - B of a metric (``<metric>_difference``) on the test split, the paper's difference (``paper_value``),
and a paired test: for one seed pair the permutation test's ``p_value`` and the bootstrap interval ``ci_95``; over
several seeds the pooled paired test (``pooled_p_value``, ``pooled_ci_95``: each test unit's statistics summed over
the seeds) and Welch's t-test of the seeds' values (``welch_p``). With *p* the paired test's p-value (pooled over
seeds where several were run):

- "holds": p < 0.05 and our difference has the paper's sign;
- "does not hold": p < 0.05 and the opposite sign;
- "within noise": p >= 0.05;
- where the paper has the two models level (``paper_value`` 0, or ``paper_claim = "level"``): "holds" when
  p >= 0.05, else "does not hold";
- "not converged": the line says ``converged: false`` (``memread compare --record`` writes it when a cap --
  epochs, steps or ``max_minutes`` -- stopped a run whose last validation was its best by at least the run's
  ``train.min_improvement``, so still improving;
  no verdict), with each run's ending in ``budget`` (:func:`memread.tools.compare.ending_fields`); except where
  the runs still improving (``still_improving``) are all on the side already ahead with p < 0.05: training on
  could only widen its lead, so the order, and with it the verdict, is settled (:func:`settled_early`);
- "no claim in the paper": no paper difference (a comparison of our own, such as two tape starts).

The paper's difference outside our 95 % interval is flagged beside the verdict: a difference that large would
have been seen.

The pooled paired test takes the trained models as given: it asks whether *these* models differ on the test set,
not whether training one architecture gives better models than training the other. Lines recorded with several
seeds since session 35 also hold a bootstrap over seeds and units together (``seeds_units_p_value``,
``seeds_units_ci_95``: :func:`memread.stats.seeds_and_units_test`), which asks the second question. It
does not change the verdict (lines recorded before it, whose runs were not kept, have none, and the rule stays one
rule for the whole table); where the verdict rests on p < 0.05 and this p is not below 0.05, the verdict says so:
*(not across seeds: p = ...)*, the gap being one the seeds' own spread could make.
"""

from __future__ import annotations

import math
import re
import shlex
import statistics
from dataclasses import dataclass
from typing import Iterable, Sequence

from reproduction.ledger import BUDGETS, CHANGED, is_number
from reproduction.rows import Row, siblings

VERDICTS = ("holds", "within noise", "does not hold", "recipe differs", "not tested", "data not available")


def short(text: str, n: int) -> str:
    """``text`` on one line, cut to ``n`` characters with "..." where longer."""
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 3] + "..."


@dataclass(frozen=True)
class Recorded:
    """Our best recorded number for a row (a line of results.jsonl)."""

    experiment: str
    value: float
    std: float | None  # over seeds, when several were run
    seeds: tuple[int, ...] | None
    commit: str | None
    budget: str
    dataset: str
    # where this line trained settings changed from the row's config (a smaller reader) and a line of the config
    # as it is exists too: the best of those, shown beside it (a one-seed run at the paper's size is no mean over
    # seeds, but a reader of the table should see it)
    as_configured: "Recorded | None" = None


def best_recorded(row: Row, results: Iterable[dict], table: Sequence[Row] | None = None) -> Recorded | None:
    """Our best recorded value for ``row`` (its metric on its split), or None.

    The lines considered: those of the row's ``experiments`` (restricted to ``dataset_match`` where the row sets
    it) and those ``memread reproduce`` appended under the id of the row or of a sibling (:func:`siblings`).
    A line with a ``seed`` key is one seed of a ``memread reproduce`` run, whose mean line stands for it, so it is
    skipped. A mean over several seeds comes first (one seed's number may be a lucky draw, and the claims are
    judged on means), then a line of the row's config as it is before one ``memread reproduce`` trained with
    settings changed from it (a smaller reader: its budget says so, :data:`CHANGED`); among the lines left, best is
    the highest value (the lowest for perplexity and MSE); a tie goes to the later line. A mean that a mean over
    more seeds of the same runs or the same ``memread reproduce`` recipe includes (:func:`_part_of`) stands aside
    for that larger sample, however it compares. The std is the line's ``std``, else the sample std of its
    ``per_seed`` values when there are several. Where the line shown trained changed settings and a line of the
    config as it is exists, the best of those rides along as ``as_configured`` (the table shows both).
    """
    named = set(row.experiments)
    own = {r.id for r in siblings(row, table)}
    lines = []
    for rec in results:
        exp = rec.get("experiment")
        if exp not in named and exp not in own:
            continue
        if exp not in own and row.dataset_match and row.dataset_match not in str(rec.get("dataset", "")):
            continue
        if rec.get("metric") != row.metric or rec.get("split") != row.split or "seed" in rec:
            continue
        if is_number(rec.get("value")):
            lines.append(rec)
    lines = [rec for rec in lines if not any(_part_of(rec, other) for other in lines)]
    rec = _best_line(row, lines)
    if rec is None:
        return None
    also = None
    if _changed(rec):
        also = _best_line(row, [r for r in lines if not _changed(r)])
    return _recorded(rec, _recorded(also) if also is not None else None)


def _changed(rec: dict) -> bool:
    """Whether a line trained settings changed from its row's config (its budget says so, :data:`CHANGED`)."""
    return CHANGED in str(rec.get("budget") or "")


def _best_line(row: Row, lines: Sequence[dict]) -> dict | None:
    """The line :func:`best_recorded` shows among ``lines``: several seeds first, then the config as it is, then
    the best value; a tie goes to the later line."""
    best: tuple[tuple[bool, bool, float], dict] | None = None
    for rec in lines:
        value = rec["value"]
        seeds = rec.get("seeds")
        several = isinstance(seeds, list) and len(seeds) >= 2
        key = (several, not _changed(rec), value if row.higher_is_better else -value)
        if best is None or key >= best[0]:
            best = (key, rec)
    return None if best is None else best[1]


def _recorded(rec: dict, as_configured: Recorded | None = None) -> Recorded:
    per_seed = [v for v in rec.get("per_seed") or [] if is_number(v)]
    std = rec.get("std") if is_number(rec.get("std")) else (statistics.stdev(per_seed) if len(per_seed) >= 2 else None)
    seeds = rec.get("seeds")
    seeds = tuple(int(s) for s in seeds) if isinstance(seeds, list) and all(isinstance(s, int) for s in seeds) else None
    budget = rec.get("budget") or BUDGETS.get(rec["experiment"]) or short(str(rec.get("command") or ""), 80)
    commit = rec.get("commit")
    return Recorded(rec["experiment"], float(rec["value"]), float(std) if std is not None else None, seeds,
                    str(commit) if commit else None, budget, str(rec.get("dataset", "")), as_configured)


def _seed_values(rec: dict) -> dict[int, float] | None:
    """``{seed: value}`` of a mean line with its ``seeds`` and ``per_seed`` (None for another line)."""
    seeds, values = rec.get("seeds"), rec.get("per_seed")
    if not (isinstance(seeds, list) and isinstance(values, list) and len(seeds) == len(values) >= 2):
        return None
    return dict(zip(seeds, values))


def _recipe(rec: dict) -> tuple | None:
    """A ``memread reproduce`` line's command without its ``--seeds N``: the row and the settings it trained, its
    ``--set`` values as a set (the same settings given in another order are the same recipe)."""
    command = str(rec.get("command") or "")
    if not command.startswith("memread reproduce "):
        return None
    words = shlex.split(re.sub(r" --seeds \d+", "", command))
    sets = frozenset(words[i + 1] for i, w in enumerate(words[:-1]) if w == "--set")
    rest = tuple(w for i, w in enumerate(words) if w != "--set" and (i == 0 or words[i - 1] != "--set"))
    return rest, sets


def _part_of(rec: dict, other: dict) -> bool:
    """Whether ``other``'s mean, over more seeds, stands for ``rec``'s: the same experiment, and either each of
    ``rec``'s seeds among ``other``'s with the same value (the same runs, recorded again) or the same ``memread
    reproduce`` recipe (the same seeds trained again, on another machine say, and more beside them)."""
    mine, theirs = _seed_values(rec), _seed_values(other)
    if mine is None or theirs is None or rec.get("experiment") != other.get("experiment") or len(theirs) <= len(mine):
        return False
    if _recipe(rec) is not None and _recipe(rec) == _recipe(other) and set(mine) <= set(theirs):
        return True
    return all(s in theirs and is_number(v) and is_number(theirs[s]) and math.isclose(v, theirs[s], abs_tol=1e-4)
               for s, v in mine.items())


def verdict(row: Row, best: Recorded | None) -> str:
    """Does the paper's number hold in memread? One of :data:`VERDICTS`, by this rule:

    - "data not available": the benchmark data lacks the row's data (numbers on a stand-in are not judged);
    - "not tested": no recorded number for the row;
    - "recipe differs": our number comes from a run whose recipe is not the paper's (the row's ``recipe_differs``:
      memread's dropout where the paper has none), so it is not judged against the paper's; the claim the row names
      (``recipe_claim``) compares the model with its baseline at that recipe;
    - otherwise, with ``margin`` = ours - paper for a higher-is-better metric (accuracy, MAP, MRR, BLEU) and
      paper - ours for perplexity and MSE, and ``std`` the standard deviation of our number over seeds (0 when
      one seed was run):
      "holds" when margin >= 0 (ours is at least as good as the paper's);
      "within noise" when -std <= margin < 0 (worse, by at most one std over seeds);
      "does not hold" when margin < -std.
    """
    if row.data_missing:
        return "data not available"
    if best is None:
        return "not tested"
    if best.experiment in row.recipe_differs:
        return "recipe differs"
    margin = best.value - row.paper_value if row.higher_is_better else row.paper_value - best.value
    if margin >= 0:
        return "holds"
    if margin >= -(best.std or 0.0):
        return "within noise"
    return "does not hold"


# ----------------------------------------------------------------------------- claims

CLAIM_PREFIX = "claim-"


SIGNIFICANCE = 0.05


def claim_records(results: Iterable[dict]) -> list[dict]:
    """The latest line of each claim comparison (``claim-*`` with a ``*_difference`` metric), in first-seen order."""
    latest: dict[str, dict] = {}
    for rec in results:
        exp, metric = str(rec.get("experiment", "")), str(rec.get("metric", ""))
        if exp.startswith(CLAIM_PREFIX) and metric.endswith("_difference") and is_number(rec.get("value")):
            latest[exp] = rec
    return list(latest.values())


def _p(rec: dict) -> float | None:
    p = rec.get("pooled_p_value", rec.get("p_value"))
    return float(p) if is_number(p) else None


def _interval(rec: dict) -> tuple[float, float] | None:
    ci = rec.get("pooled_ci_95", rec.get("ci_95"))
    return (float(ci[0]), float(ci[1])) if isinstance(ci, list) and len(ci) == 2 else None


def settled_early(rec: dict) -> bool:
    """Whether a comparison with a run still improving is settled all the same: every still-improving run is on the
    side the paired test already finds better (p < 0.05), so that more training could only widen the gap. Lines
    without ``still_improving`` or ``higher_is_better`` (recorded before them) are never settled early."""
    sides, higher, p = rec.get("still_improving"), rec.get("higher_is_better"), _p(rec)
    if rec.get("converged") is not False or not sides or not isinstance(higher, bool) or p is None:
        return False
    diff = float(rec["value"])
    leader = "A" if (diff > 0) == higher else "B"
    return p < SIGNIFICANCE and diff != 0 and all(side == leader for side in sides)


def across_seeds(rec: dict) -> str:
    """" (not across seeds: p = 0.21)" where the verdict rests on a significant pooled paired test but the bootstrap
    over seeds and units (recorded with several seeds) does not find the gap; "" otherwise (module doc)."""
    q, p = rec.get("seeds_units_p_value"), _p(rec)
    if not is_number(q) or p is None or p >= SIGNIFICANCE or q < SIGNIFICANCE:
        return ""
    if claim_verdict(rec) not in ("holds", "does not hold"):
        return ""
    return f" (not across seeds: p = {q:.2g})"


def claim_verdict(rec: dict) -> str:
    """One of "holds", "does not hold", "within noise", "not converged", "no claim in the paper" (module doc)."""
    if rec.get("converged") is False and not settled_early(rec):
        return "not converged"
    paper, p, diff = rec.get("paper_value"), _p(rec), float(rec["value"])
    if not is_number(paper):
        return "no claim in the paper"
    if p is None:
        return "no paired test"
    significant = p < SIGNIFICANCE
    if paper == 0 or rec.get("paper_claim") == "level":
        return "does not hold" if significant else "holds"
    if not significant:
        return "within noise"
    return "holds" if (diff > 0) == (paper > 0) else "does not hold"

