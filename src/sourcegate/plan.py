"""Questions that ask several things: split them into parts, and merge the parts' decisions.

`plan()` reads the structure of a question, without any model: coordinated equipment
identifiers ("the P-200 and the P-300", "le CR-5 et le CR-7") become one part per identifier,
and coordinated direct questions ("how often do I drain the tank and how often do I change its
oil?") one part per question, the subject of the first carried over to the next. Anything else,
including "and" inside a noun phrase ("lockout and tagout", "salt and water") and comparisons
("the difference between the P-200 and the P-300"), stays one part: the question as asked.

`merge()` turns the parts' statuses into the answer's status and the list of parts that no
passage answers. Both are pure.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable
from dataclasses import dataclass

from .gate import Status
from .normalize import fold

# More parts than this and the question is taken whole: each part costs one judging of its
# candidates, and a long list is better asked as a list.
MAX_PARTS = 4


@dataclass(frozen=True)
class Part:
    """One self-contained question. `subject` is the equipment identifier the part is about when it
    names one: its evidence must name it too, so no part is answered from another part's passage."""

    question: str
    subject: str | None = None


# An identifier: a letter first, then a digit somewhere, letters, digits and hyphens ("P-200",
# "CR-5", "AC-300", "E-47", "MS-200-45"). Ordinals and units ("2nd", "20g") start with a digit.
_IDENT_SHAPE = r"[A-Z][A-Za-z]{0,5}-?\d[A-Za-z0-9]*(?:-[A-Za-z0-9]+)*"
_WORD = r"[\w'’]+"

# What joins two coordinated subjects. "or" is left out: "the P-200 or the P-300" asks to choose.
_COORD = r"(?:,\s*(?:and|et|&)\s+|,\s*|\s+(?:and|et|&|as well as|ainsi que|plus)\s+)"
# Words that may repeat before each coordinated identifier without being shared with the first.
_DETERMINERS = {"the", "a", "an", "le", "la", "les", "l'", "l’", "du", "des", "de", "d'", "d’", "of", "for", "on",
                "pour", "sur", "au", "aux", "model", "modèle", "modele", "type"}
# Comparisons and choices are one question about several things: they stay whole.
_COMPARISON = re.compile(
    r"\b(between|compare[sd]?|comparing|comparison|difference|differences|differ|versus|vs\.?|than|same|common|"
    r"which one|which of|entre|comparer|comparaison|différence|différences|diffèrent|même|mêmes|commun|communs|"
    r"lequel|laquelle|lesquels|lesquelles|plutôt)\b", re.I)

_EN_AUX = (r"(?:do|does|did|is|are|was|were|can|could|should|must|may|might|will|would|has|have|had|need|shall)")
_EN_WH = r"(?:how|what|which|when|where|why|who|whose)"
_EN_SUBJ = r"(?:i|we|you|it|they|he|she|the|a|an|this|that|these|those|its|their|my|our|there)"
# A direct question in English: a wh-word then, within three words, an auxiliary ("how often do",
# "what torque is", "how much oil does"); or an auxiliary then its subject ("do I", "is the").
# "when it restarts" (no inversion) is a subordinate clause, not a question.
_EN_QUESTION = re.compile(
    rf"^(?:{_EN_WH}\b(?:\s+{_WORD}){{0,3}}?\s+(?:{_EN_AUX}\b|'s\b)|{_EN_WH}'s\b|{_EN_AUX}\s+{_EN_SUBJ}\b|"
    # "who supplies ...": "who" asks for the subject, so no auxiliary follows it.
    rf"who\s+\w+s\b)", re.I)
_FR_WH = (r"(?:quand|combien|comment|où|pourquoi|quels?|quelles?|que|qu['’]|qui|à quel(?:le)?s?|a quel(?:le)?s?|"
          r"tous les combien|en combien|au bout de combien|de combien|avec quel(?:le)?s?|dans quel(?:le)?s?)")
_FR_INVERSION = r"(?:\w+-(?:t-)?(?:il|elle|on|je|nous|vous|ils|elles)\b|est-ce\b|y a-t-il\b)"
# A direct question in French: a question word then an inversion within five words ("quand faut-il",
# "combien de graisse dois-je"), "quel(le) est/sont", or an inversion or "est-ce que" first.
_FR_QUESTION = re.compile(
    rf"^(?:{_FR_WH}(?:\s+{_WORD}){{0,5}}?\s+{_FR_INVERSION}|"
    rf"quel(?:le)?s?\s+(?:est|sont|était|doit|doivent)\b|{_FR_INVERSION})", re.I)
_CLAUSE_JOIN = re.compile(r"(?:\s*,?\s+(?:and|et|and then|then|puis|et puis)\s+|\s*;\s*)", re.I)
_WH_PAIR = re.compile(
    r"^(how often|how much|how many|how long|when|where|why|how|what|which|quand|combien|comment|où|pourquoi|"
    r"à quelle fréquence)\s+(?:and|et)\s+(how often|how much|how many|how long|when|where|why|how|what|which|"
    r"quand|combien|comment|où|pourquoi|à quelle fréquence)\s+(.+)$", re.I)


def _is_question(clause: str) -> bool:
    c = clause.strip().lstrip("¿¡\"'“«( ").strip()
    return bool(_EN_QUESTION.match(c) or _FR_QUESTION.match(c))


_QUESTION_START = re.compile(rf"^(?:{_EN_WH}|{_EN_AUX}|{_FR_WH}|{_FR_INVERSION})(?:\b|(?<=['’]))", re.I)


def _starts_question(clause: str) -> bool:
    """The first of coordinated questions only needs to open like one ("Quel taux d'oxygène est
    admis ..."): what follows the coordinator must read as a direct question on its own."""
    return bool(_QUESTION_START.match(clause.strip().lstrip("¿¡\"'“«( ")))


def _as_question(text: str, mark: str) -> str:
    t = text.strip().rstrip("?").rstrip()
    t = t[:1].upper() + t[1:]
    return f"{t}{mark}?"


def _question_mark(question: str) -> str:
    """French puts a space before '?', English does not: keep the asker's habit."""
    return " " if re.search(r"\s\?\s*$", question) else ""


def identifiers(text: str, known_ids: Collection[str] = ()) -> list[re.Match]:
    """Identifier matches in `text`, in order: the shape of a model number or code, or an
    identifier the library knows (any case: "cr-5" is the library's "CR-5")."""
    spans: list[re.Match] = list(re.finditer(rf"(?<![\w-]){_IDENT_SHAPE}(?![\w-])", text))
    known = sorted({k for k in known_ids if k and len(k) >= 2}, key=len, reverse=True)
    if known:
        alt = "|".join(re.escape(k) for k in known)
        for m in re.finditer(rf"(?<![\w-])(?:{alt})(?![\w-])", text, re.I):
            if not any(s.start() <= m.start() < s.end() or m.start() <= s.start() < m.end() for s in spans):
                spans.append(m)
    return sorted(spans, key=lambda m: m.start())


def _canonical(ident: str, known_ids: Collection[str]) -> str:
    folded = fold(ident)
    for k in known_ids:
        if fold(k) == folded:
            return k
    return ident


def _split_asks(question: str) -> list[str]:
    """Coordinated direct questions: "How often ... and how often ...?", "Combien ... et quand ...?",
    two questions in a row, and "How often and how much ...?"."""
    mark = _question_mark(question)
    sentences = [s for s in re.split(r"(?<=\?)\s+(?=\S)", question.strip()) if s.strip()]
    if len(sentences) > 1 and not all(s.rstrip().endswith("?") and len(s.split()) >= 3 for s in sentences):
        sentences = [question.strip()]
    asks: list[str] = []
    for n, sentence in enumerate(sentences):
        body = sentence.strip().rstrip("?").rstrip()
        if n:
            # "... ? And how much ...?": the conjunction only joined the two questions.
            body = re.sub(r"^(?:and|also|et|aussi|puis)\s+", "", body, flags=re.I)
        pair = _WH_PAIR.match(body)
        if pair:
            asks += [_as_question(f"{pair.group(1)} {pair.group(3)}", mark),
                     _as_question(f"{pair.group(2)} {pair.group(3)}", mark)]
            continue
        clauses: list[str] = []
        start = 0
        if _starts_question(body):
            for m in _CLAUSE_JOIN.finditer(body):
                rest = body[m.end():]
                if _is_question(rest) and len(body[start:m.start()].split()) >= 3:
                    clauses.append(body[start:m.start()])
                    start = m.end()
        clauses.append(body[start:])
        if len(clauses) == 1:
            asks.append(sentence.strip() if not n else _as_question(body, mark))
        else:
            asks += [_as_question(c, mark) for c in clauses]
    return asks


_PARTICIPLE = re.compile(r"^\w+(?:ed|ing)$", re.I)
_NP_STOP = re.compile(r"^(?:on|in|at|of|for|with|to|from|by|after|before|when|if|and|or|is|are|be|"
                      r"dans|sur|pour|avec|après|avant|quand|si|et|ou|est|sont|\w+-(?:t-)?(?:il|on|je|elle))$", re.I)
_NOT_A_NOUN = re.compile(r"^(?:combien|quel|quelle|quels|quelles|much|many|often|long|fois)$", re.I)


def _antecedent(ask: str, known_ids: Collection[str]) -> str | None:
    """What a later question's "it" or "its" most likely refers to: the identifiers of the first
    question, as written ("the AC-300", "the P-200 and the P-300"), else its first noun phrase."""
    ids = identifiers(ask, known_ids)
    if ids:
        first, last = ids[0], ids[-1]
        lead = re.search(r"(?:\b(?:the|le|la|les)\s+|\bl['’])$", ask[: first.start()], re.I)
        start = lead.start() if lead else first.start()
        # Coordinated identifiers travel together (the planner splits them afterwards).
        gap_ok = all(re.fullmatch(rf"{_COORD}(?:(?:\w+|l['’])\s+)?", ask[a.end():b.start()], re.I)
                     for a, b in zip(ids, ids[1:]))
        return ask[start:(last if gap_ok else first).end()]
    m = next((m for m in re.finditer(r"\b(the|a|an|each|every|le|la|les|un|une|chaque)\s+(?=((?:[\w-]+\s+){0,3}[\w-]+))",
                                     ask, re.I) if not _NOT_A_NOUN.match(m.group(2).split()[0])), None)
    if not m:
        return None
    words: list[str] = []
    for w in m.group(2).split():
        # "a sand filter backwashed": a participle after the noun ends it ("bearing" as a noun stays).
        if _NP_STOP.match(w) or (words and _PARTICIPLE.match(w)):
            break
        words.append(w)
    if not words:
        return None
    det = m.group(1).lower()
    det = {"a": "the", "an": "the", "each": "the", "every": "the", "un": "le", "une": "la", "chaque": "le"}.get(det, det)
    return f"{det} {' '.join(words)}"


_EN_POSSESSIVE = re.compile(r"\b(its|their)\b", re.I)


def _carry_subject(asks: list[str], known_ids: Collection[str]) -> list[str]:
    """A later question that names no identifier is about the first one's subject: "its oil" becomes
    "the AC-300's oil"; otherwise the subject is added in brackets ("Quand faut-il la graisser (la
    P-200) ?"), so that each part can be retrieved and judged on its own."""
    if len(asks) < 2:
        return asks
    antecedent = _antecedent(asks[0], known_ids)
    if not antecedent:
        return asks
    out = [asks[0]]
    for ask in asks[1:]:
        if identifiers(ask, known_ids):
            out.append(ask)
            continue
        if _EN_POSSESSIVE.search(ask):
            out.append(_EN_POSSESSIVE.sub(lambda m: f"{antecedent}'s", ask, count=1))
            continue
        body, q = re.match(r"^(.*?)(\s*\?)?\s*$", ask, re.S).groups()
        out.append(f"{body} ({antecedent}){q or ''}")
    return out


def _split_subjects(question: str, known_ids: Collection[str]) -> list[Part]:
    """One part per coordinated identifier: "the P-200 and the P-300 pumps" -> "the P-200 pumps",
    "the P-300 pumps"; "of the CR-5 and of the CR-7" -> "of the CR-5", "of the CR-7"."""
    ids = identifiers(question, known_ids)
    whole = [Part(question, _canonical(ids[0].group(0), known_ids) if len({fold(m.group(0)) for m in ids}) == 1 else None)]
    if len(ids) < 2 or _COMPARISON.search(question):
        return whole
    # The longest run of identifiers joined by a coordinator, each optionally after the same words
    # that precede the first one ("of the CR-5 and of the CR-7") or a determiner ("and the P-300").
    best: list[re.Match] = []
    run: list[re.Match] = [ids[0]]
    shared_after = ""
    for prev, cur in zip(ids, ids[1:]):
        gap = question[prev.end():cur.start()]
        lead_words = question[: run[0].start()].split()
        m = re.fullmatch(rf"((?:\s+[\w-]+){{0,2}}?){_COORD}(.*)", gap, re.I | re.S)
        ok = False
        if m:
            trailing, prefix = m.group(1).strip(), m.group(2).strip()
            pwords = prefix.split()
            repeats = bool(pwords) and [fold(w) for w in lead_words[-len(pwords):]] == [fold(w) for w in pwords]
            dets = all(fold(w) in _DETERMINERS for w in pwords)
            ok = (not prefix or repeats or dets) and len(pwords) <= 4
            if ok and trailing:
                # "the P-200 pump and the P-300 pump": the head noun must follow the last one too.
                ok = (len(run) == 1 or shared_after == trailing)
                shared_after = trailing
        if ok:
            run.append(cur)
        else:
            if len(run) > len(best):
                best = run
            run, shared_after = [cur], ""
    if len(run) > len(best):
        best = run
    if len(best) < 2:
        return whole
    if shared_after and not re.match(rf"\s+{re.escape(shared_after)}\b", question[best[-1].end():], re.I):
        return whole
    before = re.sub(r"\b(both|les deux|tous les deux|each of|chacun des|chacune des)\s+(?=(?:\S+\s+)?$)", "",
                    question[: best[0].start()], flags=re.I)
    after = question[best[-1].end():]
    parts = []
    for m in best:
        name = _canonical(m.group(0), known_ids)
        parts.append(Part(before + m.group(0) + after, name))
    return parts


def plan(question: str, known_ids: Iterable[str] = ()) -> list[Part]:
    """The parts of `question`: one self-contained question each, in the order asked. A question
    that asks one thing comes back whole and unchanged, as a single part."""
    known = tuple(dict.fromkeys(k for k in known_ids if k))
    q = re.sub(r"\s+", " ", question).strip()
    if not q:
        return [Part(question)]
    asks = _carry_subject(_split_asks(q), known)
    parts: list[Part] = []
    for ask in asks:
        parts += _split_subjects(ask, known)
    seen: set[str] = set()
    unique = []
    for p in parts:
        key = fold(p.question)
        if key not in seen:
            seen.add(key)
            unique.append(p)
    if len(unique) < 2 or len(unique) > MAX_PARTS:
        return [Part(question, _split_subjects(q, known)[0].subject if len(unique) < 2 else None)]
    return unique


def may_have_parts(question: str) -> bool:
    """A cheap test before `plan()`: without a coordinator or a second question there is one part."""
    return bool(re.search(r"\b(and|et|plus|then|puis|ainsi que|as well as)\b|[,;&]|\?\s*\S", question, re.I))


def library_identifiers(texts: Iterable[str]) -> set[str]:
    """The identifiers named in the library's titles, document ids and paths."""
    out: set[str] = set()
    for t in texts:
        for m in re.finditer(rf"(?<![\w-]){_IDENT_SHAPE}(?![\w-])", t or ""):
            out.add(m.group(0))
    return out


def subject_pattern(subject: str) -> re.Pattern:
    """Matches `subject` as written in a passage: any case, with or without its hyphen ("CR-5",
    "CR5", "cr 5"), but not inside a longer number ("CR-50") or code ("XCR-5")."""
    # Runs of letters and of digits, each joined by an optional hyphen, space or underscore.
    pieces = re.findall(r"[a-z]+|\d+", fold(subject))
    body = r"[-\s_]?".join(re.escape(p) for p in pieces)
    return re.compile(rf"(?<![a-z0-9]){body}(?![0-9])", re.I)


def names_subject(subject: str, *texts: str | None) -> bool:
    pattern = subject_pattern(subject)
    return any(t and pattern.search(fold(t)) for t in texts)


@dataclass(frozen=True)
class PartDecision:
    part: Part
    status: Status


@dataclass(frozen=True)
class Merged:
    status: Status
    # The parts no passage answers, as their questions, in the order asked.
    missing: list[str]
    # The parts whose premise the documents contradict.
    conflicting: list[str]


def merge(decisions: list[PartDecision]) -> Merged:
    """The answer's status from its parts': a premise conflict on any part is reported as such;
    otherwise any answered part gives an answer, with the unanswered parts in `missing`; a
    question none of whose parts is answered is `insufficient_evidence`. A question of one part
    keeps that part's status and names nothing missing (its status says it all)."""
    if not decisions:
        return Merged(Status.INSUFFICIENT, [], [])
    conflicting = [d.part.question for d in decisions if d.status is Status.CONFLICT]
    if len(decisions) == 1:
        return Merged(decisions[0].status, [], conflicting)
    missing = [d.part.question for d in decisions if d.status is Status.INSUFFICIENT]
    if conflicting:
        status = Status.CONFLICT
    elif any(d.status is Status.ANSWER for d in decisions):
        status = Status.ANSWER
    else:
        status = Status.INSUFFICIENT
    return Merged(status, missing, conflicting)
