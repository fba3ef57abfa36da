"""Judge faults through the whole service, against fakes of the real wire contract: 429 with
retry-after, 529, 5xx, timeouts, resets, malformed and truncated bodies, a judge that answers for
fewer passages than asked. Bounded retries, a deadline per question, then fail closed
(`degraded: true`, never an ungated passage), and a circuit breaker."""

from __future__ import annotations

import socket
import threading
import time

import pytest
from test_server_fixtures import KeywordJudge, make_settings

from fakes.typesafe_server import FakeTypeSafeServer
from sourcegate.judge_guard import CircuitBreaker, GuardedJudge
from sourcegate.judges.base import Judgement
from sourcegate.service import SourceGate

Q = "How often should I grease the bearings on pump P-200?"
EVIDENCE = {"is_relevant": 0.95, "contains_answer_evidence": 0.9, "contradicts_query_premise": 0.02,
            "contains_prompt_injection": 0.01, "is_superseded": 0.01}


def _gate(tmp_path, url: str, **overrides) -> SourceGate:
    settings = make_settings(tmp_path / "audit.jsonl", judge="typesafe", typesafe_api_key="k", typesafe_base_url=url,
                             **{"typesafe_timeout_s": 5.0, "judge_retries": 0, **overrides})
    return SourceGate(settings)


def _assert_fails_closed(result) -> None:
    assert result.degraded is True
    assert result.status == "insufficient_evidence"
    assert not result.evidence and not result.conflicts
    assert result.excluded and all(x.reason == "judge_error" for x in result.excluded)


@pytest.fixture()
def fake():
    with FakeTypeSafeServer(api_key="k", default_noul=0.02) as server:
        yield server


def _score_every_passage(server: FakeTypeSafeServer) -> None:
    """Evidence scores for the P-200 lubrication procedure, low scores elsewhere."""
    original = server.answers_for

    def answers_for(body):
        passage = body["state"]["passage"]
        if passage["id"].startswith("PROC-P200-BRG-R2"):
            return {name: {"type": "noul", "noul": EVIDENCE[name]} for name in body["questions"]}
        return original(body)

    server.answers_for = answers_for


def test_rate_limited_then_answered(tmp_path, fake):
    _score_every_passage(fake)
    fake.fail_next(3, 429, retry_after="0")
    gate = _gate(tmp_path, fake.url)
    r = gate.ask(Q)
    gate.close()
    assert r.degraded is False and r.status == "answer_from_evidence"


@pytest.mark.parametrize("status", [529, 500, 503])
def test_overloaded_or_failing_service_fails_closed(tmp_path, fake, status):
    fake.fail_next(1000, status, retry_after="0")
    gate = _gate(tmp_path, fake.url)
    r = gate.ask(Q)
    gate.close()
    _assert_fails_closed(r)


def test_a_hanging_judge_costs_a_question_its_deadline_only(tmp_path, fake):
    fake.delay_s = 5.0
    gate = _gate(tmp_path, fake.url, judge_deadline_s=0.5, typesafe_timeout_s=10.0)
    t0 = time.monotonic()
    r = gate.ask(Q)
    elapsed = time.monotonic() - t0
    gate.close()
    _assert_fails_closed(r)
    assert all("deadline" in (x.reason + str(x.scores)) or x.reason == "judge_error" for x in r.excluded)
    assert elapsed < 4.0, f"the question took {elapsed:.1f} s, past its 0.5 s judge deadline"


def _socket_server(respond) -> tuple[str, threading.Event]:
    """A raw HTTP server on 127.0.0.1 that hands each connection to `respond`."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    sock.settimeout(0.2)
    stop = threading.Event()

    def serve():
        while not stop.is_set():
            try:
                conn, _ = sock.accept()
            except OSError:
                continue
            with conn:
                respond(conn)
        sock.close()

    threading.Thread(target=serve, daemon=True).start()
    return f"http://127.0.0.1:{sock.getsockname()[1]}", stop


def _reset(conn: socket.socket) -> None:
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")  # RST on close


def _truncated(conn: socket.socket) -> None:
    conn.settimeout(2)
    try:
        conn.recv(65536)
    except OSError:
        return
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 400\r\n\r\n"
                 b'{"model": "jev-1.13.0", "answers": {"is_rel')


@pytest.mark.parametrize("respond", [_reset, _truncated], ids=["connection-reset", "truncated-body"])
def test_resets_and_truncated_bodies_fail_closed(tmp_path, respond):
    url, stop = _socket_server(respond)
    try:
        gate = _gate(tmp_path, url, judge_deadline_s=10.0)
        r = gate.ask(Q)
        gate.close()
    finally:
        stop.set()
    _assert_fails_closed(r)


def test_a_malformed_answer_excludes_that_passage_only(tmp_path, fake):
    _score_every_passage(fake)
    gate = _gate(tmp_path, fake.url, judge_retries=1)
    candidates, _ = gate.retriever.retrieve(Q)
    bad = next(c.id for c in candidates if not c.id.startswith("PROC-P200-BRG-R2"))
    fake.raw_answers[(Q, bad)] = {"is_relevant": {"type": "noul", "noul": "very"}}
    r = gate.ask(Q)
    gate.close()
    assert r.degraded is False and r.status == "answer_from_evidence"
    assert [x.id for x in r.excluded if x.reason == "judge_error"] == [bad]
    assert all(p.scores for p in r.evidence)


class ForgetfulJudge(KeywordJudge):
    """Answers for every other passage on the first call, for all on the next."""

    name = "forgetful"

    def __init__(self):
        super().__init__()
        self.calls = []

    def judge(self, query, passages):
        self.calls.append(len(passages))
        full = super().judge(query, passages)
        if len(self.calls) == 1:
            return Judgement(model=full.model, results=full.results[::2])
        return full


def test_passages_the_judge_skipped_are_asked_again_within_the_deadline():
    inner = ForgetfulJudge()
    judge = GuardedJudge(inner, deadline_s=5.0, retries=1, backoff_s=0.0)
    from sourcegate.judges.base import JudgeInput

    passages = [JudgeInput(id=f"DOC-{i}#0", text=f"grease the bearings of pump P-200 step {i}") for i in range(6)]
    out = judge.judge(Q, passages)
    assert inner.calls == [6, 3]
    assert [r.id for r in out.results] == [p.id for p in passages]
    assert all(r.scores is not None for r in out.results)


def test_the_breaker_stops_calling_a_dead_judge_then_tries_it_again(tmp_path, fake):
    fake.fail_next(10_000, 500, retry_after="0")
    gate = _gate(tmp_path, fake.url, judge_breaker_failures=2, judge_breaker_cooldown_s=60.0)
    for _ in range(2):
        _assert_fails_closed(gate.ask(Q))
    calls = fake.request_count
    t0 = time.monotonic()
    r = gate.ask(Q)
    assert time.monotonic() - t0 < 2.0
    _assert_fails_closed(r)
    assert fake.request_count == calls, "an open breaker must not call the judge"
    assert "circuit open" in (next(iter(gate.audit.path.read_text().splitlines()[-1:]), ""))
    gate.close()


def test_half_open_breaker_closes_after_a_good_question():
    now = [0.0]
    breaker = CircuitBreaker(failures=1, cooldown_s=10.0, clock=lambda: now[0])
    judge = GuardedJudge(KeywordJudge(fail=True), deadline_s=5.0, retries=0, breaker=breaker)
    from sourcegate.judges.base import JudgeInput

    passages = [JudgeInput(id="D#0", text="grease the bearings of pump P-200")]
    assert judge.judge(Q, passages).all_failed and breaker.state == "open"
    assert "circuit open" in judge.judge(Q, passages).results[0].error
    now[0] = 11.0
    judge.inner.fail = False
    assert not judge.judge(Q, passages).all_failed  # the trial question goes through
    assert breaker.state == "closed"
    judge.inner.fail = True
    now[0] = 12.0
    judge.judge(Q, passages)
    assert breaker.state == "open"
