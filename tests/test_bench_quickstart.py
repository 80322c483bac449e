import importlib.util
import json
import re
from pathlib import Path

import pytest
import torch

from memread.bench.readers import bench, reader_config
from memread.errors import MemreadError
from memread.tools.quickstart import quickstart, run_record

REPO = Path(__file__).parent.parent


def quickstart_figure():
    spec = importlib.util.spec_from_file_location("quickstart_figure", REPO / "scripts" / "quickstart_figure.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_bench_reports_both_models_in_one_json_line():
    r = bench("lstm", batch=4, steps=6, emb=8, hidden=8, repeats=3, warmup=1)
    assert {"reader", "tokens_per_s", "lstm_tokens_per_s", "ratio"} <= r.keys()
    assert r["ratio"] == pytest.approx(r["tokens_per_s"] / r["lstm_tokens_per_s"], rel=1e-3)
    assert r["reader_params"] == r["lstm_params"]  # the lstm reader is the same network as the reference
    assert r["lstm_layers"] == 1
    # a stacked reader is timed against a stacked nn.LSTM: a 2-layer lstm reader is again the same network
    r = bench("lstm", batch=4, steps=6, emb=8, hidden=8, repeats=3, warmup=1, reader_options=["layers=2"])
    assert r["lstm_layers"] == 2 and r["reader_params"] == r["lstm_params"]
    # an MMA-NSE is timed reading and writing its shared memories: its compose and write LSTM are wider
    plain, mma = (bench("nse", batch=2, steps=4, emb=6, hidden=6, repeats=1, warmup=0, reader_options=[f"shared={n}"])
                  for n in (0, 1))
    assert mma["reader_params"] - plain["reader_params"] == (18 * 18 + 18) - (12 * 12 + 12) + 4 * 6 * 6
    r = bench("rnn", batch=4, steps=6, emb=8, hidden=8, vocab=50, repeats=3, warmup=1)
    assert r["vocab"] == 50 and r["tokens_per_s"] > 0
    json.dumps(r)
    with pytest.raises(MemreadError, match="unknown reader 'nope'"):
        bench("nope")
    with pytest.raises(MemreadError, match="unknown key 'reader.depth'"):
        reader_config("lstm", 8, ["depth=2"])
    assert reader_config("lstm", 8, ["layers=2"]).layers == 2


@pytest.mark.slow
def test_quickstart_memory_reader_beats_memoryless_baseline(tmp_path, capsys):
    results = quickstart(tmp_path, steps=600, seed=1)
    out = capsys.readouterr().out
    assert "memoryless baseline" in out and "memory reader" in out
    assert results["memory"]["test_accuracy"] > results["baseline"]["test_accuracy"] + 0.3
    png = tmp_path / "attention.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000
    written = json.loads((tmp_path / "results.json").read_text())
    assert written["memory"] == results["memory"]
    assert written["run"]["command"] == "memread quickstart" and written["run"]["threads"] >= 1
    # the run can become the README's record, and its figure is what the quickstart printed
    record = quickstart_figure().record_from_run(written)
    shown = re.findall(r"(\d+\.\d)%\n", out)
    assert quickstart_figure().figure(record) == f"{shown[0]}% / {shown[1]}%"


def test_the_quickstart_trains_on_one_thread_and_gives_the_callers_back(tmp_path, monkeypatch):
    """One intra-op thread, whatever the caller set: two thrash beside another job on two cores (655 s against 62 s)."""
    import memread.tools.quickstart as qs

    class Stop(Exception):
        pass

    seen = []

    def start_run(*args, **kwargs):
        seen.append(torch.get_num_threads())
        raise Stop

    monkeypatch.setattr(qs, "start_run", start_run)
    torch.set_num_threads(2)  # the conftest fixture restores its own count afterwards
    with pytest.raises(Stop):
        qs.quickstart(tmp_path, steps=1)
    assert seen == [1] and torch.get_num_threads() == 2


def test_a_quickstart_record_says_where_its_numbers_come_from():
    run = run_record(600, 1)
    assert run["command"] == "memread quickstart"
    assert run_record(50, 3)["command"] == "memread quickstart --steps 50 --seed 3"
    assert run["torch"] == torch.__version__ and run["threads"] == torch.get_num_threads()
    assert run["commit"] is None or re.fullmatch(r"[0-9a-f]{7,}(-dirty)?", run["commit"])
    assert "cores" in run["cpu"] and re.fullmatch(r"\d{4}-\d\d-\d\d", run["date"])
    results = {"baseline": {"test_accuracy": 0.1475}, "memory": {"test_accuracy": 0.955}, "total_seconds": 60.0,
               "attention_png": "x.png", "run": run}
    qf = quickstart_figure()
    assert qf.record_from_run(results) == {k: results[k] for k in ("baseline", "memory", "total_seconds", "run")}
    assert qf.figure(results) == "14.8% / 95.5%"
    with pytest.raises(SystemExit, match="missing run"):
        qf.record_from_run({k: results[k] for k in ("baseline", "memory", "total_seconds")})
