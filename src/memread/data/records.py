"""Your own data: one plain format per task shape, and one record -> one example of that shape.

The ``[data]`` datasets below read these formats (paths relative to the data root, or absolute; a
``.gz`` beside a missing plain file is read instead), and ``memread predict`` reads the same records,
one JSON object per line, through the same functions: one parser for both.

**Tokens.** Every text is split on whitespace and nothing else (punctuation stays on its word: tokenize
your text beforehand as you want it read); with ``lowercase = true`` every word is lowercased.

``text`` (task ``lm``)
    Plain UTF-8 text, one sentence per line; each line's words are followed by ``<eos>`` (as PTB is
    read), blank lines are skipped. ``documents = true``: blank lines separate documents, and the reader
    resets at the start of each (as WikiText's articles are read). A record is ``{"text": "..."}``, its
    lines read the same way (:func:`lm_tokens`).
``jsonl-classify`` (task ``classify``)
    ``{"text": "a sentence", "label": 3}``: ``label`` an int in ``[0, classes)`` or a string of the
    config's ``labels = [...]`` (:func:`classify_example`).
``jsonl-pair`` (task ``pair``)
    ``kind = "classify"``: ``{"premise": "...", "hypothesis": "...", "label": "entailment"}`` (label as
    for jsonl-classify); ``kind = "rank"`` (answer selection, criterion ``answer_selection``):
    ``{"question": "...", "answer": "...", "label": 0 | 1, "qid": "q7"}``, the candidates of one
    question sharing its ``qid`` and ranked together (MAP, MRR) (:func:`pair_example`).
``jsonl-cloze`` (task ``cloze``)
    ``{"document": "...", "query": "... XXXXX ...", "candidates": ["a", "b"], "answer": "a"}``: the
    query holds the placeholder token (``placeholder``, default ``XXXXX``) exactly once; every
    candidate is one word, each listed once; the answer is one of them and occurs in the document (a
    pointer cannot answer otherwise). ``document`` may also be a list of sentences (:func:`cloze_example`).
``jsonl-document`` (task ``document``)
    ``{"sentences": ["first sentence .", "second one ."], "label": 7}`` or ``{"text": "...", "label": 7}``
    (``text`` split into sentences after every word ending in ``.``, ``!`` or ``?``; an empty sentence of
    ``sentences`` is refused); ``label`` is a rating value from the config's ``ratings = [...]`` (one class
    each) (:func:`document_example`).
``parallel`` (task ``translate``)
    Two line-aligned files ``<prefix>.<source>`` and ``<prefix>.<target>`` (``train = "data/train"``,
    ``source = "src"``, ``target = "tgt"``: ``data/train.src``, ``data/train.tgt``), one sentence per
    line, line N of each a pair; a literal ``<eos>``, ``<s>``, ``</s>`` or ``<pad>`` is refused (memread
    marks sentence starts and ends itself). A record is ``{"source": "...", "target": "..."}``
    (:func:`translation_example`).

Blank lines of a JSON-lines file are skipped and fields a format does not name are ignored (keep an
``"id"`` beside the text if you like). Every malformed input is one :class:`MemreadError` naming
``file:line`` (``where``) and the field: ``data/train.jsonl:17: field 'label' is missing``.

**Prediction.** Each ``*_example`` function takes ``labelled``: with ``labelled=False`` the label may be
left out and a dummy one stands in (``label`` 0, the first candidate, the first rating, an empty
target); one that is given is still checked. :func:`record_example` turns a record into an example of
a built pipeline's task with the options of its ``[data]`` config (the benchmark datasets' too), and
every pipeline's ``example_batches(examples, batch_size)`` batches such examples in the given order.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Iterator, Sequence, TypeVar

from memread.data.cbt import BLANK, ClozeExample
from memread.data.documents import Document
from memread.data.iwslt import TranslationPair
from memread.data.ptb import EOS
from memread.data.snli import SNLI_LABELS, PairExample
from memread.data.sst import SentimentExample
from memread.data.text import read_jsonl, read_lines  # noqa: F401 (read_jsonl: re-exported)
from memread.errors import MemreadError

T = TypeVar("T")
SENTENCE_END = (".", "!", "?")


# ----------------------------------------------------------------------------- files


def data_file(root: Path, value: str, key: str, dataset: str) -> Path:
    """``data.<key>`` (relative to the data root, or absolute): the file, or its ``.gz``; one clear error
    naming the path when neither exists, or when the key is empty."""
    if not value:
        raise MemreadError(f"key 'data.{key}' is empty; [data] name = {dataset!r} needs it "
                           f"(a file path relative to the data root, or absolute)")
    path = Path(value).expanduser()
    path = path if path.is_absolute() else Path(root) / path
    for candidate in (path, path.with_name(path.name + ".gz")):
        if candidate.is_file():
            return candidate
    raise MemreadError(f"data.{key} not found: expected {path} (or {path.name}.gz); relative paths are read under "
                       f"the data root {root} (--data-root or MEMREAD_DATA)")


def read_records(path: Path, parse: Callable[[dict, str], T]) -> list[T]:
    """Every record of a JSON-lines file through ``parse(record, where)``; an empty file is an error."""
    out = [parse(record, where) for where, record in read_jsonl(path)]
    if not out:
        raise MemreadError(f"{path}: empty file (no JSON records)")
    return out


def read_text(path: Path, lowercase: bool = False) -> list[list[str]]:
    """A plain-text file as documents (runs of non-blank lines), each line's words followed by ``<eos>``."""
    documents: list[list[str]] = []
    current: list[str] = []
    for lineno, line in read_lines(path):
        if not line.strip():
            if current:
                documents.append(current)
                current = []
            continue
        current.extend(line_tokens(line, f"{path}:{lineno}", lowercase))
    if current:
        documents.append(current)
    if not documents:
        raise MemreadError(f"{path}: empty file (no words)")
    return documents


def read_parallel(source: Path, target: Path, lowercase: bool = False) -> list[TranslationPair]:
    """Line-aligned files: line N of ``source`` and line N of ``target`` are pair N."""
    src, tgt = list(read_lines(source)), list(read_lines(target))
    if len(src) != len(tgt):
        raise MemreadError(f"the parallel files are not line-aligned: {source} has {len(src):,} lines, "
                           f"{target} has {len(tgt):,} lines (line N of each is a pair)")
    if not src:
        raise MemreadError(f"{source}: empty file (no sentences)")
    pairs = []
    for (lineno, s), (_, t) in zip(src, tgt):
        for path, line in ((source, s), (target, t)):
            if not line.strip():
                raise MemreadError(f"{path}:{lineno}: empty line (line {lineno} of {source.name} and {target.name} is a pair)")
            _no_marker(tokenize(line, lowercase), f"{path}:{lineno}", "the line holds")
        pair = translation_example({"source": s, "target": t}, f"{source}:{lineno}", lowercase=lowercase)
        pairs.append(TranslationPair(pair.source, pair.target, lineno))
    return pairs


# ----------------------------------------------------------------------------- fields


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _field(record: dict, name: str, where: str) -> Any:
    if not isinstance(record, dict):
        raise MemreadError(f"{where}: expected a JSON object {{...}}, got {type(record).__name__}")
    if name not in record:
        raise MemreadError(f"{where}: field '{name}' is missing")
    return record[name]


def tokenize(text: str, lowercase: bool = False) -> list[str]:
    """The one tokenizer of your own data: whitespace, lowercased when asked."""
    return [w.lower() for w in text.split()] if lowercase else text.split()


def _words(value: Any, where: str, field: str, lowercase: bool) -> list[str]:
    if not isinstance(value, str):
        raise MemreadError(f"{where}: field '{field}' must be a string, got {_show(value)}")
    words = tokenize(value, lowercase)
    if not words:
        raise MemreadError(f"{where}: field '{field}' is empty (no words)")
    return words


def line_tokens(line: str, where: str, lowercase: bool = False, field: str | None = None) -> list[str]:
    """One line of text: its words, then ``<eos>`` (a literal ``<eos>`` inside the line is refused)."""
    words = tokenize(line, lowercase)
    if EOS in words:
        what = f"field '{field}' holds" if field else "the line holds"
        raise MemreadError(f"{where}: {what} a literal {EOS}; memread appends it after every line")
    return [*words, EOS]


def class_label(value: Any, where: str, labels: Sequence[str] = (), classes: int = 0, field: str = "label") -> int:
    """An int in ``[0, classes)`` (``classes`` 0: ``len(labels)``) or one of the ``labels`` names -> class index."""
    n = classes or len(labels)
    if isinstance(value, str) and labels:
        if value not in labels:
            raise MemreadError(f"{where}: field '{field}': {_show(value)} is not one of {list(labels)}")
        return list(labels).index(value)
    if isinstance(value, int) and not isinstance(value, bool):
        if not 0 <= value < n:
            raise MemreadError(f"{where}: field '{field}' = {value} is outside [0, {n}) (one class index per class)")
        return value
    names = f" or one of {list(labels)}" if labels else ""
    raise MemreadError(f"{where}: field '{field}' must be an int in [0, {n}){names}, got {_show(value)}")


# ----------------------------------------------------------------------------- one record per task shape


def lm_tokens(record: dict, where: str, *, lowercase: bool = False, labelled: bool = True) -> list[str]:
    """``{"text": "..."}`` -> the tokens of its lines, ``<eos>`` after each (blank lines skipped), as the
    ``text`` dataset reads a file (``labelled`` is unused: a text is its own target)."""
    text = _field(record, "text", where)
    _words(text, where, "text", False)  # a string with words
    return [t for line in text.splitlines() if line.strip() for t in line_tokens(line, where, lowercase, "text")]


def classify_example(record: dict, where: str, *, labels: Sequence[str] = (), classes: int = 0,
                     lowercase: bool = False, labelled: bool = True) -> SentimentExample:
    """``{"text": "...", "label": 3 | "name"}`` -> :class:`SentimentExample`."""
    tokens = _words(_field(record, "text", where), where, "text", lowercase)
    return SentimentExample(tuple(tokens), _label(record, where, labelled, lambda v: class_label(v, where, labels, classes)))


def _label(record: dict, where: str, labelled: bool, parse: Callable[[Any], Any], dummy: Any = 0, field: str = "label") -> Any:
    if field not in record and not labelled:
        return dummy
    return parse(_field(record, field, where))


def pair_example(record: dict, where: str, *, kind: str = "classify", labels: Sequence[str] = (), classes: int = 0,
                 lowercase: bool = False, labelled: bool = True) -> PairExample:
    """``kind = "classify"``: ``{"premise", "hypothesis", "label"}`` -> (premise, hypothesis, class);
    ``kind = "rank"``: ``{"question", "answer", "label": 0|1, "qid"}`` -> (answer, question, label) with
    its ``qid`` (the answer first, as WikiQA's pairs are read)."""
    if kind == "classify":
        first = _words(_field(record, "premise", where), where, "premise", lowercase)
        second = _words(_field(record, "hypothesis", where), where, "hypothesis", lowercase)
        return PairExample(tuple(first), tuple(second), _label(record, where, labelled,
                                                               lambda v: class_label(v, where, labels, classes)))
    if kind != "rank":
        raise ValueError(f"kind must be 'classify' or 'rank', got {kind!r}")
    question = _words(_field(record, "question", where), where, "question", lowercase)
    answer = _words(_field(record, "answer", where), where, "answer", lowercase)

    def relevance(v: Any) -> int:
        if isinstance(v, bool) or v not in (0, 1):
            raise MemreadError(f"{where}: field 'label' must be 0 or 1 (is the answer right), got {_show(v)}")
        return int(v)

    def qid(v: Any) -> str:
        if isinstance(v, bool) or not isinstance(v, (str, int)) or str(v) == "":
            raise MemreadError(f"{where}: field 'qid' must be a non-empty string or an int, got {_show(v)}")
        return str(v)

    return PairExample(tuple(answer), tuple(question), _label(record, where, labelled, relevance),
                       qid=_label(record, where, labelled, qid, dummy="", field="qid"))


def cloze_example(record: dict, where: str, *, placeholder: str = BLANK, lowercase: bool = False,
                  labelled: bool = True) -> ClozeExample:
    """``{"document", "query", "candidates", "answer"}`` -> :class:`ClozeExample`; the placeholder tokens of
    the query become ``XXXXX`` (:data:`memread.data.cbt.BLANK`), whatever the placeholder."""
    document = _field(record, "document", where)
    if isinstance(document, list) and document:
        context = [_words(s, where, f"document[{i}]", lowercase) for i, s in enumerate(document)]
    elif isinstance(document, list):
        raise MemreadError(f"{where}: field 'document' is empty (no words)")
    else:
        context = [_words(document, where, "document", lowercase)]
    raw_query = _words(_field(record, "query", where), where, "query", False)
    if placeholder not in raw_query:
        raise MemreadError(f"{where}: field 'query' has no placeholder {placeholder!r} (a whitespace-separated word)")
    if raw_query.count(placeholder) > 1:
        raise MemreadError(f"{where}: field 'query' holds the placeholder {placeholder!r} {raw_query.count(placeholder)} "
                           f"times; a question has one blank (write one question per blank)")
    query = [BLANK if w == placeholder else (w.lower() if lowercase else w) for w in raw_query]
    candidates = _field(record, "candidates", where)
    if not isinstance(candidates, list) or not candidates:
        raise MemreadError(f"{where}: field 'candidates' must be a non-empty list of words, got {_show(candidates)}")
    words = []
    for i, c in enumerate(candidates):
        w = _words(c, where, f"candidates[{i}]", lowercase)
        if len(w) != 1:
            raise MemreadError(f"{where}: field 'candidates[{i}]' must be one word, got {_show(c)}")
        if w[0] in words:
            raise MemreadError(f"{where}: field 'candidates' holds {w[0]!r} twice (candidates[{words.index(w[0])}] and "
                               f"candidates[{i}]); list each candidate once")
        words.append(w[0])

    def answer(v: Any) -> str:
        a = _words(v, where, "answer", lowercase)
        if len(a) != 1 or a[0] not in words:
            raise MemreadError(f"{where}: field 'answer': {_show(v)} is not one of the candidates {words}")
        if not any(a[0] in sentence for sentence in context):
            raise MemreadError(f"{where}: field 'answer': {a[0]!r} never occurs in the document, so no reader can point "
                               f"at it (its loss would be constant, with no gradient); put it in the document or "
                               f"leave the question out")
        return a[0]

    return ClozeExample(context, query, _label(record, where, labelled, answer, dummy=words[0], field="answer"), words)


def document_example(record: dict, where: str, *, ratings: Sequence[int] = (), lowercase: bool = False,
                     labelled: bool = True) -> Document:
    """``{"sentences": [...], "label": 7}`` or ``{"text": "...", "label": 7}`` -> :class:`Document` (``id`` =
    ``where``); ``label`` a rating value, one of ``ratings`` when they are given."""
    if not isinstance(record, dict):
        raise MemreadError(f"{where}: expected a JSON object {{...}}, got {type(record).__name__}")
    if "sentences" in record and "text" in record:
        raise MemreadError(f"{where}: fields 'sentences' and 'text' are both given; a document is one of them")
    if "text" in record:
        sentences, current = [], []
        for w in _words(record["text"], where, "text", lowercase):
            current.append(w)
            if w.endswith(SENTENCE_END):
                sentences.append(tuple(current))
                current = []
        if current:
            sentences.append(tuple(current))
    elif "sentences" in record:
        value = record["sentences"]
        if not isinstance(value, list) or not all(isinstance(s, str) for s in value):
            raise MemreadError(f"{where}: field 'sentences' must be a list of strings, got {_show(value)}")
        sentences = [tuple(tokenize(s, lowercase)) for s in value]
        if not any(sentences):
            raise MemreadError(f"{where}: field 'sentences' is empty (no words)")
        if not all(sentences):  # as jsonl-classify refuses an empty text: never dropped without a word
            raise MemreadError(f"{where}: field 'sentences[{sentences.index(())}]' is empty (no words); remove it "
                               f"or give it its words")
    else:
        raise MemreadError(f"{where}: field 'sentences' (or 'text') is missing")

    def rating(v: Any) -> int:
        if isinstance(v, bool) or not isinstance(v, int):
            raise MemreadError(f"{where}: field 'label' must be an int (a rating value), got {_show(v)}")
        if ratings and v not in ratings:
            raise MemreadError(f"{where}: field 'label' = {v} is not one of the ratings {list(ratings)}")
        return v

    dummy = ratings[0] if ratings else 0
    return Document(where, tuple(sentences), _label(record, where, labelled, rating, dummy=dummy))


# what memread puts around a sentence itself, never a word of one: the translation pipeline's <s>, </s> and
# padding, and the <eos> that text files and predictions refuse alike
PAIR_MARKERS = (EOS, "<s>", "</s>", "<pad>")


def _no_marker(words: list[str], where: str, what: str) -> list[str]:
    for w in words:
        if w in PAIR_MARKERS:
            raise MemreadError(f"{where}: {what} a literal {w}; memread marks where a sentence starts and ends "
                               f"itself: remove it")
    return words


def translation_example(record: dict, where: str, *, lowercase: bool = False, labelled: bool = True) -> TranslationPair:
    """``{"source": "...", "target": "..."}`` -> :class:`TranslationPair` (unlabelled: an empty target); a
    literal ``<eos>``, ``<s>``, ``</s>`` or ``<pad>`` in either is refused (:data:`PAIR_MARKERS`)."""
    source = _no_marker(_words(_field(record, "source", where), where, "source", lowercase), where, "field 'source' holds")
    target = _label(record, where, labelled,
                    lambda v: _no_marker(_words(v, where, "target", lowercase), where, "field 'target' holds"),
                    dummy=[], field="target")
    return TranslationPair(tuple(source), tuple(target), 0)


RECORDS: dict[str, Callable[..., Any]] = {
    "lm": lm_tokens, "classify": classify_example, "pair": pair_example, "cloze": cloze_example,
    "document": document_example, "translate": translation_example}


def record_options(pipeline: Any) -> dict[str, Any]:
    """The keyword options of ``RECORDS[pipeline.task]`` that a built pipeline's ``[data]`` config implies
    (its ``lowercase``, labels, ``placeholder``, ratings; benchmark datasets' too: SNLI's label names,
    WikiQA's ranking, a Tang or aclImdb run's ratings)."""
    cfg, task = pipeline.cfg, pipeline.task
    options: dict[str, Any] = {"lowercase": bool(getattr(cfg, "lowercase", False))}
    if task == "classify":
        options.update(labels=tuple(getattr(cfg, "labels", ())), classes=pipeline.outputs)
    elif task == "pair":
        rank = pipeline.outputs == 1
        labels = tuple(getattr(cfg, "labels", ())) or (SNLI_LABELS if cfg.name == "snli" else ())
        options.update(kind="rank" if rank else "classify", labels=() if rank else labels,
                       classes=0 if rank else pipeline.outputs)
    elif task == "cloze":
        options["placeholder"] = getattr(cfg, "placeholder", BLANK)
    elif task == "document":
        options["ratings"] = tuple(pipeline.ratings)
    return options


def record_example(pipeline: Any, record: dict, where: str, labelled: bool = True) -> Any:
    """One record (a dict, as parsed from a JSON line) -> the example type of ``pipeline``'s task, ready
    for ``pipeline.example_batches``: token lists (lm), SentimentExample (classify), PairExample (pair),
    ClozeExample (cloze), Document (document), TranslationPair (translate)."""
    if pipeline.task not in RECORDS:
        raise MemreadError(f"no record format for task {pipeline.task!r}")
    return RECORDS[pipeline.task](record, where, labelled=labelled, **record_options(pipeline))
