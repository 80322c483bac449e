"""What the reproduction shows: ``results/REPRODUCTION.md`` (:func:`render_markdown`), the terminal listing of
``memread reproduce list`` (:func:`format_listing`), and ``results/claims.png`` (:func:`claims_png`)."""

from __future__ import annotations

from pathlib import Path
from typing import Iterable, Sequence

from memread.errors import MemreadError
from reproduction.ledger import CLAIM_BUDGETS, is_number
from reproduction.rows import PAPERS, Row
from reproduction.verdicts import (CLAIM_PREFIX, VERDICTS, Recorded, _interval, _p, across_seeds, best_recorded,
                                   claim_records, claim_verdict, settled_early, short, verdict)


def cell(text: str) -> str:
    """Text for a markdown table cell (its pipes escaped)."""
    return text.replace("|", "\\|")


_DECIMALS = {"map": 4, "mrr": 4}


def _fmt(value: float, metric: str) -> str:
    return f"{value:.{_DECIMALS.get(metric, 2)}f}"


_PRINTED = {"accuracy": 1, "mse": 2, "bleu": 2, "map": 4, "mrr": 4}  # decimals the papers print (perplexity: as given)


def _paper(value: float, metric: str) -> str:
    return f"{value:.{_PRINTED[metric]}f}" if metric in _PRINTED else f"{value:g}"


PROTOCOL_NAMES = {"stream": "stream", "sentence": "each sentence alone"}


def dataset_text(row: Row) -> str:
    """The row's dataset, with the protocol its language model reads it in where the table has both."""
    return f"{row.dataset} ({PROTOCOL_NAMES[row.protocol]})" if row.protocol else row.dataset


def ours_text(row: Row, best: Recorded | None) -> str:
    """``99.62 (1 seed; 14 of 40 epochs; d18fa2b; ptb-lstmn-1x300-span3)``, ``-`` when nothing is recorded."""
    if best is None:
        return "-"
    value = _fmt(best.value, row.metric) + (f" ± {_fmt(best.std, row.metric)}" if best.std is not None else "")
    if row.stand_in:
        value += f" on {row.stand_in}"
    n = len(best.seeds) if best.seeds else 1
    seeds = f"{n} seeds" if n > 1 else "1 seed"
    parts = [seeds, best.budget, best.commit or "commit unknown", best.experiment]
    text = f"{value} ({'; '.join(p for p in parts if p)})"
    if best.as_configured is not None:
        text += f"; the config as it is: {ours_text(row, best.as_configured)}"
    return text


def verdict_text(row: Row, best: Recorded | None) -> str:
    v = verdict(row, best)
    if v == "data not available" and row.data_missing:
        return row.data_missing
    if v == "recipe differs":
        at = (f"claim `{row.recipe_claim}` compares it with its baseline at that recipe" if row.recipe_claim else
              "no claim compares it at that recipe")
        return f"recipe differs ({row.recipe}; {at})"
    if best is not None and best.as_configured is not None and verdict(row, best.as_configured) != v:
        v += f" (the config as it is: {verdict(row, best.as_configured)})"
    return v


def summary(table: Sequence[Row], results: Sequence[dict]) -> list[dict]:
    """Per paper: rows, rows with a config, rows with a recorded number, and the count of each verdict."""
    out = []
    for paper in PAPERS:
        mine = [r for r in table if r.paper == paper]
        if not mine:
            continue
        bests = [best_recorded(r, results, table) for r in mine]
        counts = {v: 0 for v in VERDICTS}
        for r, b in zip(mine, bests):
            counts[verdict(r, b)] += 1
        out.append({"paper": paper, "rows": len(mine), "configs": sum(r.config is not None for r in mine),
                    "recorded": sum(b is not None for b in bests), **counts})
    return out


VERDICT_RULE = (
    "**Verdict rule** (`reproduction.verdicts.verdict`). *margin* = ours - paper for accuracy, MAP, MRR and BLEU, "
    "paper - ours for perplexity and MSE; *std* = the standard deviation of our number over seeds (0 for one seed). "
    "**holds**: margin >= 0. **within noise**: -std <= margin < 0. **does not hold**: margin < -std. "
    "**recipe differs**: our number's runs trained with a recipe other than the paper's (memread's dropout where "
    "the paper has none), so it is not judged against the paper's; the claim named beside it compares the model "
    "with its baseline at that recipe. "
    "**not tested**: nothing recorded. **data not available**: the benchmark data lacks the row's data; numbers "
    "recorded on a stand-in are shown, named, and not judged. *Ours* is the best recorded test (or the row's split) "
    "value among the row's experiments in `results/results.jsonl` (the mean, where several seeds were run), with its "
    "seeds, budget, commit and experiment name; where that number's runs changed settings of the row's config "
    "(a smaller reader: its budget says so) and the config as it is was trained too, the latter's number follows, "
    "with its verdict where the two differ. Our setups differ from the papers' (GloVe 6B 50d instead of 840B "
    "300d, mostly shorter training): see the notes in `results/*.md`.")


def render_markdown(table: Sequence[Row], results: Sequence[dict]) -> str:
    """``results/REPRODUCTION.md``: the summary per paper, then every row by paper and table."""
    results = list(results)
    lines = [
        "# Reproduction status: every table row of the four papers",
        "",
        "Generated from `results/results.jsonl` by `memread reproduce list --markdown > results/REPRODUCTION.md`; "
        "`reproduction/tests/test_reproduce.py` fails when this file is stale. Do not edit by hand. Rerun a row with "
        "`memread reproduce ROW_ID --seeds N` (it appends its numbers to `results/results.jsonl`).",
        "",
        VERDICT_RULE,
        "",
        "Accuracies are in percent (Daniluk et al.'s Figure 2d prints fractions: 0.523 is 52.3 here).",
        "",
        "LSTMN Table 1 is shown in two protocols: *stream*, PTB read as one token stream in BPTT segments with the "
        "state carried (memread's default), and *each sentence alone*, every line read as `<s> w_1 .. w_n <eos>` with "
        "nothing carried (`[data] context = \"sentence\"`, the LSTMN authors' own LM code); "
        "`results/notes/sentence-protocol.md` compares them.",
        "",
        "| paper | rows | with a memread config | with a recorded number (on its data or a stand-in) | "
        + " | ".join(VERDICTS) + " |",
        "|---|---:|---:|---:|" + "---:|" * len(VERDICTS),
    ]
    for s in summary(table, results):
        lines.append(f"| {s['paper']} | {s['rows']} | {s['configs']} | {s['recorded']} | "
                     + " | ".join(str(s[v]) for v in VERDICTS) + " |")
    lines += ["", *claims_markdown(results)]
    for paper, title in PAPERS.items():
        mine = [r for r in table if r.paper == paper]
        if not mine:
            continue
        lines += ["", f"## {paper}: {title}"]
        for tab in dict.fromkeys(r.table for r in mine):
            lines += ["", f"### {tab}", "",
                      "| row id | row | dataset | metric (split) | paper | memread config | ours | verdict |",
                      "|---|---|---|---|---:|---|---|---|"]
            for r in (r for r in mine if r.table == tab):
                best = best_recorded(r, results, table)
                config = f"`{r.config}`" if r.config else "-"
                if r.note:
                    config += f" ({r.note})"
                lines.append("| " + " | ".join(cell(c) for c in (
                    f"`{r.id}`", r.name, dataset_text(r), f"{r.metric} ({r.split})", _paper(r.paper_value, r.metric), config,
                    ours_text(r, best), verdict_text(r, best))) + " |")
    return "\n".join(lines) + "\n"


def summary_lines(table: Sequence[Row], results: Sequence[dict]) -> list[str]:
    """Per paper, one line: its rows, configs, recorded numbers, and the count of each verdict."""
    return [f"{s['paper']}: {s['rows']} rows, {s['configs']} configs, {s['recorded']} recorded; "
            + ", ".join(f"{v} {s[v]}" for v in VERDICTS if s[v]) for s in summary(table, results)]


def _verdict_short(row: Row, best: Recorded | None) -> str:
    v = verdict(row, best)
    if v == "recipe differs" and row.recipe_claim:
        return f"recipe differs (see claim {row.recipe_claim})"
    return v


def format_listing(table: Sequence[Row], results: Sequence[dict]) -> str:
    """``memread reproduce list``, for a terminal: the summary per paper, then one short line per row (id, ours,
    paper, verdict), then the claims one line each; ``--details ROW`` (:func:`row_details`) and ``--long``
    (:func:`format_listing_long`) give the rest."""
    results = list(results)
    width = max(len(r.id) for r in table)
    lines = [*summary_lines(table, results), "", f"{'row id':{width}} {'ours':>8} {'paper':>7}  verdict"]
    for r in table:
        best = best_recorded(r, results, table)
        ours = "-" if best is None else _fmt(best.value, r.metric)
        lines.append(f"{r.id:{width}} {ours:>8} {_paper(r.paper_value, r.metric):>7}  {_verdict_short(r, best)}")
    claims = claim_records(results)
    if claims:
        name = max(len(rec["experiment"]) - len(CLAIM_PREFIX) for rec in claims)
        lines += ["", f"claims (A - B, ours and the paper's; p: the paired test): {len(claims)}",
                  f"{'claim':{name}}  {'metric':6}  {'ours':>8}  {'paper':>7}  {'p':>7}  verdict"]
        for rec in claims:
            p, paper = _p(rec), rec.get("paper_value")
            lines.append(f"{rec['experiment'][len(CLAIM_PREFIX):]:{name}}  "
                         f"{str(rec['metric']).removesuffix('_difference'):6}  {_signed(float(rec['value'])):>8}  "
                         f"{_signed(paper) if is_number(paper) else '-':>7}  {f'{p:.3g}' if p is not None else '-':>7}"
                         f"  {claim_verdict(rec)}")
    lines += ["", "a row in full: memread reproduce list --details ROW_ID", "every row in full: memread reproduce list "
                  "--long (the tables: results/REPRODUCTION.md)"]
    return "\n".join(lines)


def row_details(row: Row, results: Sequence[dict], table: Sequence[Row]) -> str:
    """Everything about one row (``memread reproduce list --details ROW_ID``), a field a line."""
    best = best_recorded(row, results, table)
    fields = [("row", row.id), ("paper", f"{row.paper}, {row.table}: {row.name}"), ("dataset", dataset_text(row)),
              ("metric", f"{row.metric} ({row.split})"), ("paper's value", _paper(row.paper_value, row.metric)),
              ("config", row.config or "-"), ("note", row.note), ("experiments", ", ".join(row.experiments)),
              ("recipe", f"{row.recipe} ({', '.join(row.recipe_differs)})" if row.recipe_differs else ""),
              ("ours", ours_text(row, best)), ("verdict", verdict_text(row, best))]
    return "\n".join(f"{k + ':':15}{v}" for k, v in fields if v)


def format_listing_long(table: Sequence[Row], results: Sequence[dict]) -> str:
    """``memread reproduce list --long``: the whole of every row, one (long) line each, then the summary."""
    results = list(results)
    head = ("row id", "paper", "table", "row", "dataset", "metric", "paper value", "config", "ours", "verdict")
    body = []
    for r in table:
        best = best_recorded(r, results, table)
        body.append((r.id, r.paper, r.table, short(r.name, 40), dataset_text(r), f"{r.metric} ({r.split})",
                     _paper(r.paper_value, r.metric), r.config or "-", ours_text(r, best), verdict_text(r, best)))
    widths = [max(len(x[i]) for x in [head, *body]) for i in range(len(head) - 1)]
    fmt = lambda cells: "  ".join(c.ljust(w) for c, w in zip(cells, widths)) + "  " + cells[-1]  # noqa: E731
    counts = summary(table, results)
    tail = [f"{s['paper']}: {s['rows']} rows, {s['configs']} with a config, {s['recorded']} with a recorded number; "
            + ", ".join(f"{v} {s[v]}" for v in VERDICTS) for s in counts]
    return "\n".join([fmt(head), *(fmt(b) for b in body), "", *tail])


# ----------------------------------------------------------------------------- claims

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


def claim_verdict_text(rec: dict) -> str:
    """A claim line's verdict with its flags: the paper's difference outside our interval, a verdict settled while
    the side ahead still improved, a gap the seeds' own spread could make (``claims_markdown``'s rule)."""
    verdict, ci, paper = claim_verdict(rec), _interval(rec), rec.get("paper_value")
    if ci and is_number(paper) and verdict != "not converged" and not ci[0] <= paper <= ci[1]:
        verdict += " (paper outside)"
    if settled_early(rec):
        verdict += f" (settled: only {' and '.join(rec['still_improving'])}, ahead, still improving)"
    return verdict + across_seeds(rec)


def claims_markdown(results: Iterable[dict]) -> list[str]:
    """The lines of the ``## Claims`` section: the rule, then one table row per claim comparison."""
    lines = [
        "## Claims: two models compared at equal recipe",
        "",
        "Generated from the `claim-*` comparisons in `results/results.jsonl` (`memread compare --record`, run by "
        "`python -m reproduction.claims`); notes in `results/notes/claims.md`. **Verdict rule** "
        "(`reproduction.verdicts.claim_verdict`): *p* is the paired test on the test units (pooled over seeds where "
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
        verdict = claim_verdict_text(rec)
        budget = str(rec.get("budget") or CLAIM_BUDGETS.get(rec["experiment"], "-"))
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



# ----------------------------------------------------------------------------- the docs' paper pages


def _claim_number(x: float, percent: bool, sign: bool = True) -> str:
    """A difference or a mean of a claim line for the docs: accuracies in percent with two decimals, other metrics
    as :func:`_g` writes them (four decimals below 1: MAP, MRR)."""
    x = 100.0 * float(x) if percent else float(x)
    if percent or abs(x) >= 1:
        return f"{x:+.2f}" if sign else f"{x:.2f}"
    return _signed(x) if sign else _g(x)


def paper_markdown(paper: str, table: Sequence[Row], results: Sequence[dict]) -> str:
    """A paper's results for its docs page (``docs/papers/*.md``, put in by the MkDocs hook
    :mod:`reproduction.docs_tables`): per table, each row with a config or a number (ours, the paper's, the
    verdict), then the paper's claims (A - B, paired p, the paper's A - B, the verdict). The same numbers and
    verdicts as ``results/REPRODUCTION.md``, generated from the same ledger, so the docs never copy one by hand."""
    from reproduction.claims import claim_of

    results = list(results)
    mine = [r for r in table if r.paper == paper]
    if not mine:
        raise MemreadError(f"no rows of paper {paper!r}; papers: {', '.join(PAPERS)}")
    lines = []
    for tab in dict.fromkeys(r.table for r in mine):
        shown = [(r, best_recorded(r, results, table)) for r in mine if r.table == tab]
        shown = [(r, b) for r, b in shown if b is not None or (r.config and r.split == "test")]
        if not shown:
            continue
        lines += [f"**{tab}**", "", "| row | data | paper | ours | verdict |", "|---|---|---:|---|---|"]
        for r, best in shown:
            if best is None:
                ours = "-"
            else:
                n = len(best.seeds) if best.seeds else 1
                ours = (_fmt(best.value, r.metric) + (f" ± {_fmt(best.std, r.metric)}" if best.std is not None else "")
                        + f" ({n} seed{'s' if n > 1 else ''})" + (f" on {r.stand_in}" if r.stand_in else ""))
            data = f"{dataset_text(r)}, {r.metric} ({r.split})"
            lines.append("| " + " | ".join(cell(c) for c in (
                r.name, data, _paper(r.paper_value, r.metric), ours, short(_verdict_short(r, best), 90))) + " |")
        lines.append("")
    found = [(rec, *claim_of(rec["experiment"])) for rec in claim_records(results) if claim_of(rec["experiment"])]
    claims = [(rec, claim, comparison) for rec, claim, comparison in found if claim.paper_of(comparison) == paper]
    if claims:
        lines += ["**Claims** (two models at one recipe; *p*: the paired test on the test units, pooled over the "
                  "seeds; accuracies in percent)", "",
                  "| claim | A vs B | A - B [95 % interval] | p | seeds | paper | verdict |",
                  "|---|---|---|---:|---:|---:|---|"]
        for rec, claim, comparison in claims:
            percent = str(rec["metric"]) == "accuracy_difference"  # as the rows show accuracies

            def num(x: float, sign: bool = True) -> str:
                return _claim_number(x, percent, sign)

            ci, p, paper_value = _interval(rec), _p(rec), rec.get("paper_value")
            interval = f" [{num(ci[0])}, {num(ci[1])}]" if ci else ""
            verdict = claim_verdict_text(rec)
            a, b = comparison.split("-vs-", 1) if "-vs-" in comparison else (comparison, "")
            means = [rec.get("mean_a", rec.get("a")), rec.get("mean_b", rec.get("b"))]
            both = f": {num(means[0], False)} vs {num(means[1], False)}" if all(map(is_number, means)) else ""
            seeds = rec.get("seeds")
            level = is_number(paper_value) and (paper_value == 0 or rec.get("paper_claim") == "level")
            paper_text = "0 (level)" if level else (num(paper_value) if is_number(paper_value) else "-")
            lines.append("| " + " | ".join(cell(c) for c in (
                f"`{claim.name}`", f"{a} vs {b}{both}" if b else comparison, num(rec["value"]) + interval,
                f"{p:.2g}" if p is not None else "-", str(len(seeds) if isinstance(seeds, list) else 1),
                paper_text, verdict)) + " |")
        lines.append("")
    return "\n".join(lines)
