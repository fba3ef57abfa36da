"""/v1/ask/stream: the gate's decision, then the answer as a model writes it, then the result, as
server-sent events over real HTTP; the web page reading that stream in a real browser.

The model is `FakeChatServer`, a real HTTP server speaking the hosted chat APIs' streamed wire
format, so the writer goes through its real client, citation check and fallback.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import select
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from urllib.parse import quote

import httpx
import pytest
from fakes.chat_server import FakeChatServer
from starlette.testclient import TestClient
from test_server_fixtures import make_gate, make_settings, running_server

from sourcegate.audit import read_records
from sourcegate.server.app import create_app

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
Q = "How often should I grease the bearings on pump P-200?"
# Passes the citation check against the demo's PROC-P200-BRG-R2 passage.
GOOD = "Grease the P-200 bearings every 2,000 operating hours [1]. Add 20 g of grease to each bearing [1]."
# 9,999 is in no passage: the check fails and the extractive answer is given instead.
INVENTED = "Grease them every 9,999 hours [1]."
# The first sentence passes (and is streamed), the second invents a quantity.
GOOD_THEN_INVENTED = ("Grease the P-200 bearings every 2,000 operating hours [1]. "
                      "Add 99 g of grease to each bearing [1].")
KEY = "test-key-0123456789"


def writer_settings(tmp_path, fake: FakeChatServer, **overrides):
    return make_settings(tmp_path / "audit.jsonl", writer="llm", llm_writer_policy="cloud",
                         llm_writer_cloud=fake.url + "/v1", llm_writer_cloud_model="m",
                         llm_writer_cloud_api_key="k", **overrides)


@contextmanager
def served(tmp_path, reply, **overrides) -> Iterator[tuple[str, FakeChatServer, object]]:
    """A served app whose writer is the fake chat API answering `reply`; yields (base URL, fake, settings)."""
    with FakeChatServer(reply=reply, api_key="k") as fake:
        settings = writer_settings(tmp_path, fake, **overrides)
        gate = make_gate(settings)
        try:
            with running_server(create_app(settings, gate)) as base:
                yield base, fake, settings
        finally:
            gate.close()


def parse_sse(lines: Iterator[str]) -> Iterator[tuple[str, dict]]:
    """(event name, JSON data) for each event of a text/event-stream."""
    name, data = "message", []
    for line in lines:
        if line == "":
            if data:
                yield name, json.loads("\n".join(data))
            name, data = "message", []
        elif line.startswith("event:"):
            name = line[6:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].removeprefix(" "))


def stream_events(base: str, query: str = Q, headers: dict | None = None) -> list[tuple[str, dict]]:
    with httpx.stream("POST", base + "/v1/ask/stream", json={"query": query}, headers=headers, timeout=60) as r:
        assert r.status_code == 200, r.read()
        assert r.headers["content-type"].startswith("text/event-stream")
        return list(parse_sse(r.iter_lines()))


def test_model_answer_streams_after_the_gate_and_ends_with_the_result(tmp_path):
    with served(tmp_path, GOOD) as (base, fake, settings):
        events = stream_events(base)
        names = [n for n, _ in events]
        assert names[0] == "gate" and names[-1] == "result", names
        assert names.count("gate") == 1 and names.count("result") == 1
        assert set(names[1:-1]) == {"delta"}, names  # no reset, no replace

        gate = events[0][1]
        assert gate["status"] == "answer_from_evidence"
        assert set(gate) >= {"status", "guidance", "degraded", "evidence", "conflicts", "excluded", "model"}
        assert "answer" not in gate  # the gate decided; nothing is written yet
        assert gate["evidence"][0]["doc_id"] == "PROC-P200-BRG-R2"

        deltas = [d for n, d in events if n == "delta"]
        assert len(deltas) >= 1
        assert "".join(d["text"] for d in deltas) == GOOD
        assert {d["path"] for d in deltas} == {"cloud"}

        result = events[-1][1]
        assert result["status"] == "answer_from_evidence"
        assert result["writer"] == {"path": "cloud", "model": "m", "fallback_reason": None}
        # The final answer is the model's text plus the list of sources the deltas leave out.
        assert result["answer"].startswith(GOOD + "\n\nSources:\n[1] ")
        # The gate event and the result describe the same passages.
        assert [p["id"] for p in gate["evidence"]] == [p["id"] for p in result["evidence"]]
        assert gate["evidence"] == result["evidence"]
        assert fake.bodies and fake.bodies[0].get("stream") is True  # the model was asked to stream

        r = httpx.get(f"{base}/v1/audit/{result['audit_id']}", timeout=10)
        assert r.status_code == 200 and r.headers["x-audit-verified"] == "true"
        record = r.json()
        assert record["writer"]["path"] == "cloud" and record["writer"]["model"] == "m"
        assert record["interface"] == "rest"
        assert record["answer"] == result["answer"]

        metrics = httpx.get(base + "/metrics", timeout=10).text
        assert 'sourcegate_http_requests_total{code="200",method="POST",route="/v1/ask/stream"} 1.0' in metrics
        assert re.search(r'sourcegate_asks_total\{interface="rest",status="answer_from_evidence"\} 1\.0', metrics)


def test_failed_citation_check_is_replaced_by_the_extractive_answer(tmp_path):
    with served(tmp_path, INVENTED) as (base, _, settings):
        events = stream_events(base)
        names = [n for n, _ in events]
        assert names == ["gate", "replace", "result"], names  # the invented number never reaches the client
        replace, result = events[1][1], events[2][1]
        assert "9,999" not in replace["text"]  # (the reason quotes it)
        assert replace["text"] == result["answer"]
        assert "2,000 operating hours" in result["answer"]
        assert result["writer"]["path"] == "extractive" and result["writer"]["model"] is None
        assert "citation check" in result["writer"]["fallback_reason"]
        assert "citation check" in replace["reason"]
        record = httpx.get(f"{base}/v1/audit/{result['audit_id']}", timeout=10).json()
        assert record["writer"]["path"] == "extractive"


def test_a_streamed_sentence_is_withdrawn_when_a_later_one_fails(tmp_path):
    with served(tmp_path, GOOD_THEN_INVENTED) as (base, _, _settings):
        events = stream_events(base)
        names = [n for n, _ in events]
        assert names == ["gate", "delta", "reset", "replace", "result"], names
        assert events[1][1]["text"] == "Grease the P-200 bearings every 2,000 operating hours [1]."
        assert events[2][1]["path"] == "cloud" and "citation check" in events[2][1]["reason"]
        assert events[4][1]["writer"]["path"] == "extractive"
        assert not any("99 g" in d.get("text", "") or "99 g" in (d.get("answer") or "") for _, d in events)


def test_the_stream_needs_the_api_key_and_refuses_as_ask_does(tmp_path):
    with FakeChatServer(reply=GOOD, api_key="k") as fake:
        settings = writer_settings(tmp_path, fake, mcp_api_key=KEY, max_query_chars=300)
        gate = make_gate(settings)
        with TestClient(create_app(settings, gate)) as client:
            for headers in ({}, {"x-api-key": "wrong"}):
                r = client.post("/v1/ask/stream", json={"query": Q}, headers=headers)
                assert r.status_code == 401 and "x-api-key" in r.json()["error"]
            auth = {"x-api-key": KEY}
            # Refused before the gate runs: the same JSON errors and codes as /v1/ask.
            for body, code in ((b"{not json", 400), (b'{"q": 1}', 422), (json.dumps({"query": " "}).encode(), 422),
                               (json.dumps({"query": "x" * 301}).encode(), 422)):
                streamed = client.post("/v1/ask/stream", content=body, headers=auth)
                plain = client.post("/v1/ask", content=body, headers=auth)
                assert streamed.status_code == plain.status_code == code
                assert streamed.json() == plain.json()
            assert not fake.bodies
            with client.stream("POST", "/v1/ask/stream", json={"query": Q},
                               headers={**auth, "x-sourcegate-interface": "web"}) as r:
                assert r.status_code == 200
                events = list(parse_sse(r.iter_lines()))
            assert [n for n, _ in events][-1] == "result"
        gate.close()
    records = [rec for _, rec, _ in read_records(settings.audit_path)]
    assert [rec["interface"] for rec in records] == ["web"]


def test_the_stream_holds_its_slot_while_the_model_writes(tmp_path):
    release = threading.Event()

    def slow_reply(body):
        assert release.wait(30), "the test never released the model"
        return GOOD

    with served(tmp_path, slow_reply, serve_max_concurrency=1, serve_max_queue=0) as (base, _, _settings):
        with httpx.stream("POST", base + "/v1/ask/stream", json={"query": Q}, timeout=60) as first:
            try:
                assert first.status_code == 200
                events = parse_sse(first.iter_lines())
                assert next(events)[0] == "gate"  # decided; the model is writing and the slot is held
                for path in ("/v1/ask/stream", "/v1/ask"):
                    r = httpx.post(base + path, json={"query": Q}, timeout=10)
                    assert r.status_code == 503, r.text
                    assert int(r.headers["retry-after"]) >= 1
                    assert "busy" in r.json()["error"]
            finally:
                release.set()
            rest = [n for n, _ in events]
        assert rest[-1] == "result" and "delta" in rest
        assert httpx.get(base + "/healthz", timeout=10).json()["in_flight"] == 0
        # The slot is free again.
        assert [n for n, _ in stream_events(base)][-1] == "result"


def test_openapi_describes_the_stream(tmp_path):
    settings = make_settings(tmp_path / "audit.jsonl")
    gate = make_gate(settings)
    with TestClient(create_app(settings, gate)) as client:
        doc = client.get("/openapi.json").json()
    gate.close()
    assert "$ref" not in json.dumps(doc)
    op = doc["paths"]["/v1/ask/stream"]["post"]
    assert op["operationId"] == "AskQuestionStream"
    assert op["requestBody"]["content"]["application/json"]["schema"]["required"] == ["query"]
    stream = op["responses"]["200"]["content"]["text/event-stream"]["schema"]
    for event in ("gate", "delta", "reset", "replace", "result", "error"):
        assert f"`{event}`" in stream["description"]
    assert "retry-after" in {h.lower() for h in op["responses"]["503"]["headers"]}


def test_a_client_that_goes_away_does_not_stop_the_answer(tmp_path):
    release = threading.Event()

    def held_reply(body):
        assert release.wait(30), "the test never released the model"
        return GOOD

    with served(tmp_path, held_reply, serve_max_concurrency=1) as (base, _, settings):
        try:
            with httpx.stream("POST", base + "/v1/ask/stream", json={"query": Q}, timeout=60) as r:
                assert next(parse_sse(r.iter_lines()))[0] == "gate"
        finally:  # the connection is closed before the model has written anything
            release.set()
        deadline = time.monotonic() + 30
        while not settings.audit_path.exists() or not settings.audit_path.read_text(encoding="utf-8").strip():
            assert time.monotonic() < deadline, "the abandoned answer was never audited"
            time.sleep(0.05)
        records = [rec for _, rec, _ in read_records(settings.audit_path)]
        assert [rec["writer"]["path"] for rec in records] == ["cloud"]
        while httpx.get(base + "/healthz", timeout=10).json()["in_flight"]:
            assert time.monotonic() < deadline, "the slot was never given back"
            time.sleep(0.05)
        assert [n for n, _ in stream_events(base)][-1] == "result"  # and the server answers the next one


def test_a_failure_after_the_gate_is_an_error_event(tmp_path, monkeypatch):
    import errno

    from sourcegate.audit import AuditWriteError

    with FakeChatServer(reply=GOOD, api_key="k") as fake:
        settings = writer_settings(tmp_path, fake)
        gate = make_gate(settings)
        with TestClient(create_app(settings, gate)) as client:
            # The answer was written but cannot be recorded: it is not given.
            def disk_full(record):
                raise AuditWriteError(settings.audit_path, OSError(errno.ENOSPC, "No space left on device"))

            monkeypatch.setattr(gate.audit, "append", disk_full)
            with client.stream("POST", "/v1/ask/stream", json={"query": Q}) as r:
                assert r.status_code == 200
                events = list(parse_sse(r.iter_lines()))
            names = [n for n, _ in events]
            assert names[0] == "gate" and names[-1] == "error" and "result" not in names, names
            assert "audit log" in events[-1][1]["error"]

            # Anything else: an error event that gives nothing away, and the error is counted.
            def broken(*args, **kwargs):
                raise RuntimeError("secret internals")

            monkeypatch.setattr(gate.writer, "write", broken)
            with client.stream("POST", "/v1/ask/stream", json={"query": Q}) as r:
                events = list(parse_sse(r.iter_lines()))
            assert [n for n, _ in events] == ["gate", "error"]
            assert "internal error" in events[-1][1]["error"] and "secret" not in events[-1][1]["error"]
            metrics = client.get("/metrics").text
            assert re.search(r'sourcegate_ask_errors_total\{interface="rest"\} 2\.0', metrics), metrics
        gate.close()


# -- the web page in a real browser --------------------------------------------------------------

# The page once the gate's decision is shown and the answer is still being written.
GATE_SHOWN = ('document.getElementById("status").className === "status answer_from_evidence" '
              '&& document.getElementById("ask").disabled ? document.documentElement.outerHTML : ""')
# The page once the ask has finished: the button is enabled again only after the `result` (or an
# error) has been rendered.
PAGE_DONE = ('document.readyState === "complete" && document.getElementById("status").textContent !== "" '
             '&& !document.getElementById("ask").disabled ? document.documentElement.outerHTML : ""')


@contextmanager
def headless_page(url: str, profile, timeout: float = 60.0) -> Iterator[Callable[[str], str]]:
    """Opens `url` in headless Chromium driven over the DevTools protocol on a pipe; yields
    `wait_for(js)`, which returns the first non-empty string `js` evaluates to in the page, so a
    test can look at the page in the middle of an answer (--dump-dom only shows the end)."""
    to_chrome_r, to_chrome_w = os.pipe()
    from_chrome_r, from_chrome_w = os.pipe()
    args = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--no-first-run", "--disable-dev-shm-usage",
            f"--user-data-dir={profile}", "--remote-debugging-pipe", "about:blank"]
    # The protocol pipe is the child's fds 3 (commands in) and 4 (replies out).
    shell = f'exec "$0" "$@" 3<&{to_chrome_r} 4>&{from_chrome_w} {to_chrome_r}<&- {from_chrome_w}>&-'
    # stderr to a file: Chromium logs freely, and a full pipe would stall it.
    stderr = tempfile.TemporaryFile()
    proc = subprocess.Popen(["bash", "-c", shell, CHROMIUM, *args], pass_fds=(to_chrome_r, from_chrome_w),
                            stdout=subprocess.DEVNULL, stderr=stderr)
    os.close(to_chrome_r)
    os.close(from_chrome_w)
    deadline = time.monotonic() + timeout
    buffer = bytearray()
    ids = iter(range(1, 1_000_000))

    def call(method: str, session: str | None = None, **params) -> dict:
        msg_id = next(ids)
        msg = {"id": msg_id, "method": method, "params": params, **({"sessionId": session} if session else {})}
        os.write(to_chrome_w, json.dumps(msg).encode() + b"\0")
        while True:
            while b"\0" not in buffer:
                left = deadline - time.monotonic()
                assert left > 0 and select.select([from_chrome_r], [], [], left)[0], f"chromium did not answer {method}"
                chunk = os.read(from_chrome_r, 65536)
                if not chunk:
                    stderr.seek(0)
                    raise AssertionError("chromium closed the DevTools pipe: " + stderr.read().decode()[-2000:])
                buffer.extend(chunk)
            end = buffer.index(b"\0")
            reply = json.loads(bytes(buffer[:end]))
            del buffer[: end + 1]
            if reply.get("id") == msg_id:  # other messages are events
                assert "error" not in reply, (method, reply["error"])
                return reply["result"]

    try:
        target = call("Target.createTarget", url=url)["targetId"]
        session = call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]

        def wait_for(js: str) -> str:
            while True:
                value = call("Runtime.evaluate", session, expression=js, returnByValue=True)["result"].get("value")
                if value:
                    return value
                assert time.monotonic() < deadline, f"the page never got to: {js}"
                time.sleep(0.05)

        # any other DevTools command on the page (a screenshot, a click)
        wait_for.call = lambda method, **params: call(method, session, **params)

        yield wait_for
    finally:
        with contextlib.suppress(Exception):
            call("Browser.close")
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=10)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        stderr.close()
        os.close(to_chrome_w)
        os.close(from_chrome_r)


def _text_of(dom: str, element_id: str) -> str:
    m = re.search(rf'<(\w+) id="{element_id}"[^>]*>(.*?)</\1>', dom, re.S)
    assert m, (element_id, dom[-2000:])
    return m.group(2)


NO_CHROMIUM = "chromium is not installed (apt-get install chromium) - real-browser test skipped"


@pytest.mark.skipif(CHROMIUM is None, reason=NO_CHROMIUM)
@pytest.mark.parametrize("reply", [GOOD, INVENTED], ids=["model", "fallback"])
def test_page_renders_the_streamed_answer_in_headless_chromium(tmp_path, reply):
    with served(tmp_path, reply) as (base, fake, settings):
        # ?q= asks on load; --virtual-time-budget lets the page's request finish before the dump.
        cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
               "--disable-component-update", "--no-first-run", "--disable-dev-shm-usage",
               f"--user-data-dir={tmp_path / 'chromium-profile'}", "--virtual-time-budget=20000",
               "--dump-dom", f"{base}/?q={quote(Q)}"]
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=90)
    dom = out.stdout
    assert 'id="status" class="status answer_from_evidence"' in dom, (dom[-2000:], out.stderr[-2000:])
    assert "PROC-P200-BRG-R2" in dom
    answer, writer = _text_of(dom, "answer"), _text_of(dom, "writer")
    if reply == GOOD:
        assert answer == GOOD, answer  # once: the sources are listed under it, with their passages
        assert writer == "written by: cloud (m)"
    else:
        assert "9,999" not in answer
        assert "2,000 operating hours" in answer
        assert writer.startswith("extractive answer (fallback: cloud (") and "citation check failed" in writer
    assert re.search(r'<p id="writing" hidden=""', dom)  # the provisional marker is gone
    assert re.search(r'id="audit-link" href="v1/audit/[0-9a-f]{32}"', dom)
    assert fake.bodies and fake.bodies[0].get("stream") is True  # the page's question reached the model
    assert settings.audit_path.read_text(encoding="utf-8").count('"interface":"web"') == 1


@pytest.mark.skipif(CHROMIUM is None, reason=NO_CHROMIUM)
def test_page_shows_the_gate_before_the_model_has_written(tmp_path):
    release = threading.Event()

    def held_reply(body):
        assert release.wait(30), "the test never released the model"
        return GOOD

    with served(tmp_path, held_reply) as (base, _, _settings), \
            headless_page(f"{base}/?q={quote(Q)}", tmp_path / "chromium-profile") as wait_for:
        try:
            decided = wait_for(GATE_SHOWN)
        finally:
            release.set()
        dom = wait_for(PAGE_DONE)
    assert 'id="meta">judge keyword-test-1 · writing the answer…<' in decided
    assert "PROC-P200-BRG-R2" in _text_of(decided, "candidates")
    assert _text_of(decided, "answer") == "" and _text_of(decided, "writer") == ""
    assert _text_of(dom, "answer") == GOOD
    assert _text_of(dom, "writer") == "written by: cloud (m)"
