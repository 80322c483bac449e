"""The Children's Book Test answered by a language model (Daniluk et al. 2017, Figure 2d).

A CBT question is 20 context sentences and a query with one word blanked (``XXXXX``), with 10
candidates (``memread.data.cbt``). A language model answers it by reading the context and then the
query with each candidate filled in, from an empty state (a new story), and picking the candidate
whose query is most likely: the sum of ``log p`` over every query token, the filled-in word and all
words after it included. Sentences end with ``<eos>``, as in the LM's training text.

Words the vocabulary lacks are looked up lower-cased (PTB-style vocabularies are lower case), else
read as ``<unk>``; candidates that are all ``<unk>`` tie, and a tie goes to the first candidate.
Accuracy is reported per file; a file named like CBT's (``cbtest_NE_...``) or memread's cloze sets
(``cloze_NE_...``) gets its subset: NE (named entities), CN (common nouns), V (verbs), P (prepositions).
"""

from __future__ import annotations

import re
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor

from memread.data.cbt import BLANK, ClozeExample, read_cbt
from memread.data.ptb import EOS
from memread.data.vocab import Vocab
from memread.errors import MemreadError
from memread.readers.base import flatten_state, state_structure, unflatten_state

SUBSET = re.compile(r"(?:cbtest|cloze)_(NE|CN|V|P)_")  # CBT's files and memread's cloze builder's


def subset_of(path: Path) -> str:
    m = SUBSET.search(Path(path).name)
    return m.group(1) if m else ""


def encode_word(vocab: Vocab, word: str) -> int:
    if word in vocab:
        return vocab.id(word)
    if word.lower() in vocab:
        return vocab.id(word.lower())
    if vocab.unk_id is None:
        raise MemreadError(f"cbt-lm: {word!r} is not in the vocabulary, which has no <unk>")
    return vocab.unk_id


def candidate_sequences(example: ClozeExample, vocab: Vocab) -> tuple[int, list[list[int]]]:
    """(number of context tokens, one id sequence per candidate: context then the filled-in query)."""
    context = [encode_word(vocab, w) for sentence in example.context for w in (*sentence, EOS)]
    rows = []
    for cand in example.candidates:
        query = [encode_word(vocab, cand if w == BLANK else w) for w in (*example.query, EOS)]
        rows.append(context + query)
    return len(context), rows


def _batch_dims(model: torch.nn.Module, device: torch.device) -> dict[str, int | None]:
    """Which dimension of each tensor of the reader's state is the batch: read one row and two rows and
    see which size changes (``None``: the tensor is shared by every row)."""
    def flat(rows: int) -> dict[str, Tensor]:
        x = torch.zeros(rows, 2, dtype=torch.long, device=device)
        return flatten_state(model.read(x, torch.ones_like(x, dtype=torch.bool)).state)
    one, two = flat(1), flat(2)
    return {k: next((d for d in range(t.dim()) if t.size(d) != two[k].size(d)), None) for k, t in one.items()}


def repeat_rows(state, repeats: Tensor, dims: dict[str, int | None]):
    """The reader state with row ``b`` repeated ``repeats[b]`` times (one copy per candidate)."""
    flat = flatten_state(state)
    flat = {k: t if dims[k] is None else t.repeat_interleave(repeats, dim=dims[k]) for k, t in flat.items()}
    return unflatten_state(state_structure(state), flat)


def _padded(seqs: list[list[int]], pad: int, device: torch.device) -> tuple[Tensor, Tensor]:
    T = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), T), pad, dtype=torch.long)
    for r, s in enumerate(seqs):
        ids[r, : len(s)] = torch.tensor(s)
    lengths = torch.tensor([len(s) for s in seqs])
    return ids.to(device), (torch.arange(T).unsqueeze(0) < lengths.unsqueeze(1)).to(device)


@torch.no_grad()
def score_candidates(model: torch.nn.Module, vocab: Vocab, examples: list[ClozeExample],
                     questions_per_batch: int = 8) -> list[list[float]]:
    """For every question, the log-likelihood of its query with each candidate filled in.

    The context is read once per question, from an empty state (a new story); its final state is then
    repeated once per candidate and the filled-in queries are read from it, so a question costs one
    context and ten queries, not ten contexts (``tests`` check this against reading each candidate's
    whole sequence)."""
    model.eval()
    device = next(model.parameters()).device
    pad = vocab.pad_id or 0
    dims = _batch_dims(model, device)
    scores: list[list[float]] = []
    for i in range(0, len(examples), questions_per_batch):
        chunk = examples[i : i + questions_per_batch]
        contexts, queries = [], []  # queries: every candidate's filled-in query, question by question
        for ex in chunk:
            n_context, seqs = candidate_sequences(ex, vocab)
            contexts.append(seqs[0][:n_context])
            queries.extend(seq[n_context:] for seq in seqs)
        ctx, ctx_mask = _padded(contexts, pad, device)
        out = model.read(ctx, ctx_mask)  # (Q, Tc, H), from an empty state
        last = out.states[torch.arange(len(chunk), device=device), ctx_mask.sum(1) - 1]  # (Q, H)
        repeats = torch.tensor([len(ex.candidates) for ex in chunk], device=device)
        qry, qry_mask = _padded(queries, pad, device)  # (R, Tq): the targets
        state = repeat_rows(out.state, repeats, dims)
        q_states = model.read(qry[:, :-1], qry_mask[:, :-1], state).states  # (R, Tq - 1, H)
        # the first query word is predicted by the context's last state, each later one by the query's
        states = torch.cat([last.repeat_interleave(repeats, dim=0).unsqueeze(1), q_states], dim=1)  # (R, Tq, H)
        logp = F.log_softmax(model.decoder(states[qry_mask]), dim=-1)  # (N, V)
        token_logp = logp.gather(1, qry[qry_mask].unsqueeze(1)).squeeze(1)  # (N,)
        row = torch.arange(len(queries), device=device).unsqueeze(1).expand_as(qry_mask)[qry_mask]  # (N,)
        per_row: Tensor = torch.zeros(len(queries), dtype=token_logp.dtype, device=device).index_add_(0, row, token_logp)
        at = 0
        for ex in chunk:
            scores.append(per_row[at : at + len(ex.candidates)].tolist())
            at += len(ex.candidates)
    return scores


def answer(example: ClozeExample, scores: list[float]) -> str:
    """The candidate with the highest score (the first one on a tie)."""
    return example.candidates[max(range(len(scores)), key=lambda i: (scores[i], -i))]


def evaluate_cbt_file(model: torch.nn.Module, vocab: Vocab, path: Path, context_lines: int | None = 20,
                      questions_per_batch: int = 8) -> dict:
    """Accuracy of ``model`` on one CBT-format file: ``{"file", "subset", "questions", "correct", "accuracy",
    "answer_in_vocab", "accuracy_answer_in_vocab"}`` (the last two: the questions whose answer is not ``<unk>``)."""
    examples = read_cbt(Path(path), context_lines=context_lines)
    scores = score_candidates(model, vocab, examples, questions_per_batch)
    hits = [answer(ex, s) == ex.answer for ex, s in zip(examples, scores)]
    # an answer the vocabulary lacks is read as <unk>, like every other unknown candidate: the LM cannot
    # tell them apart, so the accuracy on the questions whose answer it knows is reported as well
    known = [encode_word(vocab, ex.answer) != vocab.unk_id for ex in examples]
    n_known = sum(known)
    return {"file": str(path), "subset": subset_of(Path(path)), "questions": len(examples), "correct": sum(hits),
            "accuracy": sum(hits) / len(examples), "answer_in_vocab": n_known,
            "accuracy_answer_in_vocab": sum(h for h, k in zip(hits, known) if k) / n_known if n_known else None}
