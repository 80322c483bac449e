"""The README's two set-up commands, and CI running the second one verbatim."""

import re
from pathlib import Path

REPO = Path(__file__).parent.parent


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
