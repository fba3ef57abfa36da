"""Prometheus metrics through `prometheus_client`, one registry per app.

Labels hold interface names, statuses, reasons and route names only: never query text, which
would both leak content and explode the number of series. When PROMETHEUS_MULTIPROC_DIR is set
(several server processes on one port), `render()` aggregates every process's values through
the library's multiprocess collector.
"""

from __future__ import annotations

import os

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, disable_created_metrics, generate_latest
from prometheus_client import CONTENT_TYPE_LATEST  # noqa: F401 - re-exported for the app

# `_created` series double the output and no dashboard here reads them.
disable_created_metrics()

# Seconds. An ask is retrieval + judging of ~12 passages: tens of ms locally, ~1 s remote.
BUCKETS = (0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.asks = Counter("sourcegate_asks", "Questions answered, by interface and gate status.",
                            ["interface", "status"], registry=r)
        self.rejected = Counter("sourcegate_asks_rejected",
                                "Questions refused before the gate (query, auth, body_too_large, overloaded, not_ready).",
                                ["interface", "reason"], registry=r)
        self.errors = Counter("sourcegate_ask_errors", "Questions that failed with an internal error.",
                              ["interface"], registry=r)
        self.judge_errors = Counter("sourcegate_judge_errors", "Passages the judge failed to score (excluded, fail closed).",
                                    registry=r)
        self.degraded = Counter("sourcegate_degraded", "Answers given while the judge was unavailable.", registry=r)
        self.duration = Histogram("sourcegate_ask_duration_seconds",
                                  "Time to answer one question (retrieve, judge, route, answer).",
                                  ["interface"], buckets=BUCKETS, registry=r)
        self.http = Counter("sourcegate_http_requests", "HTTP requests by route, method and response code.",
                            ["route", "method", "code"], registry=r)
        self.in_flight = Gauge("sourcegate_asks_in_flight", "Questions being answered now.", registry=r,
                               multiprocess_mode="livesum")
        self.queued = Gauge("sourcegate_asks_queued", "Questions waiting for a free slot.", registry=r,
                            multiprocess_mode="livesum")
        # Series that exist from the start, so a dashboard shows 0 rather than nothing.
        self.judge_errors.inc(0)
        self.degraded.inc(0)

    def observe_ask(self, interface: str, status: str, seconds: float, judge_errors: int, degraded: bool) -> None:
        self.asks.labels(interface, status).inc()
        self.judge_errors.inc(judge_errors)
        if degraded:
            self.degraded.inc()
        self.duration.labels(interface).observe(seconds)

    def observe_rejected(self, interface: str, reason: str) -> None:
        self.rejected.labels(interface, reason).inc()

    def observe_error(self, interface: str) -> None:
        self.errors.labels(interface).inc()

    def observe_http(self, route: str, method: str, code: int) -> None:
        self.http.labels(route, method, str(code)).inc()

    def set_load(self, in_flight: int, queued: int) -> None:
        self.in_flight.set(in_flight)
        self.queued.set(queued)

    def render(self) -> str:
        if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
            from prometheus_client import multiprocess

            registry = CollectorRegistry()
            multiprocess.MultiProcessCollector(registry)
            return generate_latest(registry).decode("utf-8")
        return generate_latest(self.registry).decode("utf-8")
