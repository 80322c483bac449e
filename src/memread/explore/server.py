"""``memread explore``'s server: the page and one JSON endpoint, on 127.0.0.1 only (standard library).

- ``GET /`` (and ``/explore.js``, ``/explore.css``): the page, from the package's ``static/`` folder;
- ``GET /api/info``: the model (task, reader, head, token limit) and examples of a split in the task's
  record format;
- ``POST /api/predict`` with ``{"input": TEXT_OR_RECORD}`` (and for a translation model optionally
  ``"beam": K``, 1 = greedy): the view of ``predictor.predict(input, attention=True)``
  (:func:`memread.explore.view.build_view`), or ``{"error": "one line"}`` with status 400.

Requests from other origins are refused with 403: the ``Host`` header must name this server
(``127.0.0.1:PORT`` or ``localhost:PORT``, which also stops DNS rebinding), an ``Origin`` header, when
sent, must be this server's, and a POST must be ``application/json`` (a cross-origin page cannot send
that without a preflight, which this server never grants). A request body over :data:`MAX_BODY` bytes
is refused with 413.
"""

from __future__ import annotations

import json
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import Any

from memread.errors import MemreadError
from memread.explore.view import BEAM, MAX_TOKENS, build_view, example_records, model_info

MAX_BODY = 2 * 1024 * 1024  # bytes of one request (a paste far longer than MAX_TOKENS still gets its message)
DRAIN_LIMIT = 8 * MAX_BODY  # bytes of a refused request read (and dropped) before its 413, so the client hears it
HOST = "127.0.0.1"
ASSETS = {"/": ("index.html", "text/html; charset=utf-8"), "/index.html": ("index.html", "text/html; charset=utf-8"),
          "/explore.js": ("explore.js", "text/javascript; charset=utf-8"),
          "/explore.css": ("explore.css", "text/css; charset=utf-8")}


def asset(name: str) -> str:
    return resources.files("memread.explore").joinpath("static", name).read_text(encoding="utf-8")


class ExploreServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, predictor, port: int = 0, split: str = "test", max_tokens: int = MAX_TOKENS, examples: int = 20,
                 beam: int = BEAM):
        self.predictor = predictor
        self.max_tokens = max_tokens
        self.beam = beam  # a translation's beam when a request names none
        self.lock = threading.Lock()  # one reading at a time: the model is not shared across threads
        self.split = split
        self.examples = example_records(predictor, split, examples)
        super().__init__((HOST, port), Handler)

    @property
    def port(self) -> int:
        return self.server_address[1]

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}/"

    def allowed_hosts(self) -> set[str]:
        return {f"127.0.0.1:{self.port}", f"localhost:{self.port}"}

    def view(self, item: Any, beam: Any = None) -> dict:
        with self.lock:
            return build_view(self.predictor, item, self.max_tokens, self.beam if beam is None else beam)


class Handler(BaseHTTPRequestHandler):
    server: ExploreServer
    server_version = "memread-explore"

    def log_message(self, format: str, *args) -> None:  # quiet: the terminal shows the address only
        pass

    def _send(self, status: int, body: bytes, ctype: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; connect-src 'self'")
        self.end_headers()
        self.wfile.write(body)

    def _json(self, status: int, data: Any) -> None:
        self._send(status, json.dumps(data).encode("utf-8"), "application/json")

    def _foreign(self) -> str | None:
        """Why this request comes from elsewhere, or None when it is this server's own page (or a local client)."""
        host = self.headers.get("Host", "")
        if host not in self.server.allowed_hosts():
            return f"host {host!r} is not this server"
        origin = self.headers.get("Origin")
        if origin is not None and origin not in {f"http://{h}" for h in self.server.allowed_hosts()}:
            return f"origin {origin!r} is not this server"
        return None

    def do_GET(self) -> None:  # noqa: N802
        why = self._foreign()
        if why:
            return self._json(HTTPStatus.FORBIDDEN, {"error": f"refused: {why}"})
        path = self.path.split("?", 1)[0]
        if path in ASSETS:
            name, ctype = ASSETS[path]
            return self._send(HTTPStatus.OK, asset(name).encode("utf-8"), ctype)
        if path == "/api/info":
            return self._json(HTTPStatus.OK, {"model": {**model_info(self.server.predictor),
                                                        "max_tokens": self.server.max_tokens, "beam": self.server.beam},
                                              "split": self.server.split, "examples": self.server.examples})
        return self._json(HTTPStatus.NOT_FOUND, {"error": f"no such page: {path}"})

    def do_POST(self) -> None:  # noqa: N802
        why = self._foreign()
        if why:
            return self._json(HTTPStatus.FORBIDDEN, {"error": f"refused: {why}"})
        if self.path.split("?", 1)[0] != "/api/predict":
            return self._json(HTTPStatus.NOT_FOUND, {"error": f"no such endpoint: {self.path}"})
        if self.headers.get("Content-Type", "").split(";")[0].strip() != "application/json":
            return self._json(HTTPStatus.UNSUPPORTED_MEDIA_TYPE, {"error": "send the input as application/json"})
        try:
            length = int(self.headers.get("Content-Length", "0"))
        except ValueError:
            length = -1
        if length < 0 or length > MAX_BODY:
            self.close_connection = True
            # read what the client is sending (up to a bound) before answering: a socket closed under a client
            # still writing resets the connection, and the page would show a network error, not this message
            left = min(max(length, 0), DRAIN_LIMIT)
            while left > 0 and (chunk := self.rfile.read(min(left, 1 << 16))):
                left -= len(chunk)
            return self._json(HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
                              {"error": f"the request is {length} bytes; explore takes at most {MAX_BODY} bytes "
                                        f"(and {self.server.max_tokens} tokens)"})
        try:
            body = json.loads(self.rfile.read(length) or b"null")
        except ValueError as e:
            return self._json(HTTPStatus.BAD_REQUEST, {"error": f"the request is not valid JSON ({e})"})
        if not isinstance(body, dict) or "input" not in body:
            return self._json(HTTPStatus.BAD_REQUEST, {"error": 'send {"input": TEXT_OR_RECORD}'})
        try:
            view = self.server.view(body["input"], body.get("beam"))
        except MemreadError as e:
            return self._json(HTTPStatus.BAD_REQUEST, {"error": str(e).splitlines()[0] if str(e) else "bad input"})
        return self._json(HTTPStatus.OK, view)


def serve(predictor, port: int = 0, split: str = "test", max_tokens: int = MAX_TOKENS, beam: int = BEAM) -> ExploreServer:
    """A server bound to 127.0.0.1 (``port`` 0: a free one), not yet serving: call ``serve_forever()``.
    ``beam``: a translation model's beam when a request names none (1: greedy)."""
    return ExploreServer(predictor, port, split, max_tokens, beam=beam)
