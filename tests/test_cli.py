"""Every CLI error caused by input is one clear line on stderr, exit status 2, no traceback."""

import json
import subprocess
import sys

import pytest

from conftest import Fresh, subprocess_env, tiny_config


def memread(*args, data_root=None, cwd=None):
    env = subprocess_env(**({"MEMREAD_DATA": str(data_root)} if data_root else {}))
    return subprocess.run([sys.executable, "-m", "memread", *map(str, args)], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=300)


def assert_one_line_error(result, *fragments):
    assert result.returncode == 2, result.stderr
    lines = [l for l in result.stderr.splitlines() if l.strip()]
    assert len(lines) == 1 and lines[0].startswith("memread: error: "), result.stderr
    assert "Traceback" not in result.stderr
    for f in fragments:
        assert f in lines[0], lines[0]


LM = dict(data={"name": "ptb", "bptt": 5}, head={"emb": 8}, reader={"hidden": 8},
          train=Fresh(max_steps=3, batch_size=2, progress=False))


@pytest.mark.slow
def test_cli_errors_are_one_line(tmp_path, fixtures):
    cfg = tiny_config(tmp_path, "exp.toml", **LM)
    # missing dataset: names the expected file and how to get it
    r = memread("train", cfg, "--run-dir", tmp_path / "r0", data_root=tmp_path / "empty")
    assert_one_line_error(r, str(tmp_path / "empty" / "ptb" / "ptb.train.txt"), "memread data download ptb")
    # unknown config key
    bad = tiny_config(tmp_path, "bad.toml", **{**LM, "reader": {"hidden": None, "hiden": 8}})
    assert_one_line_error(memread("train", bad, data_root=tmp_path), "bad.toml", "reader.hiden")
    # malformed data file: names file and line
    root = tmp_path / "data"
    (root / "ptb").mkdir(parents=True)
    for split in ("train", "valid", "test"):
        (root / "ptb" / f"ptb.{split}.txt").write_bytes((fixtures / "ptb" / f"ptb.{split}.txt").read_bytes())
    (root / "ptb" / "ptb.valid.txt").write_bytes(b" ok line \n bad \xff byte \n")
    r = memread("train", cfg, "--run-dir", tmp_path / "r1", data_root=root)
    assert_one_line_error(r, "ptb.valid.txt:2", "not UTF-8")
    # a good run, then a checkpoint that does not match its config
    (root / "ptb" / "ptb.valid.txt").write_bytes((fixtures / "ptb" / "ptb.valid.txt").read_bytes())
    r = memread("train", cfg, "--run-dir", tmp_path / "good", data_root=root)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["test"]["tokens"] == 18  # every one of the 19 test tokens after the first
    r = memread("eval", tmp_path / "good", data_root=root)
    assert r.returncode == 0 and json.loads(r.stdout)["ppl"] == pytest.approx(out["test"]["ppl"])
    cfg_json = json.loads((tmp_path / "good" / "config.json").read_text())
    cfg_json["reader"]["hidden"] = 9
    (tmp_path / "good" / "config.json").write_text(json.dumps(cfg_json))
    assert_one_line_error(memread("eval", tmp_path / "good", data_root=root), "checkpoint_best.pt",
                          "reader.hidden = 8 in the checkpoint, 9 now")
    # not a run directory, not a config
    assert_one_line_error(memread("eval", tmp_path, data_root=root), "not a memread run directory")
    assert_one_line_error(memread("train", tmp_path / "nope.toml", data_root=root), "nope.toml: config file not found")


def test_train_help_lists_every_train_key_with_its_default_and_meaning(capsys):
    """`memread train --help` shows the [train] keys, generated from TrainConfig and its field comments."""
    import dataclasses
    import re

    from memread import cli
    from memread.config import TrainConfig, _toml

    with pytest.raises(SystemExit) as e:
        cli.main(["train", "--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert "[train] keys (the config's [train] table, or --set train.KEY=VALUE)" in out
    for f in dataclasses.fields(TrainConfig):
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
        line = re.search(rf"^  {f.name} = (.*)$", out, re.M)
        assert line, f"train.{f.name} is not listed"
        value, _, meaning = line.group(1).partition("  ")
        assert value.strip() == _toml(default) and meaning.strip(), f"train.{f.name}: {line.group(0)!r}"
    assert re.search(r"^  lr = 0\.001 +learning rate$", out, re.M)
    assert re.search(r"^  max_minutes = 0\.0 +a job's time limit", out, re.M)
    assert re.search(r"^  betas = \[0\.9, 0\.999\] +adam's", out, re.M) and 'device = "auto"' in out


STORIES_LM = dict(data={"stories": 40, "bptt": 8}, reader={"hidden": 8}, head={"emb": 8},
                  train=Fresh(batch_size=4, epochs=2, progress=False))


@pytest.mark.parametrize("setting,ending", [
    ("train.max_minutes=0.000001", r"stopped: max_minutes \(train.max_minutes = 1e-06 spent, at step 1; memread train "
                                   r"--resume \S+ goes on with a new allowance\)"),
    ("train.max_steps=2", r"stopped: max_steps \(train.max_steps = 2 reached\)"),
    ("train.epochs=1", r"stopped: epochs \(train.epochs = 1 done\)"),
], ids=["max_minutes", "max_steps", "epochs"])
def test_train_says_how_the_run_ended(tmp_path, capsys, setting, ending):
    """The last output of `memread train` says why it stopped: `stopped: max_minutes`, as the README promises."""
    import re

    from memread import cli

    cfg = tiny_config(tmp_path, "lm.toml", **STORIES_LM)
    run = tmp_path / "run"
    assert cli.main(["train", str(cfg), "--run-dir", str(run), "--data-root", str(tmp_path), "--set", setting]) == 0
    out, err = capsys.readouterr()
    assert re.search(rf"^{ending}$", err, re.M), err
    result = json.loads(out.strip().splitlines()[-1])
    assert result["stopped"] == setting.split("=")[0].split(".")[1] and result["run_dir"] == str(run)
    assert "ppl" in result["test"]


def test_a_run_remembers_its_data_root(tmp_path, capsys, monkeypatch):
    """`memread train --data-root D` records D (absolute) in the run: eval, predict, compare and --resume read
    from there by default; --data-root or MEMREAD_DATA still win; a run without the record keeps the old default."""
    from memread import cli
    from test_own_data import make_data

    work, elsewhere, cache = tmp_path / "work", tmp_path / "elsewhere", tmp_path / "cache"
    for d in (work / "data", elsewhere, cache):
        d.mkdir(parents=True)
    data = make_data(work / "data", "jsonl-classify")
    tiny_config(work, "cls.toml", data=data, reader={"hidden": 6}, head=Fresh(emb=6),
                train=Fresh(batch_size=2, max_steps=2, progress=False))
    monkeypatch.delenv("MEMREAD_DATA", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))  # the default root: empty
    monkeypatch.chdir(work)
    assert cli.main(["train", "cls.toml", "--run-dir", "run", "--data-root", "data"]) == 0  # a relative root
    final = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    run = work / "run"
    assert json.loads((run / "data_root.json").read_text()) == {"data_root": str(work / "data")}

    monkeypatch.chdir(elsewhere)  # neither the relative root nor MEMREAD_DATA reaches the data from here
    assert cli.main(["eval", str(run)]) == 0
    assert json.loads(capsys.readouterr().out)["accuracy"] == pytest.approx(final["test"]["accuracy"])
    (elsewhere / "in.jsonl").write_text(json.dumps({"text": "a fine line"}) + "\n")
    assert cli.main(["predict", str(run), str(elsewhere / "in.jsonl")]) == 0
    assert "probabilities" in json.loads(capsys.readouterr().out)
    assert cli.main(["compare", str(run), str(run), "--resamples", "10"]) == 0
    assert json.loads(capsys.readouterr().out)
    assert cli.main(["train", "--resume", str(run), "--set", "train.max_steps=3"]) == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["stopped"] == "max_steps"

    # an explicit root wins, MEMREAD_DATA too: both name where they looked
    assert cli.main(["eval", str(run), "--data-root", str(elsewhere)]) == 2
    assert f"expected {elsewhere}/jsonl-classify/test.jsonl" in capsys.readouterr().err
    monkeypatch.setenv("MEMREAD_DATA", str(cache))
    assert cli.main(["eval", str(run)]) == 2
    assert f"data root {cache} (--data-root or MEMREAD_DATA)" in capsys.readouterr().err
    # a run of an earlier version (no record): the old default, the cache folder
    monkeypatch.delenv("MEMREAD_DATA")
    (run / "data_root.json").unlink()
    assert cli.main(["eval", str(run)]) == 2
    assert f"expected {cache}/memread/data/jsonl-classify/test.jsonl" in capsys.readouterr().err
