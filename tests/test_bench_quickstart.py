import json

import pytest

from memread.bench.readers import bench, reader_config
from memread.errors import MemreadError
from memread.tools.quickstart import quickstart


def test_bench_reports_both_models_in_one_json_line():
    r = bench("lstm", batch=4, steps=6, emb=8, hidden=8, repeats=3, warmup=1)
    assert {"reader", "tokens_per_s", "lstm_tokens_per_s", "ratio"} <= r.keys()
    assert r["ratio"] == pytest.approx(r["tokens_per_s"] / r["lstm_tokens_per_s"], rel=1e-3)
    assert r["reader_params"] == r["lstm_params"]  # the lstm reader is the same network as the reference
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
    assert json.loads((tmp_path / "results.json").read_text())["memory"] == results["memory"]
