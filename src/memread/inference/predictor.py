"""A trained reader applied to new text: ``memread.load(RUN_DIR_OR_ARCHIVE)`` gives a :class:`Predictor`.

``predictor.predict(inputs)`` takes the task's natural input, raw text (whitespace-tokenized, as the
training data was read), one input or a list, and returns typed results in the same order:

=============  ==============================================  ==========================================
task           an input                                        a result
=============  ==============================================  ==========================================
lm             ``"the cat sat"`` (or ``{"text": ...}``)          :class:`TokenScores`: log p of every token
                                                               after the first, perplexity;
                                                               ``generate(prompt, steps)``: :class:`Continuation`
classify       ``"a fine film"``                                :class:`Label` and its probabilities
pair           ``{"premise": ..., "hypothesis": ...}``          :class:`Label` (NLI)
               ``{"question": ..., "answer": ...}``             :class:`Score` (answer selection)
cloze          ``{"document", "query", "candidates"}``          :class:`ClozeAnswer`: the candidate and all
                                                               candidates' probabilities
translate      ``"ein satz ."`` (or ``{"source": ...}``)         :class:`Translation` (beam search)
document       ``"text ..."`` or ``{"sentences": [...]}``        :class:`Rating`: class, rating, probabilities
=============  ==============================================  ==========================================

The record formats are :mod:`memread.data.records`' (the same that ``[data] name = "jsonl-..."`` reads);
a label in an input is not needed and is ignored. ``attention=True`` adds the model's attention trace
for each input where its reader returns one (LSTMN intra-attention, every layer's for a deep LSTMN, window
weights, NSE's reads, a pair's or document's readers, a translation's decoding, IAA glimpses, ...; the docs'
attention page lists each result's); it changes no number of the prediction.

Limits: an input is at most :data:`MAX_INPUT_CHARS` characters of text (its strings together; a 50 MB cloze
document took 14.7 GB and ended in ``std::bad_alloc``), and ``generate`` continues a prompt by at most
:data:`MAX_GENERATE` tokens; more is refused with one :class:`MemreadError` naming the input. Split a longer text
into several inputs.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Iterable

import torch

from memread.data.ptb import EOS
from memread.data.records import record_example, record_options, tokenize
from memread.data.sentence_lm import START, lines_at_eos, start_id
from memread.errors import MemreadError
from memread.training.distributed import to_device

MAX_INPUT_CHARS = 1_000_000  # characters of text in one input (a long novel); memory and time grow with it
MAX_GENERATE = 10_000  # tokens one generate() call adds (about 20 s of a small LM on a CPU core)


def input_chars(item: Any) -> int:
    """The characters of text in an input: its strings, inside records and lists too."""
    if isinstance(item, str):
        return len(item)
    if isinstance(item, dict):
        return sum(input_chars(k) + input_chars(v) for k, v in item.items())
    if isinstance(item, (list, tuple)):
        return sum(input_chars(v) for v in item)
    return 0


@dataclass
class TokenScores:
    """A language model's reading of a text: ``logprobs[i]`` is log p(``tokens[i + 1]`` | what precedes)."""

    tokens: list[str]
    # one per predicted token: every token after the first (a stream), or, for a model of sentences read alone
    # (``data.context = "sentence"``), every token but the ``<s>`` that starts each line's sentence in ``tokens``
    logprobs: list[float]
    nll: float  # mean negative log-probability per predicted token
    ppl: float
    attention: Any = None  # per segment read, its (T, S) weights over [carried slots ; segment]
    attention_layers: Any = None  # a deep LSTMN: per segment, every layer's (L, T, S), bottom first


@dataclass
class Continuation:
    prompt: list[str]
    tokens: list[str]  # the continuation, without the prompt
    logprobs: list[float]

    @property
    def text(self) -> str:
        return " ".join(self.tokens)


@dataclass
class Label:
    label: str | int
    probabilities: dict[str, float]
    attention: Any = None
    attention_layers: Any = None  # a deep LSTMN classifier: every layer's (L, T, S), bottom first


@dataclass
class Score:
    """Answer selection: the probability that ``answer`` answers ``question`` (sigmoid of the score)."""

    score: float
    probability: float
    attention: Any = None


@dataclass
class ClozeAnswer:
    answer: str
    probabilities: dict[str, float]  # over the candidates
    attention: Any = None


@dataclass
class Translation:
    source: list[str]
    tokens: list[str]
    # with attention=True: the decoding's trace (memread.decoding.translate): "source" (n, S) a row per decoded
    # word (and the </s>'s where it ended with it), "target" (n, n) for the LSTMN fusion decoders, "encoder" (S, S)
    attention: Any = None

    @property
    def text(self) -> str:
        return " ".join(self.tokens)


@dataclass
class Rating:
    label: int  # the most probable rating class (its rating value)
    rating: float  # the expected rating under the class probabilities
    probabilities: dict[str, float]
    attention: Any = None


def to_json(result: Any) -> dict:
    """A result as a JSON-ready dict (properties such as ``text`` included)."""
    out = asdict(result)
    for name in ("text",):
        if hasattr(result, name):
            out[name] = getattr(result, name)
    for name in ("attention", "attention_layers"):
        if out.get(name) is None:
            out.pop(name, None)
    return out


def _trace(attention: Any, row: int) -> Any:
    if attention is None:
        return None
    if isinstance(attention, torch.Tensor):
        return attention[row].detach().float().cpu().tolist() if attention.dim() else attention.item()
    if isinstance(attention, (list, tuple)):
        return [_trace(a, row) for a in attention]
    if isinstance(attention, dict):
        return {k: _trace(v, row) for k, v in attention.items()} or None
    return None


def _plain(trace: Any) -> Any:
    """One input's trace of tensors (no batch dimension) as nested lists of floats."""
    if isinstance(trace, torch.Tensor):
        return trace.detach().float().cpu().tolist()
    if isinstance(trace, dict):
        return {k: _plain(v) for k, v in trace.items()}
    return trace


@dataclass
class Predictor:
    """A trained model with what it needs to read raw text: its config, its task (pipeline, vocabulary)
    and the model itself (a plain ``nn.Module``, on ``device``)."""

    cfg: Any
    task: Any
    model: torch.nn.Module
    source: str = ""

    @property
    def kind(self) -> str:
        """The task shape: lm, classify, pair, cloze, translate or document."""
        return self.task.data.task

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    # ------------------------------------------------------------------ inputs
    def _record(self, item: Any, where: str) -> dict:
        if isinstance(item, dict):
            return item
        if isinstance(item, str):
            key = {"lm": "text", "classify": "text", "translate": "source", "document": "text"}.get(self.kind)
            if key is None:
                raise MemreadError(f"{where}: a {self.kind} model reads records (JSON objects), not plain strings: "
                                   f"see memread.data.records")
            return {key: item}
        raise MemreadError(f"{where}: an input must be a string or a JSON object, got {type(item).__name__}")

    def example(self, item: Any, where: str) -> Any:
        """One raw input -> the pipeline's example (one clear error naming ``where`` and the field); an input over
        :data:`MAX_INPUT_CHARS` is refused."""
        n = input_chars(item)
        if n > MAX_INPUT_CHARS:
            raise MemreadError(f"{where}: an input of {n:,} characters is over the limit of {MAX_INPUT_CHARS:,} "
                               f"(memread.inference.predictor.MAX_INPUT_CHARS); split it into smaller inputs")
        return record_example(self.task.data, self._record(item, where), where, labelled=False)

    def examples(self, inputs: Iterable[Any], where: str = "input") -> list[Any]:
        """Raw inputs -> the pipeline's examples (an error names ``where:N``, N counted from 1)."""
        return [self.example(item, f"{where}:{i + 1}") for i, item in enumerate(inputs)]

    def __post_init__(self) -> None:
        import inspect

        # worked out once, not per batch: whether the head can return attention, and the label names
        self._traces = "return_attention" in inspect.signature(self.model.forward).parameters
        self._labels = [str(x) for x in record_options(self.task.data).get("labels") or ()]

    def _forward(self, batch: dict, state: Any, attention: bool):
        if attention and self.kind == "cloze" and hasattr(self.model, "read"):
            return self._cloze_steps(batch)
        if attention and self._traces:
            return self.model(batch, state, return_attention=True)
        return self.model(batch, state)

    def _cloze_steps(self, batch: dict):
        """A cloze model's reading with its trace: the document attention, and for IAA the attention of every
        inference step, ``{"document": (B, Td), "query_steps": (B, T, Tq), "document_steps": (B, T, Td)}``."""
        from memread.heads.base import ModelOutput

        reading = self.model.read(batch, trace=True)
        iaa = reading.iaa
        if iaa is None or iaa.doc_trace is None:
            return ModelOutput(logits=reading.log_p, attention=reading.attention)
        return ModelOutput(logits=reading.log_p, attention={"document": reading.attention,
                                                            "query_steps": iaa.query_trace, "document_steps": iaa.doc_trace})

    # ------------------------------------------------------------------ predict
    @torch.no_grad()
    def predict(self, inputs: Any, batch_size: int = 32, attention: bool = False, beam: int = 5, alpha: float = 1.0,
                max_len: int = 50) -> Any:
        """Results for ``inputs`` (one input, or a list of them), in order; see the module docstring.
        ``beam``, ``alpha``, ``max_len``: translation's beam search."""
        single = isinstance(inputs, (str, dict))
        items = [inputs] if single else list(inputs)
        results = self.predict_examples(self.examples(items), batch_size, attention, beam, alpha, max_len)
        return results[0] if single else results

    @torch.no_grad()
    def predict_examples(self, examples: list[Any], batch_size: int = 32, attention: bool = False, beam: int = 5,
                         alpha: float = 1.0, max_len: int = 50) -> list[Any]:
        if batch_size < 1:
            raise MemreadError(f"batch size must be at least 1, got {batch_size}")
        self.model.eval()
        if self.kind == "lm":
            return [self._score_text(tokens, attention) for tokens in examples]
        if self.kind == "translate":
            from memread.decoding import translate

            sources = [list(e.source) for e in examples]
            if not attention:
                hyps = translate(self.model, self.task.data, sources, beam, alpha, max_len, batch_size)
                return [Translation(source=s, tokens=h) for s, h in zip(sources, hyps)]
            hyps, traces = translate(self.model, self.task.data, sources, beam, alpha, max_len, batch_size, trace=True)
            return [Translation(source=s, tokens=h, attention=_plain(t)) for s, h, t in zip(sources, hyps, traces)]
        out: list[Any] = []
        batches = self.task.data.example_batches(examples, batch_size)
        for i in range(len(batches)):
            batch = to_device(batches[i], self.device)
            result = self._forward(batch, None, attention)
            first = len(out)
            layers = result.extra.get("attention_layers") if attention else None
            for row in range(result.logits.size(0)):
                out.append(self._one(examples[first + row], result.logits[row],
                                     _trace(result.attention, row) if attention else None, _trace(layers, row)))
        return out

    def _one(self, example: Any, logits: torch.Tensor, trace: Any, layers: Any = None) -> Any:
        logits = logits.float().cpu()
        if self.kind == "cloze":  # log-probabilities over the question's candidates
            p = logits[: len(example.candidates)].exp()
            p = p / p.sum()
            probs = {c: float(v) for c, v in zip(example.candidates, p)}
            return ClozeAnswer(answer=max(probs, key=probs.get), probabilities=probs, attention=trace)
        if logits.dim() == 0 or logits.numel() == 1:  # answer selection: one relevance logit
            s = float(logits.reshape(()))
            return Score(score=s, probability=1.0 / (1.0 + math.exp(-s)), attention=trace)
        p = logits.softmax(-1)
        if self.kind == "document":
            values = list(self.task.data.class_values)
            probs = {str(int(v) if float(v).is_integer() else v): float(q) for v, q in zip(values, p)}
            best = int(p.argmax())
            return Rating(label=int(values[best]), rating=float(sum(v * float(q) for v, q in zip(values, p))),
                          probabilities=probs, attention=trace)
        names = self._labels or [str(i) for i in range(p.numel())]
        probs = {n: float(q) for n, q in zip(names, p)}
        best = int(p.argmax())
        return Label(label=names[best] if self._labels else best, probabilities=probs, attention=trace,
                     attention_layers=layers)

    # ------------------------------------------------------------------ language models
    def _read(self, tokens: list[str], attention: bool = False):
        """Every segment's output over one text, in order, with the state carried."""
        batches = self.task.data.example_batches([tokens], 1)
        continues = getattr(batches, "continues", False)  # a stream's segments; sentences are read alone
        state = None
        for i in range(len(batches)):
            batch = to_device(batches[i], self.device)
            out = self._forward(batch, state, attention)
            state = out.state if continues else None
            yield batch, out

    def _score_text(self, tokens: list[str], attention: bool) -> TokenScores:
        logps: list[float] = []
        traces, layers = [], []
        for batch, out in self._read(tokens, attention):
            lp = out.logits.float().log_softmax(-1).gather(-1, batch["target"].unsqueeze(-1)).squeeze(-1)  # (1, T)
            logps += lp[batch["mask"]].cpu().tolist()
            if attention and out.attention is not None:
                traces.append(_trace(out.attention, 0))
            if attention and out.extra.get("attention_layers") is not None:
                layers.append(_trace(out.extra["attention_layers"], 0))
        nll = -sum(logps) / max(len(logps), 1)
        if self._sentences:  # each line as it was read: <s> w_1 .. w_n <eos>
            tokens = [t for line in lines_at_eos(tokens) if line for t in (START, *line, EOS)]
        return TokenScores(tokens=list(tokens), logprobs=logps, nll=nll, ppl=math.exp(min(nll, 50.0)),
                           attention=traces or None, attention_layers=layers or None)

    @property
    def _sentences(self) -> bool:
        """A language model of sentences read alone (``data.context = "sentence"``)."""
        return getattr(self.task.data, "sentence_mode", False)

    @torch.no_grad()
    def generate(self, prompt: str | list[str], steps: int = 20, sample: bool = False, temperature: float = 1.0,
                 seed: int | None = None) -> Continuation:
        """Continue ``prompt`` by ``steps`` tokens: greedy, or sampled at ``temperature`` (``seed`` for a
        repeatable draw). A language model only; at most :data:`MAX_GENERATE` steps, and the prompt is an input
        (:data:`MAX_INPUT_CHARS`). A model of sentences read alone (``data.context = "sentence"``) reads ``<s>``
        before the prompt and stops after the ``<eos>`` that ends the sentence."""
        if self.kind != "lm":
            raise MemreadError(f"generate needs a language model; this is a {self.kind} model")
        if not 0 <= steps <= MAX_GENERATE or not 0 < temperature < math.inf:  # NaN is refused too
            raise MemreadError(f"steps must be in [0, {MAX_GENERATE}] and temperature a number > 0, got {steps} and "
                               f"{temperature}")
        if input_chars(prompt) > MAX_INPUT_CHARS:
            raise MemreadError(f"a prompt of {input_chars(prompt):,} characters is over the limit of "
                               f"{MAX_INPUT_CHARS:,} (memread.inference.predictor.MAX_INPUT_CHARS)")
        self.model.eval()
        words = tokenize(prompt, record_options(self.task.data)["lowercase"]) if isinstance(prompt, str) else list(prompt)
        if not words:
            raise MemreadError("generate needs a prompt of at least one token")
        vocab = self.task.vocab
        g = torch.Generator().manual_seed(seed) if seed is not None else None
        # read the prompt but its last token in one segment; then feed one token at a time, carrying the state
        state, out_tokens, out_logps = None, [], []
        ids = ([start_id(vocab)] if self._sentences else []) + vocab.encode(words)

        def read(inp: list[int], state):
            n = len(inp)
            batch = {"input": torch.tensor([inp], device=self.device),
                     "target": torch.zeros(1, n, dtype=torch.long, device=self.device),
                     "mask": torch.ones(1, n, dtype=torch.bool, device=self.device)}
            return self.model(batch, state)

        if len(ids) > 1:
            state = read(ids[:-1], None).state
        x = ids[-1]
        for _ in range(steps):
            out = read([x], state)
            state = out.state
            logp = out.logits[0, -1].float().log_softmax(-1).cpu()
            if vocab.pad_id is not None:
                logp[vocab.pad_id] = -math.inf
            if self._sentences:  # never a target
                logp[start_id(vocab)] = -math.inf
            if sample:
                x = int(torch.multinomial((logp / temperature).softmax(-1), 1, generator=g))
            else:
                x = int(logp.argmax())
            out_tokens.append(vocab.itos[x])
            out_logps.append(float(logp[x]))
            if self._sentences and vocab.itos[x] == EOS:  # the sentence has ended: the model knows nothing after
                break
        return Continuation(prompt=words, tokens=out_tokens, logprobs=out_logps)


def load(path: str | Path, data_root: str | Path | None = None, device: str = "cpu", checkpoint: str = "best") -> Predictor:
    """A trained run directory (its ``checkpoint_best.pt``, or ``checkpoint`` = "last") or a model archive
    (``memread export``), ready to ``predict``. The data root is only read for what the model needs beyond
    its own files (nothing, for the shipped tasks); by default ``$MEMREAD_DATA``, else the one the run was
    trained with (:func:`memread.data.root.data_root`)."""
    from memread.data.root import data_root as default_root
    from memread.experiment import load_trained

    path = Path(path)
    root = Path(data_root) if data_root is not None else default_root(run=path)
    cfg, task, model = load_trained(path, root, checkpoint, device)
    return Predictor(cfg=cfg, task=task, model=model, source=str(path))
