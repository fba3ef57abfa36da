"""`sourcegate serve --workers N`: N server processes on one listening socket.

Answering is CPU-bound and part of it holds Python's global interpreter lock, so one process
leaves part of the cores idle however many threads it runs (on 2 cores, 13% at 4 clients:
`bench/README.md`, "Server processes"). The parent binds the socket once and forks N
workers that accept on it (the kernel hands each connection to one of them); each worker runs the
same app as a single-process `serve`, with its own admission control, judge and audit writer.

What the workers share, and why it is safe:

- the index: SQLite opened read-only by each worker (WAL, no write lock), or a server store;
- the audit log: every append takes an exclusive `flock` on the file, reads the last line and
  chains the new record to it in one `write` (`audit.AuditLog`), so N writers keep one linear hash
  chain (`bench/bench_server.py --workers 1,2` counts the lines and verifies the chain after the
  run); the lookup index `<log>.index` catches up with lines other processes appended;
- the metrics: the workers write to one `PROMETHEUS_MULTIPROC_DIR` (a temporary folder unless
  one is set), so `/metrics` from any worker reports the sum over all of them.

Admission limits are per worker: with `SERVE_MAX_CONCURRENCY` unset, each worker answers one
question per core at once (connections do not spread evenly: see `per_worker_concurrency`), and
`SERVE_MAX_QUEUE` questions may wait in each. Each question's reader then runs on one thread
(`judge_threads`).

SIGTERM or SIGINT to the parent is passed to every worker as SIGTERM: each stops accepting,
finishes and audits the questions in flight (within `SERVE_SHUTDOWN_TIMEOUT_S`), and exits; the
parent exits when they all have. A worker that dies otherwise is started again. A parent that
dies without passing anything on (SIGKILL, a crash, the OOM killer) takes its workers with it:
each gets SIGTERM from the kernel (Linux's PR_SET_PDEATHSIG) or from its own watch of its parent,
and stops as above, so none keeps serving orphaned or holds the port against the next `serve`.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time
from multiprocessing.connection import wait

from ..settings import Settings
from .admission import available_cores, concurrency_or_cores

log = logging.getLogger("sourcegate.serve")

RESTART_DELAY_S = 1.0
# A worker that exits this soon after it started, this many times in a row, stops the server.
QUICK_DEATH_S = 10.0
MAX_QUICK_DEATHS = 3
# How often a worker checks that its parent is alive (where the kernel does not tell it).
PARENT_CHECK_S = 1.0


def default_workers() -> int:
    """One worker per core this process may use (a container's CPU limit included)."""
    return available_cores()


def per_worker_concurrency(settings: Settings) -> int:
    """Questions one worker answers at once: SERVE_MAX_CONCURRENCY when set, else one per core.

    Not the worker's share of the cores: connections are not spread evenly over the workers (the
    one that wakes first accepts every connection waiting, so two clients that connect together
    often land on the same worker), and a worker held to its share then queues questions while
    the other cores sit idle (measured: 2 workers at 2 clients answered 0.73x of 1 worker)."""
    return concurrency_or_cores(settings.serve_max_concurrency)


def judge_threads(concurrency: int, workers: int) -> int:
    """Threads of the reader's onnxruntime session in one server process: the cores left to each
    question when every process answers `concurrency` at once; one with the defaults. A question
    of its own on one thread is ~10% slower than on two, but several at once answer more (2 cores,
    4 clients: 9.1 against 7.9 answers/s, with a third less CPU: two threads per run mostly wait on
    each other)."""
    return max(1, available_cores() // max(1, concurrency * max(1, workers)))


def pin_judge_threads(settings: Settings, workers: int) -> None:
    """SOURCEGATE_JUDGE_THREADS for this server process, unless the operator set it: N processes
    each running a full-width thread pool on the same cores only trade them back and forth."""
    threads = judge_threads(per_worker_concurrency(settings), workers)
    os.environ.setdefault("SOURCEGATE_JUDGE_THREADS", str(threads))


def bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
    # IPPROTO_TCP, not 0: asyncio turns Nagle's algorithm off (TCP_NODELAY) only on connections of a
    # socket that says it is TCP; left on, each small response waited ~40 ms for the client's delayed ACK.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # inherited by accepted connections on Linux
    sock.bind((host.strip("[]"), port))
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def _stop_with_parent(parent_pid: int) -> None:
    """SIGTERM to this worker when its parent ends, however it ends: the kernel sends it on Linux
    (PR_SET_PDEATHSIG); elsewhere, or if the parent died before that was set, a thread notices the
    worker was re-parented. SIGTERM is the graceful stop: the questions in flight are answered and
    audited, the listening socket is closed at once."""
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGTERM))  # PR_SET_PDEATHSIG
        except Exception:  # no libc prctl: the watch below still covers it
            pass

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(PARENT_CHECK_S)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="sourcegate-parent-watch", daemon=True).start()


def _worker(settings: Settings, host: str, port: int, sock: socket.socket, number: int, workers: int,
            parent_pid: int | None = None) -> None:
    # The parent's handlers are not the worker's: uvicorn installs its own (graceful shutdown).
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    if parent_pid is not None:
        _stop_with_parent(parent_pid)
    os.environ["SOURCEGATE_WORKER"] = str(number)
    pin_judge_threads(settings, workers)
    from .app import serve

    serve(settings, host=host, port=port, sockets=[sock])


def serve_workers(settings: Settings, host: str, port: int, workers: int) -> int:
    """Run `workers` server processes on HOST:PORT until SIGTERM/SIGINT; returns the exit code."""
    from ..logs import configure_logging

    configure_logging(settings.log_level or "info")
    metrics_dir = None
    if not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        metrics_dir = tempfile.mkdtemp(prefix="sourcegate-metrics-")
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = metrics_dir
    # prometheus_client picks its value store when imported: pick again now that the folder is set.
    from prometheus_client import values

    values.ValueClass = values.get_value_class()
    sock = bind(host, port)
    ctx = multiprocessing.get_context("fork")
    procs: dict[int, multiprocessing.process.BaseProcess] = {}
    stopping = False

    started: dict[int, float] = {}
    quick_deaths = 0
    stop_deadline: float | None = None
    failed = False

    def start(number: int) -> None:
        p = ctx.Process(target=_worker, args=(settings, host, port, sock, number, workers, os.getpid()),
                        name=f"sourcegate-worker-{number}", daemon=False)
        p.start()
        procs[number] = p
        started[number] = time.monotonic()

    def stop(signum, frame) -> None:  # noqa: ARG001
        nonlocal stopping
        if not stopping:
            log.info("stopping %d workers (signal %s)", len(procs), signal.Signals(signum).name)
        stopping = True
        # The listening socket stops listening once every process has closed it: the workers close
        # theirs as they stop; the parent's copy kept it open until the last worker ended, so new
        # connections were queued that nobody would accept, then reset. Closed, they are refused.
        sock.close()
        for p in procs.values():
            if p.is_alive() and p.pid:
                try:
                    os.kill(p.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass

    previous = {s: signal.signal(s, stop) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        log.info("serving on %s:%d with %d workers, %d questions at once each", host, port, workers,
                 per_worker_concurrency(settings))
        for n in range(workers):
            start(n)
        while procs:
            if stopping and stop_deadline is None:
                stop_deadline = time.monotonic() + settings.serve_shutdown_timeout_s + 10
            if stop_deadline is not None and time.monotonic() > stop_deadline:
                log.warning("workers still running past the shutdown timeout: killing them")
                for p in procs.values():
                    p.kill()
            sentinels = {p.sentinel: n for n, p in procs.items()}
            for ready in wait(list(sentinels), timeout=1.0):
                n = sentinels[ready]
                p = procs.pop(n)
                p.join()
                if metrics_dir is not None or os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
                    try:
                        from prometheus_client import multiprocess

                        multiprocess.mark_process_dead(p.pid)
                    except Exception:  # metrics are best effort; serving goes on
                        pass
                if stopping:
                    continue
                quick_deaths = quick_deaths + 1 if time.monotonic() - started[n] < QUICK_DEATH_S else 0
                if quick_deaths >= MAX_QUICK_DEATHS:
                    log.error("workers keep exiting at start (last exit code %s): stopping; see the lines above",
                              p.exitcode)
                    stop(signal.SIGTERM, None)
                    failed = True
                    continue
                log.warning("worker %d exited with code %s: starting it again", n, p.exitcode)
                time.sleep(RESTART_DELAY_S)
                if not stopping:
                    start(n)
        return 1 if failed else 0
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
        for p in procs.values():
            if p.is_alive():
                p.kill()
        sock.close()
        if metrics_dir is not None:
            shutil.rmtree(metrics_dir, ignore_errors=True)
            os.environ.pop("PROMETHEUS_MULTIPROC_DIR", None)
