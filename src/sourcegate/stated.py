"""What a passage states in answer to a question, as comparable values: its numbers with their unit
("2000 h", "300 rpm") and, for a yes/no question, its yes or no. The gate compares them between
evidence passages (`gate.disagree`); they are computed once, from the sentence the answer quotes,
and kept in the audit record so that `replay` compares the same values without the passage text."""

from __future__ import annotations

import re

from . import text as T
from .text import stated_numbers as numbers  # noqa: F401 (part of this module's interface)
from .normalize import fold

_AFFIRM = re.compile(r"\b(can|may|is allowed|are allowed|allowed|is permitted|permitted|is safe|safe to|rated for|"
                     r"supports?|peut|peuvent|autorise|autorisee|permis|possible)\b")


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
