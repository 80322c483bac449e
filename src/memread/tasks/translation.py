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
from memread.tasks.legacy import upgrade_sections


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


# the earlier [task] table of a translation experiment: its keys, defaults, and where each one went
LEGACY_DEFAULTS = {"dataset": "iwslt14", "model": "lstm-lstm", "source": "en", "unk_mapped": False, "train_file": "valid",
                   "dev_fraction": 0.1, "test_file": "test", "max_len": 25, "src_vocab": 0, "tgt_vocab": 25000,
                   "min_count": 1, "emb": 300, "tgt_emb": 300, "vectors": "", "freeze": False, "oov": "zero",
                   "decoder_layers": 2, "input_feeding": False, "input_dropout": 0.2, "output_dropout": 0.3, "bucket": 0}
LEGACY_MODELS = {"lstm-lstm": "attention_decoder", "nse-lstm": "attention_decoder", "nse-nse": "nse_decoder",
                 "lstmn-shallow": "lstmn_shallow", "lstmn-deep": "lstmn_deep"}


def upgrade(task: dict, where: str) -> dict:
    """``model`` named encoder and decoder; the encoder is the ``[reader]`` as it was, so ``model`` picks the head."""
    dataset, model = task.get("dataset", "iwslt14"), task.get("model", "lstm-lstm")
    if dataset != "iwslt14":
        raise MemreadError(f"{where}: key 'task.dataset' must be 'iwslt14', got {dataset!r}")
    if model not in LEGACY_MODELS:
        raise MemreadError(f"{where}: key 'task.model' must be one of {sorted(LEGACY_MODELS)}, got {model!r}")
    head = LEGACY_MODELS[model]
    routes = {k: ("data", k) for k in ("source", "unk_mapped", "train_file", "dev_fraction", "test_file", "max_len",
                                       "src_vocab", "tgt_vocab", "min_count", "vectors", "bucket")}
    routes |= {k: ("head", k) for k in ("emb", "tgt_emb", "freeze", "oov", "input_dropout", "output_dropout")}
    if head == "attention_decoder":
        routes |= {k: ("head", k) for k in ("decoder_layers", "input_feeding")}
    rest = {k: v for k, v in task.items() if k not in ("dataset", "model")}
    return upgrade_sections(rest, where, routes, LEGACY_DEFAULTS,
                            {"data": {"name": "iwslt14"}, "head": {"name": head}, "criterion": {"name": "token_nll"}})


TRANSLATE = TaskSpec(check, upgrade, "translation with encoder-decoders: token perplexity; BLEU by decoding")
