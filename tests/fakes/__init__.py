"""Local HTTP fakes that speak the real wire contracts of the services the judges call.

Each fake is a real server on 127.0.0.1 (port chosen by the OS) in a background thread, so the
code under test goes through its real HTTP client, retries and error parsing.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class JsonHandler(BaseHTTPRequestHandler):
    """Keep-alive HTTP/1.1 with JSON helpers; subclasses implement `do_POST`."""

    # HTTP/1.1 so pooled client connections are reused as they are against the real services.
    protocol_version = "HTTP/1.1"
    # Headers and body leave in one write (flushed after each request), and without Nagle, so
    # small responses are not held back by delayed ACKs.
    wbufsize = 64 * 1024
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass  # keep test output clean

    def read_body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def send_json(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        payload = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(payload)


class BackgroundServer:
    """Runs a `ThreadingHTTPServer` on an OS-chosen port until `stop()` (or the `with` block ends)."""

    handler_class: type[JsonHandler]

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        if self._httpd is None:
            raise RuntimeError("server not started: call start() or use it in a with block")
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> BackgroundServer:
        server = self
        handler = type("BoundHandler", (self.handler_class,), {"server_state": server})
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self):  # noqa: ANN204 - returns the concrete subclass
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
