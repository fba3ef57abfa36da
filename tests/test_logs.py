"""Logs hold metadata only: never the question, passages, answer or a secret."""

from __future__ import annotations

import io
import json
import logging

import pytest
from starlette.testclient import TestClient
from test_server_fixtures import KeywordJudge

from sourcegate.cli import run_ingest
from sourcegate.logs import JsonFormatter, ask_log_fields, log_ask
from sourcegate.server.app import create_app
from sourcegate.service import AskResult, ExcludedOut, SourceGate
from sourcegate.settings import Settings

Q_MARK = "qmarker7f3a"
P_MARK = "pmarker91bd"
KEY = "sk-secret-log-test-5be1c0"
QUERY = f"How do I calibrate the zephyr valve {Q_MARK}?"


@pytest.fixture()
def marked_home(tmp_path):
    docs = [{"id": "DOC-ZEPHYR", "title": "Zephyr valve calibration", "url": "https://example.org/zephyr",
             "text": f"Calibrate the zephyr valve every 90 days with the torque gauge. Reference {P_MARK}. "
                     "Record the calibration in the valve log."}]
    (tmp_path / "docs.json").write_text(json.dumps(docs), encoding="utf-8")
    home = tmp_path / "home"
    report = run_ingest(Settings(_env_file=None, home=home), [tmp_path / "docs.json"], prune=False, quiet=True)
    assert not report.failed
    return home


@pytest.fixture()
def captured():
    """Every log record of every logger, formatted as the service formats them."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    handler.setLevel(logging.DEBUG)
    root = logging.getLogger()
    old_level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        yield stream
    finally:
        root.removeHandler(handler)
        root.setLevel(old_level)


def test_no_content_or_secret_in_logs(marked_home, captured, tmp_path):
    settings = Settings(_env_file=None, home=marked_home, mcp_api_key=KEY, mcp_allowed_hosts="testserver",
                        audit_log_path=tmp_path / "audit.jsonl")
    gate = SourceGate(settings, judge=KeywordJudge())
    with TestClient(create_app(settings, gate)) as client:
        r = client.post("/v1/ask", json={"query": QUERY}, headers={"x-api-key": KEY, "x-request-id": "req-123"})
        assert r.status_code == 200
        data = r.json()
        # The content is really there, in the response and the audit log...
        assert P_MARK in json.dumps(data) and data["status"] == "answer_from_evidence"
        assert Q_MARK in settings.audit_path.read_text(encoding="utf-8")
        client.post("/v1/ask", json={"query": QUERY}, headers={"x-api-key": "wrong-" + KEY})
        client.post("/mcp", headers={"x-api-key": KEY, "accept": "application/json, text/event-stream"},
                    json={"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                          "params": {"name": "search_procedures", "arguments": {"query": QUERY}}})
    # ...and the CLI path logs through the same hook.
    result = gate.ask(QUERY, interface="cli")
    log_ask(result, "cli", settings, None, gate)
    gate.close()

    text = captured.getvalue()
    # ...but never in the logs.
    for secret in (Q_MARK, P_MARK, KEY, "zephyr", "Calibrate"):
        assert secret.lower() not in text.lower(), f"{secret!r} leaked into the logs"

    asks = [json.loads(line) for line in text.splitlines() if line.startswith("{") and '"event": "ask"' in line]
    assert {a["interface"] for a in asks} == {"rest", "mcp", "cli"}
    rest = next(a for a in asks if a["interface"] == "rest")
    assert rest["request_id"] == "req-123" and rest["audit_id"] == data["audit_id"]
    assert rest["judge_backend"] == "keyword-test" and rest["judge_model"] == "keyword-test-1"
    assert rest["path"] == "retrieve>judge:keyword-test>route>answer:extractive"
    assert rest["remote_declared"] == [] and rest["remote_observed"] == []
    assert {"retrieve", "judge", "route", "answer", "total"} <= set(rest["latency_ms"])
    assert rest["counts"]["evidence"] >= 1 and rest["counts"]["candidates"] >= 1
    assert any('"reason": "auth"' in line for line in text.splitlines())


def _result(degraded: bool = False, n: int = 2) -> AskResult:
    return AskResult(status="insufficient_evidence", guidance="g", answer=None, audit_id="a", model="jev-1.13.0",
                     degraded=degraded, timings_ms={"total": 1.0},
                     excluded=[ExcludedOut(id=f"d#{i}", doc_id="d", reason="judge_error" if degraded else "not_relevant")
                               for i in range(n)])


def test_declared_and_observed_remote_context():
    settings = Settings(_env_file=None, judge="typesafe", typesafe_api_key="ts-secret-key",
                        typesafe_base_url="https://api.typesafe.example")
    ok = ask_log_fields(_result(), "rest", settings)
    assert ok["remote_declared"] == ["typesafe:api.typesafe.example"] == ok["remote_observed"]
    assert ok["path"] == "retrieve>judge:typesafe>route>answer:extractive"
    down = ask_log_fields(_result(degraded=True), "rest", settings)
    assert down["remote_observed"] == [] and down["remote_failed"] == ["typesafe:api.typesafe.example"]
    assert down["path"] == "retrieve>judge:typesafe(failed)>route>answer:extractive"
    assert down["counts"]["judge_errors"] == 2
    none = ask_log_fields(_result(n=0), "rest", settings)  # no candidates: the judge is not called
    assert none["remote_observed"] == [] and none["path"] == "retrieve>route>answer:extractive"
    assert "ts-secret-key" not in json.dumps([ok, down, none])
    local = ask_log_fields(_result(), "cli", Settings(_env_file=None, judge="llm", llm_judge_base_url="http://localhost:11434/v1"))
    assert local["remote_declared"] == []


def test_writer_path_and_remote_endpoints_in_the_log():
    from types import SimpleNamespace

    from sourcegate.llm_writer import LLMWriter, endpoints_for
    from sourcegate.service import WriterOut

    writer = LLMWriter(endpoints_for("local_then_cloud", "http://localhost:11434/v1", "qwen3:4b",
                                     "https://api.mistral.ai/v1", "mistral-small-latest", "mistral-secret"), "local_then_cloud")
    gate = SimpleNamespace(writer=writer, _judge=None)
    settings = Settings(_env_file=None)
    assert writer.declared_remote == ["writer-cloud:api.mistral.ai"]

    local = _result()
    local.writer = WriterOut(path="local", model="qwen3:4b")
    f = ask_log_fields(local, "rest", settings, gate=gate)
    assert f["path"].endswith("answer:llm-local") and f["writer"] == {"path": "local", "model": "qwen3:4b", "fell_back": False}
    assert f["remote_declared"] == ["writer-cloud:api.mistral.ai"] and f["remote_observed"] == []

    cloud = _result()
    cloud.writer = WriterOut(path="cloud", model="mistral-small-latest",
                             fallback_reason="local (localhost:11434): cannot connect to localhost:11434: is the server running?")
    cloud.writer._attempts = [{"role": "local", "endpoint": "localhost:11434", "remote": False, "outcome": "connection_refused"},
                            {"role": "cloud", "endpoint": "api.mistral.ai", "remote": True, "outcome": "ok"}]
    f = ask_log_fields(cloud, "rest", settings, gate=gate)
    assert f["remote_observed"] == ["writer-cloud:api.mistral.ai"] and f["writer"]["fell_back"] is True

    # The cloud's answer was rejected by the check: it still received the passages.
    rejected = _result()
    rejected.writer = WriterOut(path="extractive", fallback_reason="local (localhost:11434): citation check failed: '9,999' ...; "
                                                                   "cloud (api.mistral.ai): citation check failed: ...")
    rejected.writer._attempts = [{"role": "local", "endpoint": "localhost:11434", "remote": False, "outcome": "rejected"},
                            {"role": "cloud", "endpoint": "api.mistral.ai", "remote": True, "outcome": "rejected"}]
    f = ask_log_fields(rejected, "rest", settings, gate=gate)
    assert f["remote_observed"] == ["writer-cloud:api.mistral.ai"] and f["path"].endswith("answer:extractive")

    down = _result()
    down.writer = WriterOut(path="extractive", fallback_reason="...")
    down.writer._attempts = [{"role": "local", "endpoint": "localhost:11434", "remote": False, "outcome": "rejected"},
                            {"role": "cloud", "endpoint": "api.mistral.ai", "remote": True, "outcome": "connection_error"}]
    f = ask_log_fields(down, "rest", settings, gate=gate)
    assert f["remote_failed"] == ["writer-cloud:api.mistral.ai"] and f["remote_observed"] == []
    down.writer._attempts = [{"role": "local", "endpoint": "localhost:11434", "remote": False, "outcome": "rejected"},
                            {"role": "cloud", "endpoint": "api.mistral.ai", "remote": True, "outcome": "circuit_open"}]
    assert ask_log_fields(down, "rest", settings, gate=gate)["remote_observed"] == []  # skipped: nothing sent
    # Neither the key nor the reasons (which may quote the answer) reach the log.
    assert "mistral-secret" not in json.dumps(f) and "9,999" not in json.dumps(f)
