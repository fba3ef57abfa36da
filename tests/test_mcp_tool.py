"""The MCP tool through the official MCP client: in process, over real HTTP, and over stdio."""

from __future__ import annotations

import json
import os
import sys

import httpx2
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from test_server_fixtures import demo_home, make_gate, make_settings, run_async, running_server

from sourcegate.audit import read_records
from sourcegate.server.app import create_app
from sourcegate.server.mcp_tool import MAX_RESULT_BYTES, input_schema, output_schema, tool_payload
from sourcegate.service import AskResult, PassageOut

KEY = "mcp-test-key-42"
Q = "How often should I grease the bearings on pump P-200?"
TIMEOUT = 60


def _refs(obj) -> list[str]:
    if isinstance(obj, dict):
        return [k for k in obj if k in ("$ref", "$defs", "definitions")] + [r for v in obj.values() for r in _refs(v)]
    if isinstance(obj, list):
        return [r for v in obj for r in _refs(v)]
    return []


async def _exercise(session: ClientSession) -> dict:
    """List the tool, check its schemas, call it, check the result; return the structured content."""
    await session.initialize()
    tools = (await session.list_tools()).tools
    assert [t.name for t in tools] == ["search_procedures", "give_feedback"]
    tool = tools[0]
    dumped = tool.model_dump(by_alias=True, exclude_none=True)
    assert not _refs(dumped["inputSchema"]), "Copilot Studio drops tools whose schemas use $ref/$defs"
    assert not _refs(dumped.get("outputSchema") or {})
    desc = dumped["inputSchema"]["properties"]["query"]["description"]
    assert "language" in desc and "as the user asked" in desc

    result = await session.call_tool("search_procedures", {"query": Q})
    assert not result.is_error
    data = result.structured_content
    assert data["status"] == "answer_from_evidence"
    assert data["guidance"] and data["audit_id"]
    assert data["evidence"] and all(p["doc_id"] for p in data["evidence"])
    text = result.content[0].text
    assert "status: answer_from_evidence" in text and data["audit_id"] in text

    bad = await session.call_tool("search_procedures", {"query": "z" * 5000})
    assert bad.is_error and "MAX_QUERY_CHARS" in bad.content[0].text
    empty = await session.call_tool("search_procedures", {"query": ""})
    assert empty.is_error and "empty" in empty.content[0].text
    return data


def _settings(tmp_path, **kw):
    return make_settings(tmp_path / "audit.jsonl", mcp_api_key=KEY, max_query_chars=1000, **kw)


def test_mcp_in_process(tmp_path):
    settings = _settings(tmp_path, mcp_allowed_hosts="testserver")
    gate = make_gate(settings)
    app = create_app(settings, gate)

    async def main():
        async with app.router.lifespan_context(app):
            http = httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url="http://testserver",
                                      headers={"x-api-key": KEY})
            async with http, streamable_http_client("http://testserver/mcp", http_client=http) as (r, w):
                async with ClientSession(r, w) as session:
                    return await _exercise(session)

    data = run_async(main, TIMEOUT)
    rec = next(rec for _, rec, _ in read_records(settings.audit_path) if rec["audit_id"] == data["audit_id"])
    assert rec["interface"] == "mcp"
    gate.close()


def test_mcp_over_real_http(tmp_path):
    settings = _settings(tmp_path)
    gate = make_gate(settings)
    app = create_app(settings, gate)
    with running_server(app) as base:
        async def main():
            http = httpx2.AsyncClient(headers={"x-api-key": KEY}, timeout=TIMEOUT)
            async with http, streamable_http_client(f"{base}/mcp", http_client=http) as (r, w):
                async with ClientSession(r, w) as session:
                    return await _exercise(session)

        async def unauthorised() -> int:
            async with httpx2.AsyncClient(timeout=TIMEOUT) as http:
                resp = await http.post(f"{base}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                                       headers={"accept": "application/json, text/event-stream"})
                return resp.status_code

        data = run_async(main, TIMEOUT)
        assert data["status"] == "answer_from_evidence"
        assert run_async(unauthorised, TIMEOUT) == 401
    gate.close()


def test_mcp_over_stdio(tmp_path):
    """`sourcegate mcp --stdio` as a subprocess, judged by recorded scores (an audit log is a
    valid recorded-scores file), so the child needs no model of its own."""
    settings = _settings(tmp_path)
    gate = make_gate(settings)
    gate.ask(Q, interface="python")
    gate.close()
    env = {**os.environ, "SOURCEGATE_HOME": str(demo_home()), "SOURCEGATE_JUDGE": "recorded",
           "SOURCEGATE_RECORDED_SCORES": str(settings.audit_path), "AUDIT_LOG_PATH": str(tmp_path / "stdio.jsonl")}
    params = StdioServerParameters(command=sys.executable, args=["-m", "sourcegate.cli", "mcp", "--stdio"], env=env,
                                   cwd=str(tmp_path))

    async def main():
        async with stdio_client(params) as (r, w), ClientSession(r, w) as session:
            await session.initialize()
            tools = (await session.list_tools()).tools
            assert tools[0].name == "search_procedures"
            result = await session.call_tool("search_procedures", {"query": Q})
            return result.structured_content

    data = run_async(main, TIMEOUT)
    assert data["status"] == "answer_from_evidence" and data["model"].startswith("recorded")
    rec = next(rec for _, rec, _ in read_records(tmp_path / "stdio.jsonl"))
    assert rec["interface"] == "mcp" and rec["audit_id"] == data["audit_id"]


def test_schemas_are_inline():
    assert not _refs(input_schema()) and not _refs(output_schema())
    json.dumps(output_schema())  # plain JSON


def test_tool_result_stays_small():
    huge = PassageOut(id="d#1", doc_id="d", title="t", url=None, text="é" * 200_000, version=None,
                      scores={"is_relevant": 1, "contains_answer_evidence": 1, "contradicts_query_premise": 0,
                              "contains_prompt_injection": 0, "is_superseded": 0})
    r = AskResult(status="answer_from_evidence", guidance="g", answer="a", evidence=[huge] * 30,
                  conflicts=[huge] * 30, audit_id="x", model="m")
    data = tool_payload(r)
    assert len(json.dumps(data, ensure_ascii=False).encode()) < MAX_RESULT_BYTES
    assert len(data["evidence"]) <= 12 and len(data["conflicts"]) <= 12
    assert data["status"] == "answer_from_evidence" and data["guidance"] == "g"


def test_the_text_block_says_a_cited_source_is_an_archived_revision():
    from sourcegate.server.mcp_tool import result_text

    scores = {"is_relevant": 1, "contains_answer_evidence": 1, "contradicts_query_premise": 0,
              "contains_prompt_injection": 0, "is_superseded": 0}
    old = PassageOut(id="g#1", doc_id="GUARD-03-v1", title="Guardrail 3", url=None, text="The CIO approves.",
                     version="1.0", status="archived", scores=scores)
    new = PassageOut(id="g#2", doc_id="GUARD-03-v2", title="Guardrail 3", url=None, text="Secure endpoints.",
                     version="2.0", status="current", scores=scores)
    r = AskResult(status="answer_from_evidence", guidance="g", answer=None, evidence=[old, new], conflicts=[],
                  audit_id="x", model="m")
    data = tool_payload(r)
    assert data["evidence"][0]["status"] == "archived"
    text = result_text(data)
    assert "[1] Guardrail 3 (GUARD-03-v1; archived revision, version 1.0)" in text
    assert "[2] Guardrail 3 (GUARD-03-v2)" in text


def test_mcp_result_carries_the_written_answer_beside_the_passages(tmp_path):
    from fakes.chat_server import FakeChatServer
    from test_llm_writer import p200_reply

    with FakeChatServer(p200_reply) as cloud:
        settings = _settings(tmp_path, writer="llm", llm_writer_policy="cloud", llm_writer_cloud=cloud.url + "/v1",
                             llm_writer_cloud_model="mistral-small-latest")
        gate = make_gate(settings)
        app = create_app(settings, gate)
        with running_server(app) as base:
            async def main():
                http = httpx2.AsyncClient(headers={"x-api-key": KEY}, timeout=TIMEOUT)
                async with http, streamable_http_client(f"{base}/mcp", http_client=http) as (r, w):
                    async with ClientSession(r, w) as session:
                        await session.initialize()
                        return await session.call_tool("search_procedures", {"query": Q})

            result = run_async(main, TIMEOUT)
        gate.close()
    data = result.structured_content  # validated by the client against the tool's output schema
    assert not result.is_error
    assert data["writer"] == {"path": "cloud", "model": "mistral-small-latest", "fallback_reason": None}
    assert data["answer"].startswith("Grease the P-200 bearings every 2,000 operating hours [")
    assert any(p["doc_id"] == "PROC-P200-BRG-R2" for p in data["evidence"])  # the passages are still there
    text = result.content[0].text
    assert "written by: mistral-small-latest (cloud)" in text and "PROC-P200-BRG-R2" in text


PUBLIC_HOST = "sourcegate-app.purplesea-1a2b3c.westeurope.azurecontainerapps.io"


async def _list_and_call(base: str) -> dict:
    """What Copilot Studio does: the official client, the key, and the public name as Host."""
    http = httpx2.AsyncClient(headers={"x-api-key": KEY, "host": PUBLIC_HOST}, timeout=TIMEOUT)
    async with http, streamable_http_client(f"{base}/mcp", http_client=http) as (r, w):
        async with ClientSession(r, w) as session:
            await session.initialize()
            assert [t.name for t in (await session.list_tools()).tools] == ["search_procedures", "give_feedback"]
            result = await session.call_tool("search_procedures", {"query": Q})
            assert not result.is_error
            return result.structured_content


def test_mcp_answers_behind_a_public_host_name_with_allowed_hosts(tmp_path):
    settings = _settings(tmp_path, allowed_hosts=PUBLIC_HOST)
    gate = make_gate(settings)
    with running_server(create_app(settings, gate)) as base:
        data = run_async(lambda: _list_and_call(base), TIMEOUT)
        rest = httpx2.post(f"{base}/v1/ask", json={"query": Q}, headers={"x-api-key": KEY, "host": PUBLIC_HOST},
                           timeout=TIMEOUT)
    gate.close()
    assert data["status"] == "answer_from_evidence"
    assert rest.status_code == 200


def test_mcp_refuses_an_unlisted_host_naming_allowed_hosts(tmp_path, caplog):
    settings = _settings(tmp_path, allowed_hosts="")
    gate = make_gate(settings)
    with running_server(create_app(settings, gate)) as base, caplog.at_level("INFO", logger="sourcegate.ask"):
        with pytest.raises(BaseException):  # the client cannot even initialize
            run_async(lambda: _list_and_call(base), TIMEOUT)
        refusals = {path: httpx2.post(f"{base}{path}", headers={"x-api-key": KEY, "host": PUBLIC_HOST,
                                                               "accept": "application/json, text/event-stream"},
                                      json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"} if path == "/mcp"
                                      else {"query": Q}, timeout=TIMEOUT)
                    for path in ("/mcp", "/v1/ask")}
    gate.close()
    for path, r in refusals.items():  # one rule and one message for MCP and REST, key or not
        assert r.status_code == 421, path
        # on /mcp a JSON-RPC error (what MCP clients show), on /v1 {"error": message}
        message = r.json()["error"]["message"] if path == "/mcp" else r.json()["error"]
        assert f"ALLOWED_HOSTS={PUBLIC_HOST}" in message, path
    logged = [rec for rec in caplog.records if getattr(rec, "reason", None) == "host"]
    assert {rec.interface for rec in logged} == {"mcp", "rest"}
    assert all(rec.setting == "ALLOWED_HOSTS" and PUBLIC_HOST in rec.fix for rec in logged)


async def _initialize_error(base: str, host: str, key: str | None = KEY):
    """The error the official client raises when it cannot initialize, or None when it can."""
    from mcp import MCPError

    headers = {"host": host, **({"x-api-key": key} if key else {})}
    http = httpx2.AsyncClient(headers=headers, timeout=TIMEOUT)
    try:
        async with http, streamable_http_client(f"{base}/mcp", http_client=http) as (r, w):
            async with ClientSession(r, w) as session:
                await session.initialize()
                await session.list_tools()
    except BaseException as e:  # the task groups of the session and the transport wrap what it raised
        def first(exc: BaseException) -> MCPError | None:
            if isinstance(exc, MCPError):
                return exc
            inner = exc.exceptions if isinstance(exc, BaseExceptionGroup) else ()
            return next((f for f in map(first, inner) if f is not None), None)

        if first(e) is None:
            raise
        return first(e)
    return None


def test_an_mcp_client_refused_by_the_host_check_reads_the_fix(tmp_path):
    """The official client surfaces the JSON-RPC error of a refusal: the fix the log names, not
    "-32603 Server returned an error response"."""
    settings = _settings(tmp_path, mcp_allowed_hosts="")
    gate = make_gate(settings)
    with running_server(create_app(settings, gate)) as base:
        refused = run_async(lambda: _initialize_error(base, PUBLIC_HOST), TIMEOUT)
        no_key = run_async(lambda: _initialize_error(base, "127.0.0.1", key=None), TIMEOUT)
    gate.close()
    assert refused is not None and refused.code != -32603, refused
    assert f"ALLOWED_HOSTS={PUBLIC_HOST}" in refused.message, refused.message
    assert no_key is not None and "x-api-key" in no_key.message, no_key.message


def test_allowed_hosts_match_whatever_the_case(tmp_path):
    settings = _settings(tmp_path, mcp_allowed_hosts="Sg.Example.ORG")
    gate = make_gate(settings)
    with running_server(create_app(settings, gate)) as base:
        assert run_async(lambda: _initialize_error(base, "sg.example.org"), TIMEOUT) is None
        assert run_async(lambda: _initialize_error(base, "SG.EXAMPLE.org:8443"), TIMEOUT) is None
        rest = httpx2.post(f"{base}/v1/ask", json={"query": Q}, timeout=TIMEOUT,
                           headers={"x-api-key": KEY, "host": "sg.example.org", "origin": "https://SG.example.org"})
        other = httpx2.post(f"{base}/v1/ask", json={"query": Q}, timeout=TIMEOUT,
                            headers={"x-api-key": KEY, "host": "sg.example.net"})
    gate.close()
    assert rest.status_code == 200, rest.text
    assert other.status_code == 421
