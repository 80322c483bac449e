"""``memread explore``: a local page that shows what a trained reader attended to, for text typed into it.

:mod:`memread.explore.view` turns ``predict(..., attention=True)`` into the page's JSON,
:mod:`memread.explore.server` serves the page on 127.0.0.1, :mod:`memread.explore.export` writes it
as one self-contained HTML file (``--html``). The page itself is ``static/`` (no libraries, no network).
"""

from memread.explore.export import write_html
from memread.explore.server import serve
from memread.explore.view import MAX_TOKENS, build_view

__all__ = ["MAX_TOKENS", "build_view", "serve", "write_html"]
