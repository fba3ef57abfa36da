"""Overload and readiness: a bounded number of questions at once, a bounded queue, 503 with
Retry-After past it (a tool error over MCP), /healthz (alive) apart from /readyz (ready), and no
answer without an audit record when auditing is on."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from starlette.testclient import TestClient
from test_server_fixtures import KeywordJudge, make_gate, make_settings, running_server

from sourcegate.audit import read_records
from sourcegate.server.app import _GateHolder, create_app

Q = "How often should I grease the bearings on pump P-200?"
MCP_HEADERS = {"accept": "application/json, text/event-stream"}


class HeldJudge(KeywordJudge):
    """Scores like KeywordJudge once `release` is set; counts the questions being judged."""

    def __init__(self):
        super().__init__()
        self.release = threading.Event()
        self.entered = threading.Semaphore(0)

    def judge(self, query, passages):
        self.entered.release()
        assert self.release.wait(30), "test judge never released"
        return super().judge(query, passages)


def _wait_entered(judge: HeldJudge, n: int = 1) -> None:
    for _ in range(n):
        assert judge.entered.acquire(timeout=30), "the question never reached the judge"


def _mcp_call(query: str) -> dict:
    return {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "search_procedures", "arguments": {"query": query}}}


def test_past_the_queue_a_question_gets_503_with_retry_after(tmp_path):
    settings = make_settings(tmp_path / "audit.jsonl", serve_max_concurrency=1, serve_max_queue=1,
                             serve_queue_timeout_s=30)
    judge = HeldJudge()
    gate = make_gate(settings, judge)
    with running_server(create_app(settings, gate)) as base, ThreadPoolExecutor(4) as pool:
        first = pool.submit(httpx.post, base + "/v1/ask", json={"query": Q}, timeout=60)
        _wait_entered(judge)  # one question runs
        second = pool.submit(httpx.post, base + "/v1/ask", json={"query": Q}, timeout=60)
        deadline = time.monotonic() + 10
        while httpx.get(base + "/healthz").json()["queued"] < 1:  # one waits
            assert time.monotonic() < deadline, "the second question never queued"
            time.sleep(0.02)
        third = httpx.post(base + "/v1/ask", json={"query": Q}, timeout=10)
        assert third.status_code == 503, third.text
        assert int(third.headers["retry-after"]) >= 1
        assert "busy" in third.json()["error"]
        mcp = httpx.post(base + "/mcp", json=_mcp_call(Q), headers=MCP_HEADERS, timeout=10)
        assert mcp.status_code == 200
        result = mcp.json()["result"]
        assert result["isError"] is True
        assert "busy" in result["content"][0]["text"] and "again in" in result["content"][0]["text"]
        metrics = httpx.get(base + "/metrics").text
        judge.release.set()
        assert first.result().status_code == 200 and second.result().status_code == 200
    gate.close()
    assert 'sourcegate_asks_rejected_total{interface="rest",reason="overloaded"} 1.0' in metrics
    assert 'sourcegate_asks_rejected_total{interface="mcp",reason="overloaded"} 1.0' in metrics
    assert "sourcegate_asks_in_flight 1.0" in metrics and "sourcegate_asks_queued 1.0" in metrics
    # Audit lines match the answers given, not the questions turned away.
    assert len(list(read_records(settings.audit_path))) == 2


def test_a_question_that_waits_past_the_limit_is_turned_away(tmp_path):
    settings = make_settings(tmp_path / "audit.jsonl", serve_max_concurrency=1, serve_max_queue=8,
                             serve_queue_timeout_s=0.3)
    judge = HeldJudge()
    gate = make_gate(settings, judge)
    with running_server(create_app(settings, gate)) as base, ThreadPoolExecutor(2) as pool:
        first = pool.submit(httpx.post, base + "/v1/ask", json={"query": Q}, timeout=60)
        _wait_entered(judge)
        t0 = time.monotonic()
        late = httpx.post(base + "/v1/ask", json={"query": Q}, timeout=10)
        waited = time.monotonic() - t0
        judge.release.set()
        assert first.result().status_code == 200
    gate.close()
    assert late.status_code == 503 and "queue timeout" in late.json()["error"]
    assert late.headers["retry-after"].isdigit()
    assert waited < 5


def test_healthz_is_alive_readyz_is_ready(tmp_path):
    settings = make_settings(tmp_path / "audit.jsonl")
    holder = _GateHolder(settings, None)
    assert holder.readiness() == (False, "starting")
    gate = make_gate(settings)
    with TestClient(create_app(settings, gate)) as client:
        alive = client.get("/healthz")
        assert alive.status_code == 200 and alive.json()["alive"] is True and alive.json()["ready"] is True
        assert client.get("/readyz").status_code == 200
    gate.close()


def test_no_answer_while_the_audit_log_cannot_be_opened(tmp_path):
    blocked = tmp_path / "audit-is-a-folder"
    blocked.mkdir()
    settings = make_settings(blocked, mcp_allowed_hosts="testserver")
    gate = make_gate(settings)
    with TestClient(create_app(settings, gate)) as client:
        health = client.get("/healthz")
        assert health.status_code == 200 and health.json()["ready"] is False
        assert health.json()["state"] == "audit_log_unwritable"
        ready = client.get("/readyz")
        assert ready.status_code == 503
        r = client.post("/v1/ask", json={"query": Q})
        assert r.status_code == 503 and "audit log" in r.json()["error"]
        assert str(tmp_path) not in r.text, "server paths are for the operator's log, not for clients"
        mcp = client.post("/mcp", json=_mcp_call(Q), headers=MCP_HEADERS).json()["result"]
        assert mcp["isError"] is True and "audit log" in mcp["content"][0]["text"]
        # Fixed by the operator: ready again without a restart.
        blocked.rmdir()
        assert client.get("/readyz").status_code == 200
        assert client.post("/v1/ask", json={"query": Q}).status_code == 200
    gate.close()


@pytest.mark.skipif(not __import__("os").path.exists("/dev/full"), reason="needs /dev/full")
def test_an_answer_whose_audit_write_fails_is_not_given():
    from pathlib import Path

    settings = make_settings(Path("/dev/full"), mcp_allowed_hosts="testserver")  # opens fine, every write fails: a full disk
    gate = make_gate(settings)
    with TestClient(create_app(settings, gate)) as client:
        r = client.post("/v1/ask", json={"query": Q})
        assert r.status_code == 503, r.text
        assert "audit log" in r.json()["error"] and "evidence" not in r.json()
        mcp = client.post("/mcp", json=_mcp_call(Q), headers=MCP_HEADERS).json()["result"]
        assert mcp["isError"] is True and "structuredContent" not in mcp
    gate.close()


def test_metrics_have_their_own_key(tmp_path):
    settings = make_settings(tmp_path / "audit.jsonl", metrics_api_key="scrape-key")
    gate = make_gate(settings)
    with TestClient(create_app(settings, gate)) as client:
        assert client.post("/v1/ask", json={"query": Q}).status_code == 200  # no MCP_API_KEY: open
        assert client.get("/metrics").status_code == 401
        assert client.get("/metrics", headers={"x-api-key": "wrong"}).status_code == 401
        r = client.get("/metrics", headers={"authorization": "Bearer scrape-key"})
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
        assert 'sourcegate_asks_total{interface="rest",status="answer_from_evidence"} 1.0' in r.text
    gate.close()


def test_audit_lookups_wait_their_turn_like_questions(tmp_path):
    # A lookup reads the audit log: with every slot taken and no queue, it is turned away with
    # Retry-After rather than competing with the questions for the CPU and the disk.
    settings = make_settings(tmp_path / "audit.jsonl", serve_max_concurrency=1, serve_max_queue=0)
    judge = HeldJudge()
    gate = make_gate(settings, judge)
    with running_server(create_app(settings, gate)) as base, ThreadPoolExecutor(1) as pool:
        judge.release.set()
        audit_id = httpx.post(base + "/v1/ask", json={"query": Q}, timeout=60).json()["audit_id"]
        _wait_entered(judge)
        judge.release.clear()
        held = pool.submit(httpx.post, base + "/v1/ask", json={"query": Q}, timeout=60)
        _wait_entered(judge)
        busy = httpx.get(f"{base}/v1/audit/{audit_id}", timeout=10)
        assert busy.status_code == 503 and busy.headers["retry-after"].isdigit()
        judge.release.set()
        assert held.result().status_code == 200
        assert httpx.get(f"{base}/v1/audit/{audit_id}", timeout=10).status_code == 200
    gate.close()
