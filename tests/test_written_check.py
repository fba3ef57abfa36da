"""The check of a model-written answer against the passages it cites: entailment (the local judge's
reader), polarity, content, headings and labels, the premise-conflict form, and the trimmed prompt."""

from __future__ import annotations

import numpy as np
import pytest
from fakes.chat_server import FakeChatServer

from sourcegate.gate import Status
from sourcegate.judges.local.reader import load_reader
from sourcegate.llm_writer import (LLMWriter, build_messages, check_answer, endpoints_for, passage_excerpts,
                                   split_cited_sentences)
from sourcegate.models import Candidate
from sourcegate.settings import Settings
from sourcegate.written_check import CheckThresholds, SourceCheck, denies, grants

READER = load_reader()
needs_reader = pytest.mark.skipif(READER is None, reason="the reader's weights are not shipped in this build")

LUBE = Candidate(id="L#0", doc_id="L", title="Pump P-200: bearing lubrication", text=(
    "Interval. Grease the bearings of pump P-200 every 2,000 operating hours. Quantity. Add 20 g of "
    "lithium-complex grease to each bearing. Do not mix grease types."))
LOTO = Candidate(id="T#0", doc_id="T", title="Lockout/tagout for pumps", text=(
    "When it is required. Lockout/tagout is mandatory before any work on pump bearings, on every pump model "
    "including P-200 and P-300, even for a short task such as greasing. Steps. 1. Stop the pump from the local panel. 2. Lock the isolator in the off position."))
BACKWASH = Candidate(id="B#0", doc_id="B", title="Rapid sand filters: backwash", text=(
    "When to backwash. Backwash a filter when the head loss reaches 2.5 m or after 72 hours in service."))


def source(embedder, question: str, premise: str | None = None, reader=READER) -> SourceCheck:
    return SourceCheck(reader, embedder, CheckThresholds(), question=question, premise=premise)


def codes(text: str, passages, check: SourceCheck | None, premise: str | None = None) -> set[str]:
    return set(check_answer(text, passages, source=check, premise=premise).codes)


# -- polarity -------------------------------------------------------------------------------------

def test_grant_and_denial_words():
    assert grants("Yes, you can grease the bearings while the pump runs")
    assert grants("Oui, vous pouvez graisser les roulements")
    assert not grants("Yes, but the pump must be locked out first")  # a grant with a condition
    assert not grants("You can not grease it while it runs")
    assert denies("The shaft must not turn") and denies("Ne jamais graisser en marche") and denies("C'est interdit")
    assert denies("Il ne faut pas mélanger les graisses")
    assert not denies("No, lockout is mandatory")  # the leading "No" only answers the question


@pytest.mark.parametrize("text", [
    "Yes, you can grease the P-200 bearings while the pump is running [2].",
    "Oui, vous pouvez graisser les roulements de la P-200 pendant que la pompe tourne [2].",
    "Yes, grease types can be mixed in the P-200 bearings [1].",
    "No, lockout/tagout is not required for a short task such as greasing [2].",
    "Lockout is never needed for greasing [2].",
])
def test_a_sentence_that_reverses_its_passage_fails(embedder, text):
    q = "Can I grease the P-200 bearings while the pump is running?"
    assert "reversed_polarity" in codes(text, [LUBE, LOTO], source(embedder, q)), text


@pytest.mark.parametrize("text", [
    "No. Lockout/tagout is mandatory before any work on pump bearings, even for a short task such as greasing [2].",
    "Non, la consignation est obligatoire avant toute intervention sur les roulements, même pour un graissage [2].",
    "Do not mix grease types [1].",
])
def test_a_sentence_of_the_same_polarity_passes(embedder, text):
    q = "Can I grease the P-200 bearings while the pump is running?"
    result = check_answer(text, [LUBE, LOTO], source=source(embedder, q))
    assert result.ok, (text, result.problems)


# -- content --------------------------------------------------------------------------------------

@pytest.mark.parametrize("text, code", [
    ("The P-200 was manufactured by the company [1].", "name_not_in_source"),  # an agent the passage never names
    ("The P-200 bearings are greased as the steps of the procedure say [1].", "restates_nothing"),
    # across languages words cannot be compared: the quantity the question asks for is missing
    ("La P-200 a été fabriquée par l'entreprise [1].", "no_quantity"),
    ("Follow the instructions below: [1].", "empty_label"),
    ("Il faut suivre les instructions suivantes : [1].", "empty_label"),
    ("Grease the P-200 bearings regularly [1].", "no_quantity"),  # "how often" answered without a quantity
    ("Use Shell Gadus grease every 2,000 operating hours [1].", "name_not_in_source"),
])
def test_a_sentence_that_says_nothing_of_its_passage_fails(embedder, text, code):
    q = "How often should I grease the P-200 bearings?"
    assert code in codes(text, [LUBE], source(embedder, q)), text


def test_content_tests_run_without_embeddings_or_reader():
    check = SourceCheck(None, None, question="How often should I grease the P-200 bearings?")
    assert "restates_nothing" in codes("The P-200 bearings are covered in the procedure [1].", [LUBE], check)
    assert "reversed_polarity" in codes("Yes, grease types can be mixed [1].", [LUBE], check)
    assert check_answer("Grease the P-200 bearings every 2,000 operating hours [1].", [LUBE], source=check).ok


@needs_reader
def test_entailment_is_asked_once_for_all_sentences(embedder, monkeypatch):
    calls = []
    real = READER.nli

    def counted(pairs):
        calls.append(len(pairs))
        return real(pairs)

    monkeypatch.setattr(READER, "nli", counted)
    check = source(embedder, "How much grease goes into each P-200 bearing, and how often?")
    text = ("Grease the bearings of pump P-200 every 2,000 operating hours [1]. "
            "Add 20 g of lithium-complex grease to each bearing [1].")
    result = check_answer(text, [LUBE], source=check)
    assert result.ok, result.problems
    assert len(calls) == 1 and calls[0] > 2
    # A threshold above every reading rejects both sentences as not entailed.
    strict = SourceCheck(READER, embedder, CheckThresholds(entail_min=0.999), question="How much grease?")
    assert check_answer(text, [LUBE], source=strict).codes.count("not_entailed") == 2


@needs_reader
def test_nli_is_not_asked_across_languages_unless_set(embedder):
    fr = "Graissez les roulements de la P-200 toutes les 2 000 heures [1]."
    same = SourceCheck(READER, embedder, CheckThresholds(entail_min=0.999), question="Tous les combien graisser ?")
    assert check_answer(fr, [LUBE], source=same).ok  # an English passage: the head is not asked
    cross = SourceCheck(READER, embedder, CheckThresholds(entail_min=0.999, nli_crosslingual=True),
                        question="Tous les combien graisser ?")
    assert check_answer(fr, [LUBE], source=cross).ok  # French is not among the head's languages
    cross = SourceCheck(READER, embedder, CheckThresholds(entail_min=0.999, nli_crosslingual=True,
                                                          nli_languages=("en", "fr")), question="Tous les combien graisser ?")
    assert "not_entailed" in check_answer(fr, [LUBE], source=cross).codes


# -- headings, labels, yes/no ---------------------------------------------------------------------

def test_headings_are_dropped_and_labels_joined():
    text = "When to backwash.\nBackwash when the head loss reaches 2.5 m [1]."
    dropped: list[str] = []
    assert split_cited_sentences(text, [BACKWASH], dropped) == [("Backwash when the head loss reaches 2.5 m [1].", [1])]
    assert dropped == ["When to backwash."]
    # Inline, the copy of a passage heading is dropped too; the answer shown loses it.
    result = check_answer("When to backwash. Backwash after 72 hours in service [1].", [BACKWASH])
    assert result.ok and result.text == "Backwash after 72 hours in service [1]."
    # A label is joined to its sentence, its list mark taken off; a bare "No." too.
    assert split_cited_sentences("Steps:\n1. Stop the pump from the local panel [1].") == \
        [("Steps: Stop the pump from the local panel [1].", [1])]
    assert split_cited_sentences("No. Lockout is mandatory [1].") == [("No. Lockout is mandatory [1].", [1])]
    # An uncited claim is not a heading: it fails.
    assert "uncited_sentence" in check_answer("Backwash after 72 hours [1]. It is safe to skip the air scour.",
                                              [BACKWASH]).codes
    # A short uncited line at the end introduces nothing: not dropped either.
    assert not check_answer("Backwash after 72 hours [1].\nSkip the air scour.", [BACKWASH]).ok


# -- premise conflicts ----------------------------------------------------------------------------

def test_a_correction_may_deny_the_premise_numbers_and_only_those(embedder):
    premise = "P-200 bearings need grease every 500 hours"
    check = source(embedder, premise + ", how much do I add?", premise)
    ok = check_answer("Grease the P-200 bearings every 2,000 operating hours [1], not 500 hours.", [LUBE],
                      source=check, premise=premise)
    assert ok.ok, ok.problems
    assert "number_not_in_source" in codes("The P-200 bearings need grease every 500 hours [1].", [LUBE], check, premise)
    assert "number_not_in_source" in codes("Grease every 2,000 operating hours [1], not 750 hours.", [LUBE], check, premise)
    # Outside a premise conflict, the denied clause is part of the claim.
    assert "number_not_in_source" in codes("Grease every 2,000 operating hours [1], not 500 hours.", [LUBE], None)


def test_the_conflict_prompt_asks_for_the_correction_only():
    msgs = build_messages("Les roulements de la P-200 se graissent toutes les 500 heures, combien ajouter ?",
                          Status.CONFLICT, [LUBE])
    assert "Write only what the passages say instead" in msgs[1]["content"]
    assert "that sentence is added for you" in msgs[1]["content"]


def test_streamed_conflict_answer_starts_with_sourcegates_statement():
    events = []
    q = "P-200 bearings need grease every 500 hours, how much do I add?"
    with FakeChatServer("Grease the P-200 bearings every 2,000 operating hours [1], not 500 hours. "
                        "Add 20 g of lithium-complex grease to each bearing [1].") as cloud:
        writer = LLMWriter(endpoints_for("cloud", None, None, cloud.url + "/v1", "m", None), "cloud")
        out = writer.write(q, Status.CONFLICT, [], [LUBE], on_event=lambda k, d: events.append((k, d)))
    deltas = "".join(d["text"] for k, d in events if k == "delta")
    assert out.path == "cloud", out.fallback_reason
    assert deltas.startswith('The documents contradict a premise of the question: "P-200 bearings need grease every 500 hours". '
                             "Grease the P-200 bearings every 2,000")
    assert out.text.startswith(deltas)


# -- the prompt -----------------------------------------------------------------------------------

LONG = Candidate(id="S#0", doc_id="S", title="Pump P-200: mechanical seal replacement", text=(
    "Safety. Lock out and tag out pump P-200 before opening the seal housing; the shaft must not turn. "
    "Drain the casing. Steps. 1. Remove the coupling guard and the coupling spacer. 2. Unbolt the seal housing "
    "and slide out the rotating assembly. 3. Inspect the shaft sleeve; replace it if scored deeper than 0.2 mm. "
    "4. Fit the new cartridge seal, part number MS-200-45, lubricating the O-rings with silicone grease. "
    "5. Tighten the gland bolts to 25 N·m in a cross pattern. 6. Refit the coupling and check alignment to within "
    "0.05 mm. After the work. Vent the casing, remove the lockout and run the pump for 15 minutes."))


@pytest.mark.parametrize("reader", [READER, None], ids=["reader", "no-reader"])
def test_the_model_reads_the_sentences_around_the_answer(reader):
    q = "What torque for the P-200 gland bolts?"
    [excerpt] = passage_excerpts(q, [LONG], reader, window=1)
    assert "25 N·m" in excerpt and "..." in excerpt
    assert len(excerpt) < 0.6 * len(LONG.text)
    full = build_messages(q, Status.ANSWER, [LONG])[1]["content"]
    short = build_messages(q, Status.ANSWER, [LONG], [excerpt])[1]["content"]
    assert len(short) < len(full) and "[1] Pump P-200: mechanical seal replacement" in short


def test_the_writer_uses_the_judges_reader_and_the_settings_thresholds():
    s = Settings(_env_file=None, writer="llm", llm_writer_policy="cloud", llm_writer_cloud="http://127.0.0.1:9/v1",
                 llm_writer_cloud_model="m", llm_writer_entail_min=0.42, llm_writer_excerpt_window=-1)
    w = LLMWriter.from_settings(s)
    assert w.reader is READER  # one reader per process, shared with the local judge
    assert w.thresholds.entail_min == 0.42 and w.excerpt_window is None
    assert LLMWriter.from_settings(s.model_copy(update={"llm_writer_nli": False})).reader is None


def test_reader_nli_shape():
    if READER is None:
        pytest.skip("the reader's weights are not shipped in this build")
    p = READER.nli([("Grease every 2,000 hours.", "Grease every 2,000 hours."), ("a", "b")])
    assert p.shape == (2, 3) and np.allclose(p.sum(axis=1), 1.0)
