"""``memread reproduce``: the table of the four papers' rows, the verdict rule, rerunning a row with several seeds
(appending to a results file), and ``results/REPRODUCTION.md`` being current."""

from __future__ import annotations

import json
import re
import statistics
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from memread import cli
from memread.config import load_experiment
from memread.errors import MemreadError
from memread.training.checkpoint import loop_state
from reproduction import REPO, ledger, train
from reproduction import rows as paper_rows
from reproduction.render import ours_text, render_markdown, verdict_text
from reproduction.rows import Row, config_path
from reproduction.tests.conftest import TINY
from reproduction.verdicts import Recorded, best_recorded, verdict
RESULTS = REPO / "results" / "results.jsonl"
PAPERS_DIR = REPO.parent / "shared" / "papers"
PAPER_FILES = {"lstmn": "lstmn-cheng-dong-lapata-2016.md", "nse": "nse-munkhdalai-yu-2016.md",
               "daniluk": "short-attention-spans-daniluk-2017.txt",
               "sordoni": "iterative-alternating-attention-sordoni-2016.md"}
METRICS = {"ppl", "accuracy", "map", "mrr", "mse", "bleu"}


def recorded() -> list[dict]:
    return ledger.load_results(RESULTS)


# ----------------------------------------------------------------------------- the table


def test_rows_are_well_formed_and_ids_unique():
    rows = paper_rows.rows()
    ids = [r.id for r in rows]
    assert len(ids) == len(set(ids))
    for r in rows:
        assert r.paper in paper_rows.PAPERS and r.id.startswith(f"{r.paper}-"), r.id
        assert re.fullmatch(r"[a-z0-9-]+", r.id), r.id
        assert r.metric in METRICS and r.split in ("train", "valid", "test"), r.id
        assert r.data_missing is None or r.data_missing.startswith("data not available here: "), r.id
        assert r.stand_in is None or r.data_missing, f"{r.id}: a stand-in is only for rows whose data is missing"
        assert (r.scale == 100.0) == (r.metric == "accuracy"), r.id
    for example in ("lstmn-t1-lstmn-3layer", "nse-t2-wikiqa-mma-nse-attention", "daniluk-f2c-kvp"):
        assert example in ids


def test_every_table_row_of_the_four_papers_is_there():
    """Rows per table = the number of printed result cells (a row per column; a "-" cell is no row); LSTMN Table 1's
    six trained models once more, read each sentence alone."""
    assert len([r for r in paper_rows.rows() if r.protocol == "sentence"]) == 6
    counts: dict[tuple[str, str], int] = {}
    for r in paper_rows.rows():
        if r.protocol == "sentence":
            continue
        counts[r.paper, r.table] = counts.get((r.paper, r.table), 0) + 1
    assert counts == {
        ("lstmn", "Table 1"): 8, ("lstmn", "Table 2"): 12 * 2, ("lstmn", "Table 3"): 11,
        ("nse", "Table 1"): 12 * 2, ("nse", "Table 2"): 7 * 2, ("nse", "Table 3"): 9 * 2, ("nse", "Table 4"): 7 * 4,
        ("nse", "Table 5"): 3 * 3,
        ("daniluk", "Figure 2a"): 4 * 4, ("daniluk", "Figure 2b"): 4 * 2, ("daniluk", "Figure 2c"): 9 * 2,
        ("daniluk", "Figure 2d"): 20 * 4 - 15,
        ("sordoni", "Table 2"): 9 * 4 - 4, ("sordoni", "Table 3"): 12 * 2,
    }
    by_paper = {p: sum(n for (q, _), n in counts.items() if q == p) for p in paper_rows.PAPERS}
    assert by_paper == {"lstmn": 43, "nse": 93, "daniluk": 107, "sordoni": 56}


def test_every_paper_value_is_printed_in_its_paper():
    """Each row's number appears in the paper's text as printed (Figure 2d's fractions are percent here)."""
    if not PAPERS_DIR.is_dir():
        pytest.skip(f"papers not found: {PAPERS_DIR}")
    texts = {p: (PAPERS_DIR / f).read_text(encoding="utf-8") for p, f in PAPER_FILES.items()}
    for r in paper_rows.rows():
        v = r.paper_value
        forms = {f"{v:.1f}", f"{v:.2f}", f"{v:.4f}", f"{v:g}"}
        if r.table == "Figure 2d":
            forms = {f"{v / 100:.3f}"}  # printed as 0.523
        assert any(re.search(rf"(?<![\d.]){re.escape(f)}(?!\d)", texts[r.paper]) for f in forms), (r.id, forms)


def test_every_config_exists_and_loads():
    paths = sorted({r.config for r in paper_rows.rows() if r.config})
    assert len(paths) >= 40
    for path in paths:
        full = paper_rows.config_path(Row("x", "lstmn", "t", "x", "x", "ppl", "test", 1.0, path))
        assert full.is_file(), path
        load_experiment(full)


def test_every_experiment_named_is_in_results_jsonl():
    results = recorded()
    names = {r.get("experiment") for r in results}
    for r in paper_rows.rows():
        missing = [e for e in r.experiments if e not in names]
        assert not missing, f"{r.id}: {missing} not in {RESULTS}"
        if not r.experiments and best_recorded(r, results) is None:
            assert verdict(r, None) in ("not tested", "data not available"), r.id
        if r.experiments:
            assert best_recorded(r, results) is not None, \
                f"{r.id}: none of {r.experiments} records {r.metric} ({r.split})"


def test_rows_without_data_say_what_is_missing():
    rows = {r.id: r for r in paper_rows.rows()}
    assert "SNLI train" in rows["nse-t1-snli-nse"].data_missing
    assert "IWSLT14 train" in rows["nse-t5-iwslt14-nse-nse"].data_missing
    assert "Tang" in rows["nse-t4-imdb-nse-nse"].data_missing
    assert "CBT" in rows["sordoni-t2-cbt-ne-iaa"].data_missing and "CNN" in rows["sordoni-t3-cnn-iaa"].data_missing
    assert "WikiText train" in rows["daniluk-f2c-kvp"].data_missing
    for rid in ("lstmn-t1-lstmn-3layer", "nse-t2-wikiqa-mma-nse-attention", "lstmn-t2-sst-fine-lstmn"):
        assert rows[rid].data_missing is None


# ----------------------------------------------------------------------------- verdicts and best numbers

ACC = Row("t-acc", "lstmn", "T", "m", "d", "accuracy", "test", 80.0, scale=100.0)
PPL = Row("t-ppl", "lstmn", "T", "m", "d", "ppl", "test", 100.0)


def rec(value: float, std: float | None = None) -> Recorded:
    return Recorded("e", value, std, (1, 2, 3) if std is not None else (1,), "abc", "1 epoch", "d")


def test_the_verdict_rule():
    assert verdict(ACC, None) == "not tested"
    assert verdict(replace(ACC, data_missing="data not available here: x"), rec(99.0)) == "data not available"
    assert verdict(ACC, rec(80.0)) == verdict(ACC, rec(85.0)) == "holds"
    assert verdict(ACC, rec(79.5, std=0.6)) == "within noise"
    assert verdict(ACC, rec(79.5, std=0.4)) == "does not hold"
    assert verdict(ACC, rec(79.99)) == "does not hold"  # one seed: no noise band
    assert verdict(PPL, rec(99.0)) == "holds" and verdict(PPL, rec(101.0, std=2.0)) == "within noise"
    assert verdict(PPL, rec(110.0, std=2.0)) == "does not hold"


def test_best_recorded_picks_the_best_line_of_the_row():
    row = replace(PPL, experiments=("a", "b"))
    lines = [
        {"experiment": "a", "split": "test", "metric": "ppl", "value": 120.0, "commit": "c1", "command": "x"},
        {"experiment": "b", "split": "test", "metric": "ppl", "value": 110.0, "commit": "c2", "seeds": [1, 2],
         "per_seed": [109.0, 111.0], "budget": "2 epochs"},
        {"experiment": "b", "split": "valid", "metric": "ppl", "value": 90.0},  # another split
        {"experiment": "b", "split": "test", "metric": "nll", "value": 1.0},  # another metric
        {"experiment": "b", "split": "test", "metric": "ppl", "value": 100.0, "seed": 1},  # one seed of a mean line
        {"experiment": "z", "split": "test", "metric": "ppl", "value": 50.0},  # not the row's
    ]
    best = best_recorded(row, lines, [row])
    assert (best.experiment, best.value, best.commit, best.seeds, best.budget) == ("b", 110.0, "c2", (1, 2), "2 epochs")
    assert best.std == pytest.approx(statistics.stdev([109.0, 111.0]))
    assert best_recorded(row, lines[:1], [row]).value == 120.0
    acc = replace(ACC, experiments=("a",))
    two = [{"experiment": "a", "split": "test", "metric": "accuracy", "value": v} for v in (70.0, 75.0, 72.0)]
    assert best_recorded(acc, two, [acc]).value == 75.0  # higher is better for accuracy
    # a mean over seeds stands before any single run, however lucky
    mean = {"experiment": "a", "split": "test", "metric": "accuracy", "value": 71.0, "seeds": [1, 2, 3], "std": 1.5}
    got = best_recorded(acc, [*two, mean], [acc])
    assert (got.value, got.seeds, got.std) == (71.0, (1, 2, 3), 1.5)
    assert best_recorded(acc, [mean, {**mean, "value": 73.0, "seeds": [1, 2]}], [acc]).value == 73.0
    # ... but not where it is part of a larger sample: seeds 1-3 again among ten, the ten stand for them
    three = {**mean, "value": 72.0, "per_seed": [72.5, 71.0, 72.5]}
    ten = {**mean, "value": 70.5, "seeds": list(range(1, 11)), "per_seed": [72.5, 71.0, 72.5, *[70.0] * 7]}
    assert best_recorded(acc, [three, ten], [acc]).seeds == tuple(range(1, 11))
    assert best_recorded(acc, [ten, three], [acc]).value == 70.5
    other_runs = {**ten, "per_seed": [72.0, *ten["per_seed"][1:]]}  # seed 1 is another run: not the same sample
    assert best_recorded(acc, [three, other_runs], [acc]).value == 72.0
    assert best_recorded(acc, [three, {**ten, "experiment": "b"}], [replace(acc, experiments=("a", "b"))]).value == 72.0
    # the same recipe (memread reproduce's command but for --seeds) over more seeds stands for seeds trained again
    cmd = "memread reproduce a --seeds {} --run-root runs --set train.epochs=15"
    again = {**three, "command": cmd.format(3), "per_seed": [73.0, 72.0, 72.5], "value": 72.5}
    assert best_recorded(acc, [again, {**other_runs, "command": cmd.format(10)}], [acc]).value == 70.5
    longer = {**other_runs, "command": cmd.format(10).replace("15", "30")}  # another recipe: both stand
    assert best_recorded(acc, [again, longer], [acc]).value == 72.5
    # the same settings in another order are the same recipe
    two_sets = "memread reproduce a --seeds {} --run-root runs --set train.epochs=15 --set train.patience=3"
    swapped = "memread reproduce a --seeds {} --run-root runs --set train.patience=3 --set train.epochs=15"
    again = {**again, "command": two_sets.format(3)}
    assert best_recorded(acc, [again, {**other_runs, "command": swapped.format(10)}], [acc]).value == 70.5
    assert best_recorded(acc, [again, {**other_runs, "command": swapped.format(10).replace("=3", "=4")}],
                         [acc]).value == 72.5
    # the row's config as it is stands before a reproduce with settings changed from it, among means as among
    # single runs; a mean over several seeds still comes first
    small = {**mean, "value": 74.0, "budget": "12 steps; changed from the config: reader.hidden=300 (config: 512)"}
    assert best_recorded(acc, [{**mean, "value": 71.0}, small], [acc]).value == 71.0
    assert best_recorded(acc, [small, {**mean, "value": 71.0, "seeds": [1]}], [acc]).value == 74.0
    # ... and a one-seed line of the config as it is rides along with it, in the cell and the verdict
    big = {**mean, "value": 61.0, "seeds": [1], "std": None, "budget": "7 epochs"}
    got = best_recorded(acc, [small, big], [acc])
    assert (got.value, got.as_configured.value, got.as_configured.seeds) == (74.0, 61.0, (1,))
    at_66 = replace(acc, paper_value=66.0)
    assert ours_text(at_66, got).endswith("; the config as it is: 61.00 (1 seed; 7 epochs; commit unknown; a)")
    assert verdict_text(at_66, got) == "holds (the config as it is: does not hold)"
    assert verdict_text(replace(acc, paper_value=60.0), got) == "holds"  # the same verdict: said once
    assert best_recorded(acc, [small, {**small, "value": 70.0}], [acc]).as_configured is None  # none as it is
    assert best_recorded(acc, [{**mean, "value": 71.0}, big], [acc]).as_configured is None  # shown already
    assert best_recorded(acc, [small, {**small, "value": 73.0, "budget": "12 steps"}], [acc]).value == 73.0
    # lines appended under the row's own id count; dataset_match narrows only the named experiments
    own = {"experiment": "t-ppl", "split": "test", "metric": "ppl", "value": 105.0, "dataset": "d"}
    narrowed = replace(row, dataset_match="cloze NE ")
    assert best_recorded(narrowed, [*lines, own], [narrowed]).value == 105.0
    assert best_recorded(narrowed, lines, [narrowed]) is None


# ----------------------------------------------------------------------------- memread reproduce ROW_ID


@pytest.fixture
def tiny(tmp_path, monkeypatch):
    """Two test-only rows (test and valid perplexity of one tiny built-in-data config) added to the table, a
    temporary results file (``MEMREAD_RESULTS``) and run root."""
    monkeypatch.setenv("MEMREAD_DATA", str(tmp_path))  # the built-in stories need no data
    monkeypatch.setenv("MEMREAD_RESULTS", str(tmp_path / "results.jsonl"))
    monkeypatch.delenv("MEMREAD_DEBUG", raising=False)
    config = tmp_path / "tiny.toml"
    config.write_text(TINY)
    test_row = Row("lstmn-test-tiny", "lstmn", "Test table", "tiny LSTM LM", "stories", "ppl", "test", 100.0,
                   str(config))
    valid_row = replace(test_row, id="lstmn-test-tiny-dev", split="valid", paper_value=90.0)
    monkeypatch.setattr(paper_rows, "ROWS", [*paper_rows.ROWS, test_row, valid_row])
    return tmp_path, test_row, valid_row


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = cli.main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def final_ppl(run_dir: Path, split: str) -> float:
    return json.loads((run_dir / "final.json").read_text())[split]["ppl"]


def test_reproduce_two_seeds_appends_the_mean_and_each_seed(tiny, capsys):
    tmp, row, dev = tiny
    runs = tmp / "runs"
    code, out, err = run_cli(capsys, "reproduce", row.id, "--seeds", "2", "--run-root", str(runs),
                             "--set", "train.max_steps=3")
    assert code == 0, err
    lines = ledger.load_results(tmp / "results.jsonl")
    assert len(lines) == 2 * 3  # valid and test: the mean line, then one line per seed
    assert [(r["split"], r.get("seed")) for r in lines] == [("valid", None), ("valid", 1), ("valid", 2),
                                                            ("test", None), ("test", 1), ("test", 2)]
    seed_dirs = {s: runs / row.id / f"seed{s}" for s in (1, 2)}
    commit = ledger.git_commit()
    for split, paper in (("valid", 90.0), ("test", 100.0)):
        mean, one, two = (r for r in lines if r["split"] == split)
        values = [final_ppl(seed_dirs[s], split) for s in (1, 2)]
        assert values[0] != values[1]  # the seeds differ
        assert mean["experiment"] == one["experiment"] == row.id and mean["metric"] == "ppl"
        assert mean["value"] == pytest.approx(statistics.fmean(values), abs=1e-4)
        assert mean["std"] == pytest.approx(statistics.stdev(values), abs=1e-4)
        assert mean["seeds"] == [1, 2] and mean["per_seed"] == pytest.approx(values, abs=1e-4)
        assert (one["seeds"], one["value"]) == ([1], pytest.approx(values[0], abs=1e-4))
        assert (two["seeds"], two["value"]) == ([2], pytest.approx(values[1], abs=1e-4))
        assert mean["paper_value"] == one["paper_value"] == paper  # the sibling row's paper value on valid
        assert mean["commit"] == commit
        assert mean["command"].startswith(f"memread reproduce {row.id} --seeds 2")
        assert "--set train.seed=2" in two["command"] and "train.max_steps=3" in two["command"]
        assert isinstance(mean["wall_s"], float) and re.search(r"^3 steps, [\d,]+ tokens \(", mean["budget"])
    printed = [json.loads(x) for x in out.splitlines()]
    assert printed == [r for r in lines if "seed" not in r]
    # the table takes them: the mean line, for the row and for its valid sibling
    best = best_recorded(row, lines)
    assert (best.experiment, best.seeds) == (row.id, (1, 2)) and best.std is not None
    assert best_recorded(dev, lines).value == lines[0]["value"]
    listing = run_cli(capsys, "reproduce", "list", "--long")[1]
    line = next(x for x in listing.splitlines() if x.startswith(row.id + " "))
    assert f"{best.value:.2f} ± {best.std:.2f} (2 seeds" in line


def test_a_row_reproduced_with_another_model_says_so_in_every_budget(tiny, capsys, monkeypatch):
    """Overrides outside [train] (a smaller reader) make the number not the config's model: each line's budget, and
    so the table, names what was changed and what the config has, once; [train] overrides change nothing of the
    model."""
    tmp, row, _ = tiny
    monkeypatch.setattr(train, "_budget", lambda loop, cfg: f"seed {cfg.train.seed}'s budget")
    code, _, err = run_cli(capsys, "reproduce", row.id, "--seeds", "2", "--run-root", str(tmp / "runs"),
                           "--set", "train.max_steps=3", "--set", "reader.hidden=16", "--set", "head.emb=12")
    assert code == 0, err
    lines = ledger.load_results(tmp / "results.jsonl")
    note = "; changed from the config: head.emb=12 (config: 24), reader.hidden=16 (config: 32)"
    assert [r["budget"] for r in lines[:3]] == ["seed 1's budget; seed 2's budget" + note, "seed 1's budget" + note,
                                               "seed 2's budget" + note]
    assert len(lines) == 6 and all(r["budget"].endswith(note) and r["budget"].count(note) == 1 for r in lines)
    listing = run_cli(capsys, "reproduce", "list", "--long")[1]
    assert "changed from the config: head.emb=12 (config: 24), reader.hidden=16" in next(
        x for x in listing.splitlines() if x.startswith(row.id + " "))
    code, _, err = run_cli(capsys, "reproduce", row.id, "--run-root", str(tmp / "other"), "--set", "train.max_steps=3")
    assert code == 0, err
    assert "changed from the config" not in ledger.load_results(tmp / "results.jsonl")[-1]["budget"]


def test_reproduce_records_a_claims_runs_of_the_row_from_their_own_folders(tiny, capsys):
    """``--runs DIR``: the seed folders are DIR/seedS (a claim's runs of a row, runs/claims/CLAIM/LABEL), trained
    there or taken as they are, and the lines say where they came from."""
    tmp, row, _ = tiny
    label = tmp / "runs" / "claims" / "some-claim" / "lstm"
    code, _, err = run_cli(capsys, "reproduce", row.id, "--runs", str(label), "--set", "train.max_steps=3")
    assert code == 0, err
    assert (label / "seed1" / "final.json").is_file() and not (tmp / "runs" / "reproduce").exists()
    lines = ledger.load_results(tmp / "results.jsonl")
    test = next(r for r in lines if r["split"] == "test" and "seed" not in r)
    assert test["value"] == pytest.approx(final_ppl(label / "seed1", "test"), abs=1e-4)
    assert test["command"].startswith(f"memread reproduce {row.id} --seeds 1 --runs {label}")
    code, _, err = run_cli(capsys, "reproduce", row.id, "--runs", str(label), "--set", "train.max_steps=3")
    assert code == 0 and "finished before; taking its final.json" in err  # taken as it is, not trained again
    assert ledger.load_results(tmp / "results.jsonl")[-2]["value"] == test["value"]


def test_lstmn_table_1_is_there_in_both_protocols_each_row_reading_as_its_config_does():
    """Each of Table 1's six trained models has a stream row and a sentence row; a row's protocol is its config's
    [data] context; the table shows it beside the dataset."""
    table = [r for r in paper_rows.rows() if r.paper == "lstmn" and r.table == "Table 1"]
    for r in table:
        if r.protocol:
            assert load_experiment(config_path(r), []).data.context == r.protocol, r.id
    both = {r.id.removesuffix("-sentence") for r in table if r.protocol == "sentence"}
    assert both == {"lstmn-t1-lstm", "lstmn-t1-lstmn", "lstmn-t1-slstm-3layer", "lstmn-t1-glstm-3layer",
                    "lstmn-t1-dlstm-3layer", "lstmn-t1-lstmn-3layer"}
    assert all(paper_rows.find_row(i).protocol == "stream" for i in both)
    assert not [r for r in paper_rows.rows() if r.protocol and (r.paper, r.table) != ("lstmn", "Table 1")]
    text = render_markdown(paper_rows.rows(), [])
    assert "| `lstmn-t1-lstm-sentence` | LSTM (1 layer) | PTB (each sentence alone) | ppl (test) | 115 |" in text
    assert "| `lstmn-t1-lstm` | LSTM (1 layer) | PTB (stream) | ppl (test) | 115 |" in text


def test_reproduce_resumes_a_killed_run_and_reuses_a_finished_one(tiny, capsys):
    tmp, row, _ = tiny
    runs = tmp / "runs"
    args = ("reproduce", row.id, "--seeds", "2", "--run-root", str(runs))
    assert run_cli(capsys, *args, "--set", "train.max_steps=3")[0] == 0
    (runs / row.id / "seed1" / "final.json").unlink()  # killed before its final evaluation
    code, _, err = run_cli(capsys, *args, "--set", "train.max_steps=5")  # and a larger budget for both
    assert code == 0, err
    assert err.count("resuming from checkpoint_last.pt") == 2
    for s in (1, 2):
        assert loop_state(runs / row.id / f"seed{s}")["global_step"] == 5
        records = [json.loads(x) for x in (runs / row.id / f"seed{s}" / "metrics.jsonl").read_text().splitlines()]
        assert [r["step"] for r in records if r["event"] == "valid"] == [3, 5]  # one run, continued from step 3
    code, _, err = run_cli(capsys, *args, "--set", "train.max_steps=5")
    assert code == 0 and err.count("finished before; taking its final.json") == 2
    lines = ledger.load_results(tmp / "results.jsonl")
    assert len(lines) == 3 * 6
    assert [r["value"] for r in lines[-6:]] == [r["value"] for r in lines[-12:-6]]
    # a run of another model in the folder is refused, nothing appended
    code, _, err = run_cli(capsys, *args, "--set", "train.max_steps=5", "--set", "reader.hidden=16")
    assert code == 2 and "holds a run of another config (reader.hidden differs)" in err
    assert len(ledger.load_results(tmp / "results.jsonl")) == 18


def test_reproduce_takes_an_ended_run_kept_without_checkpoints_and_never_clears_it(tiny, capsys):
    """A folder put back from results/runs (final.json, metrics and unit records, no checkpoint: trained on another
    machine) is recorded from its final.json with its budget from its unit record; asked to train further it is
    refused in one line, nothing cleared, nothing appended."""
    tmp, row, _ = tiny
    runs = tmp / "runs"
    args = ("reproduce", row.id, "--seeds", "2", "--run-root", str(runs), "--set", "train.max_steps=3")
    assert run_cli(capsys, *args)[0] == 0
    first = ledger.load_results(tmp / "results.jsonl")
    folders = [runs / row.id / f"seed{s}" for s in (1, 2)]
    for folder in folders:
        for checkpoint in folder.glob("checkpoint_*.pt"):
            checkpoint.unlink()
    kept = {p: p.read_bytes() for folder in folders for p in folder.iterdir()}
    code, _, err = run_cli(capsys, *args)
    assert code == 0, err
    assert err.count("finished before (trained elsewhere); taking its final.json") == 2
    again = ledger.load_results(tmp / "results.jsonl")[len(first):]
    # the same numbers, budgets and cost (the seconds its training took, not this call's moment)
    assert [(r["split"], r.get("seed"), r["value"], r["budget"], r["wall_s"]) for r in again] == [
        (r["split"], r.get("seed"), r["value"], r["budget"], r["wall_s"]) for r in first]
    assert again[0]["wall_s"] == pytest.approx(again[1]["wall_s"] + again[2]["wall_s"], abs=0.11)
    assert re.search(r"^3 steps, [\d,]+ tokens \(epoch 1 of 1; max_steps 3, stopped: max_steps\)$", again[1]["budget"])
    code, out, err = run_cli(capsys, *args[:-1], "train.max_steps=5")
    assert code == 2 and out == "" and err.splitlines()[-1].startswith("memread: error: ")
    assert "without its checkpoints (trained elsewhere?), so it cannot train on with train.max_steps=5" in err
    assert {p: p.read_bytes() for folder in folders for p in folder.iterdir()} == kept  # nothing cleared
    assert len(ledger.load_results(tmp / "results.jsonl")) == 2 * len(first)


@pytest.mark.parametrize("row_id, says", [
    ("nse-t1-snli-nse", "data not available here: the full SNLI train split"),
    ("sordoni-t3-cnn-iaa", "data not available here: the CNN cloze set"),
    ("lstmn-t1-kn5", "memread has no config for 'KN5'"),
    ("lstmn-t1-lstmm", "no row 'lstmn-t1-lstmm' (did you mean lstmn-t1-lstm"),
])
def test_rows_that_cannot_run_are_refused_in_one_line(tiny, capsys, row_id, says):
    tmp, _, _ = tiny
    code, out, err = run_cli(capsys, "reproduce", row_id, "--seeds", "2", "--run-root", str(tmp / "runs"))
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("memread: error: ") and says in err
    assert not (tmp / "results.jsonl").exists() and not (tmp / "runs").exists()


# ----------------------------------------------------------------------------- the markdown


def test_the_markdown_lists_every_row():
    rows = paper_rows.rows()
    md = render_markdown(rows, recorded())
    for r in rows:
        assert f"| `{r.id}` |" in md, r.id
    for paper in paper_rows.PAPERS:
        assert f"## {paper}: " in md
    assert "**Verdict rule**" in md
    claims = md[md.index("## Claims"): md.index("## lstmn:")]  # the claims' comparisons, then the papers' rows
    table_lines = [x for x in md.replace(claims, "").splitlines() if x.startswith("| `")]
    assert len(table_lines) == len(rows)


def test_list_prints_every_row_and_the_markdown(capsys, monkeypatch):
    monkeypatch.setenv("MEMREAD_RESULTS", str(RESULTS))
    code, out, _ = run_cli(capsys, "reproduce", "list")
    assert code == 0
    first = {x.split()[0] for x in out.splitlines() if x.strip()}
    assert {r.id for r in paper_rows.rows()} <= first
    # for a terminal (issue 59): the summary first, a short line a row, then the claims, one line each
    lines = out.splitlines()
    assert lines[0].startswith("lstmn: 49 rows, ") and max(map(len, lines)) <= 120 and len(out) < 60_000
    claims = lines[lines.index(next(x for x in lines if x.startswith("claims ("))):]
    assert any(x.startswith("ptb-lstmn-1layer-dropout-long-lstmn-empty-vs-lstm ") and x.endswith("does not hold")
               for x in claims)
    code, out, _ = run_cli(capsys, "reproduce", "list", "--long")  # today's whole text
    assert code == 0 and "data not available here: the full CBT" in out and "(1 seed; 14 of 40 epochs; d18fa2b" in out
    code, out, _ = run_cli(capsys, "reproduce", "list", "--details", "lstmn-t1-lstmn")
    assert code == 0 and "ptb-lstmn-1x300-span3" in out and "recipe differs" in out
    code, out, _ = run_cli(capsys, "reproduce", "list", "--markdown")
    assert code == 0 and out == render_markdown(paper_rows.rows(), recorded())


def test_reproduction_md_is_current():
    """results/REPRODUCTION.md is render_markdown of results/results.jsonl; regenerate it with
    ``memread reproduce list --markdown > results/REPRODUCTION.md``."""
    committed = (REPO / "results" / "REPRODUCTION.md").read_text(encoding="utf-8")
    assert committed == render_markdown(paper_rows.rows(), recorded()), \
        "results/REPRODUCTION.md is stale: run memread reproduce list --markdown > results/REPRODUCTION.md"


def test_the_budget_of_a_run_that_used_up_its_epochs_names_its_last_epoch():
    from types import SimpleNamespace

    from reproduction.train import _budget

    cfg = SimpleNamespace(train=SimpleNamespace(epochs=4, max_steps=0))
    done = _budget({"global_step": 6176, "epoch": 4, "stopped": "epochs", "tokens_trained": 1000}, cfg)
    assert done == "6176 steps, 1,000 tokens (epoch 4 of 4; stopped: epochs)"
    early = _budget({"global_step": 10, "epoch": 1, "stopped": "early"}, cfg)
    assert early == "10 steps (epoch 2 of 4; stopped: early)"


@pytest.mark.slow  # starts processes
def test_the_recorded_commit_is_git_s_unless_memread_commit_names_it(monkeypatch):
    """A lent GPU machine's copy of the tree carries the git metadata of the session's first commit:
    ``MEMREAD_COMMIT`` names the commit whose files it runs."""
    monkeypatch.delenv("MEMREAD_COMMIT", raising=False)
    own = ledger.git_commit()
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=Path(ledger.__file__).parent,
                          capture_output=True, text=True).stdout.strip()
    assert own == (head or None)
    monkeypatch.setenv("MEMREAD_COMMIT", "abc1234")
    assert ledger.git_commit() == "abc1234"


def test_a_number_at_another_recipe_than_the_papers_is_not_judged_against_it():
    """Issue 59: LSTMN Table 1's 1-layer LSTMN at memread's dropout recipe (99.6 against the paper's 108, trained
    without dropout) said "holds" while the claim at that recipe, LSTMN against LSTM, does not: a number at another
    recipe says "recipe differs" and names the claim that compares it at its own recipe."""
    results = recorded()
    row = paper_rows.find_row("lstmn-t1-lstmn")
    best = best_recorded(row, results)
    assert best.experiment == "ptb-lstmn-1x300-span3" and best.value < row.paper_value  # better than the paper ...
    assert verdict(row, best) == "recipe differs"  # ... but not at its recipe
    assert "claim `ptb-lstmn-1layer-dropout-long`" in verdict_text(row, best)
    # the same row's number at the paper's recipe would be judged
    assert verdict(replace(row, recipe_differs=()), best) == "holds"
    # a row whose best is a run at the paper's recipe keeps its verdict (the 3-layer gLSTM's claim run)
    glstm = paper_rows.find_row("lstmn-t1-glstm-3layer")
    assert verdict(glstm, best_recorded(glstm, results)) == "does not hold"


@pytest.mark.slow  # starts processes
def test_reproduce_outside_a_checkout_says_it_needs_one_in_one_line(tmp_path):
    """memread reproduce (and compare --record, for the ledger) from outside a clone, as from an installed wheel:
    one line, exit 2, nothing run; --repo DIR names the clone. memread itself never imports reproduction."""
    import os
    import sys

    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MEMREAD_RESULTS")}

    def memread(*argv):
        return subprocess.run([sys.executable, "-m", "memread", *argv], cwd=tmp_path, env=env, capture_output=True,
                              text=True, timeout=120)

    done = memread("reproduce", "list")
    assert done.returncode == 2 and done.stdout == "" and done.stderr == (
        "memread: error: memread reproduce needs a memread checkout (its reproduction/ folder): run it from a clone, "
        "or pass --repo DIR\n")
    done = memread("compare", "a", "b", "--record", "x")
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "needs a memread checkout" in done.stderr
    done = memread("reproduce", "list", "--repo", str(REPO))
    assert done.returncode == 0 and done.stdout.startswith("lstmn: 49 rows")
    loaded = subprocess.run([sys.executable, "-c", "import memread, memread.cli, memread.tools.compare, sys; "
                             "print(any(m.split('.')[0] == 'reproduction' for m in sys.modules))"],
                            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert loaded.stdout.strip() == "False"


def test_a_papers_docs_tables_show_its_rows_and_its_claims_as_the_ledger_has_them():
    """``paper_markdown`` (the docs' paper pages, via the MkDocs hook): a row's mean over seeds with its std and its
    verdict; the paper's own claims only (a comparison's paper is its A run's row's), accuracy differences in
    percent, the paper's level claims as such, the paper's difference outside our interval flagged."""
    from reproduction.render import paper_markdown

    results = [
        {"experiment": "lstmn-t2-sst-fine-lstmn", "dataset": "sst", "split": "test", "metric": "accuracy",
         "value": 44.5, "std": 1.25, "seeds": [1, 2, 3], "per_seed": [43.0, 45.0, 45.5]},
        {"experiment": "claim-sst-fine-nse-vs-lstm", "split": "test", "metric": "accuracy_difference",
         "value": 0.033, "paper_value": 0.064, "pooled_p_value": 0.0008, "pooled_ci_95": [0.014, 0.052],
         "seeds": [1, 2, 3], "mean_a": 0.455, "mean_b": 0.422},
        {"experiment": "claim-sst-fine-lstmn-vs-lstm", "split": "test", "metric": "accuracy_difference",
         "value": -0.01, "paper_value": 0.012, "pooled_p_value": 0.5, "pooled_ci_95": [-0.02, 0.001],
         "seeds": [1, 2, 3], "mean_a": 0.41, "mean_b": 0.42},
        {"experiment": "claim-gutenberg-p-iaa-vs-as", "split": "test", "metric": "accuracy_difference",
         "value": 0.09, "paper_value": 0.0, "pooled_p_value": 0.0002, "pooled_ci_95": [0.08, 0.1]},
    ]
    table = paper_rows.rows()
    lstmn = paper_markdown("lstmn", table, results)
    assert "| LSTMN | SST fine-grained, accuracy (test) | 47.6 | 44.50 ± 1.25 (3 seeds) | does not hold |" in lstmn
    assert "| `sst-fine` | lstmn vs lstm: 41.00 vs 42.00 | -1.00 [-2.00, +0.10] | 0.5 | 3 | +1.20 | within noise " \
        "(paper outside) |" in lstmn
    assert "nse vs lstm" not in lstmn and "gutenberg" not in lstmn
    assert "| LSTM (1 layer) | PTB (each sentence alone), ppl (test) | 115 | - | not tested |" in lstmn
    nse = paper_markdown("nse", table, results)
    assert "| `sst-fine` | nse vs lstm: 45.50 vs 42.20 | +3.30 [+1.40, +5.20] | 0.0008 | 3 | +6.40 | holds (paper " \
           "outside) |" in nse
    sordoni = paper_markdown("sordoni", table, results)
    assert "| `gutenberg-p` | iaa vs as | +9.00 [+8.00, +10.00] | 0.0002 | 1 | 0 (level) | does not hold (paper " \
           "outside) |" in sordoni
    with pytest.raises(MemreadError, match="no rows of paper 'nope'"):
        paper_markdown("nope", table, results)
