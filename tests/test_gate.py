"""route() and apply_gate() with numbers only."""

import pytest

from sourcegate.gate import GateThresholds, Route, Status, apply_gate, decide_status, diversify, guidance, route
from sourcegate.models import PassageScores

T = GateThresholds()


def S(rel=0.9, ev=0.9, con=0.0, inj=0.0, sup=0.0):
    return PassageScores(is_relevant=rel, contains_answer_evidence=ev, contradicts_query_premise=con,
                         contains_prompt_injection=inj, is_superseded=sup)


@pytest.mark.parametrize("scores,expected", [
    (S(), (Route.EVIDENCE, "evidence")),
    (S(inj=0.71), (Route.EXCLUDED, "prompt_injection")),
    (S(inj=0.70), (Route.EVIDENCE, "evidence")),  # strictly greater than the threshold
    (S(sup=0.98), (Route.EXCLUDED, "superseded")),
    (S(con=0.8), (Route.CONFLICT, "contradicts_premise")),
    (S(rel=0.44), (Route.EXCLUDED, "not_relevant")),
    (S(rel=0.45, ev=0.56), (Route.EVIDENCE, "evidence")),
    (S(ev=0.55), (Route.EXCLUDED, "no_answer_evidence")),
    (None, (Route.EXCLUDED, "judge_error")),
])
def test_route(scores, expected):
    assert route(scores, T) == expected


def test_order_first_match_wins():
    # Injection beats everything; superseded beats contradiction; contradiction beats relevance.
    assert route(S(inj=0.99, sup=0.99, con=0.99), T)[1] == "prompt_injection"
    assert route(S(sup=0.99, con=0.99), T)[1] == "superseded"
    assert route(S(con=0.99, rel=0.0, ev=0.0), T)[0] is Route.CONFLICT


def test_thresholds_move_decisions():
    strict = GateThresholds(evidence_min=0.95)
    assert route(S(ev=0.9), strict)[0] is Route.EXCLUDED
    assert route(S(ev=0.9), T)[0] is Route.EVIDENCE


def test_status():
    assert decide_status([Route.EXCLUDED, Route.EVIDENCE, Route.CONFLICT]) is Status.ANSWER
    assert decide_status([Route.EXCLUDED, Route.CONFLICT]) is Status.CONFLICT
    assert decide_status([Route.EXCLUDED]) is Status.INSUFFICIENT
    assert decide_status([]) is Status.INSUFFICIENT
    assert guidance(Status.INSUFFICIENT) != guidance(Status.INSUFFICIENT, degraded=True)


def test_diversify_round_robin():
    items = [("a1", "A"), ("a2", "A"), ("a3", "A"), ("b1", "B"), ("c1", "C")]
    assert diversify(items, 3) == ["a1", "b1", "c1"]
    assert diversify(items, 5) == ["a1", "b1", "c1", "a2", "a3"]


def test_apply_gate_caps_evidence_and_spreads_sources():
    passages = [(f"a{i}", "A", S(ev=0.9 - i / 100)) for i in range(6)] + [("b0", "B", S(ev=0.6))]
    gated, status = apply_gate(passages, T, evidence_limit=5)
    kept = [g.id for g in gated if g.route is Route.EVIDENCE]
    assert len(kept) == 5 and "b0" in kept
    assert {g.reason for g in gated if g.route is Route.EXCLUDED} == {"evidence_limit"}
    assert status is Status.ANSWER


def test_apply_gate_fail_closed():
    gated, status = apply_gate([("x", "X", None), ("y", "Y", None)], T, 5)
    assert status is Status.INSUFFICIENT
    assert all(g.reason == "judge_error" for g in gated)


def test_a_current_conflict_outweighs_weaker_evidence_from_another_passage():
    """A contradicting current passage at 0.85 beside an unrelated chunk scored 0.56 as evidence: the
    question is a premise conflict, not answered around its premise; strong evidence still answers
    beside the conflict; an archived passage's contradiction outweighs nothing."""
    from sourcegate.gate import REASON_OUTWEIGHED, Status, apply_gate

    t = GateThresholds()
    passages = [("manual#3", "MANUAL", S(ev=0.2, con=0.85)), ("dryer#1", "DRYER", S(ev=0.56))]
    gated, status = apply_gate(passages, t, 5, conflict_outweighs=True)
    assert status is Status.CONFLICT
    assert [(g.route, g.reason) for g in gated] == [(Route.CONFLICT, "contradicts_premise"),
                                                    (Route.EXCLUDED, REASON_OUTWEIGHED)]
    gated, status = apply_gate([passages[0], ("manual#4", "MANUAL", S(ev=0.9))], t, 5, conflict_outweighs=True)
    assert status is Status.ANSWER
    gated, status = apply_gate(passages, t, 5, current=[False, True], conflict_outweighs=True)
    assert status is Status.ANSWER
    # off by default (GATE_CONFLICT_OUTWEIGHS): the answer stands beside the conflict
    gated, status = apply_gate(passages, t, 5)
    assert status is Status.ANSWER
