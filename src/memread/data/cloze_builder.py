"""Cloze questions from raw books, following the Children's Book Test recipe (Hill et al. 2015).

Every window of 21 consecutive sentences of a book gives at most one question per word class: the
first 20 sentences are the context, and in the 21st one word of the class is replaced by ``XXXXX``;
the candidates are the answer and 9 other words of the same class drawn from the context, listed
in sorted order as in CBT. The answer must occur in the context (so a pointer can find it) and only
once in the query (so the query does not give it away); windows without such a word, or with fewer
than 9 other words of the class in their context, give no question.

Word classes without a part-of-speech tagger:

- ``P`` (prepositions): a closed list of English prepositions and subordinating conjunctions, the
  words the Penn tag IN covers (:data:`PREPOSITIONS`; ambiguous particles such as "up", "out", "off",
  "down" and the determiner "that" are left out). Only the lower-case forms count.
- ``NE`` (named entities): a capitalisation rule, per book. A capitalised word (first letter upper
  case, not all upper case, not "I") is a name when it is capitalised at least twice where
  capitals are not forced (not first in a sentence, a line of verse, or after an opening quote,
  bracket or dash) and its lower-case form is at most a tenth as frequent; honorifics such as "Mr"
  and contractions of "I" are left out (:data:`TITLES`).

``CN`` (common nouns) and ``V`` (verbs) need a tagger: pass ``tagger`` (sentence tokens -> Penn
tags); :func:`spacy_tagger` wraps spaCy, an optional dependency (``pip install spacy`` and its
``en_core_web_sm`` model). With a tagger every class comes from the tags: NE = NNP/NNPS,
CN = NN/NNS, V = VB*, P = IN, as CBT built them with the Stanford tagger.

Input books are raw text (plain or ``.gz``; paragraphs separated by blank lines, as the Project
Gutenberg files) or CBT's raw-book files (``cbt_train.txt``: ``_BOOK_TITLE_ : name`` lines, then one
tokenised sentence per line).
"""

from __future__ import annotations

import gzip
import json
import random
import re
import zlib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from memread.data.cbt import BLANK, BOOK_TITLE, ClozeExample, write_cbt
from memread.errors import MemreadError

CLASSES = ("NE", "CN", "V", "P")
CONTEXT_SENTENCES = 20
CANDIDATES = 10

PREPOSITIONS = frozenset(
    "aboard about above across after against along amid amidst among amongst around as at before behind "
    "below beneath beside besides between betwixt beyond by despite during except for from if in inside "
    "into like near of on onto outside over past since than through throughout till toward towards under "
    "underneath unless until unto upon whether while whilst with within without though although because "
    "ere".split()
)
TITLES = frozenset("Mr Mrs Miss Ms Mr. Mrs. Dr Dr. St St. Sir Madam Lady Lord Messrs Capt Col Rev".split())
ABBREVIATIONS = frozenset("Mr Mrs Ms Dr St Messrs Capt Col Rev Gen Lieut Sgt Prof Jr Sr vs etc".split())
OPENERS = frozenset(["``", "`", "'", "(", "[", "{", "--", "-LRB-", "-LCB-", "-LSB-"])
CLOSERS = frozenset(["''", "'", ")", "]", "}", "-RRB-", "-RCB-", "-RSB-"])
ENDERS = frozenset([".", "!", "?"])

Tagger = Callable[[list[str]], list[str]]

_TOKEN = re.compile(r"[A-Za-z0-9]+(?:['’-][A-Za-z0-9]+)*|-{2,}|\.{2,}|[^\sA-Za-z0-9_]")


@dataclass
class Book:
    """A book as sentences of tokens; ``forced[s][i]``: is token i of sentence s capitalised by
    position (sentence or line start, after an opening quote) rather than by being a name?"""

    name: str
    sentences: list[list[str]] = field(default_factory=list)
    forced: list[list[bool]] = field(default_factory=list)

    @property
    def words(self) -> int:
        return sum(len(s) for s in self.sentences)


# ----------------------------------------------------------------------------- reading books


def _split_sentences(tokens: list[str], forced: list[bool], book: Book) -> None:
    """Cut one paragraph's tokens into sentences and append them to ``book``."""
    start = 0
    n = len(tokens)
    i = 0
    while i < n:
        tok = tokens[i]
        if tok in ENDERS or tok.startswith(".."):
            j = i + 1
            while j < n and tokens[j] in CLOSERS:
                j += 1
            if j >= n or tokens[j][:1].isupper() or tokens[j] in OPENERS:
                book.sentences.append(tokens[start:j])
                book.forced.append([True] + forced[start + 1 : j])
                start = j
            i = j
            continue
        i += 1
    if start < n:
        book.sentences.append(tokens[start:])
        book.forced.append([True] + forced[start + 1 :])


def tokenize_book(lines: list[str], name: str) -> Book:
    """Raw prose or verse -> sentences of tokens (paragraphs end at blank lines)."""
    book = Book(name)
    tokens: list[str] = []
    forced: list[bool] = []
    quote_open = False
    for line in lines + [""]:
        if not line.strip():
            if tokens:
                _split_sentences(tokens, forced, book)
            tokens, forced, quote_open = [], [], False
            continue
        words = _TOKEN.findall(line.replace("_", " "))
        for k, w in enumerate(words):
            if w == '"':  # straight double quotes alternate within a paragraph: `` opens, '' closes
                w = "''" if quote_open else "``"
                quote_open = not quote_open
            elif w == "." and tokens and not forced_period(tokens[-1]):
                tokens[-1] += "."  # "Mr." and initials such as "G." are one token
                continue
            forced.append(k == 0 or (bool(tokens) and (tokens[-1] in OPENERS or tokens[-1] in ENDERS)))
            tokens.append(w)
    return book


def forced_period(previous: str) -> bool:
    """Does a "." after ``previous`` stand alone (end a sentence) rather than finish an abbreviation?"""
    return not (previous in ABBREVIATIONS or (len(previous) == 1 and previous.isupper()))


def _book_lines(path: Path) -> list[str]:
    """Lines of a book file; lines that are not UTF-8 are read as Latin-1 (old Gutenberg etexts)."""
    path = Path(path)
    if not path.is_file():
        raise MemreadError(f"{path}: book file not found")
    try:
        raw = gzip.open(path, "rb").read() if path.suffix == ".gz" else path.read_bytes()
    except (gzip.BadGzipFile, EOFError, zlib.error) as e:
        raise MemreadError(f"{path}: not a readable gzip file ({e})") from None
    if b"\x00" in raw:
        raise MemreadError(f"{path}: NUL byte in a text file (is this a binary file?)")
    lines = []
    for line in raw.split(b"\n"):
        try:
            lines.append(line.decode("utf-8").rstrip("\r"))
        except UnicodeDecodeError:
            lines.append(line.decode("latin-1").rstrip("\r"))
    return lines


def read_books(path: Path) -> list[Book]:
    """One raw-text book (named after its file), or every book of a CBT raw-book file."""
    path = Path(path)
    lines = _book_lines(path)
    if lines and lines[0].startswith(BOOK_TITLE):
        books: list[Book] = []
        for line in lines:
            if line.startswith(BOOK_TITLE):
                books.append(Book(line.partition(":")[2].strip()))
            elif line.strip():
                toks = line.split()
                books[-1].sentences.append(toks)
                books[-1].forced.append([k == 0 or toks[k - 1] in OPENERS for k in range(len(toks))])
        return books
    name = path.name
    for suffix in (".gz", ".txt"):
        name = name.removesuffix(suffix)
    book = tokenize_book(lines, name)
    if not book.sentences:
        raise MemreadError(f"{path}: no text")
    return [book]


# ----------------------------------------------------------------------------- word classes


def names_of(book: Book) -> set[str]:
    """The capitalisation rule for named entities (see the module docstring)."""
    free_caps: Counter = Counter()
    lower: Counter = Counter()
    for sentence, forced in zip(book.sentences, book.forced):
        for w, f in zip(sentence, forced):
            if w[:1].islower():
                lower[w] += 1
            elif w[:1].isupper() and not f:
                free_caps[w] += 1
    return {
        w for w, c in free_caps.items()
        if c >= 2 and any(ch.islower() for ch in w) and w not in TITLES and lower[w.lower()] * 10 <= c
        and re.split(r"['’]", w)[0] != "I"  # I'm, I'll, I've
        and w.replace("'", "").replace("-", "").replace("’", "").isalpha()
    }


def _tag_class(tag: str) -> str:
    if tag in ("NNP", "NNPS"):
        return "NE"
    if tag in ("NN", "NNS"):
        return "CN"
    if tag.startswith("VB"):
        return "V"
    if tag == "IN":
        return "P"
    return ""


def token_classes(book: Book, word_class: str, tagger: Tagger | None = None) -> list[list[bool]]:
    """For every token of ``book``: is it a word of ``word_class``?"""
    if word_class not in CLASSES:
        raise MemreadError(f"unknown word class {word_class!r}; expected one of {', '.join(CLASSES)}")
    if tagger is not None:
        out = []
        for sentence in book.sentences:
            tags = tagger(sentence)
            if len(tags) != len(sentence):
                raise MemreadError(f"tagger returned {len(tags)} tags for a sentence of {len(sentence)} tokens")
            out.append([_tag_class(t) == word_class and w.replace("-", "").replace("'", "").isalpha()
                        for w, t in zip(sentence, tags)])
        return out
    if word_class == "P":
        return [[w in PREPOSITIONS for w in s] for s in book.sentences]
    if word_class == "NE":
        names = names_of(book)
        return [[w in names for w in s] for s in book.sentences]
    raise MemreadError(f"word class {word_class} needs a part-of-speech tagger (NE and P are built without one); "
                       "pass --tagger spacy (pip install spacy, then its en_core_web_sm model)")


def spacy_tagger(model: str = "en_core_web_sm") -> Tagger:
    """Penn tags from spaCy for pre-tokenised sentences (optional dependency)."""
    try:
        import spacy
        from spacy.tokens import Doc
    except ImportError:
        raise MemreadError("--tagger spacy needs spaCy: pip install spacy, then its en_core_web_sm model") from None
    try:
        nlp = spacy.load(model, disable=["parser", "ner", "lemmatizer"])
    except OSError:
        raise MemreadError(f"spaCy model {model!r} is not installed (python -m spacy download {model})") from None

    def tag(words: list[str]) -> list[str]:
        doc = Doc(nlp.vocab, words=words)
        for _, proc in nlp.pipeline:
            doc = proc(doc)
        return [t.tag_ for t in doc]

    return tag


# ----------------------------------------------------------------------------- questions


def book_questions(book: Book, word_class: str, seed: int = 0, stride: int = 1,
                   tagger: Tagger | None = None) -> list[ClozeExample]:
    """The CBT recipe over every ``stride``-th 21-sentence window of one book."""
    member = token_classes(book, word_class, tagger)
    rng = random.Random(zlib.crc32(f"{seed}/{word_class}/{book.name}".encode()))
    out: list[ClozeExample] = []
    for start in range(0, len(book.sentences) - CONTEXT_SENTENCES, stride):
        q = start + CONTEXT_SENTENCES
        context = book.sentences[start:q]
        in_context: set[str] = set()
        for s in range(start, q):
            in_context.update(w for w, m in zip(book.sentences[s], member[s]) if m)
        query = book.sentences[q]
        counts = Counter(query)
        options = [i for i, (w, m) in enumerate(zip(query, member[q])) if m and counts[w] == 1 and w in in_context]
        if not options or len(in_context) < CANDIDATES:
            continue
        i = rng.choice(options)
        answer = query[i]
        others = rng.sample(sorted(in_context - {answer}), CANDIDATES - 1)
        out.append(ClozeExample(
            context=[list(s) for s in context],
            query=query[:i] + [BLANK] + query[i + 1 :],
            answer=answer,
            candidates=sorted([answer, *others]),
            source=book.name,
        ))
    return out


def split_books(books: list[Book], valid: list[str], test: list[str]) -> dict[str, list[Book]]:
    """Train / valid / test by book name; no book is in two splits."""
    names = [b.name for b in books]
    if len(set(names)) != len(names):
        dup = sorted(n for n, c in Counter(names).items() if c > 1)
        raise MemreadError(f"two books have the same name: {', '.join(dup)}")
    for label, wanted in (("valid", valid), ("test", test)):
        missing = [w for w in wanted if w not in names]
        if missing:
            raise MemreadError(f"{label} book(s) {', '.join(missing)} not among the books ({', '.join(names)})")
    both = set(valid) & set(test)
    if both:
        raise MemreadError(f"book(s) {', '.join(sorted(both))} are in both valid and test")
    held_out = set(valid) | set(test)
    return {
        "train": [b for b in books if b.name not in held_out],
        "valid": [b for b in books if b.name in valid],
        "test": [b for b in books if b.name in test],
    }


def build_cloze(paths: list[Path], word_class: str, valid: list[str], test: list[str], seed: int = 0,
                stride: int = 1, tagger: Tagger | None = None) -> dict[str, list[ClozeExample]]:
    """Cloze questions of one word class from book files, split by book."""
    books = [b for p in paths for b in read_books(p)]
    splits = split_books(books, valid, test)
    return {split: [ex for b in bs for ex in book_questions(b, word_class, seed, stride, tagger)]
            for split, bs in splits.items()}


def write_cloze(paths: list[Path], out: Path, classes: list[str], valid: list[str], test: list[str],
                seed: int = 0, stride: int = 1, tagger: Tagger | None = None) -> dict:
    """``out/cloze_{class}_{split}.txt`` in CBT format, and ``out/manifest.json`` saying how."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    books = [b for p in paths for b in read_books(p)]
    splits = split_books(books, valid, test)
    manifest: dict = {
        "recipe": "CBT (Hill et al. 2015): 20 context sentences, the 21st with one word removed, 10 candidates",
        "seed": seed, "stride": stride, "tagger": tagger is not None,
        "books": {split: {b.name: {"sentences": len(b.sentences), "words": b.words} for b in bs}
                  for split, bs in splits.items()},
        "questions": {},
    }
    for word_class in classes:
        manifest["questions"][word_class] = {}
        for split, bs in splits.items():
            examples = [ex for b in bs for ex in book_questions(b, word_class, seed, stride, tagger)]
            if not examples:
                raise MemreadError(f"no {word_class} questions in the {split} books ({', '.join(b.name for b in bs)})")
            write_cbt(examples, out / f"cloze_{word_class}_{split}.txt")
            manifest["questions"][word_class][split] = len(examples)
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return manifest
