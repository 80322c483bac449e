"""The earlier ``[task]`` form of an experiment file (and of run folders written with it), read by translating its
keys into the ``[data]``, ``[head]`` and ``[criterion]`` sections: each task shape's ``upgrade`` routes its keys
with :func:`upgrade_sections`."""

from __future__ import annotations

from typing import Any

from memread.errors import MemreadError


def upgrade_sections(task: dict, where: str, routes: dict[str, tuple[str, str]], defaults: dict[str, Any],
                     sections: dict[str, dict]) -> dict[str, dict]:
    """Move the keys of an earlier ``[task]`` table into new sections: ``routes[old] = (section, key)``
    for the keys that apply to this experiment. A key left over is dropped when it holds its earlier
    default (run directories wrote every key) and refused, naming it, when it does not."""
    out = {name: dict(table) for name, table in sections.items()}
    for old, value in task.items():
        if old == "name":
            continue
        if old in routes:
            section, key = routes[old]
            out.setdefault(section, {})[key] = value
        elif old not in defaults:
            raise MemreadError(f"{where}: unknown key 'task.{old}'")
        elif value != defaults[old] and not (isinstance(value, list) and tuple(value) == defaults[old]):
            raise MemreadError(f"{where}: key 'task.{old}' does not apply to this experiment ({old} = {value!r})")
    return out
