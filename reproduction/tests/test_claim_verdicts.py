"""The Claims section of results/REPRODUCTION.md (reproduction.verdicts, reproduction.render): each claim comparison's verdict by the
rule in the module's docstring, the latest line of each claim, the paper's difference flagged when our interval
excludes it, and the section inside the generated file."""

from __future__ import annotations

import pytest

from reproduction import REPO
from reproduction.ledger import CLAIM_BUDGETS as BUDGETS
from reproduction.render import claims_markdown, render_markdown
from reproduction.rows import rows
from reproduction.verdicts import claim_records, claim_verdict


def line(value, p, paper, **more):
    return {"experiment": "claim-x-a-vs-b", "metric": "accuracy_difference", "split": "test", "value": value,
            "p_value": p, "ci_95": [value - 0.01, value + 0.01], "paper_value": paper, **more}


@pytest.mark.parametrize("rec, verdict", [
    (line(+0.02, 0.01, +0.014), "holds"),  # significant, the paper's sign
    (line(-0.02, 0.01, +0.014), "does not hold"),  # significant, the other sign
    (line(+0.02, 0.30, +0.014), "within noise"),
    (line(-3.0, 0.01, -2.4, metric="ppl_difference"), "holds"),  # lower perplexity: both negative
    (line(+2.3, 0.0002, 0.0), "does not hold"),  # the paper has them level
    (line(+0.5, 0.40, 0.1, paper_claim="level"), "holds"),
    (line(+30.0, 0.0002, -7.0, converged=False), "not converged"),
    # a run still improving where only the side already ahead is: more training can only widen the gap
    (line(+30.0, 0.0002, -7.0, converged=False, still_improving=["B"], higher_is_better=False), "does not hold"),
    (line(-9.0, 0.0002, -7.0, converged=False, still_improving=["A"], higher_is_better=False), "holds"),
    (line(+0.02, 0.01, 0.0, converged=False, still_improving=["A"], higher_is_better=True), "does not hold"),
    # ... but not where the side behind is still improving, nor where the gap is noise, nor on old lines
    (line(+30.0, 0.0002, -7.0, converged=False, still_improving=["A"], higher_is_better=False), "not converged"),
    (line(+30.0, 0.0002, -7.0, converged=False, still_improving=["A", "B"], higher_is_better=False),
     "not converged"),
    (line(+3.0, 0.2, -7.0, converged=False, still_improving=["B"], higher_is_better=False), "not converged"),
    (line(+30.0, 0.0002, -7.0, converged=False, still_improving=["B"]), "not converged"),
    (line(-4.3, 0.0002, None), "no claim in the paper"),
    # several seeds: the pooled paired test decides, not the per-pair p of the line
    ({**line(-0.0125, 0.9, 0.012), "pooled_p_value": 0.043, "welch_p": 0.27}, "does not hold"),
    ({**line(+0.003, 0.001, 0.014), "pooled_p_value": 0.56}, "within noise"),
])
def test_the_verdict_rule(rec, verdict):
    assert claim_verdict(rec) == verdict


def test_the_latest_line_of_each_claim_speaks_for_it_and_other_lines_are_not_claims():
    results = [line(+0.02, 0.30, 0.014), {**line(+0.02, 0.01, 0.014)},  # the same claim, recorded again
               {**line(0.01, 0.01, 0.01), "experiment": "claim-y-c-vs-d"},
               {"experiment": "claim-y-c", "metric": "ppl", "value": 120.0},  # a model's own number
               {"experiment": "sst-lstm", "metric": "accuracy_difference", "value": 0.1}]  # not a claim
    recs = claim_records(results)
    assert [r["experiment"] for r in recs] == ["claim-x-a-vs-b", "claim-y-c-vs-d"]
    assert claim_verdict(recs[0]) == "holds"


def test_a_row_shows_means_over_seeds_the_pooled_interval_and_flags_a_paper_difference_outside_it():
    rec = {"experiment": "claim-sst-fine-lstmn-vs-lstm", "metric": "accuracy_difference", "value": -0.0125,
           "paper_value": 0.012, "seeds": [1, 2, 3], "a": [0.409, 0.425, 0.396], "b": [0.425, 0.42, 0.422],
           "mean_a": 0.4098, "std_a": 0.0145, "mean_b": 0.4223, "std_b": 0.0028, "welch_p": 0.272,
           "pooled_p_value": 0.0434, "pooled_ci_95": [-0.024, -0.0008], "commit": "abc1234", "budget": "early stop"}
    row = claims_markdown([rec])[-1]
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[0] == "`sst-fine-lstmn-vs-lstm`" and cells[1] == "accuracy"
    assert cells[2] == "0.4098 ± 0.0145" and cells[3] == "0.4223 ± 0.0028"
    assert cells[4] == "-0.0125 [-0.0240, -0.0008]" and cells[5] == "0.0434" and cells[6] == "0.272"
    assert cells[7] == "-" and cells[9] == "3" and cells[10] == "early stop"
    assert cells[-1] == "does not hold (paper outside)"
    # what the runs cost, seed by seed, said as means beside the budget (minutes only where each seed counted them)
    cost = {"a": [{"tokens": 8_000_000, "train_s": 2400.0}, {"tokens": 10_000_000, "train_s": 2520.0}],
            "b": [{"tokens": 9_000_000, "train_s": None}, {"tokens": 9_000_000, "train_s": 700.0}]}
    row = claims_markdown([{**rec, "cost": cost}])[-1]
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[10] == "early stop; cost a seed: A 41 min, 9.0M tokens; B 9.0M tokens"
    # a run that crossed devices (begun on a lent GPU, finished on a CPU): its minutes on each beside the sum
    crossed = {"a": [{"tokens": 8_000_000, "train_s": 3600.0, "train_s_by_device": {"cuda": 480.0, "cpu": 3120.0}}],
               "b": [{"tokens": 9_000_000, "train_s": 600.0}]}
    row = claims_markdown([{**rec, "cost": crossed}])[-1]
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[10] == "early stop; cost a seed: A 60 min (52 cpu + 8 cuda), 8.0M tokens; B 10 min, 9.0M tokens"
    inside = claims_markdown([{**rec, "paper_value": -0.01}])[-1]
    assert inside.rstrip(" |").endswith("holds")
    # the bootstrap over seeds and units beside it: where it does not find the gap the verdict rests on, it says so
    row = claims_markdown([{**rec, "seeds_units_p_value": 0.21, "seeds_units_ci_95": [-0.03, 0.004]}])[-1]
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[7] == "0.21" and cells[-1] == "does not hold (paper outside) (not across seeds: p = 0.21)"
    row = claims_markdown([{**rec, "seeds_units_p_value": 0.03}])[-1]
    assert row.rstrip(" |").endswith("does not hold (paper outside)")  # found across seeds too: nothing to add
    row = claims_markdown([{**rec, "pooled_p_value": 0.3, "seeds_units_p_value": 0.5}])[-1]
    assert row.rstrip(" |").endswith("within noise (paper outside)")  # not significant either way
    assert claim_verdict({**rec, "seeds_units_p_value": 0.21}) == "does not hold"  # the rule itself is unchanged


def test_the_generated_file_holds_the_claims_section():
    text = render_markdown(rows(), [line(+0.02, 0.01, +0.014)])
    assert "## Claims: two models compared at equal recipe" in text
    assert "| `x-a-vs-b` | accuracy |" in text and text.index("## Claims") < text.index("## lstmn:")


def test_the_claims_picture_draws_a_row_per_claim_in_a_panel_per_metric(tmp_path, monkeypatch):
    """``memread reproduce list --plot``: one panel per metric, one row per claim (its latest line), the verdict's
    colour, and the paper's difference drawn where the paper makes a claim."""
    import json

    from memread import cli
    from memread.errors import MemreadError
    from memread.tools import viz
    from reproduction import render as claims
    from memread.tools.viz import plt

    recs = [line(+0.02, 0.01, +0.014), {**line(+0.03, 0.01, +0.014), "seeds_units_ci_95": [-0.01, 0.07]},  # latest
            {**line(-3.0, 0.4, -2.4, metric="ppl_difference"), "experiment": "claim-y-c-vs-d"},
            {**line(+30.0, 0.0002, -7.0, converged=False, metric="ppl_difference"), "experiment": "claim-z-e-vs-f"},
            {**line(-4.3, 0.0002, None, metric="ppl_difference"), "experiment": "claim-z-e-vs-g"}]
    drawn = {}
    monkeypatch.setattr(viz, "save", lambda fig, path: drawn.setdefault("fig", fig) and path)  # keep the figure
    claims.claims_png(recs, tmp_path / "c.png")
    accuracy, ppl = drawn["fig"].axes
    assert [t.get_text() for t in accuracy.get_yticklabels()] == ["x-a-vs-b (holds)"]
    assert [t.get_text() for t in ppl.get_yticklabels()] == [
        "z-e-vs-g (no claim in the paper)", "z-e-vs-f (not converged)", "y-c-vs-d (within noise)"]
    dots = [l for l in accuracy.lines if l.get_marker() == "o"]
    assert [tuple(l.get_xdata()) for l in dots] == [(0.03,)] and dots[0].get_color() == "tab:green"
    dotted = [l for l in accuracy.lines if l.get_linestyle() == ":"]  # the interval over seeds and units
    assert [tuple(l.get_xdata()) for l in dotted] == [(-0.01, 0.07)] and not [l for l in ppl.lines
                                                                             if l.get_linestyle() == ":"]
    diamonds = [l for l in ppl.lines if l.get_marker() == "D"]
    assert sorted(float(l.get_xdata()[0]) for l in diamonds) == [-7.0, -2.4]  # none for "no claim in the paper"
    plt.close(drawn["fig"])
    monkeypatch.undo()
    # the command writes the PNG; without claims, one clear line
    results = tmp_path / "results.jsonl"
    results.write_text("".join(json.dumps(r) + "\n" for r in recs))
    assert cli.main(["reproduce", "list", "--plot", str(tmp_path / "claims.png"), "--results", str(results)]) == 0
    assert (tmp_path / "claims.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(MemreadError, match="no claim comparisons"):
        claims.claims_png([], tmp_path / "none.png")


def test_a_verdict_settled_with_the_leader_still_improving_says_so():
    rec = line(+30.0, 0.0002, -7.0, converged=False, still_improving=["B"], higher_is_better=False,
               metric="ppl_difference")
    row = next(r for r in claims_markdown([rec]) if "x-a-vs-b" in r)
    assert row.endswith("| does not hold (paper outside) (settled: only B, ahead, still improving) |")
    behind = {**rec, "still_improving": ["A"]}
    assert next(r for r in claims_markdown([behind]) if "x-a-vs-b" in r).endswith("| not converged |")


def test_every_recorded_claim_carries_what_the_issue_asks_of_its_line():
    """Each claim's line in the committed results/results.jsonl (the latest, which speaks for it): the test split,
    its paper value (None where the paper makes no claim), the seeds (a seed a side where one run each), the
    comparison's wall time, and how each run ended."""
    import json

    results = REPO / "results" / "results.jsonl"
    recs = claim_records([json.loads(text) for text in results.read_text(encoding="utf-8").splitlines() if text])
    assert len(recs) >= 30
    for rec in recs:
        name, seeds = rec["experiment"], rec.get("seeds")
        assert rec["split"] == "test" and "paper_value" in rec and isinstance(rec.get("wall_s"), float), name
        assert isinstance(seeds, list) and seeds and all(isinstance(s, int) for s in seeds) or (
            isinstance(seeds, dict) and sorted(seeds) == ["a", "b"]), name
        several = isinstance(rec.get("a"), list)  # --seeds: each seed's value a side
        assert not several or len(rec["a"]) == len(seeds) == len(rec["b"]), name
        assert rec.get("commit") and str(rec.get("command", "")).count("memread compare") >= 1, name
        assert rec.get("budget") or name in BUDGETS, name  # how each run ended (older lines: the module's words)
