"""Prometheus metrics, written by hand in the text exposition format (no extra dependency).

Labels hold interface names, statuses and route names only: never query text, which would
both leak content and explode the number of series.
"""

from __future__ import annotations

import threading
from collections import defaultdict

# Seconds. An ask is retrieval + judging of ~12 passages: tens of ms locally, ~1 s remote.
BUCKETS = (0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


def _labels(**kw: str) -> str:
    inner = ",".join(f'{k}="{_escape(v)}"' for k, v in kw.items())
    return "{" + inner + "}" if inner else ""


def _escape(v: str) -> str:
    return str(v).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


class Metrics:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.asks: dict[tuple[str, str], int] = defaultdict(int)  # (interface, status)
        self.rejected: dict[tuple[str, str], int] = defaultdict(int)  # (interface, reason)
        self.errors: dict[str, int] = defaultdict(int)  # interface
        self.judge_errors = 0
        self.degraded = 0
        self.http: dict[tuple[str, str, int], int] = defaultdict(int)  # (route, method, code)
        self.hist: dict[str, list[int]] = {}  # interface -> cumulative-ready bucket counts (+Inf last)
        self.hist_sum: dict[str, float] = defaultdict(float)

    def observe_ask(self, interface: str, status: str, seconds: float, judge_errors: int, degraded: bool) -> None:
        with self._lock:
            self.asks[(interface, status)] += 1
            self.judge_errors += judge_errors
            self.degraded += int(degraded)
            counts = self.hist.setdefault(interface, [0] * (len(BUCKETS) + 1))
            for i, b in enumerate(BUCKETS):
                if seconds <= b:
                    counts[i] += 1
                    break
            else:
                counts[-1] += 1
            self.hist_sum[interface] += seconds

    def observe_rejected(self, interface: str, reason: str) -> None:
        with self._lock:
            self.rejected[(interface, reason)] += 1

    def observe_error(self, interface: str) -> None:
        with self._lock:
            self.errors[interface] += 1

    def observe_http(self, route: str, method: str, code: int) -> None:
        with self._lock:
            self.http[(route, method, code)] += 1

    def render(self) -> str:
        with self._lock:
            out: list[str] = []
            out += ["# HELP sourcegate_asks_total Questions answered, by interface and gate status.",
                    "# TYPE sourcegate_asks_total counter"]
            out += [f"sourcegate_asks_total{_labels(interface=i, status=s)} {n}" for (i, s), n in sorted(self.asks.items())]
            out += ["# HELP sourcegate_asks_rejected_total Questions refused before the gate (query, auth, body).",
                    "# TYPE sourcegate_asks_rejected_total counter"]
            out += [f"sourcegate_asks_rejected_total{_labels(interface=i, reason=r)} {n}"
                    for (i, r), n in sorted(self.rejected.items())]
            out += ["# HELP sourcegate_ask_errors_total Questions that failed with an internal error.",
                    "# TYPE sourcegate_ask_errors_total counter"]
            out += [f"sourcegate_ask_errors_total{_labels(interface=i)} {n}" for i, n in sorted(self.errors.items())]
            out += ["# HELP sourcegate_judge_errors_total Passages the judge failed to score (excluded, fail closed).",
                    "# TYPE sourcegate_judge_errors_total counter", f"sourcegate_judge_errors_total {self.judge_errors}"]
            out += ["# HELP sourcegate_degraded_total Answers given while the judge was unavailable.",
                    "# TYPE sourcegate_degraded_total counter", f"sourcegate_degraded_total {self.degraded}"]
            out += ["# HELP sourcegate_ask_duration_seconds Time to answer one question (retrieve, judge, route, answer).",
                    "# TYPE sourcegate_ask_duration_seconds histogram"]
            for i, counts in sorted(self.hist.items()):
                acc = 0
                for b, c in zip(BUCKETS, counts):
                    acc += c
                    out.append(f"sourcegate_ask_duration_seconds_bucket{_labels(interface=i, le=repr(b))} {acc}")
                acc += counts[-1]
                out.append(f"sourcegate_ask_duration_seconds_bucket{_labels(interface=i, le='+Inf')} {acc}")
                out.append(f"sourcegate_ask_duration_seconds_sum{_labels(interface=i)} {self.hist_sum[i]:.6f}")
                out.append(f"sourcegate_ask_duration_seconds_count{_labels(interface=i)} {acc}")
            out += ["# HELP sourcegate_http_requests_total HTTP requests by route, method and response code.",
                    "# TYPE sourcegate_http_requests_total counter"]
            out += [f"sourcegate_http_requests_total{_labels(route=r, method=m, code=str(c))} {n}"
                    for (r, m, c), n in sorted(self.http.items())]
            return "\n".join(out) + "\n"
