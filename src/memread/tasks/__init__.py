"""Task shapes and the explicit registry that names them (the ``task`` of a dataset, ``DatasetSpec.task``).

``TASKS[shape]`` is a :class:`TaskSpec`: what fits together in that shape. :class:`Task` wires the parts.
"""

from memread.heads.base import ModelOutput
from memread.tasks.base import Task, TaskSpec
from memread.tasks.translation import TRANSLATE
from memread.tasks.language_model import LM
from memread.tasks.document import DOCUMENT
from memread.tasks.cloze import CLOZE
from memread.tasks.pair import PAIR
from memread.tasks.sentence import CLASSIFY

TASKS: dict[str, TaskSpec] = {
    "lm": LM,
    "document": DOCUMENT,
    "cloze": CLOZE,
    "translate": TRANSLATE,
    "classify": CLASSIFY,
    "pair": PAIR,
    # >>> more task shapes register here
}

__all__ = ["TASKS", "ModelOutput", "Task", "TaskSpec"]
