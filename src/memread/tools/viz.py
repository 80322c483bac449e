"""Pictures of attention, saved as PNG (matplotlib, Agg backend: no display needed)."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402


def check_picture_path(path: Path) -> Path:
    """Refuse a path a picture cannot be written to, in one line: a run's own file (``RUN/checkpoint_best.pt``,
    ...), or a name whose suffix is no format matplotlib writes (``--out x.pt``). The verbs call it before any
    work, so that nothing is read, printed or written for a picture that cannot be saved."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from memread.errors import MemreadError
    from memread.training.checkpoint import refuse_run_file

    path = Path(path)
    refuse_run_file(path, "a PNG", "picture.png")
    kind = path.suffix.lower().lstrip(".")
    if kind and kind not in FigureCanvasAgg.get_supported_filetypes():  # was matplotlib's ValueError, a traceback
        raise MemreadError(f"{path}: matplotlib writes no .{kind} pictures; name it .png (or .pdf, .svg)")
    return path


def save(fig, path: Path, dpi: int = 120) -> Path:
    """Lay out ``fig``, write it to ``path`` as PNG (folders made as needed), close it; a run's own file
    (``RUN/checkpoint_best.pt``, ...) or a format matplotlib does not write is refused (:func:`check_picture_path`).
    A name without a suffix gets ``.png`` (what matplotlib writes then); the path returned is the file written."""
    path = Path(path)
    if not path.suffix:
        path = path.with_name(path.name + ".png")
    try:
        check_picture_path(path)
    except BaseException:
        plt.close(fig)
        raise
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
    return path


def heatmap_on(ax, rows: Sequence[str], cols: Sequence[str], weights, xlabel: str, ylabel: str, cmap: str = "Blues"):
    """Draw a labelled (rows x cols) weight matrix on ``ax``; returns the image (for a colour bar)."""
    w = np.asarray(weights, dtype=float)
    im = ax.imshow(w, cmap=cmap, vmin=0.0, vmax=max(float(w.max()), 1e-9), aspect="auto")
    ax.set_xticks(range(len(cols)), cols, rotation=60, ha="right", fontsize=8)
    ax.set_yticks(range(len(rows)), rows, fontsize=8)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    return im


def attention_heatmap(rows: Sequence[str], cols: Sequence[str], weights, path: Path, title: str = "",
                      xlabel: str = "attended to", ylabel: str = "reading") -> Path:
    """A (len(rows), len(cols)) weight matrix as a labelled heatmap (e.g. intra-attention, Figure 4)."""
    w = np.asarray(weights, dtype=float)
    fig, ax = plt.subplots(figsize=(max(4.0, 0.4 * len(cols) + 2), max(3.0, 0.35 * len(rows) + 1.5)))
    im = heatmap_on(ax, rows, cols, w, xlabel, ylabel)
    if title:
        ax.set_title(title, fontsize=10)
    fig.colorbar(im, ax=ax, fraction=0.04)
    return save(fig, path)


def document_attention(sentences: Sequence[Sequence[str]], weights: Sequence[float], path: Path,
                       title: str = "", highlight: str | None = None) -> Path:
    """Words of a document laid out sentence by sentence, each shaded by its attention weight."""
    w = np.asarray(weights, dtype=float)
    vmax = max(float(w.max()), 1e-9)
    width = max(len(s) for s in sentences)
    fig, ax = plt.subplots(figsize=(max(6.0, 0.95 * width), 0.42 * len(sentences) + 1.2))
    cmap = plt.get_cmap("Oranges")
    k = 0
    for row, sentence in enumerate(sentences):
        for col, word in enumerate(sentence):
            shade = w[k] / vmax
            ax.add_patch(plt.Rectangle((col, -row - 0.5), 1, 1, color=cmap(shade)))
            weight = "bold" if word == highlight else "normal"
            ax.text(col + 0.5, -row, word, ha="center", va="center", fontsize=8, weight=weight,
                    color="white" if shade > 0.6 else "black")
            k += 1
    ax.set_xlim(0, width)
    ax.set_ylim(-len(sentences) + 0.5, 0.5)
    ax.axis("off")
    if title:
        ax.set_title(title, fontsize=10)
    return save(fig, path)
