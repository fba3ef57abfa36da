"""What N `serve` replicas and one PostgreSQL server sustain for a library of M documents: a
discrete-event simulation fed with measured per-stage costs (docs/scaling.md).

Each question arrives (Poisson), is retrieved on the database (a queue with --db-cores servers;
its cost grows with the library, interpolated on a log scale between the two measured sizes), then
embedded, judged and answered on the replica with the fewest questions in flight (each replica a
queue with --cores servers). Service times vary around their means (gamma, coefficient of
variation 0.3). For each cell it finds the highest arrival rate whose p95 latency stays within
--slo-ms, and reports the p95 at 70 % of that rate.

    python bench/simulate_scaling.py [--replicas 1,2,4,8] [--documents 1500,15000,150000]
        [--from bench_stores.json] [--judge-ms 100] [--cores 2] [--db-cores 4]

Defaults are figures measured in bench/README.md; `--from` reads the PostgreSQL store times at
the two sizes from a `bench_stores.py` JSON instead.
"""

from __future__ import annotations

import argparse
import heapq
import json
import math
import random
from pathlib import Path


def db_cost_ms(chunks: float, measured: dict[int, float]) -> float:
    """Database time per question, log-linear in the number of chunks between (and beyond) two sizes."""
    (n1, c1), (n2, c2) = sorted(measured.items())[:2]
    slope = (c2 - c1) / (math.log(n2) - math.log(n1))
    return max(0.1, c1 + slope * (math.log(max(chunks, 1.0)) - math.log(n1)))


def simulate(rate: float, replicas: int, cores: int, db_cores: int, replica_ms: float, db_ms: float,
             questions: int = 4000, seed: int = 1, cv: float = 0.3) -> list[float]:
    """Latencies (ms) of `questions` questions arriving at `rate` per second."""
    rng = random.Random(seed)
    shape = 1.0 / (cv * cv)

    def draw(mean: float) -> float:
        return rng.gammavariate(shape, mean / shape)

    # Event queue: (time_ms, kind, question). Kinds: 0 arrival, 1 db done, 2 replica done.
    events: list[tuple[float, int, int]] = []
    t = 0.0
    for q in range(questions):
        t += rng.expovariate(rate / 1000.0)
        heapq.heappush(events, (t, 0, q))
    arrived: dict[int, float] = {}
    db_busy, db_wait = 0, []
    rep_busy = [0] * replicas
    rep_inflight = [0] * replicas
    rep_wait: list[list[int]] = [[] for _ in range(replicas)]
    where: dict[int, int] = {}
    out: list[float] = []
    while events:
        now, kind, q = heapq.heappop(events)
        if kind == 0:
            arrived[q] = now
            if db_busy < db_cores:
                db_busy += 1
                heapq.heappush(events, (now + draw(db_ms), 1, q))
            else:
                db_wait.append(q)
        elif kind == 1:
            if db_wait:
                heapq.heappush(events, (now + draw(db_ms), 1, db_wait.pop(0)))
            else:
                db_busy -= 1
            r = min(range(replicas), key=lambda i: rep_inflight[i])  # least outstanding questions
            where[q] = r
            rep_inflight[r] += 1
            if rep_busy[r] < cores:
                rep_busy[r] += 1
                heapq.heappush(events, (now + draw(replica_ms), 2, q))
            else:
                rep_wait[r].append(q)
        else:
            r = where.pop(q)
            rep_inflight[r] -= 1
            if rep_wait[r]:
                heapq.heappush(events, (now + draw(replica_ms), 2, rep_wait[r].pop(0)))
            else:
                rep_busy[r] -= 1
            out.append(now - arrived.pop(q))
    return out


def p95(values: list[float]) -> float:
    s = sorted(values)
    return s[int(0.95 * (len(s) - 1))]


def capacity(replicas: int, cores: int, db_cores: int, replica_ms: float, db_ms: float, slo_ms: float) -> float:
    """Highest arrival rate (questions/s) whose p95 stays within the SLO (bisection)."""
    ceiling = min(replicas * cores * 1000.0 / replica_ms, db_cores * 1000.0 / db_ms)
    lo, hi = 0.0, ceiling
    for _ in range(18):
        mid = (lo + hi) / 2
        if mid <= 0:
            break
        if p95(simulate(mid, replicas, cores, db_cores, replica_ms, db_ms)) <= slo_ms:
            lo = mid
        else:
            hi = mid
    return lo


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--replicas", default="1,2,4,8")
    ap.add_argument("--documents", default="1500,15000,150000")
    ap.add_argument("--chunks-per-document", type=float, default=6.7,
                    help="15,000 documents of a few pages each make about 100,000 chunks")
    ap.add_argument("--cores", type=int, default=2, help="CPU cores per replica")
    ap.add_argument("--db-cores", type=int, default=4)
    ap.add_argument("--judge-ms", type=float, default=100.0, help="local judge on 12 candidates, one core")
    ap.add_argument("--replica-other-ms", type=float, default=90.0,
                    help="query embedding, rerank, answer, audit and HTTP/MCP serving on the replica: with the "
                         "judge, 190 ms of core time, what bench_server.py measured (2 cores saturate at 10.4/s)")
    ap.add_argument("--db-ms-10k", type=float, default=6.0, help="database time per question at 10,000 chunks")
    ap.add_argument("--db-ms-100k", type=float, default=20.0, help="database time per question at 100,000 chunks")
    ap.add_argument("--from", dest="from_json", type=Path, help="bench_stores.py JSON to take the database times from")
    ap.add_argument("--slo-ms", type=float, default=1000.0)
    args = ap.parse_args()
    measured = {10_000: args.db_ms_10k, 100_000: args.db_ms_100k}
    if args.from_json:
        text = args.from_json.read_text()
        data = json.loads(text[: text.rindex("}") + 1])
        # Database time per question: the two searches and the two fetches of a hybrid retrieve,
        # i.e. the retrieve without the query embedding.
        measured = {r["size"]: max(0.1, r["postgresql"]["hybrid_retrieve_ms"]["p50"]
                                   - r["postgresql"]["embed_query_ms"]["p50"]) for r in data["sizes"]}
        if len(measured) < 2:
            raise SystemExit(f"{args.from_json} measures one size; run bench_stores.py with two (--sizes 10000,100000)")
    replica_ms = args.judge_ms + args.replica_other_ms
    rows = []
    for m in [int(x) for x in args.documents.split(",")]:
        chunks = m * args.chunks_per_document
        dbm = db_cost_ms(chunks, measured)
        for n in [int(x) for x in args.replicas.split(",")]:
            cap = capacity(n, args.cores, args.db_cores, replica_ms, dbm, args.slo_ms)
            lat = simulate(cap * 0.7, n, args.cores, args.db_cores, replica_ms, dbm) if cap > 0 else [float("nan")]
            bound = "replicas" if n * args.cores / replica_ms < args.db_cores / dbm else "database"
            rows.append({"documents": m, "chunks": int(chunks), "replicas": n, "db_ms": round(dbm, 1),
                         "capacity_qps": round(cap, 1), "p95_ms_at_70pct": round(p95(lat), 0), "bound_by": bound,
                         "judge_share_of_cpu": round(args.judge_ms / (replica_ms + dbm), 2)})
    print(json.dumps({"inputs": {**vars(args), "from_json": str(args.from_json) if args.from_json else None,
                                 "db_ms_measured": measured, "replica_ms": replica_ms}, "rows": rows}, indent=2))
    print("| documents | chunks | replicas | db ms/question | questions/s at p95 <= %d ms | p95 at 70 %% of it | bound by |"
          % args.slo_ms)
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['documents']:,} | {r['chunks']:,} | {r['replicas']} | {r['db_ms']} | {r['capacity_qps']} | "
              f"{r['p95_ms_at_70pct']:.0f} ms | {r['bound_by']} |")


if __name__ == "__main__":
    main()
