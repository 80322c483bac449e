"""Greedy decoding and beam search for encoder-decoder models, and the protocols they rely on.

**Decoder protocol** (embedding level; every decoder of :mod:`memread.heads.translation` implements it:
the attention LSTM decoder, :class:`memread.heads.decoders.nse.NSEDecoder`, and the LSTMN fusion
decoders)::

    state = dec.start(source_states, source_cells, source_mask)
        # source_states (B, S, H): what the decoder reads of the source (encoder outputs, or for the
        # NSE decoder the encoder's final memory); source_cells (B, S, H): an LSTMN encoder's memory
        # tape, else None; source_mask (B, S) bool, True = real
    out = dec(y, y_mask, source_states, source_cells, source_mask)   # teacher forcing -> ReaderOutput
        # y (B, T, E) target input embeddings; out.states (B, T, H)
    out_t, state = dec.step(y_t, state)      # y_t (B, E) -> out_t (B, H); O(source + t) work per step
    state = dec.reorder(state, index)        # index (B',) int64: rows of the state to keep (beam search)

``step`` run over ``y_1 .. y_T`` from ``start`` gives the same outputs as ``forward`` (tests check it in
float64 for every model).

**Model protocol** (id level; :class:`memread.heads.translation.Translator`)::

    model.bos_id, model.eos_id
    state = model.start(src (B, S) ids, src_mask (B, S))
    log_probs, state = model.step(prev (B,) ids, state)       # log_probs (B, V)
    state = model.reorder(state, index)

Both searches below use only these, with an incremental state: a prefix is never re-run.

**Attention traces** (``trace=True``, for inspection: :meth:`memread.Predictor.predict` with ``attention=True``):
a model that also has ``start(src, src_mask, trace=dict)`` (it fills the dict with its encoder's weights,
batch first) and ``step_trace(state) -> {name: (B, w)}`` (the weights of the step that gave ``state``;
each decoder's ``step_trace``) gets, for every sentence, the weights of the returned hypothesis: one row
per decoded word, and one for the ``eos`` where the hypothesis ended with it; for beam search the rows of
the hypothesis's own history, followed back through the beams it passed. Tracing only reads: the
hypotheses are the same with and without it.

**Greedy**: the most probable word at every step, until ``eos`` or ``max_len`` words.

**Beam search** (``beam`` K, batched over sentences): every step extends each live hypothesis by every
word, keeps the 2K best extensions by summed log-probability; those among the first K that end in
``eos`` are finished, with the length-normalised score ``sum log p / len^alpha`` (``len`` counts the
words and the ``eos``; ``alpha = 0``: no normalisation, ``alpha = 1``: the mean log-probability per
word), and the best K that do not end in ``eos`` go on. A sentence stops when it has K finished
hypotheses (as fairseq does), and at step ``max_len`` every live hypothesis is ended with ``eos``
(its score is that of the ``eos``-ended hypothesis, so a hypothesis is at most ``max_len`` words). The
result is the finished hypothesis with the best normalised score. With ``beam = 1`` this is greedy
decoding exactly.

**Sentences**: :func:`translate` takes words to words through a translation pipeline's vocabularies
(``data.src_vocab``, ``data.tgt_vocab``), decoding sentences of similar length together.
"""

from __future__ import annotations

from typing import Any, Protocol

import torch
import torch.nn.functional as F
from torch import Tensor

from memread.data.batching import pad
from memread.errors import MemreadError
from memread.readers.base import ReaderOutput


class Decoder(Protocol):
    input_size: int
    output_size: int

    def start(self, source_states: Tensor, source_cells: Tensor | None, source_mask: Tensor) -> Any: ...

    def forward(self, y: Tensor, y_mask: Tensor | None, source_states: Tensor, source_cells: Tensor | None,
                source_mask: Tensor) -> ReaderOutput: ...

    def step(self, y_t: Tensor, state: Any) -> tuple[Tensor, Any]: ...

    def reorder(self, state: Any, index: Tensor) -> Any: ...


class Seq2Seq(Protocol):
    bos_id: int
    eos_id: int

    def start(self, src: Tensor, src_mask: Tensor) -> Any: ...

    def step(self, prev: Tensor, state: Any) -> tuple[Tensor, Any]: ...

    def reorder(self, state: Any, index: Tensor) -> Any: ...


def _check(max_len: int, beam: int = 1) -> None:
    if max_len < 1:
        raise MemreadError(f"decoding: max_len must be at least 1, got {max_len}")
    if beam < 1:
        raise MemreadError(f"decoding: beam size must be at least 1, got {beam}")


def _start(model: Seq2Seq, src: Tensor, src_mask: Tensor, encoder: dict | None):
    if encoder is None:
        return model.start(src, src_mask)
    if not hasattr(model, "step_trace"):
        raise MemreadError(f"decoding: {type(model).__name__} returns no attention trace")
    return model.start(src, src_mask, trace=encoder)


def _step_trace(model: Seq2Seq, state: Any) -> dict[str, Tensor]:
    return {k: v.detach().float().cpu() for k, v in model.step_trace(state).items() if v is not None}


def _sentence_trace(encoder: dict, b: int, rows: list[dict[str, Tensor]]) -> dict[str, Tensor]:
    """One sentence's trace: its rows of the encoder's weights, and one row per decoding step of ``rows``
    ({name: (w,)}) stacked, zero-padded to the widest (the target intra-attention grows by a slot per step)
    and at least to the number of steps (so that over the target it is square)."""
    out = {k: v[b].detach().float().cpu() for k, v in encoder.items()}
    for name in (rows[0] if rows else {}):
        width = max(max(r[name].numel() for r in rows), len(rows) if name == "target" else 0)
        out[name] = torch.stack([F.pad(r[name], (0, width - r[name].numel())) for r in rows])
    return out


@torch.no_grad()
def greedy(model: Seq2Seq, src: Tensor, src_mask: Tensor, max_len: int, trace: bool = False):
    """The arg-max word at every step; per sentence the word ids before ``eos`` (at most ``max_len``).
    With ``trace``: (those, per sentence its attention trace) (module docstring)."""
    _check(max_len)
    B = src.size(0)
    encoder: dict | None = {} if trace else None
    state = _start(model, src, src_mask, encoder)
    prev = torch.full((B,), model.bos_id, dtype=torch.long, device=src.device)
    out: list[list[int]] = [[] for _ in range(B)]
    steps: list[dict[str, Tensor]] = []
    live = torch.ones(B, dtype=torch.bool, device=src.device)
    for _ in range(max_len):
        log_probs, state = model.step(prev, state)
        if trace:
            steps.append(_step_trace(model, state))
        prev = log_probs.argmax(dim=-1)  # (B,)
        live &= prev != model.eos_id
        if not bool(live.any()):
            break
        for b in live.nonzero().flatten().tolist():
            out[b].append(int(prev[b]))
    if not trace:
        return out
    # a sentence shorter than max_len ended with eos, at step len(words)
    rows = [min(len(words) + 1, max_len) for words in out]
    return out, [_sentence_trace(encoder, b, [{k: v[b] for k, v in steps[t].items()} for t in range(n)])
                 for b, n in enumerate(rows)]


@torch.no_grad()
def beam_search(model: Seq2Seq, src: Tensor, src_mask: Tensor, beam: int, max_len: int,
                alpha: float = 1.0, trace: bool = False):
    """Length-normalised beam search (module docstring); per sentence the best hypothesis's word ids.
    With ``trace``: (those, per sentence the attention trace of that hypothesis) (module docstring)."""
    _check(max_len, beam)
    B, K, device = src.size(0), beam, src.device
    encoder: dict | None = {} if trace else None
    state = model.reorder(_start(model, src, src_mask, encoder), torch.arange(B, device=device).repeat_interleave(K))
    steps: list[dict[str, Tensor]] = []  # each step's weights, rows b * K + k
    parents: list[Tensor] = []  # parents[t][r]: the row at step t that row r of step t + 1 continues
    scores = torch.full((B, K), float("-inf"), device=device)
    scores[:, 0] = 0.0  # all beams start as the same empty hypothesis: keep one
    tokens = torch.empty(B, K, 0, dtype=torch.long, device=device)
    prev = torch.full((B * K,), model.bos_id, dtype=torch.long, device=device)
    finished: list[list[tuple[float, list[int], int]]] = [[] for _ in range(B)]  # score, words, the eos's row
    done = [False] * B
    rank = torch.arange(2 * K, device=device)
    for t in range(max_len + 1):
        log_probs, state = model.step(prev, state)
        if trace:
            steps.append(_step_trace(model, state))
        log_probs = log_probs.float()
        V = log_probs.size(-1)
        if t == max_len:  # out of length: every live hypothesis ends here
            forced = torch.full_like(log_probs, float("-inf"))
            forced[:, model.eos_id] = log_probs[:, model.eos_id]
            log_probs = forced
        cand = (scores.unsqueeze(2) + log_probs.view(B, K, V)).view(B, K * V)
        top, idx = cand.topk(min(2 * K, K * V), dim=1)  # (B, 2K)
        origin, word = idx // V, idx % V
        is_eos = (word == model.eos_id) & torch.isfinite(top)
        length = (t + 1) ** alpha
        for b, j in (is_eos[:, :K]).nonzero().tolist():
            if not done[b]:
                hyp = tokens[b, origin[b, j]].tolist()
                finished[b].append((float(top[b, j]) / length, hyp, b * K + int(origin[b, j])))
        for b in range(B):
            if not done[b] and len(finished[b]) >= K:
                done[b] = True
        if all(done) or t == max_len:
            break
        # the K best extensions that do not end in eos go on (eos candidates sorted behind)
        order = (is_eos.long() * len(rank) + rank[: top.size(1)]).argsort(dim=1)[:, :K]  # (B, K)
        scores = top.gather(1, order).masked_fill(is_eos.gather(1, order), float("-inf"))
        origin, word = origin.gather(1, order), word.gather(1, order)
        tokens = torch.cat([tokens.gather(1, origin.unsqueeze(2).expand(-1, -1, tokens.size(2))), word.unsqueeze(2)], dim=2)
        flat = (origin + torch.arange(B, device=device).unsqueeze(1) * K).flatten()
        state = model.reorder(state, flat)
        prev = word.flatten()
        if trace:
            parents.append(flat.cpu())
    best = [max(f, key=lambda s: s[0]) if f else None for f in finished]
    out = [f[1] if f else [] for f in best]
    if not trace:
        return out
    traces = []
    for b, f in enumerate(best):
        rows: list[dict[str, Tensor]] = []
        if f is not None:  # back from the step that ended it with eos, through the rows it came from
            row = f[2]
            for t in range(len(f[1]), -1, -1):
                rows.append({k: v[row] for k, v in steps[t].items()})
                if t:
                    row = int(parents[t - 1][row])
        traces.append(_sentence_trace(encoder, b, rows[::-1]))  # (the encoder's rows: one per sentence)
    return out, traces


def decode(model: Seq2Seq, src: Tensor, src_mask: Tensor, beam: int = 1, max_len: int = 50,
           alpha: float = 1.0, trace: bool = False):
    """Greedy for ``beam = 1`` (the same result as a beam of one, cheaper), else beam search; with ``trace``
    also each sentence's attention trace (module docstring)."""
    if beam == 1:
        return greedy(model, src, src_mask, max_len, trace)
    return beam_search(model, src, src_mask, beam, max_len, alpha, trace)


@torch.no_grad()
def translate(model: Seq2Seq, data: Any, sources: list[list[str]], beam: int = 1, alpha: float = 1.0,
              max_len: int = 50, batch_size: int = 64, trace: bool = False):
    """Source sentences (lists of words) -> translations (lists of target words, without </s>), decoded in
    batches of similar length with ``data``'s vocabularies; empty sentences give empty translations.

    With ``trace``: (translations, traces), each sentence's trace a dict of tensors over its own words:
    ``"source"`` (n, S) the decoder's attention over the S source words at each of its n steps (a row per
    translated word, then one for ``</s>`` when it ended with it), ``"target"`` (n, n) where the decoder has
    an intra-attention (the LSTMN fusion decoders; column i: the decoder's input i, ``<s>`` first),
    ``"encoder"`` (S, S) and ``"encoder_layers"`` (L, S, S) where the encoder returns attention (None for an
    empty sentence)."""
    model.eval()
    device = next(model.parameters()).device
    out: list[list[str]] = [[] for _ in sources]
    traces: list[dict | None] = [None for _ in sources]
    order = sorted((i for i, s in enumerate(sources) if s), key=lambda i: len(sources[i]))
    for k in range(0, len(order), batch_size):
        rows = order[k : k + batch_size]
        src, src_mask = pad([data.src_vocab.encode(sources[i]) for i in rows], data.src_vocab.pad_id)
        hyps = decode(model, src.to(device), src_mask.to(device), beam, max_len, alpha, trace)
        if trace:
            hyps, found = hyps
            for i, tr in zip(rows, found):
                S = len(sources[i])
                traces[i] = {name: v[..., :S, :S] if name.startswith("encoder") else v[..., :S] if name == "source"
                             else v for name, v in tr.items()}
        for i, ids in zip(rows, hyps):
            out[i] = data.tgt_vocab.decode(ids)
    return (out, traces) if trace else out
