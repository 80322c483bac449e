"""The layout shows the architecture: no import cycles between memread's modules, and nothing at the
top level of ``src/memread`` but the library's spine (tools and benchmarks live in their subpackages).

The import graph is read from the source with ``ast``, not by importing: every ``import x`` and
``from x import y`` counts, at module level and inside functions (a lazy import is still a
dependency). ``from memread.pkg import name`` is an edge to ``memread.pkg.name`` when ``name`` is a
submodule, else to the package ``memread.pkg`` (its ``__init__``).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).parent.parent / "src"
PACKAGE = SRC / "memread"

# what may sit at the top level of src/memread: the spine of the library ...
SPINE = {"__init__", "__main__", "_compiled", "bleu", "config", "decoding", "errors", "experiment",
         "metrics", "params", "schema", "typed", "version"}
# ... and at least these subpackages (csrc holds C++ headers only); a new subpackage is a new part of the
# architecture and welcome, a new top-level module is not
SUBPACKAGES = {"bench", "cli", "criteria", "csrc", "data", "heads", "modules", "readers", "tasks", "tools", "training"}


def module_files(package: Path = PACKAGE) -> dict[str, Path]:
    """``{"memread.readers.lstmn": path, "memread.readers": path/__init__.py, ...}``."""
    out = {}
    for path in sorted(package.rglob("*.py")):
        parts = path.relative_to(SRC).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def imported_modules(name: str, path: Path, modules: set[str]) -> set[str]:
    """The memread modules that module ``name`` (at ``path``) imports anywhere in its source."""
    is_package = path.name == "__init__.py"
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: from .x import y / from .. import y
                base = name.split(".") if is_package else name.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                found.add(sub if sub in modules else target)
    # an import of a module not in memread (torch, stdlib) is no edge; neither is a module importing itself
    return {m for m in found if m in modules and m != name}


def import_graph() -> dict[str, set[str]]:
    files = module_files()
    return {name: imported_modules(name, path, set(files)) for name, path in files.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` as ``[a, b, ..., a]``, or None (depth-first search, three colours)."""
    state: dict[str, int] = {}  # absent: unvisited, 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_the_graph_sees_lazy_and_from_imports():
    graph = import_graph()
    assert "memread.typed" in graph["memread.heads.hierarchical"]  # from_dict, not from memread.config
    assert "memread.tasks" in graph["memread.config"]  # a lazy import inside experiment_from_dict
    assert "memread.metrics" in graph["memread.criteria.answer_selection"]  # from memread import metrics: the submodule
    assert "memread.errors" in graph["memread"]


def test_a_cycle_is_found_and_named():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None


def test_relative_imports_resolve(tmp_path):
    pkg = tmp_path / "memread" / "pkg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("from .a import f\nfrom . import b\n")
    (pkg / "a.py").write_text("from .b import g\nfrom .. import errors\n")
    modules = {"memread", "memread.errors", "memread.pkg", "memread.pkg.a", "memread.pkg.b"}
    assert imported_modules("memread.pkg", pkg / "__init__.py", modules) == {"memread.pkg.a", "memread.pkg.b"}
    assert imported_modules("memread.pkg.a", pkg / "a.py", modules) == {"memread.pkg.b", "memread.errors"}


def test_no_import_cycles():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_the_library_does_not_import_its_tools_or_benches():
    """tools/ and bench/ sit on top: only the CLI's verbs (and they themselves) import them."""
    on_top = {"memread.tools", "memread.bench"}
    top = lambda m: ".".join(m.split(".")[:2])  # noqa: E731  memread.tools.viz -> memread.tools
    users = {m for m, deps in import_graph().items() if top(m) not in on_top and any(top(d) in on_top for d in deps)}
    assert users and {top(m) for m in users} == {"memread.cli"}


def test_readers_and_tasks_do_not_import_the_experiment_config():
    """memread.config imports the READERS and TASKS registries (to check an experiment file's sections),
    so nothing they import may import it back; typed parsing comes from the leaf memread.typed."""
    graph = import_graph()
    below = ("memread.readers", "memread.tasks", "memread.modules", "memread.data", "memread.heads", "memread.criteria",
             "memread.typed")
    offenders = {m for m, deps in graph.items() if m.startswith(below) and "memread.config" in deps}
    assert offenders == set()
    assert graph["memread.typed"] <= {"memread.errors"}


def test_nothing_but_the_spine_at_the_top_level():
    modules = {p.stem for p in PACKAGE.glob("*.py")}
    folders = {p.name for p in PACKAGE.iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert modules - SPINE == set(), "move these into a subpackage (tools/, bench/, ...) or add them to the spine"
    assert SUBPACKAGES <= folders


@pytest.mark.parametrize("package", sorted(SUBPACKAGES - {"csrc"}))
def test_every_subpackage_is_a_package(package):
    assert (PACKAGE / package / "__init__.py").is_file()


def test_task_files_are_short_recipes():
    """A task file wires parts (which fit together); data, heads and
    criteria live in their own packages. The longest one stays well under 150 lines."""
    lengths = {p.name: len(p.read_text(encoding="utf-8").splitlines()) for p in (PACKAGE / "tasks").glob("*.py")}
    assert max(lengths.values()) < 120, lengths


def test_the_parts_point_one_way():
    """data <- readers <- heads; criteria read heads' outputs; tasks wire them; none imports a task, and
    data pipelines import no model code."""
    graph = import_graph()
    part = lambda m: ".".join(m.split(".")[:2])  # noqa: E731
    for m, deps in graph.items():
        parts = {part(d) for d in deps}
        if part(m) in ("memread.data", "memread.readers", "memread.heads", "memread.criteria", "memread.modules"):
            assert "memread.tasks" not in parts, m
        if part(m) == "memread.data":
            assert not parts & {"memread.readers", "memread.heads", "memread.criteria"}, m
        if part(m) in ("memread.readers", "memread.modules"):
            assert not parts & {"memread.heads", "memread.criteria"}, m
