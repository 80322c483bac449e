"""MkDocs hook (``mkdocs.yml``: ``hooks``): a docs page's ``<!-- reproduction: PAPER -->`` line becomes that
paper's results and claims (:func:`reproduction.render.paper_markdown`), generated from ``results/results.jsonl``
at every build, so the paper pages show what ``results/REPRODUCTION.md`` shows and never a copy of it."""

from __future__ import annotations

import re
import sys
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parent.parent
if str(CHECKOUT) not in sys.path:  # MkDocs loads a hook by its path
    sys.path.insert(0, str(CHECKOUT))

MARKER = re.compile(r"^<!-- reproduction: ([a-z]+) -->$", re.MULTILINE)


def on_page_markdown(markdown: str, page, config, files) -> str:
    if not MARKER.search(markdown):
        return markdown
    from reproduction.ledger import load_results, results_path
    from reproduction.render import paper_markdown
    from reproduction.rows import rows

    table, results = rows(), load_results(results_path(None))
    return MARKER.sub(lambda m: paper_markdown(m.group(1), table, results), markdown)
