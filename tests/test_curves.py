"""`memread curves`: the validation metric of runs by epoch, read from their metrics.jsonl."""

import dataclasses
import json

import pytest

from memread.cli import main
from memread.config import ExperimentConfig, TrainConfig
from memread.criteria.lm import LMNLLConfig
from memread.data.pipelines.lm import StoriesTextConfig
from memread.heads.lm import LMHeadConfig
from memread.tools.curves import curves_png, curves_table, read_curve
from memread.errors import MemreadError
from memread.experiment import final_evaluation, start_run
from memread.readers.rnn import RNNReaderConfig


def write_log(run_dir, records):
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return run_dir


def valid(step, epoch, ppl, lr=0.5, best=True, **extra):
    return {"event": "valid", "step": step, "epoch": epoch, "ppl": ppl, "accuracy": 0.1, "lr": lr, "best": best, **extra}


# a log from before `epochs_done` and `selection_metric`: two evaluations an epoch, a decay, a restore
OLD_LOG = [
    {"event": "train", "step": 5, "epoch": 0, "loss": 9.0, "lr": 0.5},
    valid(10, 0, 300.0),
    valid(20, 0, 200.0),
    valid(30, 1, 150.0),
    valid(40, 1, 160.0, lr=0.25, best=False),
    {"event": "restore_best", "step": 40, "epoch": 1, "best_step": 30, "lr": 0.25},
    valid(50, 2, 149.0, lr=0.25),
]


def test_old_logs_spread_evaluations_within_their_epoch_and_mark_best_restore_and_decay(tmp_path):
    c = read_curve(write_log(tmp_path / "old", OLD_LOG))
    assert c.metric == "ppl"  # first of ppl / map / accuracy present
    assert c.epochs == [0.5, 1.0, 1.5, 2.0, 3.0]  # epoch 2 has one evaluation: its end
    assert c.values == [300.0, 200.0, 150.0, 160.0, 149.0]
    assert c.best == 4 and c.best_value == 149.0
    assert c.restored == [2.0] and c.lrs[3] == 0.25 and c.lrs[2] == 0.5
    table = curves_table([c]).splitlines()
    assert table[0].split()[:6] == ["epochs", "0.5", "1", "1.5", "2", "3"]
    assert table[1].split() == ["old", "300.00", "200.00", "150.00", "160.00", "149.00*", "149.00"]
    acc = read_curve(tmp_path / "old", metric="accuracy")
    assert acc.values == [0.1] * 5 and acc.best == 4


def test_table_aligns_runs_with_different_evaluation_points(tmp_path):
    a = read_curve(write_log(tmp_path / "a", [valid(10, 0, 100.0, epochs_done=1.0), valid(20, 1, 90.0, epochs_done=2.0)]))
    b = read_curve(write_log(tmp_path / "b", [valid(5, 0, 120.0, epochs_done=0.5), valid(10, 0, 95.0, best=True, epochs_done=1.0),
                                              valid(15, 1, 97.0, best=False, epochs_done=1.5)]))
    lines = curves_table([a, b]).splitlines()
    assert lines[0].split()[:4] == ["epochs", "0.5", "1", "1.5"]
    assert lines[1].split() == ["a", "100.00", "90.00*", "90.00"]  # no value at 0.5 and 1.5: blank cells
    assert lines[1].index("100.00") + 6 == lines[2].index("95.00*") + 5  # right-aligned in the 1-epoch column
    assert lines[2].split() == ["b", "120.00", "95.00*", "97.00", "95.00"]
    png = curves_png([a, b], tmp_path / "out" / "c.png", log_y=True)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow  # trains two epochs
def test_a_real_run_logs_epochs_done_and_its_selection_metric(tmp_path, one_thread):
    cfg = ExperimentConfig(data=StoriesTextConfig(stories=200, bptt=12), reader=RNNReaderConfig(hidden=16),
                           head=LMHeadConfig(emb=16), criterion=LMNLLConfig(),
                           train=TrainConfig(progress=False, optimizer="adam", lr=1e-2, batch_size=8, epochs=2,
                                             evals_per_epoch=2, log_every=1000))
    trainer = start_run(cfg, tmp_path / "run", tmp_path)
    trainer.fit()
    n = trainer.epoch_batches
    c = read_curve(tmp_path / "run")
    assert c.metric == "ppl" and len(c.values) == 4
    assert c.epochs == pytest.approx([(n // 2) / n, 1.0, 1 + (n // 2) / n, 2.0])
    final = final_evaluation(tmp_path / "run", tmp_path)
    assert c.best_value == pytest.approx(final["valid"]["ppl"], rel=1e-6)  # the ringed point is checkpoint_best's
    assert read_curve(tmp_path / "run").test == pytest.approx(final["test"]["ppl"])
    assert curves_table([read_curve(tmp_path / "run")]).splitlines()[1].split()[-1] == f"{final['test']['ppl']:.2f}"
    # a run capped inside its first epoch ends at a fraction of it
    capped = start_run(dataclasses.replace(cfg, train=TrainConfig(progress=False, batch_size=8, max_steps=3, log_every=1000)),
                       tmp_path / "capped", tmp_path)
    capped.fit()
    assert read_curve(tmp_path / "capped").epochs == pytest.approx([3 / capped.epoch_batches])


def test_bad_logs_get_one_message_naming_file_and_line(tmp_path):
    run = write_log(tmp_path / "bad", OLD_LOG[:2])
    with open(run / "metrics.jsonl", "a") as f:
        f.write('{"event": "valid", "step": 20\n')  # cut short
    with pytest.raises(MemreadError, match=r"bad/metrics.jsonl, line 3: not a JSON object"):
        read_curve(run)
    with pytest.raises(MemreadError, match=r"nowhere/metrics.jsonl: no such file"):
        read_curve(tmp_path / "nowhere")
    with pytest.raises(MemreadError, match=r"no validation yet"):
        read_curve(write_log(tmp_path / "young", OLD_LOG[:1]))
    with pytest.raises(MemreadError, match=r"no metric 'bleu' \(it has accuracy, lr, ppl\)"):
        read_curve(write_log(tmp_path / "old", OLD_LOG), metric="bleu")
    (tmp_path / "old" / "final.json").write_text(json.dumps({"valid": {"ppl": 150.0}, "test": {"ppl": 140.0}}))
    assert read_curve(tmp_path / "old").test is None  # written at the 150 best; training went on to 149
    (tmp_path / "old" / "final.json").write_text(json.dumps({"valid": {"ppl": 149.0}, "test": {"ppl": 140.0}}))
    assert read_curve(tmp_path / "old").test == 140.0
    (tmp_path / "old" / "final.json").write_text("[1, 2]")
    with pytest.raises(MemreadError, match=r"old/final.json: not the JSON object"):
        read_curve(tmp_path / "old")


def test_cli_prints_the_table_writes_the_png_and_reports_bad_input_in_one_line(tmp_path, capsys):
    run = write_log(tmp_path / "old", OLD_LOG)
    out = tmp_path / "curves.png"
    assert main(["curves", str(run), "--out", str(out)]) == 0
    printed = capsys.readouterr()
    assert "149.00*" in printed.out and f"wrote {out}" in printed.err
    assert out.read_bytes()[:4] == b"\x89PNG"
    assert main(["curves", str(run), "--out", str(tmp_path / "curves.json")]) == 2  # was a matplotlib traceback
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"memread: error: {tmp_path / 'curves.json'}: matplotlib writes no .json pictures; name it .png "
                   "(or .pdf, .svg)"] and not (tmp_path / "curves.json").exists()
    (run / "metrics.jsonl").write_text("not json\n")
    assert main(["curves", str(run), "--out", "-"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("memread: error: ") and "line 1" in err[0]


def test_runs_are_named_by_the_shortest_path_endings_that_tell_them_apart(tmp_path, capsys):
    """Seed folders of several models (``lstm/seed1``, ``lstmn-empty/seed1``) were all labelled ``seed1``."""
    from memread.tools.curves import run_names

    runs = [tmp_path / "claims" / m / "seed1" for m in ("lstm", "lstmn-empty")]
    assert run_names(runs) == ["lstm/seed1", "lstmn-empty/seed1"]
    assert run_names([tmp_path / "a", tmp_path / "b"]) == ["a", "b"]
    assert run_names([tmp_path / "x" / "a", tmp_path / "y" / "a", tmp_path / "y" / "b"]) == ["x/a", "y/a", "y/b"]
    same = tmp_path / "a"
    assert run_names([same, same]) == [str(same), str(same)]  # nothing tells them apart
    # the table and the picture's legend of `memread curves` use them
    for m in ("lstm", "lstmn-empty"):
        write_log(tmp_path / "claims" / m / "seed1", OLD_LOG)
    assert main(["curves", *map(str, runs), "--out", "-"]) == 0
    rows = [line.split()[0] for line in capsys.readouterr().out.splitlines()[1:3]]
    assert rows == ["lstm/seed1", "lstmn-empty/seed1"]
