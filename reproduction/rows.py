"""The papers' results tables as data: ``papers/{lstmn,nse,daniluk,sordoni}.toml``, one ``[[row]]`` per number.

A table row with several result columns (fine-grained and binary SST; MAP and MRR; train, dev and test BLEU; the
four CBT word classes) is one :class:`Row` per column, each with one dataset, metric and split; a cell printed as
"-" is no row. Row ids are ``PAPER-TABLE[-DATASET]-MODEL[-SPLIT][-METRIC]``, e.g. ``lstmn-t1-lstmn-3layer``,
``nse-t2-wikiqa-mma-nse-attention`` (MAP, test) and ``nse-t2-wikiqa-mma-nse-attention-mrr``, ``daniluk-f2c-kvp``
(test) and ``daniluk-f2c-kvp-dev``.

Units are the papers' except that accuracies are in percent throughout (Daniluk et al.'s Figure 2d prints
fractions: 0.523 is 52.3 here), as ``results/results.jsonl`` records them.

Rows of every baseline the papers quote are listed too; memread has configs only for the models it implements.
Where the benchmark data lacks the row's data (its ``MANIFEST.md``: CBT, CNN, the Yelp/IMDB sets of Tang et al.,
the full SNLI train split, the IWSLT14 train split, the Wikipedia corpus of Daniluk et al. / WikiText train), the
row says so (``data_missing``, a key of its file's ``[missing]`` table) and its verdict is "data not available";
numbers memread recorded on a stand-in for that data (SNLI's 1% train sample, PTB for the Wikipedia corpus, the
Gutenberg cloze sets for CBT-NE) are shown with the stand-in named, never judged.
"""

from __future__ import annotations

import difflib
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from memread.errors import MemreadError
from reproduction import REPO

PAPERS_DIR = Path(__file__).resolve().parent / "papers"
PAPER_ORDER = ("lstmn", "nse", "daniluk", "sordoni")
LOWER_IS_BETTER = frozenset({"ppl", "mse"})
PROTOCOLS = ("", "stream", "sentence")
FIELDS = ("id", "table", "name", "dataset", "metric", "split", "paper_value", "config", "experiments",
          "data_missing", "stand_in", "dataset_match", "note", "scale", "recipe_differs", "recipe", "recipe_claim", "protocol")


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
    # experiments (of ``experiments``) trained with a recipe other than the paper's (memread's dropout where the paper
    # has none): a number of theirs is not judged against the paper's, its verdict is "recipe differs"
    recipe_differs: tuple[str, ...] = ()
    recipe: str = ""  # how their recipe differs from the paper's, in a few words
    recipe_claim: str = ""  # the claim (claims.toml) that compares the model with its baseline at that recipe
    # how a language model reads its corpus, where a table is measured both ways (LSTMN Table 1): "stream" (one
    # token stream in BPTT segments, state carried) or "sentence" (each sentence alone, the LSTMN authors' LM code);
    # the row's config sets it ([data] context), and the tables show it beside the dataset
    protocol: str = ""

    @property
    def higher_is_better(self) -> bool:
        return self.metric not in LOWER_IS_BETTER


def load_paper(path: Path) -> tuple[str, str, list[Row]]:
    """One paper's file: (its key, its title, its rows in the file's order). Unknown or missing fields, and a
    ``data_missing`` key its ``[missing]`` table lacks, are errors naming the row."""
    with open(path, "rb") as f:
        doc = tomllib.load(f)
    paper, missing, out = doc["paper"], doc.get("missing", {}), []
    for n, raw in enumerate(doc.get("row", []), 1):
        where = f"{path}: row {n} ({raw.get('id', '?')})"
        unknown = set(raw) - set(FIELDS)
        if unknown:
            raise MemreadError(f"{where}: unknown field(s) {', '.join(sorted(unknown))}; fields: {', '.join(FIELDS)}")
        kw = dict(raw)
        if "data_missing" in kw:
            if kw["data_missing"] not in missing:
                raise MemreadError(f"{where}: data_missing = {kw['data_missing']!r} is not in its [missing] table")
            kw["data_missing"] = missing[kw["data_missing"]]
        kw["experiments"] = tuple(kw.get("experiments", ()))
        kw["recipe_differs"] = tuple(kw.get("recipe_differs", ()))
        kw["paper_value"] = float(kw["paper_value"])
        kw["scale"] = float(kw.get("scale", 1.0))
        if kw.get("protocol", "") not in PROTOCOLS:
            raise MemreadError(f"{where}: protocol = {kw['protocol']!r}; one of {', '.join(map(repr, PROTOCOLS))}")
        try:
            out.append(Row(paper=paper, **kw))
        except TypeError as e:
            raise MemreadError(f"{where}: {e}") from None
    return paper, doc["title"], out


def load_papers(folder: Path = PAPERS_DIR) -> tuple[dict[str, str], list[Row]]:
    """``{paper: title}`` and every row, the papers in :data:`PAPER_ORDER`, each file's rows in its order."""
    titles, rows_ = {}, []
    for key in PAPER_ORDER:
        paper, title, mine = load_paper(folder / f"{key}.toml")
        titles[paper] = title
        rows_ += mine
    return titles, rows_


PAPERS, ROWS = load_papers()


def rows() -> list[Row]:
    """Every row of the four papers' tables, in the papers' order."""
    return list(ROWS)


def find_row(row_id: str, table: Sequence[Row] | None = None) -> Row:
    table = rows() if table is None else table
    for row in table:
        if row.id == row_id:
            return row
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


def config_path(row: Row) -> Path:
    """The row's config file: as given when it exists from here (or is absolute), else under the checkout."""
    path = Path(row.config)
    if path.is_absolute() or path.exists():
        return path
    return REPO / path
