"""The disk: a home that cannot be written, a corrupt or locked index, an audit log that cannot be
written. One clear line naming the file and the fix; no answer without its audit record."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest import DEMO_CORPUS
from sourcegate.cli import cli
from sourcegate.storage_errors import describe
from test_cli import _recorded

Q = "How often should I grease the bearings on pump P-200?"


def _run(*args):
    return CliRunner().invoke(cli, list(args))


def test_a_home_that_cannot_be_created_is_named(tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("SOURCEGATE_HOME", str(blocker / "home"))
    r = _run("ingest", str(DEMO_CORPUS))
    assert r.exit_code == 1
    assert str(blocker) in r.output and "SOURCEGATE_HOME" in r.output
    assert "Traceback" not in r.output


def test_a_corrupt_index_is_named_with_the_fix(sourcegate_home):
    sourcegate_home.mkdir(parents=True)
    (sourcegate_home / "index.db").write_bytes(b"this is not an sqlite file" * 100)
    for args in (["status"], ["ask", Q], ["ingest", str(DEMO_CORPUS)]):
        r = _run(*args)
        assert r.exit_code == 1, (args, r.output)
        assert str(sourcegate_home / "index.db") in r.output and "corrupt" in r.output, r.output
        assert "sourcegate ingest" in r.output and "Traceback" not in r.output


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_ask_gives_no_answer_when_the_audit_log_cannot_be_written(tmp_path, monkeypatch):
    scores = _recorded(tmp_path, Q, {"PROC-P200-BRG-R2": {"is_relevant": 0.97, "contains_answer_evidence": 0.95}})
    monkeypatch.setenv("SOURCEGATE_RECORDED_SCORES", str(scores))
    assert _run("ingest", str(DEMO_CORPUS)).exit_code == 0
    monkeypatch.setenv("AUDIT_LOG_PATH", "/dev/full")  # a full disk: every write fails
    r = _run("--judge", "recorded", "ask", Q)
    assert r.exit_code == 1
    assert "cannot write the audit log /dev/full" in r.output and "No space left" in r.output
    assert "answer_from_evidence" not in r.output and "[1]" not in r.output


def test_an_audit_log_cut_by_a_full_disk_keeps_whole_lines(tmp_path, monkeypatch):
    from sourcegate import audit as audit_mod
    from sourcegate.audit import AuditLog, AuditWriteError, read_records

    log = AuditLog(tmp_path / "audit.jsonl")
    log.append({"audit_id": "first"})
    real_write = os.write
    calls = {"n": 0}

    def half_then_full(fd, data):
        calls["n"] += 1
        if calls["n"] == 1:
            return real_write(fd, bytes(data[: len(data) // 2]))
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(audit_mod.os, "write", half_then_full)
    with pytest.raises(AuditWriteError, match="No space left"):
        log.append({"audit_id": "second", "answer": "x" * 1000})
    monkeypatch.setattr(audit_mod.os, "write", real_write)
    log.append({"audit_id": "third"})
    records = list(read_records(log.path))
    assert [rec["audit_id"] for _, rec, err in records] == ["first", "third"]


def test_storage_errors_name_the_path_and_the_fix(tmp_path):
    index = tmp_path / "index.db"
    for message, expect in (("database is locked", "locked by another process"),
                            ("attempt to write a readonly database", "read-only"),
                            ("database or disk is full", "is full"),
                            ("file is not a database", "corrupt")):
        text = describe(sqlite3.OperationalError(message), index, tmp_path)
        assert text and str(index) in text and expect in text, (message, text)
    text = describe(OSError(30, "Read-only file system", str(tmp_path / "home")), index, tmp_path)
    assert "Read-only file system" in text and "SOURCEGATE_HOME" in text
    assert describe(ValueError("something else"), index, tmp_path) is None


def test_a_locked_index_is_reported_as_locked(tmp_path):
    # The store waits for a lock before it gives up; what the user reads then:
    index = tmp_path / "index.db"
    conn = sqlite3.connect(index)
    conn.execute("CREATE TABLE t (x)")
    conn.execute("BEGIN EXCLUSIVE")
    other = sqlite3.connect(index, timeout=0.05)
    with pytest.raises(sqlite3.OperationalError) as caught:
        other.execute("INSERT INTO t VALUES (1)")
    conn.rollback()
    text = describe(caught.value, Path(index), tmp_path)
    assert "locked by another process" in text and str(index) in text
