"""Admission control: a bounded number of questions answered at once, a bounded queue, and a
bounded wait in it.

Answering is CPU-bound; past what the cores can do, an unbounded queue only makes every
request wait longer, until agent platforms time out on all of them. A question that finds the
queue full, or waits in it longer than the limit, is turned away at once with a hint of when to
retry (HTTP 503 with Retry-After, or an MCP tool error saying the same).
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio


class Unavailable(Exception):
    """The server cannot answer this question now (HTTP 503). `reason` is a short code for logs
    and metrics; `retry_after` is in whole seconds, or None when only an operator can fix it."""

    def __init__(self, message: str, reason: str, retry_after: int | None = None):
        super().__init__(message)
        self.reason = reason
        self.retry_after = retry_after


class Overloaded(Unavailable):
    """No slot for this question: the queue is full, or it waited its limit."""

    def __init__(self, retry_after: int, reason: str):
        super().__init__(f"the server is busy ({reason.replace('_', ' ')}): retry after {retry_after} s",
                         reason, max(1, retry_after))


def _cgroup_cpu_limit(root: str = "/sys/fs/cgroup") -> float | None:
    """The CPU limit of this process's cgroup in cores (`docker run --cpus 0.5`: 0.5), or None
    when there is none: cgroup v2's `cpu.max`, else v1's CFS quota and period."""
    def read(path: str) -> str | None:
        try:
            with open(path, encoding="ascii") as f:
                return f.read().strip()
        except (OSError, UnicodeDecodeError):
            return None

    v2 = read(os.path.join(root, "cpu.max"))
    if v2:
        quota, _, period = v2.partition(" ")
        if quota != "max":
            try:
                return int(quota) / int(period or 100000)
            except ValueError:
                return None
        return None
    quota = read(os.path.join(root, "cpu", "cpu.cfs_quota_us"))
    period = read(os.path.join(root, "cpu", "cpu.cfs_period_us"))
    try:
        if quota and period and int(quota) > 0:
            return int(quota) / int(period)
    except ValueError:
        pass
    return None


def available_cores() -> int:
    """The cores this process may use: the CPUs it may run on (affinity, `--cpuset-cpus`), no more
    than its cgroup's CPU limit rounded up (`--cpus 0.5` is one core). `os.cpu_count()` counts the
    host's: in a container limited to half a core on a 64-core host, 64 workers of 64 questions."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    limit = _cgroup_cpu_limit()
    if limit is not None and limit > 0:
        import math

        cores = min(cores, math.ceil(limit))
    return max(1, cores)


def concurrency_or_cores(concurrency: int) -> int:
    """Questions answered at once: `concurrency` when set (above 0), else one per core
    (`available_cores`)."""
    return concurrency if concurrency > 0 else available_cores()


class AdmissionControl:
    """At most `concurrency` questions run at once and at most `max_queue` wait; one that waited
    `queue_timeout_s` without a slot is turned away. Lives in one event loop (not thread-safe)."""

    def __init__(self, concurrency: int = 0, max_queue: int = 16, queue_timeout_s: float = 2.5):
        self.concurrency = concurrency_or_cores(concurrency)
        self.max_queue = max(0, max_queue)
        self.queue_timeout_s = queue_timeout_s
        self.running = 0
        self.waiting = 0
        self._semaphore: anyio.Semaphore | None = None
        self._service_s = 0.5  # moving average of the time one question holds a slot

    @classmethod
    def from_settings(cls, settings) -> "AdmissionControl":
        return cls(settings.serve_max_concurrency, settings.serve_max_queue, settings.serve_queue_timeout_s)

    def retry_after(self) -> int:
        """Seconds until the questions ahead should be done: the queue drains at `concurrency`
        questions per average service time."""
        ahead = self.running + self.waiting
        return max(1, min(60, math.ceil(ahead * self._service_s / self.concurrency)))

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        if self._semaphore is None:
            self._semaphore = anyio.Semaphore(self.concurrency)
        if self.running >= self.concurrency and self.waiting >= self.max_queue:
            raise Overloaded(self.retry_after(), "queue_full")
        self.waiting += 1
        try:
            with anyio.move_on_after(self.queue_timeout_s) as scope:
                await self._semaphore.acquire()
        finally:
            self.waiting -= 1
        if scope.cancelled_caught:
            raise Overloaded(self.retry_after(), "queue_timeout")
        self.running += 1
        t0 = time.monotonic()
        try:
            yield
        finally:
            self.running -= 1
            self._semaphore.release()
            self._service_s = 0.8 * self._service_s + 0.2 * (time.monotonic() - t0)
