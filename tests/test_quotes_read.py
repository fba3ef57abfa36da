"""Quotes that read, on the text the parsers give for the lab library (tests/lab_library.py): sentences
rejoined across PDF and DOCX line wraps and hyphenation, numbers whole with any thousands separator
and decimal comma, no title or heading quoted, a second quote only when it adds an answer, the quote
that holds the value asked across languages, and the premise named as the clause of the question."""

from __future__ import annotations

import pytest
from lab_library import make_lab_library

from sourcegate.answer import ExtractiveWriter, best_sentences, extract_premise, quoted, rejoin, sentences
from sourcegate.gate import Status
from sourcegate.ingest.parsers import parse_file
from sourcegate.models import Candidate


@pytest.fixture(scope="module")
def parsed(tmp_path_factory):
    root = make_lab_library(tmp_path_factory.mktemp("lab") / "library")
    return {name: parse_file(root / name, name)[0] for name in
            ("hg3-procedure.pdf", "hg5-manual.docx", "etuve-es2.docx", "acid-spill.html", "forum-hg3-speed.txt")}


def cand(doc, quote=None) -> Candidate:
    return Candidate(id=doc.id + "#0", doc_id=doc.id, title=doc.title, text=doc.text, quote=quote)


def test_pdf_line_wraps_and_hyphenation_are_undone(parsed):
    text = parsed["hg3-procedure.pdf"].text
    assert "runs, and\nlog" in text and "homo-\ngeniser" in text  # the PDF's own line breaks
    got = sentences(text)
    assert "Replace the rotor seal every 250 runs, and log each replacement in the instrument book." in got
    assert "The dispersing tool must not exceed 0.5 g of imbalance after cleaning; check it on the balance before each run." in got
    assert "Clean the homogeniser shaft with 70 % ethanol after each sample." in got
    assert not any(s.endswith((" and", " not")) or s.startswith(("log ", "exceed ")) for s in got), got
    # a hyphen that belongs to an identifier stays: "P-" + "200"
    assert rejoin("Grease pump P-\n200 every week.") == "Grease pump P-200 every week."
    # paragraphs, headings and list items keep their own lines
    assert sentences("Scope\n\nThis covers the pump.\n- Stop it.\n- Open it.") == [
        "Scope", "This covers the pump.", "- Stop it.", "- Open it."]


def test_a_docx_title_with_rev_is_one_sentence_and_never_quoted(parsed):
    doc = parsed["hg5-manual.docx"]
    got = sentences(doc.text)
    assert "HG-5 homogeniser manual (Rev. 4)" in got and "(Rev." not in got
    for q in ("When must the HG-5 rotor be retired?", "What is the HG-5 homogeniser manual about?"):
        picked = quoted(q, cand(doc), 2)
        assert picked and not any(s.startswith(("HG-5 homogeniser manual", "Scope")) for s in picked), picked
    assert quoted("When must the HG-5 rotor be retired?", cand(doc), 2)[0] == (
        "Retire the HG-5 rotor after 10,000 runs or at the first visible crack, whichever comes first.")


@pytest.mark.parametrize("number", ["25,000", "25 000", "25\u00a0000", "25\u202f000", "25.000"])
def test_numbers_stay_whole_with_any_thousands_separator(number):
    text = f"Pump P-9 curve.\nNever run the P-9 above {number} rpm. Stop it at once if it\nvibrates."
    got = best_sentences("What is the maximum speed of the P-9?", text, 2, "Pump P-9 curve")
    assert got[0] == f"Never run the P-9 above {number} rpm."
    premise = extract_premise(f"The P-9 runs at {number} rpm, how long can I run it?")
    assert premise == f"The P-9 runs at {number} rpm"


def test_french_decimal_comma_and_spaced_thousands(parsed):
    doc = parsed["etuve-es2.docx"]
    assert quoted("Quelle est la charge maximale par étagère de l'étuve ES-2 ?", cand(doc), 2)[0] == (
        "La charge maximale de l'étuve ES-2 est de 12,5 kg par étagère et de 25 000 g au total.")
    assert extract_premise("L'étuve ES-2 porte 0,5 kg par étagère, combien au total ?") == "L'étuve ES-2 porte 0,5 kg par étagère"
    assert extract_premise("The tool may exceed 0,5 g, so how often do I balance it?") == "The tool may exceed 0,5 g"


def test_the_second_quote_only_when_it_adds_an_answer(parsed):
    doc = parsed["hg3-procedure.pdf"]
    # a yes/no question is settled by one sentence
    assert len(quoted("Must the dispersing tool be checked on the balance?", cand(doc), 2)) == 1
    # one value asked: the sentence that holds it, not another sentence about the rotor
    one = quoted("How often should the HG-3 rotor seal be replaced?", cand(doc), 2)
    assert one[0].startswith("Replace the rotor seal every 250 runs") and len(one) == 1, one
    spill = parsed["acid-spill.html"]
    both = quoted("What do I do with an acid spill, and with one above 1 L?", cand(spill), 2)
    assert len(both) == 2 and both[1].startswith("For a spill above 1 L, evacuate the room"), both


def test_across_languages_the_quote_holds_the_value_asked(parsed):
    """A French question on an English passage: the judge's sentence (here the one closest to the
    question's words) may not hold the number asked; the quote is the sentence that does."""
    doc = parsed["hg3-procedure.pdf"]
    q = "Tous les combien faut-il remplacer le joint du rotor du HG-3 ?"
    bridged = q + " seal rotor replace"
    c = cand(doc, quote="Never run the HG-3 rotor above 20,000 rpm: the rotor is rated for 20,000 rpm and no more.")
    got = quoted(bridged, c, 2)
    assert got[0] == "Replace the rotor seal every 250 runs, and log each replacement in the instrument book."
    a = ExtractiveWriter().write(q, Status.ANSWER, [c], [], search_text=bridged)
    assert "every 250 runs" in a.text.split("\n\nSources:")[0]


def test_the_premise_is_the_clause_the_documents_contradict():
    q = "I cleaned the HG-3 shaft with ethanol, and the HG-3 rotor is rated for 30,000 rpm, how long can it run?"
    said = ["Never run the HG-3 rotor above 20,000 rpm: the rotor is rated for 20,000 rpm and no more."]
    assert extract_premise(q, said) == "the HG-3 rotor is rated for 30,000 rpm"
    assert extract_premise("Can the HG-3 rotor run at 30,000 rpm?") == "Can the HG-3 rotor run at 30,000 rpm"
    assert extract_premise("Since the seal lasts 2,500 runs, when do I order a spare?") == "the seal lasts 2,500 runs"
    w = ExtractiveWriter().write(q, Status.CONFLICT, [], [Candidate(id="p#0", doc_id="p", title="HG-3 procedure",
                                                                   text=said[0])])
    assert w.text.startswith('The documents contradict a premise of the question: "the HG-3 rotor is rated for 30,000 rpm".')


def test_labels_and_table_headers_are_never_quoted():
    from sourcegate.answer import is_label

    assert is_label("- Last modified: June 2023") and is_label("Version: 3")
    assert is_label("Service status | Type of API key | Daily limit")
    assert not is_label("- Maximum batch size: 7 kg")  # a list item that states a value
    text = ("Daily limits\n\nService status | Type of API key | Daily limit\n\nTrial | Team | 50\n\n"
            "- Last modified: June 2023\n\nA trial service can send 50 messages a day with a team key.")
    got = best_sentences("How many messages a day can a trial service send?", text, 2, "Daily limits")
    assert got == ["A trial service can send 50 messages a day with a team key."], got
    assert not any("Last modified" in s or "Service status" in s for s in got)


def test_the_premise_leaves_out_where_the_question_looks():
    assert extract_premise("According to the CISA baseline, passwords expire every 90 days, must I change mine?") == (
        "passwords expire every 90 days")
    assert extract_premise("Our service is still in trial. How many messages a day can we send?") == (
        "Our service is still in trial")
    assert extract_premise("D'après la CISA, faut-il faire expirer les mots de passe ?") == (
        "D'après la CISA, faut-il faire expirer les mots de passe")
