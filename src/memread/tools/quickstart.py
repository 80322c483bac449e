"""``memread quickstart``: why memory matters, in under three minutes on two CPU cores.

On memread's built-in stories (people put objects in places; a cloze question asks where one of
them is), it trains the same LSTM twice with the one training loop:

- **memoryless baseline**: reads the story, then the question, and answers from its final state;
- **memory reader**: keeps every state it wrote as a memory, attends over it from the question and
  points at the answer (pointer-sum over the candidate's occurrences).

It prints both test accuracies side by side, saves a PNG of what the memory reader attended to, and
writes ``OUT/results.json``: both models' accuracies and where they come from (``run``: command, commit,
threads, CPU, torch). The README's quickstart figure is generated from such a record, committed as
``results/quickstart.json``, by ``scripts/quickstart_figure.py``.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import torch

from memread import __version__
from memread.config import ExperimentConfig, TrainConfig
from memread.criteria.cloze import ClozeNLLConfig
from memread.data.cbt import BLANK
from memread.data.pipelines.cloze import StoriesClozeConfig
from memread.experiment import final_evaluation, load_trained, start_run
from memread.heads.cloze import FinalStateHeadConfig, PointerHeadConfig
from memread.readers.rnn import RNNReaderConfig
from memread.tools.viz import document_attention

ROWS = {"baseline": FinalStateHeadConfig, "memory": PointerHeadConfig}  # the two heads around the same LSTM
LABELS = {"baseline": "LSTM, answers from its final state (memoryless baseline)",
          "memory": "LSTM + attention over its memory, pointer-sum (memory reader)"}


def quickstart_config(head: type, steps: int, seed: int, stories: int = 4000) -> ExperimentConfig:
    return ExperimentConfig(
        data=StoriesClozeConfig(stories=stories, story_seed=0),
        reader=RNNReaderConfig(name="lstm", hidden=96),
        head=head(emb=48),
        # the answer's NLL over the candidates for both: the memoryless head's only form (it has no document
        # attention for the papers' pointer-sum objective), so the two train on the same loss
        criterion=ClozeNLLConfig(normalize="candidates"),
        train=TrainConfig(optimizer="adam", lr=5e-3, batch_size=32, epochs=1000, max_steps=steps,
                          evals_per_epoch=1, log_every=50, seed=seed, progress=True),
    )


# intra-op threads the quickstart trains with: one. Its ops are small (batches of 32, 96 hidden units), so a second
# thread gains little even on an idle machine, while on a shared one OpenMP threads spinning for a core another job
# holds thrash: with 2 threads beside a training run on 2 cores it took 655 s, with one 62 s
THREADS = 1


def quickstart(out: Path, steps: int = 600, seed: int = 1) -> dict:
    """Train both models on the built-in stories with :data:`THREADS` threads (the caller's count is restored), print
    the table, write ``OUT/results.json`` and the attention picture; the results."""
    threads = torch.get_num_threads()
    torch.set_num_threads(THREADS)
    try:
        return _quickstart(Path(out), steps, seed)
    finally:
        torch.set_num_threads(threads)


def _quickstart(out: Path, steps: int, seed: int) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    results = {}
    t_start = time.perf_counter()
    for key, head in ROWS.items():
        run_dir = out / key
        if run_dir.exists():
            shutil.rmtree(run_dir)  # the quickstart's own runs, rewritten each time
        print(f"\n== training: {LABELS[key]}", file=sys.stderr)
        t0 = time.perf_counter()
        trainer = start_run(quickstart_config(head, steps, seed), run_dir, out)
        trainer.fit()
        final = final_evaluation(run_dir, out)
        results[key] = {"valid_accuracy": final["valid"]["accuracy"], "test_accuracy": final["test"]["accuracy"],
                        "train_seconds": time.perf_counter() - t0}
    png = _picture(out / "memory", out / "attention.png")
    results["attention_png"] = str(png)
    results["total_seconds"] = time.perf_counter() - t_start
    results["run"] = run_record(steps, seed)
    (out / "results.json").write_text(json.dumps(results, indent=2), encoding="utf-8")

    b, m = results["baseline"], results["memory"]
    print("\nbuilt-in stories, cloze test accuracy (chance is about 1 in 6)")
    print(f"  {'model':<66} {'valid':>7} {'test':>7}")
    for key in ROWS:
        r = results[key]
        print(f"  {LABELS[key]:<66} {r['valid_accuracy']:>7.1%} {r['test_accuracy']:>7.1%}")
    print(f"memory reader ahead by {100 * (m['test_accuracy'] - b['test_accuracy']):.1f} points; "
          f"attention picture: {png}; total {results['total_seconds']:.0f}s")
    return results


@torch.no_grad()
def _picture(run_dir: Path, path: Path) -> Path:
    """What the memory reader attended to on the first test story."""
    cfg, task, model = load_trained(run_dir, run_dir.parent)
    example = task.data.examples("test")[0]
    batch = task.batches("test", 1)[0]
    out = model(batch)
    weights = out.attention[0, : len(example.document)].tolist()
    predicted = example.candidates[int(out.logits[0].argmax())]
    query = " ".join(example.query).replace(BLANK, "____")
    title = f"question: {query}   answer: {example.answer}   predicted: {predicted}"
    return document_attention(example.context, weights, path, title=title, highlight=example.answer)


def _commit() -> str | None:
    """The git commit this quickstart's code is (``-dirty`` with local changes), or None when it does not
    run from a git checkout (an installed copy is not the checkout's HEAD, even inside one)."""
    here = Path(__file__).resolve()
    try:
        tracked = subprocess.run(["git", "-C", str(here.parent), "ls-files", "--error-unmatch", here.name],
                                 capture_output=True, text=True, timeout=10)
        if tracked.returncode != 0:
            return None
        out = subprocess.run(["git", "-C", str(here.parent), "describe", "--always", "--dirty", "--abbrev=7"],
                             capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return (out.stdout.strip() or None) if out.returncode == 0 else None


def _cpu() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("model name"):
                return f"{line.split(':', 1)[1].strip()}, {os.cpu_count()} cores"
    except OSError:
        pass
    return f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores"


def run_record(steps: int, seed: int) -> dict:
    """Where a quickstart's numbers come from: command, code, machine."""
    return {
        "command": "memread quickstart" + (f" --steps {steps}" if steps != 600 else "") + (f" --seed {seed}" if seed != 1 else ""),
        "commit": _commit(),
        "memread": __version__,
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "cpu": _cpu(),
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d"),
    }

