"""The speed report (benchmarks/run.sh = memread.bench.suite): runs, tables, and the committed files'
freshness. No timing is asserted: the benches themselves are faked where they would be run."""

import json
import shlex
import sys
from pathlib import Path

import pytest

from memread.bench import suite
from memread.errors import MemreadError

REPO = Path(__file__).parent.parent


def line(check: str, r: float, run_id: str = "2026-11-26T08:00:00Z", **extra) -> dict:
    return {"check": check, "args": suite.CHECKS[check].args, "ratio": r, "commit": "abc1234",
            "machine": "Test CPU, 2 cores", "suite_run": run_id, "threads": 2, "torch": "2.13.0+cpu", **extra}


def test_the_table_gives_median_min_max_and_the_verdict_of_each_check():
    lines = [line("nse", r) for r in (0.30, 0.26, 0.28)] + [line("lstm", r) for r in (1.01, 0.99, 1.0)]
    text = suite.table(lines)
    row = next(r for r in text.splitlines() if r.startswith("| nse |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[3:7] == ["0.280", "0.260", "0.300", "3"]  # median, min, max, runs
    assert cells[7] == ">= 0.27 (ceiling 0.33)" and cells[8] == "yes (2 of 3 runs at the target)"
    lstm = next(r for r in text.splitlines() if r.startswith("| lstm |"))
    assert "| 1.000 | 0.990 | 1.010 | 3 | - | - |" in lstm  # no target: recorded only
    # rows follow the suite's order, whatever the lines' order; the header says where it was measured
    assert text.index("| lstm |") < text.index("| nse |")
    assert "commit `abc1234`, Test CPU, 2 cores, 2 thread(s)" in text
    assert all(json.dumps(x) in text.splitlines() for x in lines)  # and every raw line, as printed
    assert suite.CHECKS["nse"].met([0.27, 0.3]) == "yes" and suite.CHECKS["nse"].met([0.2]) == "no"
    assert suite.CHECKS["nse"].met([0.2, 0.28, 0.26]) == "no (1 of 3 runs at the target)"  # the median decides


def test_the_report_reads_the_latest_suite_run_only(tmp_path):
    (tmp_path / "benchmarks").mkdir()
    (tmp_path / "results").mkdir()
    old = [line("nse", 0.10, "2026-11-01T00:00:00Z")]
    new = [line("nse", r, "2026-11-26T08:00:00Z") for r in (0.3, 0.31, 0.29)]
    legacy = {"reader": "nse", "ratio": 0.5}  # a line from before the suite: no suite_run
    (tmp_path / suite.LINES).write_text("\n".join(json.dumps(x) for x in [legacy, *new, *old]) + "\n")
    (tmp_path / suite.REPORT).write_text(f"# B\n\nintro\n{suite.BEGIN}\nold table\n{suite.END}\n\n## History\nkept\n")
    (tmp_path / suite.README).write_text("# R\n\n| what | value |\n|---|---|\n"
                                         f"{suite.README_ROW}old) | nse 0.10 | — | x |\n| other | row |\n")
    report, readme = suite.report(tmp_path)
    assert "old table" not in report and report.endswith("## History\nkept\n") and "| nse | " in report
    assert "0.300 | 0.290 | 0.310 | 3" in report and "0.100" not in report
    assert "| nse 0.30 | — | — | `results/benchmarks.md` |" in readme and "nse 0.10" not in readme
    assert "abc1234" not in readme  # commits and machines are the report's, not the README's
    assert readme.endswith("| other | row |\n")  # the rest of the README is untouched
    assert (tmp_path / suite.REPORT).read_text() == report  # written back
    (tmp_path / suite.REPORT).write_text("# B\nno markers\n")
    with pytest.raises(MemreadError, match="markers of the generated section are missing"):
        suite.report(tmp_path)
    (tmp_path / suite.LINES).write_text(json.dumps(legacy) + "\n")
    with pytest.raises(MemreadError, match="no line of a suite run"):
        suite.report(tmp_path)


def test_a_suite_run_interleaves_the_checks_and_records_where_each_line_comes_from(tmp_path):
    # a stand-in for `memread bench`: prints a JSON line whose ratio encodes the call order
    fake = tmp_path / "fake_bench.py"
    calls = tmp_path / "calls.txt"
    fake.write_text("import json, sys\n"
                    f"log = open({str(calls)!r}, 'a'); log.write(' '.join(sys.argv[1:]) + '\\n'); log.close()\n"
                    f"n = sum(1 for _ in open({str(calls)!r}))\n"
                    "print('warming up'); print(json.dumps({'reader': sys.argv[1], 'ratio': n / 10, 'threads': 1}))\n")
    out = tmp_path / "lines.jsonl"
    run_id = suite.run(["nse", "lstm"], 2, out, bench_command=[sys.executable, str(fake)])
    got = [json.loads(x) for x in out.read_text().splitlines()]
    assert [g["check"] for g in got] == ["nse", "lstm", "nse", "lstm"]  # interleaved, not nse nse lstm lstm
    assert [g["ratio"] for g in got] == [0.1, 0.2, 0.3, 0.4]
    assert calls.read_text().splitlines()[0] == " ".join(shlex.split(suite.CHECKS["nse"].args))
    assert all(g["suite_run"] == run_id and g["args"] == suite.CHECKS[g["check"]].args for g in got)
    assert all(g["machine"] and g["commit"] and g["wall_s"] >= 0 for g in got)
    fake.write_text("import sys\nsys.stderr.write('boom: no such reader\\n'); sys.exit(2)\n")
    with pytest.raises(MemreadError, match="memread bench nse .* failed:\nboom: no such reader"):
        suite.run(["nse"], 1, out, bench_command=[sys.executable, str(fake)])


def test_every_check_names_a_bench_the_cli_accepts():
    from memread.cli import build_parser

    parser = build_parser()
    for check in suite.SUITE:
        if check.script:  # a benchmark script of the repository
            assert (REPO / shlex.split(check.args)[0]).is_file() and check.command.startswith("python benchmarks/")
            continue
        args = parser.parse_args(["bench", *shlex.split(check.args)])
        assert args.func.__name__ == "cmd_bench"
    assert len(suite.CHECKS) == len(suite.SUITE)  # names are unique


def test_the_report_keeps_each_checks_latest_run_and_says_where_each_came_from(tmp_path):
    (tmp_path / "benchmarks").mkdir()
    (tmp_path / "results").mkdir()
    first = [line("nse", 0.28, "2026-11-25T00:00:00Z"), line("kvp", 0.88, "2026-11-25T00:00:00Z")]
    rerun = [line("kvp", 0.90, "2026-11-26T00:00:00Z", commit="def5678"),
             line("kvp-of-ceiling", 0.975, "2026-11-26T00:00:00Z", commit="def5678")]
    (tmp_path / suite.LINES).write_text("\n".join(json.dumps(x) for x in first + rerun) + "\n")
    (tmp_path / suite.REPORT).write_text(f"{suite.BEGIN}\n{suite.END}\n")
    (tmp_path / suite.README).write_text(f"{suite.README_ROW}old) | x | — | x |\n")
    report, readme = suite.report(tmp_path)
    assert "| nse | `memread bench nse" in report and "0.280" in report  # kept from the first run
    assert "| 0.900 |" in report and "| 0.880 |" not in report  # the kvp's rerun replaces its first run
    row = next(r for r in report.splitlines() if r.startswith("| kvp-of-ceiling |"))
    assert "`python benchmarks/daniluk_breakdown.py --ceiling`" in row and row.endswith("| yes |")
    assert "Suite run `2026-11-25T00:00:00Z` (nse), commit `abc1234`" in report
    assert "Suite run `2026-11-26T00:00:00Z` (kvp, kvp-of-ceiling), commit `def5678`" in report
    assert "| nse 0.28, kvp 0.90 | — | — |" in readme  # the headline checks, in HEADLINE's order, each its latest
    assert "kvp-of-ceiling" not in readme


def test_a_script_check_runs_the_script_with_python(tmp_path, monkeypatch):
    script = tmp_path / "bench_script.py"
    script.write_text("import json, sys\nprint(json.dumps({'ratio': 0.5, 'argv': sys.argv[1:], 'threads': 1}))\n")
    monkeypatch.setitem(suite.CHECKS, "kvp-of-ceiling",
                        suite.Check("kvp-of-ceiling", f"{script} --ceiling", 0.97, "test", script=True))
    out = tmp_path / "lines.jsonl"
    suite.run(["kvp-of-ceiling"], 1, out, bench_command=["false"])  # not memread bench
    got = json.loads(out.read_text())
    assert got["argv"] == ["--ceiling"] and got["ratio"] == 0.5 and got["check"] == "kvp-of-ceiling"


def test_the_iaa_ceiling_model_does_every_product_of_the_iaa_but_no_attention_in_its_loop():
    import copy
    import importlib.util

    import torch

    from memread.bench.cloze import cloze_setup

    spec = importlib.util.spec_from_file_location("iaa_breakdown", REPO / "benchmarks" / "iaa_breakdown.py")
    breakdown = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(breakdown)
    setup = cloze_setup(batch=4, emb=16, hidden=8, inference=16, steps=3, doc_len=40, query_len=6, vocab=300,
                        n_batches=2)
    iaa = setup["models"]["iaa"]
    ceiling = copy.deepcopy(iaa)
    ceiling.iaa = breakdown.ProductsOnly(ceiling.iaa)
    batch = setup["placed"][0]
    torch.manual_seed(0)
    ceiling(batch).logits.sum().backward()
    # every parameter of the IAA model gets a gradient: the ceiling leaves no product out
    assert all(p.grad is not None for p in ceiling.parameters())
    assert sum(1 for _ in ceiling.parameters()) == sum(1 for _ in iaa.parameters())
    # and its loop reads the document once (the answer's attention), where the IAA reads it at every step
    reads = []
    original = breakdown.MemoryReads.attend
    breakdown.MemoryReads.attend = lambda self, key, *a, **k: reads.append(key.shape) or original(self, key, *a, **k)
    try:
        ceiling(batch)
        assert len(reads) == 1
        iaa(batch)  # the IAA itself: a query and a document read at every step, the last one's without glimpse
        assert len(reads) == 1 + 2 * 3
    finally:
        breakdown.MemoryReads.attend = original


def test_the_committed_report_and_readme_row_are_those_of_the_latest_suite_run():
    report, readme = suite.report(REPO, write=False)
    assert (REPO / suite.REPORT).read_text() == report, "regenerate with: python -m memread.bench.suite report"
    assert (REPO / suite.README).read_text() == readme, "regenerate with: python -m memread.bench.suite report"
