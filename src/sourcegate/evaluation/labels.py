"""Per-candidate labels for the five judge questions, derived from the evaluation cases only.

The cases say which documents should answer (`expected_sources`), which must never be used
(`forbidden_sources`) and what outcome is expected. That is enough to label most retrieved
candidates for each question without a second annotation pass. A candidate that the cases do
not settle is left unlabelled (None) rather than guessed, so the score distributions, the
reliability diagram and the AUROC only use candidates whose truth the cases state.

Document-level questions (injection, superseded) are properties of a document, so their labels
are pooled over all cases; the other three depend on the query, so they are per (case, candidate).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ..models import QUESTIONS

ANSWER = "answer_from_evidence"
CONFLICT = "premise_conflict"
INSUFFICIENT = "insufficient_evidence"

# Human-readable definitions, printed in the report next to the plots that use them.
LABEL_DEFINITIONS: dict[str, str] = {
    "is_relevant": (
        "positive: the candidate's document is in the case's expected_sources (answer or conflict cases); "
        "negative: the document is in neither expected_sources nor forbidden_sources of that case. "
        "Forbidden documents (older revisions, forum posts) are usually on topic, and documents retrieved for "
        "an insufficient_evidence case may be on topic without answering, so both are unlabelled."
    ),
    "contains_answer_evidence": (
        "positive: expected_status is answer_from_evidence and the document is in expected_sources; "
        "negative: expected_status is insufficient_evidence (nothing in the library answers), or the "
        "document is in forbidden_sources, or it is outside expected_sources of an answer case. "
        "Candidates of premise_conflict cases are unlabelled (the question's premise is false)."
    ),
    "contradicts_query_premise": (
        "positive: expected_status is premise_conflict and the document is in expected_sources; "
        "negative: every candidate of an answer_from_evidence or insufficient_evidence case (no premise "
        "conflict is expected there). Other candidates of conflict cases are unlabelled."
    ),
    "contains_prompt_injection": (
        "document-level. positive: the document is forbidden in a case whose kind mentions injection; "
        "negative: the document is expected (used as evidence) in some case and never labelled positive. "
        "Not derived from the gate's own exclusion reasons, which would make the label agree with the judge."
    ),
    "is_superseded": (
        "document-level. positive: the document is forbidden in a case whose kind mentions superseded, "
        "outdated or archived, or it is a forbidden document that is another revision of an expected "
        "document of the same case (same id once a trailing revision marker such as -R1 / -v2 is removed); "
        "negative: the document is expected in some case and never labelled positive."
    ),
}

_REVISION = re.compile(r"[-_. ]?(r|rev|v|version)[-_. ]?\d+$", re.IGNORECASE)


def revision_stem(doc_id: str) -> str:
    """The id without a trailing revision marker: 'PROC-P200-BRG-R1' -> 'PROC-P200-BRG'."""
    return _REVISION.sub("", doc_id)


@dataclass(frozen=True)
class DocLabels:
    injection: dict[str, bool]
    superseded: dict[str, bool]


def doc_labels(cases: Iterable[Any]) -> DocLabels:
    """Document-level labels for injection and superseded, pooled over the cases."""
    cases = list(cases)
    inj_pos: set[str] = set()
    sup_pos: set[str] = set()
    expected: set[str] = set()
    for c in cases:
        kind = (c.kind or "").lower()
        expected.update(c.expected_sources)
        if "injection" in kind:
            inj_pos.update(c.forbidden_sources)
        if any(w in kind for w in ("supersed", "outdated", "archiv", "obsolete")):
            sup_pos.update(c.forbidden_sources)
        stems = {revision_stem(d) for d in c.expected_sources}
        for d in c.forbidden_sources:
            if revision_stem(d) != d and revision_stem(d) in stems:
                sup_pos.add(d)
    inj = {d: True for d in inj_pos} | {d: False for d in expected - inj_pos}
    sup = {d: True for d in sup_pos} | {d: False for d in expected - sup_pos}
    return DocLabels(injection=inj, superseded=sup)


def candidate_labels(case: Any, doc_id: str, docs: DocLabels) -> dict[str, bool | None]:
    """The label of one retrieved candidate for each of the five questions (None: unlabelled)."""
    exp, forb = set(case.expected_sources), set(case.forbidden_sources)
    st = case.expected_status
    rel: bool | None
    if doc_id in exp and st != INSUFFICIENT:
        rel = True
    elif doc_id in forb or st == INSUFFICIENT:
        rel = None
    else:
        rel = False
    if st == ANSWER:
        ev: bool | None = doc_id in exp and doc_id not in forb
    elif st == INSUFFICIENT:
        ev = False
    else:
        ev = None
    if st == CONFLICT:
        con: bool | None = True if doc_id in exp else None
    else:
        con = False
    return {
        "is_relevant": rel,
        "contains_answer_evidence": ev,
        "contradicts_query_premise": con,
        "contains_prompt_injection": docs.injection.get(doc_id),
        "is_superseded": docs.superseded.get(doc_id),
    }


def labelled_scores(results: list[Any]) -> dict[str, tuple[list[float], list[int]]]:
    """For each question, (scores, labels) over every labelled candidate with scores."""
    docs = doc_labels(r.case for r in results)
    out: dict[str, tuple[list[float], list[int]]] = {q: ([], []) for q in QUESTIONS}
    for r in results:
        for cand in r.candidates:
            scores = cand.get("scores")
            if not scores:
                continue  # the judge failed on this passage: nothing to calibrate
            labels = candidate_labels(r.case, cand["doc_id"], docs)
            for q in QUESTIONS:
                if labels[q] is not None and q in scores:
                    out[q][0].append(float(scores[q]))
                    out[q][1].append(int(labels[q]))
    return out
