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


@torch.no_grad()
def score_candidates(model: torch.nn.Module, vocab: Vocab, examples: list[ClozeExample],
                     questions_per_batch: int = 8) -> list[list[float]]:
    """For every question, the log-likelihood of its query with each candidate filled in."""
    model.eval()
    device = next(model.parameters()).device
    scores: list[list[float]] = []
    for i in range(0, len(examples), questions_per_batch):
        chunk = examples[i : i + questions_per_batch]
        rows, starts = [], []  # starts: index of the first input whose target is a query token
        for ex in chunk:
            n_context, seqs = candidate_sequences(ex, vocab)
            rows.extend(seqs)
            starts.extend([n_context - 1] * len(seqs))
        T = max(len(r) for r in rows) - 1
        inp = torch.full((len(rows), T), vocab.pad_id or 0, dtype=torch.long)
        target = torch.full((len(rows), T), vocab.pad_id or 0, dtype=torch.long)
        scored = torch.zeros(len(rows), T, dtype=torch.bool)
        for r, (seq, s) in enumerate(zip(rows, starts)):
            inp[r, : len(seq) - 1] = torch.tensor(seq[:-1])
            target[r, : len(seq) - 1] = torch.tensor(seq[1:])
            scored[r, s : len(seq) - 1] = True
        mask = torch.arange(T).unsqueeze(0) < torch.tensor([len(r) - 1 for r in rows]).unsqueeze(1)
        inp, target, scored, mask = inp.to(device), target.to(device), scored.to(device), mask.to(device)
        states = model.read(inp, mask).states  # (R, T, H), from an empty state: a new story
        logp = F.log_softmax(model.decoder(states[scored]), dim=-1)  # query positions only: (N, V)
        token_logp = logp.gather(1, target[scored].unsqueeze(1)).squeeze(1)  # (N,)
        row = torch.arange(len(rows), device=device).unsqueeze(1).expand_as(scored)[scored]  # (N,)
        per_row: Tensor = torch.zeros(len(rows), dtype=token_logp.dtype, device=device).index_add_(0, row, token_logp)
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
    """Accuracy of ``model`` on one CBT-format file: ``{"file", "subset", "questions", "correct", "accuracy"}``."""
    examples = read_cbt(Path(path), context_lines=context_lines)
    scores = score_candidates(model, vocab, examples, questions_per_batch)
    correct = sum(answer(ex, s) == ex.answer for ex, s in zip(examples, scores))
    return {"file": str(path), "subset": subset_of(Path(path)), "questions": len(examples), "correct": correct,
            "accuracy": correct / len(examples)}
