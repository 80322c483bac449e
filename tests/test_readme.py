"""The README's two set-up commands, and CI running the second one verbatim."""

import re
from pathlib import Path

REPO = Path(__file__).parent.parent
README = REPO / "README.md"


def readme_commands() -> list[str]:
    text = (REPO / "README.md").read_text()
    setup = text.split("## Set-up on a fresh machine", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```\n(.+?)\n```", setup)


def test_readme_gives_exactly_two_setup_commands():
    install_run, install_test = readme_commands()
    assert "pip install torch==2.13.0" in install_run and install_run.endswith("memread quickstart")
    assert "pip install torch==2.13.0" in install_test and '".[test]"' in install_test and "pytest" in install_test


def test_ci_runs_the_readme_test_command_verbatim():
    _, install_test = readme_commands()
    ci_lines = [l.strip() for l in (REPO / ".ci" / "run").read_text().splitlines()]
    assert install_test in ci_lines


def test_the_experiment_file_example_loads(tmp_path):
    from memread.config import load_experiment

    text = README.read_text(encoding="utf-8")
    block = text.split("```toml\n", 1)[1].split("```", 1)[0]
    (tmp_path / "example.toml").write_text(block)
    cfg = load_experiment(tmp_path / "example.toml")
    assert (cfg.data.name, cfg.reader.name, cfg.head.name, cfg.criterion.name) == ("ptb", "lstm", "lm", "lm_nll")


def test_the_layout_names_every_part_file():
    """The Layout section lists every module of the experiment parts (data pipelines, heads, criteria, tasks)."""
    layout = README.read_text(encoding="utf-8").split("## Layout", 1)[1].split("## ", 1)[0]
    src = Path(__file__).parent.parent / "src" / "memread"
    for package in ("data/pipelines", "heads", "criteria", "tasks", "tools", "bench"):
        for path in (src / package).glob("*.py"):
            if path.name != "__init__.py":
                assert path.name in layout, f"README Layout does not name {package}/{path.name}"
