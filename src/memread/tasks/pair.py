"""Two texts in, one decision out: natural language inference (SNLI) and answer sentence selection
(WikiQA), with any reader as the encoder.

Parts: data ``snli``, ``wikiqa`` (:mod:`memread.data.pipelines.pair`); head ``pair`` with its
``encoder`` (:mod:`memread.heads.pair`); criterion ``cross_entropy`` (SNLI's three classes,
:mod:`memread.criteria.classification`) or ``answer_selection`` (WikiQA's one relevance score per
candidate, MAP and MRR over whole questions, :mod:`memread.criteria.answer_selection`). The MMA
encoders need a reader whose memory a second reader can share (``ReaderSpec.shared_memory``), the
fusion encoders one with a memory tape (``ReaderSpec.memory_tape``).
"""

from __future__ import annotations

from memread.errors import MemreadError
from memread.heads.pair import check_reader
from memread.tasks.base import TaskSpec

SCORES = {"answer_selection": True, "cross_entropy": False}  # criterion -> does it score one output unit?


def check(cfg, where: str) -> None:
    check_reader(cfg.head.encoder, cfg.reader.name, where)
    one_score = cfg.data.outputs == 1
    if SCORES.get(cfg.criterion.name, one_score) != one_score:
        fit = next(name for name, scores in SCORES.items() if scores == one_score)
        what = "one relevance score per candidate" if one_score else f"{cfg.data.outputs} classes"
        raise MemreadError(f"{where}: criterion '{cfg.criterion.name}' does not fit data '{cfg.data.name}' "
                           f"({what}); use criterion.name = {fit!r}")


PAIR = TaskSpec(check, "sentence pairs: SNLI inference (accuracy) and WikiQA answer selection (MAP, MRR)")
