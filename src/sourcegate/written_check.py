"""Whether a model-written sentence says what the passage it cites says.

Citations, numbers and identifiers are checked in `llm_writer`; this module adds what a sentence
can get wrong while copying every number right:

- **entailment**: the reader's NLI head must find the sentence entailed by one sentence (or two
  neighbouring sentences) of a passage it cites. It is the same reader the local judge loads
  (`judges.local.reader.load_reader`), not a second model, and all sentences of an answer go
  through one batched `Reader.nli` call. It is applied where the reader can read the pair: a
  sentence in one of `nli_languages`, and its passage in the same language unless
  `nli_crosslingual` is set;
- **polarity**: a sentence that grants ("Yes, you can X", "Oui, vous pouvez X") is rejected when a
  related sentence of the passage forbids or restricts ("X must not", "never", "do not", "only",
  "interdit", "ne ... jamais", "ne pas"); a sentence that denies ("X is not required", "never")
  needs a related sentence of the passage that denies too. "Related" is a cosine similarity of the
  library's multilingual embeddings, so the test works across languages;
- **content**: a sentence must restate something of its passage that the question does not already
  say (a number, a word of the passage, or, across languages, a sentence of the passage it is
  close to), and name no proper noun or acronym the passage lacks; an answer to "how much / how
  often / combien" must state a quantity.

Every threshold is a setting (`CheckThresholds`, `LLM_WRITER_*`), fitted on hand-written
development triples by `python bench/bench_writer.py --fit-check`, to be re-run when the reader's
weights change.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from .answer import polar_verdict, sentences
from .crosslingual import detect_language, load_glossary
from .models import Candidate
from .normalize import fold


@dataclass(frozen=True)
class CheckThresholds:
    entail_min: float = 0.0  # NLI entailment probability, best passage window (0: off; fitted for the shipped reader)
    related_min: float = 0.45  # embedding cosine: a passage sentence about the same thing
    support_min: float = 0.4  # embedding cosine: across languages, a sentence close to the passage
    nli_crosslingual: bool = False  # ask the NLI head about pairs in two languages
    nli_languages: tuple[str, ...] = ("en",)  # the languages the NLI head was trained on
    overlap_min: float = 0.5  # same language: share of the sentence's new content words found in its passage


# -- words ----------------------------------------------------------------------------------------

_OPENS_YES = re.compile(r"^\W*(yes|oui)\b", re.I)
_OPENS_NO = re.compile(r"^\W*(no|non)\b", re.I)

_WORD = re.compile(r"[\w'’-]+")
# A sentence that grants: "yes", "you can", "it is safe", "oui", "vous pouvez".
_GRANT = re.compile(
    r"^\s*(yes|oui)\b|\b(can|may|could|allowed|permitted|safe to|fine to|okay to|ok to|is possible|"
    r"pouvez|peut|peuvent|pouvons|autoris\w*|permis|possible de|convient|sans danger)\b", re.I)
# Denial and prohibition: "not", "never", "no", "without", "avoid", "ne ... pas", "jamais", "interdit".
_DENY = re.compile(
    r"\b(not|never|no|none|nothing|without|neither|nor|cannot|can't|don't|doesn't|isn't|aren't|mustn't|"
    r"shouldn't|avoid\w*|prohibit\w*|forbid\w*|"
    r"ne|n'|n’|pas|jamais|aucun\w*|sans|interdi\w*|d[ée]fendu\w*|[ée]viter|[ée]vitez)\b", re.I)
# Requirement and restriction: "must", "required", "mandatory", "only", "obligatoire", "exigé".
_RESTRICT = re.compile(
    r"\b(must|shall|required?|requires|requiring|mandatory|compulsory|only|need to|needs to|have to|has to|"
    r"doit|doivent|devez|obligatoire\w*|exig\w*|requis\w*|n[ée]cessaire\w*|il faut|uniquement|seulement)\b", re.I)
# What makes a grant conditional ("Yes, but the flow must read ..."): the restriction words less
# "only", which a grant may repeat from the question ("with only a gas monitor").
_CONDITION = re.compile(
    r"\b(must|shall|required?|requires|requiring|mandatory|compulsory|need to|needs to|have to|has to|"
    r"doit|doivent|devez|obligatoire\w*|exig\w*|requis\w*|n[ée]cessaire\w*|il faut)\b", re.I)
# "as many times as needed", "si nécessaire": a condition on the reader's judgement, no requirement.
_AS_NEEDED = re.compile(r"\b(as|if|when|que|qu'|qu’|si)\s+(needed|required|necessary|n[ée]cessaire)\b", re.I)
# Words that name a document or its parts: a sentence made of them speaks about the document, not
# about what it says ("Follow the steps below", "voir la procédure").
_DOCUMENT_WORDS = set("""
document documents documentation procedure procedures passage passages section sections step steps instruction
instructions detail details information informations below above following follows topic manual guide chapter
procedure procedures etape etapes suivant suivante suivants suivantes ci-dessous ci-dessus detail details sujet
manuel chapitre rubrique consigne consignes
""".split())
# "by the plant manager", "par le directeur": who did or does something. Across languages it cannot
# be compared; in the passage's language, every content word of it must be in the passage.
_AGENT = re.compile(r"\b(?:by|par)\s+(?:the|a|an|le|la|les|l'|l’|un|une|des|du)\s*([^\W\d][\w'’-]*(?:\s+[^\W\d][\w'’-]*){0,3})",
                    re.I)
_LEADING_YES_NO = re.compile(r"^\s*(yes|no|oui|non)\b[\s,.;:!-]*", re.I)
# Questions that ask for a quantity or a frequency: the answer must state one.
_QUANTITY_QUESTION = re.compile(
    r"\b(how (often|much|many|long|far|deep|frequently|hot|cold|high|low)|what (interval|torque|quantity|amount|"
    r"rate|pressure|temperature|depth|size|level)|at what (interval|rate|pressure|temperature)|combien|"
    r"quelle? (quantit[ée]|fr[ée]quence|dur[ée]e|couple|pression|temp[ée]rature|profondeur|d[ée]bit)|"
    r"tous les combien|[àa] quelle fr[ée]quence)\b", re.I)
_QUANTITY_WORDS = re.compile(
    r"\d|\b(once|twice|daily|weekly|monthly|yearly|annually|hourly|every|each (day|week|month|year)|"
    r"two|three|four|five|six|seven|eight|nine|ten|twelve|half|"
    r"une fois|deux fois|quotidien\w*|hebdomadaire\w*|mensuel\w*|annuel\w*|chaque|tous les|toutes les|"
    r"deux|trois|quatre|cinq|six|sept|huit|neuf|dix|douze|demi)\b", re.I)
# Identifiers hold digits that are no quantity ("CL-3", "P-200").
_IDENT_LIKE = re.compile(r"\b[A-Za-z]+[A-Za-z0-9]*(?:-[A-Za-z0-9]+)+\b")
# Capitalised words inside a sentence (names, brands) and acronyms: they do not translate.
_PROPER = re.compile(r"(?<![\w'’-])(?:[A-Z][a-z]+(?:\s+[A-Z][a-z]+)*|[A-Z]{2,}[a-z]?)\b")
_STOP = set("""
a an the and or but if then than so of to in on at by for with from into over under about as is are was were be
been being do does did have has had i me my we our you your he she it its they them their this that these those
there here what which who whom whose when where why how not no can could shall should will would may might must
need needs also any all some each every such only very just up out off more most both few many much one get use
used per yes
le la les un une des du de d l au aux et ou mais si ce cet cette ces que qui quoi quel quelle quels quelles dont
quand comment pourquoi combien est sont etre ete avoir a ont je tu il elle nous vous ils elles on mon ma mes son
sa ses notre nos votre vos leur leurs en y ne pas plus pour par sur sous dans avec sans entre vers faut faire fait
doit doivent peut peuvent dois oui non s n qu c
""".split())


@lru_cache(maxsize=8192)
def _stems(text: str) -> frozenset[str]:
    """Content words of `text`, folded and crudely stemmed (the first six letters), digits kept whole."""
    out = set()
    for w in _WORD.findall(fold(text)):
        w = w.strip("'’-")
        w = re.split(r"['’]", w)[-1]
        if not w or w in _STOP or (len(w) < 3 and not any(c.isdigit() for c in w)):
            continue
        if w in _DOCUMENT_WORDS:
            continue
        out.add(w if any(c.isdigit() for c in w) else w[:6])
    return frozenset(out)


def _has_words(folded_text: str, words: str) -> bool:
    return re.search(r"(?<!\w)" + re.escape(fold(words)).replace(r"\ ", r"\s+") + r"(?!\w)", folded_text) is not None


def grants(body: str) -> bool:
    """The sentence grants, allows or affirms ("Yes, ...", "you can", "vous pouvez") without a
    condition of its own: it denies, requires and restricts nothing."""
    rest = _AS_NEEDED.sub(" ", _LEADING_YES_NO.sub("", body))
    return bool(_GRANT.search(body)) and not denies(body) and not _CONDITION.search(rest)


def denies(body: str) -> bool:
    """The sentence denies or forbids, not counting a leading "No," that only answers the question."""
    return bool(_DENY.search(_LEADING_YES_NO.sub("", body)))


def restricts(text: str) -> bool:
    return bool(_DENY.search(text) or _RESTRICT.search(text))


@lru_cache(maxsize=8192)
def language_of(text: str, default: str = "en") -> str:
    return detect_language(text) or default


# -- the check ------------------------------------------------------------------------------------

@dataclass
class SentenceItem:
    body: str  # the sentence without its citations
    cited: list[Candidate]
    short: str  # how a message quotes it


class SourceCheck:
    """Entailment, polarity and content of each sentence against the passages it cites.

    `reader` is the local judge's reader (for its NLI head), `embedder` the library's. Either may be
    None: the tests that need it are then skipped, and the others still run. Results are cached per
    instance, so the sentences checked while an answer streams are not read twice."""

    def __init__(self, reader=None, embedder=None, thresholds: CheckThresholds | None = None,
                 question: str = "", premise: str | None = None):
        self.reader = reader
        self.embedder = embedder
        self.t = thresholds or CheckThresholds()
        self.question = question or ""
        self.premise = premise
        self._passage_sentences: dict[str, list[str]] = {}
        self._vectors: dict[str, Any] = {}
        self._nli: dict[tuple[str, str], float] = {}
        self._bridges: dict[tuple[str, str, str], str] = {}

    # passages are read once per check
    def _sentences_of(self, c: Candidate) -> list[str]:
        if c.id not in self._passage_sentences:
            ss = [s for s in sentences(c.text) if len(s.split()) >= 3]
            self._passage_sentences[c.id] = ss or [c.text]
        return self._passage_sentences[c.id]

    def _embed(self, texts: list[str]):
        import numpy as np

        missing = [t for t in dict.fromkeys(texts) if t not in self._vectors]
        if missing:
            for t, v in zip(missing, self.embedder.embed(missing)):
                self._vectors[t] = np.asarray(v, dtype=np.float32)
        return np.stack([self._vectors[t] for t in texts]) if texts else np.zeros((0, 1), dtype=np.float32)

    def _premises(self, c: Candidate) -> list[str]:
        """NLI premises: each sentence of the passage and each pair of neighbours, after the title,
        which names the subject ("Pump P-200") that a sentence of the passage may leave implicit."""
        ss = self._sentences_of(c)
        windows = ss + [f"{a} {b}" for a, b in zip(ss, ss[1:])]
        return [f"{c.title}. {w}" if c.title else w for w in windows]

    def _bridged(self, text: str, cited: list[Candidate]) -> str:
        """`text` with the terminology base's terms, in the passages' language, for every concept it
        names in its own ("consignation" -> "lockout, tagout"): the multilingual embeddings miss
        domain terms, and words can be compared once bridged."""
        lang = language_of(text)
        target = language_of(cited[0].text) if cited else "en"
        if lang == target:
            return text
        key = (text, lang, target)
        if key not in self._bridges:
            try:
                terms = load_glossary().bridge_terms(text, lang, target)
            except Exception:  # a broken glossary costs the bridge, not the check
                terms = []
            self._bridges[key] = f"{text} ({'; '.join(terms)})" if terms else text
        return self._bridges[key]

    def _same_language(self, body: str, cited: list[Candidate]) -> bool:
        lang = language_of(body)
        return any(language_of(c.text) == lang for c in cited)

    def entailment(self, items: list[SentenceItem]) -> list[float | None]:
        """The best entailment probability of each sentence over the windows of its passages; None
        where the NLI head is not asked (no reader, or two languages without `nli_crosslingual`)."""
        if self.reader is None:
            return [None] * len(items)
        asked: list[list[tuple[str, str]]] = []
        for it in items:
            if (language_of(it.body) not in self.t.nli_languages
                    or (not self.t.nli_crosslingual and not self._same_language(it.body, it.cited))):
                asked.append([])
                continue
            asked.append([(p, it.body) for c in it.cited for p in self._premises(c)])
        todo = list(dict.fromkeys(pair for pairs in asked for pair in pairs if pair not in self._nli))
        if todo:
            probs = self.reader.nli(todo)  # one batch for every sentence of the answer
            for pair, p in zip(todo, probs):
                self._nli[pair] = float(p[0])
        return [max(self._nli[p] for p in pairs) if pairs else None for pairs in asked]

    def _related(self, body: str, cited: list[Candidate]) -> list[tuple[float, str]]:
        """(cosine, passage sentence) for every sentence of the cited passages."""
        if self.embedder is None:
            return []
        ss = [s for c in cited for s in self._sentences_of(c)]
        sims = self._embed(ss) @ self._embed([self._bridged(body, cited)])[0]
        return [(float(x), s) for x, s in zip(sims, ss)]

    def polarity(self, body: str, cited: list[Candidate]) -> tuple[str, str] | None:
        """(code, message) when the sentence turns its passage around, else None."""
        # The passage's sentences about the same thing: those sharing two content words with it
        # (across languages, through the terminology base), those its embedding is close to, and in
        # any case the closest one.
        words = _stems(_DENY.sub(" ", _GRANT.sub(" ", self._bridged(body, cited))))
        near = [s for c in cited for s in self._sentences_of(c) if len(words & _stems(s)) >= 2]
        if self.embedder is not None:
            related = sorted(self._related(body, cited), reverse=True)
            near += [s for k, (x, s) in enumerate(related) if x >= self.t.related_min or k == 0]
        elif not self._same_language(body, cited) and not near:
            return None
        if grants(body):
            against = [s for s in near if restricts(s)]
            if against:
                return ("reversed_polarity", f"grants what the cited passage forbids or restricts: {against[0][:80]!r}")
        elif denies(body):
            if not any(_DENY.search(s) for s in near):
                return ("reversed_polarity", "denies what no related sentence of the cited passage denies")
        return None

    def content(self, body: str, cited: list[Candidate]) -> tuple[str, str] | None:
        """(code, message) when the sentence restates nothing of its passage beyond the question."""
        passage_text = " ".join(c.title + " " + c.text for c in cited)
        names = [m.group() for m in _PROPER.finditer(body)
                 if not re.search(r"(^|[:.!?;]|^\s*\d+[.)])\s*$", body[: m.start()]) or " " in m.group()]
        missing = [n for n in names if not _has_words(fold(passage_text), n) and not _has_words(fold(self.question), n)
                   and not _LEADING_YES_NO.fullmatch(n)]
        if missing:
            return ("name_not_in_source", f"{missing[0]!r} is not in the cited passage")
        same = self._same_language(body, cited)
        passage_words = _stems(passage_text)
        if same:
            for m in _AGENT.finditer(body):
                unknown = _stems(m.group(1)) - passage_words
                if unknown:
                    return ("name_not_in_source", f"{m.group(0)!r}: {sorted(unknown)[0]!r} is not in the cited passage")
        given = _stems(self._bridged(self.question, cited)) | _stems(self._bridged(self.premise or "", cited))
        new = _stems(self._bridged(body, cited)) - given
        if same and new and self.t.overlap_min > 0:
            share = len(new & passage_words) / len(new)
            if share < self.t.overlap_min:
                return ("restates_nothing", f"{share:.0%} of its words beyond the question are in the cited passage "
                                            f"(< {self.t.overlap_min:.0%})")
        if new & passage_words:
            return None
        if not same:
            if self.embedder is None:
                return None  # across languages words cannot be compared, and nothing else can say
            # A sentence close to one of the passage's restates something of it.
            best = max((x for x, _ in self._related(body, cited)), default=0.0)
            if best >= self.t.support_min and new:
                return None
        return ("restates_nothing", "restates nothing of the cited passage that the question does not already say")

    def problems(self, items: list[SentenceItem]) -> list[list[tuple[str, str]]]:
        """Faults of each sentence, as (code, message); the NLI is asked once for all of them."""
        entail = self.entailment(items)
        out = []
        for it, e in zip(items, entail):
            found = []
            for test in (self.polarity, self.content):
                fault = test(it.body, it.cited)
                if fault:
                    found.append(fault)
            if e is not None and e < self.t.entail_min:
                found.append(("not_entailed", f"not entailed by the cited passage (NLI {e:.2f} < {self.t.entail_min}): "
                                              f"{it.short!r}"))
            out.append(found)
        return out

    def answer_problems(self, bodies: list[str], passages: list[Candidate] | None = None) -> list[tuple[str, str]]:
        """Faults of the answer as a whole: a question asking for a quantity answered without one;
        a yes/no question answered Yes where the passages settle it No, or the reverse (the
        extractive writer's `polar_verdict`, so both writers say the same)."""
        if self.premise is None and _QUANTITY_QUESTION.search(self.question) \
                and not any(_QUANTITY_WORDS.search(_IDENT_LIKE.sub(" ", b)) for b in bodies):
            return [("no_quantity", "the question asks for a quantity and the answer states none")]
        if passages and bodies and self.premise is None and not any(c.gate_reason for c in passages
                                                                     if c.gate_reason != "evidence"):
            verdict = polar_verdict(self.question, passages)
            said = "yes" if _OPENS_YES.match(bodies[0]) else ("no" if _OPENS_NO.match(bodies[0]) else None)
            if verdict is not None and said is not None:
                settled = "no" if verdict[0] in ("No", "Non") else "yes"
                if said != settled:
                    return [("reversed_yes_no", f"answers {said} where the passages settle it {settled}: "
                                                f"{verdict[2][:80]!r}")]
        return []
