"""Questions in another language than the library.

The embedder is multilingual, but domain terms often are not in its vocabulary ("consigner" is
French for lockout/tagout; a general-purpose model maps it to "consign"). A terminology base of
concepts across languages bridges them: the query keeps its words and gains the other languages'
terms for every concept it names. Lexical search and the judge's term features see the bridged
text; the dense search uses both the original and the bridged query.
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from .normalize import fold

DEFAULT_GLOSSARY = Path(__file__).parent / "glossary" / "maintenance.tsv"

_STOPWORDS = {
    "en": "the a an of to and is are do does i how what which when should must can for on with my need".split(),
    "fr": "le la les un une des du de et est sont je il faut comment quelle quel quels combien pour sur avec dois avant d l qu que se ne pas au aux".split(),
    "de": "der die das ein eine und ist sind ich wie welche wann muss soll kann für mit vor den dem des nicht".split(),
    "es": "el la los las un una de del y es son yo cómo qué cuál cuándo debo hay para con antes se no por".split(),
}


def detect_language(text: str) -> str | None:
    """The most likely of en/fr/de/es from stop words and accents, or None when unsure."""
    words = [w.strip("'’") for w in re.findall(r"[\w'’]+", text.lower())]
    words = [w.split("'")[-1].split("’")[-1] for w in words]
    if not words:
        return None
    counts = {lang: sum(w in set(sw) for w in words) for lang, sw in _STOPWORDS.items()}
    if re.search(r"[éèêàçù]", text.lower()):
        counts["fr"] += 1
    if re.search(r"[äöüß]", text.lower()):
        counts["de"] += 1
    if re.search(r"[ñ¿¡]", text.lower()):
        counts["es"] += 1
    best = max(counts, key=counts.get)
    ranked = sorted(counts.values(), reverse=True)
    if ranked[0] == 0 or ranked[0] == ranked[1]:
        return None
    return best


@dataclass
class Concept:
    terms: dict[str, list[str]] = field(default_factory=dict)  # language -> terms


@dataclass
class Glossary:
    concepts: list[Concept]

    @classmethod
    def load(cls, *paths: Path) -> "Glossary":
        concepts: list[Concept] = []
        for path in paths:
            with open(path, encoding="utf-8") as f:
                rows = [r for r in csv.reader(f, delimiter="\t") if r and not r[0].startswith("#")]
            if not rows:
                continue
            header = [h.strip() for h in rows[0]]
            for n, row in enumerate(rows[1:], start=2):
                if len(row) != len(header):
                    raise ValueError(f"{path}:{n}: expected {len(header)} tab-separated columns, got {len(row)}")
                concepts.append(Concept({lang: [t.strip() for t in cell.split(",") if t.strip()]
                                         for lang, cell in zip(header, row)}))
        return cls(concepts)

    def _matches(self, folded_query: str, term: str) -> bool:
        t = fold(term)
        if t.endswith("*"):
            return re.search(r"(?<![\w])" + re.escape(t[:-1]).replace(r"\ ", r"\s+") + r"\w*", folded_query) is not None
        return re.search(r"(?<![\w])" + re.escape(t).replace(r"\ ", r"\s+") + r"(?![\w])", folded_query) is not None

    def bridge_terms(self, query: str, source_language: str, target_language: str) -> list[str]:
        """The target language's terms for every concept the query names in its own language."""
        q = fold(query)
        out: list[str] = []
        for c in self.concepts:
            if any(self._matches(q, t) for t in c.terms.get(source_language, [])):
                out.extend(t.rstrip("*") for t in c.terms.get(target_language, [])[:2])
        return list(dict.fromkeys(out))


@lru_cache(maxsize=8)
def load_glossary(extra: str | None = None) -> Glossary:
    paths = [DEFAULT_GLOSSARY] + ([Path(extra)] if extra else [])
    return Glossary.load(*paths)


@dataclass
class BridgedQuery:
    original: str
    language: str | None
    added_terms: list[str]

    @property
    def text(self) -> str:
        if not self.added_terms:
            return self.original
        return f"{self.original} ({'; '.join(self.added_terms)})"

    @property
    def bridged(self) -> bool:
        return bool(self.added_terms)


def bridge(query: str, library_language: str = "en", glossary: Glossary | None = None) -> BridgedQuery:
    """Add the library language's terms to a question asked in another language."""
    lang = detect_language(query)
    if lang is None or lang == library_language:
        return BridgedQuery(query, lang, [])
    g = glossary or load_glossary()
    return BridgedQuery(query, lang, g.bridge_terms(query, lang, library_language))
