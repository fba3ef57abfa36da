"""Secrets never leave the process: marker keys go through every interface (CLI, REST, MCP,
web page, OpenAPI, metrics, audit records, errors) and must appear in no response, log line or
audit record."""

from __future__ import annotations

import io
import json
import logging

import pytest
from click.testing import CliRunner
from starlette.testclient import TestClient
from test_server_fixtures import demo_home, make_settings

from fakes.typesafe_server import FakeTypeSafeServer
from sourcegate.cli import cli
from sourcegate.logs import configure_logging
from sourcegate.server.app import create_app
from sourcegate.service import SourceGate

TS_KEY = "sk-MARKER-typesafe-5e1f0c"
MCP_KEY = "MARKER-mcp-8a2d77"
METRICS_KEY = "MARKER-metrics-31b7"
LLM_KEY = "MARKER-llm-c44e"
WRONG_KEY = "MARKER-wrong-9d0e"
MARKERS = (TS_KEY, MCP_KEY, METRICS_KEY, LLM_KEY, WRONG_KEY, "MARKER-")
Q = "How often should I grease the bearings on pump P-200?"
MCP_HEADERS = {"accept": "application/json, text/event-stream", "x-api-key": MCP_KEY}


def _leaks(text: str) -> list[str]:
    return [m for m in MARKERS if m in text]


@pytest.fixture()
def captured_logs():
    stream = io.StringIO()
    configure_logging(logging.DEBUG, stream=stream)
    yield stream
    configure_logging(logging.WARNING, human=True)
    logging.getLogger().setLevel(logging.WARNING)


@pytest.mark.parametrize("service_key", [TS_KEY, "the-service-expects-another-key"])
def test_marker_secrets_reach_no_response_log_or_audit(tmp_path, captured_logs, service_key):
    """With the hosted judge working, and with it refusing the key (errors everywhere)."""
    with FakeTypeSafeServer(api_key=service_key) as fake:
        settings = make_settings(tmp_path / "audit.jsonl", judge="typesafe", typesafe_api_key=TS_KEY,
                                 typesafe_base_url=fake.url, llm_judge_api_key=LLM_KEY, mcp_api_key=MCP_KEY,
                                 metrics_api_key=METRICS_KEY, mcp_allowed_hosts="testserver", judge_retries=0)
        assert not _leaks(repr(settings)) and not _leaks(str(settings))
        gate = SourceGate(settings)
        seen: list[str] = []
        with TestClient(create_app(settings, gate)) as client:
            def keep(r):
                seen.append(f"{r.status_code} {dict(r.headers)} {r.text}")
                return r

            data = keep(client.post("/v1/ask", json={"query": Q}, headers={"x-api-key": MCP_KEY})).json()
            keep(client.post("/v1/ask", json={"query": Q}, headers={"x-sourcegate-interface": "web",
                                                                     "x-api-key": MCP_KEY}))
            keep(client.post("/v1/ask", json={"query": Q}, headers={"x-api-key": WRONG_KEY}))
            keep(client.post("/v1/ask", json={"query": "x" * 5000}, headers={"x-api-key": MCP_KEY}))
            keep(client.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                                           "params": {"name": "search_procedures", "arguments": {"query": Q}}},
                             headers=MCP_HEADERS))
            keep(client.post("/mcp", json={"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}},
                             headers=MCP_HEADERS))
            keep(client.post("/mcp", json={}, headers={"x-api-key": WRONG_KEY}))
            keep(client.get("/"))
            keep(client.get("/openapi.json"))
            keep(client.get("/healthz"))
            keep(client.get("/readyz"))
            keep(client.get("/metrics", headers={"x-api-key": METRICS_KEY}))
            keep(client.get("/metrics", headers={"authorization": f"Bearer {WRONG_KEY}"}))
            keep(client.get(f"/v1/audit/{data['audit_id']}", headers={"x-api-key": MCP_KEY}))
        gate.close()
        assert fake.request_count > 0, "the hosted judge was never called"
    if service_key != TS_KEY:
        assert data["degraded"] is True  # the error path was taken
    for text in seen:
        assert not _leaks(text), text[:500]
    audit = settings.audit_path.read_text(encoding="utf-8")
    assert audit.count("\n") == 3 and not _leaks(audit)
    logs = captured_logs.getvalue()
    assert '"event": "ask"' in logs and not _leaks(logs), logs[-2000:]


def test_marker_secrets_stay_out_of_the_cli(tmp_path, monkeypatch):
    with FakeTypeSafeServer(api_key="the-service-expects-another-key") as fake:
        for name, value in (("SOURCEGATE_HOME", str(demo_home())), ("AUDIT_LOG_PATH", str(tmp_path / "a.jsonl")),
                            ("TYPESAFE_API_KEY", TS_KEY), ("TYPESAFE_BASE_URL", fake.url),
                            ("LLM_JUDGE_API_KEY", LLM_KEY), ("MCP_API_KEY", MCP_KEY), ("JUDGE_RETRIES", "0")):
            monkeypatch.setenv(name, value)
        outputs = []
        for args in (["-vv", "--judge", "typesafe", "ask", Q, "--json"], ["--judge", "typesafe", "ask", Q],
                     ["-v", "status", "--json"], ["--judge", "typesafe", "judge", str(tmp_path / "in.jsonl")]):
            (tmp_path / "in.jsonl").write_text(json.dumps({"query": Q, "text": "Grease every 2,000 h."}) + "\n")
            r = CliRunner().invoke(cli, args)
            outputs.append(r.output + (r.stderr or ""))
            # The service rejects the key, so the answers are degraded: `ask` exits 3 for them.
            assert r.exit_code == (3 if "ask" in args else 0), r.output
    for text in outputs:
        assert not _leaks(text), text[-1500:]
    assert '"degraded": true' in outputs[0]
    assert not _leaks((tmp_path / "a.jsonl").read_text(encoding="utf-8"))


def test_the_web_page_has_a_strict_content_security_policy(tmp_path):
    import base64
    import hashlib
    import re

    settings = make_settings(tmp_path / "audit.jsonl")
    gate = SourceGate(settings)
    with TestClient(create_app(settings, gate)) as client:
        r = client.get("/")
    gate.close()
    csp = dict(part.strip().split(" ", 1) for part in r.headers["content-security-policy"].split(";"))
    assert "unsafe-inline" not in r.headers["content-security-policy"]
    assert "unsafe-eval" not in r.headers["content-security-policy"]
    assert csp["default-src"] == "'none'" and csp["frame-ancestors"] == "'none'" and csp["connect-src"] == "'self'"
    for tag, directive in (("script", "script-src"), ("style", "style-src")):
        bodies = re.findall(rf"<{tag}>(.*?)</{tag}>", r.text, re.S)
        assert bodies
        for body in bodies:  # the page's own inline code, allowed by its hash and nothing else
            digest = base64.b64encode(hashlib.sha256(body.encode()).digest()).decode()
            assert f"'sha256-{digest}'" in csp[directive]
    assert not re.search(r"<[^>]+\son[a-z]+=", r.text), "inline event handlers would be blocked"
    assert not re.search(r"<[^>]+\sstyle=", r.text), "inline style attributes would be blocked"
    assert r.headers["x-content-type-options"] == "nosniff" and r.headers["x-frame-options"] == "DENY"
