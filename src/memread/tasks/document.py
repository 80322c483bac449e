"""Document-level sentiment (NSE paper, section 4.4): a sentence reader, a document reader over the
sentence vectors, a softmax over the rating classes, trained jointly.

Parts: data ``imdb-acl``, ``tang`` (:mod:`memread.data.pipelines.document`); head ``hierarchical``
(:mod:`memread.heads.hierarchical`; ``[reader]`` is the sentence reader, ``head.doc_reader`` the
document reader); criterion ``rating`` (:mod:`memread.criteria.document`: accuracy and the ratings' MSE).
"""

from __future__ import annotations

from memread.tasks.base import TaskSpec


def check(cfg, where: str) -> None:
    cfg.head.doc_reader_config(where)  # the document reader takes head.doc_hidden and head.doc_layers


DOCUMENT = TaskSpec(check, "document sentiment: sentence reader -> document reader -> rating classes")
