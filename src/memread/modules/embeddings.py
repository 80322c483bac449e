"""Word embeddings that can load pretrained vectors (GloVe text format, plain or ``.gz``)."""

from __future__ import annotations

import gzip
from pathlib import Path

import torch
from torch import nn

from memread.errors import MemreadError


def read_vectors(path: str | Path, wanted: set[str] | None = None) -> tuple[dict[str, list[float]], int]:
    """Read ``word v1 v2 ...`` lines; keep only ``wanted`` words if given. Returns (vectors, dim)."""
    path = Path(path)
    if not path.is_file():
        raise MemreadError(f"{path}: word-vector file not found")
    opener = gzip.open if path.suffix == ".gz" else open
    vectors: dict[str, list[float]] = {}
    dim = None
    with opener(path, "rt", encoding="utf-8", errors="strict") as f:
        for lineno, line in enumerate(f, 1):
            line = line.rstrip("\n").rstrip(" ")
            word, _, rest = line.partition(" ")
            if dim is not None and wanted is not None and word not in wanted:
                # skipped lines are only counted, not split: 400k GloVe lines take ~1 s instead of ~1.6 s
                n_values = rest.count(" ") + 1 if rest else 0
                if n_values != dim:
                    raise MemreadError(f"{path}:{lineno}: {n_values} values, earlier lines have {dim}")
                continue
            values = rest.split(" ") if rest else []
            if not values:
                raise MemreadError(f"{path}:{lineno}: expected 'word v1 v2 ...', got {line[:60]!r}")
            if dim is None:
                dim = len(values)
            elif len(values) != dim:
                raise MemreadError(f"{path}:{lineno}: {len(values)} values, earlier lines have {dim}")
            if wanted is not None and word not in wanted:
                continue
            try:
                vectors[word] = [float(v) for v in values]
            except ValueError:
                raise MemreadError(f"{path}:{lineno}: non-numeric value in vector of {word!r}") from None
    if dim is None:
        raise MemreadError(f"{path}: empty word-vector file")
    return vectors, dim


@torch.no_grad()
def load_pretrained_(
    embedding: nn.Embedding, itos: list[str], path: str | Path, oov: str = "zero", seed: int = 0
) -> torch.Tensor:
    """Fill ``embedding`` rows from a vector file; return a bool (V,) tensor of rows found.

    ``oov`` sets the rows of words without a vector: "zero", "gaussian" (N(0, 1), as the LSTMN
    paper's SNLI setup), or "keep" (leave the module's own initialisation).
    """
    vectors, dim = read_vectors(path, set(itos))
    if dim != embedding.embedding_dim:
        raise MemreadError(f"{path}: vectors have {dim} dimensions, the embedding has {embedding.embedding_dim}")
    return fill_pretrained_(embedding, itos, vectors, oov, seed)


@torch.no_grad()
def fill_pretrained_(
    embedding: nn.Embedding, itos: list[str], vectors: dict[str, list[float]], oov: str = "zero", seed: int = 0
) -> torch.Tensor:
    """:func:`load_pretrained_` from vectors already read (one scan of a large file serves many tables)."""
    found = torch.zeros(len(itos), dtype=torch.bool)
    weight = embedding.weight
    if oov == "zero":
        weight.zero_()
    elif oov == "gaussian":
        g = torch.Generator().manual_seed(seed)
        weight.copy_(torch.randn(weight.shape, generator=g, dtype=weight.dtype))
    elif oov != "keep":
        raise MemreadError(f"unknown OOV policy {oov!r}; expected zero, gaussian or keep")
    for i, word in enumerate(itos):
        vec = vectors.get(word)
        if vec is not None:
            if len(vec) != embedding.embedding_dim:
                raise MemreadError(f"the vector of {word!r} has {len(vec)} dimensions, the embedding has "
                                   f"{embedding.embedding_dim}")
            weight[i] = torch.tensor(vec, dtype=weight.dtype)
            found[i] = True
    if embedding.padding_idx is not None:
        weight[embedding.padding_idx].zero_()
    return found
