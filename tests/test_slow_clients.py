"""Clients that hold connections: a request that never arrives whole (headers or body sent in
part, or nothing at all) is closed after SERVE_REQUEST_TIMEOUT_S, and GET /mcp holds no event
stream open (405: the stateless server sends no messages of its own). /openapi.json names a
server URL from the allowed hosts, never from an arbitrary Host header."""

from __future__ import annotations

import socket
import time

import httpx
from starlette.testclient import TestClient
from test_server_fixtures import make_gate, make_settings, running_server

from sourcegate.server.app import create_app

Q = "How often should I grease the bearings on pump P-200?"


def _closed_after(sock: socket.socket, limit: float) -> float | None:
    """Seconds until the server closed `sock` (None if it was still open after `limit`)."""
    sock.settimeout(limit)
    t0 = time.monotonic()
    try:
        while True:
            data = sock.recv(4096)
            if not data:
                return time.monotonic() - t0
    except (socket.timeout, TimeoutError):
        return None
    except ConnectionResetError:
        return time.monotonic() - t0


def test_half_sent_requests_are_closed_and_whole_ones_answered(tmp_path):
    settings = make_settings(tmp_path / "audit.jsonl", serve_request_timeout_s=1.0, mcp_allowed_hosts="")
    gate = make_gate(settings)
    try:
        with running_server(create_app(settings, gate), settings) as base:
            port = int(base.rsplit(":", 1)[1])
            partial = [b"", b"POST /v1/ask HTTP/1.1\r\nHost: 127.0.0.1\r\n",
                       b"POST /v1/ask HTTP/1.1\r\nHost: 127.0.0.1\r\ncontent-type: application/json\r\n"
                       b"content-length: 200\r\n\r\n{\"query\": "]
            socks = []
            for data in partial:
                s = socket.create_connection(("127.0.0.1", port))
                s.sendall(data)
                socks.append(s)
            for s, data in zip(socks, partial):
                closed = _closed_after(s, 10)
                assert closed is not None and closed < 5, (data, closed)
                s.close()
            # a slow but whole request, and keep-alive between requests, are not cut
            with httpx.Client(base_url=base, timeout=60) as client:
                for _ in range(2):
                    assert client.post("/v1/ask", json={"query": Q}).status_code == 200
                    time.sleep(1.5)  # idle past the request timeout: the keep-alive timeout governs that
            r = httpx.get(base + "/mcp", headers={"accept": "text/event-stream"}, timeout=5)
            assert r.status_code == 405 and r.headers["allow"] == "POST" and "POST" in r.json()["error"]
    finally:
        gate.close()


def test_openapi_servers_come_from_the_allowed_hosts(tmp_path):
    settings = make_settings(tmp_path / "audit.jsonl", mcp_allowed_hosts="agent.example.org")
    gate = make_gate(settings)
    try:
        with TestClient(create_app(settings, gate), base_url="http://127.0.0.1:8000") as client:
            doc = client.get("/openapi.json", headers={"host": "evil.example"}).json()
            assert doc["servers"] == [{"url": "https://agent.example.org"}]
            doc = client.get("/openapi.json", headers={"host": "agent.example.org"}).json()
            assert doc["servers"][0]["url"].startswith("http://agent.example.org")
            doc = client.get("/openapi.json", headers={"host": "localhost:8123"}).json()
            assert doc["servers"][0]["url"].startswith("http://localhost:8123")
    finally:
        gate.close()
    bare = make_settings(tmp_path / "audit2.jsonl", mcp_allowed_hosts="")
    gate = make_gate(bare)
    try:
        with TestClient(create_app(bare, gate)) as client:
            doc = client.get("/openapi.json", headers={"host": "evil.example:9000"}).json()
            assert "evil" not in doc["servers"][0]["url"] and doc["servers"][0]["url"].startswith("http://127.0.0.1")
    finally:
        gate.close()
