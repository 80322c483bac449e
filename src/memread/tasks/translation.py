"""Machine translation with encoder-decoder models: the NSE paper's IWSLT14 experiment (Munkhdalai &
Yu 2016, section 4.5) and the LSTMN paper's fusion decoders (Cheng et al. 2016, section 4).

Parts: data ``iwslt14`` (:mod:`memread.data.pipelines.translation`); the ``[reader]`` is the encoder
and the head picks the decoder: ``attention_decoder``, ``nse_decoder``, ``lstmn_shallow``,
``lstmn_deep`` (:mod:`memread.heads.translation`); criterion ``token_nll``
(:mod:`memread.criteria.translation`). BLEU: ``memread bleu RUN_DIR`` (:mod:`memread.decoding`, greedy
by default as the paper: "we do not use a beam search").

What must fit: the fusion decoders read the encoder's memory tape (``ReaderSpec.memory_tape``); the
NSE decoder reads and writes the encoder's final memory and mirrors its read/write LSTMs
(``reader.layers``, ``reader.dropout``); the encoder reads no shared memory; a frozen source embedding
needs pretrained vectors.
"""

from __future__ import annotations

import dataclasses

from memread.errors import MemreadError
from memread.readers import READERS, readers_with
from memread.tasks.base import TaskSpec


def check(cfg, where: str) -> None:
    head, reader = cfg.head, cfg.reader
    spec = READERS[reader.name]
    if head.freeze and not cfg.data.vectors:
        raise MemreadError(f"{where}: head.freeze = true needs data.vectors (a frozen random embedding learns nothing)")
    if spec.shared_memory and reader.shared:
        raise MemreadError(f"{where}: the encoder reads no shared memory; set reader.shared = 0")
    if head.name in ("lstmn_shallow", "lstmn_deep") and not spec.memory_tape:
        raise MemreadError(f"{where}: head '{head.name}' reads the encoder's memory tape; reader '{reader.name}' "
                           f"keeps none (use one of {', '.join(readers_with('memory_tape'))})")
    if head.name == "nse_decoder":
        keys = {f.name for f in dataclasses.fields(reader)}
        if not {"layers", "dropout"} <= keys:
            raise MemreadError(f"{where}: head 'nse_decoder' mirrors the encoder's read/write LSTMs (reader.layers, "
                               f"reader.dropout); reader '{reader.name}' has no such keys")


TRANSLATE = TaskSpec(check, "translation with encoder-decoders: token perplexity; BLEU by decoding")
