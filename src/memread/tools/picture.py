"""``memread picture RUN_DIR``: the query and document attention of a trained cloze run at every
inference step for one question, like the figure of Sordoni et al. section 5.3.

One row per inference step t = 1..T; the left panel is the query attention q_{i,t} over the query
words, the right panel the document attention d_{i,t} over the document. Document positions of the
candidates are ticked and named, the true answer's in red. Runs of the other pointer heads (the AS
Reader, ``pointer``) have one step and no query attention.
"""

from __future__ import annotations

from pathlib import Path

import torch

from memread.errors import MemreadError
from memread.experiment import load_trained
from memread.training.distributed import to_device


@torch.no_grad()
def trace_question(run_dir: Path, data_root: Path, split: str = "test", index: int = 0, which: str = "best",
                   device: str = "cpu") -> dict:
    """The attention trace of question ``index`` of ``split``: words, weights, answer, prediction (the model
    reads on ``device``; the weights come back to the CPU)."""
    cfg, task, model = load_trained(Path(run_dir), data_root, which, device)
    if task.name != "cloze" or cfg.head.name == "final_state":
        raise MemreadError(f"{run_dir}: picture needs a cloze run with a pointer-sum head (iaa, as_reader, pointer)")
    examples, encoded = task.data.examples(split), task.data.encoded(split)
    if not 0 <= index < len(encoded):
        raise MemreadError(f"--index {index}: the {split} split has {len(encoded)} questions")
    example = examples[index] if len(examples) == len(encoded) else None
    if example is None:
        raise MemreadError(f"{split}: questions were dropped from this split; pick another split")
    batch = to_device(task.data.batches_of(encoded, [[index]])[0], next(model.parameters()).device)
    reading = model.read(batch, trace=True)
    if reading.iaa is not None:
        query_att = reading.iaa.query_trace[0].cpu()  # (T, Tq)
        doc_att = reading.iaa.doc_trace[0].cpu()  # (T, Td)
    else:
        query_att, doc_att = None, reading.attention.cpu()  # (1, Td)
    candidates = example.candidates if example.answer in example.candidates else [*example.candidates, example.answer]
    return {
        "query": example.query, "document": example.document, "answer": example.answer,
        "candidates": candidates, "predicted": candidates[int(reading.log_p[0].argmax())],
        "query_attention": None if query_att is None else query_att.tolist(),
        "doc_attention": doc_att.tolist(),
    }


def draw(trace: dict, path: Path, title: str = "") -> Path:
    import matplotlib.pyplot as plt
    import numpy as np

    from memread.tools.viz import save  # sets the Agg backend

    doc = np.asarray(trace["doc_attention"], dtype=float)  # (T, Td)
    query = None if trace["query_attention"] is None else np.asarray(trace["query_attention"], dtype=float)
    T = doc.shape[0]
    words, cands, answer = trace["document"], set(trace["candidates"]), trace["answer"]
    fig, axes = plt.subplots(1, 2, figsize=(18, 1.2 + 0.55 * T),
                             gridspec_kw={"width_ratios": [1, 3.5]}, squeeze=False)
    left, right = axes[0]
    rows = [f"t={t + 1}" for t in range(T)]
    if query is not None:
        left.imshow(query, cmap="Blues", aspect="auto", vmin=0.0, vmax=max(float(query.max()), 1e-9))
        left.set_xticks(range(len(trace["query"])), trace["query"], rotation=70, fontsize=7)
        left.set_yticks(range(T), rows, fontsize=8)
        left.set_title("query attention $q_{i,t}$", fontsize=9)
    else:
        left.axis("off")
        left.text(0.5, 0.5, "no query attention\n(single query vector)", ha="center", va="center", fontsize=9)
    right.imshow(doc, cmap="Oranges", aspect="auto", vmin=0.0, vmax=max(float(doc.max()), 1e-9))
    if len(words) <= 120:
        ticks = list(range(len(words)))
    else:
        ticks = [i for i, w in enumerate(words) if w in cands]
    right.set_xticks(ticks, [words[i] for i in ticks], rotation=70, fontsize=6)
    for label, i in zip(right.get_xticklabels(), ticks):
        if words[i] == answer:
            label.set_color("red")
            label.set_fontweight("bold")
    right.set_yticks(range(T), rows, fontsize=8)
    right.set_title("document attention $d_{i,t}$ (candidates ticked, answer in red)", fontsize=9)
    query_text = " ".join(trace["query"])
    fig.suptitle(title or f"{query_text}\nanswer: {answer}   predicted: {trace['predicted']}", fontsize=9)
    return save(fig, path, dpi=110)


def picture(run_dir: Path, data_root: Path, out: Path, split: str = "test", index: int = 0, which: str = "best",
            device: str = "cpu") -> dict:
    trace = trace_question(run_dir, data_root, split, index, which, device)
    path = draw(trace, out)
    return {"png": str(path), "answer": trace["answer"], "predicted": trace["predicted"],
            "steps": len(trace["doc_attention"]), "split": split, "index": index}
