"""memread's built-in data: small stories that need memory, deterministic from a seed.

People put objects in places; other people walk around; a few sentences later a cloze question
asks where one of the objects is. The answer was stated once, several sentences earlier, and
every place in the story is a candidate, so a reader must remember which object went where::

    mary put the apple in the kitchen .
    john went to the garden .
    sandra left the ball in the office .
    ...
    the apple is in the XXXXX .          answer: kitchen   candidates: kitchen|garden|office|...

The same stories, with the answers filled in, form a plain-text stream for language modelling.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from memread.data.cbt import BLANK, ClozeExample
from memread.typed import NonNegInt, PositiveInt

NAMES = ["mary", "john", "sandra", "daniel", "fred", "julie", "bill", "emma",
         "lily", "greg", "brian", "jessica", "bernhard", "yann", "sumit", "jason"]
OBJECTS = ["apple", "ball", "book", "key", "cup", "hat", "lamp", "coin", "box", "pen",
           "shoe", "clock", "bag", "ring", "milk", "kite", "map", "bell", "doll", "comb"]
PLACES = ["kitchen", "garden", "office", "hallway", "bedroom", "bathroom", "cellar", "attic",
          "park", "school", "garage", "library", "cinema", "market"]
PUT_VERBS = ["put", "left", "dropped", "placed", "hid"]
GO_VERBS = ["went to", "walked to", "moved to", "travelled to", "ran to"]
FILLERS = [["it", "was", "a", "quiet", "day", "."], ["the", "sun", "was", "shining", "."],
           ["nobody", "said", "a", "word", "."], ["it", "started", "to", "rain", "."]]


@dataclass(frozen=True)
class StoryConfig:
    min_objects: PositiveInt = 2  # a story needs an object to ask about
    max_objects: PositiveInt = 4
    min_distractors: NonNegInt = 2
    max_distractors: NonNegInt = 5
    min_gap: NonNegInt = 2  # at least this many sentences between the answer and the question


def generate_story(rng: random.Random, cfg: StoryConfig = StoryConfig()) -> ClozeExample:
    n_objects = rng.randint(cfg.min_objects, cfg.max_objects)
    n_distractors = rng.randint(cfg.min_distractors, cfg.max_distractors)
    objects = rng.sample(OBJECTS, n_objects)
    places = rng.sample(PLACES, n_objects + n_distractors)
    object_place = dict(zip(objects, places[:n_objects]))
    events: list[tuple[str, list[str]]] = []
    for obj in objects:
        verb = rng.choice(PUT_VERBS)
        events.append((obj, [rng.choice(NAMES), verb, "the", obj, "in", "the", object_place[obj], "."]))
    for place in places[n_objects:]:
        events.append(("", [rng.choice(NAMES), *rng.choice(GO_VERBS).split(), "the", place, "."]))
    if rng.random() < 0.5:
        events.append(("", list(rng.choice(FILLERS))))
    rng.shuffle(events)
    # ask about an object stated at least min_gap sentences before the end
    askable = [obj for i, (obj, _) in enumerate(events) if obj and len(events) - i >= cfg.min_gap]
    if not askable:  # move one object sentence to the front
        i = next(i for i, (obj, _) in enumerate(events) if obj)
        events.insert(0, events.pop(i))
        askable = [events[0][0]]
    target = rng.choice(askable)
    context = [sentence for _, sentence in events]
    candidates = sorted(set(places))
    return ClozeExample(context, ["the", target, "is", "in", "the", BLANK, "."], object_place[target], candidates)


def generate_stories(n: int, seed: int, cfg: StoryConfig = StoryConfig()) -> list[ClozeExample]:
    rng = random.Random(seed)
    return [generate_story(rng, cfg) for _ in range(n)]


def story_splits(n_train: int, n_valid: int, n_test: int, seed: int) -> dict[str, list[ClozeExample]]:
    """Train/valid/test stories from disjoint seeds (same seed -> same stories, everywhere)."""
    return {
        "train": generate_stories(n_train, seed * 3 + 0),
        "valid": generate_stories(n_valid, seed * 3 + 1),
        "test": generate_stories(n_test, seed * 3 + 2),
    }


def story_text(examples: list[ClozeExample]) -> list[str]:
    """The stories as LM text: one sentence per line, the question answered, a blank line between."""
    lines: list[str] = []
    for ex in examples:
        lines.extend(" ".join(s) for s in ex.context)
        lines.append(" ".join(ex.answer if w == BLANK else w for w in ex.query))
        lines.append("")
    return lines
