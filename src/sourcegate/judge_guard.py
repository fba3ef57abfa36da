"""Judge faults: a deadline per question, bounded retries, and a circuit breaker, around any judge.

A hosted judge can answer 429 or 5xx, hang, reset the connection, send a malformed or truncated
body, or answer for fewer passages than it was asked about. The judges themselves fail closed
passage by passage; this layer bounds what a question may cost and keeps a dead judge from
costing every question its full timeout:

- the judge is called in a worker thread and waited for until the question's deadline
  (JUDGE_DEADLINE_S); past it the question is answered without it, fail closed;
- a call that raised, and passages that came back without scores, are retried (JUDGE_RETRIES
  times) while the deadline allows;
- after JUDGE_BREAKER_FAILURES questions in a row where the judge failed for every passage, the
  breaker opens: questions fail closed at once, without calling the judge, for
  JUDGE_BREAKER_COOLDOWN_S; then one question tries it (half-open) and closes the breaker if it
  succeeds.

Failing closed means every passage is excluded with the reason, the answer is
`insufficient_evidence` with `degraded: true`, never an ungated passage.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout

from .judges.base import Judge, JudgeInput, Judgement, PassageJudgement

log = logging.getLogger("sourcegate.judge")

RETRY_BACKOFF_S = 0.2


class CircuitBreaker:
    """Closed, open after `failures` consecutive failed questions, half-open after `cooldown_s`."""

    def __init__(self, failures: int = 5, cooldown_s: float = 30.0, clock: Callable[[], float] = time.monotonic):
        self.failures = max(1, failures)
        self.cooldown_s = cooldown_s
        self._clock = clock
        self._lock = threading.Lock()
        self._consecutive = 0
        self._opened_at: float | None = None
        self._trial = False

    @property
    def state(self) -> str:
        with self._lock:
            if self._opened_at is None:
                return "closed"
            return "half_open" if self._trial or self._clock() - self._opened_at >= self.cooldown_s else "open"

    def allow(self) -> bool:
        with self._lock:
            if self._opened_at is None:
                return True
            if not self._trial and self._clock() - self._opened_at >= self.cooldown_s:
                self._trial = True  # this question tries the judge; the others still fail fast
                return True
            return False

    def record(self, ok: bool) -> None:
        with self._lock:
            if ok:
                if self._opened_at is not None:
                    log.info("judge circuit closed")
                self._consecutive, self._opened_at, self._trial = 0, None, False
                return
            self._consecutive += 1
            if self._trial or (self._opened_at is None and self._consecutive >= self.failures):
                if self._opened_at is None or self._trial:
                    log.warning("judge circuit open", extra={"consecutive_failures": self._consecutive,
                                                             "cooldown_s": self.cooldown_s})
                self._opened_at, self._trial = self._clock(), False


class _DaemonCalls:
    """`submit(fn, *args)` runs `fn` in a daemon thread, at most `limit` at once, and returns its
    Future. A ThreadPoolExecutor's threads are joined when the interpreter exits: one call hung in
    a judge would keep the process alive after its answer was given."""

    def __init__(self, limit: int):
        self._slots = threading.BoundedSemaphore(limit)

    def submit(self, fn, *args) -> Future:
        future: Future = Future()
        if not self._slots.acquire(blocking=False):
            future.set_exception(RuntimeError("every judge thread is held by calls past their deadline"))
            return future

        def run() -> None:
            try:
                future.set_result(fn(*args))
            except BaseException as e:  # noqa: BLE001 - handed to the caller through the Future
                future.set_exception(e)
            finally:
                self._slots.release()

        threading.Thread(target=run, name="sourcegate-judge", daemon=True).start()
        return future


def _failed(judge: Judge, passages: list[JudgeInput], reason: str) -> Judgement:
    return Judgement(model=f"{getattr(judge, 'name', 'judge')}:unavailable",
                     results=[PassageJudgement(p.id, None, reason) for p in passages])


class GuardedJudge:
    """The judge contract around another judge, with a deadline, retries and a breaker."""

    def __init__(self, judge: Judge, deadline_s: float = 20.0, retries: int = 1,
                 breaker: CircuitBreaker | None = None, backoff_s: float = RETRY_BACKOFF_S):
        self.inner = judge
        self.name = getattr(judge, "name", "judge")
        self.deadline_s = deadline_s
        self.retries = max(0, retries)
        self.breaker = breaker or CircuitBreaker()
        self.backoff_s = backoff_s
        # Calls past their deadline keep running until the judge's own timeout ends them: a few
        # threads more than in flight, so a hung judge cannot take every thread; daemon threads, so
        # a hung call never keeps the process from exiting (`sourcegate ask` after its answer).
        self._pool = _DaemonCalls(16)

    @classmethod
    def from_settings(cls, judge: Judge, settings) -> "GuardedJudge":
        return cls(judge, settings.judge_deadline_s, settings.judge_retries,
                   CircuitBreaker(settings.judge_breaker_failures, settings.judge_breaker_cooldown_s))

    def __getattr__(self, name):  # model ids, usage counters and the like of the wrapped judge
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    def judge(self, query: str, passages: list[JudgeInput]) -> Judgement:
        if not passages:
            return self.inner.judge(query, passages)
        if not self.breaker.allow():
            return _failed(self.inner, passages, "judge circuit open: it failed on the last questions; "
                                                 "questions fail closed until it recovers")
        result = self._judge_within_deadline(query, passages)
        self.breaker.record(not result.all_failed)
        return result

    def _call(self, query: str, passages: list[JudgeInput], until: float) -> Judgement:
        remaining = until - time.monotonic()
        if remaining <= 0:
            raise FutureTimeout
        return self._pool.submit(self.inner.judge, query, passages).result(timeout=remaining)

    def _judge_within_deadline(self, query: str, passages: list[JudgeInput]) -> Judgement:
        until = time.monotonic() + self.deadline_s
        by_id: dict[str, PassageJudgement] = {}
        model: str | None = None
        usage: dict = {}
        todo = list(passages)
        last_error = "judge unavailable"
        for attempt in range(self.retries + 1):
            if attempt:
                if until - time.monotonic() <= self.backoff_s:
                    break
                time.sleep(self.backoff_s * attempt)
            try:
                judgement = self._call(query, todo, until)
            except FutureTimeout:
                last_error = f"judge deadline of {self.deadline_s:g} s exceeded (JUDGE_DEADLINE_S)"
                log.warning("judge deadline exceeded", extra={"deadline_s": self.deadline_s, "attempt": attempt + 1})
                break
            except Exception as e:  # a judge is not supposed to raise; treat it as down for this try
                last_error = f"judge unavailable: {type(e).__name__}"
                log.warning("judge failed: %s", type(e).__name__, extra={"attempt": attempt + 1})
                continue
            if judgement.results and any(r.scores is not None for r in judgement.results):
                model = judgement.model
            elif model is None:
                model = judgement.model
            for k, v in (judgement.usage or {}).items():
                usage[k] = usage.get(k, 0) + v if isinstance(v, (int, float)) else v
            asked = {p.id for p in todo}
            for r in judgement.results:
                if r.id in asked and (r.scores is not None or r.id not in by_id):
                    by_id[r.id] = r
            todo = [p for p in todo if by_id.get(p.id) is None or by_id[p.id].scores is None]
            if not todo:
                break
            last_error = "no judgement returned"
        results = [by_id.get(p.id) or PassageJudgement(p.id, None, last_error) for p in passages]
        if all(r.scores is None for r in results):
            failed = _failed(self.inner, passages, last_error)
            # Keep the judge's own reason per passage where it gave one.
            failed.results = [r if r.error else PassageJudgement(r.id, None, last_error) for r in results]
            return failed
        return Judgement(model=model or self.name, results=results, usage=usage)


def guard_judge(judge: Judge, settings) -> Judge:
    """The judge with the deadline, retries and breaker of `settings` (idempotent)."""
    return judge if isinstance(judge, GuardedJudge) else GuardedJudge.from_settings(judge, settings)
