"""Ensembles of trained cloze runs: average their answer distributions (Sordoni et al. section 5.1,
"average the predictions of 5 models trained with different random seeds")::

    P_ens(a | Q, D) = (1 / N) sum_n P_n(a | Q, D)

``memread ensemble RUN_DIR... --split test`` prints the ensemble's accuracy and each member's. The
members may differ in anything (seed, head, sizes) but must read the same questions: the same
candidates and answers, question by question.
"""

from __future__ import annotations

from pathlib import Path

import torch

from memread.errors import MemreadError
from memread.experiment import load_trained
from memread.training.distributed import to_device


@torch.no_grad()
def answer_distributions(model: torch.nn.Module, task, split: str, batch_size: int) -> list[torch.Tensor]:
    """P(a | Q, D) over each question's candidates, in the split's question order (on the CPU; the model
    reads each batch on its own device)."""
    model.eval()
    device = next(model.parameters()).device
    n = len(task.data.encoded(split))
    out: list[torch.Tensor | None] = [None] * n
    batches = task.batches(split, batch_size)
    for i in range(len(batches)):
        batch = batches[i]
        p = model(to_device(batch, device)).logits.exp().cpu()  # (B, C)
        counts = batch["cand_mask"].sum(1).tolist()
        for row, (index, c) in enumerate(zip(batch["index"].tolist(), counts)):
            out[index] = p[row, :c].clone()
    return out  # type: ignore[return-value]


def ensemble(run_dirs: list[Path], data_root: Path, split: str = "test", which: str = "best",
             batch_size: int = 0, device: str = "cpu") -> dict:
    """Accuracy of the averaged distribution of ``run_dirs`` on ``split``, and of each member (each model
    on ``device`` in turn)."""
    if not run_dirs:
        raise MemreadError("ensemble needs at least one run directory")
    members, total, reference = [], None, None
    for run_dir in run_dirs:
        cfg, task, model = load_trained(Path(run_dir), data_root, which, device)
        if task.name != "cloze":
            raise MemreadError(f"{run_dir}: ensembles average answer distributions of cloze runs, this is a {task.name} run")
        encoded = task.data.encoded(split)
        questions = [(e["cand_words"], e["answer"]) for e in encoded]
        if reference is None:
            reference, answers = questions, torch.tensor([e["answer"] for e in encoded])
            groups = [e.get("group") for e in encoded]
            names = task.data.groups
        elif questions != reference:
            raise MemreadError(f"{run_dir}: reads other {split} questions than {run_dirs[0]} (candidates or answers differ)")
        probs = answer_distributions(model, task, split, batch_size or cfg.train.eval_batch_size or task.default_eval_batch_size)
        correct = torch.tensor([int(p.argmax()) for p in probs]) == answers
        members.append({"run_dir": str(run_dir), "accuracy": correct.float().mean().item()})
        total = probs if total is None else [a + b for a, b in zip(total, probs)]
    mean = [p / len(run_dirs) for p in total]
    correct = torch.tensor([int(p.argmax()) for p in mean]) == answers
    result = {"split": split, "checkpoint": which, "members": members, "size": len(run_dirs),
              "accuracy": correct.float().mean().item(), "count": len(mean)}
    for i, name in enumerate(names):
        in_g = torch.tensor([g == i for g in groups])
        if in_g.any():
            result[f"accuracy_{name}"] = correct[in_g].float().mean().item()
    return result
