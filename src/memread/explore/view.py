"""A prediction with its attention trace -> the view the explorer page draws (plain JSON).

Everything here starts from ``predictor.predict(input, attention=True)`` (the one code path of
``memread predict --attention`` and ``memread.load(...).predict``) and only reshapes its trace:

- a language model (:class:`TokenScores`): the per-segment traces (T, S) over ``[history ; segment]``
  are laid on the text's absolute positions, one row per token read (the token whose successor it
  predicts), with the next-word distribution (top-k) of each row and the average weight by distance
  (Figure 3b of Daniluk et al., over the typed text); a deep LSTMN gets a panel per layer, stepped together;
  sentences read alone (``data.context = "sentence"``) are laid on ``<s> .. <eos>`` lines;
- a sentence encoder (classify): its reader's (T, S) trace (the LSTMN's intra-attention over its tape, a
  panel per layer, NSE's read/write weights z_t over its memory slots);
- a pair: each text's reader, MMA-NSE's reads of the first text's memory by the second reader (each shared
  memory apart from its own), the LSTMN fusion decoders' intra-attention over the second text's tape and
  inter-attention over the first's, the attention encoders' weights over the first text;
- a document (the hierarchical head): every sentence's reader over its own words (a block per sentence)
  and the document reader over the sentences;
- a cloze model (:class:`ClozeAnswer`): the document attention and, for IAA, the query and document
  attention of every inference step, with the candidates' probabilities;
- a translation (:class:`Translation`, greedy or beam search): the decoded output's attention over the
  source (target x source), the LSTMN fusion decoders' intra-attention over their own tape, the NSE
  decoder's reads and writes of the shared memory, and the encoder's own weights.

A view is ``{"kind", "model", "input", "summary": [[name, value]..], "panels": [...], "notes": [...]}``.
A ``matrix`` panel holds ``rows`` (labels), ``cols`` (labels) and ``cells``: one ``[first, [w..]]`` per
row (the row's weights on columns ``first ..``; the rest are 0), so that a long text's band stays small,
and for a language model a third number, the weight on column 0 (the empty history). ``rowCol[i]``: the
column of row i's own token, where rows are tokens; ``group``: panels with the same group step together (a
deep LSTMN's layers, a pair's second-text panels, a translation's target rows); ``writes``: NSE weights, which
are also where each step erased and wrote.
"""

from __future__ import annotations

import math
from dataclasses import asdict
from typing import Any

from memread.data.pipelines.translation import BOS as TARGET_BOS, EOS as TARGET_EOS
from memread.data.ptb import EOS
from memread.data.records import record_options, tokenize
from memread.errors import MemreadError

MAX_TOKENS = 1000  # the longest input (in tokens, all fields together) the explorer reads
BEAM, MAX_BEAM = 5, 20  # a translation's beam (memread predict's default), and the widest the explorer takes
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


LM_WHAT = {"lstmn": "intra-attention over the tape (Figure 4 of Cheng et al.): row t is what token t attended to",
           "rm": "attention over the memory of the last n words"}


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
    labels, row_cols = [tokens[r] for r in rows], [1 + r for r in rows]
    if result.attention:
        cells = lm_cells(result.attention, rows, starts)
        reader = _reader_name(predictor)
        what = LM_WHAT.get(reader, "window attention over the previous outputs (Daniluk et al.)")
        layers = result.attention_layers  # a deep LSTMN: per segment (L, T, S)
        L = len(layers[0]) if layers else 1
        where = f", layer {L} of {L} (top)" if L > 1 else ""
        panels.append(matrix("attention", f"{reader} {what}{where}", labels, [EMPTY, *tokens], cells,
                             arcs=True, rowAxis="token read", colAxis="attended to", rowCol=row_cols,
                             topk=top[: len(rows)], next=next_words, **({"group": "tokens"} if L > 1 else {})))
        for k in range(L - 1):
            panels.append(matrix(f"attention-layer-{k + 1}", f"{reader} intra-attention over layer {k + 1}'s tape, "
                                 f"layer {k + 1} of {L}", labels, [EMPTY, *tokens],
                                 lm_cells([seg[k] for seg in layers], rows, starts), arcs=True, rowAxis="token read",
                                 colAxis="attended to", rowCol=row_cols, group="tokens"))
        prof = by_position(cells, rows, starts, lm_span(predictor, cells, rows))
        if prof is not None:
            panels.insert(1, prof)
    else:
        notes.append("this model's reader returns no attention trace; the next-word distributions are shown")
        panels.append(matrix("attention", "next-word distributions (no attention trace)", labels,
                             [EMPTY, *tokens], [[r, []] for r in rows], arcs=False, rowCol=row_cols, topk=top[: len(rows)],
                             next=next_words))
    return {"summary": summary, "panels": panels, "notes": notes, "tokens": tokens}


# ----------------------------------------------------------------------------- sentence encoders


def _square(trace: Any) -> bool:
    return isinstance(trace, list) and trace and isinstance(trace[0], list) and trace[0] and \
        isinstance(trace[0][0], (int, float))


def _is_nse(name: str) -> bool:
    return "nse" in name


def square_panel(pid: str, title: str, rows: list[str], cols: list[str], trace: list, writes: bool = False,
                 **extra) -> dict:
    """A (T, S) trace over ``cols`` (the last S of them: carried or padded slots first), one row per word."""
    T, S = len(trace), len(trace[0])
    cols = cols[-S:] if S <= len(cols) else [""] * (S - len(cols)) + cols
    return matrix(pid, title, rows[:T], cols, dense_cells(trace), arcs=True, rowAxis="step / word read",
                  colAxis="slot", rowCol=[S - T + t for t in range(T)], **({"writes": True} if writes else {}), **extra)


def reader_panels(pid: str, reader: str, words: list[str], trace: Any, layers: Any = None, what: str = "",
                  group: str | None = None, unit: str = "word") -> list:
    """A reader's own (T, S) trace over one text (S = T: the LSTMN's tape, NSE's memory slots, read and
    written), a panel per layer for a deep LSTMN (``layers`` (L, T, S), the last the top), or a vector (T)."""
    if _square(trace):
        L = len(layers) if layers else 1
        grouped = {"group": group or pid} if L > 1 or group else {}
        if _is_nse(reader):
            title = (f"{what}NSE read weights z_t over the memory slots (slot i starts as {unit} i); NSE writes "
                     f"where it reads: erase and write weights are z_t too, M_t = M_(t-1)(1 - z_t) + h_t z_t")
            return [square_panel(pid, title, words, words, trace, writes=True, **grouped)]
        where = f", layer {L} of {L} (top)" if L > 1 else ""
        out = [square_panel(pid, f"{what}{reader} intra-attention over the tape: row t is what word t attended to"
                                 f"{where}", words, words, trace, **grouped)]
        for k in range(L - 1):
            out.append(square_panel(f"{pid}-layer-{k + 1}", f"{what}{reader} intra-attention over layer {k + 1}'s "
                                    f"tape, layer {k + 1} of {L}", words, words, layers[k], **grouped))
        return out
    if isinstance(trace, list) and trace and isinstance(trace[0], (int, float)):
        return [matrix(pid, f"{what}attention over the words", ["summary"], words[: len(trace)],
                       [[0, [_r(x) for x in trace]]], arcs=False, rowAxis="", colAxis="word")]
    return []


def classify_summary(result) -> tuple[list, list]:
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
    return summary, panels


def _pair_names(predictor) -> tuple[str, str]:
    """What the first and second texts of a pair are (the record's fields)."""
    return ("answer", "question") if getattr(predictor.task.data, "outputs", 3) == 1 else ("premise", "hypothesis")


def pair_panels(predictor, ex, trace: dict) -> list:
    """A pair's trace (``PairEncoder.forward``): each text's reader, MMA-NSE's reads of the first text's memory
    by the second (each shared memory apart from the own), the fusion decoders' inter-attention, the attention
    encoders' pooling weights."""
    first, second = list(ex.first), list(ex.second)
    a, b = _pair_names(predictor)
    reader = _reader_name(predictor)
    encoder = getattr(getattr(predictor.cfg, "head", None), "encoder", "")
    fusion = encoder in ("shallow_fusion", "deep_fusion")
    panels = reader_panels("first", reader, first, trace.get("first"), trace.get("first_layers"), f"{a}: ", "first")
    second_reader = f"LSTMN {encoder.replace('_', ' ')} decoder" if fusion else reader
    panels += reader_panels("second", second_reader, second, trace.get("second"), trace.get("second_layers"),
                            f"{b}: ", "second")
    for n, z in enumerate(trace.get("second_shared") or []):
        panels.append(matrix(f"second-shared-{n + 1}", f"{b} over the {a}'s memory (MMA-NSE shared memory {n + 1}, "
                             f"apart from its own): z_t^{n + 1} over the {a}'s slots, also where step t erased and "
                             f"wrote h_t (eq. 10, 15)", second[: len(z)], first[: len(z[0])] if z else [],
                             dense_cells(z), arcs=False, rowAxis=f"{b} word read", colAxis=f"{a} slot",
                             writes=True, group="second"))
    if trace.get("inter") is not None:
        z = trace["inter"]
        kind = "deep fusion (eq. 10-12)" if encoder == "deep_fusion" else "shallow fusion (RNNSearch-style)"
        panels.append(matrix("inter", f"{b} over the {a}: the decoder's inter-attention p^t over the {a}'s tape, "
                             f"{kind}", second[: len(z)], first[: len(z[0])] if z else [], dense_cells(z), arcs=False,
                             rowAxis=f"{b} word read", colAxis=f"{a} word", group="second"))
    if trace.get("pooling") is not None:
        w = trace["pooling"]
        panels.append(matrix("pooling", f"the {a} summarised by attention with respect to the {b} (u = sum_t "
                             f"alpha_t h_t)", ["summary"], first[: len(w)], [[0, [_r(x) for x in w]]], arcs=False,
                             rowAxis="", colAxis=f"{a} word"))
    return panels


def document_panels(predictor, ex, trace: dict) -> list:
    """The hierarchical reader's trace: every sentence's reader over its own words (one row per word, its
    weights over its sentence's slots: a block per sentence), and the document reader over the sentences."""
    sentences = [list(s) for s in ex.sentences]
    reader = _reader_name(predictor)
    doc_reader = getattr(getattr(predictor.cfg, "head", None), "doc_reader", "") or ""
    panels: list = []
    per = trace.get("sentences")
    if per:
        words, cells, row_cols, offset = [], [], [], 0
        for sent, z in zip(sentences, per):
            n = min(len(sent), len(z))
            for t in range(n):
                words.append(sent[t])
                cells.append([offset, [_r(x) for x in z[t][:n]]])
                row_cols.append(offset + t)
            offset += n
        cols = [w for sent, z in zip(sentences, per) for w in sent[: len(z)]]
        what = ("NSE read weights z_t over its sentence's memory (slot i starts as word i), also where it erased and "
                "wrote (M_t = M_(t-1)(1 - z_t) + h_t z_t)" if _is_nse(reader)
                else f"{reader} intra-attention over its sentence's tape")
        panels.append(matrix("sentences", f"sentence reader, each sentence read alone: {what}", words, cols, cells,
                             arcs=True, rowAxis="word read", colAxis="slot", rowCol=row_cols,
                             **({"writes": True} if _is_nse(reader) else {})))
    doc = trace.get("document")
    if doc:
        labels = [f"s{i + 1}: " + " ".join(s[:4]) + (" \u2026" if len(s) > 4 else "") for i, s in enumerate(sentences)]
        what = "document reader: "
        panels += reader_panels("document", doc_reader, labels[: len(doc)], doc, trace.get("document_layers"),
                                f"{what}over the sentences ({doc_reader}); ", unit="sentence")
    return panels


def classify_view(predictor, record: dict, result) -> dict:
    ex = predictor.example(record, "input")
    summary, panels = classify_summary(result)
    notes: list = []
    trace = result.attention
    if hasattr(ex, "tokens"):
        words = list(ex.tokens)
        attn = reader_panels("attention", _reader_name(predictor), words, trace, getattr(result, "attention_layers", None))
    elif hasattr(ex, "first"):  # a pair: each text's reader and what the second read of the first
        words = list(ex.first) + list(ex.second)
        attn = pair_panels(predictor, ex, trace) if isinstance(trace, dict) else []
    elif hasattr(ex, "sentences"):  # a document: the sentence reader and the document reader
        words = [w for s in ex.sentences for w in s]
        attn = document_panels(predictor, ex, trace) if isinstance(trace, dict) else []
    else:
        words, attn = [], []
    if not attn:
        notes.append("this model's readers return no attention trace for its input (recurrent encoders); the "
                     "prediction is shown")
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


# ----------------------------------------------------------------------------- translation

SOURCE_WHAT = {
    "attention_decoder": "the decoder's attention a_t over the source states (RNNSearch-style)",
    "nse_decoder": ("the NSE decoder's reads z_t over the shared memory (the encoder's final memory, slot i starts as "
                    "source word i); it erased and wrote h_t there too (eq. 10, 15)"),
    "lstmn_shallow": "the decoder's inter-attention p^t over the source tape (shallow fusion)",
    "lstmn_deep": "the decoder's inter-attention p^t over the source tapes (deep fusion, eq. 10-12)",
}


def translate_view(predictor, record: dict, result, beam: int) -> dict:
    source, tokens = list(result.source), list(result.tokens)
    head = _head_name(predictor)
    summary = [["translation", result.text], ["decoding", "greedy" if beam == 1 else f"beam search, beam {beam}"]]
    trace = result.attention or {}
    panels: list = []
    notes: list = []
    src, tgt = trace.get("source"), trace.get("target")
    if src:
        rows = (tokens + [TARGET_EOS])[: len(src)]  # a row per decoded word, and the </s>'s where it ended so
        extra = {**({"writes": True} if head == "nse_decoder" else {}), **({"group": "target"} if tgt else {})}
        panels.append(matrix("source", f"target \u00d7 source: {SOURCE_WHAT.get(head, 'the decoder over the source')}; "
                             f"row t is what the step that wrote word t read", rows, source[: len(src[0])],
                             dense_cells(src), arcs=False, rowAxis="target word", colAxis="source word", **extra))
        if tgt:
            inputs = [TARGET_BOS, *tokens][: len(tgt)]
            panels.append(matrix("target", "target \u00d7 target: the decoder's intra-attention over its own tape "
                                 "(slot i holds its input i, <s> first); row t is what the step that wrote word t "
                                 "attended to", rows, inputs, dense_cells(tgt), arcs=True, rowAxis="target word",
                                 colAxis="decoder input", rowCol=list(range(len(rows))), group="target"))
    else:
        notes.append("this translation model returns no attention trace: the decoded output is shown")
    enc = trace.get("encoder")
    if enc:
        panels += reader_panels("encoder", _reader_name(predictor), source, enc, trace.get("encoder_layers"),
                                "the encoder over the source: ", "encoder")
    return {"summary": summary, "panels": panels, "notes": notes, "tokens": source}


# ----------------------------------------------------------------------------- the view


def model_info(predictor) -> dict:
    return {"kind": predictor.kind, "reader": _reader_name(predictor), "head": _head_name(predictor),
            "source": predictor.source, "max_tokens": MAX_TOKENS, "beam": BEAM, "max_beam": MAX_BEAM}


def build_view(predictor, item: Any, max_tokens: int = MAX_TOKENS, beam: int = BEAM) -> dict:
    """The view of one input (a string or a record), from ``predictor.predict(item, attention=True)``;
    ``beam``: a translation model's beam (1: greedy decoding)."""
    if not isinstance(beam, int) or isinstance(beam, bool) or not 1 <= beam <= MAX_BEAM:
        raise ExploreError(f"the beam must be a whole number from 1 (greedy) to {MAX_BEAM}, got {beam!r}")
    record, unknown = check_input(predictor, item, max_tokens)
    kind = predictor.kind
    if kind == "translate":
        body = translate_view(predictor, record, predictor.predict(record, attention=True, beam=beam), beam)
    else:
        result = predictor.predict(record, attention=True)
        if kind == "lm":
            body = lm_view(predictor, record, result)
        elif kind == "cloze":
            body = cloze_view(predictor, record, result)
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
