"""The extractive answer quotes the sentence that answers: the judge's quote when it found one, else the
sentences sharing most with the question, never a title, heading or list label."""

from __future__ import annotations

from sourcegate.answer import ExtractiveWriter, best_sentences, is_heading
from sourcegate.gate import Status
from sourcegate.models import Candidate

TEXT = ("Pump P-200 bearing lubrication\n"
        "When to grease:\n"
        "Grease the P-200 bearings every 2,000 operating hours. Use 15 g of polyurea grease per bearing.\n"
        "Lockout is mandatory before any bearing work.")


def cand(quote=None) -> Candidate:
    return Candidate(id="c1", doc_id="PROC-P200", title="Pump P-200 bearing lubrication", text=TEXT, quote=quote)


def test_headings_titles_and_labels_are_not_sentences():
    assert is_heading("Pump P-200 bearing lubrication", "Pump P-200 bearing lubrication")
    assert is_heading("When to grease:")
    assert is_heading("When to backwash")
    assert not is_heading("Grease the P-200 bearings every 2,000 operating hours.")


def test_best_sentences_never_quote_the_title_or_a_heading():
    got = best_sentences("P-200 bearing lubrication: how often do I grease?", TEXT, 2, "Pump P-200 bearing lubrication")
    assert got and all("every 2,000" in s or "15 g" in s or "Lockout" in s for s in got)
    assert not any(s.startswith("Pump P-200 bearing lubrication") or s.startswith("When to grease") for s in got)


def test_the_judges_quote_is_what_the_answer_quotes():
    w = ExtractiveWriter()
    quote = "Lockout is mandatory before any bearing work."
    a = w.write("Can I grease the P-200 bearings while the pump is running?", Status.ANSWER, [cand(quote)], [])
    lines = a.text.split("\n\nSources:")[0].splitlines()
    assert lines[1] == f'- "{quote}" [1]'  # the sentence that settles it comes first
    # and alone: it settles the yes/no question; the sentence on how often to grease answers another one
    assert len(lines) == 2
    b = w.write("How often do I grease the P-200 bearings?", Status.ANSWER, [cand()], [])
    assert "every 2,000 operating hours" in b.text
    assert '"Pump P-200 bearing lubrication"' not in b.text


def test_a_quote_with_a_heading_glued_to_it_is_quoted_without_it():
    text = ("Lockout procedure\nLockout is mandatory before any bearing work. Steps.\n"
            "1. Tell the control room.\n2. Open the breaker.")
    c = Candidate(id="c1", doc_id="LOTO", title="Lockout procedure", text=text,
                  quote="Lockout is mandatory before any bearing work. Steps. 1.")
    a = ExtractiveWriter().write("Do I need lockout?", Status.ANSWER, [c], [])
    body = a.text.split("\n\nSources:")[0]
    assert '"Lockout is mandatory before any bearing work." [1]' in body
    assert "Steps" not in body
