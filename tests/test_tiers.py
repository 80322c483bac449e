"""The fast tier (`python -m pytest -m "not slow"`) holds no test that starts or kills processes: those are marked
slow, and CI runs them with the rest."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).parent.parent
STARTS_PROCESSES = ("subprocess.run", "subprocess.Popen", "Popen(", "os.kill", "signal.SIGKILL", "multiprocessing")


def unmarked_process_tests(files: list[Path]) -> list[str]:
    """``file::test`` for every test function that starts or kills a process without a ``slow`` mark (on the test or
    on its module's ``pytestmark``)."""
    out = []
    for f in files:
        src = f.read_text(encoding="utf-8")
        tree = ast.parse(src)
        module_slow = any(isinstance(n, ast.Assign) and any(getattr(t, "id", "") == "pytestmark" for t in n.targets)
                          and "slow" in ast.get_source_segment(src, n) for n in tree.body)
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test"):
                marks = " ".join(ast.get_source_segment(src, d) for d in node.decorator_list)
                body = ast.get_source_segment(src, node)
                if not (module_slow or "slow" in marks) and any(k in body for k in STARTS_PROCESSES):
                    out.append(f"{f.relative_to(REPO)}::{node.name}")
    return out


def test_tests_that_start_processes_are_marked_slow():
    files = sorted((REPO / "tests").glob("test_*.py")) + sorted((REPO / "reproduction" / "tests").glob("test_*.py"))
    assert unmarked_process_tests([f for f in files if f != Path(__file__)]) == []  # (this file names them in text)


def test_the_scan_finds_an_unmarked_test(tmp_path):
    (tmp_path / "test_x.py").write_text("import subprocess, pytest\n\n\ndef test_a():\n    subprocess.run(['true'])\n\n\n"
                                        "@pytest.mark.slow\ndef test_b():\n    subprocess.run(['true'])\n")
    global REPO
    saved, REPO = REPO, tmp_path
    try:
        assert unmarked_process_tests([tmp_path / "test_x.py"]) == ["test_x.py::test_a"]
    finally:
        REPO = saved
