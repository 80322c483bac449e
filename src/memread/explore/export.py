"""``memread explore RUN --html OUT.html``: the page for given inputs as one self-contained file.

The page's stylesheet and script are inlined, and the views (:func:`memread.explore.view.build_view`)
are embedded as JSON (``window.MEMREAD_STATIC``): the file opens anywhere, with no server and no network.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

from memread.explore.server import asset
from memread.explore.view import BEAM, MAX_TOKENS, build_view, model_info


def _script_json(data: Any) -> str:
    # inside <script>: no "</" (a "</script>" in a text would end the element), no U+2028/9 line breaks
    return (json.dumps(data).replace("</", "<\\/").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


def page(model: dict, views: Sequence[dict]) -> str:
    html = asset("index.html")
    css, js = asset("explore.css"), asset("explore.js").replace("</", "<\\/")
    data = _script_json({"model": model, "views": list(views)})
    html = html.replace('<link rel="stylesheet" href="explore.css">', f"<style>\n{css}</style>")
    html = html.replace('<script src="explore.js"></script>',
                        f"<script>window.MEMREAD_STATIC = {data};</script>\n<script>\n{js}</script>")
    return html


def write_html(predictor, inputs: Sequence[Any], out: Path, max_tokens: int = MAX_TOKENS, beam: int = BEAM) -> Path:
    """The views of ``inputs`` (strings or records) in one HTML file at ``out`` (``beam``: a translation's)."""
    views = [build_view(predictor, item, max_tokens, beam) for item in inputs]
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(page({**model_info(predictor), "max_tokens": max_tokens, "beam": beam}, views), encoding="utf-8")
    return out
