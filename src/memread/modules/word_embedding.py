"""Word embeddings for tasks over separate texts (sentences, pairs): optional pretrained vectors,
frozen or trained, and the LSTMN paper's first-epoch treatment of the pretrained rows.

- ``freeze``: the table never changes (the NSE setup: fixed GloVe vectors, OOV rows zero).
- ``first_epoch_scale``: during the first epoch the gradient of every row that got a pretrained
  vector is multiplied by this (LSTMN, SST: 0.35; LSTMN, SNLI: 0.0, "we only updated OOV vectors in
  the first epoch"); from the second epoch on all rows are updated normally. The training loop tells
  the epoch at each epoch's start (``set_epoch``, :func:`memread.training.loop.set_epoch`), so a
  resumed run scales exactly as an uninterrupted one.

Which rows are pretrained is a buffer, saved with the model: a loaded checkpoint needs no vector file.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from memread.errors import MemreadError
from memread.modules.embeddings import fill_pretrained_


class WordEmbedding(nn.Module):
    def __init__(self, vocab_size: int, dim: int, pad_id: int | None, freeze: bool = False,
                 first_epoch_scale: float = 1.0):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, dim, padding_idx=pad_id)
        self.register_buffer("pretrained", torch.zeros(vocab_size, dtype=torch.bool))
        self.first_epoch_scale = first_epoch_scale
        self.epoch = 0
        if freeze:
            self.embedding.weight.requires_grad_(False)
        elif first_epoch_scale != 1.0:
            self.embedding.weight.register_hook(self._scale_pretrained_rows)

    @property
    def weight(self) -> Tensor:
        return self.embedding.weight

    def _scale_pretrained_rows(self, grad: Tensor) -> Tensor:
        if self.epoch != 0:
            return grad
        scale = torch.where(self.pretrained, self.first_epoch_scale, 1.0).to(grad.dtype)  # (V,)
        return grad * scale.unsqueeze(1)

    def set_epoch(self, epoch: int) -> None:
        self.epoch = int(epoch)

    def load_vectors(self, itos: list[str], vectors: dict[str, list[float]], oov: str = "zero", seed: int = 0) -> int:
        """Rows of words in ``vectors`` get their vector; the others ``oov``: "zero" (NSE) or
        "gaussian" N(0, 1) (LSTMN, SNLI). Returns the number of rows found."""
        if oov not in ("zero", "gaussian"):
            raise MemreadError(f"unknown OOV policy {oov!r}; expected zero or gaussian")
        found = fill_pretrained_(self.embedding, itos, vectors, oov, seed)
        self.pretrained.copy_(found)
        return int(found.sum())

    def forward(self, ids: Tensor) -> Tensor:
        return self.embedding(ids)
