"""The audit log at size: lookups by id through the index (`GET /v1/audit/{id}`), the first one
building it, and `audit verify` over the whole chain.

    python bench/bench_audit.py [--records 70000] [--lookups 200] [--concurrent 20]

The log is written with the same chaining code as the server (`seal` with `seq` and `prev_hash`),
without the fsync per record, records of about 1.5 kB (a question, 12 candidates and an answer).
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import Timer, emit, lat, queries  # noqa: E402

from sourcegate.audit import AuditLog, _chain_fields, canonical_json, seal, verify_chain  # noqa: E402


def record(rng: random.Random, query: str) -> dict:
    return {
        "audit_id": uuid.uuid4().hex, "time": "2026-12-02T09:00:00.000Z", "interface": "rest", "query": query,
        "candidates": [{"id": f"DOC-{rng.randint(1, 9999)}#{i}", "doc_id": f"DOC-{i}", "route": "excluded",
                        "reason": "not_relevant", "scores": {"is_relevant": round(rng.random(), 6),
                                                             "contains_answer_evidence": round(rng.random(), 6)}}
                       for i in range(12)],
        "status": "insufficient_evidence", "answer": "Nothing reliable was found in the library.",
    }


def write_log(path: Path, n: int) -> list[str]:
    rng = random.Random(5)
    qs = queries(n)
    ids = []
    last = None
    with open(path, "wb") as f:
        for q in qs:
            rec = seal({**record(rng, q), **_chain_fields(last)})
            line = canonical_json(rec).encode("utf-8")
            f.write(line + b"\n")
            last = line
            ids.append(rec["audit_id"])
    return ids


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=70_000)
    ap.add_argument("--lookups", type=int, default=200)
    ap.add_argument("--concurrent", type=int, default=20)
    args = ap.parse_args()
    path = Path(tempfile.mkdtemp(prefix="sg-bench-audit-")) / "audit.jsonl"
    with Timer() as t:
        ids = write_log(path, args.records)
    size_mb = path.stat().st_size / 1e6
    log = AuditLog(path)
    rng = random.Random(9)
    with Timer() as first:
        assert log.find(ids[-1]) is not None
    times = []
    for audit_id in rng.sample(ids, min(args.lookups, len(ids))):
        with Timer() as one:
            assert log.find(audit_id)["audit_id"] == audit_id
        times.append(one.ms)
    wanted = rng.sample(ids, args.concurrent)
    with Timer() as together, ThreadPoolExecutor(args.concurrent) as pool:
        assert all(r is not None for r in pool.map(log.find, wanted))
    appended = log.append(record(rng, "one more question"))
    with Timer() as after_append:
        assert log.find(appended["audit_id"]) is not None
    with Timer() as verify:
        report = verify_chain(path)
    assert report.ok, report.first_break
    data = {"records": args.records, "log_mb": round(size_mb, 1), "write_s": round(t.ms / 1000, 1),
            "first_lookup_ms": round(first.ms, 1), "lookup_ms": lat(times),
            f"{args.concurrent}_concurrent_lookups_ms": round(together.ms, 1),
            "lookup_after_append_ms": round(after_append.ms, 2), "verify_s": round(verify.ms / 1000, 2)}
    emit("audit", data, f"{args.records:,} records ({size_mb:.0f} MB): first lookup (builds the index) "
                        f"{first.ms / 1000:.2f} s, then p50 {data['lookup_ms']['p50']} ms p95 {data['lookup_ms']['p95']} ms; "
                        f"{args.concurrent} at once {together.ms:.0f} ms; verify {verify.ms / 1000:.1f} s")


if __name__ == "__main__":
    main()
