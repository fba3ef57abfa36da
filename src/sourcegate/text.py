"""Text analysis shared by retrieval, the judge, the gate, the planner and the answer writer: sentences,
tokens, light stemming, a query's terms and their overlap with a passage, numbers with units and the
values a sentence states, identifiers, question types and polarity, language. Pure Python, no model,
multilingual where it is cheap (EN, FR, DE, ES, IT for the common words). Nothing here imports another
module of the package but `normalize`."""

from __future__ import annotations

import re
import zlib
from functools import lru_cache

from . import normalize

# --------------------------------------------------------------------------------------------
# Sentences

_BULLET = re.compile(r"^\s*(?:[-*\u2022\u25aa\u25cf>]+|\(?\d{1,2}[.)]|\(?[a-z][.)])\s+")
_SENT_SPLIT = re.compile(
    r"(?<=[.!?;])[\"'\u201d\u00bb)\]]*\s+(?=[\"'\u201c\u00ab(\[]?[A-Z0-9\u00c0-\u00dd\u00bf\u00a1\[<#])"
)


def split_sentences(text: str, max_sentences: int = 14, min_chars: int = 25) -> list[str]:
    """Split a passage into sentences (lines first, then punctuation). Short fragments are merged
    with their neighbour; at most `max_sentences` are returned (adjacent ones merged)."""
    out: list[str] = []
    for line in re.split(r"\n+|\r+", text or ""):
        line = line.strip()
        if not line:
            continue
        for s in _SENT_SPLIT.split(line):
            s = s.strip()
            if s:
                out.append(s)
    if not out:
        return [text.strip() or "."]
    merged: list[str] = []
    for s in out:
        if merged and re.fullmatch(r"\(?\d{1,2}[.)]|[-*\u2022]", merged[-1]):
            merged[-1] = merged[-1] + " " + s
            continue
        if merged and len(s) < min_chars and not _BULLET.match(s) and len(merged[-1]) < 400:
            merged[-1] = merged[-1] + " " + s
        else:
            merged.append(s)
    while len(merged) > max_sentences:
        # merge the shortest adjacent pair
        best, bi = None, 0
        for i in range(len(merged) - 1):
            ln = len(merged[i]) + len(merged[i + 1])
            if best is None or ln < best:
                best, bi = ln, i
        merged[bi : bi + 2] = [merged[bi] + " " + merged[bi + 1]]
    return merged


# --------------------------------------------------------------------------------------------
# Tokens

fold = normalize.fold


_TOKEN = re.compile(r"[a-z0-9]+(?:[-/.][a-z0-9]+)*")

STOP = set(
    """
a an the and or but if then than so of to in on at by for with from into onto over under about as is are was
were be been being am do does did done doing have has had having i me my we our you your he she it its they them
their this that these those there here what which who whom whose when where why how whether not no nor can could
shall should will would may might must need needs also any all some each every other such only own same too very
just s t d ll m o re ve y up down out off again further once more most both few many much one ones
get got give gave make made use used via per vs etc eg ie
le la les un une des du de d l au aux et ou mais si ce cet cette ces que qui quoi quel quelle quels quelles
dont ou quand comment pourquoi combien est sont etait etaient etre ete avoir a ont avait je tu il elle nous vous
ils elles on mon ma mes ton ta tes son sa ses notre nos votre vos leur leurs en y ne pas plus pour par sur sous
dans avec sans entre vers chez faut il-faut faire fait doit doivent peut peuvent dois
der die das ein eine und oder ist sind wie was wer wann wo warum mit fur von zu im den dem des nicht
el la los las un una y o es son que como cual cuando donde por para con
""".split()
)

QWORDS = set("what which who whom whose when where why how quel quelle quels quelles qui quand ou comment pourquoi combien".split())


def _stem(w: str) -> str:
    if any(c.isdigit() for c in w):
        return w
    for suf in ("ements", "ement", "ations", "ation", "ements", "ings", "ing", "ies", "ied", "ness", "ments",
                "ment", "ions", "ion", "ers", "er", "es", "ed", "ly", "s", "e"):
        if w.endswith(suf) and len(w) - len(suf) >= 3:
            w = w[: -len(suf)]
            break
    return w[:7]


@lru_cache(maxsize=50000)
def stem(w: str) -> str:
    return _stem(w)


def tokens(text: str) -> list[str]:
    return _TOKEN.findall(fold(text))


def content_stems(text: str) -> list[str]:
    out = []
    for t in tokens(text):
        if t in STOP or (len(t) < 2 and not t.isdigit()):
            continue
        if "-" in t or "/" in t:
            if any(c.isdigit() for c in t):
                out.append(t.replace("/", "-"))
                continue
            for part in re.split(r"[-/]", t):
                if part and part not in STOP and len(part) > 1:
                    out.append(stem(part))
            continue
        out.append(stem(t.rstrip(".")))
    return out


def bucket(s: str, n: int) -> int:
    return zlib.crc32(s.encode("utf-8")) % n


# --------------------------------------------------------------------------------------------
# Language (just enough to know a query and a passage are not in the same language)

_LANG_WORDS = {
    "en": set("the and of to is are for with what how do does should this that on in be it which when".split()),
    "fr": set("le la les des du et est sont pour avec quel quelle comment faut il une un dans sur que qui au aux ce".split()),
    "de": set("der die das und ist sind fur mit wie was ein eine nicht zu den dem auf".split()),
    "es": set("el los las y es son para con que como una un del en por se".split()),
    "it": set("il lo gli e sono per con che come una un del della di in".split()),
}


def language(text: str) -> str:
    toks = tokens(text[:1500])
    if not toks:
        return "en"
    best, score = "en", 0
    for lang, words in _LANG_WORDS.items():
        c = sum(1 for t in toks if t in words)
        if c > score:
            best, score = lang, c
    return best


# --------------------------------------------------------------------------------------------
# Identifiers and numbers

_ID = re.compile(r"\b(?=[A-Za-z0-9-]*\d)(?=[A-Za-z0-9-]*[A-Za-z])[A-Za-z0-9]+(?:-[A-Za-z0-9]+)*\b")
_ID_SKIP = re.compile(
    r"^\d+(?:st|nd|rd|th|s|h|min|mm|cm|km|kg|g|mg|ml|l|m|kw|w|v|a|psi|bar|rpm|hz|c|f|x)$", re.I
)


def identifiers(text: str) -> list[str]:
    """Model numbers, part numbers, codes: tokens mixing letters and digits (P-200, FX220, E-17)."""
    out = []
    for m in _ID.finditer(text or ""):
        tok = m.group(0)
        if _ID_SKIP.match(tok) or len(tok) < 2:
            continue
        out.append(tok.upper().replace("-", ""))
    return out


def code_tokens(text: str) -> list[str]:
    """The identifiers of `identifiers`, as written ("XJ-9", not "XJ9")."""
    return [m.group(0) for m in _ID.finditer(text or "") if not _ID_SKIP.match(m.group(0)) and len(m.group(0)) >= 2]


def id_shape(idn: str) -> str:
    return re.sub(r"\d", "9", re.sub(r"[A-Z]", "A", idn))


def id_prefix(idn: str) -> str:
    m = re.match(r"[A-Z]*", idn)
    return m.group(0) if m else ""


UNITS = {
    # time
    "h": "h", "hr": "h", "hrs": "h", "hour": "h", "hours": "h", "heure": "h", "heures": "h", "stunden": "h",
    "stunde": "h", "horas": "h", "hora": "h", "ore": "h",
    "min": "min", "mins": "min", "minute": "min", "minutes": "min", "minuten": "min", "minutos": "min",
    "s": "s", "sec": "s", "secs": "s", "second": "s", "seconds": "s", "secondes": "s", "seconde": "s",
    "day": "d", "days": "d", "jour": "d", "jours": "d", "tage": "d", "tag": "d", "dias": "d",
    "week": "wk", "weeks": "wk", "semaine": "wk", "semaines": "wk", "wochen": "wk",
    "month": "mo", "months": "mo", "mois": "mo", "monate": "mo", "meses": "mo",
    "year": "yr", "years": "yr", "an": "yr", "ans": "yr", "annee": "yr", "annees": "yr", "jahre": "yr",
    # mass
    "g": "g", "gram": "g", "grams": "g", "gramme": "g", "grammes": "g", "gr": "g",
    "kg": "kg", "kilogram": "kg", "kilograms": "kg", "kilos": "kg", "kilogrammes": "kg",
    "mg": "mg", "lb": "lb", "lbs": "lb", "pound": "lb", "pounds": "lb", "oz": "oz", "ounce": "oz", "ounces": "oz",
    "t": "t", "ton": "t", "tons": "t", "tonnes": "t", "tonne": "t",
    # volume
    "l": "L", "litre": "L", "litres": "L", "liter": "L", "liters": "L", "ml": "mL", "gallon": "gal",
    "gallons": "gal", "gal": "gal", "m3": "m3",
    # length
    "m": "m", "metre": "m", "metres": "m", "meter": "m", "meters": "m", "mm": "mm", "millimetres": "mm",
    "millimeters": "mm", "cm": "cm", "km": "km", "kilometres": "km", "kilometers": "km", "ft": "ft",
    "feet": "ft", "foot": "ft", "inch": "in", "inches": "in", "mile": "mi", "miles": "mi", "miles.": "mi",
    # misc
    "c": "C", "degc": "C", "celsius": "C", "degrees": "deg", "degres": "deg", "f": "F", "fahrenheit": "F",
    "bar": "bar", "bars": "bar", "psi": "psi", "kpa": "kPa", "mpa": "MPa", "pa": "Pa",
    "v": "V", "volt": "V", "volts": "V", "kv": "kV", "a": "A", "amp": "A", "amps": "A", "amperes": "A",
    "w": "W", "watt": "W", "watts": "W", "kw": "kW", "mw": "MW", "kwh": "kWh", "hp": "hp",
    "rpm": "rpm", "hz": "Hz", "nm": "Nm", "%": "%", "percent": "%", "pourcent": "%", "prozent": "%",
    "people": "people", "persons": "people", "personnes": "people", "employees": "people",
    "million": "e6", "millions": "e6", "billion": "e9", "billions": "e9", "milliards": "e9",
    "times": "x", "fois": "x", "mal": "x", "cycles": "cycles", "cycle": "cycles",
    "$": "$", "usd": "$", "dollars": "$", "dollar": "$", "\u20ac": "EUR", "eur": "EUR", "euros": "EUR",
    "euro": "EUR", "\u00a3": "GBP", "pounds sterling": "GBP",
}
UNIT_DIM = {
    "h": "time", "min": "time", "s": "time", "d": "time", "wk": "time", "mo": "time", "yr": "time",
    "g": "mass", "kg": "mass", "mg": "mass", "lb": "mass", "oz": "mass", "t": "mass",
    "L": "vol", "mL": "vol", "gal": "vol", "m3": "vol",
    "m": "len", "mm": "len", "cm": "len", "km": "len", "ft": "len", "in": "len", "mi": "len",
    "C": "temp", "F": "temp", "deg": "temp", "bar": "press", "psi": "press", "kPa": "press", "MPa": "press",
    "Pa": "press", "V": "volt", "kV": "volt", "W": "power", "kW": "power", "MW": "power", "hp": "power",
    "$": "money", "EUR": "money", "GBP": "money",
}

_WORDNUM = {
    "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9,
    "ten": 10, "eleven": 11, "twelve": 12, "fifteen": 15, "twenty": 20, "thirty": 30, "forty": 40,
    "fifty": 50, "hundred": 100, "un": 1, "deux": 2, "trois": 3, "quatre": 4, "cinq": 5, "dix": 10,
    "douze": 12, "vingt": 20, "trente": 30, "cent": 100, "once": 1, "twice": 2, "half": 0.5,
}

_NUM = re.compile(
    r"(?P<cur>[$\u20ac\u00a3])?\s?(?P<num>\d{1,3}(?:[,\u202f\u00a0 ]\d{3})+(?:\.\d+)?|\d+(?:[.,]\d+)?)"
)
_AFTER = re.compile(r"\s?(%|\u00b0\s?[cf]\b|[a-z\u00b5]+\d?)(?:\s?(?:/|per|par)\s?([a-z]+))?(?:\s+([a-z]+\d?))?")
_NUM_WORD = re.compile(r"\b(" + "|".join(sorted(_WORDNUM, key=len, reverse=True)) + r")\s+(?P<unit>[a-z]+)", re.I)


def _parse_num(s: str) -> float | None:
    s = s.replace("\u202f", "").replace("\u00a0", "").replace(" ", "")
    if re.fullmatch(r"\d{1,3}(,\d{3})+(\.\d+)?", s):
        s = s.replace(",", "")
    elif re.fullmatch(r"\d+,\d+", s):
        s = s.replace(",", ".")
    try:
        return float(s)
    except ValueError:
        return None


def _unit_of(w: str) -> str:
    w = w.replace("\u00b0", "deg").replace(" ", "")
    if w.startswith("deg") and len(w) > 3:
        return "C" if w.endswith("c") else "F"
    return UNITS.get(w, "")


def quantities(text: str) -> list[tuple[float, str, int]]:
    """(value, normalised unit or '' or 'year', char offset) for each number in the text."""
    out = []
    # "25 N·m" / "25 N.m": one unit, newton-metres
    folded = re.sub(r"(?<=\d)\s?n\s?[\u00b7.\-]\s?m\b", " nm", fold(text or ""))
    for m in _NUM.finditer(folded):
        start = m.start("num")
        # skip digits that are part of an identifier (P-200, FX220, V-12)
        if start > 0 and (folded[start - 1].isalpha() or (folded[start - 1] == "-" and start > 1 and folded[start - 2].isalnum())):
            continue
        end = m.end()
        if end < len(folded) and (folded[end].isalpha() and end + 1 < len(folded) and folded[end + 1].isdigit()):
            continue
        v = _parse_num(m.group("num"))
        if v is None:
            continue
        unit = ""
        if m.group("cur"):
            unit = UNITS.get(m.group("cur"), "$")
        else:
            a = _AFTER.match(folded, end)
            if a:
                w1, per, w2 = a.group(1), a.group(2), a.group(3)
                unit = _unit_of(w1)
                if not unit and w2 and w1.isalpha() and w1 not in STOP and len(w1) > 3:
                    unit = _unit_of(w2)  # "2,000 operating hours"
                if unit and per:
                    unit = unit + "/" + per[:3]
                if not unit and w1 and w1[0].isalpha() and len(w1) <= 2 and folded[end:end + 1].isalpha():
                    continue  # "200a": identifier-like suffix
        if not unit and 1000 <= v <= 2100 and float(v).is_integer() and "," not in m.group("num"):
            unit = "year"
        out.append((v, unit, start))
    for m in _NUM_WORD.finditer(folded):
        u = m.group("unit").lower()
        # "once a month": a one-letter word after a number word is an article, not a unit
        if u in UNITS and len(u) > 1:
            out.append((float(_WORDNUM[m.group(1).lower()]), UNITS[u], m.start()))
    # Intervals said in words: "every week", "once a month", "monthly", "tous les mois".
    for m in _PERIOD_WORD.finditer(folded):
        unit = _PERIOD_UNIT.get(m.group("u1") or m.group("u2") or "")
        if unit:
            out.append((1.0, unit, m.start()))
    return out


_PERIOD_UNIT = {
    "day": "d", "daily": "d", "jour": "d", "quotidien": "d", "quotidienne": "d", "tag": "d", "taglich": "d",
    "week": "wk", "weekly": "wk", "semaine": "wk", "hebdomadaire": "wk", "woche": "wk", "wochentlich": "wk",
    "month": "mo", "monthly": "mo", "mois": "mo", "mensuel": "mo", "mensuelle": "mo", "monat": "mo", "monatlich": "mo",
    "year": "yr", "yearly": "yr", "annually": "yr", "annual": "yr", "an": "yr", "annee": "yr", "annuel": "yr",
    "annuelle": "yr", "jahr": "yr", "jahrlich": "yr",
}
_PERIOD_WORD = re.compile(
    r"\b(?:(?:every|each|once (?:a|an|per|every)|per|chaque|tous les|toutes les|une fois par|jeden|jede|einmal (?:pro|im))\s+"
    r"(?P<u1>day|week|month|year|jour|semaine|mois|an|annee|tag|woche|monat|jahr)"
    r"|(?P<u2>daily|weekly|monthly|yearly|annually|quotidien(?:ne)?|hebdomadaire|mensuel(?:le)?|annuel(?:le)?|taglich|wochentlich|monatlich|jahrlich))\b"
)


# --------------------------------------------------------------------------------------------
# Question types and answer-type cues

QTYPES = ("freq", "quant", "when", "who", "where", "define", "directive", "why", "how", "what", "yesno")

_QT_PATTERNS = [
    ("freq", r"\b(how often|how frequently|at what interval|what interval|how regularly|tous les combien|a quelle frequence|quelle frequence|quel intervalle|wie oft|cada cuanto|con que frecuencia)\b"),
    ("quant", r"\b(how (much|many|long|far|big|large|high|tall|heavy|old|deep|wide|fast|hot|cold)|what (size|amount|quantity|percentage|temperature|pressure|torque|voltage)|combien|quelle (quantite|taille|temperature|pression|duree)|quel (volume|poids|couple)|wie (viel|viele|lange)|cuanto|cuantos)\b"),
    ("when", r"\b(when|what (year|date|time|day|month|century|decade)|in which year|quand|en quelle annee|a quelle date|wann|cuando)\b"),
    ("who", r"\b(who|whom|whose|which (person|company|organization|group|team|man|woman)|qui|wer|quien)\b"),
    ("where", r"\b(where|in which (country|city|place|region)|ou se|ou est|ou sont|wo|donde)\b"),
    ("define", r"\b(what (does|do|is meant by) .* (mean|stand for)|what is the meaning|definition of|que signifie|que veut dire|qu est-ce que|was bedeutet)\b"),
    ("directive", r"^\s*(do i|do we|do you|should i|should we|must i|must we|can i|can we|may i|is it (necessary|required|allowed|safe|ok)|am i allowed|are we allowed|is .* required|faut-il|dois-je|doit-on|peut-on|puis-je|est-il (necessaire|obligatoire|permis)|muss ich|darf ich)\b"),
    ("why", r"\b(why|for what reason|pourquoi|warum|por que)\b"),
    ("how", r"\b(how (do|does|did|can|should|to|is|are|was|were)|comment|wie)\b"),
    ("what", r"\b(what|which|quel|quelle|quels|quelles|que|was|welche|que|cual)\b"),
    ("yesno", r"^\s*(is|are|was|were|does|did|do|has|have|can|could|will|would|est-ce|y a-t-il)\b"),
]
_QT_RE = [(k, re.compile(p)) for k, p in _QT_PATTERNS]


def qtype(query: str) -> str:
    q = fold(query).replace("'", " ").replace("\u2019", " ")
    for k, r in _QT_RE:
        if r.search(q):
            return k
    return "other"


FREQ_RE = re.compile(
    r"\b(every|each|once|twice|per|daily|weekly|monthly|yearly|annually|hourly|quarterly|times a|times per|"
    r"tous les|toutes les|chaque|par (jour|semaine|mois|an)|quotidien|hebdomadaire|mensuel|annuel|alle|jede|cada)\b"
)
DATE_RE = re.compile(
    r"\b(1[0-9]{3}|20[0-9]{2}|january|february|march|april|may|june|july|august|september|october|november|"
    r"december|janvier|fevrier|mars|avril|mai|juin|juillet|aout|septembre|octobre|novembre|decembre|"
    r"monday|tuesday|wednesday|thursday|friday|saturday|sunday|century|centuries|decade|bc|ad|siecle|"
    r"\d{1,2}[/.]\d{1,2}[/.]\d{2,4}|before|after|during|until|since|avant|apres|pendant)\b"
)
DIRECTIVE_RE = re.compile(
    r"\b(must|shall|required|requires|require|mandatory|need to|needs to|always|never|do not|don't|"
    r"prohibited|forbidden|not permitted|is permitted|allowed|should|before|ensure|make sure|"
    r"doit|doivent|obligatoire|il faut|ne pas|interdit|toujours|jamais|avant de|assurez|verifiez|"
    r"muss|mussen|nicht|immer|vor dem|verboten)\b"
)
DEFINE_RE = re.compile(r"\b(means|refers to|is defined as|stands for|is a|is an|is the|signifie|designe|est un|est une|bedeutet)\b")
NEG_RE = re.compile(
    r"\b(not|no|never|none|nothing|neither|nor|without|cannot|can't|don't|doesn't|isn't|aren't|wasn't|"
    r"weren't|won't|shouldn't|mustn't|needn't|didn't|hasn't|haven't|ne|n|pas|jamais|aucun|aucune|sans|"
    r"nicht|kein|keine|nie|ohne)\b"
)


def has_person_or_org(sentence: str) -> bool:
    # capitalised words not at sentence start
    words = re.findall(r"(?<![.!?]\s)(?<!^)\b[A-Z][a-z]+", sentence)
    return len(words) > 0


# a yes/no question: an auxiliary or modal first (English), "est-ce que", an inverted verb ("Faut-il",
# "Puis-je", "Le filtre doit-il ...") (French); or the same after a leading clause ("If the pump trips,
# should I ...?"); or, spoken style, a question mark and no question word at all ("Je peux meuler de
# l'aluminium sur le TM-150 ?", "On a le droit de ... ?")
_AUXW = r"(is|are|was|were|am|does|did|do|has|have|had|can|could|will|would|should|shall|must|may|might)"
_POLAR_EN = re.compile(r"^\s*" + _AUXW + r"\b")
_POLAR_FR = re.compile(r"^\s*(est-ce qu|y a-t-il|n'y a-t-il)|^[^?]{0,80}?\b\w+-(je|tu|il|elle|on|nous|vous|ils|elles)\b")
_LEAD = re.compile(r"^\s*(if|when|whenever|given|although|though|assuming|in|from|after|before|during|once|while|for|"
                   r"according|based|si|quand|lorsque|avant|apres|pendant|pour|selon|d'apres)\b[^?]*?,\s*("
                   + _AUXW[1:-1] + r"|est-ce qu|faut-il|peut-on|dois-je|puis-je)\b")
_WH_FIRST = re.compile(r"^\s*(what|which|who|whom|whose|when|where|why|how|quel|quelle|quels|quelles|qui|quand|ou|comment|pourquoi|combien|que|qu)\b")
_ALTERNATIVE = re.compile(r"\b[\w-]+ (or|ou) [\w-]+\s*\?$")
_WH_INV = re.compile(r"\bqu(e\s+|')\w+-(je|tu|il|elle|on|nous|vous|ils|elles)\b")
_WH_ANY = re.compile(r"\b(what|which|who|whom|whose|when|where|why|how|quel|quelle|quels|quelles|qui|quand|comment|pourquoi|combien|quoi|qu'est-ce)\b")


def is_polar(query: str) -> bool:
    """A yes/no question ("Can I ...?", "Do I need ...?", "If ..., would ...?", "Faut-il ...?",
    "Est-ce que ...?", "On peut ... ?")."""
    q = fold(query).replace("\u2019", "'").strip()
    if _ALTERNATIVE.search(q):  # "Is the valve brass or steel?" asks which, not whether
        return False
    if _LEAD.match(q):
        return True
    if _WH_FIRST.match(q):
        return False
    if _POLAR_EN.match(q):
        return True
    wh = _WH_ANY.search(q) or _WH_INV.search(q)  # "Tous les combien faut-il ...", "..., que dois-je ...?"
    if _POLAR_FR.match(q):
        return not wh
    return q.endswith("?") and not wh


_LIST_MARK = re.compile(r"^\s*(?:[-*\u2022]|\d+[.)])\s+")


def is_heading(s: str, title: str = "") -> bool:
    """A title, heading or label rather than a sentence: the document's title, a line that ends with a
    colon, one or two words ("Steps.", "Scope"), or a short line with no sentence punctuation ("When to
    backwash"). A list item or step that states something ("- Maximum batch size: 7 kg", "2. Open the
    valve") is not one."""
    t = s.strip().lstrip("#").strip()
    if title and t.rstrip(".").strip().lower() == title.strip().lower():
        return True
    if t.endswith(":"):
        return True
    body = _LIST_MARK.sub("", t)
    if len(body.split()) <= 2:
        return True
    if _LIST_MARK.match(t) or (":" in body and re.search(r"\d", body)):
        return False
    return len(t) < 90 and len(t.split()) < 10 and not re.search(r"[.!?;]\s*[\"')\]]?$", t)


# --------------------------------------------------------------------------------------------
# Query terms and lexical overlap (retrieval's rerank, the answer writer, the lexical index)

QUERY_STOP = set(
    """a an the of to in on for and or is are be do does i my we our it this that with at by from how what
    when which who whom why where can should must need much many often there their them as was were will
    le la les un une des du de d l et ou est sont en au aux pour par sur avec dans que qui quoi quel quelle
    quels quelles comment combien faut il elle on ne pas se sa son ses ce cette ces y""".split()
)
WORD_TOKEN = re.compile(r"[\w]+(?:[-/.][\w]+)*", re.UNICODE)


def query_terms(text: str) -> list[str]:
    """Meaningful terms of a query: identifiers kept whole ("p-200"), stop words dropped."""
    out = []
    for tok in WORD_TOKEN.findall(fold(text)):
        if any(ch.isdigit() for ch in tok) and re.search(r"[-/.]", tok):
            out.append(tok)
        else:
            out.extend(p for p in re.split(r"[-/.]", tok) if p and p not in QUERY_STOP and len(p) > 1)
    return list(dict.fromkeys(out))


def lexical_overlap(terms: list[str], text: str) -> float:
    """Share of query terms found in the text (prefix match, so "grease" finds "greasing")."""
    if not terms:
        return 0.0
    folded = fold(text)
    words = set(WORD_TOKEN.findall(folded))
    hits = 0
    for t in terms:
        if t in words or (len(t) >= 5 and re.search(r"\b" + re.escape(t[: max(4, len(t) - 2)]), folded)):
            hits += 1
    return hits / len(terms)


# --------------------------------------------------------------------------------------------
# The values a sentence states: numbers with their unit, and counts of things

# "25.000 rpm", "1.000.000": a dot between groups of three is a thousands separator in French and
# German text (and in any text when there are two groups); in English "2.500 mm" stays 2.5.
_DOTTED = re.compile(r"(?<![\d.,])(\d{1,3}(?:\.\d{3})+)(?![\d.,]*\d)")


def _undot(text: str, english: bool) -> str:
    def sub(m: re.Match) -> str:
        groups = m.group(1).count(".")
        return m.group(1).replace(".", "") if groups > 1 or not english else m.group(1)

    return _DOTTED.sub(sub, text)


def stated_numbers(sentence: str) -> list[str]:
    """The numbers of a sentence that have a unit, as "VALUE UNIT" (years and bare counts left out)."""
    english = language(sentence) == "en"
    text = re.sub(r"\btr\s?/\s?min\b", "rpm", _undot(sentence, english), flags=re.I)
    out = []
    bare = set()
    for value, unit, _ in quantities(text):
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
        if value in bare and noun not in STOP and noun not in _NOT_COUNTED:
            item = f"{value:.6g} {noun[:-1] if noun.endswith('s') and len(noun) > 3 else noun}"
            if item not in out:
                out.append(item)
    return out


_COUNT = re.compile(r"(?<![\w.,\-])(?P<num>\d{1,3}(?:[,\u202f\u00a0 ]\d{3})+|\d+)(?![.,]\d)\s+(?P<noun>[a-z]{3,})\b")
_NOT_COUNTED = {"and", "or", "to", "of", "the", "for", "with", "then", "et", "ou", "pour", "avec"}


def _number(s: str) -> float:
    return float(re.sub(r"[,\u202f\u00a0 ]", "", s))
