"""Answers that read: a yes/no question the evidence settles opens with Yes or No (Oui or Non) and
the settling sentence, cited, in the extractive writer and in the LLM writer's check alike; a
sentence that introduces a list is quoted with the item that answers."""

from __future__ import annotations

import pytest

from sourcegate.answer import polar_verdict, with_list_item
from sourcegate.models import Candidate
from sourcegate.written_check import SourceCheck

LOTO = Candidate(id="l#0", doc_id="PROC-LOTO-01", title="Lockout/tagout", text=(
    "When it is required. Lockout/tagout is mandatory before any work on pump bearings, seals, couplings, impellers "
    "or guards, on every pump model including P-200 and P-300, even for a short task such as greasing with the guard "
    "removed.\n\nSteps. 7. Remove your padlock only when the work is finished."))
GREASE = Candidate(id="b#0", doc_id="PROC-P200-BRG-R2", title="Pump P-200: bearing lubrication", text=(
    "Scope. This procedure applies to the P-200 horizontal centrifugal pumps at the Northside pumping station.\n\n"
    "Quantity and grease type. Add 20 g of lithium-complex grease, NLGI grade 2, to each bearing. Do not mix grease "
    "types."))
COMPRESSOR = Candidate(id="c#0", doc_id="AC-300", title="AC-300 compressor", text=(
    "Check the belt tension of the AC-300 every 500 hours. The AC-300 is an air-cooled screw compressor."))
ROTOR = Candidate(id="h#0", doc_id="HG-3", title="HG-3", text="Never run the HG-3 rotor above 20,000 rpm.")


@pytest.mark.parametrize("question, evidence, word, n, start", [
    ("Do I need lockout/tagout for bearing work on P-200?", [GREASE, LOTO], "Yes", 2, "Lockout/tagout is mandatory"),
    ("Can I mix grease types in the P-200 bearings?", [LOTO, GREASE], "No", 2, "Do not mix grease types."),
    ("Is the P-200 a vertical pump?", [LOTO, GREASE], "No", 2, "This procedure applies to the P-200 horizontal"),
    ("Is the AC-300 compressor water-cooled?", [COMPRESSOR], "No", 1, "The AC-300 is an air-cooled"),
    ("Is the AC-300 air-cooled?", [COMPRESSOR], "Yes", 1, "The AC-300 is an air-cooled"),
    ("Can the HG-3 rotor run at 30,000 rpm?", [ROTOR], "No", 1, "Never run the HG-3 rotor"),
])
def test_the_settling_sentence_says_yes_or_no(question, evidence, word, n, start):
    got = polar_verdict(question, evidence)
    assert got is not None and got[:2] == (word, n) and got[2].startswith(start), got


def test_no_verdict_when_it_is_not_clear():
    assert polar_verdict("How often should I grease the P-200?", [GREASE]) is None  # not a yes/no question
    assert polar_verdict("Is the P-200 painted blue?", [LOTO, GREASE]) is None  # nothing bears on it
    # a French question whose words were bridged only in part: its other words may be what it asks
    q = "Peut-on mélanger les types de graisse dans les roulements de la P-200 ?"
    assert polar_verdict(q, [LOTO, GREASE], q + " (bearing; grease; greasing)") is None
    q = "Faut-il consigner la P-200 avant d'intervenir sur les roulements ?"
    assert polar_verdict(q, [LOTO], q + " (lockout; tagout; bearing; before)")[0] == "Oui"


def test_the_llm_writers_check_agrees():
    check = SourceCheck(question="Can I mix grease types in the P-200 bearings?")
    assert check.answer_problems(["Yes, you can mix grease types"], [GREASE])[0][0] == "reversed_yes_no"
    assert check.answer_problems(["No, do not mix grease types"], [GREASE]) == []
    check = SourceCheck(question="Do I need lockout/tagout for bearing work on P-200?")
    assert check.answer_problems(["No, it is not needed"], [LOTO])[0][0] == "reversed_yes_no"
    assert check.answer_problems(["Yes, lockout/tagout is mandatory"], [LOTO]) == []


def test_a_list_introduction_is_quoted_with_the_item_that_answers():
    text = ("Alarms.\n\nThe low-battery alarm will trigger if the main battery's\n- voltage drops below 11.5 V\n"
            "- temperature exceeds 60 °C\n\nSilence it from the panel.")
    q = "At what temperature does the low-battery alarm trigger?"
    assert with_list_item(q, text, "The low-battery alarm will trigger if the main battery's") == (
        "The low-battery alarm will trigger if the main battery's ... temperature exceeds 60 °C")
    assert with_list_item(q, text, "Silence it from the panel.") == "Silence it from the panel."


@pytest.mark.parametrize("question, word", [
    ("Do I need lockout/tagout for bearing work on P-200?", "Yes"),
    ("Faut-il consigner la P-200 avant d'intervenir sur les roulements ?", "Oui"),
])
def test_the_demo_answers_yes_or_no(demo_gate, question, word):
    """Through the default offline judge, in English and in French."""
    r = demo_gate.ask(question)
    assert r.status == "answer_from_evidence"
    first = r.answer.splitlines()[0]
    assert first.startswith(f'{word}: "Lockout/tagout is mandatory before any work on pump bearings'), r.answer
    n = int(first.rsplit("[", 1)[1].rstrip("]"))
    assert r.evidence[n - 1].doc_id == "PROC-LOTO-01"


def _doc(text: str, doc_id: str = "FAQ-1") -> Candidate:
    return Candidate(id=f"{doc_id}#0", doc_id=doc_id, title=doc_id, text=text)


@pytest.mark.parametrize("question, text", [
    # a FAQ line that asks the question, answered on the next line: the answer says no
    ("Can the valve V-30 be opened while the line is pressurised?",
     "Can the valve V-30 be opened while the line is pressurised? Never: depressurise the line first."),
    ("Peut-on ouvrir la vanne V-30 quand la ligne est sous pression ?",
     "Peut-on ouvrir la vanne V-30 quand la ligne est sous pression ? Non : dépressurisez d'abord la ligne."),
    # the claim negated as a whole
    ("Can the fan run above 3000 rpm?", "It is false that the fan can run above 3000 rpm."),
])
def test_a_sentence_that_answers_no_is_never_read_as_yes(question, text):
    got = polar_verdict(question, [_doc(text)])
    assert got is None or got[0] in ("No", "Non"), got
    assert got is None or not got[2].rstrip().endswith("?"), got


@pytest.mark.parametrize("question, text", [
    ("Can the valve V-30 be opened while the line is pressurised?",
     "Can the valve V-30 be opened while the line is pressurised? Ask the shift supervisor."),
    ("Can the fan run above 3000 rpm?", "If the fan is run above 3000 rpm, the warranty is void."),
    ("Can the fan run above 3000 rpm?", "Running the fan above 3000 rpm has not been tested."),
    ("Can the fan run above 3000 rpm?", "The fan may be able to run above 3000 rpm in some installations."),
    ("Le ventilateur peut-il tourner au-dessus de 3000 tr/min ?",
     "Si le ventilateur tourne au-dessus de 3000 tr/min, la garantie est annulée."),
])
def test_a_question_a_condition_or_a_hedge_settles_nothing(question, text):
    assert polar_verdict(question, [_doc(text)]) is None
