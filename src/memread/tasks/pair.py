"""Two texts in, one decision out: natural language inference (SNLI) and answer sentence selection
(WikiQA), with any reader as the encoder.

The pair is ``(first, second)``: SNLI (premise, hypothesis); WikiQA (candidate sentence, question),
because MMA-NSE "first encodes the answers and then the questions by accessing its own and the answer
encoding memories" (Munkhdalai & Yu, section 4.2). Encoders (``encoder``):

- ``siamese``: one reader encodes both texts (NSE on SNLI, section 4.1);
- ``two``: two readers of the same ``[reader]`` config, one per text (the LSTMN paper's two LSTMs or
  LSTMNs, section 5.3);
- ``mma``: an NSE encodes the first text; an MMA-NSE (``shared = 1``, eq. 7-15) reads the second while
  reading and writing the first text's final memory;
- ``attention``: ``two``, and the first text is summarised by attention over its reader's outputs
  ``{h^1_t}`` with respect to the second text's representation ``v``:
  ``u = sum_t alpha_t h^1_t``, ``alpha = softmax(w^T tanh(W_y h^1_t + W_h v))`` (the "LSTMs attention"
  baselines of both NSE tables, Rocktaschel et al. 2016 and Miao et al. 2016, with their readers);
- ``mma_attention``: ``mma`` with that attention over the first text's NSE outputs (section 4.1,
  "MMA-NSE attention");
- ``shallow_fusion`` / ``deep_fusion``: an LSTMN (``[reader]``, which must be ``lstmn``) reads the first
  text; an LSTMN decoder of the same ``hidden`` (:class:`memread.readers.lstmn_fusion.LSTMNFusionDecoder`)
  reads the second conditioned on the first's tapes (the LSTMN paper's "LSTMN shallow / deep fusion",
  sections 4 and 5.3): shallow fusion attends to the first text's hidden tape RNNSearch-style, deep
  fusion also gates its attended memory tape into the decoder's memory (eq. 10-15). The second text is
  represented by the decoder's outputs: for deep fusion its hidden tape ``h_t``; for shallow fusion the
  outputs ``tanh(W_o [h_t; ctx_t])`` that combine it with the attended first text (see that module).

Each text is pooled into one vector (``pool``: ``last`` = NSE's h_T, ``mean`` = the LSTMN's mean of
its hidden tape), and the classifier sees ``features``: ``nse`` = ``[u; v; |u - v|; u * v]`` (NSE,
following Bowman et al. 2016) or ``concat`` = ``[u; v]`` (LSTMN), through one ReLU layer (``mlp``:
1024 in both papers) to a softmax over the three SNLI labels, or, for WikiQA, one sigmoid unit
(eq. 16) trained with the sigmoid cross-entropy.

WikiQA is evaluated per question: evaluation batches hold whole questions, and MAP and MRR are taken
over the questions the usual filtered protocol keeps (:mod:`memread.metrics`); ``accuracy`` there is
the share of candidates classified right at p = 0.5.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from memread import metrics
from memread.data.batching import Batches, batch_order, pad
from memread.data.snli import PairExample, read_snli, snli_path
from memread.data.vocab import Vocab
from memread.data.wikiqa import read_wikiqa, wikiqa_path
from memread.errors import MemreadError
from memread.modules.attention import AdditiveAttention
from memread.modules.word_embedding import WordEmbedding
from memread.readers import build_reader
from memread.readers.lstmn_fusion import FusionConfig, LSTMNFusionDecoder
from memread.tasks.base import ModelOutput
from memread.tasks.text_inputs import classification_stats, mlp_classifier, pool, vectors_path, vocabulary


@dataclass
class PairTaskConfig:
    name: Literal["pair"] = "pair"
    dataset: Literal["snli", "wikiqa"] = "snli"
    encoder: Literal["siamese", "two", "attention", "mma", "mma_attention", "shallow_fusion", "deep_fusion"] = "siamese"
    features: Literal["nse", "concat"] = "nse"
    pool: Literal["mean", "last", "max"] = "last"
    emb: int = 300  # must equal the vectors' size when task.vectors is set
    vectors: str = ""  # GloVe-format file under the data root
    oov: Literal["zero", "gaussian"] = "zero"
    freeze: bool = False
    first_epoch_scale: float = 1.0  # LSTMN, SNLI: 0.0 ("only OOV vectors updated in the first epoch")
    lowercase: bool = True
    emb_dropout: float = 0.0
    mlp: int = 1024
    dropout: float = 0.3
    min_count: int = 1
    bucket: int = 0

    def __post_init__(self) -> None:
        if self.freeze and self.first_epoch_scale != 1.0:
            raise MemreadError("task.first_epoch_scale has no effect with task.freeze = true; set one of them")


@dataclass
class PairEncoding:
    u: Tensor  # (B, H) the first text
    v: Tensor  # (B, H) the second text
    attention: Tensor | None = None  # (B, T1) mma_attention: the weights over the first text


FUSION = {"shallow_fusion": "lstmn_shallow", "deep_fusion": "lstmn_deep"}  # encoder -> fusion decoder


class PairEncoder(nn.Module):
    """Two texts' embeddings -> one vector each, by the ``encoder`` scheme above."""

    def __init__(self, encoder: str, how: str, first: nn.Module, second: nn.Module | None):
        super().__init__()
        self.encoder, self.how = encoder, how
        self.first = first
        self.second = second  # None: siamese
        self.attention = None
        if encoder in ("attention", "mma_attention"):
            H = first.output_size
            self.attention = AdditiveAttention(H, H, H)

    def forward(self, x1: Tensor, m1: Tensor, x2: Tensor, m2: Tensor) -> PairEncoding:
        if self.encoder in FUSION:  # the decoder reads the second text over the first's tapes (Y, A)
            r1 = self.first(x1, m1, return_cells=self.encoder == "deep_fusion")
            cells = r1.state["cells"] if self.encoder == "deep_fusion" else None
            r2 = self.second(x2, m2, r1.memory, cells, m1)
            return PairEncoding(pool(r1.states, m1, self.how), pool(r2.states, m2, self.how))
        r1 = self.first(x1, m1)
        second = self.second if self.second is not None else self.first
        shared = {"shared": [(r1.memory, m1)]} if self.encoder in ("mma", "mma_attention") else {}
        r2 = second(x2, m2, **shared)
        v = pool(r2.states, m2, self.how)
        if self.attention is not None:
            alpha = self.attention(v, r1.states, m1)  # (B, T1)
            u = torch.bmm(alpha.unsqueeze(1), r1.states).squeeze(1)  # (B, H)
            return PairEncoding(u, v, alpha)
        return PairEncoding(pool(r1.states, m1, self.how), v)


def pair_features(u: Tensor, v: Tensor, kind: str) -> Tensor:
    if kind == "nse":
        return torch.cat([u, v, (u - v).abs(), u * v], dim=-1)  # (B, 4H)
    return torch.cat([u, v], dim=-1)  # (B, 2H)


class PairClassifier(nn.Module):
    def __init__(self, vocab_size: int, cfg: PairTaskConfig, encoder: PairEncoder, pad_id: int, outputs: int):
        super().__init__()
        self.features = cfg.features
        self.embedding = WordEmbedding(vocab_size, cfg.emb, pad_id, cfg.freeze, cfg.first_epoch_scale)
        self.drop = nn.Dropout(cfg.emb_dropout)
        self.encoder = encoder
        H = encoder.first.output_size
        self.classifier = mlp_classifier((4 if cfg.features == "nse" else 2) * H, cfg.mlp, outputs, cfg.dropout)

    def encode(self, batch: dict) -> PairEncoding:
        x1 = self.drop(self.embedding(batch["first"]))
        x2 = self.drop(self.embedding(batch["second"]))
        return self.encoder(x1, batch["first_mask"], x2, batch["second_mask"])

    def forward(self, batch: dict, state=None, return_attention: bool = False) -> ModelOutput:
        if self.training and "epoch" in batch:
            self.embedding.set_epoch(batch["epoch"])
        enc = self.encode(batch)
        logits = self.classifier(pair_features(enc.u, enc.v, self.features))  # (B, C) or (B, 1)
        if logits.size(-1) > 1:
            loss, stats = classification_stats(logits, batch["label"])
            return ModelOutput(loss=loss, stats=stats, logits=logits, attention=enc.attention)
        return self._answer_selection(logits.squeeze(-1), batch, enc)

    def _answer_selection(self, scores: Tensor, batch: dict, enc: PairEncoding) -> ModelOutput:
        """Sigmoid cross-entropy (eq. 16); MAP/MRR statistics when the batch holds whole questions."""
        labels = batch["label"].to(scores.dtype)
        nll = F.binary_cross_entropy_with_logits(scores, labels, reduction="none")  # (B,)
        stats = {"nll": nll.sum().detach(), "correct": ((scores > 0) == (labels > 0.5)).sum().detach(),
                 "count": torch.tensor(float(len(labels)))}
        if "question" in batch:
            questions = batch["question"]
            ranked = metrics.map_mrr((scores[questions == q].tolist(), batch["label"][questions == q].tolist())
                                     for q in questions.unique().tolist())
            n = ranked["questions"]
            stats.update(ap=torch.tensor(ranked["map"] * n), rr=torch.tensor(ranked["mrr"] * n), questions=torch.tensor(float(n)))
        return ModelOutput(loss=nll.mean(), stats=stats, logits=scores, attention=enc.attention)


def collate_pairs(items: list[dict], pad_id: int, questions: bool) -> dict:
    """``questions``: evaluation batches of whole WikiQA questions carry each candidate's question, for
    MAP and MRR (training batches mix candidates of many questions and do not)."""
    first, first_mask = pad([e["first"] for e in items], pad_id)
    second, second_mask = pad([e["second"] for e in items], pad_id)
    batch = {"first": first, "first_mask": first_mask, "second": second, "second_mask": second_mask,
             "label": torch.tensor([e["label"] for e in items], dtype=torch.long)}
    if questions and "question" in items[0]:
        batch["question"] = torch.tensor([e["question"] for e in items], dtype=torch.long)
    return batch


def question_batches(questions: list[int], batch_size: int) -> list[list[int]]:
    """Evaluation batches of whole questions: candidates in file order, a batch closed once it holds
    ``batch_size`` candidates (a question is never split)."""
    groups: list[list[int]] = []
    current: list[int] = []
    for i, q in enumerate(questions):
        if current and questions[current[-1]] != q and len(current) >= batch_size:
            groups.append(current)
            current = []
        current.append(i)
    if current:
        groups.append(current)
    return groups


class PairTask:
    name = "pair"
    Config = PairTaskConfig
    higher_is_better = True
    default_eval_batch_size = 128

    def __init__(self, cfg: PairTaskConfig, data_root: Path, vocab: Vocab | None = None,
                 examples: dict[str, list[PairExample]] | None = None):
        self.cfg = cfg
        self.data_root = Path(data_root)
        self.selection_metric = "map" if cfg.dataset == "wikiqa" else "accuracy"
        self._examples: dict[str, list[PairExample]] = dict(examples or {})
        self._questions: dict[str, list[int]] = {}  # wikiqa: question index of every candidate
        self._encoded: dict[str, list[dict]] = {}
        self.dropped: dict[str, int] = {}
        self.vectors: dict[str, list[float]] | None = None
        if vocab is None:
            path = vectors_path(self.data_root, cfg.vectors) if cfg.vectors else None
            others = [t for s in ("valid", "test") for e in self.examples(s) for t in (self._words(e.first), self._words(e.second))]
            train = (t for e in self.examples("train") for t in (self._words(e.first), self._words(e.second)))
            vocab, self.vectors = vocabulary(train, others, path, cfg.min_count)
        self.vocab = vocab

    def _words(self, tokens) -> list[str]:
        return [w.lower() for w in tokens] if self.cfg.lowercase else list(tokens)

    def examples(self, split: str) -> list[PairExample]:
        if split not in self._examples:
            if self.cfg.dataset == "snli":
                self._examples[split], self.dropped[split] = read_snli(snli_path(self.data_root, split))
            else:
                candidates = read_wikiqa(wikiqa_path(self.data_root, split))
                qids: dict[str, int] = {}
                self._questions[split] = [qids.setdefault(c.qid, len(qids)) for c in candidates]
                self._examples[split] = [PairExample(c.sentence, c.question, c.label) for c in candidates]
            if not self._examples[split]:
                raise MemreadError(f"the {split} split of {self.cfg.dataset} has no examples")
        return self._examples[split]

    def batches(self, split: str, batch_size: int, epoch: int = 0, seed: int = 0) -> Batches:
        if split not in self._encoded:
            enc = [{"first": self.vocab.encode(self._words(e.first)), "second": self.vocab.encode(self._words(e.second)),
                    "label": e.label} for e in self.examples(split)]
            for e, q in zip(enc, self._questions.get(split, ())):
                e["question"] = q
            self._encoded[split] = enc
        enc = self._encoded[split]
        if split == "train":
            g = torch.Generator().manual_seed(seed * 1_000_003 + epoch)
            groups = batch_order([len(e["first"]) + len(e["second"]) for e in enc], batch_size, self.cfg.bucket, g)
            return Batches(enc, groups, partial(collate_pairs, pad_id=self.vocab.pad_id, questions=False), epoch)
        if split in self._questions:
            groups = question_batches(self._questions[split], batch_size)
        else:
            groups = batch_order([len(e["first"]) + len(e["second"]) for e in enc], batch_size, self.cfg.bucket, None)
        return Batches(enc, groups, partial(collate_pairs, pad_id=self.vocab.pad_id, questions=True))

    def build_model(self, reader_cfg) -> PairClassifier:
        cfg = self.cfg
        if cfg.encoder in ("mma", "mma_attention"):
            if reader_cfg.name != "nse":
                raise MemreadError(f"task.encoder = {cfg.encoder!r} needs reader.name = \"nse\", got {reader_cfg.name!r}")
            first = build_reader(dataclasses.replace(reader_cfg, shared=0), cfg.emb)
            second = build_reader(dataclasses.replace(reader_cfg, shared=1), cfg.emb)
        elif cfg.encoder in FUSION:
            if reader_cfg.name != "lstmn":
                raise MemreadError(f"task.encoder = {cfg.encoder!r} needs reader.name = \"lstmn\", got {reader_cfg.name!r}")
            first = build_reader(reader_cfg, cfg.emb)
            second = LSTMNFusionDecoder(FusionConfig(FUSION[cfg.encoder], hidden=reader_cfg.hidden), cfg.emb,
                                        first.output_size)
        else:
            first = build_reader(reader_cfg, cfg.emb)
            second = build_reader(reader_cfg, cfg.emb) if cfg.encoder != "siamese" else None
        encoder = PairEncoder(cfg.encoder, cfg.pool, first, second)
        model = PairClassifier(len(self.vocab), cfg, encoder, self.vocab.pad_id, 1 if cfg.dataset == "wikiqa" else 3)
        if self.vectors is not None:
            model.embedding.load_vectors(self.vocab.itos, self.vectors, cfg.oov, seed=0)
        return model

    def summarize(self, stats: dict[str, float]) -> dict[str, float]:
        n = max(stats["count"], 1.0)
        out = {"accuracy": stats["correct"] / n, "nll": stats["nll"] / n, "count": stats["count"]}
        if self.cfg.dataset == "wikiqa":
            q = stats.get("questions", 0.0)
            out.update(map=stats["ap"] / q if q else 0.0, mrr=stats["rr"] / q if q else 0.0, questions=q)
        return out

    def tokens_in(self, batch: dict) -> int:
        return int(batch["first_mask"].sum() + batch["second_mask"].sum())
