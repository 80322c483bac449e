"""A prediction with its attention trace -> the view the explorer page draws (plain JSON).

Everything here starts from ``predictor.predict(input, attention=True)`` (the one code path of
``memread predict --attention`` and ``memread.load(...).predict``) and only reshapes its trace:

- a language model (:class:`TokenScores`): the per-segment traces (T, S) over ``[history ; segment]``
  are laid on the text's absolute positions, one row per token read (the token whose successor it
  predicts), with the next-word distribution (top-k) of each row and the average weight by distance
  (Figure 3b of Daniluk et al., over the typed text);
- a sentence encoder (classify, pair, document): its reader's (T, S) trace (the LSTMN's intra-attention
  over its tape, NSE's read/write weights z_t over its memory slots), or the attention encoders' weights
  over the first text;
- a cloze model (:class:`ClozeAnswer`): the document attention and, for IAA, the query and document
  attention of every inference step, with the candidates' probabilities.

A view is ``{"kind", "model", "input", "summary": [[name, value]..], "panels": [...], "notes": [...]}``.
A ``matrix`` panel holds ``rows`` (labels), ``cols`` (labels) and ``cells``: one ``[first, [w..]]`` per
row (the row's weights on columns ``first ..``; the rest are 0), so that a long text's band stays small,
and for a language model a third number, the weight on column 0 (the empty history). ``rowCol[i]``: the
column of row i's own token, where rows are tokens.
"""

from __future__ import annotations

import math
from dataclasses import asdict
from typing import Any

from memread.data.ptb import EOS
from memread.data.records import record_options, tokenize
from memread.errors import MemreadError

MAX_TOKENS = 1000  # the longest input (in tokens, all fields together) the explorer reads
TOP_K = 5
EMPTY = "\u2205"  # the column of the empty history (slots before the text or the line)
DIGITS = 6  # weights are rounded to this many decimals in the view


class ExploreError(MemreadError):
    """An input the explorer refuses, with the one line the page shows."""


def _r(x: float) -> float:
    return round(float(x), DIGITS)


def _text_fields(record: dict) -> list[str]:
    """Every text of a record (strings and lists of strings), for counting and vocabulary checks."""
    out = []
    for key, value in record.items():
        if key in ("label", "id", "qid", "answer", "candidates"):
            continue
        if isinstance(value, str):
            out.append(value)
        elif isinstance(value, list):
            out += [v for v in value if isinstance(v, str)]
    return out


def _vocab(predictor) -> Any:
    data = predictor.task.data
    return getattr(data, "src_vocab", None) or getattr(predictor.task, "vocab", None)


def check_input(predictor, item: Any, max_tokens: int = MAX_TOKENS) -> tuple[dict, list[str]]:
    """The input as a record, and the words the model does not know; an :class:`ExploreError` (one line)
    for an empty input, one too long, or one with no known word."""
    if isinstance(item, str) and not item.strip():
        raise ExploreError("the input is empty: type or paste a text")
    record = predictor._record(item, "input")
    lowercase = record_options(predictor.task.data)["lowercase"]
    words = [w for text in _text_fields(record) for w in tokenize(text, lowercase)]
    if not words:
        raise ExploreError("the input is empty: type or paste a text")
    if len(words) <= max_tokens:
        predictor.example(record, "input")  # a missing or malformed field: the record format's own message
    else:
        raise ExploreError(f"the input has {len(words)} tokens; explore reads at most {max_tokens} at a time "
                           f"(memread predict reads longer texts)")
    vocab = _vocab(predictor)
    unknown: list[str] = []
    if vocab is not None and getattr(vocab, "stoi", None) is not None:
        placeholder = record_options(predictor.task.data).get("placeholder")
        unknown = [w for w in words if w not in vocab.stoi and w != placeholder]
        if len(unknown) == len(words):
            shown = " ".join(dict.fromkeys(unknown))
            raise ExploreError(f"no word of the input is in the model's vocabulary ({shown[:80]}): "
                               f"it would read only <unk>")
    return record, list(dict.fromkeys(unknown))


# ----------------------------------------------------------------------------- panels


def matrix(pid: str, title: str, rows: list[str], cols: list[str], cells: list, **extra) -> dict:
    return {"type": "matrix", "id": pid, "title": title, "rows": rows, "cols": cols, "cells": cells, **extra}


def dense_cells(weights: list[list[float]]) -> list:
    return [[0, [_r(w) for w in row]] for row in weights]


def bars(pid: str, title: str, labels: list[str], values: list[float], highlight: str | None = None) -> dict:
    return {"type": "bars", "id": pid, "title": title, "labels": labels, "values": [_r(v) for v in values],
            "highlight": highlight}


def _reader_name(predictor) -> str:
    reader = getattr(predictor.cfg, "reader", None)
    return getattr(reader, "name", "") or ""


def _head_name(predictor) -> str:
    head = getattr(predictor.cfg, "head", None)
    return getattr(head, "name", "") or ""


# ----------------------------------------------------------------------------- language models


def lm_rows(tokens: list[str], sentences: bool) -> list[int]:
    """Positions of ``tokens`` that are read to predict their successor: all but the last of a stream;
    for sentences read alone, all but each line's ``<eos>``."""
    if not sentences:
        return list(range(len(tokens) - 1))
    return [i for i, t in enumerate(tokens) if t != EOS]


def lm_cells(traces: list, rows: list[int], starts: list[int]) -> list:
    """Per-segment (T, S) traces over ``[history ; segment]`` -> one ``[first, weights, empty]`` per row over
    the view's columns: column ``1 + i`` is token ``i``, column 0 the empty history (``empty``: the weight on
    slots before the row's reading unit, the window's or memory's empty slots at the start of a text or line).
    ``starts[k]``: the first position of row k's reading unit (0 for a stream; its line's ``<s>``)."""
    cells: list = []
    k = 0
    for seg in traces:
        T = len(seg)
        if T == 0:
            continue
        S = len(seg[0])
        H = S - T  # carried history (window, tape or memory slots) before the segment's first token
        first_col = rows[k] - H  # absolute position of the segment's column 0
        for t in range(T):
            if k + t >= len(rows):
                break
            row = seg[t]
            lo = starts[k + t] - first_col  # the unit's first token, in the segment's columns
            hi = rows[k + t] + 1 - first_col  # a token attends to itself at most (the LSTMN: to earlier ones)
            empty = sum(row[: max(lo, 0)])
            # the view's column of token i is 1 + i; the third number goes to column 0
            cells.append([1 + starts[k + t] + max(0, -lo), [_r(x) for x in row[max(lo, 0): hi]], _r(empty)])
        k += T
    return cells


def by_position(cells: list, rows: list[int], starts: list[int], span: int) -> dict | None:
    """Figure 3b over the typed text: the average weight at distance -span .. -1 over the rows whose
    ``span`` previous positions all lie in their reading unit (None when no row has a full window)."""
    if span <= 0:
        return None
    total = [0.0] * span
    n = 0
    for (first, w, *_), r, s in zip(cells, rows, starts):
        if r - span < s:
            continue
        for d in range(1, span + 1):
            j = r - d + 1 - first  # the view's column of position r - d is r - d + 1
            total[span - d] += w[j] if 0 <= j < len(w) else 0.0
        n += 1
    if not n:
        return None
    return {"type": "profile", "id": "by-position", "title": f"average attention by distance (Figure 3b), over {n} tokens "
            f"with a full window of {span}", "labels": [str(-span + j) for j in range(span)],
            "values": [_r(v / n) for v in total]}


def lm_span(predictor, cells: list, rows: list[int]) -> int:
    reader = getattr(predictor.cfg, "reader", None)
    for key in ("window", "memory", "span"):
        v = getattr(reader, key, None)
        if isinstance(v, int) and v > 0:
            return v
    return min(10, max(0, len(rows) - 1))


def lm_top_k(predictor, example: Any, k: int = TOP_K) -> list[list[list]]:
    """The next-word distribution (top ``k``) of every row, read as ``predict`` reads the text
    (``Predictor._read``: the same segments, the state carried)."""
    import torch

    vocab = predictor.task.vocab
    out: list = []
    with torch.no_grad():
        reads = list(predictor._read(example, attention=False))
    for batch, res in reads:
        logp = res.logits.float().log_softmax(-1)[0]  # (T, V)
        mask = batch["mask"][0]
        if vocab.pad_id is not None:
            logp[:, vocab.pad_id] = -math.inf
        top = logp.topk(min(k, logp.size(-1)), dim=-1)
        for t in range(logp.size(0)):
            if bool(mask[t]):
                out.append([[vocab.itos[int(i)], _r(math.exp(float(v)))] for v, i in zip(top.values[t], top.indices[t])])
    return out


def lm_view(predictor, record: dict, result) -> dict:
    tokens = list(result.tokens)
    sentences = predictor._sentences
    rows = lm_rows(tokens, sentences)
    if len(rows) != len(result.logprobs):
        rows = rows[: len(result.logprobs)]
    starts, unit = [], 0
    for r in rows:
        if sentences and (r == 0 or tokens[r - 1] == EOS):
            unit = r
        starts.append(unit)
    summary = [["perplexity", _r(result.ppl)], ["tokens predicted", len(result.logprobs)]]
    panels: list = []
    notes: list = []
    top = lm_top_k(predictor, predictor.example(record, "input"))
    next_words = [[tokens[r + 1], _r(math.exp(lp))] for r, lp in zip(rows, result.logprobs)]
    if result.attention:
        cells = lm_cells(result.attention, rows, starts)
        reader = _reader_name(predictor)
        what = {"lstmn": "intra-attention over the tape (Figure 4 of Cheng et al.): row t is what token t attended to",
                "rm": "attention over the memory of the last n words",
                }.get(reader, "window attention over the previous outputs (Daniluk et al.)")
        panels.append(matrix("attention", f"{reader} {what}", [tokens[r] for r in rows], [EMPTY, *tokens], cells,
                             arcs=True, rowAxis="token read", colAxis="attended to", rowCol=[1 + r for r in rows],
                             topk=top[: len(rows)], next=next_words))
        prof = by_position(cells, rows, starts, lm_span(predictor, cells, rows))
        if prof is not None:
            panels.append(prof)
    else:
        notes.append("this model's reader returns no attention trace; the next-word distributions are shown")
        panels.append(matrix("attention", "next-word distributions (no attention trace)", [tokens[r] for r in rows],
                             [EMPTY, *tokens], [[r, []] for r in rows], arcs=False, rowCol=[1 + r for r in rows], topk=top[: len(rows)],
                             next=next_words))
    return {"summary": summary, "panels": panels, "notes": notes, "tokens": tokens}


# ----------------------------------------------------------------------------- sentence encoders


def _square(trace: Any) -> bool:
    return isinstance(trace, list) and trace and isinstance(trace[0], list) and trace[0] and \
        isinstance(trace[0][0], (int, float))


def encoder_panels(predictor, words: list[str], trace: Any, pid: str = "attention", what: str = "") -> list:
    """A reader's (T, S) trace over one text (S = T: the LSTMN's tape, NSE's memory slots), or a vector (T)."""
    reader = _reader_name(predictor)
    if _square(trace):
        T, S = len(trace), len(trace[0])
        cols = words[-S:] if S <= len(words) else [""] * (S - len(words)) + words
        if reader.startswith("nse") or "nse" in reader:
            title = (f"{what}NSE read weights z_t over the memory slots (slot i starts as word i); NSE writes "
                     f"where it reads: erase and write weights are z_t too, M_t = M_(t-1)(1 - z_t) + h_t z_t")
            extra = {"writes": True}
        else:
            title = f"{what}{reader} intra-attention over the tape: row t is what word t attended to"
            extra = {}
        return [matrix(pid, title, words[:T], cols, dense_cells(trace), arcs=True, rowAxis="step / word read",
                       colAxis="slot", rowCol=[S - T + t for t in range(T)], **extra)]
    if isinstance(trace, list) and trace and isinstance(trace[0], (int, float)):
        return [matrix(pid, f"{what}attention over the words", ["summary"], words[: len(trace)],
                       [[0, [_r(x) for x in trace]]], arcs=False, rowAxis="", colAxis="word")]
    return []


def classify_view(predictor, record: dict, result) -> dict:
    ex = predictor.example(record, "input")
    summary: list = []
    if hasattr(result, "rating"):
        summary += [["rating", result.label], ["expected rating", _r(result.rating)]]
    elif hasattr(result, "score"):
        summary += [["score", _r(result.score)], ["probability", _r(result.probability)]]
    else:
        summary.append(["label", result.label])
    panels: list = []
    probs = getattr(result, "probabilities", None)
    if probs:
        panels.append(bars("probabilities", "class probabilities", list(probs), list(probs.values()),
                           highlight=str(result.label)))
    notes: list = []
    trace = result.attention
    if hasattr(ex, "tokens"):
        words = list(ex.tokens)
        attn = encoder_panels(predictor, words, trace)
    elif hasattr(ex, "first"):  # a pair: the attention encoders' weights over the first text
        words = list(ex.first)
        attn = encoder_panels(predictor, words, trace, what="the first text: ")
    else:
        words, attn = [], []
    if not attn:
        notes.append("this model returns no attention trace for its input (hierarchical and recurrent encoders, "
                     "the MMA-NSE shared-memory reads); the prediction is shown")
    return {"summary": summary, "panels": attn + panels, "notes": notes, "tokens": words}


# ----------------------------------------------------------------------------- cloze


def cloze_view(predictor, record: dict, result) -> dict:
    ex = predictor.example(record, "input")
    doc, query = list(ex.document), list(ex.query)
    summary = [["answer", result.answer], ["probability", _r(result.probabilities[result.answer])]]
    panels: list = []
    trace = result.attention
    if isinstance(trace, dict) and trace.get("document_steps") is not None:  # IAA: every inference step
        steps = trace["document_steps"]
        labels = [f"t={t + 1}" for t in range(len(steps))]
        if trace.get("query_steps") is not None:
            panels.append(matrix("query", "query attention q_(i,t) at each inference step", labels, query,
                                 dense_cells(trace["query_steps"]), arcs=False, rowAxis="inference step",
                                 colAxis="query word", group="steps"))
        panels.append(matrix("document", "document attention d_(i,t) at each inference step", labels, doc,
                             dense_cells(steps), arcs=False, rowAxis="inference step", colAxis="document word",
                             group="steps", marks=list(ex.candidates)))
    elif isinstance(trace, list) and trace:
        panels.append(matrix("document", "document attention s_i (a single query vector: one step)", ["t=1"], doc,
                             dense_cells([trace]), arcs=False, rowAxis="inference step", colAxis="document word",
                             marks=list(ex.candidates)))
    panels.append(bars("candidates", "the candidates' probabilities (pointer sum over their occurrences)",
                       list(result.probabilities), list(result.probabilities.values()), highlight=result.answer))
    notes = [] if trace else ["this cloze model returns no attention trace (final_state head)"]
    return {"summary": summary, "panels": panels, "notes": notes, "tokens": doc}


def translate_view(predictor, record: dict, result) -> dict:
    summary = [["translation", result.text]]
    notes = ["the translation heads return no source-target attention yet: the decoded output is shown"]
    return {"summary": summary, "panels": [], "notes": notes, "tokens": list(result.source)}


# ----------------------------------------------------------------------------- the view


def model_info(predictor) -> dict:
    return {"kind": predictor.kind, "reader": _reader_name(predictor), "head": _head_name(predictor),
            "source": predictor.source, "max_tokens": MAX_TOKENS}


def build_view(predictor, item: Any, max_tokens: int = MAX_TOKENS) -> dict:
    """The view of one input (a string or a record), from ``predictor.predict(item, attention=True)``."""
    record, unknown = check_input(predictor, item, max_tokens)
    result = predictor.predict(record, attention=True)
    kind = predictor.kind
    if kind == "lm":
        body = lm_view(predictor, record, result)
    elif kind == "cloze":
        body = cloze_view(predictor, record, result)
    elif kind == "translate":
        body = translate_view(predictor, record, result)
    else:
        body = classify_view(predictor, record, result)
    if unknown:
        body["notes"].insert(0, f"not in the model's vocabulary (read as <unk>): {' '.join(unknown[:20])}"
                                + (" ..." if len(unknown) > 20 else ""))
    return {"model": model_info(predictor), "input": record, **body}


# ----------------------------------------------------------------------------- examples of a split


def _join(words: Any) -> str:
    return " ".join(words)


def example_records(predictor, split: str, n: int = 20) -> list[dict]:
    """Up to ``n`` inputs of ``split`` in the task's record format (as ``memread predict`` reads them)."""
    data, kind = predictor.task.data, predictor.kind
    out: list[dict] = []
    try:
        if kind == "lm":
            words = predictor.task.vocab.decode(data.ids(split)[: 60 * n].tolist())
            chunk: list[str] = []
            for w in words:
                chunk.append("\n" if w == EOS else w)
                if len(chunk) >= 40 and w == EOS or len(chunk) >= 80:
                    out.append({"text": " ".join(chunk).replace(" \n ", "\n").strip()})
                    chunk = []
                if len(out) >= n:
                    break
            if chunk and len(out) < n and any(w != "\n" for w in chunk):
                out.append({"text": " ".join(chunk).replace(" \n ", "\n").strip()})
            return out
        examples = data.examples(split)[:n]
    except Exception:  # a dataset whose split is not at hand: no examples, the page still works
        return out
    placeholder = record_options(data).get("placeholder", "@blank")
    for ex in examples:
        d = asdict(ex) if hasattr(ex, "__dataclass_fields__") else {}
        if kind == "classify" and "tokens" in d:
            rec = {"text": _join(d["tokens"])}
        elif kind == "pair" and "first" in d:
            rec = ({"question": _join(d["second"]), "answer": _join(d["first"])} if data.outputs == 1
                   else {"premise": _join(d["first"]), "hypothesis": _join(d["second"])})
        elif kind == "cloze" and "context" in d:
            rec = {"document": [_join(s) for s in d["context"]],
                   "query": _join(placeholder if w == "XXXXX" else w for w in d["query"]),
                   "candidates": list(d["candidates"])}
        elif kind == "translate" and "source" in d:
            rec = {"source": _join(d["source"])}
        elif kind == "document" and "sentences" in d:
            rec = {"sentences": [_join(s) for s in d["sentences"]]}
        else:
            continue
        try:
            predictor.example(rec, "example")
        except MemreadError:
            continue
        out.append(rec)
    return out
