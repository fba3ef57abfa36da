"""Health that tells the truth, on real disks: /readyz fails while the audit log's disk is full
and recovers when space is freed; a server started while an ingest holds the index's write lock
becomes ready by itself; a store that cannot be opened is retried; ingest onto a full disk stops
with "disk full at PATH" and leaves every document whole. Full disks are small tmpfs mounts
(root only: skipped otherwise)."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import time
from pathlib import Path

import httpx
import pytest
from test_server_fixtures import CORPUS, demo_home, make_gate, make_settings, running_server

from sourcegate.ingest.pipeline import Ingestor
from sourcegate.server.app import create_app
from sourcegate.settings import Settings
from sourcegate.store import open_store

Q = "How often should I grease the bearings on pump P-200?"


@pytest.fixture()
def small_disk(request, tmp_path):
    """A small tmpfs (2 MB, or the size of the `disk_size` mark) mounted at a temporary folder."""
    mark = request.node.get_closest_marker("disk_size")
    size = mark.args[0] if mark else "2m"
    mount = tmp_path / "disk"
    mount.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mount)], capture_output=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.decode(errors='replace').strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def _fill(disk: Path) -> Path:
    """Fill the disk to the last byte; return the filler to delete."""
    filler = disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        for step in (65536, 4096, 1):
            try:
                while True:
                    os.write(fd, b"\0" * step)
            except OSError:
                pass
    finally:
        os.close(fd)
    return filler


def _wait_for(fn, timeout: float = 60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = fn()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError("condition not met in time")


def test_readyz_fails_while_the_audit_disk_is_full(small_disk):
    settings = make_settings(small_disk / "audit.jsonl")
    gate = make_gate(settings)
    with running_server(create_app(settings, gate)) as base:
        assert httpx.post(base + "/v1/ask", json={"query": Q}, timeout=60).status_code == 200
        assert httpx.get(base + "/readyz").status_code == 200
        filler = _fill(small_disk)
        ready = httpx.get(base + "/readyz")
        assert ready.status_code == 503 and ready.json()["state"] == "audit_log_unwritable"
        r = httpx.post(base + "/v1/ask", json={"query": Q}, timeout=60)
        assert r.status_code == 503 and "audit log" in r.json()["error"]
        # Space freed by the operator: ready again, without a restart.
        filler.unlink()
        assert httpx.get(base + "/readyz").status_code == 200
        assert httpx.post(base + "/v1/ask", json={"query": Q}, timeout=60).status_code == 200
    gate.close()
    lines = settings.audit_path.read_bytes().splitlines()
    assert len(lines) == 2  # nothing torn, nothing lost: two answers given, two records


def test_a_failed_audit_write_keeps_readyz_down_until_there_is_room(small_disk):
    from sourcegate.audit import AuditLog, AuditWriteError

    log = AuditLog(small_disk / "audit.jsonl")
    log.append({"audit_id": "a1"})
    filler = _fill(small_disk)
    with pytest.raises(AuditWriteError, match="No space left"):
        log.append({"audit_id": "a2", "answer": "x" * 100_000})
    # Some space back, but less than the record needs: still not writable.
    with open(filler, "r+b") as f:
        f.truncate(os.path.getsize(filler) - 20_000)
    with pytest.raises(AuditWriteError):
        log.check_writable()
    filler.unlink()
    log.check_writable()
    log.append({"audit_id": "a3"})
    assert [line.count(b'"audit_id"') for line in log.path.read_bytes().splitlines()] == [1, 1]


def test_serve_started_under_an_ingests_write_lock_becomes_ready(tmp_path):
    home = demo_home()
    lock = sqlite3.connect(home / "index.db", isolation_level=None, timeout=30)
    lock.execute("BEGIN IMMEDIATE")  # what an ingest writing a document holds
    try:
        settings = make_settings(tmp_path / "audit.jsonl")
        with running_server(create_app(settings)) as base:
            _wait_for(lambda: httpx.get(base + "/readyz").status_code == 200)
            assert httpx.post(base + "/v1/ask", json={"query": Q}, timeout=120).status_code == 200
    finally:
        lock.execute("ROLLBACK")
        lock.close()


def test_a_store_that_cannot_be_opened_is_retried_until_it_can(tmp_path):
    blocker = tmp_path / "store"
    blocker.write_text("a file where the index's folder should be", encoding="utf-8")
    settings = Settings(_env_file=None, home=tmp_path / "home", store_url=f"sqlite:///{blocker}/index.db",
                        audit_log_path=tmp_path / "audit.jsonl", mcp_allowed_hosts="")
    with running_server(create_app(settings)) as base:
        down = _wait_for(lambda: (r := httpx.get(base + "/readyz")).json()["state"] == "unavailable" and r)
        assert down.status_code == 503
        r = httpx.post(base + "/v1/ask", json={"query": Q}, timeout=30)
        assert r.status_code == 503 and r.headers["retry-after"]
        blocker.unlink()  # the operator fixes it: no restart
        # the library opens: still not ready while it holds nothing, ready once a document is in
        opened = _wait_for(lambda: (r := httpx.get(base + "/readyz")).json()["state"] == "library_empty" and r, timeout=90)
        assert opened.status_code == 503 and "sourcegate ingest" in opened.json()["detail"]
        from sourcegate.embed import get_embedder

        embedder = get_embedder(settings.embedder)
        (tmp_path / "docs").mkdir()
        (tmp_path / "docs" / "p.md").write_text("# Pump P-200\n\nGrease every 2,000 hours.\n", encoding="utf-8")
        store = open_store(settings.store_location, embedder.id, embedder.dim)
        assert Ingestor(store, embedder, workers=1).ingest([tmp_path / "docs"]).added == 1
        store.close()
        _wait_for(lambda: httpx.get(base + "/readyz").status_code == 200, timeout=90)


@pytest.mark.disk_size("24m")
def test_ingest_onto_a_full_disk_stops_and_keeps_documents_whole(small_disk, embedder, tmp_path):
    index = small_disk / "index.db"
    store = open_store(index, embedder.id, embedder.dim)
    first = Ingestor(store, embedder, workers=1).ingest([CORPUS])
    assert not first.failed
    before = {d.id: (d.content_hash, d.chunk_count) for d in store.list_documents()}
    # A library of many new documents, and a disk with no room left.
    library = tmp_path / "library"
    library.mkdir()
    for i in range(200):
        (library / f"doc{i:03d}.txt").write_text(f"Pump P-{i} procedure.\n\n" + f"Grease bearing {i}. " * 400,
                                                 encoding="utf-8")
    filler = _fill(small_disk)
    report = Ingestor(store, embedder, workers=1).ingest([library])
    assert report.stopped and f"disk full at {index}" in report.stopped
    assert len(report.failed) == 1 and report.failed[0][0] == str(index)
    filler.unlink()
    # The store is usable and holds only whole documents: the demo corpus as it was, and any
    # new document with all its chunks.
    after = {d.id: (d.content_hash, d.chunk_count) for d in store.list_documents()}
    assert {k: after[k] for k in before} == before
    store.close()
    db = sqlite3.connect(index)
    counts = dict(db.execute("SELECT doc_id, count(*) FROM chunks GROUP BY doc_id").fetchall())
    assert counts == {doc_id: n for doc_id, (_, n) in after.items()}
    assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    db.close()


def test_readyz_is_not_ready_while_the_judge_cannot_be_loaded(tmp_path, monkeypatch):
    import sourcegate.server.app as app_module

    monkeypatch.setattr(app_module, "LOAD_RETRY_S", (0.2, 0.2, 0.2, 0.5))
    scores = tmp_path / "scores.jsonl"  # not there yet: the recorded judge cannot be loaded
    settings = make_settings(tmp_path / "audit.jsonl", judge="recorded", recorded_scores_path=str(scores),
                             mcp_allowed_hosts="")
    with running_server(create_app(settings), settings) as base:
        deadline = time.monotonic() + 120
        while (r := httpx.get(base + "/readyz", timeout=10)).json()["state"] == "starting":
            assert time.monotonic() < deadline, "the library never loaded"
            time.sleep(0.2)
        assert r.status_code == 503 and r.json()["state"] == "judge_unavailable", r.json()
        assert "degraded" in r.json()["detail"]
        scores.write_text("", encoding="utf-8")  # the judge can be loaded now: ready by itself
        deadline = time.monotonic() + 30
        while (r := httpx.get(base + "/readyz", timeout=10)).status_code != 200:
            assert time.monotonic() < deadline, r.json()
            time.sleep(0.2)
        assert r.json()["state"] == "ready"


def test_the_vectors_are_loaded_before_ready(tmp_path):
    settings = make_settings(tmp_path / "audit.jsonl", mcp_allowed_hosts="")
    app = create_app(settings)
    with running_server(app, settings) as base:
        deadline = time.monotonic() + 120
        while httpx.get(base + "/readyz", timeout=10).status_code != 200:
            assert time.monotonic() < deadline
            time.sleep(0.2)
        gate = app.state.gate_holder.gate
        store = gate.store
        assert store._np_cache is not None or store.dense_index == "sqlite"  # loaded by the warm-up
        judge = gate.judge.inner  # the local judge's weights and reader too: not on the first question
        assert judge._w is not None and judge._reader is not None
