"""The HTTP app in process: REST ask, auth, limits, health, metrics, OpenAPI, audit records."""

from __future__ import annotations

import json

import pytest
from starlette.testclient import TestClient
from test_server_fixtures import make_gate, make_settings

from sourcegate.audit import read_records, verify
from sourcegate.server.app import create_app

KEY = "test-key-0123456789"
Q = "How often should I grease the bearings on pump P-200?"


@pytest.fixture()
def app_env(tmp_path):
    settings = make_settings(tmp_path / "audit.jsonl", mcp_api_key=KEY, mcp_allowed_hosts="testserver",
                             max_body_bytes=2000, max_query_chars=300)
    gate = make_gate(settings)
    app = create_app(settings, gate)
    with TestClient(app) as client:
        yield client, settings
    gate.close()


def _find_refs(obj) -> list[str]:
    found = []
    if isinstance(obj, dict):
        for k, v in obj.items():
            if k in ("$ref", "$defs", "definitions"):
                found.append(k)
            found += _find_refs(v)
    elif isinstance(obj, list):
        for v in obj:
            found += _find_refs(v)
    return found


def test_rest_ask_returns_the_output_contract(app_env):
    client, settings = app_env
    r = client.post("/v1/ask", json={"query": Q}, headers={"x-api-key": KEY})
    assert r.status_code == 200, r.text
    data = r.json()
    assert set(data) >= {"status", "guidance", "answer", "evidence", "conflicts", "excluded", "audit_id", "model",
                         "timings_ms"}
    assert data["status"] == "answer_from_evidence"
    assert data["evidence"] and all({"id", "doc_id", "title", "url", "text", "version", "scores"} <= set(p)
                                    for p in data["evidence"])
    assert all(len(p["scores"]) == 5 for p in data["evidence"])
    assert r.headers["x-request-id"]
    records = [rec for _, rec, _ in read_records(settings.audit_path)]
    assert [rec["audit_id"] for rec in records] == [data["audit_id"]]
    assert records[0]["interface"] == "rest"


def test_web_interface_is_recorded_as_web(app_env):
    client, settings = app_env
    r = client.post("/v1/ask", json={"query": Q}, headers={"x-api-key": KEY, "x-sourcegate-interface": "web"})
    assert r.status_code == 200
    rec = next(rec for _, rec, _ in read_records(settings.audit_path) if rec["audit_id"] == r.json()["audit_id"])
    assert rec["interface"] == "web"


def test_api_key_is_required_except_for_health(app_env):
    client, _ = app_env
    for headers in ({}, {"x-api-key": "wrong"}):
        r = client.post("/v1/ask", json={"query": Q}, headers=headers)
        assert r.status_code == 401
        assert "x-api-key" in r.json()["error"]
    assert client.get("/v1/audit/abc").status_code == 401
    assert client.post("/mcp", json={}).status_code == 401
    assert client.get("/healthz").status_code == 200
    assert client.get("/healthz").json()["status"] == "ok"
    assert client.get("/readyz").status_code == 200
    # /metrics is behind the key too (Prometheus sends it as a bearer token).
    assert client.get("/metrics").status_code == 401
    assert client.get("/metrics", headers={"authorization": f"Bearer {KEY}"}).status_code == 200


def test_body_cap_gives_a_clear_413(app_env):
    client, _ = app_env
    big = json.dumps({"query": "x" * 5000})
    r = client.post("/v1/ask", content=big, headers={"x-api-key": KEY, "content-type": "application/json"})
    assert r.status_code == 413
    assert "MAX_BODY_BYTES" in r.json()["error"]

    # Without a Content-Length (chunked upload) the cap still holds.
    def chunks():
        for _ in range(10):
            yield b"x" * 500

    r = client.post("/v1/ask", content=chunks(), headers={"x-api-key": KEY, "content-type": "application/json"})
    assert r.status_code == 413
    # MCP requests are capped too.
    r = client.post("/mcp", content=big, headers={"x-api-key": KEY, "content-type": "application/json"})
    assert r.status_code == 413


def test_query_cap_and_bad_bodies(app_env):
    client, _ = app_env
    r = client.post("/v1/ask", json={"query": "y" * 400}, headers={"x-api-key": KEY})
    assert r.status_code == 422
    assert "MAX_QUERY_CHARS" in r.json()["error"]
    r = client.post("/v1/ask", json={"query": "   "}, headers={"x-api-key": KEY})
    assert r.status_code == 422 and "empty" in r.json()["error"]
    r = client.post("/v1/ask", content=b"{not json", headers={"x-api-key": KEY, "content-type": "application/json"})
    assert r.status_code == 400
    r = client.post("/v1/ask", json={"question": Q}, headers={"x-api-key": KEY})
    assert r.status_code == 422 and "query" in r.json()["error"]


def test_audit_record_is_retrievable_and_verifies(app_env):
    client, _ = app_env
    data = client.post("/v1/ask", json={"query": Q}, headers={"x-api-key": KEY}).json()
    r = client.get(f"/v1/audit/{data['audit_id']}", headers={"x-api-key": KEY})
    assert r.status_code == 200
    rec = r.json()
    assert rec["audit_id"] == data["audit_id"] and rec["query"] == Q and verify(rec)
    assert r.headers["x-audit-verified"] == "true"
    assert {c["id"] for c in rec["candidates"]} >= {p["id"] for p in data["evidence"]}
    missing = client.get("/v1/audit/" + "0" * 32, headers={"x-api-key": KEY})
    assert missing.status_code == 404 and "error" in missing.json()


def test_metrics_count_requests_by_interface_and_status(app_env):
    client, _ = app_env
    client.post("/v1/ask", json={"query": Q}, headers={"x-api-key": KEY})
    client.post("/v1/ask", json={"query": Q})  # 401
    text = client.get("/metrics", headers={"x-api-key": KEY}).text
    assert 'sourcegate_asks_total{interface="rest",status="answer_from_evidence"} 1' in text
    assert 'sourcegate_asks_rejected_total{interface="rest",reason="auth"} 1' in text
    assert 'sourcegate_ask_duration_seconds_count{interface="rest"} 1' in text
    assert "sourcegate_judge_errors_total 0" in text
    assert "# TYPE sourcegate_ask_duration_seconds histogram" in text
    assert Q not in text


def test_openapi_is_inline_and_names_the_operation(app_env):
    client, _ = app_env
    doc = client.get("/openapi.json").json()
    assert doc["openapi"].startswith("3.")
    assert not _find_refs(doc)
    op = doc["paths"]["/v1/ask"]["post"]
    assert op["operationId"] == "AskQuestion"
    assert op["requestBody"]["content"]["application/json"]["schema"]["required"] == ["query"]
    assert doc["components"]["securitySchemes"]["apiKey"] == {"type": "apiKey", "in": "header", "name": "x-api-key"}
    assert doc["servers"][0]["url"].startswith("http://testserver")


def test_openapi_for_an_unknown_host_names_the_port_served_on(tmp_path):
    # a Host the server does not answer for (no port in it) gave http://127.0.0.1:80
    import httpx

    from test_server_fixtures import running_server

    settings = make_settings(tmp_path / "audit.jsonl", mcp_allowed_hosts="")
    gate = make_gate(settings)
    try:
        with running_server(create_app(settings, gate), settings) as base:
            port = int(base.rsplit(":", 1)[1])
            doc = httpx.get(base + "/openapi.json", headers={"host": "evil.example"}, timeout=30).json()
            assert doc["servers"][0]["url"] == f"http://127.0.0.1:{port}"
    finally:
        gate.close()


def test_mcp_rejects_unknown_host_headers(tmp_path):
    # DNS-rebinding protection: only localhost and MCP_ALLOWED_HOSTS may reach /mcp.
    settings = make_settings(tmp_path / "audit.jsonl", mcp_allowed_hosts="agents.example.org")
    gate = make_gate(settings)
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    headers = {"accept": "application/json, text/event-stream"}
    with TestClient(create_app(settings, gate), base_url="http://evil.example.com") as client:
        assert client.post("/mcp", json=body, headers=headers).status_code == 421
    with TestClient(create_app(settings, gate), base_url="https://agents.example.org") as client:
        assert client.post("/mcp", json=body, headers=headers).status_code == 200
    gate.close()


def test_a_forged_unkeyed_record_in_a_keyed_log_is_not_verified(tmp_path):
    from sourcegate.audit import canonical_json, seal

    settings = make_settings(tmp_path / "audit.jsonl", mcp_api_key=KEY, audit_hmac_secret="server-key")
    gate = make_gate(settings)
    with TestClient(create_app(settings, gate)) as client:
        data = client.post("/v1/ask", json={"query": Q}, headers={"x-api-key": KEY}).json()
        r = client.get(f"/v1/audit/{data['audit_id']}", headers={"x-api-key": KEY})
        assert r.status_code == 200 and r.headers["x-audit-verified"] == "true"
        # Someone who can write the file, without the key, appends a record sealed with plain SHA-256.
        forged = seal({"audit_id": "f" * 32, "status": "answer_from_evidence", "answer": "forged"})
        with open(settings.audit_path, "a", encoding="utf-8") as f:
            f.write(canonical_json(forged) + "\n")
        r = client.get("/v1/audit/" + "f" * 32, headers={"x-api-key": KEY})
        assert r.status_code == 200 and r.json()["answer"] == "forged"
        assert r.headers["x-audit-verified"] == "false"
    gate.close()


@pytest.mark.parametrize("key", ["clé-secrète", "k\u00e9y", "key\u200b", "tab\tkey", " padded", ""])
def test_serve_refuses_a_key_no_client_can_send(key, tmp_path):
    from click.testing import CliRunner

    from sourcegate.cli import cli
    from test_server_fixtures import demo_home

    for var in ("MCP_API_KEY", "METRICS_API_KEY"):
        r = CliRunner().invoke(cli, ["--home", str(demo_home()), "serve", "--port", "0"], env={var: key})
        assert r.exit_code == 1 and var in r.output and "Traceback" not in r.output, r.output
        assert "ASCII" in r.output or "space" in r.output or "set but empty" in r.output


def test_an_ascii_key_is_matched(tmp_path):
    from sourcegate.server.app import key_problem

    assert key_problem(make_settings(tmp_path / "a.jsonl", mcp_api_key="Az09-_.~!$&'()*+,;=:@ x")) is None
