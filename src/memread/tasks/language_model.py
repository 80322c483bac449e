"""Word-level language modelling: a stream (or documents) of tokens -> embedding -> reader -> softmax.

Parts: data ``ptb``, ``wikitext-2``, ``wikitext-103``, ``stories-text``, ``cbt-text``
(:mod:`memread.data.pipelines.lm`); head ``lm`` (:mod:`memread.heads.lm`); criterion ``lm_nll``
(:mod:`memread.criteria.lm`). Reading documents (``data.documents = true``) needs a reader that resets
at document starts (``ReaderSpec.resets``).
"""

from __future__ import annotations

from memread.errors import MemreadError
from memread.readers import READERS, readers_with
from memread.tasks.base import TaskSpec
from memread.tasks.legacy import upgrade_sections


def check(cfg, where: str) -> None:
    data = cfg.data
    if data.context == "stream":
        for key, default in (("max_len", 0), ("bucket", 20)):
            if getattr(data, key) != default:
                raise MemreadError(f"{where}: data.{key} applies to data.context = \"sentence\" (each sentence read "
                                   f"alone); the stream is cut into data.bptt segments")
    elif getattr(data, "documents", False):
        raise MemreadError(f"{where}: data.documents = true reads a corpus as documents in a stream; with data.context "
                           f"= \"sentence\" every sentence is read alone already: drop one of them")
    if not READERS[cfg.reader.name].carries_state:
        raise MemreadError(f"{where}: reader '{cfg.reader.name}' reads a whole sequence before its outputs (it would "
                           f"see the words it predicts): a language model needs one of "
                           f"{', '.join(readers_with('carries_state'))}")
    if getattr(cfg.data, "documents", False) and not READERS[cfg.reader.name].resets:
        raise MemreadError(f"{where}: data.documents = true needs a reader that resets at document starts; "
                           f"reader '{cfg.reader.name}' cannot (use one of {', '.join(readers_with('resets'))})")


# the earlier [task] table of a language model: its keys, defaults, and where each one went
LEGACY_DEFAULTS = {"dataset": "ptb", "bptt": 35, "emb": 150, "dropout": 0.0, "tie_weights": False, "init_range": 0.1,
                   "loss_reduction": "sequence", "min_count": 1, "max_vocab": 0, "documents": False, "numbers": False,
                   "stories": 2000, "train_file": "", "valid_file": "", "test_file": "", "story_seed": 0}
LEGACY_DATASETS = {"ptb": "ptb", "wikitext-2": "wikitext-2", "wikitext-103": "wikitext-103",
                   "stories": "stories-text", "cbt-files": "cbt-text"}


def upgrade(task: dict, where: str) -> dict:
    dataset = task.get("dataset", "ptb")
    if dataset not in LEGACY_DATASETS:
        raise MemreadError(f"{where}: key 'task.dataset' must be one of {sorted(LEGACY_DATASETS)}, got {dataset!r}")
    routes = {k: ("data", k) for k in ("bptt", "min_count", "max_vocab", "numbers")}
    routes |= {k: ("head", k) for k in ("emb", "dropout", "tie_weights", "init_range")}
    routes["loss_reduction"] = ("criterion", "reduction")
    if dataset != "ptb":
        routes["documents"] = ("data", "documents")
    if dataset == "stories":
        routes |= {k: ("data", k) for k in ("stories", "story_seed")}
    if dataset == "cbt-files":
        routes |= {k: ("data", k) for k in ("train_file", "valid_file", "test_file")}
    return upgrade_sections({k: v for k, v in task.items() if k != "dataset"}, where, routes, LEGACY_DEFAULTS,
                            {"data": {"name": LEGACY_DATASETS[dataset]}, "head": {"name": "lm"}, "criterion": {"name": "lm_nll"}})


LM = TaskSpec(check, upgrade, "word-level language modelling: perplexity of a token stream or of documents")
