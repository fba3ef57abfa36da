"""What a passage states in answer to a question, as comparable values: its numbers with their unit
("2000 h", "300 rpm") and, for a yes/no question, its yes or no. The gate compares them between
evidence passages (`gate.disagree`); they are computed once, from the sentence the answer quotes,
and kept in the audit record so that `replay` compares the same values without the passage text."""

from __future__ import annotations

import re

from . import text as T
from .normalize import fold

# "25.000 rpm", "1.000.000": a dot between groups of three is a thousands separator in French and
# German text (and in any text when there are two groups); in English "2.500 mm" stays 2.5.
_DOTTED = re.compile(r"(?<![\d.,])(\d{1,3}(?:\.\d{3})+)(?![\d.,]*\d)")
_AFFIRM = re.compile(r"\b(can|may|is allowed|are allowed|allowed|is permitted|permitted|is safe|safe to|rated for|"
                     r"supports?|peut|peuvent|autorise|autorisee|permis|possible)\b")


def _undot(text: str, english: bool) -> str:
    def sub(m: re.Match) -> str:
        groups = m.group(1).count(".")
        return m.group(1).replace(".", "") if groups > 1 or not english else m.group(1)

    return _DOTTED.sub(sub, text)


def numbers(sentence: str) -> list[str]:
    """The numbers of a sentence that have a unit, as "VALUE UNIT" (years and bare counts left out)."""
    english = T.language(sentence) == "en"
    text = re.sub(r"\btr\s?/\s?min\b", "rpm", _undot(sentence, english), flags=re.I)
    out = []
    bare = set()
    for value, unit, _ in T.quantities(text):
        if unit and unit != "year":
            v = f"{value:.6g}"
            if f"{v} {unit}" not in out:
                out.append(f"{v} {unit}")
        elif not unit:
            bare.add(value)
    # a count of something ("every 250 runs", "after 10,000 cycles"): the thing counted is the unit
    for m in _COUNT.finditer(fold(text)):
        noun = m.group("noun")
        value = _number(m.group("num"))
        if value in bare and noun not in T.STOP and noun not in _NOT_COUNTED:
            item = f"{value:.6g} {noun[:-1] if noun.endswith('s') and len(noun) > 3 else noun}"
            if item not in out:
                out.append(item)
    return out


_COUNT = re.compile(r"(?<![\w.,\-])(?P<num>\d{1,3}(?:[,\u202f\u00a0 ]\d{3})+|\d+)(?![.,]\d)\s+(?P<noun>[a-z]{3,})\b")
_NOT_COUNTED = {"and", "or", "to", "of", "the", "for", "with", "then", "et", "ou", "pour", "avec"}


def _number(s: str) -> float:
    return float(re.sub(r"[,\u202f\u00a0 ]", "", s))


def polarity(query: str, sentence: str) -> str | None:
    """For a yes/no question, "no" when the sentence negates a word of the question ("Never run the
    rotor ..."), "yes" when it affirms one with a modal ("The rotor can run ..."), else None."""
    if not T.is_polar(query):
        return None
    stems = {T.stem(t) for t in T.tokens(query) if t not in T.STOP and t not in T.QWORDS and len(t) > 2}
    toks = T.tokens(sentence)
    neg = [i for i, t in enumerate(toks) if T.NEG_RE.fullmatch(t)]
    hits = [i for i, t in enumerate(toks) if T.stem(t) in stems]
    if not hits:
        return None
    if any(0 < h - n <= 3 for n in neg for h in hits):
        return "no"
    if not neg and _AFFIRM.search(fold(sentence)):
        return "yes"
    return None


def stated_values(query: str, sentence: str | None) -> list[str]:
    """The values a quoted sentence states for `query`: its numbers with units, its yes or no, and
    the identifiers it names ("id:p-200"), so that values about two units are never compared. A
    sentence that names none of the question's identifiers but others states nothing for it."""
    if not sentence:
        return []
    ids = {i.lower() for i in T.identifiers(sentence)}
    asked = {i.lower() for i in T.identifiers(query)}
    if asked and ids and not (asked & ids):
        return []
    out = numbers(sentence)
    p = polarity(query, sentence)
    return out + ([p] if p else []) + (sorted(f"id:{i}" for i in ids) if out or p else [])
