"""Interpretable features for the local judge.

Query-passage features (relevance, evidence, contradiction) use the sentence embeddings of the
multilingual embedder, IDF-weighted content-word coverage, identifier consistency, answer-type
cues and numbers with units. Passage-only cues (injection, superseded) live in `lexicons.py` and
are combined in `model.py`.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

import numpy as np

from ... import text as T
from .lexicons import ANTONYMS

IDF_BUCKETS = 1 << 16


class Idf:
    def __init__(self, table: np.ndarray | None = None):
        self.table = table

    def __call__(self, stem: str) -> float:
        if any(c.isdigit() for c in stem):
            return 8.0
        if self.table is None:
            return 4.0 + min(len(stem), 7) * 0.3
        return float(self.table[T.bucket(stem, IDF_BUCKETS)])


@dataclass
class QueryInfo:
    text: str
    stems: list[str]
    weights: dict[str, float]
    ids: list[str]
    qty: list[tuple[float, str, int]]
    qtype: str
    lang: str
    premise: str  # declarative part of the query ("" if none)
    premise_stems: set[str]
    premise_neg: bool
    emb: np.ndarray | None = None
    bigrams: set[tuple[str, str]] = field(default_factory=set)
    focus: str = ""  # the attribute asked about ("warranty" in "what is the warranty on ...")


_FOCUS = re.compile(
    r"^\s*(?:what|which|quel|quelle|quels|quelles)\s+(?:is|are|was|were|est|sont)?\s*(?:the|a|an|le|la|les|l')?\s*([a-z][a-z-]+)"
    r"|^\s*how (?:much|many)\s+([a-z][a-z-]+)|^\s*combien de\s+([a-z][a-z-]+)"
)


# Words that name the shape of an answer rather than the thing asked about ("What is the name
# of ...", "What kind of ...", "What two ..."): not a focus.
_GENERIC_FOCUS = set("""
name names term terms kind kinds type types sort sorts example examples number numbers amount way ways
method methods general common typical main usual most least best first second third last other others
one two three four five six seven several many few different difference differences reason reasons
purpose result results word words expression phrase thing things part parts form forms process
nom terme type genre exemple nombre facon raison
""".split())


def _focus(query: str) -> str:
    m = _FOCUS.search(T.fold(query))
    if not m:
        return ""
    w = next(g for g in m.groups() if g)
    if w in T.STOP or w in T.QWORDS or w in _GENERIC_FOCUS or len(w) < 4:
        return ""
    return T.stem(w)


@dataclass
class PassageInfo:
    text: str
    title: str
    sentences: list[str]
    sent_stems: list[set[str]]
    all_stems: set[str]
    title_stems: set[str]
    ids: list[str]
    sent_ids: list[set[str]]
    sent_qty: list[list[tuple[float, str, int]]]
    lang: str
    sent_emb: np.ndarray | None = None
    emb: np.ndarray | None = None
    bigrams: set[tuple[str, str]] = field(default_factory=set)


_Q_START = re.compile(
    r"^\s*(what|which|who|whom|whose|when|where|why|how|is|are|was|were|do|does|did|can|could|should|would|will|"
    r"must|may|shall|has|have|quel|quelle|quels|quelles|qui|quand|ou|comment|pourquoi|combien|est-ce|faut-il|"
    r"dois-je|peut-on|puis-je|wie|was|wer|wann|wo|warum|que|cual|cuando|donde)\b"
)


# A clause that only says where the question applies ("In PostgreSQL 18,", "Under GC guardrail 11,",
# "PostgreSQL 17 :") scopes the question; it claims nothing the passages could contradict.
_SCOPE_LEAD = re.compile(r"^(in|on|for|under|with|within|per|according to|from|at|dans|pour|sous|selon|d'apres|"
                         r"avec|chez|sur|en|a|au|aux|pendant)\s")


# a verb makes the clause a claim ("in 2020 the limit was raised"), however short
_CLAIM_VERB = re.compile(r"\b(is|are|was|were|be|been|has|have|had|does|do|did|says?|said|requires?|allows?|lets|"
                         r"est|sont|etait|a|ont|avait|doit|doivent|peut|peuvent|dit|exige|permet|\w+ed)\b")


def _is_scope(clause: str, raw: str) -> bool:
    words = clause.split()
    if _SCOPE_LEAD.match(clause) and len(words) <= 5 and not _CLAIM_VERB.search(" ".join(words[1:])):
        return True
    # names and numbers only: every word capitalised or holding a digit in the query as written
    raw_words = re.findall(r"[\w'’./-]+", raw)
    return bool(raw_words) and len(raw_words) <= 4 and all(w[0].isupper() or any(c.isdigit() for c in w) for w in raw_words)


def _premise(query: str) -> str:
    """The declarative clauses of a query: 'P-200 bearings need grease every 500 hours, how much do I add?'
    -> 'p-200 bearings need grease every 500 hours'. Leading 'since/given that/as' are dropped; a clause
    that ends with '?' is a question, not a premise."""
    q = T.fold(query).strip()
    pieces = re.split(r"([,;:.?!]|\s[-\u2013\u2014])(?:\s+|$)", q)
    out = []
    for i in range(0, len(pieces), 2):
        p = pieces[i].strip()
        punct = pieces[i + 1] if i + 1 < len(pieces) else ""
        if not p:
            continue
        if punct == "?" or (not punct and i + 1 >= len(pieces) and _Q_START.match(p)):
            continue
        p2 = re.sub(r"^(since|given that|given|as|because|if|knowing that|now that|puisque|comme|vu que|etant donne que|sachant que|da|weil)\s+", "", p)
        if _Q_START.match(p2) and p2 == p and punct.strip() not in (".", ";", "-", "\u2013", "\u2014"):
            continue
        if len(T.content_stems(p2)) >= 2 and not _is_scope(p2, _raw_clause(query, p)):
            out.append(p2)
    if not out and any(u and u != "year" for (_, u, _) in T.quantities(query)):
        # "Should I grease it every 500 hours?" presupposes the number
        out.append(q.strip(" ?!."))
    return " ; ".join(out)


def _raw_clause(query: str, folded: str) -> str:
    """The clause of the query as written (case kept) whose folded form is `folded`, or "" if not found."""
    n = len(folded.split())
    for m in re.finditer(r"[^,;:.?!]+", query):
        c = m.group().strip()
        if T.fold(c).strip() == folded and len(c.split()) == n:
            return c
    return ""


def analyse_query(query: str, idf: Idf) -> QueryInfo:
    stems = list(dict.fromkeys(s for s in T.content_stems(query) if s not in T.QWORDS))
    weights = {s: idf(s) for s in stems}
    prem = _premise(query)
    return QueryInfo(
        text=query,
        stems=stems,
        weights=weights,
        ids=list(dict.fromkeys(T.identifiers(query))),
        qty=T.quantities(query),
        qtype=T.qtype(query),
        lang=T.language(query),
        premise=prem,
        premise_stems=set(T.content_stems(prem)) if prem else set(),
        premise_neg=bool(T.NEG_RE.search(prem)) if prem else False,
        bigrams=set(zip(stems, stems[1:])),
        focus=_focus(query),
    )


def analyse_passage(text: str, title: str = "") -> PassageInfo:
    sents = T.split_sentences(text)
    sent_stems = [set(T.content_stems(s)) for s in sents]
    all_stems = set().union(*sent_stems) if sent_stems else set()
    title_stems = set(T.content_stems(title)) if title else set()
    st = T.content_stems(text)
    return PassageInfo(
        text=text,
        title=title,
        sentences=sents,
        sent_stems=sent_stems,
        all_stems=all_stems | title_stems,
        title_stems=title_stems,
        ids=list(dict.fromkeys(T.identifiers(title + "\n" + text))),
        sent_ids=[set(T.identifiers(s)) for s in sents],
        sent_qty=[T.quantities(s) for s in sents],
        lang=T.language(text),
        bigrams=set(zip(st, st[1:])),
    )


def _cov(q: QueryInfo, stems: set[str], exclude: set[str] | None = None) -> float:
    tot = 0.0
    hit = 0.0
    for s, w in q.weights.items():
        if exclude and s in exclude:
            continue
        tot += w
        if s in stems:
            hit += w
    return hit / tot if tot > 0 else 0.0


def _ids_similar(a: str, b: str) -> bool:
    if a == b:
        return False
    pa, pb = T.id_prefix(a), T.id_prefix(b)
    if pa and pa == pb:
        return True
    return T.id_shape(a) == T.id_shape(b)


def _type_ok(qtype: str, sent: str) -> float:
    f = T.fold(sent)
    has_num = bool(re.search(r"\d", f)) or bool(re.search(r"\b(one|two|three|four|five|six|seven|eight|nine|ten|hundred|thousand|million|billion|dozen|several|few)\b", f))
    if qtype == "freq":
        # a frequency is a time span said with a frequency word ("every 2,000 hours", "once a
        # month"); a step number or a model number next to "every" is not one
        spans = [u for (_, u, _) in T.quantities(sent) if T.UNIT_DIM.get(u.split("/")[0]) == "time" or "/" in u]
        return float(bool(T.FREQ_RE.search(f)) and bool(spans))
    if qtype == "quant":
        return float(has_num)
    if qtype == "when":
        return float(bool(T.DATE_RE.search(f)))
    if qtype == "who":
        return float(T.has_person_or_org(sent))
    if qtype == "where":
        return float(T.has_person_or_org(sent) or bool(re.search(r"\b(in|at|near|dans|a|en)\b", f)))
    if qtype == "define":
        return float(bool(T.DEFINE_RE.search(f)))
    if qtype in ("directive", "yesno"):
        return float(bool(T.DIRECTIVE_RE.search(f)) or bool(re.match(r"^\s*(\d+[.)]\s*)?[A-Z][a-z]+\s", sent) and len(sent) < 200))
    return 1.0


REL_FEATURES = (
    "sim_pass", "sim_max", "sim_2nd", "sim_at_lex", "lex_pass", "lex_best", "lex_win", "bigram",
    "q_nterms", "miss_rare", "n_miss_rare", "q_has_id", "id_match", "id_conflict", "type_ok_best",
    "type_ok_pass", "novel_best", "sim_x_lex", "title_cov", "p_len", "neg_mismatch_best", "ant_best",
    "q_num_missing", "focus_missing",
) + tuple("qt_" + q for q in T.QTYPES)

# features the cross-lingual model uses (lexical coverage is meaningless across languages)
XLING_FEATURES = ("sim_pass", "sim_max", "sim_2nd", "q_has_id", "id_match", "id_conflict", "type_ok_pass", "p_len") + tuple(
    "qt_" + q for q in T.QTYPES
)

CON_FEATURES = (
    "has_premise", "q_has_qty", "num_conflict", "num_agree", "unit_conflict", "bare_conflict", "bare_agree",
    "year_conflict", "id_claim_conflict", "neg_mismatch", "antonym", "lex_best", "sim_max", "prem_cov_best",
    "num_conflict_x_agree",
)


def rel_features(q: QueryInfo, p: PassageInfo, idf: Idf) -> dict[str, float]:
    f: dict[str, float] = {}
    sims = (p.sent_emb @ q.emb) if (p.sent_emb is not None and q.emb is not None) else np.zeros(len(p.sentences))
    order = np.argsort(-sims)
    f["sim_pass"] = float(p.emb @ q.emb) if (p.emb is not None and q.emb is not None) else float(sims.max())
    f["sim_max"] = float(sims[order[0]])
    f["sim_2nd"] = float(sims[order[1]]) if len(order) > 1 else f["sim_max"]
    covs = [_cov(q, ss | p.title_stems) * 0.25 + _cov(q, ss) * 0.75 for ss in p.sent_stems]
    lb = int(np.argmax(covs))
    f["lex_best"] = covs[lb]
    f["sim_at_lex"] = float(sims[lb])
    f["lex_pass"] = _cov(q, p.all_stems)
    win = 0.0
    for i in range(len(p.sent_stems) - 1):
        win = max(win, _cov(q, p.sent_stems[i] | p.sent_stems[i + 1]))
    f["lex_win"] = max(win, covs[lb])
    f["bigram"] = (len(q.bigrams & p.bigrams) / len(q.bigrams)) if q.bigrams else 0.0
    f["q_nterms"] = math.log1p(len(q.stems))
    # the rarest query terms missing from the passage
    missing = [w for s, w in q.weights.items() if s not in p.all_stems]
    f["miss_rare"] = max(missing) / 10.0 if missing else 0.0
    f["n_miss_rare"] = float(sum(1 for w in missing if w > 6.0))
    f["q_has_id"] = float(bool(q.ids))
    pid = set(p.ids)
    if q.ids:
        f["id_match"] = sum(1 for i in q.ids if i in pid) / len(q.ids)
        conflict = 0.0
        for i in q.ids:
            if i not in pid and any(_ids_similar(i, j) for j in pid):
                conflict = 1.0
        f["id_conflict"] = conflict
    else:
        f["id_match"] = 0.0
        f["id_conflict"] = 0.0
    top = [lb] + [int(i) for i in order[:2] if int(i) != lb]
    f["type_ok_best"] = max(_type_ok(q.qtype, p.sentences[i]) for i in top[:2])
    f["type_ok_pass"] = max(_type_ok(q.qtype, s) for s in p.sentences)
    bs = p.sent_stems[lb]
    f["novel_best"] = (len(bs - set(q.stems)) / max(1, len(bs))) if bs else 0.0
    f["sim_x_lex"] = f["sim_max"] * f["lex_best"]
    f["title_cov"] = _cov(q, p.title_stems) if p.title_stems else 0.0
    f["p_len"] = math.log1p(len(p.text)) / 8.0
    # SQuAD-2-style traps: a negation or an antonym the best sentence does not share, a number it lacks
    qf = T.fold(q.text)
    bf = T.fold(p.sentences[lb])
    f["neg_mismatch_best"] = float(bool(T.NEG_RE.search(qf)) != bool(T.NEG_RE.search(bf)))
    qtok, btok = set(T.tokens(qf)), set(T.tokens(bf))
    f["ant_best"] = float(any(a in _ANT and a not in btok and (_ANT[a] & btok) for a in qtok))
    f["focus_missing"] = float(bool(q.focus) and q.focus not in p.all_stems)
    qnums = {t for t in qtok if t.isdigit()}
    f["q_num_missing"] = float(bool(qnums) and not qnums <= set(T.tokens(T.fold(p.text))))
    for qt in T.QTYPES:
        f["qt_" + qt] = float(q.qtype == qt)
    return f


_TO_BASE = {
    "s": 1, "min": 60, "h": 3600, "d": 86400, "wk": 604800, "mo": 2.63e6, "yr": 3.156e7,
    "mg": 1e-3, "g": 1, "kg": 1e3, "lb": 453.6, "oz": 28.35, "t": 1e6,
    "mL": 1e-3, "L": 1, "gal": 3.785, "m3": 1e3,
    "mm": 1e-3, "cm": 1e-2, "m": 1, "km": 1e3, "ft": 0.3048, "in": 0.0254, "mi": 1609.0,
    "Pa": 1e-3, "kPa": 1, "MPa": 1e3, "bar": 100, "psi": 6.895,
    "W": 1, "kW": 1e3, "MW": 1e6, "hp": 745.7, "V": 1, "kV": 1e3,
}


def _near_value(a: float, b: float) -> bool:
    return abs(a - b) <= 1e-6 * max(1.0, abs(a), abs(b))


_ANT = {}
for _a, _b in ANTONYMS:
    _ANT.setdefault(_a, set()).add(_b)
    _ANT.setdefault(_b, set()).add(_a)


def con_features(q: QueryInfo, p: PassageInfo, rel: dict[str, float]) -> dict[str, float]:
    f = {k: 0.0 for k in CON_FEATURES}
    f["has_premise"] = float(bool(q.premise))
    f["lex_best"] = rel["lex_best"]
    f["sim_max"] = rel["sim_max"]
    if not q.premise:
        return f
    prem_text = q.premise
    prem_qty = T.quantities(prem_text)
    f["q_has_qty"] = float(bool(prem_qty))
    num_stems = {s for s in q.stems if any(c.isdigit() for c in s)}
    # context coverage of each passage sentence by the premise words (numbers excluded)
    ctx = []
    pw = {s: q.weights.get(s, 5.0) for s in q.premise_stems if s not in num_stems}
    totw = sum(pw.values()) or 1.0
    for ss in p.sent_stems:
        sset = ss | p.title_stems
        ctx.append(sum(w for s, w in pw.items() if s in sset) / totw)
    f["prem_cov_best"] = max(ctx) if ctx else 0.0
    # Each stated quantity is checked on its own: "30 g every 1,000 hours" is contradicted by a
    # passage that says 15 g every 1,000 hours, although one of its two numbers agrees.
    for (v, u, _) in prem_qty:
        ub = u.split("/")[0]
        dim = T.UNIT_DIM.get(ub, u)
        bv = v * _TO_BASE[ub] if ub in _TO_BASE else None
        q_agree = q_conflict = q_unit = b_agree = b_conflict = 0.0
        for si, sq in enumerate(p.sent_qty):
            c = ctx[si]
            if u == "year" or u == "":
                same_unit = [pv for (pv, pu, _) in sq if pu == u]
                if not same_unit:
                    continue
                agree = any(_near_value(v, x) for x in same_unit)
                if u == "year":
                    if not agree:
                        f["year_conflict"] = max(f["year_conflict"], c)
                elif agree:
                    b_agree = max(b_agree, c)
                else:
                    b_conflict = max(b_conflict, c)
                continue
            comparable = []
            for (pv, pu, _) in sq:
                pb = pu.split("/")[0]
                if pu == u:
                    comparable.append((pv, v, pu))
                elif bv is not None and pb in _TO_BASE and T.UNIT_DIM.get(pb) == dim and ("/" in pu) == ("/" in u):
                    comparable.append((pv * _TO_BASE[pb], bv, pu))
            if not comparable:
                continue
            if any(abs(a - b) <= 0.02 * max(abs(a), abs(b), 1e-9) for a, b, _ in comparable):
                q_agree = max(q_agree, c)
            else:
                q_conflict = max(q_conflict, c)
                if any(_near_value(pv, v) and pu != u for (pv, pu, _) in sq):
                    q_unit = max(q_unit, c)
        # a sentence that states this quantity's own value in at least as close a context confirms it
        if q_agree >= q_conflict:
            q_conflict = q_unit = 0.0
        if b_agree >= b_conflict:
            b_conflict = 0.0
        f["num_agree"] = max(f["num_agree"], q_agree)
        f["num_conflict"] = max(f["num_conflict"], q_conflict)
        f["unit_conflict"] = max(f["unit_conflict"], q_unit)
        f["bare_agree"] = max(f["bare_agree"], b_agree)
        f["bare_conflict"] = max(f["bare_conflict"], b_conflict)
    f["num_conflict_x_agree"] = f["num_conflict"] * (1.0 - f["num_agree"])
    # identifier claimed in the premise, absent from the passage, where a similar one sits in context
    prem_ids = set(T.identifiers(prem_text))
    pid = set(p.ids)
    for i in prem_ids:
        if i in pid:
            continue
        for si, sids in enumerate(p.sent_ids):
            if any(_ids_similar(i, j) for j in sids):
                f["id_claim_conflict"] = max(f["id_claim_conflict"], ctx[si])
    # negation / antonym mismatch with the best-aligned sentence
    if ctx:
        bi = int(np.argmax(ctx))
        if ctx[bi] >= 0.5:
            sent_f = T.fold(p.sentences[bi])
            sneg = bool(T.NEG_RE.search(sent_f))
            if sneg != q.premise_neg:
                f["neg_mismatch"] = ctx[bi]
            qtok = set(T.tokens(prem_text))
            stok = set(T.tokens(sent_f))
            for a in qtok:
                if a in _ANT and a not in stok and (_ANT[a] & stok):
                    f["antonym"] = ctx[bi]
                    break
    # the passage is about a sibling unit (P-300 for a P-200 premise): its numbers do not contradict
    # (the subject is what the title / first sentence names)
    subj = set(T.identifiers(p.title + "\n" + (p.sentences[0] if p.sentences else "")))
    qids = set(T.identifiers(prem_text)) or set(q.ids)
    if qids and subj and not (qids & subj) and any(_ids_similar(i, j) for i in qids - set(p.ids) for j in subj):
        for k in ("num_conflict", "unit_conflict", "bare_conflict", "year_conflict", "neg_mismatch", "antonym",
                  "id_claim_conflict"):
            f[k] = 0.0
        f["num_conflict_x_agree"] = 0.0
        f["subject_mismatch"] = 1.0
    return f


def vec(f: dict[str, float], names: tuple[str, ...]) -> np.ndarray:
    return np.array([f.get(n, 0.0) for n in names], dtype=np.float64)
