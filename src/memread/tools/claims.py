"""The papers' claims that compare two models ("the LSTMN beats the LSTM"), judged from the comparisons that
``memread compare --record claim-NAME`` appends to ``results/results.jsonl`` (``scripts/claims.py`` records
them): the ``Claims`` section of ``results/REPRODUCTION.md``.

A claim line holds the difference A - B of a metric (``<metric>_difference``) on the test split, the paper's
difference (``paper_value``), and a paired test: for one seed pair the permutation test's ``p_value`` and the
bootstrap interval ``ci_95``; over several seeds the pooled paired test (``pooled_p_value``, ``pooled_ci_95``:
each test unit's statistics summed over the seeds) and Welch's t-test of the seeds' values (``welch_p``).

**Verdict** (:func:`claim_verdict`), with *p* the paired test's p-value (pooled over seeds where several were run):

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
``seeds_units_ci_95``: :func:`memread.tools.compare.seeds_and_units_test`), which asks the second question. It
does not change the verdict (lines recorded before it, whose runs were not kept, have none, and the rule stays one
rule for the whole table); where the verdict rests on p < 0.05 and this p is not below 0.05, the verdict says so:
*(not across seeds: p = ...)*, the gap being one the seeds' own spread could make.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Iterable

from memread.errors import MemreadError

CLAIM_PREFIX = "claim-"
SIGNIFICANCE = 0.05

# what each claim's runs cost, for lines recorded before `budget` was written into them
BUDGETS = {
    "claim-sst-binary-lstmn-vs-lstm": "to early stopping (patience 3; best valid epoch 2-4)",
    "claim-sst-fine-lstmn-vs-lstm": "to early stopping (patience 3; best valid epoch 2-4)",
    "claim-sst-binary-2layer-lstmn-vs-lstm": "to early stopping (patience 3; best valid epoch 1-2)",
    "claim-sst-binary-nse-vs-lstm": "NSE: 4 of the paper's 25 epochs of phrases; LSTM to early stopping",
    "claim-sst-binary-nse-vs-lstmn": "NSE: 4 of the paper's 25 epochs of phrases; LSTMN to early stopping",
    "claim-sst-fine-2layer-lstmn-vs-lstm": "to early stopping (patience 3; early stops at epoch 4-7)",
    "claim-wikiqa-mma-nse-vs-lstm-1x300": "to early stopping (patience 4 half-epoch evaluations, 8 epochs at most); "
                                          "both readers 1 x 300",
}


def claim_records(results: Iterable[dict]) -> list[dict]:
    """The latest line of each claim comparison (``claim-*`` with a ``*_difference`` metric), in first-seen order."""
    latest: dict[str, dict] = {}
    for rec in results:
        exp, metric = str(rec.get("experiment", "")), str(rec.get("metric", ""))
        if exp.startswith(CLAIM_PREFIX) and metric.endswith("_difference") and is_number(rec.get("value")):
            latest[exp] = rec
    return list(latest.values())


def is_number(x) -> bool:
    """A finite int or float (not a bool): a value a results line can be judged on."""
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def cell(text: str) -> str:
    """Text for a markdown table cell (its pipes escaped)."""
    return text.replace("|", "\\|")


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


def _side(values, mean, std) -> str:
    """``81.35 ± 0.83`` over seeds, or the one value."""
    if isinstance(values, list):
        return f"{_g(mean)} ± {_g(std)}" if is_number(mean) and is_number(std) else "-"
    return _g(values) if is_number(values) else "-"


def _g(x: float) -> str:
    x = float(x)
    return f"{x:.4f}" if abs(x) < 1 else f"{x:.2f}"


def _signed(x: float) -> str:
    return ("+" if x > 0 else "") + _g(x)


def cost_text(cost: dict | None) -> str:
    """A comparison's ``cost`` (``memread compare --record``: each seed's tokens and training seconds) as "cost a
    seed: A 41 min, 8.9M tokens; B 12 min, 8.9M tokens" (means over the seeds; minutes only where every seed's
    were counted); "" without it."""
    if not isinstance(cost, dict):
        return ""
    sides = []
    for side in ("a", "b"):
        runs = cost.get(side) or []
        tokens = [r.get("tokens") for r in runs]
        seconds = [r.get("train_s") for r in runs]
        parts = []
        if runs and all(is_number(x) for x in seconds):
            minutes = f"{sum(seconds) / len(seconds) / 60:.0f} min"
            split = [r.get("train_s_by_device") for r in runs]
            if any(split) and all(isinstance(d, dict) and all(is_number(v) for v in d.values()) for d in split):
                kinds = sorted({k for d in split for k in d})  # a run that crossed devices: its minutes on each
                minutes += " (" + " + ".join(f"{sum(d.get(k, 0.0) for d in split) / len(split) / 60:.0f} {k}"
                                             for k in kinds) + ")"
            parts.append(minutes)
        if runs and all(is_number(x) for x in tokens):
            parts.append(f"{sum(tokens) / len(tokens) / 1e6:.1f}M tokens")
        sides.append(f"{side.upper()} {', '.join(parts) or 'not counted'}")
    return "cost a seed: " + "; ".join(sides)


def claims_markdown(results: Iterable[dict]) -> list[str]:
    """The lines of the ``## Claims`` section: the rule, then one table row per claim comparison."""
    lines = [
        "## Claims: two models compared at equal recipe",
        "",
        "Generated from the `claim-*` comparisons in `results/results.jsonl` (`memread compare --record`, run by "
        "`scripts/claims.py`); notes in `results/notes/claims.md`. **Verdict rule** "
        "(`memread.tools.claims.claim_verdict`): *p* is the paired test on the test units (pooled over seeds where "
        "several were run). **holds**: p < 0.05 with the paper's sign; **does not hold**: p < 0.05 with the opposite "
        "sign, or any p < 0.05 where the paper has the models level; **within noise**: p >= 0.05 (level claims: "
        "holds); **not converged**: a model stopped far from its best, no verdict, unless only the model already ahead "
        "(p < 0.05) was still improving, so the gap could only widen (*settled*). *(paper outside)*: the paper's "
        "difference lies outside our 95 % interval. *(not across seeds)*: the verdict's p < 0.05, but the "
        "bootstrap over seeds and units together (`seeds & units p`, recorded where the runs were kept; it judges "
        "the training procedures, the paired test the trained models) does not find the gap. As a picture: "
        "`results/claims.png` (`memread reproduce list --plot results/claims.png`).",
        "",
        "| claim (A vs B) | metric | A | B | A - B [95 % interval] | paired p | Welch p (seeds) | seeds & units p "
        "| paper A - B | seeds | budget | commit | verdict |",
        "|---|---|---:|---:|---|---:|---:|---:|---:|---:|---|---|---|",
    ]
    for rec in claim_records(results):
        diff, ci, p, paper = float(rec["value"]), _interval(rec), _p(rec), rec.get("paper_value")
        seeds = rec.get("seeds")
        n = len(seeds) if isinstance(seeds, list) else 1
        interval = f" [{_signed(ci[0])}, {_signed(ci[1])}]" if ci else ""
        verdict = claim_verdict(rec)
        if ci and is_number(paper) and verdict not in ("not converged",) and not ci[0] <= paper <= ci[1]:
            verdict += " (paper outside)"
        if settled_early(rec):
            verdict += f" (settled: only {' and '.join(rec['still_improving'])}, ahead, still improving)"
        verdict += across_seeds(rec)
        budget = str(rec.get("budget") or BUDGETS.get(rec["experiment"], "-"))
        cost = cost_text(rec.get("cost"))
        budget = f"{budget}; {cost}" if cost else budget
        welch, both = rec.get("welch_p"), rec.get("seeds_units_p_value")
        cells = [f"`{rec['experiment'][len(CLAIM_PREFIX):]}`", str(rec["metric"]).removesuffix("_difference"),
                 _side(rec.get("a"), rec.get("mean_a"), rec.get("std_a")),
                 _side(rec.get("b"), rec.get("mean_b"), rec.get("std_b")),
                 _signed(diff) + interval, f"{p:.3g}" if p is not None else "-",
                 f"{welch:.3g}" if is_number(welch) else "-", f"{both:.3g}" if is_number(both) else "-",
                 _signed(paper) if is_number(paper) else "-", str(n),
                 budget, str(rec.get("commit") or "-"), verdict]
        lines.append("| " + " | ".join(map(cell, cells)) + " |")
    return lines


VERDICT_COLOURS = {"holds": "tab:green", "does not hold": "tab:red", "within noise": "tab:gray",
                   "not converged": "tab:orange"}


def claims_png(results: Iterable[dict], path: Path) -> Path:
    """The Claims section as a picture: one panel per metric, a row per claim comparison, our difference A - B
    (the mean over seeds) with its 95 % interval, coloured by verdict, beside the paper's difference (a black
    diamond; none where the paper makes no claim); below it, dotted, the interval of the bootstrap over seeds and
    units where the line has one. A forest plot: which claims hold, and by how much the paper's
    difference lies from ours, at a glance. Returns the PNG's path."""
    from memread.tools.viz import plt, save

    recs = claim_records(results)
    if not recs:
        raise MemreadError("no claim comparisons (claim-* lines from `memread compare --record`) in the results; "
                           "nothing to draw")
    metrics = list(dict.fromkeys(str(r["metric"]).removesuffix("_difference") for r in recs))
    groups = {m: [r for r in recs if str(r["metric"]).removesuffix("_difference") == m] for m in metrics}
    heights = [len(g) + 1.2 for g in groups.values()]
    fig, axes = plt.subplots(len(metrics), 1, figsize=(8.5, 0.32 * sum(heights) + 1.0),
                             gridspec_kw={"height_ratios": heights}, squeeze=False)
    for ax, (metric, group) in zip(axes[:, 0], groups.items()):
        for y, rec in enumerate(reversed(group)):
            verdict = claim_verdict(rec)
            colour = VERDICT_COLOURS.get(verdict, "tab:blue")
            diff, ci, paper = float(rec["value"]), _interval(rec), rec.get("paper_value")
            if ci:
                ax.plot(ci, [y, y], color=colour, linewidth=2.5, alpha=0.8)
            both = rec.get("seeds_units_ci_95")
            if isinstance(both, list) and len(both) == 2 and all(map(is_number, both)):
                ax.plot(both, [y - 0.22, y - 0.22], color=colour, linewidth=1.0, alpha=0.6, linestyle=":")
            ax.plot([diff], [y], "o", color=colour, markersize=6)
            if is_number(paper):
                ax.plot([paper], [y], "D", color="black", markersize=5, fillstyle="none")
        ax.axvline(0.0, color="black", linewidth=0.8)
        ax.set_yticks(range(len(group)), [f"{r['experiment'][len(CLAIM_PREFIX):]} ({claim_verdict(r)})"
                                          for r in reversed(group)], fontsize=7)
        ax.set_ylim(-0.7, len(group) - 0.3)
        ax.set_xlabel(f"{metric}: A - B (ours, 95 % interval; \u25c7 the paper's)", fontsize=8)
        ax.tick_params(axis="x", labelsize=7)
        ax.grid(axis="x", alpha=0.3)
    axes[0, 0].set_title("The papers' claims: our difference A - B beside the paper's\n"
                         "green holds, red does not hold, grey within noise, orange not converged\n"
                         "dotted below: the interval of the bootstrap over seeds and units", fontsize=8)
    return save(fig, path)
