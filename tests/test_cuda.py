"""Training, evaluation and the benches on a CUDA GPU (issue 20). Every test here is marked ``cuda`` and is
skipped where ``torch.cuda.is_available()`` is false (``-m "not cuda"`` deselects them):

- a tiny LM (an ``lstmn`` reader, dropout on) and a tiny IAA cloze run train two steps with
  ``train.device = "cuda"``; ``memread eval --device cuda`` of the checkpoint equals ``memread eval
  --device cpu`` of it (a checkpoint written on the GPU loads and evaluates on the CPU), and a run killed
  on the GPU and resumed there continues as the uninterrupted GPU run (losses to float tolerance: CUDA
  kernels need not sum in the same order twice);
- every registered reader, forward and backward on the GPU in float32 (TF32 off), equals the same module
  in float64 on the CPU (states on the real tokens and all gradients, right-padded batch);
- ``bf16-mixed`` and ``16-mixed`` training (two Adam steps) give finite losses close to float32's;
- ``memread bench lstm|lstmn --device cuda`` print a JSON line with the device and a ratio.
"""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import pytest
import torch

from memread.cli import main
from memread.config import experiment_from_dict
from memread.experiment import first_losses, resume_run, start_run
from memread.modules.dropout import Dropout
from memread.readers import READERS, build_reader
from memread.training import loop as loop_module
from test_reader_contract import E, batch, config, read, shared_memories

pytestmark = [pytest.mark.cuda,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU here (torch.cuda.is_available() is false)")]

EXPERIMENTS = {
    "lm": {"data": {"name": "stories-text", "stories": 60, "bptt": 10},
           "reader": {"name": "lstmn", "hidden": 16, "span": 8}, "head": {"name": "lm", "emb": 16, "dropout": 0.2}},
    "cloze": {"data": {"name": "stories", "stories": 60},
              "reader": {"name": "gru", "hidden": 8, "bidirectional": True},
              "head": {"name": "iaa", "emb": 16, "steps": 2, "inference": 8, "dropout": 0.2}},
}
TRAIN = {"optimizer": "adam", "lr": 3e-3, "batch_size": 8, "progress": False, "log_every": 1}


def experiment(name: str, **train):
    return experiment_from_dict({**EXPERIMENTS[name], "train": {**TRAIN, **train}}, "cuda-test")


def records(run_dir: Path, event: str | None = None) -> list[dict]:
    out = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]
    return [r for r in out if event is None or r["event"] == event]


@pytest.fixture
def exact_float32():
    """No TensorFloat-32 in matmuls or cuDNN (RNNs included): float32 on the GPU is float32."""
    old = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    yield
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = old


# ----------------------------------------------------------------------------- (a) train, eval, resume


@pytest.mark.parametrize("name", sorted(EXPERIMENTS))
def test_a_run_trained_on_cuda_evaluates_the_same_on_cuda_and_cpu(tmp_path, capsys, exact_float32, name):
    run = tmp_path / "run"
    with start_run(experiment(name, max_steps=2, device="cuda"), run, tmp_path) as trainer:
        assert trainer.device.type == "cuda" and next(trainer.model.parameters()).is_cuda
        trainer.fit()
    losses = [r["loss"] for r in records(run, "train")]
    assert len(losses) == 2 and all(math.isfinite(v) for v in losses)
    assert json.loads((run / "config.json").read_text())["train"]["device"] == "cuda"
    results = {}
    for device in ("cuda", "cpu"):
        for split in ("valid", "test"):
            argv = ["eval", str(run), "--split", split, "--checkpoint", "last", "--device", device, "--data-root", str(tmp_path)]
            assert main(argv) == 0
            results[device, split] = json.loads(capsys.readouterr().out)
    for split in ("valid", "test"):
        gpu, cpu = results["cuda", split], results["cpu", split]
        assert gpu.keys() == cpu.keys()
        for k in cpu:
            if isinstance(cpu[k], float):
                assert gpu[k] == pytest.approx(cpu[k], rel=1e-4, abs=1e-6), (split, k)
            else:
                assert gpu[k] == cpu[k], (split, k)


class Killed(BaseException):
    pass


@pytest.mark.parametrize("name", sorted(EXPERIMENTS))
def test_a_cuda_run_killed_and_resumed_on_cuda_continues_as_the_uninterrupted_one(tmp_path, monkeypatch, name):
    cfg = experiment(name, max_steps=7, checkpoint_every=2, evals_per_epoch=2, device="cuda")
    full = tmp_path / "full"
    with start_run(cfg, full, tmp_path) as trainer:
        trainer.fit()
    killed = tmp_path / "killed"
    trainer = start_run(cfg, killed, tmp_path)
    real = loop_module.Trainer.train_step

    def dies_at_step_5(self, batch, *more):
        if self.global_step + 1 == 5:  # after the checkpoint of step 4: step 5 is replayed on resume
            raise Killed
        return real(self, batch, *more)

    with monkeypatch.context() as m:
        m.setattr(loop_module.Trainer, "train_step", dies_at_step_5)
        with pytest.raises(Killed):
            trainer.fit()
    trainer.close()
    with resume_run(killed, tmp_path) as trainer:
        assert trainer.device.type == "cuda"
        trainer.fit()
    a, b = records(full), records(killed)
    assert [(r["event"], r["step"]) for r in a] == [(r["event"], r["step"]) for r in b]
    for x, y in zip(a, b):
        for k, v in x.items():
            if k in loop_module.WALL_CLOCK_KEYS:
                continue
            if isinstance(v, float):
                assert y[k] == pytest.approx(v, rel=1e-5, abs=1e-7), (x["event"], x["step"], k)
            else:
                assert y[k] == v, (x["event"], x["step"], k)


# ----------------------------------------------------------------------------- (b) every reader, float32 GPU vs float64 CPU


@pytest.mark.parametrize("name", sorted(READERS))
def test_every_reader_on_cuda_in_float32_equals_float64_on_the_cpu(name, exact_float32):
    torch.manual_seed(0)
    reader = build_reader(config(name), E).eval()  # float32 parameters
    lengths = [6, 4, 1]
    x, mask = batch(lengths)  # right-padded: garbage in the padding
    x = x.float()
    shared = shared_memories(name, reader, len(lengths))
    g = torch.Generator().manual_seed(3)
    w = torch.randn(len(lengths), x.size(1), reader.output_size, generator=g) * mask.unsqueeze(-1)

    # cuDNN's RNN backward refuses eval mode, so the GPU copy trains in train mode: with no dropout anywhere in
    # these readers (checked here) the two modes compute the same
    dropouts = [m for m in reader.modules() if isinstance(m, (torch.nn.Dropout, Dropout, torch.nn.RNNBase))]
    assert not any(getattr(m, "p", 0.0) or getattr(m, "dropout", 0.0) for m in dropouts), name
    assert getattr(getattr(reader, "cfg", None), "dropout", 0.0) == 0.0, name

    def forward_backward(module, device, dtype):
        module = copy.deepcopy(module).to(device=device, dtype=dtype).train(device == "cuda")
        xs = x.to(device=device, dtype=dtype).requires_grad_(True)
        mem = [(m.to(device=device, dtype=dtype), mm.to(device)) for m, mm in shared]
        out = read(name, module, xs, mask.to(device), shared=mem)
        (out.states * w.to(device=device, dtype=dtype)).sum().backward()
        grads = {n: p.grad for n, p in module.named_parameters() if p.grad is not None}
        return out.states.detach(), xs.grad, grads

    states64, dx64, grads64 = forward_backward(reader, "cpu", torch.float64)
    states32, dx32, grads32 = forward_backward(reader, "cuda", torch.float32)
    assert states32.is_cuda and states32.dtype == torch.float32

    def close(got, want, scale, what):  # scale: the largest value of its kind (a near-zero gradient is noise)
        got = got.detach().cpu().double()
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5 * scale, msg=lambda m: f"{name} {what}: {m}")

    real = mask.unsqueeze(-1).expand_as(states64)
    close(states32[real.cuda()], states64[real], float(states64[real].abs().max()), "states on real tokens")
    assert grads32.keys() == grads64.keys() and grads64
    scale = max(float(g.abs().max()) for g in (dx64, *grads64.values()))
    close(dx32, dx64, scale, "gradient of the input")
    for n in grads64:
        close(grads32[n], grads64[n], scale, f"gradient of {n}")


# ----------------------------------------------------------------------------- (c) mixed precision


@pytest.mark.parametrize("precision", ["bf16-mixed", "16-mixed"])
@pytest.mark.parametrize("name", sorted(EXPERIMENTS))
def test_mixed_precision_on_cuda_is_finite_and_close_to_float32(tmp_path, name, precision, exact_float32):
    def losses(p):
        cfg = experiment_from_dict({**EXPERIMENTS[name], "head": {**EXPERIMENTS[name]["head"], "dropout": 0.0},
                                    "train": {**TRAIN, "device": "cuda", "precision": p}}, "cuda-test")
        return first_losses(cfg, tmp_path, 2)

    full, mixed = losses("32"), losses(precision)
    assert len(mixed) == 2 and all(math.isfinite(v) for v in mixed), mixed
    for a, b in zip(mixed, full):
        assert abs(a - b) <= 5e-2 * abs(b), (precision, mixed, full)


# ----------------------------------------------------------------------------- (d) the bench on the GPU


@pytest.mark.parametrize("reader", ["lstm", "lstmn"])
def test_bench_on_cuda_says_its_device_and_gives_a_ratio(reader, capsys):
    assert main(["bench", reader, "--device", "cuda", "--batch", "8", "--steps", "12", "--emb", "16", "--hidden", "32",
                 "--repeats", "5"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["reader"] == reader and record["device"].startswith("cuda")
    assert record["gpu"] == torch.cuda.get_device_name(0)
    assert record["ratio"] > 0 and record["tokens_per_s"] > 0 and record["lstm_tokens_per_s"] > 0
