"""Sentence classification (the Stanford Sentiment Treebank) with any reader as the encoder.

Parts: data ``sst`` (:mod:`memread.data.pipelines.sentence`); head ``mlp`` (embedding -> reader ->
pool -> MLP, :mod:`memread.heads.classifier`); criterion ``cross_entropy``
(:mod:`memread.criteria.classification`). Any reader fits: the sections' own checks are all there is.
"""

from __future__ import annotations

from memread.tasks.base import TaskSpec


def check(cfg, where: str) -> None:
    """Every reader reads a sentence; nothing to cross-check."""


CLASSIFY = TaskSpec(check, "sentence classification: accuracy over the classes of whole sentences")
