"""Every request answered under overload, on a real server on loopback: a 200 or a 503 with
Retry-After for each, never a dropped connection, with clients that do not retry.

The cause of the dropped connections was keep-alive: the server closed idle connections after
5 s, as long as httpx keeps them, so a client that waited out a Retry-After sent its next request
on a connection the server was closing. Now a 503 closes its connection, and idle connections
outlive the clients' own keep-alive."""

from __future__ import annotations

import socket
import threading
import time
from collections import Counter

import httpx
from test_server_fixtures import make_gate, make_settings, running_server

from sourcegate.server.app import create_app

Q = "How often should I grease the bearings on pump P-200?"


def _request(sock: socket.socket, path: str) -> bytes:
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, "the server closed the connection"
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = int(next(line.split(b":")[1] for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")))
    while len(body) < length:
        body += sock.recv(65536)
    return head


def test_an_idle_connection_outlives_the_clients_keep_alive(tmp_path):
    settings = make_settings(tmp_path / "audit.jsonl")
    gate = make_gate(settings)
    with running_server(create_app(settings, gate), settings) as base:
        port = int(base.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
            assert _request(sock, "/healthz").startswith(b"HTTP/1.1 200")
            time.sleep(6)  # past httpx's keepalive_expiry (5 s), and the old server timeout (5 s)
            assert _request(sock, "/healthz").startswith(b"HTTP/1.1 200")
    gate.close()


def test_every_request_gets_a_response_under_overload(tmp_path):
    settings = make_settings(tmp_path / "audit.jsonl", serve_max_concurrency=1, serve_max_queue=2,
                             serve_queue_timeout_s=0.5)
    gate = make_gate(settings)
    outcomes: Counter[str] = Counter()
    errors: list[str] = []
    lock = threading.Lock()

    def client(deadline: float) -> None:
        # One pooled connection per client, no retries (httpx's default), Retry-After honoured.
        with httpx.Client(timeout=60) as http:
            while time.monotonic() < deadline:
                try:
                    r = http.post(base + "/v1/ask", json={"query": Q})
                except httpx.HTTPError as e:
                    with lock:
                        errors.append(f"{type(e).__name__}: {e}")
                    continue
                with lock:
                    outcomes[str(r.status_code)] += 1
                if r.status_code == 503:
                    assert r.headers.get("retry-after", "").isdigit()
                    assert r.headers.get("connection") == "close"
                    time.sleep(min(int(r.headers["retry-after"]), 2))
                else:
                    assert r.status_code == 200, r.text

    with running_server(create_app(settings, gate), settings) as base:
        deadline = time.monotonic() + 10
        threads = [threading.Thread(target=client, args=(deadline,)) for _ in range(40)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
    gate.close()
    assert errors == []
    assert outcomes["200"] > 0 and outcomes["503"] > 0, outcomes
    assert set(outcomes) <= {"200", "503"}


def test_idle_connections_are_capped_and_a_new_client_is_served(tmp_path):
    # About 1,000 idle sockets from one client used up a 1024 open-file limit: past the cap an idle
    # connection is closed to make room.
    settings = make_settings(tmp_path / "audit.jsonl", serve_max_connections=8)
    gate = make_gate(settings)
    idle: list[socket.socket] = []
    try:
        with running_server(create_app(settings, gate), settings) as base:
            port = int(base.rsplit(":", 1)[1])
            for _ in range(24):
                idle.append(socket.create_connection(("127.0.0.1", port)))
            time.sleep(0.5)
            assert httpx.get(base + "/healthz", timeout=10).status_code == 200

            def closed(s: socket.socket) -> bool:
                s.settimeout(0.05)
                try:
                    return s.recv(1) == b""
                except (socket.timeout, BlockingIOError):
                    return False
                except OSError:
                    return True

            deadline = time.monotonic() + 5
            while sum(closed(s) for s in idle) < 24 - 8 and time.monotonic() < deadline:
                time.sleep(0.1)
            assert sum(closed(s) for s in idle) >= 24 - 8
    finally:
        for s in idle:
            s.close()
        gate.close()


def test_the_open_file_limit_is_raised_at_start():
    import subprocess
    import sys

    code = ("import resource; from sourcegate.server.app import raise_open_files_limit, max_connections;"
            "from sourcegate.settings import Settings;"
            "soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE);"
            "resource.setrlimit(resource.RLIMIT_NOFILE, (min(256, hard), hard));"
            "n = raise_open_files_limit(); print(n, resource.getrlimit(resource.RLIMIT_NOFILE)[0], hard,"
            " max_connections(Settings(_env_file=None), n))")
    n, soft, hard, cap = map(int, subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                                 check=True).stdout.split())
    assert n == soft == hard
    assert 16 <= cap <= soft - 256 or hard <= 256 + 16
