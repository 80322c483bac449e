"""``memread attend RUN_DIR "sentence"``: which earlier words each word attended to, as a PNG.

The trained model reads the sentence from an empty tape, left to right, and its reader's attention
weights (for the LSTMN, ``s^t`` of equation (5) in the top layer) are drawn two ways, like Figure 4
of Cheng et al. (2016): arcs between each word and the earlier words it attended to (thicker and
darker for higher weight), and the full (word x earlier word) matrix as a heatmap.
"""

from __future__ import annotations

from pathlib import Path

import torch

from memread.errors import MemreadError


def read_sentence(model: torch.nn.Module, vocab, sentence: str) -> tuple[list[str], torch.Tensor]:
    """Words of ``sentence`` (unknown ones marked ``*``) and the reader's attention (T, T) over them."""
    words = sentence.split()
    if not words:
        raise MemreadError("attend: the sentence is empty")
    embedding, reader = getattr(model, "embedding", None), getattr(model, "reader", None)
    if embedding is None or reader is None:
        raise MemreadError(f"attend: a {type(model).__name__} has no embedding and reader to read a sentence with")
    ids, labels = [], []
    for w in words:
        # corpora like PTB are lower-cased: fall back to the lower-cased word before <unk>
        token = w if w in vocab else w.lower() if w.lower() in vocab else None
        ids.append(vocab.id(token) if token is not None else vocab.unk_id)
        labels.append(w if token is not None else f"{w}*")
    if any(i is None for i in ids):
        raise MemreadError("attend: the sentence has words outside the vocabulary, which has no <unk>")
    device = next(model.parameters()).device
    x = torch.tensor([ids], device=device)  # (1, T)
    with torch.no_grad():
        out = reader(embedding(x), torch.ones_like(x, dtype=torch.bool), None, return_attention=True)
    if out.attention is None:
        raise MemreadError(
            f"attend: this run's reader ({type(reader).__name__}) returns no attention weights; "
            "use a run of an attention reader such as lstmn"
        )
    T = len(words)
    return labels, out.attention[0, :, -T:].float().cpu()  # (T, T): row t over words 0 .. T-1


# the legend of the mark :func:`read_sentence` puts on a word the vocabulary does not hold
UNKNOWN_LEGEND = "* not in the model's vocabulary: read as <unk>"


def legend(words: list[str], labels: list[str]) -> str:
    """The line that explains the ``*`` on the ``labels`` of ``words`` (naming them), or "" when none has one."""
    unknown = [w for w, label in zip(words, labels) if label != w]
    return f"{UNKNOWN_LEGEND} ({', '.join(dict.fromkeys(unknown))})" if unknown else ""


def draw(words: list[str], weights: torch.Tensor, path: Path, title: str, note: str = "") -> Path:
    """Arcs (Figure 4 style) above a heatmap; ``weights[t, j]``: how much word t attended to word j; ``note``: a
    line under the title (the legend of the ``*`` on unknown words)."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Arc

    from memread.tools.viz import heatmap_on, save  # sets the Agg backend

    w = weights.numpy()
    n = len(words)
    vmax = max(float(w.max()), 1e-9)
    fig, (top, bottom) = plt.subplots(
        2, 1, figsize=(max(6.0, 0.7 * n + 1.5), max(6.5, 0.45 * n + 4.0)), gridspec_kw={"height_ratios": [1, 1.6]}
    )
    cmap = plt.get_cmap("Blues")
    for t in range(n):
        for j in range(t):
            if w[t, j] < 0.05 * vmax:
                continue
            shade = w[t, j] / vmax
            top.add_patch(Arc(((t + j) / 2, 0), t - j, (t - j) * 0.9, theta1=0, theta2=180,
                              lw=0.4 + 3.6 * shade, color=cmap(0.3 + 0.7 * shade), alpha=0.35 + 0.65 * shade))
    for i, word in enumerate(words):
        top.text(i, -0.1, word, ha="center", va="top", fontsize=9, rotation=45 if n > 12 else 0)
    top.set_xlim(-0.7, n - 0.3)
    top.set_ylim(-1.2, max(1.0, 0.47 * (n - 1)) + 0.2)
    top.axis("off")
    top.set_title(title + (f"\n{note}" if note else ""), fontsize=10)

    im = heatmap_on(bottom, words, words, w, "attended to (earlier word)", "reading")
    fig.colorbar(im, ax=bottom, fraction=0.04)
    return save(fig, path)


def attend(run_dir: Path, sentence: str, out: Path | None, data_root: Path, device: str = "cpu") -> Path:
    """Read ``sentence`` with the run's best checkpoint (else its last), its model on ``device``, and write
    the picture to ``out`` (default ``RUN_DIR/attention.png``). Returns the PNG's path."""
    from memread.experiment import load_trained

    run_dir = Path(run_dir)
    which = "best" if (run_dir / "checkpoint_best.pt").is_file() else "last"
    cfg, task, model = load_trained(run_dir, data_root, which, device)
    words, weights = read_sentence(model, task.vocab, sentence)
    note = legend(sentence.split(), words)
    layers = getattr(cfg.reader, "layers", 1)
    title = f"{cfg.reader.name} intra-attention ({run_dir.name}, checkpoint_{which}" + (
        f", top layer of {layers})" if layers > 1 else ")"
    )
    default = run_dir / "attention.png" if run_dir.is_dir() else run_dir.with_name(f"{run_dir.stem}.attention.png")
    return draw(words, weights, Path(out) if out is not None else default, title, note)
