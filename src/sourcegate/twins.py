"""Twins in the library and what tells them apart (library structure computed at ingest).

A library holds near-copies: one install guide per Linux distribution, one page per product of a
family (GC Notify and GOV.UK Notify), one revision per release (PostgreSQL 16 and 17). Their passages
read alike and state different values, so a passage of one twin must not answer a question about the
other. The identifiers of a question (P-200 vs P-300) catch only part of this; names, platforms and
versions are found here from the library itself:

1. two passages of different documents are twins when their vectors are close (`TWIN_MIN_SIM`);
2. what tells them apart is the name-like terms of each one's title, heading and version (a
   capitalised word inside a title, an acronym, a number or a version) that the other one never
   uses; a pair is kept only when both sides have such terms;
3. a translation is not a twin: across languages, a pair whose passages state the same numbers is
   the same page in two languages.

The result is stored with each chunk's passage features (`features["twins"]`), so the judge reads it
from any store; `twin_named()` is the rule the judge applies.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass

import numpy as np

from . import text as T

log = logging.getLogger(__name__)

# cosine between two passages' stored vectors from which they may be twins (the embedder's scale:
# translations and product twins of one vendor family sit at 0.65-0.9, version twins above 0.9)
TWIN_MIN_SIM = 0.65
# two passages told apart by numbers alone (releases, revisions) are twins only when this close: two
# different procedures of one library differ by their revision numbers too
VERSION_TWIN_MIN_SIM = 0.8
# twins kept per passage, closest first
MAX_TWINS = 4
# the similarity matrix is computed in blocks of this many passages
_BLOCK = 2048

_WORD = re.compile(r"[^\W_][\w.+\-/]*", re.UNICODE)
_SEGMENTS = re.compile(r"\s*(?:›|»|>|\||::|\s-\s|\s–\s|\s—\s|:\s)\s*")


@dataclass
class PassageEntry:
    """What the twin search reads of one stored chunk."""

    chunk_id: str
    doc_id: str
    title: str
    heading: str
    version: str
    text: str
    vector: np.ndarray


def _tokens(text: str) -> list[str]:
    return T.tokens(text or "")


def name_terms(title: str, heading: str = "", version: str = "") -> set[str]:
    """Name-like terms of a passage's title, heading path and version, folded: a word that is
    capitalised but does not open its title segment ("guide for Ubuntu", "Baseline for Gmail"), an
    acronym or mixed-case name (GC, GOV.UK, CentOS), a word holding a digit (M365, 16); and every
    token of the version that holds a digit."""
    out: set[str] = set()
    for part in (title or "", heading or ""):
        for seg in _SEGMENTS.split(part):
            words = _WORD.findall(seg)
            for i, w in enumerate(words):
                w = w.strip(".-/+")
                if not w:
                    continue
                upper = sum(1 for c in w if c.isupper())
                digit = any(c.isdigit() for c in w)
                if digit or upper >= 2 or (i > 0 and w[0].isupper()):
                    for t in _tokens(w):
                        # a one-digit number in a title is a section number, and too common in questions
                        if t not in T.STOP and len(t) > 1:
                            out.add(t)
    for t in _tokens(version or ""):
        if any(c.isdigit() for c in t):
            out.add(t)
    # a one-character term ("2", "B") is too common in questions to tell anything apart, and so is a run
    # of zeros (the tokens split "1,000" into "1" and "000")
    return {t for t in out if len(t) > 1 and t.strip("0")}


def _numbers(text: str) -> frozenset[str]:
    return frozenset(t for t in _tokens(text) if any(c.isdigit() for c in t))


class _Side:
    __slots__ = ("names", "meta", "words", "numbers", "lang")

    def __init__(self, e: PassageEntry):
        self.names = name_terms(e.title, e.heading, e.version)
        self.meta = set(_tokens(" ".join([e.title or "", e.heading or "", e.version or ""])))
        self.words = self.meta | set(_tokens(e.text))
        self.numbers = _numbers(e.text)
        self.lang = T.language(e.text)


def distinguishing(a: _Side, b: _Side) -> list[str]:
    """A's name-like terms that B never uses: a word absent from B's title, heading, version and text;
    a number absent from B's title, heading and version (numbers recur in any text)."""
    out = []
    for t in a.names:
        seen = b.meta if any(c.isdigit() for c in t) else b.words
        if t not in seen:
            out.append(t)
    return sorted(out)


def find_twins(entries: list[PassageEntry], min_sim: float = TWIN_MIN_SIM,
               max_twins: int = MAX_TWINS) -> dict[str, list[dict]]:
    """For each chunk id, its twins: [{"doc": twin document id, "own": [terms], "other": [terms],
    "sim": cosine}], its own pairs first, then those found between other passages of its document;
    chunks of documents without twins are left out."""
    if len(entries) < 2:
        return {}
    V = np.vstack([np.asarray(e.vector, dtype=np.float32).ravel() for e in entries])
    n = np.linalg.norm(V, axis=1, keepdims=True)
    V = V / np.where(n > 0, n, 1.0)
    docs = np.array([e.doc_id for e in entries], dtype=object)
    sides: dict[int, _Side] = {}

    def side(i: int) -> _Side:
        if i not in sides:
            sides[i] = _Side(entries[i])
        return sides[i]

    out: dict[str, list[dict]] = {}
    for start in range(0, len(entries), _BLOCK):
        S = V[start:start + _BLOCK] @ V.T
        for r in range(S.shape[0]):
            i = start + r
            row = S[r]
            cand = np.flatnonzero(row >= min_sim)
            if cand.size <= 1:
                continue
            cand = cand[np.argsort(-row[cand])]
            best: dict[str, int] = {}  # the closest passage of each other document
            for j in cand:
                d = docs[j]
                if d == docs[i] or d in best:
                    continue
                best[d] = int(j)
            found = []
            for d, j in best.items():
                a, b = side(i), side(j)
                if a.lang != b.lang and a.numbers == b.numbers:
                    continue  # the same page in another language
                own, other = distinguishing(a, b), distinguishing(b, a)
                numeric = all(any(c.isdigit() for c in t) for t in own + other)
                if own and other and (not numeric or row[j] >= VERSION_TWIN_MIN_SIM):
                    found.append({"doc": str(d), "own": own, "other": other, "sim": round(float(row[j]), 4)})
                if len(found) >= max_twins:
                    break
            if found:
                out[entries[i].chunk_id] = found
    # twins are documents: a pair found between two of their passages holds for every passage of both (the
    # Ubuntu guide's other sections are about Ubuntu too), each passage keeping its closest pairs first
    by_doc: dict[str, dict[str, dict]] = {}
    for e in entries:
        for tw in out.get(e.chunk_id, ()):
            best = by_doc.setdefault(e.doc_id, {}).get(tw["doc"])
            if best is None or tw["sim"] > best["sim"]:
                by_doc[e.doc_id][tw["doc"]] = tw
    for e in entries:
        pairs = by_doc.get(e.doc_id)
        if not pairs:
            continue
        own = {tw["doc"]: tw for tw in out.get(e.chunk_id, ())}
        rest = sorted((tw for d, tw in pairs.items() if d not in own), key=lambda t: -t["sim"])
        out[e.chunk_id] = (list(own.values()) + rest)[:max_twins]
    return out


def twin_named(query: str, twins: list[dict] | None) -> dict | None:
    """The twin a question is about instead of this passage: the question names one of the twin's
    distinguishing terms and none of this passage's own. None when the question names no twin."""
    if not twins:
        return None
    q = set(_tokens(query))
    for tw in twins:
        other, own = set(tw.get("other") or ()), set(tw.get("own") or ())
        if q & other and not q & own:
            return tw
    return None


def refresh_twins(store) -> int:
    """Recompute the twins of every stored passage and write them into the passage features of the
    documents whose twins changed. Returns the number of documents rewritten."""
    exported = {}
    entries: list[PassageEntry] = []
    for rec in store.list_documents():
        exp = store.export_document(rec.id)
        if exp is None or not exp.chunks:
            continue
        exported[rec.id] = exp
        for ch, vec in zip(exp.chunks, exp.vectors):
            entries.append(PassageEntry(ch.id, rec.id, rec.title or "", ch.heading or "", rec.version or "",
                                        ch.text or "", vec))
    twins = find_twins(entries)
    from .models import Document

    rewritten = 0
    for doc_id, exp in exported.items():
        feats = [dict(f) if isinstance(f, dict) else {} for f in exp.features]
        changed = False
        for ch, f in zip(exp.chunks, feats):
            new = twins.get(ch.id)
            if f.get("twins") != new:
                changed = True
                if new:
                    f["twins"] = new
                else:
                    f.pop("twins", None)
        if not changed:
            continue
        r = exp.record
        doc = Document(id=r.id, title=r.title, text="", url=r.url, source_type=r.source_type, version=r.version,
                       status=r.status, updated_at=r.updated_at, path=r.source_path, content_hash=r.content_hash,
                       metadata=dict(r.metadata), readers=list(r.readers))
        store.upsert_document(doc, exp.chunks, exp.vectors, [f or None for f in feats], source_path=r.source_path)
        rewritten += 1
    log.debug("twins refreshed: %d passages with twins, %d documents rewritten", len(twins), rewritten)
    return rewritten
