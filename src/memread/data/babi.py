"""The bAbI question-answering tasks (Weston et al. 2015) as pointer questions.

A bAbI file holds stories; each line is numbered, and the numbers restart at 1 with a new story.
A line with TABs is a question about the statements before it::

    1 Mary moved to the bathroom.
    2 John went to the hallway.
    3 Where is Mary? <TAB>bathroom<TAB>1

Each question becomes a :class:`ClozeExample` whose context is the story's statements so far (the
most recent ``max_sentences`` of them if that is set, as in end-to-end memory networks), whose
query is the question, and whose candidates are the distinct words of the context: the pointer-sum
reader answers by pointing at a word of the story. Only single-word answers can be pointed at; the
tasks where the answer is (nearly) always a word of the story are :data:`POINTER_TASKS`.
"""

from __future__ import annotations

import re
from pathlib import Path

from memread.data.cbt import ClozeExample
from memread.data.text import read_lines
from memread.errors import MemreadError

TASK_NAMES = {
    1: "single-supporting-fact", 2: "two-supporting-facts", 3: "three-supporting-facts",
    4: "two-arg-relations", 5: "three-arg-relations", 6: "yes-no-questions", 7: "counting",
    8: "lists-sets", 9: "simple-negation", 10: "indefinite-knowledge", 11: "basic-coreference",
    12: "conjunction", 13: "compound-coreference", 14: "time-reasoning", 15: "basic-deduction",
    16: "basic-induction", 17: "positional-reasoning", 18: "size-reasoning", 19: "path-finding",
    20: "agents-motivations",
}

# single-word answers that are a word of the story in every question of en-10k (train and test; see
# tests/test_cloze_data.py). Left out: yes/no/maybe answers (6, 9, 10, 17, 18), counts (7), lists (8),
# paths (19); 15 answers "wolf" to a story that says "wolves"; in 20 "where will X go?" answers a
# room the story never names. en-10k has no train file for task 3 (see the data MANIFEST).
POINTER_TASKS = (1, 2, 3, 4, 5, 11, 12, 13, 14, 16)

_TOKEN = re.compile(r"[A-Za-z0-9']+|[^\sA-Za-z0-9']")


def tokenize(text: str) -> list[str]:
    """``"Where is Mary?"`` -> ``["Where", "is", "Mary", "?"]`` (case kept: names are answers)."""
    return _TOKEN.findall(text)


def babi_path(root: Path, folder: str, task: int, split: str) -> Path:
    """``root/folder/qa{task}_{name}_{split}.txt`` (or ``.gz``), or one error naming the file."""
    name = f"qa{task}_{TASK_NAMES[task]}_{split}.txt"
    base = Path(root) / folder / name
    for candidate in (base, base.with_name(name + ".gz")):
        if candidate.is_file():
            return candidate
    raise MemreadError(f"bAbI task {task} not found: expected {base} (or {name}.gz) under data root {root}")


def read_babi(path: Path, task: int | None = None, max_sentences: int = 0) -> list[ClozeExample]:
    """Every question of a bAbI file, in file order, with ``group = "qa{task}"``."""
    path = Path(path)
    if task is None:
        m = re.match(r"qa(\d+)_", path.name)
        task = int(m.group(1)) if m else 0
    examples: list[ClozeExample] = []
    story: list[list[str]] = []
    story_id = 0
    last = 0
    for lineno, line in read_lines(path):
        if not line.strip():
            continue
        number, _, text = line.partition(" ")
        if not number.isdigit():
            raise MemreadError(f"{path}:{lineno}: expected a line number, got {line[:40]!r}")
        n = int(number)
        if n == 1:
            story, story_id = [], story_id + 1
        elif n != last + 1:
            raise MemreadError(f"{path}:{lineno}: line number {n} after {last}")
        last = n
        if "\t" not in text:
            story.append(tokenize(text))
            continue
        fields = text.split("\t")
        if len(fields) < 2 or not fields[1].strip():
            raise MemreadError(f"{path}:{lineno}: question line must be 'N question<TAB>answer<TAB>facts'")
        if not story:
            raise MemreadError(f"{path}:{lineno}: question before any statement of its story")
        context = story[-max_sentences:] if max_sentences else list(story)
        words = list(dict.fromkeys(w for s in context for w in s if any(c.isalnum() for c in w)))
        examples.append(ClozeExample(context=[list(s) for s in context], query=tokenize(fields[0]),
                                     answer=fields[1].strip(), candidates=words,
                                     source=f"{path.name}#{story_id}", group=f"qa{task}"))
    if not examples:
        raise MemreadError(f"{path}: no questions found")
    return examples


def answer_in_story(ex: ClozeExample) -> bool:
    return ex.answer in ex.candidates


# the check `memread data download` runs on each file it extracts (memread.data.formats.CHECKS): the number of
# records, or MemreadError


def check_babi(path: Path) -> int:
    return len(read_babi(path, max_sentences=1))  # one sentence of context each: little memory
