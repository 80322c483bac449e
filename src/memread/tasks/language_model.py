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


LM = TaskSpec(check, "word-level language modelling: perplexity of a token stream or of documents")
