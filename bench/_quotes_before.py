"""The extractive writer's quoting as it was before quotes were made to read (sourcegate at commit
bdf573e, src/sourcegate/answer.py), kept verbatim so that bench_quotes.py can quote the very same
evidence passages, with the very same judge's sentence, the old way and the new way."""

from __future__ import annotations

import re

from sourcegate.text import is_heading
from sourcegate.retrieve import lexical_overlap, query_terms

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


def quoted(query: str, c, k: int) -> list[str]:
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
