"""``memread reproduce``: every table row of the four papers, what memread has for it, and a verdict.

:data:`ROWS` is the explicit table: one :class:`Row` per number printed in the results tables of

- ``lstmn``: Cheng, Dong & Lapata 2016, Tables 1-3 (the early version prints the same numbers);
- ``nse``: Munkhdalai & Yu 2016, Tables 1-5;
- ``daniluk``: Daniluk et al. 2017, Figure 2 (a)-(d) (the four tables inside the figure);
- ``sordoni``: Sordoni et al. 2016, Tables 2 and 3.

A table row with several result columns (fine-grained and binary SST; MAP and MRR; train, dev and test
BLEU; the four CBT word classes) is one :class:`Row` per column, each with one dataset, metric and split;
a cell printed as "-" is no row. Row ids are ``PAPER-TABLE[-DATASET]-MODEL[-SPLIT][-METRIC]``, e.g.
``lstmn-t1-lstmn-3layer``, ``nse-t2-wikiqa-mma-nse-attention`` (MAP, test) and
``nse-t2-wikiqa-mma-nse-attention-mrr``, ``daniluk-f2c-kvp`` (test) and ``daniluk-f2c-kvp-dev``.

Units are the papers' except that accuracies are in percent throughout (Daniluk et al.'s Figure 2d prints
fractions: 0.523 is 52.3 here), as ``results/results.jsonl`` records them.

Rows of every baseline the papers quote are listed too; memread has configs only for the models it
implements. Where the benchmark data lacks the row's data (its ``MANIFEST.md``: CBT, CNN,
the Yelp/IMDB sets of Tang et al., the full SNLI train split, the IWSLT14 train split, the Wikipedia
corpus of Daniluk et al. / WikiText train), the row says so and its verdict is "data not available";
numbers memread recorded on a stand-in for that data (SNLI's 1% train sample, PTB for the Wikipedia
corpus, the Gutenberg cloze sets for CBT-NE) are shown with the stand-in named, never judged.

Our numbers come from ``results/results.jsonl`` (one JSON object per line), by the experiment names a
row lists and the lines ``memread reproduce ROW_ID`` appends under the row's own id.
"""

from __future__ import annotations

import json
import math
import os
import re
import shlex
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from memread.errors import MemreadError
from memread.tools.claims import cell, claims_markdown, is_number
from memread.typed import override_value

REPO = Path(__file__).resolve().parents[3]  # the checkout this module sits in (src/memread/tools/..)

PAPERS = {
    "lstmn": "Cheng, Dong & Lapata 2016: Long Short-Term Memory-Networks for Machine Reading (LSTMN)",
    "nse": "Munkhdalai & Yu 2016: Neural Semantic Encoders (NSE)",
    "daniluk": ("Daniluk, Rocktäschel, Welbl & Riedel 2017: Frustratingly Short Attention Spans in Neural Language "
                "Modeling"),
    "sordoni": "Sordoni, Bachman, Trischler & Bengio 2016: Iterative Alternating Neural Attention for Machine Reading",
}

VERDICTS = ("holds", "within noise", "does not hold", "not tested", "data not available")
LOWER_IS_BETTER = frozenset({"ppl", "mse"})

MISSING_SNLI = "data not available here: the full SNLI train split (only a 1% sample of it; dev and test are complete)"
MISSING_IWSLT = "data not available here: the IWSLT14 train split (only the MIXER valid and test files)"
MISSING_TANG = ("data not available here: the Yelp 2013 and IMDB sets of Tang et al. 2015 (aclImdb of Maas et al. "
                "is here, a substitute with other labels)")
MISSING_WIKI = ("data not available here: the paper's Wikipedia corpus (7,500 articles, 22.5M words) and WikiText "
                "train (only WikiText-2 valid and test)")
MISSING_CBT = "data not available here: the full CBT (only 12 format-sample questions)"
MISSING_CNN = "data not available here: the CNN cloze set (DeepMind rc-data)"


@dataclass(frozen=True)
class Row:
    """One number of a paper's results table and memread's counterpart."""

    id: str
    paper: str  # a key of PAPERS
    table: str  # "Table 1", "Figure 2c"
    name: str  # the row as the paper prints it
    dataset: str
    metric: str  # the key in final.json / results.jsonl: ppl, accuracy, map, mrr, mse, bleu
    split: str  # test, valid or train
    paper_value: float
    config: str | None = None  # memread's config for this row (relative to the repository), or None
    experiments: tuple[str, ...] = ()  # results.jsonl experiments that record our number for it
    data_missing: str | None = None  # "data not available here: ..." where the benchmark data lacks it
    stand_in: str | None = None  # what the recorded numbers are on, when not the paper's data
    dataset_match: str | None = None  # only results lines whose dataset contains this (an experiment with several)
    note: str = ""
    scale: float = 1.0  # final.json's value x scale = the paper's unit (100: accuracy in percent)

    @property
    def higher_is_better(self) -> bool:
        return self.metric not in LOWER_IS_BETTER


@dataclass(frozen=True)
class Recorded:
    """Our best recorded number for a row (a line of results.jsonl)."""

    experiment: str
    value: float
    std: float | None  # over seeds, when several were run
    seeds: tuple[int, ...] | None
    commit: str | None
    budget: str
    dataset: str
    # where this line trained settings changed from the row's config (a smaller reader) and a line of the config
    # as it is exists too: the best of those, shown beside it (a one-seed run at the paper's size is no mean over
    # seeds, but a reader of the table should see it)
    as_configured: "Recorded | None" = None


# ----------------------------------------------------------------------------- the table
# builders: one paper table row -> one Row per result column


def _one(id, paper, table, name, dataset, metric, split, value, config=None, exps=(), **kw) -> Row:
    return Row(id, paper, table, name, dataset, metric, split, float(value), config, tuple(exps), **kw)


def _lstmn_t1(slug, name, ppl, config=None, exps=()) -> Row:
    return _one(f"lstmn-t1-{slug}", "lstmn", "Table 1", name, "PTB", "ppl", "test", ppl, config, exps)


def _sst(prefix, paper, table, slug, name, fine, binary, fine_config=None, binary_config=None, fine_exps=(),
         binary_exps=()) -> list[Row]:
    return [_one(f"{prefix}-sst-fine-{slug}", paper, table, name, "SST fine-grained", "accuracy", "test", fine,
                 fine_config, fine_exps, scale=100.0),
            _one(f"{prefix}-sst-binary-{slug}", paper, table, name, "SST binary", "accuracy", "test", binary,
                 binary_config, binary_exps, scale=100.0)]


def _lstmn_t3(slug, name, acc, config=None, exps=()) -> Row:
    return _one(f"lstmn-t3-snli-{slug}", "lstmn", "Table 3", name, "SNLI", "accuracy", "test", acc, config, exps,
                data_missing=MISSING_SNLI, stand_in="SNLI's 1% train sample" if exps else None, scale=100.0)


def _nse_t1(slug, name, train, test, config=None, exps=()) -> list[Row]:
    """(The recorded runs have valid and test accuracy only: the train column's rows name no experiment.)"""
    kw = dict(data_missing=MISSING_SNLI, scale=100.0)
    return [_one(f"nse-t1-snli-{slug}", "nse", "Table 1", name, "SNLI", "accuracy", "test", test, config, exps,
                 stand_in="SNLI's 1% train sample" if exps else None, **kw),
            _one(f"nse-t1-snli-{slug}-train", "nse", "Table 1", name, "SNLI", "accuracy", "train", train, config, **kw)]


def _nse_t2(slug, name, map_, mrr, config=None, exps=()) -> list[Row]:
    return [_one(f"nse-t2-wikiqa-{slug}", "nse", "Table 2", name, "WikiQA", "map", "test", map_, config, exps),
            _one(f"nse-t2-wikiqa-{slug}-mrr", "nse", "Table 2", name, "WikiQA", "mrr", "test", mrr, config, exps)]


def _nse_t4(slug, name, yelp_acc, yelp_mse, imdb_acc, imdb_mse, config=None) -> list[Row]:
    note = ("reads aclImdb's 8 star classes, not comparable: results/notes/document-readers.md; for Tang et al.'s files "
            "set data.name = \"tang\"") if config else ""
    kw = dict(data_missing=MISSING_TANG, note=note)
    return [_one(f"nse-t4-yelp13-{slug}", "nse", "Table 4", name, "Yelp 2013 (Tang et al.)", "accuracy", "test",
                 yelp_acc, config, scale=100.0, **kw),
            _one(f"nse-t4-yelp13-{slug}-mse", "nse", "Table 4", name, "Yelp 2013 (Tang et al.)", "mse", "test",
                 yelp_mse, config, **kw),
            _one(f"nse-t4-imdb-{slug}", "nse", "Table 4", name, "IMDB (Tang et al.)", "accuracy", "test", imdb_acc,
                 config, scale=100.0, **kw),
            _one(f"nse-t4-imdb-{slug}-mse", "nse", "Table 4", name, "IMDB (Tang et al.)", "mse", "test", imdb_mse,
                 config, **kw)]


def _nse_t5(slug, name, train, dev, test, config=None, exps=()) -> list[Row]:
    """(The recorded runs have test BLEU only: the dev and train columns' rows name no experiment.)"""
    kw = dict(data_missing=MISSING_IWSLT)
    data = "IWSLT14 en-de"
    return [_one(f"nse-t5-iwslt14-{slug}", "nse", "Table 5", name, data, "bleu", "test", test, config, exps,
                 stand_in="MIXER valid as train (4.7k pairs)" if exps else None, **kw),
            _one(f"nse-t5-iwslt14-{slug}-dev", "nse", "Table 5", name, data, "bleu", "valid", dev, config, **kw),
            _one(f"nse-t5-iwslt14-{slug}-train", "nse", "Table 5", name, data, "bleu", "train", train, config, **kw)]


WIKI = "Wikipedia (Daniluk et al.)"
ON_PTB = "PTB"


def _daniluk_exps(model: str) -> tuple[str, ...]:
    """The PTB runs of a Figure 2 model (``attention-L10``, ``ngram-N4``, ``lstm``) in results.jsonl; the
    baselines added with issue 22 (``rm-L*``, ``*-hornn``) have their one-epoch runs only so far."""
    exps = [f"ptb-daniluk-{model}-1epoch"]
    if model in ("lstm", "attention-L10", "kv-L10", "kvp-L5", "ngram-N4"):
        exps.append(f"ptb-daniluk-{model}-5ep")
        exps.append(f"ptb-daniluk-{model}-paper-recipe-{3635 if model in ('attention-L10', 'kv-L10') else 4726}")
        exps.append(f"ptb-daniluk-{model}-paper-recipe-3seeds")  # Figure 2c's claim, 3 seeds to early stopping
    return tuple(exps)


def _daniluk_f2a(slug, name, model, values) -> list[Row]:
    out = []
    for window, value in zip((1, 5, 10, 15), values):
        config = f"configs/ptb/daniluk-{model}-L{window}.toml" if model else None
        exps = _daniluk_exps(f"{model}-L{window}") if model else ()
        out.append(_one(f"daniluk-f2a-{slug}-l{window}", "daniluk", "Figure 2a", f"{name}, window {window}", WIKI,
                        "ppl", "test", value, config, exps, data_missing=MISSING_WIKI,
                        stand_in=ON_PTB if exps else None))
    return out


def _daniluk_f2bc(table, slug, name, dev, test, model=None) -> list[Row]:
    config = f"configs/ptb/daniluk-{model}.toml" if model else None
    exps = _daniluk_exps(model) if model else ()
    kw = dict(data_missing=MISSING_WIKI, stand_in=ON_PTB if exps else None)
    t = table[-1]
    return [_one(f"daniluk-f2{t}-{slug}", "daniluk", table, name, WIKI, "ppl", "test", test, config, exps, **kw),
            _one(f"daniluk-f2{t}-{slug}-dev", "daniluk", table, name, WIKI, "ppl", "valid", dev, config, exps, **kw)]


def _daniluk_f2d(slug, name, ne, cn, v, p, config=None, exps=()) -> list[Row]:
    """Figure 2d prints fractions; here they are percent (0.523 -> 52.3). A ``None`` cell is the paper's "-"."""
    out = []
    for cls, label, value in (("ne", "CBT named entities", ne), ("cn", "CBT common nouns", cn), ("v", "CBT verbs", v),
                              ("p", "CBT prepositions", p)):
        if value is None:
            continue
        stand = {"ne": "Gutenberg cloze NE", "p": "Gutenberg cloze P"}.get(cls) if exps else None
        out.append(_one(f"daniluk-f2d-cbt-{cls}-{slug}", "daniluk", "Figure 2d", name, label, "accuracy", "test",
                        round(100 * value, 1), config, exps if stand else (), data_missing=MISSING_CBT,
                        stand_in=f"{stand} (CBT recipe, 11 NLTK books)" if stand else None,
                        dataset_match=f"cloze {cls.upper()} " if stand else None, scale=100.0))
    return out


def _sordoni_t2(line, slug, name, ne_valid, ne_test, cn_valid, cn_test, ne_config=None, ne_exps=()) -> list[Row]:
    out = []
    for cls, label, valid, test in (("ne", "CBT-NE", ne_valid, ne_test), ("cn", "CBT-CN", cn_valid, cn_test)):
        config, exps = (ne_config, ne_exps) if cls == "ne" else (None, ())
        kw = dict(data_missing=MISSING_CBT, scale=100.0,
                  stand_in="Gutenberg cloze NE (CBT recipe, 11 NLTK books)" if exps else None)
        for split, value in (("test", test), ("valid", valid)):
            if value is None:
                continue
            rid = f"sordoni-t2-cbt-{cls}-{slug}" + ("-valid" if split == "valid" else "")
            out.append(_one(rid, "sordoni", "Table 2", f"{name} (line {line})", label, "accuracy", split, value, config,
                            exps, **kw))
    return out


def _sordoni_t3(line, slug, name, valid, test) -> list[Row]:
    kw = dict(data_missing=MISSING_CNN, scale=100.0)
    return [_one(f"sordoni-t3-cnn-{slug}", "sordoni", "Table 3", f"{name} (line {line})", "CNN", "accuracy", "test",
                 test, **kw),
            _one(f"sordoni-t3-cnn-{slug}-valid", "sordoni", "Table 3", f"{name} (line {line})", "CNN", "accuracy",
                 "valid", valid, **kw)]


_SST = "configs/sst"
_IWSLT = "configs/iwslt14"

ROWS: list[Row] = [
    # ---------------------------------------------------------------- LSTMN, Table 1: PTB test perplexity
    _lstmn_t1("kn5", "KN5", 141),
    _lstmn_t1("rnn", "RNN (1 layer)", 129, "configs/ptb/rnn.toml", ["ptb-rnn-1x300-partial-7-epochs"]),
    _lstmn_t1("lstm", "LSTM (1 layer)", 115, "configs/ptb/lstm.toml", ["ptb-lstm-1x300"]),
    _lstmn_t1("lstmn", "LSTMN (1 layer)", 108, "configs/ptb/lstmn.toml", ["ptb-lstmn-1x300", "ptb-lstmn-1x300-span3",
               "ptb-lstmn-1x300-span35-dropout-empty", "ptb-lstmn-1x300-span35-dropout-zero-slot"]),
    _lstmn_t1("slstm-3layer", "sLSTM (3 layers)", 115, "configs/ptb/slstm-3layer.toml",
              ["ptb-slstm-3x300-6epochs", "ptb-slstm-3x300-9epochs", "ptb-slstm-3x300-paper-recipe",
               "ptb-slstm-3x300-paper-recipe-claim-seed1"]),
    _lstmn_t1("glstm-3layer", "gLSTM (3 layers)", 107, "configs/ptb/gflstm-3layer.toml",
              ["ptb-gflstm-3x300-6epochs", "ptb-gflstm-3x300-paper-recipe",
               "ptb-gflstm-3x300-paper-recipe-claim-seed1"]),
    _lstmn_t1("dlstm-3layer", "dLSTM (3 layers)", 109, "configs/ptb/dglstm-3layer.toml",
              ["ptb-dglstm-3x300-6epochs", "ptb-dglstm-3x300-paper-recipe",
               "ptb-dglstm-3x300-paper-recipe-claim-seed1"]),
    _lstmn_t1("lstmn-3layer", "LSTMN (3 layers)", 102, "configs/ptb/lstmn-3layer.toml",
              ["ptb-lstmn-3x300-span3-9epochs", "ptb-lstmn-3x300-span3",
               "ptb-lstmn-3x300-span35-paper-recipe-claim-seed1"]),
    # ---------------------------------------------------------------- LSTMN, Table 2: SST test accuracy (fine, binary)
    *_sst("lstmn-t2", "lstmn", "Table 2", "rae", "RAE (Socher et al., 2011)", 43.2, 82.4),
    *_sst("lstmn-t2", "lstmn", "Table 2", "rntn", "RNTN (Socher et al., 2013)", 45.7, 85.4),
    *_sst("lstmn-t2", "lstmn", "Table 2", "drnn", "DRNN (Irsoy and Cardie, 2014)", 49.8, 86.6),
    *_sst("lstmn-t2", "lstmn", "Table 2", "dcnn", "DCNN (Blunsom et al., 2014)", 48.5, 86.8),
    *_sst("lstmn-t2", "lstmn", "Table 2", "cnn-mc", "CNN-MC (Kim, 2014)", 48.0, 88.1),
    *_sst("lstmn-t2", "lstmn", "Table 2", "t-cnn", "T-CNN (Lei et al., 2015)", 51.2, 88.6),
    *_sst("lstmn-t2", "lstmn", "Table 2", "pv", "PV (Le and Mikolov, 2014)", 48.7, 87.8),
    *_sst("lstmn-t2", "lstmn", "Table 2", "ct-lstm", "CT-LSTM (Tai et al., 2015)", 51.0, 88.0),
    *_sst("lstmn-t2", "lstmn", "Table 2", "lstm", "LSTM (Tai et al., 2015)", 46.4, 84.9, f"{_SST}/lstm-fine.toml",
          f"{_SST}/lstm-binary.toml", ["sst-lstm-fine"], ["sst-lstm-binary"]),
    *_sst("lstmn-t2", "lstmn", "Table 2", "lstm-2layer", "2-layer LSTM (Tai et al., 2015)", 46.0, 86.3,
          f"{_SST}/lstm2-fine.toml", f"{_SST}/lstm2-binary.toml"),
    *_sst("lstmn-t2", "lstmn", "Table 2", "lstmn", "LSTMN", 47.6, 86.3, f"{_SST}/lstmn-fine.toml",
          f"{_SST}/lstmn-binary.toml", ["sst-lstmn-fine"], ["sst-lstmn-binary"]),
    *_sst("lstmn-t2", "lstmn", "Table 2", "lstmn-2layer", "2-layer LSTMN", 47.9, 87.0, f"{_SST}/lstmn2-fine.toml",
          f"{_SST}/lstmn2-binary.toml"),
    # ---------------------------------------------------------------- LSTMN, Table 3: SNLI test accuracy
    _lstmn_t3("bow", "BOW concatenation", 59.8),
    _lstmn_t3("lstm-100", "LSTM (Bowman et al., 2015), h = 100", 77.6),
    _lstmn_t3("lstm-att-100", "LSTM-att (Rocktäschel et al., 2016), h = 100", 83.5),
    _lstmn_t3("mlstm-300", "mLSTM (Wang and Jiang, 2016), h = 300", 86.1),
    _lstmn_t3("lstmn-100", "LSTMN, h = 100", 81.5, "configs/snli/lstmn.toml", ["snli-lstmn"]),
    _lstmn_t3("lstmn-shallow-fusion-100", "LSTMN shallow fusion, h = 100", 84.3,
              "configs/snli/lstmn-shallow-fusion-100.toml", ["snli-lstmn-shallow-fusion-100"]),
    _lstmn_t3("lstmn-deep-fusion-100", "LSTMN deep fusion, h = 100", 84.5, "configs/snli/lstmn-deep-fusion-100.toml",
              ["snli-lstmn-deep-fusion-100"]),
    _lstmn_t3("lstmn-shallow-fusion-300", "LSTMN shallow fusion, h = 300", 85.2,
              "configs/snli/lstmn-shallow-fusion-300.toml"),
    _lstmn_t3("lstmn-deep-fusion-300", "LSTMN deep fusion, h = 300", 85.7, "configs/snli/lstmn-deep-fusion-300.toml"),
    _lstmn_t3("lstmn-shallow-fusion-450", "LSTMN shallow fusion, h = 450", 86.0,
              "configs/snli/lstmn-shallow-fusion-450.toml"),
    _lstmn_t3("lstmn-deep-fusion-450", "LSTMN deep fusion, h = 450", 86.3, "configs/snli/lstmn-deep-fusion-450.toml"),
    # ---------------------------------------------------------------- NSE, Table 1: SNLI accuracy (test, train)
    *_nse_t1("handcrafted", "Classifier with handcrafted features [14]", 99.7, 78.2),
    *_nse_t1("lstm", "LSTMs encoders [14]", 83.9, 80.6, "configs/snli/lstm.toml", ["snli-lstm"]),
    *_nse_t1("tree-cnn", "Dependency Tree CNN encoders [16]", 83.3, 82.1),
    *_nse_t1("spinn-pi", "SPINN-PI encoders [15]", 89.2, 83.2),
    *_nse_t1("nse", "NSE", 86.2, 84.6, "configs/snli/nse.toml", ["snli-nse"]),
    *_nse_t1("mma-nse", "MMA-NSE", 87.1, 84.8, "configs/snli/mma-nse.toml", ["snli-mma-nse"]),
    *_nse_t1("lstm-attention", "LSTMs attention [17]", 85.4, 82.3, "configs/snli/lstm-attention.toml"),
    *_nse_t1("lstm-wbw-attention", "LSTMs word-by-word attention [17]", 85.3, 83.5),
    *_nse_t1("mma-nse-attention", "MMA-NSE attention", 86.9, 85.4, "configs/snli/mma-nse-attention.toml",
             ["snli-mma-nse-attention"]),
    *_nse_t1("mlstm", "mLSTM word-by-word attention [18]", 92.0, 86.1),
    *_nse_t1("lstmn-deep-fusion-450", "LSTMN with deep attention fusion [19]", 89.5, 86.3,
             "configs/snli/lstmn-deep-fusion-450.toml"),
    *_nse_t1("decomposable", "Decomposable attention model [20]", 90.5, 86.8),
    # ---------------------------------------------------------------- NSE, Table 2: WikiQA test MAP, MRR
    *_nse_t2("handcrafted", "Classifier with handcrafted features [23]", 0.5993, 0.6068),
    *_nse_t2("paragraph-vector", "Paragraph Vector [24]", 0.5110, 0.5160),
    *_nse_t2("bigram-cnn", "Bigram-CNN [25]", 0.6190, 0.6281),
    *_nse_t2("lstm-3layer", "Three-layer LSTMs [26]", 0.6552, 0.6747, "configs/wikiqa/lstm.toml",
             ["wikiqa-lstm", "wikiqa-lstm-1x300-early-stopped"]),
    *_nse_t2("lstm-3layer-attention", "Three-layer LSTMs attention [26]", 0.6639, 0.6828,
             "configs/wikiqa/lstm-attention.toml"),
    *_nse_t2("nasm", "NASM [26]", 0.6705, 0.6914),
    *_nse_t2("mma-nse-attention", "MMA-NSE attention", 0.6811, 0.6993, "configs/wikiqa/mma-nse-attention.toml",
             ["wikiqa-mma-nse-attention", "wikiqa-mma-nse-attention-1x300-5-epochs",
              "wikiqa-mma-nse-attention-1x300-3-seeds"]),
    # ---------------------------------------------------------------- NSE, Table 3: SST test accuracy (binary, fine)
    *_sst("nse-t3", "nse", "Table 3", "rntn", "RNTN [27]", 45.7, 85.4),
    *_sst("nse-t3", "nse", "Table 3", "paragraph-vector", "Paragraph Vector [24]", 48.7, 87.8),
    *_sst("nse-t3", "nse", "Table 3", "cnn-mc", "CNN-MC [28]", 47.4, 88.1),
    *_sst("nse-t3", "nse", "Table 3", "drnn", "DRNN [29]", 49.8, 86.6),
    # the 2-layer LSTM of Tai et al., as in LSTMN Table 2: the same config, its runs recorded under that row's id
    *_sst("nse-t3", "nse", "Table 3", "lstm-2layer", "Two-layer LSTMs [30]", 46.0, 86.3, f"{_SST}/lstm2-fine.toml",
          f"{_SST}/lstm2-binary.toml", ["lstmn-t2-sst-fine-lstm-2layer"], ["lstmn-t2-sst-binary-lstm-2layer"]),
    *_sst("nse-t3", "nse", "Table 3", "bilstm", "Bidirectional LSTMs [30]", 49.1, 87.5, f"{_SST}/bilstm-fine.toml",
          f"{_SST}/bilstm-binary.toml"),
    *_sst("nse-t3", "nse", "Table 3", "ct-lstm", "CT-LSTM [30]", 51.0, 88.0),
    *_sst("nse-t3", "nse", "Table 3", "dmn", "DMN [10]", 52.1, 88.6),
    *_sst("nse-t3", "nse", "Table 3", "nse", "NSE", 52.8, 89.7, f"{_SST}/nse-fine.toml", f"{_SST}/nse-binary.toml",
          ["sst-nse-fine"], ["sst-nse-binary"]),
    # ---------------------------------------------------------------- NSE, Table 4: document sentiment (accuracy, MSE)
    *_nse_t4("handcrafted", "Classifier with handcrafted features [31]", 59.8, 0.68, 40.5, 3.56),
    *_nse_t4("paragraph-vector", "Paragraph Vector [31]", 57.7, 0.86, 34.1, 4.69),
    *_nse_t4("cnn", "CNN [31]", 59.7, 0.76, 37.6, 3.30),
    *_nse_t4("conv-grnn", "Conv-GRNN [31]", 63.7, 0.56, 42.5, 2.71),
    *_nse_t4("lstm-grnn", "LSTM-GRNN [31]", 65.1, 0.50, 45.3, 3.00),
    *_nse_t4("nse-nse", "NSE-NSE", 66.6, 0.48, 48.3, 1.94, "configs/imdb/nse-nse.toml"),
    *_nse_t4("nse-lstm", "NSE-LSTMs", 67.0, 0.47, 48.1, 1.98, "configs/imdb/nse-lstm.toml"),
    # ------------------------------------------------------------ NSE, Table 5: IWSLT14 en-de BLEU (test, dev, train)
    *_nse_t5("lstm-lstm", "Baseline LSTMs-LSTMs", 28.06, 17.96, 17.02, f"{_IWSLT}/lstm-lstm.toml",
             ["iwslt-lstm-lstm-e8", "iwslt-lstm-lstm-e20"]),
    *_nse_t5("nse-lstm", "NSE-LSTMs", 28.73, 17.67, 17.13, f"{_IWSLT}/nse-lstm.toml",
             ["iwslt-nse-lstm-e8", "iwslt-nse-lstm-e20"]),
    *_nse_t5("nse-nse", "NSE-NSE (Shared memory access)", 29.89, 18.53, 17.93, f"{_IWSLT}/nse-nse.toml",
             ["iwslt-nse-nse-e8", "iwslt-nse-nse-e20"]),
    # ------------------------------------------------------------ Daniluk et al., Figure 2a: test ppl by window size
    *_daniluk_f2a("rm", "RM(+tM-g) (Tran et al., 2016)", "rm", (83.5, 80.5, 80.3, 80.1)),
    *_daniluk_f2a("attention", "Attention", "attention", (82.2, 82.2, 82.0, 82.8)),
    *_daniluk_f2a("kv", "Key-Value", "kv", (78.7, 79.0, 78.2, 78.9)),
    *_daniluk_f2a("kvp", "Key-Value-Predict", "kvp", (76.1, 75.8, 76.0, 75.8)),
    # ---------------------------------------------------------------- Figure 2b: N-gram RNNs (dev, test ppl)
    *_daniluk_f2bc("Figure 2b", "2gram", "2-gram RNN", 76.0, 77.1, "ngram-N2"),
    *_daniluk_f2bc("Figure 2b", "3gram", "3-gram RNN", 74.9, 75.9, "ngram-N3"),
    *_daniluk_f2bc("Figure 2b", "4gram", "4-gram RNN", 74.8, 75.9, "ngram-N4"),
    *_daniluk_f2bc("Figure 2b", "5gram", "5-gram RNN", 76.0, 77.3, "ngram-N5"),
    # ------------------------------------------------------------ Figure 2c: models at their best window (dev, test)
    *_daniluk_f2bc("Figure 2c", "rnn", "RNN", 121.7, 125.7),
    *_daniluk_f2bc("Figure 2c", "lstm", "LSTM", 83.2, 85.2, "lstm"),
    *_daniluk_f2bc("Figure 2c", "fofe-hornn", "FOFE HORNN (3rd order) (Soltani & Jiang, 2016)", 116.7, 120.5,
                   model="fofe-hornn"),
    *_daniluk_f2bc("Figure 2c", "gated-hornn", "Gated HORNN (3rd order) (Soltani & Jiang, 2016)", 93.9, 97.1,
                   model="gated-hornn"),
    *_daniluk_f2bc("Figure 2c", "rm", "RM(+tM-g) (Tran et al., 2016), a = 15", 78.2, 80.1, model="rm-L15"),
    *_daniluk_f2bc("Figure 2c", "attention", "Attention, a = 10", 80.6, 82.0, "attention-L10"),
    *_daniluk_f2bc("Figure 2c", "kv", "Key-Value, a = 10", 77.1, 78.2, "kv-L10"),
    *_daniluk_f2bc("Figure 2c", "kvp", "Key-Value-Predict, a = 5", 74.2, 75.8, "kvp-L5"),
    *_daniluk_f2bc("Figure 2c", "4gram", "4-gram RNN", 74.8, 75.9, "ngram-N4"),
    # ---------------------------------------------------------------- Figure 2d: CBT test accuracy (NE, CN, V, P)
    *_daniluk_f2d("humans", "Humans (context+query) (Hill et al.)", 0.816, 0.816, 0.828, 0.708),
    *_daniluk_f2d("kn", "Kneser-Ney LM (Hill et al.)", 0.390, 0.544, 0.778, 0.768),
    *_daniluk_f2d("kn-cache", "Kneser-Ney LM + cache (Hill et al.)", 0.439, 0.577, 0.772, 0.679),
    *_daniluk_f2d("lstm-hill", "LSTM (context+query) (Hill et al.)", 0.418, 0.560, 0.818, 0.791),
    *_daniluk_f2d("memnn", "Memory Network (Hill et al.)", 0.666, 0.630, 0.690, 0.703),
    *_daniluk_f2d("as-reader-avg-ensemble", "AS Reader, avg ensemble (Kadlec et al., 2016)", 0.706, 0.689, None, None),
    *_daniluk_f2d("as-reader-greedy-ensemble", "AS Reader, greedy ensemble (Kadlec et al., 2016)", 0.710, 0.675, None,
                  None),
    *_daniluk_f2d("qann", "QANN, 4 hops, GloVe (Weissenborn, 2016)", 0.729, None, None, None),
    *_daniluk_f2d("aoa-reader", "AoA Reader, single model (Cui et al., 2016a)", 0.720, 0.694, None, None),
    *_daniluk_f2d("cas-reader", "CAS Reader, mode avg (Cui et al., 2016b)", 0.692, 0.657, None, None),
    *_daniluk_f2d("ga-reader-ensemble", "GA Reader, ensemble (Dhingra et al., 2016)", 0.719, 0.694, None, None),
    *_daniluk_f2d("epireader-ensemble", "EpiReader, ensemble (Trischler et al., 2016)", 0.718, 0.706, None, None),
    *_daniluk_f2d("fofe-hornn", "FOFE HORNN (3rd order) (Soltani & Jiang, 2016)", 0.465, 0.497, 0.774, 0.741),
    *_daniluk_f2d("gated-hornn", "Gated HORNN (3rd order) (Soltani & Jiang, 2016)", 0.508, 0.547, 0.790, 0.774),
    *_daniluk_f2d("rm", "RM(+tM-g) (Tran et al., 2016)", 0.525, 0.597, 0.817, 0.797),
    *_daniluk_f2d("lstm", "LSTM", 0.523, 0.604, 0.819, 0.786, "configs/cloze/gutenberg-lm-lstm.toml",
                  ["cbt-lm-gutenberg-lm-lstm-1epoch"]),
    *_daniluk_f2d("attention", "Attention", 0.538, 0.595, 0.826, 0.803),
    *_daniluk_f2d("kv", "Key-Value", 0.528, 0.601, 0.822, 0.813),
    *_daniluk_f2d("kvp", "Key-Value-Predict", 0.528, 0.599, 0.829, 0.803, "configs/cloze/gutenberg-lm-kvp.toml",
                  ["cbt-lm-gutenberg-lm-kvp-1epoch"]),
    *_daniluk_f2d("4gram", "4-gram RNN", 0.532, 0.598, 0.815, 0.800),
    # ------------------------------------------------------------ Sordoni et al., Table 2: CBT accuracy (valid, test)
    *_sordoni_t2(1, "humans-query", "Humans (query)", None, 52.0, None, 64.4),
    *_sordoni_t2(2, "humans-context-query", "Humans (context+query)", None, 81.6, None, 81.6),
    *_sordoni_t2(3, "lstm", "LSTMs (context+query)", 51.2, 41.8, 62.6, 56.0),
    *_sordoni_t2(4, "memnn", "MemNNs (window memory + self-sup.)", 70.4, 66.6, 64.2, 63.0),
    *_sordoni_t2(5, "as-reader", "AS Reader", 73.8, 68.6, 68.8, 63.4, "configs/cloze/gutenberg-ne-as.toml",
                 ["gutenberg-ne-as"]),
    *_sordoni_t2(6, "iaa-fixed-query", "Ours (fixed query attention)", 73.3, 66.0, 69.9, 64.3,
                 "configs/cloze/gutenberg-ne-fixed.toml", ["gutenberg-ne-fixed"]),
    *_sordoni_t2(7, "iaa", "Ours", 75.2, 68.6, 72.1, 69.2, "configs/cloze/gutenberg-ne-iaa.toml", ["gutenberg-ne-iaa"]),
    *_sordoni_t2(8, "as-reader-ensemble", "AS Reader (Ensemble)", 74.5, 70.6, 71.1, 68.9),
    *_sordoni_t2(9, "iaa-ensemble", "Ours (Ensemble)", 76.9, 72.0, 74.1, 71.0),
    # ---------------------------------------------------------------- Table 3: CNN accuracy (valid, test)
    *_sordoni_t3(1, "word-distance", "Word distance model", 50.5, 50.9),
    *_sordoni_t3(2, "deep-lstm-reader", "Deep LSTM Reader", 55.0, 57.0),
    *_sordoni_t3(3, "attentive-reader", "Attentive Reader", 61.6, 63.0),
    *_sordoni_t3(4, "impatient-reader", "Impatient Reader", 61.8, 63.8),
    *_sordoni_t3(5, "memnn-window", "MemNNs (window memory)", 50.8, 60.6),
    *_sordoni_t3(6, "memnn-window-self-sup", "MemNNs (window memory + self sup.)", 63.4, 66.8),
    *_sordoni_t3(7, "as-reader", "AS Reader", 68.6, 69.9),
    *_sordoni_t3(8, "iaa", "Ours", 72.6, 73.3),
    *_sordoni_t3(9, "stanford-ar", "Stanford AR (with GloVe)", 72.4, 72.4),
    *_sordoni_t3(10, "memnn-ensemble", "MemNNs (Ensemble)", 66.2, 69.4),
    *_sordoni_t3(11, "as-reader-ensemble", "AS Reader (Ensemble)", 73.9, 75.4),
    *_sordoni_t3(13, "iaa-ensemble", "Ours (Ensemble)", 75.2, 76.1),
]

# how far each recorded experiment trained (from its results note); lines memread reproduce appends carry their own
BUDGETS = {
    "ptb-lstm-1x300": "21 of 40 epochs",
    "ptb-rnn-1x300-partial-7-epochs": "7 of 40 epochs",
    "ptb-lstmn-1x300": "span 35, 20 epochs (early stop)",
    "ptb-lstmn-1x300-span3": "14 of 40 epochs",
    "ptb-lstmn-3x300-span3-9epochs": "9 of 40 epochs",
    "ptb-lstmn-3x300-span3": "29 of 40 epochs",
    "sst-lstm-fine": "10 epochs, GloVe 6B 50d",
    "sst-lstmn-fine": "10 epochs, GloVe 6B 50d",
    "sst-nse-fine": "12 of 25 epochs, sentences only (no phrases), GloVe 6B 50d",
    "sst-lstm-binary": "10 epochs, GloVe 6B 50d",
    "sst-lstmn-binary": "10 epochs, GloVe 6B 50d",
    "sst-nse-binary": "12 of 25 epochs, sentences only (no phrases), GloVe 6B 50d",
    "snli-lstm": "10 epochs on the 1% train sample",
    "snli-nse": "10 epochs on the 1% train sample",
    "snli-lstmn": "10 epochs on the 1% train sample",
    "snli-lstmn-shallow-fusion-100": "10 epochs on the 1% train sample",
    "snli-lstmn-deep-fusion-100": "10 epochs on the 1% train sample",
    "snli-mma-nse": "10 epochs on the 1% train sample",
    "snli-mma-nse-attention": "17 epochs (best at 14) on the 1% train sample",
    "wikiqa-lstm": "half an epoch (320 steps), 1x300 reader",
    "wikiqa-mma-nse-attention": "half an epoch (320 steps), 1x300 reader",
    "wikiqa-lstm-1x300-early-stopped": "early stop at 6-6.5 of 8 epochs, 1x300 reader",
    "wikiqa-mma-nse-attention-1x300-5-epochs": "5 of 8 epochs (stopped by hand), 1x300 reader",
    "wikiqa-mma-nse-attention-1x300-3-seeds": "seed 1 stopped by hand at 5 epochs, seeds 2-3 early-stopped at 4.5 and 6 of 8 epochs, 1x300 reader",
    "gutenberg-ne-iaa": "3 epochs (216 steps)",
    "gutenberg-ne-fixed": "3 epochs (216 steps)",
    "gutenberg-ne-as": "3 epochs (216 steps)",
    "cbt-lm-gutenberg-lm-lstm-1epoch": "LM trained 726 updates",
    "cbt-lm-gutenberg-lm-kvp-1epoch": "LM trained 726 updates",
}
for _m in ("lstm-lstm", "nse-lstm", "nse-nse"):
    BUDGETS[f"iwslt-{_m}-e8"] = "8 epochs"
    BUDGETS[f"iwslt-{_m}-e20"] = "20 epochs"
for _r in ROWS:
    for _e in _r.experiments:
        if _e.startswith("ptb-daniluk-"):
            BUDGETS[_e] = ("1 epoch (726 updates)" if _e.endswith("-1epoch") else "5 epochs" if _e.endswith("-5ep")
                           else "paper recipe (no dropout), "
                           + ("5 epochs" if _e.endswith("-3635") else "6.5 epochs"))


def rows() -> list[Row]:
    """Every row of the four papers' tables, in the papers' order."""
    return list(ROWS)


def find_row(row_id: str, table: Sequence[Row] | None = None) -> Row:
    table = rows() if table is None else table
    for row in table:
        if row.id == row_id:
            return row
    import difflib

    close = difflib.get_close_matches(row_id, [r.id for r in table], n=3)
    hint = f" (did you mean {', '.join(close)}?)" if close else ""
    raise MemreadError(f"reproduce: no row {row_id!r}{hint}; `memread reproduce list` shows all {len(table)}")


def siblings(row: Row, table: Sequence[Row] | None = None) -> list[Row]:
    """The rows one training run of ``row``'s config answers: the same paper table and config (MAP and MRR of one
    model; its dev and test columns), ``row`` first. A row without a config is its own only sibling."""
    table = rows() if table is None else table
    if row.config is None:
        return [row]
    key = (row.paper, row.table, row.config)
    return [row] + [r for r in table if r is not row and (r.paper, r.table, r.config) == key]


# ----------------------------------------------------------------------------- results.jsonl


def results_path(explicit: str | os.PathLike | None = None) -> Path:
    """``--results``, else ``$MEMREAD_RESULTS``, else ``results/results.jsonl`` under the current folder when it has
    a ``results/`` folder, else the one of the checkout memread runs from."""
    if explicit:
        return Path(explicit)
    env = os.environ.get("MEMREAD_RESULTS")
    if env:
        return Path(env)
    here = Path("results")
    if here.is_dir() or not (REPO / "results").is_dir():
        return here / "results.jsonl"
    return REPO / "results" / "results.jsonl"


def load_results(path: str | os.PathLike) -> list[dict]:
    """The lines of a results.jsonl file (a missing file has none); a line that is not a JSON object is an error
    naming it."""
    path = Path(path)
    if not path.exists():
        return []
    out = []
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        from memread.errors import os_error_line

        raise MemreadError(os_error_line(e, path)) from None
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as e:
            raise MemreadError(f"{path}:{n}: not valid JSON ({e.msg})") from None
        if not isinstance(record, dict):
            raise MemreadError(f"{path}:{n}: not a JSON object")
        out.append(record)
    return out


def best_recorded(row: Row, results: Iterable[dict], table: Sequence[Row] | None = None) -> Recorded | None:
    """Our best recorded value for ``row`` (its metric on its split), or None.

    The lines considered: those of the row's ``experiments`` (restricted to ``dataset_match`` where the row sets
    it) and those ``memread reproduce`` appended under the id of the row or of a sibling (:func:`siblings`).
    A line with a ``seed`` key is one seed of a ``memread reproduce`` run, whose mean line stands for it, so it is
    skipped. A mean over several seeds comes first (one seed's number may be a lucky draw, and the claims are
    judged on means), then a line of the row's config as it is before one ``memread reproduce`` trained with
    settings changed from it (a smaller reader: its budget says so, :data:`CHANGED`); among the lines left, best is
    the highest value (the lowest for perplexity and MSE); a tie goes to the later line. A mean that a mean over
    more seeds of the same runs or the same ``memread reproduce`` recipe includes (:func:`_part_of`) stands aside
    for that larger sample, however it compares. The std is the line's ``std``, else the sample std of its
    ``per_seed`` values when there are several. Where the line shown trained changed settings and a line of the
    config as it is exists, the best of those rides along as ``as_configured`` (the table shows both).
    """
    named = set(row.experiments)
    own = {r.id for r in siblings(row, table)}
    lines = []
    for rec in results:
        exp = rec.get("experiment")
        if exp not in named and exp not in own:
            continue
        if exp not in own and row.dataset_match and row.dataset_match not in str(rec.get("dataset", "")):
            continue
        if rec.get("metric") != row.metric or rec.get("split") != row.split or "seed" in rec:
            continue
        if is_number(rec.get("value")):
            lines.append(rec)
    lines = [rec for rec in lines if not any(_part_of(rec, other) for other in lines)]
    rec = _best_line(row, lines)
    if rec is None:
        return None
    also = None
    if _changed(rec):
        also = _best_line(row, [r for r in lines if not _changed(r)])
    return _recorded(rec, _recorded(also) if also is not None else None)


def _changed(rec: dict) -> bool:
    """Whether a line trained settings changed from its row's config (its budget says so, :data:`CHANGED`)."""
    return CHANGED in str(rec.get("budget") or "")


def _best_line(row: Row, lines: Sequence[dict]) -> dict | None:
    """The line :func:`best_recorded` shows among ``lines``: several seeds first, then the config as it is, then
    the best value; a tie goes to the later line."""
    best: tuple[tuple[bool, bool, float], dict] | None = None
    for rec in lines:
        value = rec["value"]
        seeds = rec.get("seeds")
        several = isinstance(seeds, list) and len(seeds) >= 2
        key = (several, not _changed(rec), value if row.higher_is_better else -value)
        if best is None or key >= best[0]:
            best = (key, rec)
    return None if best is None else best[1]


def _recorded(rec: dict, as_configured: Recorded | None = None) -> Recorded:
    per_seed = [v for v in rec.get("per_seed") or [] if is_number(v)]
    std = rec.get("std") if is_number(rec.get("std")) else (statistics.stdev(per_seed) if len(per_seed) >= 2 else None)
    seeds = rec.get("seeds")
    seeds = tuple(int(s) for s in seeds) if isinstance(seeds, list) and all(isinstance(s, int) for s in seeds) else None
    budget = rec.get("budget") or BUDGETS.get(rec["experiment"]) or _short(str(rec.get("command") or ""), 80)
    commit = rec.get("commit")
    return Recorded(rec["experiment"], float(rec["value"]), float(std) if std is not None else None, seeds,
                    str(commit) if commit else None, budget, str(rec.get("dataset", "")), as_configured)


def _seed_values(rec: dict) -> dict[int, float] | None:
    """``{seed: value}`` of a mean line with its ``seeds`` and ``per_seed`` (None for another line)."""
    seeds, values = rec.get("seeds"), rec.get("per_seed")
    if not (isinstance(seeds, list) and isinstance(values, list) and len(seeds) == len(values) >= 2):
        return None
    return dict(zip(seeds, values))


def _recipe(rec: dict) -> tuple | None:
    """A ``memread reproduce`` line's command without its ``--seeds N``: the row and the settings it trained, its
    ``--set`` values as a set (the same settings given in another order are the same recipe)."""
    command = str(rec.get("command") or "")
    if not command.startswith("memread reproduce "):
        return None
    words = shlex.split(re.sub(r" --seeds \d+", "", command))
    sets = frozenset(words[i + 1] for i, w in enumerate(words[:-1]) if w == "--set")
    rest = tuple(w for i, w in enumerate(words) if w != "--set" and (i == 0 or words[i - 1] != "--set"))
    return rest, sets


def _part_of(rec: dict, other: dict) -> bool:
    """Whether ``other``'s mean, over more seeds, stands for ``rec``'s: the same experiment, and either each of
    ``rec``'s seeds among ``other``'s with the same value (the same runs, recorded again) or the same ``memread
    reproduce`` recipe (the same seeds trained again, on another machine say, and more beside them)."""
    mine, theirs = _seed_values(rec), _seed_values(other)
    if mine is None or theirs is None or rec.get("experiment") != other.get("experiment") or len(theirs) <= len(mine):
        return False
    if _recipe(rec) is not None and _recipe(rec) == _recipe(other) and set(mine) <= set(theirs):
        return True
    return all(s in theirs and is_number(v) and is_number(theirs[s]) and math.isclose(v, theirs[s], abs_tol=1e-4)
               for s, v in mine.items())


def verdict(row: Row, best: Recorded | None) -> str:
    """Does the paper's number hold in memread? One of :data:`VERDICTS`, by this rule:

    - "data not available": the benchmark data lacks the row's data (numbers on a stand-in are not judged);
    - "not tested": no recorded number for the row;
    - otherwise, with ``margin`` = ours - paper for a higher-is-better metric (accuracy, MAP, MRR, BLEU) and
      paper - ours for perplexity and MSE, and ``std`` the standard deviation of our number over seeds (0 when
      one seed was run):
      "holds" when margin >= 0 (ours is at least as good as the paper's);
      "within noise" when -std <= margin < 0 (worse, by at most one std over seeds);
      "does not hold" when margin < -std.
    """
    if row.data_missing:
        return "data not available"
    if best is None:
        return "not tested"
    margin = best.value - row.paper_value if row.higher_is_better else row.paper_value - best.value
    if margin >= 0:
        return "holds"
    if margin >= -(best.std or 0.0):
        return "within noise"
    return "does not hold"


# ----------------------------------------------------------------------------- rendering

_DECIMALS = {"map": 4, "mrr": 4}


def _fmt(value: float, metric: str) -> str:
    return f"{value:.{_DECIMALS.get(metric, 2)}f}"


_PRINTED = {"accuracy": 1, "mse": 2, "bleu": 2, "map": 4, "mrr": 4}  # decimals the papers print (perplexity: as given)


def _paper(value: float, metric: str) -> str:
    return f"{value:.{_PRINTED[metric]}f}" if metric in _PRINTED else f"{value:g}"


def _short(text: str, n: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 3] + "..."


def ours_text(row: Row, best: Recorded | None) -> str:
    """``99.62 (1 seed; 14 of 40 epochs; d18fa2b; ptb-lstmn-1x300-span3)``, ``-`` when nothing is recorded."""
    if best is None:
        return "-"
    value = _fmt(best.value, row.metric) + (f" ± {_fmt(best.std, row.metric)}" if best.std is not None else "")
    if row.stand_in:
        value += f" on {row.stand_in}"
    n = len(best.seeds) if best.seeds else 1
    seeds = f"{n} seeds" if n > 1 else "1 seed"
    parts = [seeds, best.budget, best.commit or "commit unknown", best.experiment]
    text = f"{value} ({'; '.join(p for p in parts if p)})"
    if best.as_configured is not None:
        text += f"; the config as it is: {ours_text(row, best.as_configured)}"
    return text


def verdict_text(row: Row, best: Recorded | None) -> str:
    v = verdict(row, best)
    if v == "data not available" and row.data_missing:
        return row.data_missing
    if best is not None and best.as_configured is not None and verdict(row, best.as_configured) != v:
        v += f" (the config as it is: {verdict(row, best.as_configured)})"
    return v


def summary(table: Sequence[Row], results: Sequence[dict]) -> list[dict]:
    """Per paper: rows, rows with a config, rows with a recorded number, and the count of each verdict."""
    out = []
    for paper in PAPERS:
        mine = [r for r in table if r.paper == paper]
        if not mine:
            continue
        bests = [best_recorded(r, results, table) for r in mine]
        counts = {v: 0 for v in VERDICTS}
        for r, b in zip(mine, bests):
            counts[verdict(r, b)] += 1
        out.append({"paper": paper, "rows": len(mine), "configs": sum(r.config is not None for r in mine),
                    "recorded": sum(b is not None for b in bests), **counts})
    return out


VERDICT_RULE = (
    "**Verdict rule** (`memread.tools.reproduce.verdict`). *margin* = ours - paper for accuracy, MAP, MRR and BLEU, "
    "paper - ours for perplexity and MSE; *std* = the standard deviation of our number over seeds (0 for one seed). "
    "**holds**: margin >= 0. **within noise**: -std <= margin < 0. **does not hold**: margin < -std. "
    "**not tested**: nothing recorded. **data not available**: the benchmark data lacks the row's data; numbers "
    "recorded on a stand-in are shown, named, and not judged. *Ours* is the best recorded test (or the row's split) "
    "value among the row's experiments in `results/results.jsonl` (the mean, where several seeds were run), with its "
    "seeds, budget, commit and experiment name; where that number's runs changed settings of the row's config "
    "(a smaller reader: its budget says so) and the config as it is was trained too, the latter's number follows, "
    "with its verdict where the two differ. Our setups differ from the papers' (GloVe 6B 50d instead of 840B "
    "300d, mostly shorter training): see the notes in `results/*.md`.")


def render_markdown(table: Sequence[Row], results: Sequence[dict]) -> str:
    """``results/REPRODUCTION.md``: the summary per paper, then every row by paper and table."""
    results = list(results)
    lines = [
        "# Reproduction status: every table row of the four papers",
        "",
        "Generated from `results/results.jsonl` by `memread reproduce list --markdown > results/REPRODUCTION.md`; "
        "`tests/test_reproduce.py` fails when this file is stale. Do not edit by hand. Rerun a row with "
        "`memread reproduce ROW_ID --seeds N` (it appends its numbers to `results/results.jsonl`).",
        "",
        VERDICT_RULE,
        "",
        "Accuracies are in percent (Daniluk et al.'s Figure 2d prints fractions: 0.523 is 52.3 here).",
        "",
        "| paper | rows | with a memread config | with a recorded number (on its data or a stand-in) | "
        + " | ".join(VERDICTS) + " |",
        "|---|---:|---:|---:|" + "---:|" * len(VERDICTS),
    ]
    for s in summary(table, results):
        lines.append(f"| {s['paper']} | {s['rows']} | {s['configs']} | {s['recorded']} | "
                     + " | ".join(str(s[v]) for v in VERDICTS) + " |")
    lines += ["", *claims_markdown(results)]
    for paper, title in PAPERS.items():
        mine = [r for r in table if r.paper == paper]
        if not mine:
            continue
        lines += ["", f"## {paper}: {title}"]
        for tab in dict.fromkeys(r.table for r in mine):
            lines += ["", f"### {tab}", "",
                      "| row id | row | dataset | metric (split) | paper | memread config | ours | verdict |",
                      "|---|---|---|---|---:|---|---|---|"]
            for r in (r for r in mine if r.table == tab):
                best = best_recorded(r, results, table)
                config = f"`{r.config}`" if r.config else "-"
                if r.note:
                    config += f" ({r.note})"
                lines.append("| " + " | ".join(cell(c) for c in (
                    f"`{r.id}`", r.name, r.dataset, f"{r.metric} ({r.split})", _paper(r.paper_value, r.metric), config,
                    ours_text(r, best), verdict_text(r, best))) + " |")
    return "\n".join(lines) + "\n"


def format_listing(table: Sequence[Row], results: Sequence[dict]) -> str:
    """The plain-text table of ``memread reproduce list``: one line per row."""
    results = list(results)
    head = ("row id", "paper", "table", "row", "dataset", "metric", "paper value", "config", "ours", "verdict")
    body = []
    for r in table:
        best = best_recorded(r, results, table)
        body.append((r.id, r.paper, r.table, _short(r.name, 40), r.dataset, f"{r.metric} ({r.split})",
                     _paper(r.paper_value, r.metric), r.config or "-", ours_text(r, best), verdict_text(r, best)))
    widths = [max(len(x[i]) for x in [head, *body]) for i in range(len(head) - 1)]
    fmt = lambda cells: "  ".join(c.ljust(w) for c, w in zip(cells, widths)) + "  " + cells[-1]  # noqa: E731
    counts = summary(table, results)
    tail = [f"{s['paper']}: {s['rows']} rows, {s['configs']} with a config, {s['recorded']} with a recorded number; "
            + ", ".join(f"{v} {s[v]}" for v in VERDICTS) for s in counts]
    return "\n".join([fmt(head), *(fmt(b) for b in body), "", *tail])


# ----------------------------------------------------------------------------- running a row


def git_commit() -> str | None:
    """``git rev-parse --short HEAD`` of memread's checkout (else of the current folder), or None; ``MEMREAD_COMMIT``
    where it is set (a copy of the tree whose git metadata is not its own: a lent GPU machine's copy reported
    the session's first commit)."""
    if os.environ.get("MEMREAD_COMMIT"):
        return os.environ["MEMREAD_COMMIT"]
    for where in (Path(__file__).resolve().parent, Path.cwd()):
        try:
            out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=where, capture_output=True, text=True,
                                 timeout=10)
        except (OSError, subprocess.SubprocessError):
            continue
        if out.returncode == 0 and out.stdout.strip():
            return out.stdout.strip()
    return None


def config_path(row: Row) -> Path:
    """The row's config file: as given when it exists from here (or is absolute), else under memread's checkout."""
    path = Path(row.config)
    if path.is_absolute() or path.exists():
        return path
    return REPO / path


def _differences(stored: Any, wanted: Any) -> dict[str, Any]:
    """``{"section.key": wanted value}`` where two experiment configs differ."""
    a, b = json.loads(stored.to_json()), json.loads(wanted.to_json())
    out = {}
    for section in b:
        for key in sorted(set(a.get(section, {})) | set(b[section])):
            if a.get(section, {}).get(key) != b[section].get(key):
                out[f"{section}.{key}"] = b[section].get(key)
    return out


def train_seed(cfg: Any, run_dir: Path, root: Path, log: Callable[[str], None]) -> dict:
    """Train ``cfg`` in ``run_dir`` and evaluate its best checkpoint (``final.json``); a run dir that already holds
    this config's run is resumed exactly from ``checkpoint_last.pt`` (a killed run goes on; a finished one with its
    ``final.json`` is taken as it is). [train] values that differ (a larger ``train.max_steps``) are passed to the
    resume; a run of another model or data is refused. A folder with ``final.json`` but no checkpoint holds an
    ended run's records, kept from the machine that trained it (``scripts/claims.py`` puts them back): its
    ``final.json`` is taken as it is when its config is this one; asked to train it further, it is refused, never
    cleared."""
    from memread.experiment import ANY_ON_RESUME, final_evaluation, read_run_config, resume_run, start_run

    run_dir = Path(run_dir)
    checkpoint = (run_dir / "checkpoint_last.pt").exists()
    final = run_dir / "final.json"
    if checkpoint or final.is_file():
        diff = _differences(read_run_config(run_dir), cfg)
        other = [k for k in diff if not k.startswith("train.")]
        if other:
            raise MemreadError(f"{run_dir}: holds a run of another config ({other[0]} differs); choose another "
                               f"--run-root or remove that folder. Nothing was changed")
        if all(k in ANY_ON_RESUME for k in diff) and final.is_file():
            log(f"{run_dir}: finished before{'' if checkpoint else ' (trained elsewhere)'}; taking its final.json")
            return json.loads(final.read_text(encoding="utf-8"))
        if not checkpoint:
            wanted = ", ".join(f"{k}={override_value(v)}" for k, v in diff.items() if k not in ANY_ON_RESUME)
            raise MemreadError(f"{run_dir}: holds an ended run's records (final.json) without its checkpoints "
                               f"(trained elsewhere?), so it cannot train on with {wanted}; reproduce it with the "
                               f"settings it was trained with, or choose another --run-root. Nothing was changed")
        log(f"{run_dir}: resuming from checkpoint_last.pt")
        trainer = resume_run(run_dir, root, [f"{k}={override_value(v)}" for k, v in diff.items()])
    else:
        trainer = start_run(cfg, run_dir, root)
    with trainer:
        trainer.fit()
        return final_evaluation(run_dir, root, progress=trainer.cfg.train.progress, device=str(trainer.device))


CHANGED = "changed from the config"  # what a budget says before the settings a reproduce changed outside [train]


def _off_config(base: Any, cfg: Any) -> str:
    """What ``cfg`` changes outside ``[train]`` from the row's own config ``base`` (a smaller reader, say), as
    "reader.hidden=300 (config: 512), reader.layers=1 (config: 3)"; "" where nothing is changed. A number trained so
    is not the config's (another model, or other data or batching), and its budget says so wherever the table shows
    it."""
    before = json.loads(base.to_json())
    out = []
    for key, value in _differences(base, cfg).items():
        if key.startswith("train."):
            continue
        section, name = key.split(".", 1)
        out.append(f"{key}={override_value(value)} (config: {override_value(before.get(section, {}).get(name))})")
    return ", ".join(out)


def _budget(loop: dict, cfg: Any) -> str:
    T = cfg.train
    steps, stopped = loop.get("global_step"), loop.get("stopped")
    cap = f"max_steps {T.max_steps}, " if T.max_steps else ""
    epoch = min(int(loop.get("epoch", 0)) + 1, T.epochs)  # a run that used up its epochs stands past the last
    tokens = f", {loop['tokens_trained']:,} tokens" if loop.get("tokens_trained") else ""
    return f"{steps} steps{tokens} (epoch {epoch} of {T.epochs}; {cap}stopped: {stopped or 'not finished'})"


def _mean_std(values: list[float]) -> tuple[float, float | None]:
    return statistics.fmean(values), (statistics.stdev(values) if len(values) >= 2 else None)


def reproduce(row_id: str, seeds: int = 1, run_root: str | os.PathLike = "runs/reproduce",
              overrides: Sequence[str] = (), data_root: str | os.PathLike | None = None,
              results: str | os.PathLike | None = None, device: str | None = None,
              table: Sequence[Row] | None = None, log: Callable[[str], None] | None = None) -> list[dict]:
    """Train ``row_id``'s config with seeds 1..``seeds`` in ``RUN_ROOT/ROW_ID/seedS`` (each resumed where a run is
    there), evaluate the best checkpoint of each on valid and test, and append to the results file, for every
    metric the row and its siblings report and both splits: one line with the mean over seeds (``seeds``,
    ``per_seed``, ``std`` with several), then one line per seed (with ``seed``). ``wall_s`` is what training cost:
    a seed's wall seconds over every resume (a run taken as it is cost those, not this call's moment), their sum on
    the mean line. Returns the appended lines.
    A row without a config or without its data is refused with one line, before anything runs."""
    from memread.config import load_experiment
    from memread.data.root import data_root as resolve_root
    from memread.training.units import run_loop

    log = log or (lambda text: print(text, file=sys.stderr))
    table = rows() if table is None else table
    row = find_row(row_id, table)
    if row.data_missing:
        raise MemreadError(f"{row.id}: {row.data_missing}; nothing was run")
    if row.config is None:
        raise MemreadError(f"{row.id}: memread has no config for {row.name!r} ({row.paper}, {row.table}); "
                           f"nothing was run")
    if seeds < 1:
        raise MemreadError(f"--seeds {seeds}: at least 1")
    path = config_path(row)
    extra = list(overrides) + ([f"train.device={json.dumps(device)}"] if device else [])
    configs = {s: load_experiment(path, [*extra, f"train.seed={s}"]) for s in range(1, seeds + 1)}  # all checked first
    off = _off_config(load_experiment(path, []), configs[1])
    group = siblings(row, table)
    metrics = list(dict.fromkeys(r.metric for r in group))
    root = resolve_root(data_root)
    out_path = results_path(results)
    commit = git_commit()
    sets = "".join(f" --set {o}" for o in overrides)
    command = (f"memread reproduce {row.id} --seeds {seeds} --run-root {run_root}{sets}"
               + (f" --device {device}" if device else ""))

    finals, walls, budgets = {}, {}, {}
    for s, cfg in configs.items():
        run_dir = Path(run_root) / row.id / f"seed{s}"
        log(f"== {row.id}: seed {s} of {seeds} in {run_dir}")
        t0 = time.perf_counter()
        finals[s] = train_seed(cfg, run_dir, root, log)
        loop = run_loop(run_dir) or {}
        # what the seed cost: its training's wall seconds over every resume (a run taken as it is, or trained
        # elsewhere, cost that, not this call's moment), else this call's time
        walls[s] = loop.get("seconds_trained") or time.perf_counter() - t0
        budgets[s] = _budget(loop, cfg)
    note = f"; {CHANGED}: {off}" if off else ""
    wall = sum(walls.values())

    def paper_value(metric: str, split: str) -> float | None:
        for r in group:
            if (r.metric, r.split) == (metric, split):
                return r.paper_value
        return None

    lines = []
    for split in ("valid", "test"):
        for metric in metrics:
            values = {}
            for s, final in finals.items():
                value = final.get(split, {}).get(metric)
                if not is_number(value):
                    raise MemreadError(f"{row.id}: the {split} evaluation has no {metric!r} (it has "
                                       f"{', '.join(sorted(final.get(split, {})))}); nothing was recorded")
                values[s] = value * row.scale
            mean, std = _mean_std(list(values.values()))
            base = {"experiment": row.id, "dataset": row.dataset, "split": split, "metric": metric}
            line = {**base, "value": round(mean, 4)}
            if std is not None:
                line["std"] = round(std, 4)
            line.update({"paper_value": paper_value(metric, split), "commit": commit, "command": command,
                         "wall_s": round(wall, 1), "seeds": list(values),
                         "per_seed": [round(v, 4) for v in values.values()],
                         "budget": "; ".join(dict.fromkeys(budgets.values())) + note})
            lines.append(line)
            for s, value in values.items():
                run_dir = Path(run_root) / row.id / f"seed{s}"
                lines.append({**base, "value": round(value, 4), "paper_value": paper_value(metric, split),
                              "commit": commit,
                              "command": f"memread train {row.config} --run-dir {run_dir}{sets} --set train.seed={s}",
                              "wall_s": round(walls[s], 1), "seeds": [s], "seed": s, "budget": budgets[s] + note})
    append_lines(out_path, lines)
    log(f"{row.id}: appended {len(lines)} lines to {out_path}; refresh the table with "
        f"memread reproduce list --markdown > results/REPRODUCTION.md")
    return lines


def append_lines(path: Path, lines: Sequence[dict]) -> None:
    """Append JSON lines in one write (after a newline when the file does not end with one)."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        lead = ""
        if path.exists() and path.stat().st_size:
            with open(path, "rb") as f:
                f.seek(-1, os.SEEK_END)
                lead = "" if f.read(1) == b"\n" else "\n"
        with open(path, "a", encoding="utf-8") as f:
            f.write(lead + "".join(json.dumps(line) + "\n" for line in lines))
    except OSError as e:
        from memread.errors import os_error_line

        raise MemreadError(os_error_line(e, path)) from None
