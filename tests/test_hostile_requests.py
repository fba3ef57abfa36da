"""Hostile requests on a real server on loopback: no body makes a 500, no name makes it answer a
rebinding page, no method name makes a metrics series, a damaged audit log makes no 500."""

from __future__ import annotations

import os
import random
import string
import subprocess
import sys

import httpx
import pytest
from test_server_fixtures import make_gate, make_settings, running_server

from sourcegate.server.app import create_app

Q = "How often should I grease the bearings on pump P-200?"
MCP_HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}

HOSTILE_BODIES = {
    "deeply nested": b'{"query": "x", "n": ' + b"[" * 30_000 + b"]" * 30_000 + b"}",
    "huge integer": b'{"query": "pump", "n": ' + b"7" * 5000 + b"}",
    "lone surrogate": b'{"query": "P-200 \\ud800 bearings"}',
    "invalid UTF-8": b'{"query": "P-200 \xff bearings"}',
    "not JSON": b"{query:",
    "query not a string": b'{"query": ["a"]}',
}


@pytest.fixture()
def server(tmp_path):
    settings = make_settings(tmp_path / "audit.jsonl", mcp_allowed_hosts="", max_body_bytes=200_000)
    gate = make_gate(settings)
    with running_server(create_app(settings, gate)) as base:
        yield base, settings
    gate.close()


@pytest.mark.parametrize("name", sorted(HOSTILE_BODIES))
def test_hostile_rest_bodies_get_400_or_422(server, name):
    base, settings = server
    for path in ("/v1/ask", "/v1/ask/stream"):
        r = httpx.post(base + path, content=HOSTILE_BODIES[name], headers={"content-type": "application/json"},
                       timeout=30)
        assert r.status_code in (400, 422), (path, r.status_code, r.text)
        assert "query" in r.json()["error"]
    # Refused, not answered: no audit record, and the refusal is counted.
    assert not settings.audit_path.exists() or settings.audit_path.read_bytes() == b""
    metrics = httpx.get(base + "/metrics").text
    assert 'sourcegate_asks_rejected_total{interface="rest",reason=' in metrics
    assert httpx.post(base + "/v1/ask", json={"query": Q}, timeout=60).status_code == 200


def test_a_lone_surrogate_is_refused_on_mcp_as_on_rest(server):
    base, _ = server
    call = (b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "search_procedures", '
            b'"arguments": {"query": "P-200 \\ud800"}}}')
    r = httpx.post(base + "/mcp", content=call, headers=MCP_HEADERS, timeout=30)
    assert r.status_code < 500, r.text
    if r.status_code == 200:  # a tool error the agent can read
        result = r.json()["result"]
        assert result["isError"] and "Unicode" in result["content"][0]["text"]
    assert "sourcegate_ask_errors_total{" not in httpx.get(base + "/metrics").text


def test_rest_answers_only_for_local_or_allowed_hosts(server):
    base, _ = server
    with httpx.Client(base_url=base, timeout=60) as client:
        for path, method in (("/v1/ask", "POST"), ("/v1/audit/" + "0" * 32, "GET")):
            kw = {"json": {"query": Q}} if method == "POST" else {}
            r = client.request(method, path, headers={"host": "attacker.example"}, **kw)
            assert r.status_code == 421 and "ALLOWED_HOSTS=attacker.example" in r.json()["error"]
            r = client.request(method, path, headers={"origin": "http://attacker.example"}, **kw)
            assert r.status_code == 403
        assert client.post("/v1/ask", json={"query": Q}, headers={"host": "attacker.example:8000"}).status_code == 421
        ok = client.post("/v1/ask", json={"query": Q}, headers={"origin": base})
        assert ok.status_code == 200
        assert client.get("/healthz", headers={"host": "attacker.example"}).status_code == 200


def test_a_key_does_not_lift_the_host_check(tmp_path):
    # One rule for /mcp and /v1: a name the server answers for is in ALLOWED_HOSTS, key or not, so
    # a name that works for REST works for MCP (Copilot Studio) too, and a refusal names the fix.
    settings = make_settings(tmp_path / "audit.jsonl", mcp_allowed_hosts="", mcp_api_key="k" * 20)
    gate = make_gate(settings)
    with running_server(create_app(settings, gate)) as base:
        r = httpx.post(base + "/v1/ask", json={"query": Q}, headers={"host": "search.example", "x-api-key": "k" * 20},
                       timeout=60)
        assert r.status_code == 421 and "ALLOWED_HOSTS=search.example" in r.json()["error"]
    gate.close()
    settings = make_settings(tmp_path / "audit2.jsonl", allowed_hosts="search.example", mcp_api_key="k" * 20)
    gate = make_gate(settings)
    with running_server(create_app(settings, gate)) as base:
        r = httpx.post(base + "/v1/ask", json={"query": Q}, headers={"host": "search.example", "x-api-key": "k" * 20},
                       timeout=60)
        assert r.status_code == 200
    gate.close()


def test_random_methods_make_no_metrics_series(server):
    base, _ = server
    rng = random.Random(7)
    with httpx.Client(base_url=base, timeout=30) as client:
        for _ in range(150):
            method = "".join(rng.choice(string.ascii_uppercase) for _ in range(12))
            assert client.request(method, "/v1/ask").status_code in (404, 405)
        metrics = client.get("/metrics").text
    methods = {line.split('method="')[1].split('"')[0] for line in metrics.splitlines()
               if line.startswith("sourcegate_http_requests_total")}
    assert methods <= {"GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH", "other"}
    assert "other" in methods


def test_a_damaged_audit_log_gives_no_500(server):
    base, settings = server
    ids = [httpx.post(base + "/v1/ask", json={"query": Q}, timeout=60).json()["audit_id"] for _ in range(3)]
    lines = settings.audit_path.read_bytes().splitlines()
    lines[0] = lines[0].replace(b"bearings", b"bear\xffngs", 1)
    settings.audit_path.write_bytes(b"\n".join(lines) + b"\n")
    later = httpx.get(f"{base}/v1/audit/{ids[2]}", timeout=30)
    assert later.status_code == 200 and later.json()["audit_id"] == ids[2]
    damaged = httpx.get(f"{base}/v1/audit/{ids[0]}", timeout=30)
    assert damaged.status_code == 409 and "invalid UTF-8" in damaged.json()["error"]
    # The next answer is still recorded, chained to the damaged line.
    assert httpx.post(base + "/v1/ask", json={"query": Q}, timeout=60).status_code == 200


def test_cli_prints_one_line_for_a_question_that_is_not_utf8(tmp_path):
    env = {**os.environ, "SOURCEGATE_HOME": str(tmp_path), "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"}
    r = subprocess.run([sys.executable, "-m", "sourcegate.cli", "ask", b"P-200 \xff"], capture_output=True,
                       env=env, timeout=120)
    err = r.stderr.decode("utf-8", "replace").strip()
    assert r.returncode == 1 and b"Traceback" not in r.stderr
    assert err.count("\n") == 0 and "0xff" in err and "not UTF-8" in err
