"""A unit the library lacks: a question about a unit (a model, a part, a machine) that no passage found
names, while passages about other units (their title or heading names one) were found, is not answered
from those passages.

"How often should I grease pump XJ-9?" on a library of pumps P-200 and P-300 finds the P-200 and P-300
procedures: they are about other units, whatever the shape of the name asked (letters and digits
"XJ-9", a model name "Flowmax 3000", a French question). Pure functions of the question and the
candidates' text; the service turns them into the gate's `subject_named` flags and a note in the answer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable

from . import text as T
from .normalize import fold

# A model name: a capitalised word and a number that belongs to it ("Flowmax 3000", "Pixhawk 6X"); not a
# document part ("Section 4", "Rev 2", "Step 3"), a version or a quantity.
_MODEL = re.compile(r"(?<![\w-])([A-Z][a-zA-Z]{2,})[ -]((?=[A-Za-z]*\d)[A-Za-z0-9]{1,6}\+?)(?![\w.,-]*\d)")
_NOT_UNIT = set("""section sections chapter chapitre page pages step steps etape table tableau figure rev revision
version versions release level niveau class classe type grade phase stage part partie item article annex annexe
appendix point option mode zone line ligne row column colonne question model modele windows python java php
iso en nf din ieee rfc iec cve ubuntu debian rhel centos""".split())


@dataclass(frozen=True)
class AbsentUnit:
    asked: list[str]  # the units the question names, as written
    covered: list[str]  # the units the passages found name instead


def _key(s: str) -> str:
    return re.sub(r"[\s\-_./]", "", fold(s)).upper()


# Versions and revisions are not units ("v2", "rev3", "r12", "2.0"): the version logic reads them.
_VERSION = re.compile(r"^(v|r|rev|ver|version)?\d+([.-]\d+)*$", re.I)


def asked_units(query: str) -> list[str]:
    """The units a question names: codes mixing letters and digits ("XJ-9", "P200") and model names
    ("Flowmax 3000"), as written."""
    out: list[str] = []
    out += [tok for tok in T.code_tokens(query) if not _VERSION.match(tok)]
    for m in _MODEL.finditer(query or ""):
        if fold(m.group(1)) in _NOT_UNIT:
            continue
        out = [u for u in out if _key(u) != _key(m.group(2))] + [m.group(0)]
    return list(dict.fromkeys(out))


def _names(unit: str, text: str) -> bool:
    """Whether a text names the unit: the code with or without separators ("XJ-9", "XJ9", "xj 9"); a
    model name by its name word alone (the number may be a version the text does not repeat)."""
    m = _MODEL.fullmatch(unit)
    if m:
        return re.search(r"(?<!\w)" + re.escape(fold(m.group(1))) + r"(?!\w)", fold(text)) is not None
    parts = re.findall(r"[A-Za-z]+|\d+", unit)
    pattern = r"(?<![a-z0-9])" + r"[\s\-_./]?".join(re.escape(fold(x)) for x in parts) + r"(?![a-z0-9])"
    return re.search(pattern, fold(text)) is not None


def absent_unit(query: str, passages: Iterable[tuple[str, str]], also: Iterable[str] = ()) -> AbsentUnit | None:
    """When the question names units, none of the passages (title, text) names any of them, and some
    passages' titles name other units: which were asked and which the passages cover. None otherwise. `also`: more text
    that counts as naming a unit (the documents' ids and paths), not listed among those covered."""
    asked = asked_units(query)
    if not asked:
        return None
    texts = list(passages)
    if any(_names(u, t) for u in asked for t in [f"{title}\n{text}" for title, text in texts] + list(also)):
        return None
    # the units the documents are about: those their titles and headings name (a code in a passage's body,
    # a part number or a reference, does not make the passage about another unit)
    in_titles = _units_named([title for title, _ in texts])
    if not in_titles:
        return None
    return AbsentUnit(asked, in_titles[:6])


def _units_named(texts: list[str]) -> list[str]:
    """Codes the texts name, as first written, the most often named first."""
    seen: dict[str, list] = {}
    for t in texts:
        for tok in T.code_tokens(t):
            if not _VERSION.match(tok):
                seen.setdefault(_key(tok), [tok, 0])[1] += 1
    return [tok for tok, _ in sorted(seen.values(), key=lambda x: -x[1])]


def names_another_unit(title: str, text: str = "") -> bool:
    """Whether a passage is about a unit: its title or heading names one (a code mixing letters and
    digits). `text` is not read: a body that cites a part number is not about that part."""
    return bool(_units_named([title]))


def absent_note(a: AbsentUnit, french: bool = False) -> str:
    asked = ", ".join(a.asked)
    covered = ", ".join(a.covered)
    if french:
        return f"Aucun document trouvé ne parle de {asked} ; ceux trouvés portent sur : {covered}."
    return f"No document found names {asked}; the documents found are about: {covered}."

