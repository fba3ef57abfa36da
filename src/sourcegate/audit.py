"""Append-only audit log: one canonical-JSON line per answer, with a hash that detects edits.

Records hold user questions. Set AUDIT_REDACT_QUERY=true to store a hash of the question instead
of its text, or AUDIT_ENABLED=false to turn the log off.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import threading
from pathlib import Path
from typing import Any, Iterator

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore

HASH_FIELD = "record_hash"


def canonical_json(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def record_hash(record: dict) -> str:
    body = {k: v for k, v in record.items() if k != HASH_FIELD}
    return "sha256:" + hashlib.sha256(canonical_json(body).encode("utf-8")).hexdigest()


def seal(record: dict) -> dict:
    record = {k: v for k, v in record.items() if k != HASH_FIELD}
    record[HASH_FIELD] = record_hash(record)
    return record


def verify(record: dict) -> bool:
    return record.get(HASH_FIELD) == record_hash(record)


class AuditWriteError(OSError):
    """The audit log cannot be written. The message names the file, the reason and the fix; an
    answer that cannot be recorded is not given."""

    def __init__(self, path: Path, error: OSError):
        reason = error.strerror or type(error).__name__
        if error.errno == errno.ENOSPC:
            fix = "free space on that disk or point AUDIT_LOG_PATH to another one"
        elif error.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
            fix = "make it writable by this user or set AUDIT_LOG_PATH to a writable file"
        else:
            fix = "fix the path or set AUDIT_LOG_PATH to a writable file (AUDIT_ENABLED=false turns the log off)"
        self.message = f"cannot write the audit log {path}: {reason}: {fix}"
        super().__init__(error.errno, self.message)
        self.path = path

    def __str__(self) -> str:
        return self.message


def redact_query(query: str) -> dict:
    return {"redacted": True, "sha256": hashlib.sha256(query.encode("utf-8")).hexdigest()}


class AuditLog:
    """Appends whole lines: a process-wide lock for threads and an advisory file lock for
    processes sharing the file, with one write() of the whole line under O_APPEND."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._lock = threading.Lock()

    def check_writable(self) -> None:
        """Raise AuditWriteError unless the log can be opened for appending (created if missing)."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            os.close(os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600))
        except OSError as e:
            raise AuditWriteError(self.path, e) from None

    def append(self, record: dict) -> dict:
        """Append one sealed record; AuditWriteError if it cannot be written whole."""
        try:
            return self._append(record)
        except OSError as e:
            raise AuditWriteError(self.path, e) from None

    def _append(self, record: dict) -> dict:
        sealed = seal(record)
        line = (canonical_json(sealed) + "\n").encode("utf-8")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._lock:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                if fcntl is not None:
                    fcntl.flock(fd, fcntl.LOCK_EX)
                start = os.fstat(fd).st_size
                view = memoryview(line)
                try:
                    while view:
                        n = os.write(fd, view)
                        view = view[n:]
                    os.fsync(fd)
                except OSError:
                    # A full disk can take part of the line: cut it off, so the next record
                    # starts on a line of its own.
                    try:
                        os.ftruncate(fd, start)
                    except OSError:
                        pass
                    raise
            finally:
                if fcntl is not None:
                    fcntl.flock(fd, fcntl.LOCK_UN)
                os.close(fd)
        return sealed

    def find(self, audit_id: str) -> dict | None:
        for _, rec, _ in read_records(self.path):
            if rec is not None and rec.get("audit_id") == audit_id:
                return rec
        return None


def read_records(path: str | Path) -> Iterator[tuple[int, dict | None, str | None]]:
    """Yield (line number, record or None, error or None) for each non-empty line."""
    p = Path(path)
    if not p.exists():
        return
    with open(p, encoding="utf-8") as f:
        for n, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as e:
                yield n, None, f"invalid JSON ({e.msg})"
                continue
            if not isinstance(rec, dict):
                yield n, None, "not a JSON object"
                continue
            yield n, rec, None
