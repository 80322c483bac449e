"""``--device`` on every verb that runs a model (issue 20): ``--device cpu`` gives exactly what the verb gives
without the flag (its default is the CPU), and a device torch does not have here (``--device cuda`` on a
machine without a GPU) is one line ``memread: error: ...`` and exit status 2, before any work is done.

Three tiny runs are trained once for the module, from built-in data or the test fixtures: a ``stories-text``
language model with an ``lstmn`` reader (eval, attend, cbt-lm, attention-span), a ``stories`` cloze run
with the ``iaa`` head (eval, ensemble, picture) and an IWSLT14-fixture translation run (translate, bleu).
The benches run at toy sizes; their timings differ from call to call, everything else must not.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
import torch

from conftest import FIXTURES, Fresh, tiny_config
from memread.cli import main

pytestmark = pytest.mark.slow

TRAIN = Fresh(max_steps=3, batch_size=4, progress=False, log_every=100)
LM = dict(data={"stories": 30, "bptt": 8}, head={"emb": 8}, reader={"name": "lstmn", "hidden": 8, "span": 6},
          train=Fresh(TRAIN, eval_batch_size=4))
CLOZE = dict(data={"name": "stories", "stories": 40}, head={"name": "iaa", "steps": 2, "inference": 8, "emb": 8},
             reader={"name": "gru", "hidden": 4, "bidirectional": True}, train=Fresh(TRAIN, max_steps=2, batch_size=8))
NMT = dict(data={"name": "iwslt14"}, reader={"hidden": 8}, head={"name": "attention_decoder", "emb": 6, "tgt_emb": 6},
           train=TRAIN)

# the fields of a bench's JSON line that are timings (they differ between any two calls)
TIMINGS = {"tokens_per_s", "lstm_tokens_per_s", "baseline_tokens_per_s", "ratio", "step", "model"}


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("device-cli")
    out = {}
    for name, sections, data_root in (("lm", LM, root), ("cloze", CLOZE, root), ("nmt", NMT, FIXTURES)):
        cfg = tiny_config(root, f"{name}.toml", **sections)
        assert main(["train", str(cfg), "--run-dir", str(root / name), "--data-root", str(data_root)]) == 0
        out[name] = root / name
    out["root"] = root
    return out


def verbs(runs: dict[str, Path], tag: str) -> dict[str, list[str]]:
    """Every verb that runs a model, with its arguments; files it writes are named after ``tag``."""
    lm, cloze, nmt, root = (str(runs[k]) for k in ("lm", "cloze", "nmt", "root"))
    where = ["--data-root", root]
    return {
        "eval-lm": ["eval", lm, *where],
        "eval-cloze": ["eval", cloze, "--split", "valid", *where],
        "attend": ["attend", lm, "mary went to the garden .", "--out", f"{root}/attend-{tag}.png", *where],
        "cbt-lm": ["cbt-lm", lm, str(FIXTURES / "cbt" / "cbtest_NE_fixture.txt"), *where],
        "attention-span": ["attention-span", lm, "--out", f"{root}/span-{tag}", "--max-batches", "20", *where],
        "translate": ["translate", nmt, "--beam", "2", "--max-len", "5", "--data-root", str(FIXTURES)],
        "bleu": ["bleu", nmt, "--split", "test", "--max-len", "6", "--data-root", str(FIXTURES)],
        "ensemble": ["ensemble", cloze, cloze, *where],
        "picture": ["picture", cloze, "--index", "1", "--out", f"{root}/picture-{tag}.png", *where],
        "bench-lstm": ["bench", "lstm", "--batch", "2", "--steps", "3", "--emb", "4", "--hidden", "4", "--repeats", "1"],
        "bench-lstmn": ["bench", "lstmn", "--batch", "2", "--steps", "3", "--emb", "4", "--hidden", "4", "--repeats", "1"],
        "bench-lm": ["bench", "lstm", "--batch", "2", "--steps", "3", "--emb", "4", "--hidden", "4", "--vocab", "11",
                     "--repeats", "1"],
        "bench-iaa": ["bench", "iaa", "--batch", "2", *(x for kv in ("emb=8", "hidden=4", "inference=8", "steps=2",
                      "doc_len=30", "vocab=50", "n_batches=2", "repeats=1", "warmup=0") for x in ("--set", kv))],
        "bench-fusion": ["bench", "lstmn-deep-fusion", "--batch", "2", *(x for kv in ("source=3", "target=3", "emb=4",
                         "hidden=4", "repeats=1", "warmup=0") for x in ("--set", kv))],
    }


VERBS = list(verbs({k: Path(k) for k in ("lm", "cloze", "nmt", "root")}, "").keys())
SENTENCES = "Thank you .\n\nthe world is big .\n"


def run(argv: list[str], capsys, monkeypatch) -> tuple[int, str, str]:
    monkeypatch.setattr("sys.stdin", io.StringIO(SENTENCES))  # translate reads its sentences from stdin
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def comparable(verb: str, stdout: str, tag: str):
    """What must not depend on --device cpu: the output, less a bench's timings and the tagged file names."""
    if verb.startswith("bench"):
        record = json.loads(stdout)
        assert record["device"] == "cpu"
        assert record["ratio"] > 0
        return {k: v for k, v in record.items() if k not in TIMINGS}
    return stdout.replace(f"-{tag}", "-TAG")


@pytest.mark.parametrize("verb", VERBS)
def test_device_cpu_is_the_default(verb, runs, capsys, monkeypatch):
    outputs = {}
    for tag, flag in (("none", []), ("cpu", ["--device", "cpu"])):
        code, out, err = run(verbs(runs, tag)[verb] + flag, capsys, monkeypatch)
        assert code == 0, err
        outputs[tag] = comparable(verb, out, tag)
    assert outputs["cpu"] == outputs["none"]
    root = runs["root"]
    if verb == "attend" or verb == "picture":  # the same weights drawn: the same picture, byte for byte
        name = "attend" if verb == "attend" else "picture"
        assert (root / f"{name}-cpu.png").read_bytes() == (root / f"{name}-none.png").read_bytes()
    if verb == "attention-span":
        assert ((root / "span-cpu" / "attention_by_position.json").read_text()
                == (root / "span-none" / "attention_by_position.json").read_text())


@pytest.mark.parametrize("verb", ["eval-lm", "ensemble", "bench-lstm"])
def test_device_auto_without_a_gpu_is_the_cpu(verb, runs, capsys, monkeypatch):
    if torch.cuda.is_available() or (getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()):
        pytest.skip("this machine has an accelerator: auto is not the CPU here")
    code, none, err = run(verbs(runs, "x")[verb], capsys, monkeypatch)
    assert code == 0, err
    code, auto, err = run(verbs(runs, "x")[verb] + ["--device", "auto"], capsys, monkeypatch)
    assert code == 0, err
    assert comparable(verb, auto, "x") == comparable(verb, none, "x")


@pytest.mark.parametrize("verb", VERBS)
def test_a_missing_gpu_is_one_line_before_any_work(verb, runs, capsys, monkeypatch):
    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA GPU (tests/test_cuda.py runs the verbs on it)")
    root = runs["root"]
    before = {p: p.stat().st_mtime_ns for p in root.rglob("*")}
    argv = verbs(runs, "cuda")[verb] + ["--device", "cuda"]
    code, out, err = run(argv, capsys, monkeypatch)
    assert code == 2 and out == "", err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("memread: error: --device 'cuda': "), err
    assert "no CUDA GPU" in lines[0] and "Traceback" not in err
    assert {p: p.stat().st_mtime_ns for p in root.rglob("*")} == before, "the verb wrote files before it checked its device"


def test_a_device_that_is_no_device_is_one_line(runs, capsys, monkeypatch):
    for argv in (["eval", str(runs["lm"]), "--device", "gpu"], ["bench", "lstm", "--device", "gpu"]):
        code, out, err = run(argv, capsys, monkeypatch)
        assert code == 2 and out == "", err
        assert err.strip().splitlines() == ["memread: error: --device 'gpu': not a device (auto, cpu, cuda, cuda:N or mps)"]
