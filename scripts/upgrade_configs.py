"""Rewrite experiment files of the earlier ``[task]`` form as ``[data]``, ``[head]`` and ``[criterion]`` sections.

    python scripts/upgrade_configs.py FILE...      # in place; prints each file it rewrote

Each key line of ``[task]`` moves, with its value as written and its comment, to the section and key that
:func:`memread.config.upgrade` gives it; comment lines go with the key that follows them; ``[reader]`` and
``[train]`` are kept as they are. A file is only written when the new one loads to the same experiment.
"""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

from memread.config import load_experiment, upgrade
from memread.tasks import TASKS

SECTION = re.compile(r"^\s*\[(\w+)\]\s*(#.*)?$")
KEY = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*)$")


def routes(task: dict, where: str) -> dict[str, tuple[str, str] | None]:
    """Old key -> (section, new key) it moved to, or None for a key that chose names or was dropped."""
    new = TASKS[task["name"]].upgrade(dict(task), where)
    out: dict[str, tuple[str, str] | None] = {}
    for old, value in task.items():
        if old == "name":
            continue
        found = [(s, k) for s, table in new.items() for k, v in table.items() if k != "name" and same(v, value)]
        try:
            without = TASKS[task["name"]].upgrade({k: v for k, v in task.items() if k != old}, where)
        except Exception:  # without it the table does not translate: it chose a name (dataset, head, model)
            out[old] = None
            continue
        moved = [(s, k) for s, k in found if not same(without.get(s, {}).get(k, object()), new[s][k])]
        out[old] = moved[0] if moved else None
    return out


def rewrite(path: Path) -> str | None:
    text = path.read_text(encoding="utf-8")
    raw = tomllib.loads(text)
    if "task" not in raw:
        return None
    new = upgrade(raw, str(path))
    route = routes(raw["task"], str(path))
    header: list[str] = []
    lines: dict[str, list[str]] = {s: [] for s in ("data", "reader", "head", "criterion", "train")}
    section, pending = None, []
    for line in text.splitlines():
        m = SECTION.match(line)
        if m:
            section = m.group(1)
            continue
        if section is None:
            header.append(line)
        elif section in ("reader", "train"):
            lines[section].append(line)
        elif not line.strip() or line.lstrip().startswith("#"):
            pending.append(line) if line.strip() else None
        else:
            k = KEY.match(line)
            key = k.group(1)
            if key == "name" or route.get(key) is None:
                pending = []  # a name-choosing key: its section's name line says it
                continue
            target, new_key = route[key]
            lines[target].extend(pending)
            pending = []
            lines[target].append(re.sub(rf"^(\s*){key}(\s*=)", rf"\g<1>{new_key}\g<2>", line))
    out = [*header]
    while out and not out[-1].strip():
        out.pop()
    for s in ("data", "reader", "head", "criterion", "train"):
        body = [l for l in lines[s]]
        while body and not body[-1].strip():
            body.pop()
        if s in ("data", "head", "criterion"):
            written = {KEY.match(l).group(1) for l in body if KEY.match(l)}
            extra = [f"{k} = {toml_value(v)}" for k, v in new[s].items() if k != "name" and k not in written]
            body = [f'name = "{new[s]["name"]}"', *extra, *body]
        if s == "criterion" and len(body) == 1:
            continue  # the dataset's default criterion with its defaults: leave the section out
        if not body and s not in raw:
            continue
        out += ["", f"[{s}]", *body]
    result = "\n".join(out).lstrip("\n") + "\n"
    return result


def same(a, b) -> bool:
    seq = (list, tuple)
    if isinstance(a, seq) or isinstance(b, seq):
        return isinstance(a, seq) and isinstance(b, seq) and list(a) == list(b)
    return type(a) is type(b) and a == b


def toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return f'"{v}"'
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    return repr(v)


def main(argv: list[str]) -> None:
    for name in argv:
        path = Path(name)
        result = rewrite(path)
        if result is None:
            continue
        before = load_experiment(path)
        tmp = path.with_suffix(".new.toml")
        tmp.write_text(result, encoding="utf-8")
        try:
            after = load_experiment(tmp)
        finally:
            tmp.unlink()
        if after != before:
            raise SystemExit(f"{path}: the rewritten file loads to another experiment:\n{before}\n{after}")
        path.write_text(result, encoding="utf-8")
        print(path)


if __name__ == "__main__":
    main(sys.argv[1:])
