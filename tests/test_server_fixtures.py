"""Shared helpers for the server, MCP, web, logs and replay tests (imported by them).

The demo corpus is ingested once per test process into a temporary SOURCEGATE_HOME; each test
gets its own audit log. The judge is real but deterministic (`KeywordJudge`), so these tests
do not depend on the local judge's exact scores.
"""

from __future__ import annotations

import atexit
import functools
import re
import shutil
import socket
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sourcegate.judges.base import JudgeInput, Judgement, PassageJudgement
from sourcegate.models import PassageScores
from sourcegate.settings import Settings

CORPUS = Path(__file__).resolve().parents[1] / "src" / "sourcegate" / "demo" / "corpus"
_STOP = {"what", "when", "which", "does", "should", "how", "often", "much", "the", "and", "for", "with", "need",
         "from", "into", "have", "this", "that", "your", "are", "is", "do", "on", "in", "of", "to", "a", "i"}


def _terms(text: str) -> set[str]:
    return {t for t in re.findall(r"[a-z0-9][a-z0-9-]+", text.lower()) if t not in _STOP and len(t) > 2}


class KeywordJudge:
    """Deterministic scores from word overlap, plus fixed traits of a few demo documents."""

    name = "keyword-test"

    def __init__(self, fail: bool = False):
        self.fail = fail

    def judge(self, query: str, passages: list[JudgeInput]) -> Judgement:
        if self.fail:
            raise ConnectionError("test judge is down")
        q = _terms(query)
        # The demo's false premise: the current procedure contradicts it, nothing answers it.
        premise = "500 hours" in query
        results = []
        for p in passages:
            doc = p.id.split("#")[0]
            overlap = len(q & _terms(p.title + " " + p.text))
            relevant = 0.9 if overlap >= 2 else (0.5 if overlap == 1 else 0.1)
            evidence = 0.1 if premise else (0.8 if overlap >= 3 else (0.6 if overlap == 2 else 0.1))
            contradicts = 0.9 if (premise and doc == "PROC-P200-BRG-R2") else 0.05
            injection = 0.95 if doc.startswith("FORUM") else 0.02
            superseded = 0.95 if (p.status == "archived" or p.text.startswith("SUPERSEDED")) else 0.02
            results.append(PassageJudgement(p.id, PassageScores(
                is_relevant=relevant, contains_answer_evidence=evidence, contradicts_query_premise=contradicts,
                contains_prompt_injection=injection, is_superseded=superseded)))
        return Judgement(model="keyword-test-1", results=results)


@functools.lru_cache(maxsize=None)
def demo_home() -> Path:
    """A SOURCEGATE_HOME with the demo corpus ingested, once per test process."""
    from sourcegate.cli import run_ingest

    home = Path(tempfile.mkdtemp(prefix="sourcegate-test-home-"))
    atexit.register(shutil.rmtree, home, True)
    report = run_ingest(Settings(home=home), [CORPUS], prune=False, quiet=True)
    assert not report.failed, report.failed
    return home


def make_settings(audit_path: Path, **overrides) -> Settings:
    """Settings on the shared demo index, with this test's own audit log. Starlette's TestClient
    sends `Host: testserver`: it is an allowed host unless a test says otherwise."""
    if "allowed_hosts" not in overrides:
        overrides.setdefault("mcp_allowed_hosts", "testserver")
    return Settings(_env_file=None, home=demo_home(), audit_log_path=audit_path, **overrides)


def make_gate(settings: Settings, judge=None):
    from sourcegate.service import SourceGate

    return SourceGate(settings, judge=judge or KeywordJudge())


def free_socket() -> socket.socket:
    """A listening socket on a free local port: uvicorn serves on it, and connections made
    before it starts wait in the backlog (no polling for readiness)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    return sock


@contextmanager
def running_server(app, settings: Settings | None = None) -> Iterator[str]:
    """Serve `app` with uvicorn on 127.0.0.1 in a background thread, configured as `sourcegate
    serve` configures it; yield its base URL."""
    import uvicorn

    from sourcegate.server.app import server_config

    sock = free_socket()
    port = sock.getsockname()[1]
    server = uvicorn.Server(server_config(app, settings or Settings(_env_file=None)))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


def run_async(fn, timeout: float = 60.0):
    """Run the coroutine function `fn` on a fresh event loop, failing after `timeout` seconds."""
    import anyio

    async def bounded():
        with anyio.fail_after(timeout):
            return await fn()

    return anyio.run(bounded)


async def mcp_tool_calls(app, token: str, tool: str, arguments: list[dict]) -> list:
    """`tool` called with each of `arguments` in turn by a real MCP client (Streamable HTTP) against `app` in
    this process, with `token` as its bearer token: the results, in order."""
    import httpx2
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async with app.router.lifespan_context(app):
        http = httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url="http://testserver",
                                  headers={"authorization": f"Bearer {token}"})
        async with http, streamable_http_client("http://testserver/mcp", http_client=http) as (r, w):
            async with ClientSession(r, w) as session:
                await session.initialize()
                return [await session.call_tool(tool, a) for a in arguments]
