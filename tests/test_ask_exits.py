"""`sourcegate ask` exits once it has printed its answer, even while a call to a hung judge is
still waiting (past JUDGE_DEADLINE_S the answer is a degraded abstention)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time

from test_server_fixtures import demo_home

Q = "How often should I grease the bearings on pump P-200?"


class HungServer:
    """Accepts connections and never answers."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.held: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.held.append(conn)

    def close(self):
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()
        for c in self.held:
            c.close()


def test_ask_exits_after_its_answer_while_the_judge_hangs(tmp_path):
    hung = HungServer()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SOURCEGATE_", "AUDIT_", "TYPESAFE_", "JUDGE_"))}
    env.update(SOURCEGATE_HOME=str(demo_home()), AUDIT_LOG_PATH=str(tmp_path / "audit.jsonl"),
               SOURCEGATE_JUDGE="typesafe", TYPESAFE_API_KEY="k", TYPESAFE_BASE_URL=f"http://127.0.0.1:{hung.port}",
               TYPESAFE_TIMEOUT_S="600", JUDGE_DEADLINE_S="2", JUDGE_RETRIES="0")
    try:
        t0 = time.monotonic()
        proc = subprocess.Popen([sys.executable, "-m", "sourcegate.cli", "ask", Q, "--json"], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            out, err = proc.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
            raise AssertionError(f"ask did not exit; it printed: {out[-500:]!r}")
        elapsed = time.monotonic() - t0
    finally:
        hung.close()
    assert hung.held, "the judge never called the hung server"
    assert '"degraded": true' in out, (out[-1000:], err[-1000:])
    assert proc.returncode == 3, (proc.returncode, err[-1000:])  # a degraded ask exits 3
    assert elapsed < 100, elapsed
