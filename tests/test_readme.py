"""The README's two set-up commands, and CI running the second one verbatim."""

import re
import tomllib

import pytest
from pathlib import Path

REPO = Path(__file__).parent.parent
README = REPO / "README.md"


def readme_commands() -> list[str]:
    text = (REPO / "README.md").read_text()
    setup = text.split("## Set-up on a fresh machine", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```\n(.+?)\n```", setup)


def test_the_readme_is_short_and_no_diary():
    """A newcomer reads it in two minutes: at most ~150 lines, no session numbers, issue numbers or commit hashes."""
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 150
    assert not re.search(r"\b(session|issue) \d+|`[0-9a-f]{7}`", text, flags=re.I)


def test_readme_gives_exactly_two_setup_commands():
    install_run, install_test = readme_commands()
    assert "pip install torch==2.13.0" in install_run and install_run.endswith("memread quickstart")
    assert "pip install torch==2.13.0" in install_test and '".[test]"' in install_test and "pytest" in install_test


def test_ci_runs_the_readme_test_command_verbatim():
    _, install_test = readme_commands()
    ci_lines = [l.strip() for l in (REPO / ".ci" / "run").read_text().splitlines()]
    assert install_test in ci_lines


def test_the_suite_runs_on_every_core():
    """CI has two cores and the tests one thread each: pytest-xdist runs the suite in ~11-12 minutes there
    (one process: ~21-24)."""
    _, install_test = readme_commands()
    assert install_test.endswith("python -m pytest -q -n auto")
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]["test"]
    assert any(dep.startswith("pytest-xdist") for dep in extras)


def test_the_experiment_file_example_loads(tmp_path):
    from memread.config import load_experiment

    text = README.read_text(encoding="utf-8")
    block = text.split("```toml\n", 1)[1].split("```", 1)[0]
    (tmp_path / "example.toml").write_text(block)
    cfg = load_experiment(tmp_path / "example.toml")
    assert (cfg.data.name, cfg.reader.name, cfg.head.name, cfg.criterion.name) == ("ptb", "lstm", "lm", "lm_nll")


def test_the_layout_names_every_part_file():
    """The docs' architecture page lists every module of the experiment parts (data pipelines, heads, criteria,
    tasks, the CLI) in its Layout section."""
    page = REPO / "docs" / "architecture.md"
    layout = page.read_text(encoding="utf-8").split("## Layout", 1)[1].split("\n## ", 1)[0]
    src = Path(__file__).parent.parent / "src" / "memread"
    for package in ("data/pipelines", "heads", "criteria", "tasks", "tools", "bench", "cli"):
        for path in (src / package).glob("*.py"):
            if path.name != "__init__.py":
                assert path.name in layout, f"docs/architecture.md's Layout does not name {package}/{path.name}"


def quickstart_figure():
    """``scripts/quickstart_figure.py`` as a module (standard library only)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("quickstart_figure", REPO / "scripts" / "quickstart_figure.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_using_it_says_where_datasets_are_read_from():
    using = README.read_text(encoding="utf-8").split("## Using it", 1)[1].split("```", 1)[0]
    assert "data root" in using and "export MEMREAD_DATA=" in using and "--data-root" in using


def test_the_readme_quickstart_figure_is_the_recorded_run():
    """The README's quickstart accuracies are those of ``results/quickstart.json`` (the recorded run);
    ``python scripts/quickstart_figure.py`` rewrites them from it."""
    import json

    qf = quickstart_figure()
    record = json.loads((REPO / "results" / "quickstart.json").read_text(encoding="utf-8"))
    assert {"baseline", "memory", "run"} <= record.keys() and record["run"]["commit"]
    assert qf.stated(README.read_text(encoding="utf-8")) == qf.figure(record), \
        "README's quickstart figure differs from results/quickstart.json: run python scripts/quickstart_figure.py"


def test_the_figure_script_checks_and_rewrites_only_the_figure(tmp_path):
    import json

    qf = quickstart_figure()
    readme = tmp_path / "README.md"
    text = README.read_text(encoding="utf-8")
    readme.write_text(text, encoding="utf-8")
    record = json.loads((REPO / "results" / "quickstart.json").read_text(encoding="utf-8"))
    record["memory"]["test_accuracy"] = 0.5
    results = tmp_path / "quickstart.json"
    results.write_text(json.dumps(record), encoding="utf-8")
    args = ["--readme", str(readme), "--results", str(results)]
    assert qf.main([*args, "--check"]) == 1 and readme.read_text(encoding="utf-8") == text
    assert qf.main(args) == 0
    new = readme.read_text(encoding="utf-8")
    assert qf.stated(new) == qf.figure(record) == f"{record['baseline']['test_accuracy']:.1%} / 50.0%"
    changed = [(a, b) for a, b in zip(text.splitlines(), new.splitlines(), strict=True) if a != b]
    assert len(changed) == 1 and changed[0][1].startswith(qf.README_ROW)
    assert qf.main([*args, "--check"]) == 0


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.+?)\n```", README.read_text(encoding="utf-8"), flags=re.S)


@pytest.mark.slow  # memread quickstart trains 30 steps first
def test_the_python_examples_run_as_written(tmp_path, monkeypatch):
    """The README's Python blocks, verbatim, in a folder where ``memread quickstart`` has run (fewer steps)."""
    from memread import cli
    from memread.inference.predictor import ClozeAnswer

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MEMREAD_DATA", str(tmp_path))
    assert cli.main(["quickstart", "--steps", "30"]) == 0
    blocks = python_blocks()
    assert len(blocks) == 2
    first: dict = {}
    exec(compile(blocks[0], "README.md (memread.load)", "exec"), first)
    assert isinstance(first["result"], ClozeAnswer) and first["result"].answer in ("market", "office")
    assert sum(first["result"].probabilities.values()) == pytest.approx(1.0)
    assert first["results"][0].attention is not None
    second: dict = {}
    exec(compile(blocks[1], "README.md (a reader in your model)", "exec"), second)
    assert tuple(second["logits"].shape) == (2, 5)
    second["logits"].sum().backward()  # a plain nn.Module: gradients reach the reader
