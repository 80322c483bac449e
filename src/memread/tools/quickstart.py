"""``memread quickstart``: why memory matters, in under three minutes on two CPU cores.

On memread's built-in stories (people put objects in places; a cloze question asks where one of
them is), it trains the same LSTM twice with the one training loop:

- **memoryless baseline**: reads the story, then the question, and answers from its final state;
- **memory reader**: keeps every state it wrote as a memory, attends over it from the question and
  points at the answer (pointer-sum over the candidate's occurrences).

It prints both test accuracies side by side and saves a PNG of what the memory reader attended to.
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from pathlib import Path

import torch

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
        criterion=ClozeNLLConfig(),
        train=TrainConfig(optimizer="adam", lr=5e-3, batch_size=32, epochs=1000, max_steps=steps,
                          evals_per_epoch=1, log_every=50, seed=seed, progress=True),
    )


def quickstart(out: Path, steps: int = 600, seed: int = 1) -> dict:
    torch.set_num_threads(min(2, torch.get_num_threads()))
    out = Path(out)
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
