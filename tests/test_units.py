"""A unit the library lacks is never answered from another unit, whatever the shape of its name."""

from __future__ import annotations

import pytest

from sourcegate.service import SourceGate
from sourcegate.settings import Settings
from sourcegate.store import open_store
from sourcegate.units import absent_unit, asked_units

P200 = ("Pump P-200: bearing lubrication", "Grease the bearings of pump P-200 every 2,000 operating hours.")
P300 = ("Pump P-300: bearing lubrication", "Grease the upper bearing of pump P-300 every 1,000 operating hours.")
LOTO = ("Lockout/tagout", "Lockout is mandatory on every pump model including P-200 and P-300.")


@pytest.mark.parametrize("query, asked", [
    ("How often should I grease pump XJ-9?", ["XJ-9"]),
    ("grease interval ax200", ["ax200"]),
    ("How often should I grease the Flowmax 3000 pump?", ["Flowmax 3000"]),
    ("Tous les combien graisser la pompe Etanorm 80 ?", ["Etanorm 80"]),
    ("Pixhawk 6X power input voltage", ["Pixhawk 6X"]),
    ("What changed in rev 2 of section 4, version 3.1?", []),
    ("Is guardrail v2 stricter than v1?", []),
    ("How much grease goes into 2 bearings every 500 h?", []),
])
def test_the_units_a_question_names(query, asked):
    assert asked_units(query) == asked


@pytest.mark.parametrize("query", [
    "How often should I grease pump XJ-9?",
    "How often should I grease the Flowmax 3000 pump?",
    "Tous les combien faut-il graisser la pompe XJ-9 ?",
    "ZX81 bearing grease quantity",
])
def test_a_unit_no_passage_names_is_absent_and_the_covered_units_are_named(query):
    a = absent_unit(query, [P200, P300, LOTO])
    assert a is not None and a.covered[:2] == ["P-200", "P-300"]


@pytest.mark.parametrize("query", [
    "How often should I grease pump P-200?",
    "How often should I grease pump P200?",   # written without its hyphen
    "p 300 grease interval",
    "How often should I grease the pumps?",   # names no unit
])
def test_a_unit_the_passages_name_or_none_asked_is_not_absent(query):
    assert absent_unit(query, [P200, P300, LOTO]) is None


def test_a_model_name_whose_name_the_passages_use_is_not_absent():
    # the number may be a version the passage does not repeat: PostgreSQL 16 on a page about PostgreSQL
    assert absent_unit("PostgreSQL 16 autovacuum default", [("VACUUM", "PostgreSQL runs autovacuum; see SHA256.")]) is None


@pytest.mark.parametrize("query, note", [
    ("How often should I grease pump XJ-9?", "No document found names XJ-9"),
    ("How often should I grease the Flowmax 3000 pump?", "No document found names Flowmax 3000"),
    ("Tous les combien faut-il graisser la pompe XJ-9 ?", "Aucun document trouvé ne parle de XJ-9"),
    ("Which grease goes into the AX200 bearings?", "No document found names AX200"),
])
def test_the_demo_abstains_on_a_pump_it_lacks_and_says_which_it_covers(demo_gate, query, note):
    r = demo_gate.ask(query)
    assert r.status == "insufficient_evidence" and not r.evidence
    assert note in r.answer and "P-200" in r.answer and "P-300" in r.answer


def test_the_demo_still_answers_the_pumps_it_has(demo_gate):
    r = demo_gate.ask("How often should I grease pump P-200?")
    assert r.status == "answer_from_evidence" and r.evidence[0].doc_id == "PROC-P200-BRG-R2"


def test_replay_keeps_the_absent_unit_decision(demo_gate):
    """The audit record keeps which passages named another unit; replay under the same thresholds
    changes nothing, and under a looser evidence threshold still does not answer from them."""
    import json

    from sourcegate.replay import replay_record

    r = demo_gate.ask("How often should I grease pump XJ-9?")
    rec = next(json.loads(l) for l in demo_gate.settings.audit_path.read_text().splitlines()
               if json.loads(l)["audit_id"] == r.audit_id)
    assert rec["absent_unit"]["asked"] == ["XJ-9"]
    assert any(c.get("subject_named") is False for c in rec["candidates"])
    changes, answer = replay_record(rec, demo_gate.thresholds)
    assert changes == [] and answer is None
    loose = demo_gate.thresholds.__class__(**{**demo_gate.thresholds.as_dict(), "evidence_min": 0.01})
    changes, _ = replay_record(rec, loose)
    flagged = {c["id"] for c in rec["candidates"] if c.get("subject_named") is False}
    assert changes and not [ch for ch in changes if ch.chunk_id in flagged and ch.new_route == "evidence"]


def test_a_code_cited_in_a_body_does_not_make_a_passage_about_another_unit():
    # a serial number in the question, a reference in the procedure's text: the procedure still answers
    valve = ("Zephyr valve calibration", "Calibrate the zephyr valve every 90 days. Reference PM-91, form QF-7.")
    assert absent_unit("How do I calibrate the zephyr valve SN4471?", [valve]) is None
    assert absent_unit("How do I calibrate the zephyr valve SN4471?", [valve, P200]).covered == ["P-200"]


def test_a_redacted_audit_record_keeps_no_unit_the_question_named(demo_index, embedder, tmp_path):
    s = Settings(audit_log_path=tmp_path / "audit.jsonl", audit_redact_query=True)
    g = SourceGate(s, store=open_store(demo_index, embedder.id, embedder.dim), embedder=embedder)
    try:
        r = g.ask("How often should I grease pump QZ-7731?")
    finally:
        g.close()
    assert r.status == "insufficient_evidence" and "QZ-7731" in r.answer  # the person sees it
    log = (tmp_path / "audit.jsonl").read_text(encoding="utf-8")
    assert "absent_unit" in log and "QZ" not in log and "7731" not in log
