"""Answer writers. The default is offline and extractive: it quotes the sentences of the evidence
passages that answer the question, each with its citation, and adds nothing of its own."""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol, runtime_checkable

from .gate import Status
from .models import Candidate
from .normalize import fold
from . import text as T
from .text import is_heading
from .location import deep_link, location_label
from .text import lexical_overlap, query_terms, stated_numbers


@dataclass
class Citation:
    n: int
    id: str
    doc_id: str
    title: str
    url: str | None
    # Where in the document: its page (PDF), its heading path, and the URL opened there.
    page: int | None = None
    section: str | None = None
    link: str | None = None
    # "archived revision, version 1.0" for a source that is not current (a question that named it)
    note: str | None = None


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


_SENT_SPLIT = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(\u00c0-\u00dd\u00ab\u201c])|\n+")
_STEP = re.compile(r"^\d+\.\s")
_LIST_ITEM = re.compile(r"^\s*(?:[-*\u2022\u2013]|\d+[.)]|[a-z][.)])\s+")
# A period after these ends no sentence: "(Rev. 3)", "No. 4", "approx. 5 min" (before a number),
# "e.g. the P-200", "Dr. Martin", "J. Smith" (before anything).
_ABBREV_NUM = re.compile(r"\b(?:rev|no|nos|nr|fig|figs|tab|ref|réf|vol|art|sect|chap|p|pp|ver|approx|ca|n°)\.$", re.I)
_ABBREV_ANY = re.compile(r"(?:\b(?:e\.g|i\.e|p\.ex|cf|vs|mr|mrs|ms|dr|mt)|(?<![\w.])[A-Z])\.$")
# A line that ends with one of these words goes on on the next line.
_CONTINUES = set("""a an the of to in on at for with by from and or nor but than that which who whose not no
    never must may can shall should will is are be been was were has have per every each into onto over under
    de la le les des du un une et ou à au aux en par pour sans sur dans avec ne pas que qui dont est sont doit
    doivent peut""".split())
_END_PUNCT = re.compile(r"[.!?:;][\"')\]\u00bb\u201d]*$")


def _continues(line: str, nxt: str) -> bool:
    """A line wrap rather than the end of a sentence, a heading or a list item (PDF and DOCX line
    breaks): the line does not end a sentence and the next line is no list item, and either the next
    line starts in lower case, the line ends with a comma, a hyphen or a word that needs more, or the
    line is too long to be a heading."""
    if not line or not nxt or _END_PUNCT.search(line) or _LIST_ITEM.match(nxt) or line.lstrip().startswith("#"):
        return False
    if line.rstrip().endswith("|") or nxt.lstrip().startswith("|"):
        return False
    if nxt[:1].islower() or line.endswith((",", "-", "\u00ad", "(", "/", "–")):
        return True
    last = re.findall(r"[\w\u00c0-\u017f']+", line.lower())[-1:] or [""]
    if last[0] in _CONTINUES:
        return True
    return not is_heading(line) and len(line.split()) >= 8


def rejoin(text: str) -> str:
    """The text with line wraps undone: a sentence broken over lines (PDF, DOCX) is one line again,
    a word hyphenated at a line end is whole ("centri-" + "fuge" -> "centrifuge"; "P-" + "200" keeps
    its hyphen); paragraphs, headings and list items stay on their own lines."""
    text = (text or "").replace("\r\n", "\n").replace("\r", "\n")
    out: list[str] = []
    for raw in text.split("\n"):
        line = raw.strip()
        if out and out[-1] and line and _continues(out[-1], line):
            prev = out[-1]
            if prev.endswith("\u00ad"):
                out[-1] = prev[:-1] + line
            elif prev.endswith("-") and re.search(r"[a-z\u00e0-\u00ff]-$", prev) and line[:1].islower():
                out[-1] = prev[:-1] + line  # soft hyphenation of a word at the line end
            elif prev.endswith(("-", "/", "(")):
                out[-1] = prev + line  # "P-" + "200", "and/" + "or"
            else:
                out[-1] = prev + " " + line
        else:
            out.append(line)
    return "\n".join(out).replace("\u00ad", "")


def sentences(text: str) -> list[str]:
    """Sentences of a passage, line wraps undone; numbered steps ("1. Stop the pump.") stay whole,
    and an abbreviation ("Rev.", "No.", "approx.") ends no sentence."""
    raw = [s.strip() for s in _SENT_SPLIT.split(rejoin(text)) if s and s.strip()]
    out: list[str] = []
    for s in raw:
        # "1." alone is the number of the next step: glue it back on.
        if out and re.fullmatch(r"\d+\.", out[-1]):
            out[-1] = f"{out[-1]} {s}"
        elif out and not _LIST_ITEM.match(s) and (_ABBREV_ANY.search(out[-1])
                                                  or (_ABBREV_NUM.search(out[-1]) and s[:1].isdigit())):
            out[-1] = f"{out[-1]} {s}"
        else:
            out.append(s)
    return [s for s in out if len(s) > 2]


_QUANTITY_Q = re.compile(r"\b(how (often|much|many|long|deep|frequently|fast|hot|high)|what (interval|torque|level|depth|quantity|"
                         r"speed|temperature|pressure|limit|maximum|minimum|size)|combien|quelle? (fréquence|quantité|vitesse|"
                         r"température|pression|durée|limite)|à quelle (fréquence|vitesse|température))\b", re.I)


_LIMIT_Q = re.compile(r"\b(maximum|minimum|maximale?|minimale?|limit|limite|interval|intervalle)\b", re.I)


def wants_value(query: str) -> bool:
    """A question that asks for a number: how often, how much, which speed or temperature, the
    maximum or minimum of something ..."""
    return bool(_QUANTITY_Q.search(query) or _LIMIT_Q.search(query)) or T.qtype(query) in ("freq", "quant")


def _has_value(s: str) -> bool:
    return bool(stated_numbers(s))


_NUMBER_WORD = re.compile(r"\b(\d+|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|twenty|hundred|"
                          r"thousand|un|une|deux|trois|quatre|cinq|sept|huit|neuf|dix|douze|vingt|cent|mille)\b", re.I)


def _has_count(s: str) -> bool:
    """A value or a plain count ("a minimum of two", "trois connexions")."""
    return _has_value(s) or bool(_NUMBER_WORD.search(s))


# A line that labels rather than says: document metadata ("- Last modified: June 2023", "Version: 3")
# and a table's header row ("Service status | Type of API key | Daily limit").
_META_LABEL = re.compile(r"^\s*(?:[-*\u2022]\s*)?(last (modified|updated|reviewed)|modified|updated|reviewed|version|"
                         r"revision|author|owner|date|effective( date)?|status|page|criticality|id|identifier|"
                         r"mis à jour|dernière modification|auteur|statut)\s*:", re.I)


def is_label(s: str, title: str = "") -> bool:
    """A title, heading or label, never quoted as a sentence: `is_heading`, a metadata line, or a
    table's header row (short cells, no value)."""
    cells = [c.strip() for c in s.split("|")]
    if len(cells) > 1:  # a table row: a label when it is a header row, else it states something
        return not re.search(r"\d", s) and all(len(c.split()) <= 4 for c in cells)
    return is_heading(s, title) or bool(_META_LABEL.match(s))


_INTERVAL_UNITS = {"h", "min", "s", "d", "wk", "mo", "yr"}


def _has_interval(s: str) -> bool:
    """A value that answers "how often": a time ("every 2,000 hours", "daily") or a count of uses
    ("every 250 runs"), not a speed or a mass."""
    for v in stated_numbers(s):
        unit = v.split(" ", 1)[1]
        if unit in _INTERVAL_UNITS or unit.isalpha() and unit not in T.UNITS.values():
            return True
    return bool(T.FREQ_RE.search(fold(s)))


# What kind of quantity a question asks for, by the words that ask it, and the units of each kind
# (`stated.numbers` canonical units): "how much grease" is not answered by "every 1,000 hours".
_DIMENSIONS = {
    "time": {"h", "min", "s", "d", "wk", "mo", "yr"},
    "length": {"m", "mm", "cm", "km", "ft", "in", "mi"},
    "amount": {"g", "kg", "mg", "lb", "oz", "t", "L", "mL", "gal", "m3"},
    "temperature": {"C", "F", "deg"},
    "pressure": {"bar", "psi", "kPa", "MPa", "Pa"},
    "electric": {"V", "kV", "A", "W", "kW", "MW", "kWh", "hp"},
    "torque": {"Nm"},
    "speed": {"rpm", "Hz"},
}
_ASKS_DIMENSION = [
    ("time", re.compile(r"\b(how long|for how long|how many (seconds|minutes|hours|days|weeks|months|years)|duration|"
                        r"combien de temps|dur[ée]e|pendant combien|how soon|délai|delai)\b", re.I)),
    ("length", re.compile(r"\b(how (deep|far|thick|wide|high|tall)|depth|thickness|length|distance|clearance|"
                          r"profondeur|[ée]paisseur|longueur|distance|hauteur|largeur)\b", re.I)),
    ("temperature", re.compile(r"\b(temperature|how hot|how cold|temp[ée]rature)\b", re.I)),
    ("pressure", re.compile(r"\b(pressure|pression)\b", re.I)),
    ("torque", re.compile(r"\b(torque|couple de serrage|couple)\b", re.I)),
    ("speed", re.compile(r"\b(speed|rpm|vitesse|frequency of rotation)\b", re.I)),
    ("electric", re.compile(r"\b(voltage|current|power|tension|courant|puissance)\b", re.I)),
    ("amount", re.compile(r"\b(how much|how many (grams|kilos|litres|liters)|quantity|amount|quantit[ée]|combien de "
                          r"(graisse|huile|produit|litres|grammes))\b", re.I)),
]


def asked_dimension(query: str) -> str | None:
    """The kind of quantity a question asks ("time", "length", "amount", ...), or None."""
    if T.qtype(query) == "freq":
        return "time"
    for dim, rx in _ASKS_DIMENSION:
        if rx.search(query):
            return dim
    return None


def _has_dimension(s: str, dim: str) -> bool:
    return any(v.split(" ", 1)[1] in _DIMENSIONS[dim] for v in stated_numbers(s))


def _run_in_label(s: str) -> bool:
    """A run-in heading of a procedure ("Quantity and grease type.", "Personal protective equipment."):
    a few words without a number, ending the way a label does."""
    words = s.split()
    return (1 <= len(words) <= 5 and s.rstrip().endswith(".") and not _LIST_ITEM.match(s) and not re.search(r"\d", s)
            and "|" not in s)


def rank_sentences(query: str, text: str, title: str = "") -> list[tuple[float, int, str]]:
    terms = query_terms(query)
    wants_number = wants_value(query)
    often = T.qtype(query) == "freq"
    dim = asked_dimension(query) if wants_number else None
    scored = []
    header = None  # the header row of the table being read: a row is matched with its header's words
    label = None  # the label of the section being read ("Personal protective equipment."): its words are the topic
    for i, s in enumerate(sentences(text)):
        row = "|" in s
        if not row:
            header = None
        if is_label(s, title):
            if row:
                header = s
            else:
                label = s
            continue
        if _run_in_label(s):
            label = s
        score = lexical_overlap(terms, f"{header}\n{s}" if row and header else s)
        if label and not row:
            # a sentence under a label that names what the question asks ("Quantity and grease type.",
            # "Personal protective equipment.") answers it even in other words: the label's match counts,
            # a little less than the sentence's own
            score = max(score, 0.8 * lexical_overlap(terms, f"{label}\n{s}"))
        if wants_number and dim and not often and _has_value(s):
            # a value of the kind asked ("20 g" for how much grease), else any value counts a little
            score += 0.35 if _has_dimension(s, dim) else 0.1
        elif wants_number and (_has_interval(s) if often else _has_value(s)):
            score += 0.35
        elif wants_number and not often and _has_count(s):
            score += 0.2
        if often and T.FREQ_RE.search(fold(s)):
            score += 0.2  # "every 250 runs", "toutes les 1 500 heures"
        # Headings like "Scope." carry no information of their own, and a question ("How do I use the
        # API?", a heading or a FAQ's own line) answers nothing.
        if len(s) < 25 or s.rstrip().endswith("?"):
            score -= 0.5
        scored.append((score, i, s))
    scored.sort(key=lambda x: (-x[0], x[1]))
    return scored


def adds_answer(query: str, first: tuple[float, int, str], other: tuple[float, int, str]) -> bool:
    """Whether a second sentence of the passage adds an answer to the first: never for a yes/no
    question (the first settles it); for a question that asks for a number, a sentence that states
    one and matches the question about as well; otherwise one that matches it about as well."""
    if T.is_polar(query):
        return False
    if other[0] <= 0.3 or other[0] < 0.75 * first[0]:
        return False
    return _has_value(other[2]) if wants_value(query) else True


def best_sentences(query: str, text: str, k: int = 2, title: str = "") -> list[str]:
    ranked = rank_sentences(query, text, title)
    if not ranked:  # nothing but headings: the passage is quoted as it is
        return sentences(text)[:1]
    picked = [ranked[0]] + [r for r in ranked[1:k] if adds_answer(query, ranked[0], r)]
    if wants_value(query):  # the sentence that holds the asked value first, then the others in order
        return [ranked[0][2]] + [s for _, _, s in sorted(picked[1:], key=lambda r: r[1])]
    return [s for _, _, s in sorted(picked, key=lambda r: r[1])]


def _norm(s: str) -> str:
    return " ".join(s.split())


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.split("|")]


def table_header(text: str, s: str, title: str = "") -> str | None:
    """The header row of the table a quoted row belongs to (`Task | Interval` for `Oil change |
    5,000 operating hours`), when the passage holds it; None for any other sentence."""
    if "|" not in s or is_label(s, title):
        return None
    lines = sentences(text)
    try:
        i = next(n for n, line in enumerate(lines) if _norm(line) == _norm(s))
    except StopIteration:
        return None
    j = i
    while j > 0 and "|" in lines[j - 1]:
        j -= 1  # up the rows of its table, to its first: the header row when it labels
    if j == i or not is_label(lines[j], title):
        return None
    return lines[j]


def quote_text(c: Candidate, s: str) -> str:
    """A quote as an answer shows it: the sentence between quotation marks, word for word, and a
    table row's header after it (`"Oil change | 5,000 operating hours" (Task | Interval)`)."""
    header = table_header(c.text, s, c.title)
    return f'"{s}"' + (f" ({header})" if header else "")


def with_list_item(query: str, text: str, s: str) -> str:
    """A sentence that introduces a list ("The alarm triggers if the main battery's:", or cut
    before it) quoted with the list item that answers the question best, joined by " ... "; any
    other sentence as it is."""
    if _END_PUNCT.search(s) and not s.rstrip().endswith(":") or _LIST_ITEM.match(s) or "|" in s:
        return s  # a whole sentence, a list item or a table row introduces nothing
    lines = sentences(text)
    try:
        i = next(n for n, line in enumerate(lines) if _norm(line) == _norm(s))
    except StopIteration:
        return s
    items = []
    for line in lines[i + 1:]:
        if not _LIST_ITEM.match(line):
            break
        items.append(line)
    if not items:
        return s
    terms = query_terms(query)
    best = max(items, key=lambda it: (lexical_overlap(terms, it) + (0.35 if _has_value(it) and wants_value(query) else 0),
                                      -items.index(it)))
    return f"{s.rstrip()} ... {_LIST_ITEM.sub('', best, count=1).strip()}"


def quoted(query: str, c: Candidate, k: int) -> list[str]:
    """The sentences `_quoted` picks, a sentence that introduces a list with the item that answers
    (`with_list_item`)."""
    return [with_list_item(query, c.text, s) for s in _quoted(query, c, k)]


# -- yes/no questions -------------------------------------------------------------------------------

# A negation that bears on the word after it ("do not mix", "never run", "must not exceed",
# "ne pas mélanger", "jamais"): the answer to "Can I mix ...?" is then no.
_NEGATOR = re.compile(r"\b(not|never|no|cannot|can't|don't|doesn't|mustn't|shouldn't|isn't|aren't|without|"
                      r"ne|n'|pas|jamais|aucun|aucune|sans)\b", re.I)
# Words that say which of two kinds a thing is: "Is the P-200 a vertical pump?" against "horizontal".
_OPPOSITES = [("horizontal", "vertical"), ("upper", "lower"), ("inside", "outside"), ("indoor", "outdoor"),
              ("open", "closed"), ("left", "right"), ("ac", "dc"), ("single", "double"), ("manual", "automatic"),
              ("mandatory", "optional"), ("internal", "external"), ("before", "after"), ("hot", "cold"),
              ("horizontale", "verticale"), ("supérieur", "inférieur"), ("ouvert", "fermé"), ("avant", "après")]
_FRENCH = re.compile(r"\b(est-ce|faut-il|dois-je|doit-on|peut-on|puis-je|le|la|les|des|une|sur|dans|avec|pour|"
                     r"avant|après|sont|est|il|je)\b", re.I)
_AUX = {"do", "does", "did", "is", "are", "was", "were", "can", "could", "may", "must", "should", "will", "would",
        "have", "has", "need", "needs", "it", "there", "faut", "dois", "doit", "peut", "puis", "est"}


def _words(s: str) -> list[str]:
    return re.findall(r"[\w'’-]+", fold(s))


def _contrasts(query: str, sentence: str) -> bool:
    """The sentence says the thing is of another kind than the question asks: an opposite word
    ("vertical" / "horizontal"), or another compound of the same kind ("water-cooled" / "air-cooled")."""
    q, s = set(_words(query)), set(_words(sentence))
    for a, b in _OPPOSITES:
        for x, y in ((a, b), (b, a)):
            if x in q and y in s and x not in s:
                return True
    for w in q:
        if "-" in w and not any(ch.isdigit() for ch in w) and w not in s:
            head, _, tail = w.rpartition("-")
            if any(o.endswith("-" + tail) and o != w for o in s):
                return True
    return False


def _overlap(terms: list[str], text: str) -> float:
    """Share of the terms in the text, a plural or a longer word of the same stem counting."""
    words = set(_words(text))
    words |= {part for w in words if "-" in w for part in w.split("-") if part}
    hit = sum(1 for t in terms if t in words or t + "s" in words or t + "es" in words
              or (len(t) >= 5 and any(w.startswith(t[: max(4, len(t) - 2)]) for w in words)))
    return hit / len(terms) if terms else 0.0


def _negates_asked(query_terms_: list[str], sentence: str) -> bool:
    """A negation in the sentence that bears on what the question asks: the first word it governs
    (after "must", "be", "to" ...) is one of the question's words."""
    words = _words(sentence)
    for i, w in enumerate(words):
        if _NEGATOR.fullmatch(w):
            after = [x for x in words[i + 1:i + 5] if x not in _AUX and x not in ("be", "to", "a", "the", "pas", "se")]
            if after and _overlap(query_terms_, after[0]) > 0:
                return True
    return False


# Sentences that settle nothing: a question (a FAQ's own line), a condition ("If the fan is run above
# 3000 rpm, the warranty is void"), a hedge ("has not been tested", "may be able to").
_CONDITION = re.compile(r"^\W*(if|when|whenever|unless|in case|provided|should you|si|s['’]il|s['’]ils|lorsque|lorsqu['’]|"
                        r"quand|au cas|dans le cas|en cas)\b", re.I)
_HEDGE = re.compile(r"\b(not (yet )?(been )?(tested|verified|validated|confirmed|qualified|guaranteed)|untested|unverified|"
                    r"not known|unknown|unclear|may be able|might|possibly|perhaps|it depends|depending on|"
                    r"pas (encore )?(été )?(testée?s?|vérifiée?s?|validée?s?|garantie?s?)|peut[- ]être|éventuellement|"
                    r"selon les cas|dépend de)\b", re.I)
# The claim denied as a whole ("It is false that ...") or a sentence that opens with its answer ("Never:
# depressurise the line first", the line after a FAQ's question).
_CLAIM_DENIED = re.compile(r"^\W*(it is (false|not true|untrue|not the case|a myth) that|il est faux que|il n['’]est pas vrai que|"
                           r"contrairement à ce qu)", re.I)
_ANSWER_WORD = re.compile(r"^\W*(yes|no|never|always|oui|non|jamais|toujours)\b(?!-)", re.I)
_NO_WORDS = {"no", "never", "non", "jamais"}


def settles_nothing(sentence: str) -> bool:
    """A question, a condition or a hedge: a sentence that never settles a yes/no question."""
    return sentence.rstrip().endswith("?") or bool(_CONDITION.match(sentence) or _HEDGE.search(sentence))


def _answer_word(sentence: str) -> bool | None:
    """True ("no") or False ("yes") when the sentence opens with its answer word; None otherwise."""
    m = _ANSWER_WORD.match(sentence)
    return None if m is None else fold(m.group(1)) in _NO_WORDS


def _polar_sentences(c: Candidate) -> list[tuple[str, bool | None]]:
    """The sentences of a passage that may settle a yes/no question, each with the answer it opens
    with (after a FAQ's question line, its answer line carries the answer: "Never: ..." is a no)."""
    sents = [s for s in sentences(c.text) if not is_label(s, c.title)]
    if c.quote:
        sents = [q for q in sents if _norm(c.quote) in _norm(q) or _norm(q) in _norm(c.quote)] + sents
    out: list[tuple[str, bool | None]] = []
    for i, s in enumerate(dict.fromkeys(sents)):
        if s.rstrip().endswith("?"):
            continue
        word = _answer_word(s)
        if word is None and settles_nothing(s):
            continue
        out.append((s, word))
    return out


def polar_verdict(query: str, evidence: list[Candidate], match_text: str | None = None) -> tuple[str, int, str] | None:
    """For a yes/no question the evidence settles: ("Yes" | "No" | "Oui" | "Non", the citation
    number of the passage, its settling sentence). None when the question is not a yes/no
    question, or no sentence of the evidence bears on it clearly enough to say which."""
    if not evidence or not T.is_polar(query):
        return None
    if match_text and match_text != query and match_text.startswith(query):
        # a question in another language than the library: its words bridged into the library's
        # language, and its identifiers (the question's own words match nothing there)
        added = query_terms(match_text[len(query):])
        own = [t for t in query_terms(query) if t not in _AUX and not any(ch.isdigit() for ch in t)]
        if len({t[:5] for t in added}) < 0.75 * len(own):
            return None  # too few of its words bridged to tell what the question asks
        terms = added + [t for t in query_terms(query) if any(ch.isdigit() for ch in t)]
    else:
        terms = query_terms(query)
    terms = [t for t in dict.fromkeys(terms) if t not in _AUX]
    if not terms:
        return None
    best: tuple[float, int, str, float, bool] | None = None
    for n, c in enumerate(evidence, start=1):
        faq = [s for s in sentences(c.text) if s.rstrip().endswith("?")]
        for sent, word in _polar_sentences(c):
            # an answer line ("Never: ...") is read with the FAQ question before it, which names the claim
            asked = next((q for q in faq if _overlap(terms, q) >= 0.75), None) if word is not None else None
            for clause in [x.strip() for x in re.split(r";\s+", sent) if x.strip()]:
                cover = max(_overlap(terms, clause), _overlap(terms, asked) if asked else 0.0)
                if word is not None and asked:
                    no = word
                else:
                    no = (_negates_asked(terms, clause) or _contrasts(match_text or query, clause)
                          or bool(_CLAIM_DENIED.match(clause)))
                pairs = sum(1 for a, b in zip(terms, terms[1:]) if re.search(
                    r"\b" + re.escape(a[:5]) + r"\w*\W+" + re.escape(b[:5]), fold(clause)))
                # A sentence that denies or contrasts bears on the question with fewer of its words.
                score = cover + 0.1 * pairs + (0.3 if no else 0.0)
                if best is None or score > best[0]:
                    best = (score, n, sent, cover, no)
    if best is None:
        return None
    _, n, sentence, cover, no = best
    # "No" when the settling sentence denies the asked thing or says it is of another kind, about
    # the question's subject; "Yes" only when it states (nearly) everything the question asks.
    if not ((no and cover >= 0.5) or (not no and cover >= 0.8)):
        return None
    french = len(_FRENCH.findall(query)) >= 2
    word = ("Non" if no else "Oui") if french else ("No" if no else "Yes")
    return word, n, sentence


def _quoted(query: str, c: Candidate, k: int) -> list[str]:
    """What the answer quotes from an evidence passage: first the sentence the judge found answering (the
    reader's span, or the sentence that settles a yes/no question) when it found one, whole, then,
    up to `k`, the sentences that add an answer to the question; never a title or heading. For a
    question that asks for a number, the first quote holds one (across languages the judge's sentence
    may not: then the passage's best sentence that does)."""
    ranked = rank_sentences(query, c.text, c.title)
    best = best_sentences(query, c.text, k, c.title)
    if not c.quote:
        return best
    # the judge splits sentences its own way: quote the answer's sentences that make up the judge's
    # quote (a heading glued to it, "Steps. 1.", is left out), or the one that holds it
    q = _norm(c.quote)
    sents = [s for s in sentences(c.text) if not is_label(s, c.title)]
    first = ([s for s in sents if _norm(s) in q] or [s for s in sents if q in _norm(s)][:1]
             or [s for s in sents if q[:40] in _norm(s) or q[-40:] in _norm(s)][:1])
    if not first:
        return best
    dim = asked_dimension(query)
    holds = (_has_interval if T.qtype(query) == "freq" else (lambda s: _has_dimension(s, dim)) if dim else _has_count)
    if wants_value(query) and not any(holds(s) for s in first):
        valued = [r for r in ranked if holds(r[2]) and r[0] > 0]
        if valued:
            return [valued[0][2]]
    first = first[:k]
    if T.is_polar(query) or not ranked:
        return first
    top = next((r for r in ranked if r[2] == first[0]), ranked[0])
    more = [r[2] for r in ranked if r[2] not in first and adds_answer(query, top, r)]
    return first + more[: max(0, k - len(first))]


# Where a question splits into clauses: a semicolon or colon, a comma that is no thousands
# separator or decimal comma ("25,000", "0,5 g"), the end of a sentence ("... in trial. How many
# ...?"), or a conjunction that starts a new clause.
_PREMISE_SPLIT = re.compile(r"[;:]|,(?!\d)|(?<!\d),|(?<=[a-z\u00e0-\u00ff)])[.!?]\s+|\b(?:so|therefore|then|donc|alors)\b", re.I)
_QUESTION_START = re.compile(
    r"^\s*(how|what|which|who|when|where|why|can|could|do|does|did|should|is|are|may|must|will|would|comment|combien|"
    r"quel|quelle|quels|quelles|faut|est-ce|pourquoi|où|peut|peut-on|puis-je|dois-je|doit-on)\b",
    re.I,
)


# "According to CISA, ...", "D'après la CISA, ...", "On Ubuntu, ...": where a question looks, not what it assumes.
_LEAD_PHRASE = re.compile(r"^\s*(according to|per|under|on|in|for|with|from|selon|d['’]après|d['’]apres|sur|sous|dans|"
                          r"pour|avec|en)(\s+[^\s,;:]+){1,3}\s*$", re.I)


def extract_premise(query: str, against: list[str] | None = None) -> str:
    """The clause of the question that the documents contradict, whole:
    "P-200 bearings need grease every 500 hours, how much do I add?" -> "P-200 bearings need grease every 500 hours".
    With `against` (the sentences of the contradicting passages), the declarative clause that shares
    most with them; else the first that states a number, else the first. A question with no clause
    of its own ("Can the rotor run at 25,000 rpm?") is its own premise."""
    q = query.strip().rstrip("?").strip()
    q = re.sub(r"^(since|given that|as|because|puisque|comme|étant donné que|vu que)\s+", "", q, flags=re.I)
    parts = [p.strip() for p in _PREMISE_SPLIT.split(q) if p and p.strip()]
    parts = [re.sub(r"^(and|but|et|mais)\s+", "", p, flags=re.I) for p in parts]
    declarative = [p for p in parts if not _QUESTION_START.match(p) and not _LEAD_PHRASE.match(p)
                   and len(p.split()) >= 2]
    if not declarative:
        return q
    if against:
        said = " ".join(against)
        nums = set(stated_numbers(said))
        def score(p: str) -> float:
            units = {v.split(" ", 1)[1] for v in stated_numbers(p)}
            return (lexical_overlap(query_terms(p), said) + (0.5 if units & {v.split(" ", 1)[1] for v in nums} else 0.0))
        best = max(declarative, key=lambda p: (score(p), bool(re.search(r"\d", p))))
        if score(best) > 0:
            return best
    with_facts = [p for p in declarative if re.search(r"\d", p)] or declarative
    return with_facts[0]


def _units(values: list[str]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for v in values:
        num, _, unit = v.partition(" ")
        out.setdefault(unit, set()).add(num)
    return out


def contradicting_sentences(match: str, premise: str, c: Candidate) -> list[str]:
    """What a premise conflict quotes from a passage: the sentence that states the contradicting value
    (a value of the premise's unit other than the premise's: "Add 15 g ..." against "30 g of grease"),
    the one that matches the premise best among them; else the passage's best sentence for the premise."""
    asked = _units(stated_numbers(premise))
    if asked:
        ranked = rank_sentences(match, c.text, c.title)
        other = [r for r in ranked
                 if any(unit in asked and not nums & asked[unit] for unit, nums in _units(stated_numbers(r[2])).items())]
        if other:
            return [other[0][2]]
    return best_sentences(match, c.text, 1, c.title)


def archived_note(status: str | None, version: str | None, named_revision: bool = False) -> str | None:
    """What a source list says of a source that is not current: "archived revision, version 1.0"; a
    revision the question named that its own text says is superseded: "superseded revision, version 1"."""
    if status != "archived" and not named_revision:
        return None
    return ("archived revision" if status == "archived" else "superseded revision") + (f", version {version}" if version else "")


def citation(n: int, c: Candidate) -> Citation:
    return Citation(n, c.id, c.doc_id, c.title, c.url, c.page, c.heading, deep_link(c.url, c.page, c.heading, c.doc_id),
                    archived_note(c.status, c.version, c.named_revision))


def source_line(n: int, title: str, doc_id: str, page: int | None = None, section: str | None = None,
                link: str | None = None, note: str | None = None) -> str:
    """`[1] Title (doc-id), p. 7 https://host/manual.pdf#page=7`: one line of a source list; an archived
    source says so (`[1] Title (doc-id; archived revision, version 1.0)`)."""
    where = location_label(page, section)
    return (f"[{n}] {title} ({doc_id}" + (f"; {note}" if note else "") + ")" + (f", {where}" if where else "")
            + (f" {link}" if link else ""))


def _sources(cands: list[Candidate]) -> tuple[str, list[Citation]]:
    cites = [citation(n, c) for n, c in enumerate(cands, start=1)]
    lines = [source_line(c.n, c.title, c.doc_id, c.page, c.section, c.link, c.note) for c in cites]
    return "Sources:\n" + "\n".join(lines), cites


# Reasons the gate gives (gate.REASON_*), read here without importing the policy's names twice.
_DISAGREES_HIGHER = "disagrees_with_higher_tier"
_DISAGREES_EQUAL = "evidence_disagrees"


def _kind(c: Candidate) -> str:
    return (c.source_type or "source").replace("_", " ")


def conflict_lead(query: str, conflicts: list[Candidate], first_n: int, match_text: str | None = None) -> list[str]:
    """The lines an answer opens with when passages conflict with it, numbered from `first_n`: the
    premise of the question that the documents contradict, quoted and cited; then any less trusted
    source that states another value than the answer. Empty without conflicts."""
    premise_cf = [(n, c) for n, c in enumerate(conflicts, start=first_n) if c.gate_reason != _DISAGREES_HIGHER]
    lower_cf = [(n, c) for n, c in enumerate(conflicts, start=first_n) if c.gate_reason == _DISAGREES_HIGHER]
    lines: list[str] = []
    if premise_cf:
        said = [s for _, c in premise_cf for s in best_sentences(query, c.text, 1, c.title)]
        premise = extract_premise(query, said)
        lines.append(f'Warning: the documents contradict a premise of the question: "{premise}". What they say:')
        for n, c in premise_cf:
            lines += [f'- "{s}" [{n}]' for s in contradicting_sentences(premise, premise, c)]
    if lower_cf:
        lines.append("Warning: a less trusted source states another value than the answer below; it is not used:")
        for n, c in lower_cf:
            lines += [f'- {quote_text(c, s)} [{n}] ({_kind(c)})' for s in quoted(match_text or query, c, 1)]
    return lines


def evidence_lines(match_text: str, evidence: list[Candidate], k: int) -> list[str]:
    """The quoted sentences of the evidence, cited; a source less trusted than the first is marked as
    such, and sources that state different values are said to disagree."""
    top = max((c.tier or 0 for c in evidence), default=0)
    lines: list[str] = []
    split = [f"[{n}]" for n, c in enumerate(evidence, start=1) if c.gate_reason == _DISAGREES_EQUAL]
    if split:
        lines.append(f"The sources disagree ({', '.join(split)}): equally trusted, they state different values; "
                     "check which applies before acting.")
    for n, c in enumerate(evidence, start=1):
        mark = ""
        if c.tier is not None and c.tier < top:
            mark = f" ({_kind(c)}: less trusted than [1])"
        if c.named_revision:
            mark += f" (the revision asked{', version ' + c.version if c.version else ''}: no longer current)"
        lines += [f'- {quote_text(c, s)} [{n}]{mark}' for s in quoted(match_text, c, k)]
    return lines


class ExtractiveWriter:
    name = "extractive"

    def __init__(self, sentences_per_passage: int = 2):
        self.k = sentences_per_passage

    def write(self, query: str, status: Status, evidence: list[Candidate], conflicts: list[Candidate],
              search_text: str | None = None, on_event=None) -> WrittenAnswer:
        match_text = search_text or query
        if status is Status.ANSWER:
            # A conflict beside the answer is never hidden: the answer opens with it.
            lead = conflict_lead(query, conflicts, len(evidence) + 1, match_text)
            lines = evidence_lines(match_text, evidence, self.k)
            src, cites = _sources(evidence + conflicts)
            head = "\n".join(lead) + "\n\n" if lead else ""
            # Settled only where nothing disagrees: beside a conflict, or between sources that state
            # different values, the answer does not say Yes or No.
            settled = not conflicts and not any(c.gate_reason == _DISAGREES_EQUAL for c in evidence)
            verdict = polar_verdict(query, evidence, match_text) if settled else None
            if verdict is not None:
                # A yes/no question the evidence settles: the answer says which, with the sentence
                # that settles it, then the other quotes.
                word, n, sentence = verdict
                head += f'{word}: {quote_text(evidence[n - 1], sentence)} [{n}]\n\n'
                lines = [x for x in lines if _norm(f'"{sentence}"') not in _norm(x)]
                if not lines:
                    return WrittenAnswer(head + src, cites, self.name)
            return WrittenAnswer(head + "From the documents:\n" + "\n".join(lines) + "\n\n" + src, cites, self.name)
        if status is Status.CONFLICT:
            said = [s for c in conflicts for s in best_sentences(query, c.text, 1, c.title)]
            premise = extract_premise(query, said)
            bridge_terms = match_text[len(query):] if match_text.startswith(query) else ""
            lines = [f'- "{s}" [{n}]' for n, c in enumerate(conflicts, start=1)
                     for s in contradicting_sentences(premise + bridge_terms, premise, c)]
            src, cites = _sources(conflicts)
            text = (f'The documents contradict a premise of the question: "{premise}". What they say instead:\n'
                    + "\n".join(lines) + "\n\nCheck the assumption before acting.\n\n" + src)
            return WrittenAnswer(text, cites, self.name)
        return WrittenAnswer(
            "No document in the library reliably answers this question. Rephrase it (name the equipment, "
            "model or procedure) or escalate it to an expert.",
            [], self.name,
        )


def conflict_warnings(status: str, evidence: list[dict], conflicts: list[dict]) -> list[str]:
    """One line per kind of conflict beside an answer, for the plain outputs (CLI, MCP text): the
    documents that contradict a premise, a less trusted source that states another value, sources
    of equal trust that disagree. Empty for any other status, or when nothing conflicts."""
    if status != Status.ANSWER.value:
        return []
    def names(items: list[dict]) -> str:  # each document once, though several of its passages are cited
        first = {p["doc_id"]: p for p in reversed(items)}
        return "; ".join(f"{first[d].get('title') or d} ({d})" for d in dict.fromkeys(p["doc_id"] for p in items))
    premise = [p for p in conflicts if p.get("reason") != _DISAGREES_HIGHER]
    lower = [p for p in conflicts if p.get("reason") == _DISAGREES_HIGHER]
    equal = [p for p in evidence if p.get("reason") == _DISAGREES_EQUAL]
    out = []
    if premise:
        out.append(f"warning: {len(premise)} document{'s' if len(premise) > 1 else ''} contradict"
                   f"{'' if len(premise) > 1 else 's'} a premise of the question: {names(premise)}")
    if lower:
        out.append(f"warning: a less trusted source states another value: {names(lower)}")
    if equal:
        out.append(f"warning: the sources disagree: {names(equal)}")
    return out


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
                cites.append(dataclasses.replace(c, n=number[c.id]))
            local[c.n] = number[c.id]
        body = written.text.rsplit(_SOURCES_BLOCK, 1)[0].strip()
        body = re.sub(r"^From the documents:\n", "", body)
        body = re.sub(r"\[(\d+)\]", lambda m: f"[{local.get(int(m.group(1)), int(m.group(1)))}]", body)
        blocks.append(f"{question}\n{body}")
    lines = [source_line(c.n, c.title, c.doc_id, c.page, c.section, c.link, c.note) for c in cites]
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
