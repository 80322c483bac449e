"""How far back the window readers look: Figure 3 of Daniluk et al. (2017).

- :func:`attention_by_position` (Figure 3b): the average attention weight on each position of the
  history, -L (farthest) .. -1 (the previous token), over every token of a split whose window is full
  (the first L tokens of each document, or of the stream, are left out: they have fewer than L slots).
  :func:`position_table` prints it (in percent, like the figure); :func:`position_png` draws one row
  per model.
- :func:`document_attention` (Figure 3a): the weights of every token of one document (its first
  ``tokens`` tokens) over its window, drawn by :func:`document_png` as a (token x position) heatmap.

The split is read as evaluation reads it (state carried across batches, resets at document starts);
readers report their window weights as ``ReaderOutput.attention`` (B, T, L+T) over
``[window ; segment]``, from which the band of each position is taken.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import torch
from torch import Tensor

from memread.errors import MemreadError
from memread.training.distributed import to_device


def window_band(attention: Tensor, steps: int) -> Tensor:
    """(B, T, L+T) weights over ``[window ; segment]`` -> (B, T, L): ``[:, t, j]`` on step ``t - L + j``."""
    B, T, S = attention.shape
    L = S - steps
    idx = torch.arange(T, device=attention.device).view(1, T, 1) + torch.arange(L, device=attention.device).view(1, 1, L)
    return attention.gather(2, idx.expand(B, T, L))


def _read(model: torch.nn.Module, batch: dict, state: Any):
    out = model.read(batch["input"], batch["mask"], state, batch.get("reset"), return_attention=True)
    if out.attention is None:
        raise MemreadError(f"attention-span: the reader ({type(model.reader).__name__}) reports no attention weights; "
                           f"use an attention, kv or kvp run")
    return out


@torch.no_grad()
def attention_by_position(model: torch.nn.Module, task: Any, split: str = "test", batch_size: int = 1,
                          max_batches: int = 0) -> dict:
    """``{"window": L, "weights": [w_{-L} .. w_{-1}], "tokens": n}`` averaged over the split's tokens
    with a full window (``max_batches`` > 0 stops early, for a quick look). The model reads on its own
    device; the counting is done on the CPU."""
    model.eval()
    device = next(model.parameters()).device
    batches = task.batches(split, batch_size)
    total, n, state, seen = None, 0, None, None
    for i in range(len(batches)):
        if max_batches and i >= max_batches:
            break
        batch = batches[i]
        out = _read(model, to_device(batch, device), state)
        state = out.state
        mask = batch["mask"]
        B, T = mask.shape
        # (B, T, L); L = 0 for a reader whose carried history starts empty (the LSTMN's tape, L = its span,
        # once a segment has been read): such a first segment only counts the tokens seen
        band = window_band(out.attention, T).cpu()
        L = band.size(2)
        if seen is None:
            seen = torch.zeros(B, dtype=torch.long)
        if L and total is None:
            total = band.new_zeros(L, dtype=torch.float64)
        if L and L != total.numel():
            raise MemreadError(f"attention-span: the reader's history changed from {total.numel()} to {L} slots")
        reset = batch.get("reset", torch.zeros_like(mask))
        full = torch.zeros(B, T, dtype=torch.bool)
        for t in range(T):  # tokens of the same document read before t (analysis only: a loop is fine)
            seen = torch.where(reset[:, t], torch.zeros_like(seen), seen)
            full[:, t] = mask[:, t] & (seen >= L) if L else False
            seen = seen + mask[:, t].long()
        if L:
            total += band[full].double().sum(0)
            n += int(full.sum())
    if total is None or n == 0:
        raise MemreadError(f"attention-span: no token of split {split!r} has a full window")
    return {"window": int(total.numel()), "weights": (total / n).tolist(), "tokens": n}


def position_table(rows: dict[str, dict]) -> str:
    """One line per model: its average weight (percent) at -L .. -1, like Figure 3b."""
    L = max(r["window"] for r in rows.values())
    width = max(len(name) for name in rows)
    lines = [" " * width + "  " + " ".join(f"{-L + j:>5}" for j in range(L)) + "   tokens"]
    for name, r in rows.items():
        pad = ["     "] * (L - r["window"])
        lines.append(f"{name:<{width}}  " + " ".join(pad + [f"{100 * w:5.1f}" for w in r["weights"]]) + f"   {r['tokens']}")
    return "\n".join(lines)


def position_png(rows: dict[str, dict], path: Path) -> Path:
    from memread.tools.viz import attention_heatmap

    L = max(r["window"] for r in rows.values())
    weights = [[0.0] * (L - r["window"]) + list(r["weights"]) for r in rows.values()]
    return attention_heatmap(list(rows), [str(-L + j) for j in range(L)], weights, path,
                             title="average attention by\nposition in the history",
                             xlabel="position in the history (-1: the previous token)", ylabel="model")


@torch.no_grad()
def document_attention(model: torch.nn.Module, task: Any, split: str = "test", document: int = 0,
                       tokens: int = 40) -> tuple[list[str], Tensor]:
    """Words of the first ``tokens`` tokens of document ``document`` (or of the stream, for a corpus
    without documents) and their window weights (n, L), read from an empty state (on the model's device;
    the weights come back to the CPU)."""
    model.eval()
    device = next(model.parameters()).device
    if getattr(task.data, "documents_mode", False):
        docs = task.data.document_ids(split)
        if not 0 <= document < len(docs):
            raise MemreadError(f"attention-span: split {split!r} has {len(docs)} documents; --document {document} is out of range")
        ids = docs[document][:tokens]
    else:
        ids = task.data.ids(split)[:tokens]
    inp = ids.view(1, -1).to(device)
    mask = torch.ones_like(inp, dtype=torch.bool)
    out = _read(model, {"input": inp, "mask": mask}, None)
    return task.vocab.decode(ids.tolist()), window_band(out.attention, inp.size(1))[0].cpu()


def document_png(words: Sequence[str], weights: Tensor, path: Path, title: str = "") -> Path:
    from memread.tools.viz import attention_heatmap

    L = weights.size(1)
    rows = [f"{t}: {w}" for t, w in enumerate(words)]
    return attention_heatmap(rows, [str(-L + j) for j in range(L)], weights.tolist(), path,
                             title=title or "attention of each token\nover its window",
                             xlabel="position in the history", ylabel="token read")
