"""The Stanford Sentiment Treebank (Socher et al. 2013) in its PTB-bracketed form.

Each line of ``sst/{train,dev,test}.txt`` (or ``.gz``) is one sentence as a labelled binary tree::

    (3 (2 It) (4 (4 (2 's) (4 (3 (2 a) (4 (3 lovely) (2 film))) ...

Every node carries a sentiment label 0-4 (very negative .. very positive); a leaf is ``(label word)``.
:func:`read_sst` gives one :class:`SentimentExample` per sentence (the root's label, all leaves) or,
with ``phrases=True``, one per labelled node (each subtree's leaves and its label, root first, in
pre-order; single words included), as the SST phrase-level training setup uses. ``fine=False``
gives the binary task: labels 0, 1 -> 0 (negative), 3, 4 -> 1 (positive), neutral (2) dropped.

Tokens keep their case. PTB escapes are undone so that tokens match GloVe: ``-LRB-``/``-RRB-`` ->
``(``/``)`` (and ``-LCB-``, ``-RCB-``, ``-LSB-``, ``-RSB-``), ``\\/`` -> ``/``, ``\\*`` -> ``*``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from memread.data.root import find_file
from memread.data.text import read_lines
from memread.errors import MemreadError

FINE_CLASSES = 5
SPLIT_FILES = {"train": "train", "valid": "dev", "dev": "dev", "test": "test"}

_PTB_ESCAPES = {"-LRB-": "(", "-RRB-": ")", "-LCB-": "{", "-RCB-": "}", "-LSB-": "[", "-RSB-": "]"}
# split on ASCII spaces only: one SST leaf is "8\u00a01\/2" (a no-break space inside a word)
_BRACKET_TOKEN = re.compile(r"\(|\)|[^ \t\r\n()]+")


def unescape_ptb(token: str) -> str:
    """``-LRB-`` -> ``(``, ``co-writer\\/director`` -> ``co-writer/director``; other tokens unchanged."""
    token = _PTB_ESCAPES.get(token, token)
    return token.replace("\\/", "/").replace("\\*", "*") if "\\" in token else token


@dataclass(frozen=True)
class SentimentExample:
    tokens: tuple[str, ...]
    label: int


@dataclass(frozen=True)
class Tree:
    """A labelled node: a leaf has a ``word`` and no children, an inner node children and no word."""

    label: int
    children: tuple["Tree", ...] = ()
    word: str | None = None

    def leaves(self) -> list[str]:
        out: list[str] = []
        stack = [self]
        while stack:
            node = stack.pop()
            if node.word is not None:
                out.append(node.word)
            else:
                stack.extend(reversed(node.children))
        return out

    def nodes(self) -> list["Tree"]:
        """Every node, pre-order (root first)."""
        out: list[Tree] = []
        stack = [self]
        while stack:
            node = stack.pop()
            out.append(node)
            stack.extend(reversed(node.children))
        return out


def sst_path(root: Path, split: str) -> Path:
    """``root/sst/{train,dev,test}.txt.gz`` (or ``.txt``); ``valid`` means dev."""
    if split not in SPLIT_FILES:
        raise MemreadError(f"unknown SST split {split!r}; expected train, valid or test")
    return find_file(Path(root), "sst", f"{SPLIT_FILES[split]}.txt",
                     "the PTB-bracketed trees (trainDevTestTrees_PTB) of nlp.stanford.edu/sentiment")


def parse_tree(text: str, where: str = "tree") -> Tree:
    """Parse one bracketed tree; ``where`` (``path:line``) starts every error message."""
    tokens = _BRACKET_TOKEN.findall(text)
    if not tokens:
        raise MemreadError(f"{where}: empty line, expected a bracketed tree")
    if tokens[0] != "(":
        raise MemreadError(f"{where}: a tree must start with '(', got {tokens[0]!r}")
    # each open node: [label, children, word]
    stack: list[list] = []
    root: Tree | None = None
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if root is not None:
            raise MemreadError(f"{where}: text after the end of the tree: {' '.join(tokens[i:i + 5])!r}")
        if tok == "(":
            label_tok = tokens[i + 1] if i + 1 < len(tokens) else ")"
            if label_tok in ("(", ")"):
                raise MemreadError(f"{where}: node without a label (token {i + 1})")
            if not label_tok.isdigit() or not 0 <= int(label_tok) < FINE_CLASSES:
                raise MemreadError(f"{where}: label {label_tok!r} outside 0-{FINE_CLASSES - 1}")
            if stack and stack[-1][2] is not None:
                raise MemreadError(f"{where}: a node holds both a word and a subtree")
            stack.append([int(label_tok), [], None])
            i += 2
            continue
        if tok == ")":
            if not stack:
                raise MemreadError(f"{where}: unbalanced brackets (')' without '(' at token {i + 1})")
            label, children, word = stack.pop()
            if word is None and not children:
                raise MemreadError(f"{where}: node with a label but no word or subtree (token {i + 1})")
            node = Tree(label, tuple(children), word)
            if stack:
                stack[-1][1].append(node)
            else:
                root = node
            i += 1
            continue
        # a word
        if not stack:
            raise MemreadError(f"{where}: word {tok!r} outside any bracket")
        top = stack[-1]
        if top[2] is not None or top[1]:
            raise MemreadError(f"{where}: node with more than one word or a word beside a subtree ({tok!r})")
        top[2] = unescape_ptb(tok)
        i += 1
    if root is None:
        raise MemreadError(f"{where}: unbalanced brackets ({len(stack)} not closed)")
    return root


def binary_label(fine: int) -> int | None:
    """0, 1 -> 0; 3, 4 -> 1; 2 (neutral) -> None."""
    return None if fine == 2 else int(fine > 2)


def read_sst(path: Path, fine: bool = True, phrases: bool = False) -> list[SentimentExample]:
    """Sentences (or, with ``phrases``, every labelled node) of an SST tree file, in file order."""
    path = Path(path)
    examples: list[SentimentExample] = []
    trees = 0
    for lineno, line in read_lines(path):
        if not line.strip():
            continue
        tree = parse_tree(line, f"{path}:{lineno}")
        trees += 1
        for node in tree.nodes() if phrases else (tree,):
            label = node.label if fine else binary_label(node.label)
            if label is not None:
                examples.append(SentimentExample(tuple(node.leaves()), label))
    if not trees:
        raise MemreadError(f"{path}: no trees found")
    return examples
