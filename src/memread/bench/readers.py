"""Training throughput of a reader against torch's fused ``nn.LSTM``, measured in one process.

Both models are timed on the same random batch, interleaved repeat by repeat, and the median time of
a training step (forward + backward) gives tokens/s. With ``vocab=0`` the reader alone is timed (random
embeddings in, a random projection of its states as the loss); with ``vocab=N`` the whole language
model is (embedding, reader, N-way softmax, cross-entropy). Speed targets are judged from this
output, never from timed tests.

A reader with ``layers`` (the stacked, gated-feedback and depth-gated LSTMs, deep LSTMNs) is timed
against an ``nn.LSTM`` of as many layers: the same-size baseline of the LSTMN paper's Table 1.

With ``match_params`` the reader's ``hidden`` is not ``hidden`` but the size whose model (the whole
LM with ``vocab``, else the reader alone) has the parameter count nearest the LSTM's at ``hidden``
(:func:`memread.params.match_hidden`), as Daniluk et al. (2017) compare their models.

An MMA-NSE (``nse`` with ``--set shared=N``) reads and writes N random memories of the input's length
besides its own.

``device`` places both models and their inputs (made on the CPU from the seed, then moved, so every
device reads the same numbers); on CUDA the baseline is cuDNN's LSTM, and each timed step is bracketed
by ``torch.cuda.synchronize``.
"""

from __future__ import annotations

import typing
from dataclasses import fields

import torch
import torch.nn.functional as F
from torch import nn

from memread.bench import device_fields, device_sync, median_step_times
from memread.errors import MemreadError
from memread.modules.output import VocabularyProjection
from memread.readers import READERS, build_reader
from memread.training.distributed import resolve_device
from memread.typed import parse_settings


class _LSTMReference(nn.Module):
    """torch's fused nn.LSTM behind the reader call convention, ``layers`` deep."""

    def __init__(self, input_size: int, hidden: int, layers: int = 1):
        super().__init__()
        self.rnn = nn.LSTM(input_size, hidden, num_layers=layers, batch_first=True)
        self.input_size, self.output_size = input_size, hidden

    def forward(self, x, mask=None, state=None, return_attention=False):
        return self.rnn(x)[0]


def reader_config(name: str, hidden: int, options: list[str] = ()):
    if name not in READERS:
        raise MemreadError(f"unknown reader {name!r}; known readers: {', '.join(sorted(READERS))}")
    Config = READERS[name].Config
    values = {"name": name}
    if "hidden" in {f.name for f in fields(Config)}:
        values["hidden"] = hidden
    values.update(parse_settings(list(options), typing.get_type_hints(Config, include_extras=True), "reader", f"reader {name!r}"))
    return Config(**values)


class _Step:
    """One training step of a reader (alone, or as a language model)."""

    def __init__(self, reader: nn.Module, batch: int, steps: int, emb: int, vocab: int, seed: int,
                 device: torch.device = torch.device("cpu")):
        g = torch.Generator().manual_seed(seed)  # on the CPU: the same inputs on every device
        self.reader, self.vocab = reader.to(device), vocab
        self.mask = torch.ones(batch, steps, dtype=torch.bool, device=device)
        # MMA-NSE (nse with shared = n): n other memories of the input's length to read and write, as the
        # premise's or the question's final memory would be
        n_shared = getattr(getattr(reader, "cfg", None), "shared", 0)
        self.extra = {}
        if n_shared:
            memories = torch.randn(n_shared, batch, steps, reader.output_size, generator=g).to(device)
            self.extra["shared"] = [(M, self.mask) for M in memories]
        if vocab:
            self.embedding = nn.Embedding(vocab, emb).to(device)
            self.decoder = VocabularyProjection(reader.output_size, vocab).to(device)
            self.tokens = torch.randint(vocab, (batch, steps + 1), generator=g).to(device)
            self.params = [*reader.parameters(), *self.embedding.parameters(), *self.decoder.parameters()]
        else:
            self.x = torch.randn(batch, steps, emb, generator=g).to(device)
            self.proj = torch.randn(reader.output_size, generator=g).to(device)
            self.params = list(reader.parameters())

    def __call__(self) -> None:
        for p in self.params:
            p.grad = None
        if self.vocab:
            out = self.reader(self.embedding(self.tokens[:, :-1]), self.mask, **self.extra)
            states = out if torch.is_tensor(out) else out.states
            logits = self.decoder(states)
            loss = F.cross_entropy(logits.flatten(0, 1), self.tokens[:, 1:].flatten())
        else:
            out = self.reader(self.x, self.mask, **self.extra)
            states = out if torch.is_tensor(out) else out.states
            loss = (states @ self.proj).mean()
        loss.backward()


def bench(name: str, batch: int = 32, steps: int = 35, emb: int = 150, hidden: int = 300, vocab: int = 0,
          repeats: int = 30, warmup: int = 3, reader_options: list[str] = (), seed: int = 0,
          match_params: bool = False, device: str = "cpu") -> dict:
    where = resolve_device(device)
    torch.manual_seed(seed)
    cfg = reader_config(name, hidden, reader_options)
    matched = {}
    if match_params:
        cfg, matched = _match(cfg, name, emb, hidden, vocab, getattr(cfg, "layers", 1))
    reader = build_reader(cfg, emb)
    layers = getattr(cfg, "layers", 1)  # a stacked reader is timed against a stacked nn.LSTM
    reference = _LSTMReference(emb, hidden, layers)
    step_reader = _Step(reader, batch, steps, emb, vocab, seed, where)
    step_lstm = _Step(reference, batch, steps, emb, vocab, seed, where)
    t_reader, t_lstm = median_step_times(step_reader, step_lstm, repeats, warmup, device_sync(where))
    tokens = batch * steps
    reader_tps = tokens / t_reader
    lstm_tps = tokens / t_lstm
    return {
        "reader": name,
        "tokens_per_s": round(reader_tps, 1),
        "lstm_tokens_per_s": round(lstm_tps, 1),
        "ratio": round(reader_tps / lstm_tps, 4),
        "batch": batch, "steps": steps, "emb": emb, "hidden": hidden, "vocab": vocab, "lstm_layers": layers,
        "reader_params": sum(p.numel() for p in reader.parameters()),
        "lstm_params": sum(p.numel() for p in reference.parameters()),
        **({"model_params": sum(p.numel() for p in step_reader.params),
            "lstm_model_params": sum(p.numel() for p in step_lstm.params)} if vocab else {}),
        **matched,
        "repeats": repeats, **device_fields(where), "threads": torch.get_num_threads(), "torch": torch.__version__,
    }


def _match(cfg, name: str, emb: int, hidden: int, vocab: int, layers: int = 1):
    """``cfg`` with the hidden size whose model matches the LSTM's parameter count (``vocab``: whole LMs)."""
    import dataclasses

    from memread.params import lm_parameters, match_hidden, reader_parameters

    if "hidden" not in {f.name for f in fields(cfg)}:
        raise MemreadError(f"--match-params: reader {name!r} has no hidden size to choose")
    lstm = nn.LSTM(emb, hidden, num_layers=layers)
    target = sum(p.numel() for p in lstm.parameters()) + (vocab * emb + hidden * vocab + vocab if vocab else 0)
    count = (lambda c: lm_parameters(c, vocab, emb)) if vocab else (lambda c: reader_parameters(c, emb))
    m = match_hidden(cfg, target, count=count)
    return dataclasses.replace(cfg, hidden=m.hidden), {"matched_hidden": m.hidden, "matched_params": m.params,
                                                       "target_params": m.target}
