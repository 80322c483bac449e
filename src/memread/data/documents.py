"""Rated documents split into sentences: the files of Tang et al. (2015) and the aclImdb archive.

**Tang et al. 2015** (Yelp 2013/2014 and IMDB, the pre-split sets the NSE paper uses, e.g.
``yelp-2013-seg-20-20.train.ss``): one document per line, four fields separated by *two* tabs::

    user_id \\t\\t product_id \\t\\t rating \\t\\t text

``rating`` is an integer from 1 (Yelp: 1-5, IMDB: 1-10); ``text`` is already tokenised and lowercased,
its sentences separated by the token ``<sssss>``. :func:`read_tang` reads it (plain or ``.gz``); a
malformed line is a :class:`MemreadError` naming ``file:line``.

**aclImdb** (Maas et al. 2011; ``aclImdb_v1_train_test.tar.gz``): members
``aclImdb/{train,test}/{pos,neg}/<id>_<rating>.txt``, one raw review each, ratings 1-4 (neg) and 7-10
(pos). :func:`read_acl_imdb` streams the archive once (nothing is extracted to disk), turns
``<br />`` into paragraph breaks, splits sentences and tokenises (:func:`split_document`), and keeps
the result for the rest of the process (the corpus takes seconds to parse; see ``parse_seconds``).

**Sentences and tokens** (:func:`split_document`), deterministic and simple, close to the Stanford
tokenizer that GloVe 6B was built with: the text is lowercased; a token is a number (``7.5``,
``1,000``, ``8/10``), a word (hyphens inside kept: ``well-made``), a clitic split PTB-style (``do
n't``, ``it 's``), a run of ``.!?``, or any other single symbol. A sentence ends after a run of
``.!?`` (not after the ``.`` of ``mr``, ``dr``, ``vs`` ... ) and at every ``<br />`` break.
"""

from __future__ import annotations

import re
import tarfile
import time
import zlib
from dataclasses import dataclass
from pathlib import Path

from memread.data.text import read_lines
from memread.errors import MemreadError

SENTENCE_SEPARATOR = "<sssss>"
ACL_IMDB_FILE = "imdb-acl/aclImdb_v1_train_test.tar.gz"  # under the data root
ACL_IMDB_RATINGS = (1, 2, 3, 4, 7, 8, 9, 10)


@dataclass(frozen=True)
class Document:
    """A rated document: ``sentences`` of tokens, the gold ``rating`` (stars), where it came from."""

    id: str  # aclImdb: "train/pos/123"; Tang: "<file name>:<line>"
    sentences: tuple[tuple[str, ...], ...]
    rating: int
    user: str = ""
    product: str = ""

    @property
    def words(self) -> int:
        return sum(len(s) for s in self.sentences)


# ----------------------------------------------------------------------------- Tang et al. 2015


def read_tang(path: str | Path) -> list[Document]:
    """Documents of a Tang et al. (2015) file; empty sentences (``<sssss> <sssss>``) are dropped."""
    path = Path(path)
    docs = []
    for lineno, line in read_lines(path):
        if not line.strip():
            continue
        fields = line.split("\t\t")
        if len(fields) != 4:
            raise MemreadError(f"{path}:{lineno}: expected 4 fields 'user\\t\\tproduct\\t\\trating\\t\\ttext' "
                               f"(separated by two tabs), got {len(fields)}")
        user, product, rating, text = fields
        try:
            stars = int(rating)
        except ValueError:
            raise MemreadError(f"{path}:{lineno}: rating must be an integer, got {rating!r}") from None
        if stars < 1:
            raise MemreadError(f"{path}:{lineno}: rating must be 1 or more, got {stars}")
        sentences = tuple(s for s in (tuple(part.split()) for part in text.split(SENTENCE_SEPARATOR)) if s)
        if not sentences:
            raise MemreadError(f"{path}:{lineno}: the document has no words")
        docs.append(Document(f"{path.name}:{lineno}", sentences, stars, user.strip(), product.strip()))
    if not docs:
        raise MemreadError(f"{path}: no documents")
    return docs


# ----------------------------------------------------------------------------- sentences and tokens

_BREAK = re.compile(r"<br\s*/?>", re.IGNORECASE)
_TOKEN = re.compile(
    r"\d+(?:[.,:/]\d+)*"  # numbers: 7.5  1,000  8/10  10:30
    r"|\w+(?=n't)|n't"  # do n't, ca n't, wo n't
    r"|'(?:s|re|ve|ll|d|m)\b"  # it 's, we 're
    r"|\w+(?:-\w+)*"  # words, hyphens inside kept
    r"|[.!?]+"  # sentence-final punctuation (a run counts as one token)
    r"|[^\w\s]"  # any other symbol
)
_ABBREVIATIONS = frozenset("mr mrs ms dr st vs jr sr prof".split())


def split_document(text: str) -> list[list[str]]:
    """Raw review text -> sentences of lowercased tokens (see the module docstring); no empty sentence."""
    sentences: list[list[str]] = []
    for paragraph in _BREAK.split(text.lower()):
        current: list[str] = []
        for tok in _TOKEN.findall(paragraph):
            current.append(tok)
            if tok[0] in ".!?" and not (tok == "." and len(current) > 1 and current[-2] in _ABBREVIATIONS):
                sentences.append(current)
                current = []
        if current:
            sentences.append(current)
    return sentences


# ----------------------------------------------------------------------------- aclImdb

_MEMBER = re.compile(r"(?:^|/)aclImdb/(train|test)/(pos|neg)/(\d+)_(\d+)\.txt$")
_CACHE: dict[tuple[str, int, int], dict[str, list[Document]]] = {}
parse_seconds: dict[str, float] = {}  # path -> seconds the last (uncached) parse took


def read_acl_imdb(path: str | Path) -> dict[str, list[Document]]:
    """``{"train": [...], "test": [...]}`` from the aclImdb tar.gz, each ordered by (neg before pos, id).

    Parsed once per process per file (keyed by path, size and mtime); callers must not mutate the
    lists. Other members (README, urls, vocab, unsup) are skipped. Errors name the member."""
    path = Path(path)
    if not path.is_file():
        raise MemreadError(f"{path}: aclImdb archive not found (expected {ACL_IMDB_FILE} under the data root)")
    st = path.stat()
    key = (str(path.resolve()), st.st_size, st.st_mtime_ns)
    if key in _CACHE:
        return _CACHE[key]
    t0 = time.perf_counter()
    found: dict[str, list[tuple[str, int, Document]]] = {"train": [], "test": []}
    try:
        with tarfile.open(path, "r|gz") as tar:  # streamed: one pass over the gzip stream
            for member in tar:
                m = _MEMBER.search(member.name)
                if m is None or not member.isfile():
                    continue
                split, polarity, rid, rating = m.group(1), m.group(2), int(m.group(3)), int(m.group(4))
                where = f"{path}: {member.name}"
                if (polarity == "neg") != (1 <= rating <= 4) or not (1 <= rating <= 4 or 7 <= rating <= 10):
                    raise MemreadError(f"{where}: rating {rating} does not fit '{polarity}' (neg: 1-4, pos: 7-10)")
                raw = tar.extractfile(member).read()
                try:
                    text = raw.decode("utf-8")
                except UnicodeDecodeError as e:
                    raise MemreadError(f"{where}: not UTF-8 text ({e.reason} at byte {e.start})") from None
                sentences = tuple(tuple(s) for s in split_document(text))
                if not sentences:
                    raise MemreadError(f"{where}: the review has no words")
                found[split].append((polarity, rid, Document(f"{split}/{polarity}/{rid}", sentences, rating)))
    except (tarfile.TarError, EOFError, zlib.error, OSError) as e:
        raise MemreadError(f"{path}: not a readable tar.gz archive ({e})") from None
    for split, items in found.items():
        if not items:
            raise MemreadError(f"{path}: no aclImdb/{split}/{{pos,neg}}/<id>_<rating>.txt reviews in the archive")
    corpus = {split: [d for _, _, d in sorted(items, key=lambda x: (x[0], x[1]))] for split, items in found.items()}
    parse_seconds[str(path)] = time.perf_counter() - t0
    _CACHE[key] = corpus
    return corpus


def dev_split(docs: list[Document], fraction: float) -> tuple[list[Document], list[Document]]:
    """(train, dev): ``round(fraction * n)`` documents go to dev, those with the smallest CRC-32 of
    their id (ties by id), so the split depends only on the ids, not on their order. Order is kept."""
    if not 0.0 <= fraction < 1.0:
        raise MemreadError(f"dev fraction must be in [0, 1), got {fraction}")
    n_dev = round(fraction * len(docs))
    ranked = sorted(range(len(docs)), key=lambda i: (zlib.crc32(docs[i].id.encode("utf-8")), docs[i].id))
    dev = set(ranked[:n_dev])
    return [d for i, d in enumerate(docs) if i not in dev], [d for i, d in enumerate(docs) if i in dev]
