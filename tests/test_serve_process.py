"""`sourcegate serve` as a process: SIGTERM lets the question in flight finish and be audited,
then the server shuts down."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
from test_server_fixtures import demo_home, free_socket

from fakes.typesafe_server import FakeTypeSafeServer
from sourcegate.audit import read_records

Q = "How often should I grease the bearings on pump P-200?"


def test_sigterm_finishes_the_question_in_flight_then_exits(tmp_path):
    sock = free_socket()
    port = sock.getsockname()[1]
    sock.close()
    audit = tmp_path / "audit.jsonl"
    with FakeTypeSafeServer(api_key="k", delay_s=1.5) as fake:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SOURCEGATE_", "AUDIT_", "TYPESAFE_", "MCP_"))}
        env.update(SOURCEGATE_HOME=str(demo_home()), AUDIT_LOG_PATH=str(audit), SOURCEGATE_JUDGE="typesafe",
                   TYPESAFE_API_KEY="k", TYPESAFE_BASE_URL=fake.url)
        log = (tmp_path / "server.log").open("w")
        proc = subprocess.Popen([sys.executable, "-m", "sourcegate.cli", "serve", "--port", str(port)], env=env,
                                stdout=subprocess.DEVNULL, stderr=log)
        base = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 120
            while True:
                assert proc.poll() is None, (tmp_path / "server.log").read_text()[-2000:]
                assert time.monotonic() < deadline, "the server never became ready"
                try:
                    if httpx.get(base + "/readyz", timeout=1).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                time.sleep(0.1)
            with ThreadPoolExecutor(1) as pool:
                answer = pool.submit(httpx.post, base + "/v1/ask", json={"query": Q}, timeout=60)
                while fake.in_flight == 0:  # the question is being judged
                    assert not answer.done(), answer.result().text
                    time.sleep(0.01)
                proc.send_signal(signal.SIGTERM)
                r = answer.result()
            # uvicorn re-raises the signal once it has shut down, so the parent sees it.
            assert proc.wait(timeout=60) in (0, -signal.SIGTERM)
        finally:
            if proc.poll() is None:
                proc.kill()
            log.close()
    assert r.status_code == 200 and r.json()["degraded"] is False
    assert "Application shutdown complete" in (tmp_path / "server.log").read_text()
    assert [rec["audit_id"] for _, rec, _ in read_records(audit)] == [r.json()["audit_id"]]
