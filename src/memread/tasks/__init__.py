"""Tasks and the explicit registry that names them (``[task] name = ...`` in an experiment file)."""

from memread.tasks.base import ModelOutput, Task
from memread.tasks.cloze import ClozeTask
from memread.tasks.language_model import LanguageModelTask

TASKS: dict[str, type] = {
    "lm": LanguageModelTask,
    "cloze": ClozeTask,
}

__all__ = ["TASKS", "ModelOutput", "Task"]
