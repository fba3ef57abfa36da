"""The planner and the merge: pure functions, tested with text and statuses only."""

from __future__ import annotations

import pytest

from sourcegate.gate import Status
from sourcegate.plan import MAX_PARTS, Part, PartDecision, library_identifiers, merge, names_subject, plan

KNOWN = ["P-200", "P-300", "CR-5", "CR-7", "AC-300", "E-47"]


def questions(q: str, known=KNOWN) -> list[str]:
    return [p.question for p in plan(q, known)]


@pytest.mark.parametrize("q, expected", [
    ("What is the maximum batch size of the CR-5 and of the CR-7?",
     [("What is the maximum batch size of the CR-5?", "CR-5"), ("What is the maximum batch size of the CR-7?", "CR-7")]),
    ("What are the grease intervals for the P-200 and the P-300 pumps?",
     [("What are the grease intervals for the P-200 pumps?", "P-200"),
      ("What are the grease intervals for the P-300 pumps?", "P-300")]),
    ("Quelle est la taille maximale de lot du CR-5 et du CR-7 ?",
     [("Quelle est la taille maximale de lot du CR-5 ?", "CR-5"), ("Quelle est la taille maximale de lot du CR-7 ?", "CR-7")]),
    ("Quels sont les intervalles de graissage des pompes P-200 et P-300 ?",
     [("Quels sont les intervalles de graissage des pompes P-200 ?", "P-200"),
      ("Quels sont les intervalles de graissage des pompes P-300 ?", "P-300")]),
    ("What grease does pump P-200 and pump P-300 take?",
     [("What grease does pump P-200 take?", "P-200"), ("What grease does pump P-300 take?", "P-300")]),
    ("What is the torque for the P-200 pump and the P-300 pump?",
     [("What is the torque for the P-200 pump?", "P-200"), ("What is the torque for the P-300 pump?", "P-300")]),
    ("What is the batch size of both the CR-5 and the CR-7?",
     [("What is the batch size of the CR-5?", "CR-5"), ("What is the batch size of the CR-7?", "CR-7")]),
])
def test_coordinated_subjects_become_one_part_each(q, expected):
    assert [(p.question, p.subject) for p in plan(q, KNOWN)] == expected


def test_three_subjects_and_an_identifier_the_library_does_not_know():
    parts = plan("What grease do the P-200, the P-300 and the P-900 take?", KNOWN)
    assert [p.subject for p in parts] == ["P-200", "P-300", "P-900"]
    assert parts[2].question == "What grease do the P-900 take?"


def test_identifiers_in_another_case_take_the_library_spelling():
    parts = plan("How often must the cr-5 and the cr-7 be descaled?", KNOWN)
    assert [p.subject for p in parts] == ["CR-5", "CR-7"]
    assert parts[0].question == "How often must the cr-5 be descaled?"


@pytest.mark.parametrize("q, expected", [
    ("How often do I drain the AC-300 tank and how often do I change its oil?",
     ["How often do I drain the AC-300 tank?", "How often do I change the AC-300's oil?"]),
    ("How often and how much do I grease the P-200 bearings?",
     ["How often do I grease the P-200 bearings?", "How much do I grease the P-200 bearings?"]),
    ("Combien de graisse faut-il pour la P-200 et quand faut-il la graisser ?",
     ["Combien de graisse faut-il pour la P-200 ?", "Quand faut-il la graisser (la P-200) ?"]),
    ("Can I grease the bearing and do I need to stop the pump?",
     ["Can I grease the bearing?", "Do I need to stop the pump (the bearing)?"]),
    ("How often is a rapid sand filter backwashed and how deep should its sand bed be?",
     ["How often is a rapid sand filter backwashed?", "How deep should the rapid sand filter's sand bed be?"]),
    ("How often is the P-200 greased? And how much grease goes in?",
     ["How often is the P-200 greased?", "How much grease goes in (the P-200)?"]),
    ("What is the batch size of the CR-5 and what grease does the P-200 use?",
     ["What is the batch size of the CR-5?", "What grease does the P-200 use?"]),
])
def test_coordinated_questions_become_one_part_each_with_the_subject_carried_over(q, expected):
    assert questions(q) == expected


def test_both_kinds_combine():
    parts = plan("How often do I drain the AC-300 and the AC-400 tanks and how often do I change their oil?", KNOWN)
    assert [p.question for p in parts] == [
        "How often do I drain the AC-300 tanks?", "How often do I drain the AC-400 tanks?",
        "How often do I change the AC-300's oil?", "How often do I change the AC-400's oil?"]
    assert [p.subject for p in parts] == ["AC-300", "AC-400", "AC-300", "AC-400"]


@pytest.mark.parametrize("q", [
    "What is the lockout and tagout procedure?",
    "Can I use salt and water?",
    "How often should I grease the bearings on pump P-200?",
    "What is the difference between the P-200 and the P-300 seals?",
    "Which grease do the P-200 or the P-300 use?",
    "Is the P-200 greased the same way as the P-300?",
    "What should I check when the pump stops and when it restarts?",
    "What free chlorine residual is required at the plant outlet and when flushing hydrants?",
    "How do I maintain the sand filters: backwash and media top-up?",
    "P-200 bearings need grease every 500 hours, how much do I add?",
    "Faut-il consigner la P-200 avant d'intervenir sur les roulements ?",
])
def test_one_question_stays_whole_and_unchanged(q):
    parts = plan(q, KNOWN)
    assert len(parts) == 1 and parts[0].question == q, [p.question for p in parts]


def test_single_part_keeps_its_subject_for_the_record():
    assert plan("How often should I grease the bearings on pump P-200?", KNOWN)[0].subject == "P-200"
    assert plan("Can I use salt and water?", KNOWN)[0].subject is None


def test_known_identifiers_are_found_whatever_their_shape():
    # Written in lower case, "mk2" does not look like a model number: the library's list says it is one.
    parts = plan("What is the torque on the mk2 and the mk3?", ["MK2", "MK3"])
    assert [p.subject for p in parts] == ["MK2", "MK3"]
    assert len(plan("What is the torque on the mk2 and the mk3?", [])) == 1


def test_too_many_parts_are_asked_as_one_question():
    ids = [f"P-{n}00" for n in range(1, MAX_PARTS + 2)]
    q = "What grease do the " + ", the ".join(ids[:-1]) + " and the " + ids[-1] + " take?"
    assert len(plan(q, ids)) == 1
    q = "What grease do the " + ", the ".join(ids[:MAX_PARTS - 1]) + " and the " + ids[MAX_PARTS - 1] + " take?"
    assert len(plan(q, ids)) == MAX_PARTS


def test_plan_is_deterministic_and_empty_safe():
    q = "What are the grease intervals for the P-200 and the P-300 pumps?"
    assert plan(q, KNOWN) == plan(q, list(reversed(KNOWN)))
    assert plan("   ", KNOWN) == [Part("   ")]


def test_library_identifiers_come_from_titles_and_ids():
    got = library_identifiers(["Pump P-200: bearing lubrication (Rev. 2)", "PROC-P200-BRG-R2",
                               "CR-5 Coffee Roaster: Operator Manual", "roasters/cr7.md", None])
    assert {"P-200", "CR-5"} <= got
    assert "Rev" not in got


@pytest.mark.parametrize("subject, text, named", [
    ("CR-5", "CR-5 Coffee Roaster: Operator Manual", True),
    ("CR-5", "the cr5 drum", True),
    ("CR-5", "the CR 5 drum", True),
    ("CR-5", "the CR-50 drum", False),
    ("CR-5", "the XCR-5 drum", False),
    ("P-200", "pump P-2000", False),
    ("P-200", "P-200 and P-300", True),
    ("AC-300", "Manual of the AC300", True),
])
def test_names_subject(subject, text, named):
    assert names_subject(subject, text) is named


def _d(q: str, status: Status) -> PartDecision:
    return PartDecision(Part(q), status)


def test_merge_every_part_answered():
    m = merge([_d("a?", Status.ANSWER), _d("b?", Status.ANSWER)])
    assert m.status is Status.ANSWER and m.missing == [] and m.conflicting == []


def test_merge_some_parts_answered_names_the_others():
    m = merge([_d("a?", Status.ANSWER), _d("b?", Status.INSUFFICIENT), _d("c?", Status.INSUFFICIENT)])
    assert m.status is Status.ANSWER and m.missing == ["b?", "c?"]


def test_merge_no_part_answered():
    m = merge([_d("a?", Status.INSUFFICIENT), _d("b?", Status.INSUFFICIENT)])
    assert m.status is Status.INSUFFICIENT and m.missing == ["a?", "b?"]


def test_merge_a_premise_conflict_on_any_part_is_reported():
    m = merge([_d("a?", Status.ANSWER), _d("b?", Status.CONFLICT), _d("c?", Status.INSUFFICIENT)])
    assert m.status is Status.CONFLICT and m.conflicting == ["b?"] and m.missing == ["c?"]


@pytest.mark.parametrize("status", list(Status))
def test_merge_of_one_part_is_that_part(status):
    m = merge([_d("a?", status)])
    assert m.status is status and m.missing == []


def test_merge_of_nothing_abstains():
    assert merge([]).status is Status.INSUFFICIENT
