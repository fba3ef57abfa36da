"""A real PostgreSQL behind a port the test takes down and brings back (`tcp_switch`):

- `sourcegate serve` started while the database is down waits for it (alive, /readyz
  `unavailable`, questions 503 with Retry-After) and becomes ready by itself once it is back;
- the database going down while serving: REST answers a JSON 503 with Retry-After within seconds,
  the MCP tool a tool error telling the agent not to answer from memory (no JSON-RPC error), and
  the first question after it is back is answered at once;
- a SQLite index locked past SQLite's own 30 s timeout as `serve` starts: the server waits too."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import parse_qs, urlencode, urlsplit, urlunsplit

import httpx
import pytest
from tcp_switch import TcpSwitch, postgres_target
from test_server_fixtures import KeywordJudge, demo_home, free_socket, running_server

from sourcegate.cli import run_ingest
from sourcegate.settings import Settings

CORPUS = Path(__file__).resolve().parents[1] / "src" / "sourcegate" / "demo" / "corpus"
Q = "How often should I grease the bearings on pump P-200?"
MCP_HEADERS = {"accept": "application/json, text/event-stream"}


def _through(url: str, port: int) -> str:
    """`url` with its host replaced by the switch's port on 127.0.0.1."""
    parts = urlsplit(url)
    query = {k: v for k, v in parse_qs(parts.query).items() if k != "host"}
    user = parts.username or "postgres"
    auth = f"{user}:{parts.password}@" if parts.password else f"{user}@"
    return urlunsplit((parts.scheme, f"{auth}127.0.0.1:{port}", parts.path, urlencode(query, doseq=True), ""))


@pytest.fixture()
def switched_library(postgres_url, tmp_path):
    """The demo corpus in PostgreSQL, reached through a switch that is up."""
    switch = TcpSwitch(*postgres_target(postgres_url))
    switch.up()
    url = _through(postgres_url, switch.port)
    settings = Settings(_env_file=None, home=tmp_path / "home", store_url=url, audit_log_path=tmp_path / "audit.jsonl",
                        mcp_allowed_hosts="")
    report = run_ingest(settings, [CORPUS], prune=False, quiet=True)
    assert not report.failed, report.failed
    yield switch, settings
    switch.down()


def _wait_for(check, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, what
        time.sleep(0.2)


def _get(url: str):
    try:
        return httpx.get(url, timeout=10)
    except httpx.HTTPError:
        return None


def test_postgres_going_down_while_serving_is_a_fast_503_and_recovers(switched_library):
    from sourcegate.server.app import create_app
    from sourcegate.service import SourceGate

    switch, settings = switched_library
    gate = SourceGate(settings, judge=KeywordJudge())
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "search_procedures", "arguments": {"query": Q}}}
    try:
        with running_server(create_app(settings, gate), settings) as base:
            assert httpx.post(base + "/v1/ask", json={"query": Q}, timeout=60).status_code == 200
            switch.down()
            t0 = time.monotonic()
            r = httpx.post(base + "/v1/ask", json={"query": Q}, timeout=60)
            elapsed = time.monotonic() - t0
            assert r.status_code == 503, r.text
            assert r.headers["content-type"].startswith("application/json") and int(r.headers["retry-after"]) > 0
            assert "store cannot be reached" in r.json()["error"] and "psycopg" not in r.text.lower()
            assert elapsed < 8, elapsed  # not the pool's 30 s
            # later questions are refused at once
            t0 = time.monotonic()
            assert httpx.post(base + "/v1/ask", json={"query": Q}, timeout=60).status_code == 503
            assert time.monotonic() - t0 < 3
            body = httpx.post(base + "/mcp", json=call, headers=MCP_HEADERS, timeout=60).json()
            assert "error" not in body, body  # a tool error, not a JSON-RPC one
            result = body["result"]
            assert result["isError"] is True
            text = result["content"][0]["text"]
            assert "Do not answer from memory" in text and "connection" not in text.lower()
            ready = _wait_for(lambda: (r := _get(base + "/readyz")) is not None and r.status_code == 503 and r, 15,
                              "/readyz never said the store is unreachable")
            assert ready.json()["state"] == "store_unreachable"
            switch.up()
            time.sleep(1.1)  # past the store's retry interval
            t0 = time.monotonic()
            r = httpx.post(base + "/v1/ask", json={"query": Q}, timeout=60)
            assert r.status_code == 200 and r.json()["status"] == "answer_from_evidence"
            assert time.monotonic() - t0 < 5  # not the pool's back-off (16 s)
            _wait_for(lambda: (r := _get(base + "/readyz")) is not None and r.status_code == 200, 10,
                      "/readyz never became ready again")
    finally:
        gate.close()


def test_postgres_going_silent_is_a_503_within_seconds_and_frees_the_slots(switched_library):
    # A NAT or a load balancer that drops the flows: connections stay open, nothing comes back.
    # Only `connect_timeout` bounded a connection: questions hung with their slots held.
    from concurrent.futures import ThreadPoolExecutor

    from sourcegate.server.app import create_app
    from sourcegate.service import SourceGate

    switch, settings = switched_library
    gate = SourceGate(settings, judge=KeywordJudge())

    def timed_ask(base):
        t0 = time.monotonic()
        try:
            r = httpx.post(base + "/v1/ask", json={"query": Q}, timeout=30)
        except httpx.TimeoutException:
            return None, time.monotonic() - t0
        return r, time.monotonic() - t0

    try:
        with running_server(create_app(settings, gate), settings) as base:
            assert httpx.post(base + "/v1/ask", json={"query": Q}, timeout=60).status_code == 200
            switch.silent()
            with ThreadPoolExecutor(2) as pool:
                answers = list(pool.map(lambda _: timed_ask(base), range(2)))
            for r, elapsed in answers:
                assert r is not None, f"no answer in {elapsed:.1f} s"
                assert r.status_code == 503 and int(r.headers["retry-after"]) > 0, r.text
                assert "store cannot be reached" in r.json()["error"]
                assert elapsed < 7, elapsed  # about 5 s: the query timeout, not forever
            health = httpx.get(base + "/healthz", timeout=30).json()
            assert health["in_flight"] == 0 and health["queued"] == 0, health
            r, elapsed = timed_ask(base)  # a new connection through the silent path: connect_timeout
            assert r is not None and r.status_code == 503 and elapsed < 7, (r, elapsed)
            switch.speak()
            time.sleep(1.1)  # past the store's retry interval
            r = _wait_for(lambda: (r := timed_ask(base)[0]) is not None and r.status_code == 200 and r, 20,
                          "questions were not answered again once the path spoke")
            assert r.json()["status"] == "answer_from_evidence"
    finally:
        switch.speak()
        gate.close()


def test_each_postgres_query_of_a_question_is_bounded(switched_library):
    from sourcegate.store import open_store
    from sourcegate.store.base import StoreUnavailable, store_time_budget
    from sourcegate.store.postgres import QUERY_TIMEOUT_S, TCP_OPTIONS

    switch, settings = switched_library
    from sourcegate.embed import get_embedder

    emb = get_embedder(settings.embedder)
    store = open_store(settings.store_url, emb.id, emb.dim, **settings.store_options())
    try:
        with store._read() as conn:  # the server cancels a slow query; the pool stays
            params = conn.info.get_parameters()
            assert {k: params.get(k) for k in TCP_OPTIONS} == TCP_OPTIONS
            assert conn.execute("SHOW statement_timeout").fetchone()[0] == f"{int(QUERY_TIMEOUT_S * 1000)}ms"
        t0 = time.monotonic()
        with pytest.raises(StoreUnavailable):
            with store._read() as conn:
                conn.execute("SELECT pg_sleep(30)")
        assert time.monotonic() - t0 < QUERY_TIMEOUT_S + 1.5
        assert store.stats().documents > 0
        # the question's budget bounds the queries together, silent path or not
        switch.silent()
        t0 = time.monotonic()
        with store_time_budget(1.0), pytest.raises(StoreUnavailable):
            store.lexical_search("grease bearings", 5)
        assert time.monotonic() - t0 < 2.5
    finally:
        switch.speak()
        store.close()


def _serve(tmp_path: Path, env_extra: dict[str, str], *args: str):
    sock = free_socket()
    port = sock.getsockname()[1]
    sock.close()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SOURCEGATE_", "AUDIT_", "MCP_"))}
    env.update(AUDIT_LOG_PATH=str(tmp_path / "audit.jsonl"), SOURCEGATE_READER="false", **env_extra)
    log = (tmp_path / "server.log").open("w")
    proc = subprocess.Popen([sys.executable, "-m", "sourcegate.cli", "serve", "--port", str(port), *args], env=env,
                            stdout=subprocess.DEVNULL, stderr=log)
    return proc, f"http://127.0.0.1:{port}", log


def _stop(proc, log) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
    log.close()


def test_serve_waiting_for_postgres_never_logs_a_password_libpq_reads_differently(tmp_path):
    # "#" and "?" belong to the password for libpq; a parser that cuts the user part there logged it
    url = "postgresql://sourcegate:se#cr?3t@127.0.0.1:1/library"
    proc, base, log = _serve(tmp_path, {"SOURCEGATE_STORE": url, "SOURCEGATE_HOME": str(tmp_path / "home")})
    try:
        _wait_for(lambda: "cannot connect to PostgreSQL" in (tmp_path / "server.log").read_text(), 60,
                  "serve never logged its retry")
    finally:
        _stop(proc, log)
    text = (tmp_path / "server.log").read_text()
    assert "cr?3t" not in text and "se#" not in text and "sourcegate:***@127.0.0.1:1/library" in text, text


def test_serve_started_while_postgres_is_down_waits_for_it(switched_library, tmp_path):
    switch, settings = switched_library
    switch.down()
    # a password given as a query parameter (the test server does not check it) is never logged
    url = settings.store_url + "&password=s3cret-pw"
    proc, base, log = _serve(tmp_path, {"SOURCEGATE_HOME": str(tmp_path / "serve-home")}, "--store", url)
    try:
        def alive():
            assert proc.poll() is None, (tmp_path / "server.log").read_text()[-2000:]
            return _get(base + "/healthz")
        _wait_for(lambda: (r := alive()) is not None and r.status_code == 200, 120, "the server never answered")
        r = _wait_for(lambda: (r := _get(base + "/readyz")) is not None and r.json()["state"] == "unavailable" and r,
                      60, "/readyz never said unavailable")
        assert r.status_code == 503
        q = httpx.post(base + "/v1/ask", json={"query": Q}, timeout=30)
        assert q.status_code == 503 and "retry-after" in q.headers
        switch.up()
        _wait_for(lambda: (alive() or True) and (r := _get(base + "/readyz")) is not None and r.status_code == 200,
                  60, "the server did not become ready once PostgreSQL was back")
    finally:
        _stop(proc, log)
    logged = (tmp_path / "server.log").read_text()
    assert "could not be opened (trying again" in logged
    assert "s3cret-pw" not in logged and "password=***" in logged


@pytest.mark.slow
def test_serve_started_while_its_sqlite_index_is_locked_waits_for_it(tmp_path):
    import shutil

    home = tmp_path / "home"
    shutil.copytree(demo_home(), home, ignore=shutil.ignore_patterns("audit*"))
    # Another process holds the index in exclusive locking mode: nobody else can even read it.
    holder = sqlite3.connect(home / "index.db", isolation_level=None)
    holder.execute("PRAGMA locking_mode=EXCLUSIVE")
    holder.execute("BEGIN EXCLUSIVE")
    proc, base, log = _serve(tmp_path, {"SOURCEGATE_HOME": str(home)})
    try:
        def alive():
            assert proc.poll() is None, (tmp_path / "server.log").read_text()[-2000:]
            return _get(base + "/healthz")
        _wait_for(lambda: (r := alive()) is not None and r.status_code == 200, 120, "the server never answered")
        # past SQLite's 30 s busy timeout: still serving, not ready
        r = _wait_for(lambda: (alive() or True) and (r := _get(base + "/readyz")) is not None
                      and r.json()["state"] == "unavailable" and r, 90, "/readyz never said unavailable")
        assert r.status_code == 503
        holder.execute("COMMIT")
        holder.execute("PRAGMA locking_mode=NORMAL")
        holder.execute("SELECT count(*) FROM sqlite_master").fetchone()  # gives the lock up
        holder.close()
        _wait_for(lambda: (alive() or True) and (r := _get(base + "/readyz")) is not None and r.status_code == 200,
                  90, "the server did not become ready once the index was unlocked")
    finally:
        _stop(proc, log)
