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


def concurrency_or_cores(concurrency: int) -> int:
    """Questions answered at once: `concurrency` when set (above 0), else one per core."""
    return concurrency if concurrency > 0 else max(1, os.cpu_count() or 1)


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
