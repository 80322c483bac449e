"""Cloze criteria: the loss of a model's answer distribution over each question's candidates.

``cloze_nll``: the negative log-likelihood of the answer, averaged over the questions, plus
``emb_l2`` times the squared norm of the embeddings (Sordoni et al.'s penalty, 1e-4 there). Every
cloze criterion reports the same statistics (:func:`answer_stats`) and metrics (:func:`summarize`):
accuracy, the answer's mean NLL (the NLL the criterion trains on), and on bAbI the accuracy of each
task (``accuracy_qa1`` ...).

**Which probability of the answer** (``normalize``), for the pointer-sum heads (``pointer``,
``as_reader``, ``iaa``; :mod:`memread.modules.pointer_sum`):

- ``"document"`` (the default): the papers' objective, ``-log P(a | d, q) = -log sum_{i in I(a, d)} s_i``
  with ``s`` the softmax over all document positions (Kadlec et al. 2016, the AS Reader; Sordoni et al.
  2016, eq. (2): "the model is trained to maximize log P(a | Q, D)", and its section 5 names normalising
  "only over the candidate answers" as a difference of the Stanford reader). The AS Reader authors' code
  (github.com/rkadlec/asreader, ``as_reader.py``) does the same: the summed attention of each candidate,
  unnormalised, into Blocks' ``CategoricalCrossEntropy`` (``-log y_hat[answer]``). We found no public code
  of Sordoni et al. It takes the document attention and the occurrences the heads already return
  (``ModelOutput.attention``, ``extra["hits"]``).
- ``"candidates"``: the pointer-sum renormalised over the question's candidates, ``-log (sum_{i in I(a)}
  s_i / sum_c sum_{i in I(c)} s_i)``: the model's logits as they are (the Stanford reader's choice). It is
  the only form for the ``final_state`` head, which has no document attention: a config with that head
  says ``normalize = "candidates"`` (refused otherwise, naming the key).

The two losses differ by ``-log`` of the attention mass on the candidates' positions: equal where
those positions hold all of it, larger with ``"document"`` otherwise -- on CBT, CNN and Gutenberg (10
candidates among many words) and on bAbI too (the candidates are the story's words, not its
punctuation) -- where it also pushes attention off the non-candidate positions. Accuracy and the
predictions are the same function of the attention under both (the argmax over the candidates).
``"candidates"`` was memread's only form before the option, and its default until memread took the
papers' text: run directories and archives written before the key existed read as ``"candidates"``, what
they were trained with (:data:`memread.config.EARLIER_VALUES`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
from torch import Tensor, nn

from memread.criteria.base import Loss
from memread.criteria.classification import accuracy_and_nll
from memread.errors import MemreadError
from memread.heads.base import ModelOutput
from memread.modules.pointer_sum import answer_log_prob
from memread.modules.precision import to_float32
from memread.typed import NonNegFloat


@dataclass
class ClozeNLLConfig:
    name: Literal["cloze_nll"] = "cloze_nll"
    emb_l2: NonNegFloat = 0.0  # embedding L2 penalty added to the loss (Sordoni et al.: 1e-4)
    # "document": the papers' pointer-sum objective -log sum_{i in I(a, d)} s_i, s the softmax over all document
    # positions (pointer-sum heads only); "candidates": P(a) renormalised over the candidates (any cloze head)
    normalize: Literal["document", "candidates"] = "document"


def answer_stats(log_p: Tensor, batch: dict, nll: Tensor | None = None) -> tuple[Tensor, dict[str, Tensor]]:
    """The answer's NLL per question (B,) and the batch's summed statistics: nll, correct, count and,
    for batches with groups (bAbI tasks), correct_g{i} / count_g{i}. ``log_p`` (B, C) over the candidates
    gives the predictions, and the NLL unless ``nll`` (B,) is given (the papers' pointer-sum NLL)."""
    answer = batch["answer"]  # (B,) index into cands
    log_p = to_float32(log_p)  # under autocast they may be bfloat16 / float16: the loss and its sums in float32
    if nll is None:
        nll = -log_p.gather(1, answer.unsqueeze(1)).squeeze(1)  # (B,)
    hit = log_p.argmax(dim=-1) == answer  # (B,)
    stats = {"nll": nll.sum().detach(), "correct": hit.sum().detach(), "count": torch.tensor(float(len(nll)), device=nll.device)}
    if "group" in batch:  # accuracy per bAbI task
        for g in batch["group"].unique().tolist():
            in_g = batch["group"] == g
            stats[f"correct_g{g}"] = hit[in_g].sum().detach()
            stats[f"count_g{g}"] = in_g.sum().detach().float()
    return nll, stats


def answer_units(nll: Tensor, log_p: Tensor, batch: dict, stats: dict[str, Tensor]) -> dict[str, Tensor]:
    """:func:`answer_stats`' statistics per question (the units of a paired test), (B,) each."""
    hit = (to_float32(log_p).argmax(dim=-1) == batch["answer"]).float()
    units = {"nll": nll.detach().float(), "correct": hit, "count": torch.ones_like(hit)}
    for key in stats:  # correct_g{i}, count_g{i}: the question's own group only
        if key.startswith(("correct_g", "count_g")):
            in_g = (batch["group"] == int(key.split("_g", 1)[1])).float()
            units[key] = in_g * (hit if key.startswith("correct") else 1.0)
    return units


def summarize(sums: dict[str, float], groups: list[str]) -> dict[str, float]:
    """Accuracy and mean NLL of a split; ``accuracy_{group}`` for each group with questions."""
    out = accuracy_and_nll(sums)
    for i, g in enumerate(groups):
        if sums.get(f"count_g{i}"):
            out[f"accuracy_{g}"] = sums[f"correct_g{i}"] / sums[f"count_g{i}"]
    return out


class ClozeNLL:
    selection_metric = "accuracy"
    higher_is_better = True

    def __init__(self, cfg: ClozeNLLConfig, groups: list[str], embedding: nn.Embedding | None = None):
        self.emb_l2 = cfg.emb_l2
        self.normalize = cfg.normalize
        self.groups = list(groups)
        self.embedding = embedding  # the model's word embeddings, for the L2 penalty

    def __call__(self, out: ModelOutput, batch: dict) -> Loss:
        nll = None
        if self.normalize == "document":  # -log sum_{i in I(a, d)} s_i over the document's softmax
            hits = out.extra.get("hits")
            if out.attention is None or hits is None:
                raise MemreadError("criterion.normalize = 'document' needs the document attention and the answer's "
                                   "positions (a pointer-sum head: pointer, as_reader, iaa)")
            nll = -answer_log_prob(out.attention, hits, batch["answer"])  # (B,)
        nll, stats = answer_stats(out.logits, batch, nll)
        loss = nll.mean()
        if self.emb_l2:
            loss = loss + self.emb_l2 * self.embedding.weight.pow(2).sum()
        return Loss(loss, stats, weight=nll.numel(), units=answer_units(nll, out.logits, batch, stats))  # the penalty adds up to itself over the shards

    def summarize(self, sums: dict[str, float]) -> dict[str, float]:
        return summarize(sums, self.groups)


def build_cloze_nll(cfg: ClozeNLLConfig, pipeline, model: nn.Module) -> ClozeNLL:
    if cfg.normalize not in ("candidates", "document"):
        raise MemreadError(f"criterion.normalize must be 'candidates' or 'document', got {cfg.normalize!r}")
    if cfg.normalize == "document" and getattr(model, "answers_by_pointer_sum", True) is False:
        raise MemreadError(f"criterion.normalize = 'document' is the pointer-sum objective (-log of the document "
                           f"attention on the answer's positions); {type(model).__name__} answers from its final "
                           f"state, without document attention: use normalize = 'candidates'")
    embedding = getattr(model, "embedding", None)
    if cfg.emb_l2 and not isinstance(embedding, nn.Embedding):
        raise MemreadError(f"criterion.emb_l2 needs a model with word embeddings (model.embedding); "
                           f"{type(model).__name__} has none")
    return ClozeNLL(cfg, pipeline.groups, embedding)
