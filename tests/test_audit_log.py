"""The audit log stays whole under concurrent appends from threads and processes."""

from __future__ import annotations

import multiprocessing
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from sourcegate.audit import AuditLog, read_records, verify

PER_WORKER = 60


def _record(worker: str, n: int) -> dict:
    # Big enough (~20 KB) that a non-atomic writer would interleave lines.
    return {"audit_id": f"{worker}-{n}", "query": f"question {n} from {worker} " + "é" * 10_000,
            "candidates": [{"id": f"c{i}", "scores": {"is_relevant": 0.5}} for i in range(20)]}


def _append_many(path: str, worker: str) -> None:
    log = AuditLog(path)
    for n in range(PER_WORKER):
        log.append(_record(worker, n))


def _check(path: Path, expected: set[str]) -> None:
    seen = []
    for line, rec, err in read_records(path):
        assert err is None, f"line {line}: {err}"
        assert verify(rec), f"line {line} does not verify"
        seen.append(rec["audit_id"])
    assert len(seen) == len(set(seen)) == len(expected)
    assert set(seen) == expected


def test_concurrent_thread_appends_stay_whole(tmp_path):
    path = tmp_path / "audit.jsonl"
    log = AuditLog(path)  # one log shared by all threads, as in the server
    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(lambda w: [log.append(_record(f"t{w}", n)) for n in range(PER_WORKER)], range(8)))
    _check(path, {f"t{w}-{n}" for w in range(8) for n in range(PER_WORKER)})


def test_concurrent_process_appends_stay_whole(tmp_path):
    path = tmp_path / "audit.jsonl"
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_append_many, args=(str(path), f"p{w}")) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
        assert p.exitcode == 0
    _check(path, {f"p{w}-{n}" for w in range(4) for n in range(PER_WORKER)})


def test_find_and_edit_detection(tmp_path):
    path = tmp_path / "audit.jsonl"
    log = AuditLog(path)
    sealed = log.append({"audit_id": "a1", "status": "answer_from_evidence"})
    assert verify(sealed) and log.find("a1") == sealed and log.find("nope") is None
    edited = dict(sealed, status="insufficient_evidence")
    assert not verify(edited)
