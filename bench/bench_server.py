"""Server throughput: `sourcegate serve` on 127.0.0.1 with the demo corpus, N concurrent clients
posting the demo questions to /v1/ask.

    python bench/bench_server.py [--clients 1,2,4,8] [--requests 60] [--workers 1] [--allow-degraded]
    python bench/bench_server.py --clients 50 --duration 60    # overload: 503s, p95, audit lines
    python bench/bench_server.py --workers 1,2 --clients 2,4,8 --requests 60   # processes, same load

With --duration, every client posts in a loop until the time is up; the report counts answers,
deliberate 503s (with their Retry-After), other errors, the p95 of the answered requests, and
the audit lines written against the answers given.

With --workers N,M the whole run is repeated for each count of server processes (`serve
--workers N`), under the same load, one after the other on a fresh audit log each; each run ends
with the audit lines counted against the answers given and `sourcegate audit verify` on the log.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import REPO, emit, lat
from _demo import DEMO, demo_questions, demo_settings, ingest_corpus


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _cli() -> list[str]:
    exe = Path(sys.executable).parent / "sourcegate"
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "sourcegate.cli"]


def start_server(home: Path, port: int, judge: str, extra_env: dict[str, str], log: Path,
                 workers: int = 1) -> subprocess.Popen:
    env = {**os.environ, "SOURCEGATE_HOME": str(home), "SOURCEGATE_JUDGE": judge, **extra_env}
    env.pop("MCP_API_KEY", None)  # localhost benchmark: no key
    return subprocess.Popen([*_cli(), "serve", "--host", "127.0.0.1", "--port", str(port), "--workers", str(workers)],
                            env=env, cwd=REPO,
                            # Logs go to a file: an unread pipe fills up and blocks the server's log writes.
                            stdout=subprocess.DEVNULL, stderr=log.open("w"), text=True)


def wait_ready(base: str, proc: subprocess.Popen, log: Path, timeout: float = 120.0) -> None:
    t0 = time.time()
    while time.time() - t0 < timeout:
        if proc.poll() is not None:
            raise SystemExit(f"the server exited with code {proc.returncode}: {log.read_text()[-2000:]}")
        try:
            if httpx.get(base + "/readyz", timeout=1.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    raise SystemExit(f"the server did not answer /healthz within {timeout:.0f} s")


def verify_audit(home: Path) -> dict:
    """`sourcegate audit verify` on the run's log: whole chain, exit code and its summary line."""
    r = subprocess.run([*_cli(), "audit", "verify", str(home / "audit.jsonl"), "--json"], capture_output=True, text=True,
                       env={**os.environ, "SOURCEGATE_HOME": str(home)}, cwd=REPO)
    try:
        report = json.loads(r.stdout)
    except json.JSONDecodeError:
        report = {"output": (r.stdout + r.stderr)[-500:]}
    return {"exit_code": r.returncode, "ok": r.returncode == 0, "report": report}


def load(base: str, clients: int, total: int, questions: list[str], timeout: float) -> dict:
    """`total` requests spread over `clients` threads, each with its own connection."""
    lock = threading.Lock()
    lat_ms: list[float] = []
    answered_ms: list[float] = []
    codes: dict[int, int] = {}
    degraded = [0]
    errors: dict[str, int] = {}
    counter = iter(range(total))

    def worker() -> None:
        with httpx.Client(base_url=base, timeout=timeout) as c:
            while True:
                with lock:
                    i = next(counter, None)
                if i is None:
                    return
                t = time.perf_counter()
                try:
                    r = c.post("/v1/ask", json={"query": questions[i % len(questions)]})
                except httpx.HTTPError as e:  # a timeout is a result here, not a crash of the client thread
                    with lock:
                        errors[type(e).__name__] = errors.get(type(e).__name__, 0) + 1
                    continue
                ms = (time.perf_counter() - t) * 1000
                with lock:
                    lat_ms.append(ms)
                    codes[r.status_code] = codes.get(r.status_code, 0) + 1
                    if r.status_code == 200:
                        answered_ms.append(ms)
                        degraded[0] += bool(r.json().get("degraded"))

    threads = [threading.Thread(target=worker) for _ in range(clients)]
    t0 = time.perf_counter()
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    wall = time.perf_counter() - t0
    return {"clients": clients, "requests": total, "wall_s": round(wall, 2), "req_per_s": round(total / wall, 2),
            "answered_per_s": round(codes.get(200, 0) / wall, 2), "latency_ms": lat(lat_ms),
            "latency_answered_ms": lat(answered_ms), "status_codes": codes, "errors": errors, "degraded": degraded[0]}


def soak(base: str, clients: int, duration: float, questions: list[str], timeout: float) -> dict:
    """`clients` threads posting in a loop for `duration` seconds."""
    lock = threading.Lock()
    answered_ms: list[float] = []
    rejected_ms: list[float] = []
    codes: dict[int, int] = {}
    retry_after: dict[str, int] = {}
    errors: dict[str, int] = {}
    degraded = [0]
    deadline = time.perf_counter() + duration

    def worker(n: int) -> None:
        i = n
        with httpx.Client(base_url=base, timeout=timeout) as c:
            while time.perf_counter() < deadline:
                i += clients
                t = time.perf_counter()
                try:
                    r = c.post("/v1/ask", json={"query": questions[i % len(questions)]})
                except httpx.HTTPError as e:
                    with lock:
                        errors[type(e).__name__] = errors.get(type(e).__name__, 0) + 1
                    continue
                ms = (time.perf_counter() - t) * 1000
                with lock:
                    codes[r.status_code] = codes.get(r.status_code, 0) + 1
                    if r.status_code == 200:
                        answered_ms.append(ms)
                        degraded[0] += bool(r.json().get("degraded"))
                    elif r.status_code == 503:
                        rejected_ms.append(ms)
                        ra = r.headers.get("retry-after", "none")
                        retry_after[ra] = retry_after.get(ra, 0) + 1
                if r.status_code == 503:
                    # A well-behaved client waits before it retries; capped so the load stays high.
                    time.sleep(min(float(r.headers.get("retry-after", 1)), 1.0))

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(clients)]
    t0 = time.perf_counter()
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    wall = time.perf_counter() - t0
    other = {str(k): v for k, v in codes.items() if k not in (200, 503)}
    return {"clients": clients, "duration_s": round(wall, 1), "answered": codes.get(200, 0),
            "answered_per_s": round(codes.get(200, 0) / wall, 2), "rejected_503": codes.get(503, 0),
            "retry_after": retry_after, "errors": {**errors, **other}, "degraded": degraded[0],
            "latency_answered_ms": lat(answered_ms), "latency_503_ms": lat(rejected_ms)}


def _audit_lines(home: Path) -> int:
    path = home / "audit.jsonl"
    return sum(1 for line in path.open(encoding="utf-8") if line.strip()) if path.exists() else 0


def run_one(args, questions: list[str], extra: dict[str, str], workers: int) -> dict:
    """One server with `workers` processes on a fresh home: warm it, run the load, count and verify the audit log."""
    with tempfile.TemporaryDirectory(prefix="sg-bench-server-") as tmp:
        home = Path(tmp)
        ingest_corpus(demo_settings(home), DEMO / "corpus")
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        log = home / "server.log"
        proc = start_server(home, port, args.judge, extra, log, workers)
        answers = 0
        try:
            wait_ready(base, proc, log)
            first = httpx.post(base + "/v1/ask", json={"query": questions[0]}, timeout=120.0)
            first.raise_for_status()
            if first.json().get("degraded") and not args.allow_degraded:
                raise SystemExit("the server's judge is unavailable (degraded answers): make the local judge work, "
                                 "or pass --allow-degraded to measure the serving path without judging")
            answers += 1
            # Warm every worker: each loads its own judge on its first question.
            for q in questions[:5 * workers]:
                answers += httpx.post(base + "/v1/ask", json={"query": q}, timeout=120.0).status_code == 200
            if args.duration:
                before = _audit_lines(home)
                result = soak(base, int(args.clients.split(",")[0]), args.duration, questions, args.timeout)
                result["audit_lines"] = _audit_lines(home) - before
                result["server_env"] = extra
                rows = None
                answers += result["answered"]
            else:
                rows = [load(base, n, args.requests, questions, args.timeout)
                        for n in [int(x) for x in args.clients.split(",")]]
                answers += sum(r["status_codes"].get(200, 0) for r in rows)
        finally:
            proc.terminate()
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
        audit = {"lines": _audit_lines(home), "answers": answers, "verify": verify_audit(home)}
    if rows is None:
        result["audit"] = audit
        return {"workers": workers, "soak": result}
    return {"workers": workers, "levels": rows, "audit": audit}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clients", default="1,2,4,8")
    ap.add_argument("--requests", type=int, default=60, help="requests per concurrency level")
    ap.add_argument("--workers", default="1", help="server processes (serve --workers), one run per value: 1,2")
    ap.add_argument("--judge", default="local")
    ap.add_argument("--allow-degraded", action="store_true",
                    help="measure even when the judge is unavailable (answers are then degraded abstentions)")
    ap.add_argument("--env", action="append", default=[], metavar="KEY=VALUE",
                    help="extra environment for the server process (e.g. OPENBLAS_NUM_THREADS=1)")
    ap.add_argument("--timeout", type=float, default=60.0, help="client timeout per request, seconds")
    ap.add_argument("--duration", type=float, default=None,
                    help="soak: every client posts in a loop for this many seconds (one --clients value)")
    args = ap.parse_args()
    questions = demo_questions()
    extra = dict(kv.split("=", 1) for kv in args.env)
    runs = [run_one(args, questions, extra, int(w)) for w in args.workers.split(",")]

    def audit_text(a: dict) -> str:
        return (f"audit lines {a['lines']} for {a['answers']} answers, verify "
                f"{'clean' if a['verify']['ok'] else 'FAILED: ' + json.dumps(a['verify']['report'])[:300]}")

    if args.duration:
        for run in runs:
            r = run["soak"]
            emit("server-soak", {"judge": args.judge, "workers": run["workers"], **r},
                 f"{run['workers']} workers, {r['clients']} clients for {r['duration_s']} s: {r['answered']} answered "
                 f"({r['answered_per_s']}/s), {r['rejected_503']} 503s, errors {r['errors'] or 'none'}, answered p50/p95 "
                 f"{r['latency_answered_ms']['p50']}/{r['latency_answered_ms']['p95']} ms (max {r['latency_answered_ms']['max']}), "
                 f"audit lines {r['audit_lines']} for {r['answered']} answers; {audit_text(r['audit'])}")
        return
    lines = []
    for run in runs:
        rows = run["levels"]
        best = max(rows, key=lambda r: r["req_per_s"])
        lines.append(f"{run['workers']} workers: " + "; ".join(
            f"{r['clients']} clients: {r['answered_per_s']} answered/s ({r['status_codes'].get(503, 0)} 503s), "
            f"answered p50/p95 {r['latency_answered_ms']['p50']}/{r['latency_answered_ms']['p95']} ms"
            + (f", {r['degraded']} degraded" if r["degraded"] else "")
            + (f", errors {r['errors']}" if r["errors"] else "") for r in rows)
            + f" | best {best['req_per_s']} req/s at {best['clients']} clients; {audit_text(run['audit'])}")
    if len(runs) > 1:
        base_run = runs[0]
        for run in runs[1:]:
            ratios = [f"{b['clients']} clients x{r['answered_per_s'] / b['answered_per_s']:.2f}"
                      for b, r in zip(base_run["levels"], run["levels"]) if b["answered_per_s"]]
            lines.append(f"answers per second, {run['workers']} workers / {base_run['workers']}: " + ", ".join(ratios))
    emit("server", {"judge": args.judge, "server_env": extra, "runs": runs,
                    "levels": runs[0]["levels"] if len(runs) == 1 else None}, " || ".join(lines))


if __name__ == "__main__":
    main()
