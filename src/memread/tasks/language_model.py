"""Word-level language modelling: embedding -> reader -> dropout -> softmax over the vocabulary.

Perplexity is ``exp(NLL / T)`` with NLL summed over every target token of the split and T their
number. Evaluation reads the split as one stream at batch size 1 by default, so each token is
conditioned on everything before it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from memread.data.ptb import EOS, ptb_path, read_ptb
from memread.data.stories import story_splits, story_text
from memread.data.stream import StreamBatches
from memread.data.vocab import Vocab
from memread.readers import build_reader
from memread.tasks.base import ModelOutput


@dataclass
class LMTaskConfig:
    name: Literal["lm"] = "lm"
    dataset: Literal["ptb", "stories"] = "ptb"
    bptt: int = 35
    emb: int = 150
    dropout: float = 0.0  # on embeddings and on reader outputs
    tie_weights: bool = False  # share embedding and softmax weights (needs emb == reader output size)
    init_range: float = 0.1  # uniform(-r, r) for embedding and softmax weights
    # "sequence": the loss is summed over the time steps of a segment and averaged over the batch, the
    # convention of the Torch/Theano LM code of the papers (their lr 0.65 and clip 5 assume it);
    # "token": averaged over every token (what lr values tuned for PyTorch's example assume)
    loss_reduction: Literal["sequence", "token"] = "sequence"
    min_count: int = 1
    max_vocab: int = 0  # 0 = no cap
    stories: int = 2000  # for dataset = "stories": number of training stories
    story_seed: int = 0


class LanguageModel(nn.Module):
    def __init__(self, vocab_size: int, cfg: LMTaskConfig, reader: nn.Module):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, cfg.emb)
        self.loss_reduction = cfg.loss_reduction
        self.reader = reader
        self.drop = nn.Dropout(cfg.dropout)
        self.decoder = nn.Linear(reader.output_size, vocab_size)
        nn.init.uniform_(self.embedding.weight, -cfg.init_range, cfg.init_range)
        nn.init.uniform_(self.decoder.weight, -cfg.init_range, cfg.init_range)
        nn.init.zeros_(self.decoder.bias)
        if cfg.tie_weights:
            if reader.output_size != cfg.emb:
                raise ValueError(f"tie_weights needs task.emb == reader output size ({cfg.emb} != {reader.output_size})")
            self.decoder.weight = self.embedding.weight

    def forward(self, batch: dict[str, Tensor], state=None, return_attention: bool = False) -> ModelOutput:
        inp, target, mask = batch["input"], batch["target"], batch["mask"]  # (B, T) each
        x = self.drop(self.embedding(inp))  # (B, T, E)
        out = self.reader(x, mask, state, return_attention=return_attention)
        logits = self.decoder(self.drop(out.states))  # (B, T, V)
        nll = F.cross_entropy(logits.flatten(0, 1), target.flatten(), reduction="none").view_as(target)
        m = mask.to(nll.dtype)
        nll_sum = (nll * m).sum()
        tokens = m.sum()
        if self.loss_reduction == "sequence":
            loss = nll_sum / inp.size(0)
        else:
            loss = nll_sum / tokens.clamp_min(1.0)
        return ModelOutput(
            loss=loss,
            stats={"nll": nll_sum.detach(), "tokens": tokens.detach()},
            state=out.state,
            logits=logits,
            attention=out.attention,
        )


class LanguageModelTask:
    name = "lm"
    Config = LMTaskConfig
    selection_metric = "ppl"
    higher_is_better = False
    default_eval_batch_size = 1

    def __init__(self, cfg: LMTaskConfig, data_root: Path, vocab: Vocab | None = None):
        self.cfg = cfg
        self.data_root = Path(data_root)
        self._tokens: dict[str, list[str]] = {}
        self._ids: dict[str, Tensor] = {}
        if vocab is None:
            train = self.tokens("train")
            vocab = Vocab.build(train, min_count=cfg.min_count, max_size=cfg.max_vocab, specials=("<pad>", "<unk>"))
        self.vocab = vocab

    def tokens(self, split: str) -> list[str]:
        if split not in self._tokens:
            if self.cfg.dataset == "ptb":
                self._tokens[split] = read_ptb(ptb_path(self.data_root, split))
            else:
                n = {"train": self.cfg.stories, "valid": max(1, self.cfg.stories // 10), "test": max(1, self.cfg.stories // 10)}
                stories = story_splits(n["train"], n["valid"], n["test"], self.cfg.story_seed)[split]
                self._tokens[split] = [t for line in story_text(stories) if line for t in (*line.split(), EOS)]
        return self._tokens[split]

    def ids(self, split: str) -> Tensor:
        if split not in self._ids:
            self._ids[split] = torch.tensor(self.vocab.encode(self.tokens(split)), dtype=torch.long)
        return self._ids[split]

    def batches(self, split: str, batch_size: int, epoch: int = 0, seed: int = 0) -> StreamBatches:
        return StreamBatches(self.ids(split), batch_size, self.cfg.bptt, pad_id=self.vocab.pad_id)

    def build_model(self, reader_cfg) -> LanguageModel:
        return LanguageModel(len(self.vocab), self.cfg, build_reader(reader_cfg, self.cfg.emb))

    def summarize(self, stats: dict[str, float]) -> dict[str, float]:
        nll = stats["nll"] / max(stats["tokens"], 1.0)
        return {"ppl": math.exp(min(nll, 50.0)), "nll": nll, "tokens": stats["tokens"]}

    def tokens_in(self, batch: dict) -> int:
        return int(batch["mask"].sum())
