"""The docs site (``mkdocs.yml``, ``docs/``): it builds with ``mkdocs build --strict`` (no broken link or anchor,
no page outside the nav, the API pages generated from the docstrings), every page under ``docs/`` is in the nav,
and the docs' code blocks run as written.

Code blocks: every ```` ```python ```` block runs, each in a fresh namespace in an empty folder, unless the HTML
comment just above it says otherwise: ``<!-- docs-test: after-quickstart -->`` runs it in a folder where
``memread quickstart`` has run (the slow test), ``<!-- docs-test: skip -->`` leaves it out (a fragment such as a
registry line). Every ```` ```toml ```` block is checked against the typed configs: a whole experiment (data,
reader and head) as ``memread train`` reads it, a fragment section by section.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import tomllib
import types
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).parent.parent
DOCS = REPO / "docs"
MKDOCS_YML = REPO / "mkdocs.yml"
MARKERS = {"run", "after-quickstart", "skip"}
BLOCK = re.compile(r"(?:<!-- docs-test: ([\w-]+) -->\n)?```(python|toml)\n(.*?)\n```", re.S)


class _Loader(yaml.SafeLoader):
    """``yaml.safe_load`` that reads tags it does not know (``!!python/name:...``, ``!ENV``) as None."""


_Loader.add_multi_constructor("", lambda loader, suffix, node: None)


def mkdocs_config() -> dict:
    return yaml.load(MKDOCS_YML.read_text(encoding="utf-8"), Loader=_Loader)


def nav_pages(nav) -> list[str]:
    """Every page a nav names (``- Title: page.md``, ``- page.md``, sections nested), external links left out."""
    if isinstance(nav, str):
        return [] if "://" in nav else [nav]
    if isinstance(nav, dict):
        return [page for value in nav.values() for page in nav_pages(value)]
    if isinstance(nav, list):
        return [page for item in nav for page in nav_pages(item)]
    return []


def doc_pages() -> list[str]:
    return sorted(p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md"))


def blocks(language: str) -> list[tuple[str, str, str]]:
    """``(where, marker, code)`` of every fenced block of ``language`` in docs/, in page order."""
    out = []
    for page in doc_pages():
        text = (DOCS / page).read_text(encoding="utf-8")
        for match in BLOCK.finditer(text):
            marker, lang, code = match.groups()
            if lang == language:
                line = text.count("\n", 0, match.start(2)) + 1
                out.append((f"docs/{page}:{line}", marker or "run", code))
    return out


def mkdocs_build(config: Path, site: Path) -> subprocess.CompletedProcess:
    for module in ("mkdocs", "material", "mkdocstrings", "mkdocstrings_handlers.python"):
        assert importlib.util.find_spec(module.split(".")[0]) and importlib.util.find_spec(module), (
            f"{module} is not installed: pip install -e '.[test]' (or '.[docs]')")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}  # Material's banner about MkDocs 2.0, not a build warning
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config), "-d", str(site)],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=600)


def test_every_page_is_in_the_nav_and_every_nav_entry_is_a_page():
    nav = nav_pages(mkdocs_config()["nav"])
    assert len(nav) == len(set(nav)), f"mkdocs.yml's nav names a page twice: {sorted(p for p in nav if nav.count(p) > 1)}"
    pages = doc_pages()
    assert not sorted(set(pages) - set(nav)), f"pages under docs/ that the nav of mkdocs.yml leaves out: {sorted(set(pages) - set(nav))}"
    assert not sorted(set(nav) - set(pages)), f"nav entries of mkdocs.yml with no page under docs/: {sorted(set(nav) - set(pages))}"


def test_the_site_builds_strict(tmp_path):
    """The whole site, API pages included, with ``--strict``: any warning (a broken link or anchor, a page left
    out of the nav, a docstring mkdocstrings cannot read) fails the build."""
    result = mkdocs_build(MKDOCS_YML, tmp_path / "site")
    assert result.returncode == 0, f"mkdocs build --strict failed:\n{result.stderr[-4000:]}"
    assert (tmp_path / "site" / "api" / "readers" / "index.html").is_file()
    readers = (tmp_path / "site" / "api" / "readers" / "index.html").read_text(encoding="utf-8")
    assert 'id="memread.readers.lstmn.LSTMNConfig"' in readers  # generated from the code, not written by hand
    # each paper page's results and claims are generated from results/results.jsonl (reproduction/docs_tables.py)
    for page in ("lstmn", "nse", "short-attention", "iaa"):
        assert "<!-- reproduction:" in (DOCS / "papers" / f"{page}.md").read_text(encoding="utf-8"), page
        html = (tmp_path / "site" / "papers" / page / "index.html").read_text(encoding="utf-8")
        assert "reproduction:" not in html and "<th>verdict</th>" in html, page
    lstmn = (tmp_path / "site" / "papers" / "lstmn" / "index.html").read_text(encoding="utf-8")
    assert "PTB (each sentence alone), ppl (test)" in lstmn and "<code>ptb-lstmn-3layer</code>" in lstmn


def test_the_strict_build_refuses_a_page_outside_the_nav_and_a_broken_link(tmp_path):
    """mkdocs.yml's own settings (``validation``) make these two warnings, so ``--strict`` fails on them: a small
    site that inherits them, with one page left out of its nav and one link to a page that does not exist."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text("# Home\n\nSee [the other page](other.md) and [a missing one](missing.md).\n")
    (docs / "other.md").write_text("# Other\n\n[Home](index.md#home)\n")
    (docs / "orphan.md").write_text("# Orphan\n")
    config = tmp_path / "mkdocs.yml"
    # (hooks: none; the paper pages' hook is resolved beside the config file)
    config.write_text(f"INHERIT: {MKDOCS_YML}\ndocs_dir: {docs}\nhooks: []\nnav:\n  - index.md\n  - other.md\n")
    result = mkdocs_build(config, tmp_path / "site")
    assert result.returncode != 0
    assert "orphan.md" in result.stderr, result.stderr[-3000:]
    assert "missing.md" in result.stderr, result.stderr[-3000:]


def test_every_code_block_is_marked_as_something_the_tests_know():
    for language in ("python", "toml"):
        for where, marker, _ in blocks(language):
            assert marker in MARKERS, f"{where}: unknown marker 'docs-test: {marker}' (known: {sorted(MARKERS)})"


def test_the_toml_blocks_are_valid_configs():
    from memread.config import TrainConfig, experiment_from_dict
    from memread.criteria import CRITERIA
    from memread.data.pipelines import DATASETS
    from memread.heads import HEADS
    from memread.readers import READERS
    from memread.typed import from_dict

    registries = {"data": DATASETS, "reader": READERS, "head": HEADS, "criterion": CRITERIA}
    checked = []
    for where, marker, code in blocks("toml"):
        if marker == "skip":
            continue
        raw = tomllib.loads(code)
        if {"data", "reader", "head"} <= raw.keys():  # a whole experiment
            checked.append((where, experiment_from_dict(raw, where)))
            continue
        for section, table in raw.items():
            if section == "train":
                from_dict(TrainConfig, table, section, where)
            else:
                assert section in registries, f"{where}: unknown section [{section}]"
                assert table.get("name") in registries[section], f"{where}: [{section}] name {table.get('name')!r}"
                from_dict(registries[section][table["name"]].Config, table, section, where)
    experiments = {(cfg.data.name, cfg.reader.name, cfg.head.name, cfg.criterion.name) for _, cfg in checked}
    assert ("ptb", "lstm", "lm", "lm_nll") in experiments  # getting-started.md's experiment file


def run_block(where: str, code: str, monkeypatch) -> dict:
    """Run ``code`` as the body of a module of its own (dataclasses look their module up in ``sys.modules``)."""
    module = types.ModuleType("memread_docs_block")
    monkeypatch.setitem(sys.modules, module.__name__, module)
    exec(compile(code, where, "exec"), module.__dict__)
    return module.__dict__


def test_the_python_blocks_run_as_written(tmp_path, monkeypatch):
    """Every python block not marked otherwise, each alone in an empty folder."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MEMREAD_DATA", str(tmp_path))
    ran = {}
    for where, marker, code in blocks("python"):
        if marker == "run":
            ran[where] = run_block(where, code, monkeypatch)
    drop_in = [ns for where, ns in ran.items() if where.startswith("docs/getting-started.md") and "Classifier" in ns]
    assert len(drop_in) == 1, "getting-started.md lost its 'drop a reader into your own model' example"
    logits = drop_in[0]["logits"]
    assert tuple(logits.shape) == (2, 5)
    logits.sum().backward()  # a plain nn.Module: gradients flow back through the reader


@pytest.mark.slow
def test_the_python_blocks_after_the_quickstart_run_as_written(tmp_path, monkeypatch):
    """The blocks marked ``after-quickstart`` (``memread.load`` and ``predict``), in a folder where ``memread
    quickstart`` has run (fewer steps)."""
    from memread import cli
    from memread.inference.predictor import ClozeAnswer

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MEMREAD_DATA", str(tmp_path))
    assert cli.main(["quickstart", "--steps", "30"]) == 0
    after = [(where, code) for where, marker, code in blocks("python") if marker == "after-quickstart"]
    assert any("memread.load" in code for _, code in after)
    for where, code in after:
        namespace = run_block(where, code, monkeypatch)
        if where.startswith("docs/getting-started.md"):
            assert isinstance(namespace["result"], ClozeAnswer) and namespace["result"].answer in ("market", "office")
            assert sum(namespace["result"].probabilities.values()) == pytest.approx(1.0)
            assert namespace["results"][0].attention is not None
