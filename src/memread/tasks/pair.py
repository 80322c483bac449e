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
from memread.tasks.legacy import upgrade_sections

SCORES = {"answer_selection": True, "cross_entropy": False}  # criterion -> does it score one output unit?


def check(cfg, where: str) -> None:
    check_reader(cfg.head.encoder, cfg.reader.name, where)
    one_score = cfg.data.outputs == 1
    if SCORES.get(cfg.criterion.name, one_score) != one_score:
        fit = next(name for name, scores in SCORES.items() if scores == one_score)
        what = "one relevance score per candidate" if one_score else f"{cfg.data.outputs} classes"
        raise MemreadError(f"{where}: criterion '{cfg.criterion.name}' does not fit data '{cfg.data.name}' "
                           f"({what}); use criterion.name = {fit!r}")


# the earlier [task] table of a pair task: its keys, defaults, and where each one went
LEGACY_DEFAULTS = {"dataset": "snli", "encoder": "siamese", "features": "nse", "pool": "last", "emb": 300, "vectors": "",
                   "oov": "zero", "freeze": False, "first_epoch_scale": 1.0, "lowercase": True, "emb_dropout": 0.0,
                   "mlp": 1024, "dropout": 0.3, "min_count": 1, "bucket": 0}
DATA_KEYS = ("vectors", "lowercase", "min_count", "bucket")
HEAD_KEYS = ("encoder", "features", "pool", "emb", "oov", "freeze", "first_epoch_scale", "emb_dropout", "mlp", "dropout")
LEGACY_CRITERIA = {"snli": "cross_entropy", "wikiqa": "answer_selection"}


def upgrade(task: dict, where: str) -> dict:
    dataset = task.get("dataset", "snli")
    if dataset not in LEGACY_CRITERIA:
        raise MemreadError(f"{where}: key 'task.dataset' must be one of {sorted(LEGACY_CRITERIA)}, got {dataset!r}")
    routes = {k: ("data", k) for k in DATA_KEYS} | {k: ("head", k) for k in HEAD_KEYS}
    return upgrade_sections({k: v for k, v in task.items() if k != "dataset"}, where, routes, LEGACY_DEFAULTS,
                            {"data": {"name": dataset}, "head": {"name": "pair"},
                             "criterion": {"name": LEGACY_CRITERIA[dataset]}})


PAIR = TaskSpec(check, upgrade, "sentence pairs: SNLI inference (accuracy) and WikiQA answer selection (MAP, MRR)")
