"""Answer writers. The default is offline and extractive: it quotes the sentences of the evidence
passages that answer the question, each with its citation, and adds nothing of its own."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol, runtime_checkable

from .gate import Status
from .models import Candidate
from .judges.local.text import is_heading
from .retrieve import lexical_overlap, query_terms


@dataclass
class Citation:
    n: int
    id: str
    doc_id: str
    title: str
    url: str | None


@dataclass
class WrittenAnswer:
    text: str | None
    citations: list[Citation] = field(default_factory=list)
    writer: str = "extractive"
    # Which writer actually produced `text`: "extractive", or the model endpoint's role ("local",
    # "cloud"); the model that wrote it; why earlier endpoints were passed over, if any were.
    path: str = "extractive"
    model: str | None = None
    fallback_reason: str | None = None
    # One entry per endpoint tried: role, endpoint host, outcome, reason, milliseconds.
    attempts: list[dict[str, Any]] = field(default_factory=list)
    # Remote endpoints the writer's policy may reach (hosts only).
    declared_remote: list[str] = field(default_factory=list)


@runtime_checkable
class Writer(Protocol):
    name: str

    def write(self, query: str, status: Status, evidence: list[Candidate], conflicts: list[Candidate],
              search_text: str | None = None, on_event: Callable[[str, dict[str, Any]], None] | None = None) -> WrittenAnswer:
        """`search_text` is the query with cross-language terms added, for matching sentences.
        `on_event(kind, data)`, when given, receives the answer as it is written: "delta" (checked
        text to append), "reset" (drop what was appended), "replace" (the whole answer)."""
        ...


_SENT_SPLIT = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])|\n+")
_STEP = re.compile(r"^\d+\.\s")


def sentences(text: str) -> list[str]:
    """Sentences of a passage; numbered steps ("1. Stop the pump.") stay whole."""
    raw = [s.strip() for s in _SENT_SPLIT.split(text) if s and s.strip()]
    out: list[str] = []
    for s in raw:
        # "1." alone is the number of the next step: glue it back on.
        if out and re.fullmatch(r"\d+\.", out[-1]):
            out[-1] = f"{out[-1]} {s}"
        else:
            out.append(s)
    return [s for s in out if len(s) > 2]


_QUANTITY_Q = re.compile(r"\b(how (often|much|many|long|deep|frequently)|what (interval|torque|level|depth|quantity)|combien|quelle? (fréquence|quantité))\b", re.I)


def rank_sentences(query: str, text: str, title: str = "") -> list[tuple[float, int, str]]:
    terms = query_terms(query)
    wants_number = bool(_QUANTITY_Q.search(query))
    scored = []
    for i, s in enumerate(sentences(text)):
        if is_heading(s, title):
            continue
        score = lexical_overlap(terms, s)
        if wants_number and re.search(r"\d", s):
            score += 0.25
        # Headings like "Scope." carry no information of their own.
        if len(s) < 25:
            score -= 0.5
        scored.append((score, i, s))
    scored.sort(key=lambda x: (-x[0], x[1]))
    return scored


def best_sentences(query: str, text: str, k: int = 2, title: str = "") -> list[str]:
    ranked = rank_sentences(query, text, title)
    if not ranked:  # nothing but headings: the passage is quoted as it is
        return sentences(text)[:1]
    picked = [r for r in ranked[:k] if r[0] > 0] or ranked[:1]
    return [s for _, _, s in sorted(picked, key=lambda r: r[1])]


def quoted(query: str, c: Candidate, k: int) -> list[str]:
    """What the answer quotes from an evidence passage: first the sentence the judge found answering (the
    reader's span, or the sentence that settles a yes/no question) when it found one, then, up to `k`,
    the sentences that share most with the question; never a title or heading."""
    best = best_sentences(query, c.text, k, c.title)
    if not c.quote:
        return best
    # the judge splits sentences its own way: quote the answer's sentences that make up the judge's
    # quote (a heading glued to it, "Steps. 1.", is left out), or the one that holds it
    q = c.quote.strip()
    sents = [s for s in sentences(c.text) if not is_heading(s, c.title)]
    first = [s for s in sents if s in q] or [s for s in sents if q in s][:1] or [q]
    return first + [s for s in best if s not in first][: max(0, k - len(first))]


_PREMISE_SPLIT = re.compile(r"[,;:]|\b(?:so|therefore|then|donc|alors)\b", re.I)
_QUESTION_START = re.compile(
    r"^\s*(how|what|which|who|when|where|why|can|do|does|should|is|are|comment|combien|quel|quelle|quels|faut|est-ce|pourquoi|où)\b",
    re.I,
)


def extract_premise(query: str) -> str:
    """The declarative part of a question, which a premise conflict contradicts:
    "P-200 bearings need grease every 500 hours, how much do I add?" -> "P-200 bearings need grease every 500 hours"."""
    q = query.strip().rstrip("?").strip()
    q = re.sub(r"^(since|given that|as|because|puisque|comme|étant donné que)\s+", "", q, flags=re.I)
    parts = [p.strip() for p in _PREMISE_SPLIT.split(q) if p and p.strip()]
    declarative = [p for p in parts if not _QUESTION_START.match(p)]
    with_facts = [p for p in declarative if re.search(r"\d", p)] or declarative
    return with_facts[0] if with_facts else q


def _sources(cands: list[Candidate]) -> tuple[str, list[Citation]]:
    cites = [Citation(n, c.id, c.doc_id, c.title, c.url) for n, c in enumerate(cands, start=1)]
    lines = [f"[{c.n}] {c.title} ({c.doc_id})" + (f" {c.url}" if c.url else "") for c in cites]
    return "Sources:\n" + "\n".join(lines), cites


class ExtractiveWriter:
    name = "extractive"

    def __init__(self, sentences_per_passage: int = 2):
        self.k = sentences_per_passage

    def write(self, query: str, status: Status, evidence: list[Candidate], conflicts: list[Candidate],
              search_text: str | None = None, on_event=None) -> WrittenAnswer:
        match_text = search_text or query
        if status is Status.ANSWER:
            lines = [f'- "{s}" [{n}]' for n, c in enumerate(evidence, start=1) for s in quoted(match_text, c, self.k)]
            src, cites = _sources(evidence)
            return WrittenAnswer("From the documents:\n" + "\n".join(lines) + "\n\n" + src, cites, self.name)
        if status is Status.CONFLICT:
            premise = extract_premise(query)
            bridge_terms = match_text[len(query):] if match_text.startswith(query) else ""
            lines = [f'- "{s}" [{n}]' for n, c in enumerate(conflicts, start=1)
                     for s in best_sentences(premise + bridge_terms, c.text, 1, c.title)]
            src, cites = _sources(conflicts)
            text = (f'The documents contradict a premise of the question: "{premise}". What they say instead:\n'
                    + "\n".join(lines) + "\n\nCheck the assumption before acting.\n\n" + src)
            return WrittenAnswer(text, cites, self.name)
        return WrittenAnswer(
            "No document in the library reliably answers this question. Rephrase it (name the equipment, "
            "model or procedure) or escalate it to an expert.",
            [], self.name,
        )


def invalid_citations(text: str, n_sources: int) -> list[int]:
    """Citation numbers in `text` that point to no source: a writer that produces them is rejected."""
    return sorted({int(m) for m in re.findall(r"\[(\d+)\]", text or "") if not 1 <= int(m) <= n_sources})


_SOURCES_BLOCK = "\n\nSources:\n"
NOT_FOUND = "Not found in the library."


def assemble_parts(sections: list[tuple[str, WrittenAnswer | None]]) -> WrittenAnswer:
    """One answer from the answers of a question's parts, in the order asked: each part under its
    own question, cited from its own passages, with one list of sources numbered across parts;
    a part with no answer (None) is said to be not found."""
    cites: list[Citation] = []
    number: dict[str, int] = {}
    blocks: list[str] = []
    for question, written in sections:
        if written is None or not written.text:
            blocks.append(f"{question}\n- {NOT_FOUND}")
            continue
        local: dict[int, int] = {}
        for c in written.citations:
            if c.id not in number:
                number[c.id] = len(cites) + 1
                cites.append(Citation(number[c.id], c.id, c.doc_id, c.title, c.url))
            local[c.n] = number[c.id]
        body = written.text.rsplit(_SOURCES_BLOCK, 1)[0].strip()
        body = re.sub(r"^From the documents:\n", "", body)
        body = re.sub(r"\[(\d+)\]", lambda m: f"[{local.get(int(m.group(1)), int(m.group(1)))}]", body)
        blocks.append(f"{question}\n{body}")
    lines = [f"[{c.n}] {c.title} ({c.doc_id})" + (f" {c.url}" if c.url else "") for c in cites]
    text = "From the documents, part by part:\n\n" + "\n\n".join(blocks)
    if lines:
        text += _SOURCES_BLOCK + "\n".join(lines)
    done = [w for _, w in sections if w is not None]
    by_model = [w for w in done if w.path != "extractive"]
    lead = by_model[0] if by_model else (done[0] if done else WrittenAnswer(None))
    reasons = list(dict.fromkeys(w.fallback_reason for w in done if w.fallback_reason))
    return WrittenAnswer(
        text, cites, lead.writer, path=lead.path, model=lead.model,
        fallback_reason="; ".join(reasons) or None,
        attempts=[a for w in done for a in w.attempts],
        declared_remote=list(dict.fromkeys(h for w in done for h in w.declared_remote)),
    )
