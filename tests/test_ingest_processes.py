"""`sourcegate ingest` as a process: its embedding workers end with it, however it ends, and
SIGTERM stops it cleanly, leaving only whole documents in the index."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")

FILES = 400
PARAGRAPH = ("Inspect the seal of pump {n} every {h} operating hours and record the reading in the log. "
             "Replace the gasket when the leak rate exceeds {l} drops per minute. ")


def _library(root: Path) -> Path:
    lib = root / "lib"
    lib.mkdir()
    for n in range(FILES):
        text = "\n\n".join(PARAGRAPH.format(n=n, h=100 + k, l=k) * 3 for k in range(4))
        (lib / f"proc-{n:04d}.txt").write_text(f"Procedure {n}\n\n{text}\n", encoding="utf-8")
    return lib


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SOURCEGATE_", "AUDIT_"))}
    # The hashing embedder: these tests are about processes, not about the model.
    env.update(SOURCEGATE_HOME=str(home), SOURCEGATE_EMBEDDER="hashing", SOURCEGATE_CACHE_DIR="off")
    return env


def _start(home: Path, lib: Path) -> subprocess.Popen:
    # Output goes to files: a worker that outlives its parent would hold a pipe open for ever.
    home.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen([sys.executable, "-m", "sourcegate.cli", "ingest", str(lib)], env=_env(home),
                            stdout=(home / "out.txt").open("w"), stderr=(home / "err.txt").open("w"))
    proc.home = home
    return proc


def _output(proc: subprocess.Popen) -> str:
    return (proc.home / "out.txt").read_text() + (proc.home / "err.txt").read_text()


def _alive_children(pid: int) -> set[int]:
    """Processes whose parent is `pid`, zombies excluded."""
    out = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        if int(fields[1]) == pid and fields[0] != "Z":
            out.add(int(entry))
    return out


def _alive(pids: set[int]) -> set[int]:
    left = set()
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        if state[state.rindex(")") + 2] != "Z":
            left.add(pid)
    return left


def _wait_for_workers(proc: subprocess.Popen, timeout: float = 120.0) -> set[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"ingest ended (code {proc.returncode}) before its workers were seen: {_output(proc)}")
        kids = _alive_children(proc.pid)
        if len(kids) >= 2:
            return kids
        time.sleep(0.02)
    proc.kill()
    pytest.fail("no embedding workers started within the timeout")


def _wait_gone(pids: set[int], timeout: float = 15.0) -> set[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and _alive(pids):
        time.sleep(0.05)
    return _alive(pids)


def _whole_documents(index: Path) -> int:
    conn = sqlite3.connect(index)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        rows = conn.execute("SELECT d.id, d.chunk_count, (SELECT count(*) FROM chunks c WHERE c.doc_id = d.id) "
                            "FROM documents d").fetchall()
    finally:
        conn.close()
    half = [(doc, want, got) for doc, want, got in rows if want != got]
    assert not half, f"half-written documents: {half[:5]}"
    return len(rows)


def test_kill_9_of_ingest_leaves_no_worker_behind(tmp_path):
    lib = _library(tmp_path)
    proc = _start(tmp_path / "home", lib)
    workers = _wait_for_workers(proc)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    left = _wait_gone(workers)
    for pid in left:  # do not leave them to the next test either
        os.kill(pid, signal.SIGKILL)
    assert not left, f"embedding workers {sorted(left)} outlived their killed parent"


def test_sigterm_stops_ingest_cleanly_and_the_next_run_finishes(tmp_path):
    lib = _library(tmp_path)
    home = tmp_path / "home"
    proc = _start(home, lib)
    workers = _wait_for_workers(proc)
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail("ingest did not stop within 60 s of SIGTERM")
    left = _wait_gone(workers)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    out = _output(proc)
    assert proc.returncode == 128 + signal.SIGTERM, (proc.returncode, out)
    assert "interrupted by SIGTERM" in out and "run ingest again" in out
    assert not left, "workers outlived a stopped ingest"
    written = _whole_documents(home / "index.db")
    assert written < FILES

    done = subprocess.run([sys.executable, "-m", "sourcegate.cli", "ingest", str(lib)], env=_env(home),
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{FILES - written} added" in done.stdout and f"{written} unchanged" in done.stdout
    assert _whole_documents(home / "index.db") == FILES


def test_sigterm_while_one_big_document_is_embedded_stops_within_seconds(tmp_path):
    """The first batch is embedded in the ingest's own process: a big document there used to hold
    SIGTERM until its whole embedding was done (49 s in one measure)."""
    lib = tmp_path / "lib"
    lib.mkdir()
    paragraphs = [PARAGRAPH.format(n=k, h=100 + k, l=k % 9) * 4 for k in range(3000)]
    (lib / "big.txt").write_text("A long manual\n\n" + "\n\n".join(paragraphs) + "\n", encoding="utf-8")
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SOURCEGATE_", "AUDIT_"))}
    env.update(SOURCEGATE_HOME=str(home))  # the real embedder: seconds per hundred chunks here
    proc = subprocess.Popen([sys.executable, "-m", "sourcegate.cli", "ingest", str(lib)], env=env,
                            stdout=(home / "out.txt").open("w"), stderr=(home / "err.txt").open("w"))
    proc.home = home
    time.sleep(15)  # the embedder is loaded and the document parsed: it is being embedded
    assert proc.poll() is None, _output(proc)
    t0 = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail("ingest did not stop within 60 s of SIGTERM")
    stopped = time.monotonic() - t0
    out = _output(proc)
    assert proc.returncode == 128 + signal.SIGTERM, (proc.returncode, out)
    assert "interrupted by SIGTERM" in out
    assert stopped < 10, stopped
