"""Tasks and the explicit registry that names them (``[task] name = ...`` in an experiment file)."""

from memread.tasks.base import ModelOutput, Task
from memread.tasks.cloze import ClozeTask
from memread.tasks.document import DocumentTask
from memread.tasks.language_model import LanguageModelTask
from memread.tasks.pair import PairTask
from memread.tasks.sentence import SentenceTask
from memread.tasks.translation import TranslationTask

TASKS: dict[str, type] = {
    "lm": LanguageModelTask,
    "cloze": ClozeTask,
    "classify": SentenceTask,
    "pair": PairTask,
    "translate": TranslationTask,
    "document": DocumentTask,
}

__all__ = ["TASKS", "ModelOutput", "Task"]
