"""`sourcegate serve --workers 2` as a real process tree: both workers answer on one port (REST and
MCP through the official client), the audit log they share stays one whole hash chain with a
line per answer, /metrics adds up every worker, a killed worker is started again, and SIGTERM
stops them all after the questions in flight."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import httpx2
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from test_cli import _recorded
from test_server_fixtures import demo_home, free_socket, run_async

from sourcegate.audit import read_records, verify_chain

Q = "How often should I grease the bearings on pump P-200?"


def _children(pid: int) -> set[int]:
    out = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.add(int(entry.name))
    return out


def _wait(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def test_two_workers_share_one_port_one_audit_chain_and_stop_together(tmp_path):
    scores = _recorded(tmp_path, Q, {"PROC-P200-BRG-R2": {"is_relevant": 0.97, "contains_answer_evidence": 0.95}})
    audit = tmp_path / "audit.jsonl"
    sock = free_socket()
    port = sock.getsockname()[1]
    sock.close()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SOURCEGATE_", "AUDIT_", "MCP_", "SERVE_"))}
    env.update(SOURCEGATE_HOME=str(demo_home()), AUDIT_LOG_PATH=str(audit), SOURCEGATE_JUDGE="recorded",
               SOURCEGATE_RECORDED_SCORES=str(scores), MCP_API_KEY="workers-key")
    log_path = tmp_path / "server.log"
    log = log_path.open("w")
    proc = subprocess.Popen([sys.executable, "-m", "sourcegate.cli", "serve", "--port", str(port), "--workers", "2"],
                            env=env, stdout=subprocess.DEVNULL, stderr=log)
    base = f"http://127.0.0.1:{port}"
    headers = {"x-api-key": "workers-key"}
    try:
        workers = _wait(lambda: len(_children(proc.pid)) == 2 and _children(proc.pid), 60, "two workers")

        def ready() -> bool:
            assert proc.poll() is None, log_path.read_text()[-2000:]
            try:  # each connection may reach either worker: ask until both said ready in a row
                return all(httpx.get(base + "/readyz", timeout=2).status_code == 200 for _ in range(6))
            except httpx.HTTPError:
                return False

        _wait(ready, 120, "both workers ready")

        def ask(_: int) -> dict:
            with httpx.Client(base_url=base, headers=headers, timeout=60) as c:  # a connection of its own
                r = c.post("/v1/ask", json={"query": Q})
                assert r.status_code == 200, r.text
                return r.json()

        with ThreadPoolExecutor(8) as pool:
            answers = list(pool.map(ask, range(40)))
        assert all(a["status"] == "answer_from_evidence" for a in answers)

        async def over_mcp() -> list[str]:
            out = []
            for _ in range(4):  # a new session (and connection) each time, whichever worker takes it
                async with httpx2.AsyncClient(headers=headers, timeout=60) as http, \
                        streamable_http_client(f"{base}/mcp", http_client=http) as (r, w):
                    async with ClientSession(r, w) as session:
                        await session.initialize()
                        res = await session.call_tool("search_procedures", {"query": Q})
                        assert not res.is_error
                        out.append(res.structured_content["audit_id"])
            return out

        mcp_ids = run_async(over_mcp, 120)

        # Every worker wrote to the one log: one line per answer, one unbroken chain.
        records = [rec for _, rec, _ in read_records(audit)]
        ids = [a["audit_id"] for a in answers] + mcp_ids
        assert sorted(r["audit_id"] for r in records) == sorted(ids)
        assert [r["seq"] for r in records] == list(range(1, len(ids) + 1))
        report = verify_chain(audit)
        assert report.ok and report.records == len(ids), report.breaks
        # /metrics is the sum over the workers (the total would be about half with per-process values).
        text = httpx.get(base + "/metrics", headers=headers, timeout=10).text
        total = sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                    if line.startswith("sourcegate_asks_total{"))
        assert total == len(ids), text[:2000]

        # A worker that dies is started again, and the server keeps answering meanwhile.
        victim = sorted(workers)[0]
        os.kill(victim, signal.SIGKILL)
        replaced = _wait(lambda: (kids := _children(proc.pid)) and len(kids) == 2 and victim not in kids and kids, 60,
                         "the killed worker to be replaced")
        assert ask(0)["status"] == "answer_from_evidence"
        assert "worker 0 exited" in log_path.read_text() or "worker 1 exited" in log_path.read_text()

        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
        assert not (_children(proc.pid) & replaced)
    finally:
        if proc.poll() is None:
            proc.kill()
        log.close()
    text = log_path.read_text()
    assert text.count("Application shutdown complete") >= 2, text[-3000:]
    events = [json.loads(line) for line in text.splitlines() if line.startswith("{")]
    assert any("2 workers" in e.get("event", "") for e in events)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_workers_stop_when_their_parent_is_killed(tmp_path):
    # kill -KILL on the parent left both workers serving with ppid 1, and the next `serve` failed
    # with "Address already in use"
    sock = free_socket()
    port = sock.getsockname()[1]
    sock.close()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SOURCEGATE_", "AUDIT_", "MCP_", "SERVE_"))}
    env.update(SOURCEGATE_HOME=str(demo_home()), AUDIT_LOG_PATH=str(tmp_path / "audit.jsonl"), SOURCEGATE_READER="false")
    log_path = tmp_path / "server.log"
    log = log_path.open("w")
    proc = subprocess.Popen([sys.executable, "-m", "sourcegate.cli", "serve", "--port", str(port), "--workers", "2"],
                            env=env, stdout=subprocess.DEVNULL, stderr=log)
    workers: set[int] = set()
    try:
        workers = _wait(lambda: len(_children(proc.pid)) == 2 and _children(proc.pid), 60, "two workers")

        def up() -> bool:
            assert proc.poll() is None, log_path.read_text()[-2000:]
            try:
                return httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200
            except httpx.HTTPError:
                return False

        _wait(up, 120, "the server to answer")
        proc.kill()
        proc.wait(timeout=10)
        _wait(lambda: not any(_alive(w) for w in workers), 30, "the orphaned workers to stop")
        import socket as socket_module

        probe = socket_module.socket()  # the next `serve` can bind the port (as `bind` does)
        probe.setsockopt(socket_module.SOL_SOCKET, socket_module.SO_REUSEADDR, 1)
        probe.bind(("127.0.0.1", port))
        probe.close()
    finally:
        for w in workers:
            if _alive(w):
                os.kill(w, signal.SIGKILL)
        if proc.poll() is None:
            proc.kill()
        log.close()


def test_connections_on_the_shared_socket_are_sent_without_delay():
    # asyncio turns Nagle's algorithm off only on connections of a socket that says it is TCP; on
    # one made with protocol 0 each small response waited for the client's delayed ACK (~40 ms).
    import asyncio
    import socket

    from sourcegate.server.workers import bind

    async def nodelay_of(sock: socket.socket) -> int:
        seen = asyncio.get_running_loop().create_future()

        class Probe(asyncio.Protocol):
            def connection_made(self, transport):
                s = transport.get_extra_info("socket")
                seen.set_result(s.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
                transport.close()

        server = await asyncio.get_running_loop().create_server(Probe, sock=sock)
        try:
            _, writer = await asyncio.open_connection(*sock.getsockname()[:2])
            value = await asyncio.wait_for(seen, 10)
            writer.close()
            return value
        finally:
            server.close()

    assert asyncio.run(nodelay_of(bind("127.0.0.1", 0))) != 0
    plain = socket.socket(socket.AF_INET, socket.SOCK_STREAM)  # what bind() made before
    plain.bind(("127.0.0.1", 0))
    plain.listen(8)
    assert asyncio.run(nodelay_of(plain)) == 0


def test_each_worker_may_take_a_machines_worth_of_questions(monkeypatch):
    # Connections do not spread evenly over the workers: a worker held to its share of the cores
    # queued questions while another core sat idle. Each question's reader gets the cores left to it.
    from sourcegate.server import workers as w
    from sourcegate.settings import Settings

    from sourcegate.server import admission

    monkeypatch.setattr(w.os, "cpu_count", lambda: 8)
    monkeypatch.setattr(w.os, "sched_getaffinity", lambda pid: set(range(8)))
    monkeypatch.setattr(admission, "_cgroup_cpu_limit", lambda: None)
    monkeypatch.delenv("SERVE_MAX_CONCURRENCY", raising=False)
    assert w.per_worker_concurrency(Settings()) == 8
    assert w.judge_threads(w.per_worker_concurrency(Settings()), 4) == 1
    assert w.judge_threads(w.per_worker_concurrency(Settings()), 1) == 1
    monkeypatch.setenv("SERVE_MAX_CONCURRENCY", "2")
    two_at_once = Settings()
    assert w.per_worker_concurrency(two_at_once) == 2
    assert w.judge_threads(w.per_worker_concurrency(two_at_once), 2) == 2
    assert w.judge_threads(w.per_worker_concurrency(two_at_once), 1) == 4


def test_a_containers_cpu_limit_sizes_the_workers_and_the_questions_at_once(monkeypatch, tmp_path):
    # `--cpus 0.5` on a 64-core host gave 64 workers of 64 questions at once: the host's cores
    from sourcegate.server import admission, workers as w
    from sourcegate.settings import Settings

    v2 = tmp_path / "v2"
    v2.mkdir()
    (v2 / "cpu.max").write_text("50000 100000\n")
    assert admission._cgroup_cpu_limit(str(v2)) == 0.5
    (v2 / "cpu.max").write_text("max 100000\n")
    assert admission._cgroup_cpu_limit(str(v2)) is None
    v1 = tmp_path / "v1"
    (v1 / "cpu").mkdir(parents=True)
    (v1 / "cpu" / "cpu.cfs_quota_us").write_text("250000\n")
    (v1 / "cpu" / "cpu.cfs_period_us").write_text("100000\n")
    assert admission._cgroup_cpu_limit(str(v1)) == 2.5
    (v1 / "cpu" / "cpu.cfs_quota_us").write_text("-1\n")
    assert admission._cgroup_cpu_limit(str(v1)) is None

    monkeypatch.setattr(os, "cpu_count", lambda: 64)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(64)))
    monkeypatch.setattr(admission, "_cgroup_cpu_limit", lambda: 0.5)
    settings = Settings(_env_file=None)
    assert w.default_workers() == 1 and w.per_worker_concurrency(settings) == 1
    assert admission.AdmissionControl().concurrency == 1
    monkeypatch.setattr(admission, "_cgroup_cpu_limit", lambda: 2.5)
    assert w.default_workers() == 3 and w.judge_threads(1, 3) == 1
    monkeypatch.setattr(admission, "_cgroup_cpu_limit", lambda: None)
    assert w.default_workers() == 64


def test_connections_made_after_sigterm_are_refused_not_reset(tmp_path):
    # While a worker finishes a question in flight, the parent's copy of the listening socket kept
    # it listening: connections made after SIGTERM were queued, then reset.
    import socket as socket_module
    import threading

    silent = socket_module.socket()  # a judge that accepts and never answers: the question stays in flight
    silent.bind(("127.0.0.1", 0))
    silent.listen(16)
    held: list = []
    threading.Thread(target=lambda: [held.append(silent.accept()) for _ in range(16)], daemon=True).start()
    sock = free_socket()
    port = sock.getsockname()[1]
    sock.close()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SOURCEGATE_", "AUDIT_", "MCP_", "SERVE_", "JUDGE_"))}
    env.update(SOURCEGATE_HOME=str(demo_home()), AUDIT_LOG_PATH=str(tmp_path / "audit.jsonl"), SOURCEGATE_READER="false",
               SOURCEGATE_JUDGE="typesafe", TYPESAFE_API_KEY="k",
               TYPESAFE_BASE_URL=f"http://127.0.0.1:{silent.getsockname()[1]}", JUDGE_DEADLINE_S="12",
               JUDGE_RETRIES="0")
    log_path = tmp_path / "server.log"
    log = log_path.open("w")
    proc = subprocess.Popen([sys.executable, "-m", "sourcegate.cli", "serve", "--port", str(port), "--workers", "2"],
                            env=env, stdout=subprocess.DEVNULL, stderr=log)
    try:
        def up() -> bool:
            assert proc.poll() is None, log_path.read_text()[-2000:]
            try:
                return all(httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200 for _ in range(4))
            except httpx.HTTPError:
                return False

        _wait(up, 120, "the server to answer")
        asking = threading.Thread(target=lambda: httpx.post(f"http://127.0.0.1:{port}/v1/ask", json={"query": Q},
                                                           timeout=60), daemon=True)
        asking.start()
        _wait(lambda: held, 30, "the question to reach the judge")
        proc.send_signal(signal.SIGTERM)
        time.sleep(1.0)  # the workers have closed their listeners; the question is still in flight
        assert proc.poll() is None and asking.is_alive()
        outcomes = []
        for _ in range(5):
            c = socket_module.socket()
            c.settimeout(5)
            try:
                c.connect(("127.0.0.1", port))
                c.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                outcomes.append("answered" if c.recv(64) else "closed")
            except ConnectionRefusedError:
                outcomes.append("refused")
            except (ConnectionResetError, socket_module.timeout) as e:
                outcomes.append(type(e).__name__)
            finally:
                c.close()
            time.sleep(0.1)
        assert set(outcomes) == {"refused"}, outcomes
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        log.close()
        silent.close()
