"""LocalJudge: the default offline judge (CPU, no network, calibrated probabilities)."""

from __future__ import annotations

import hashlib
import json
import time

import numpy as np

from ...models import PassageScores
from ..base import JudgeInput, Judgement, PassageJudgement
from ... import text as T
from .features import (
    _cov,
    _ids_similar,
    analyse_passage,
    analyse_query,
    con_features,
    rel_features,
    vec,
)
from . import lexicons
from .lexicons import ARCHIVED_STATUS
from .reader_stage import ReaderStage, load_reader_stage
from .model import (
    EMBED_TOP_K,
    InjectionReader,
    Weights,
    injection_sentences,
    load_injection_reader,
    load_weights,
    superseded_raw,
)


def features_version() -> str:
    """Passage features stored at ingest are reused only while this matches (with the weights' version):
    the code's version plus a digest of the cue patterns and of the injection question's constants, so
    that editing a lexicon refreshes them even when the fitted weights stay the same."""
    cues = [lexicons.INJECTION_STRONG, lexicons.INJECTION_WEAK, lexicons.SUPERSEDED_STRONG, lexicons.SUPERSEDED_WEAK,
            EMBED_TOP_K, "units: lines, sentences, clauses and asides addressed to an AI (model.injection_sentences) 2"]
    rd = load_injection_reader()
    cues.append(rd.version if rd is not None else "")
    return "5-" + hashlib.sha256(json.dumps(cues).encode()).hexdigest()[:8]


FEATURES_VERSION = features_version()
# cascade: passages the relevance head puts below this are not read (the gate drops them at 0.45)
READER_MIN_REL = 0.2
FOCUS_MISSING_EVIDENCE_MAX = 0.5
# the reader's contradiction head applies to passages at least this relevant (the gate's default)
CON_READER_MIN_REL = 0.45
# the question names a unit (P-200) and the passage is about a sibling (P-300) and never names it
OTHER_UNIT_EVIDENCE_MAX = 0.05
ANSWER_TYPE_MISSING_EVIDENCE_MAX = 0.5
CASCADE_SIM_FLOOR = 0.15
CASCADE_LEX_FLOOR = 0.2


def _passage_scores(w: Weights, text: str, title: str, embedder=None) -> dict:
    rd = load_injection_reader(w.directory)
    if rd is None:
        raise FileNotFoundError(f"the injection reader's weights are missing from {w.directory}")
    p_inj, sents, logits = _injection_reading(rd, injection_sentences(text), title, embedder)
    fs = superseded_raw(text, title)
    p_sup = float(w.heads["sup"].predict(vec(fs, w.heads["sup"].names))[0])
    out = {
        "v": FEATURES_VERSION,
        "w": w.version,
        "inj": round(p_inj, 6),
        "sup": round(p_sup, 5),
    }
    if logits.size:
        i = int(np.argmax(logits))
        if p_inj > 0.5:
            out["inj_sentence"] = sents[i][:300]
    return out


def _injection_reading(rd: InjectionReader, units: list[str], title: str, embedder=None):
    """The injection question: a passage is as much addressed to an AI as its most AI-addressed unit (the
    title, each line, sentence and clause: `injection_sentences`), whatever surrounds it; the reader's
    maximum logit through its Platt scaling (`training/injection.py`). Returns (probability, units with
    the title first, their logits)."""
    sents = [title] + units if title else list(units)
    logits = rd.logits(sents, embedder)
    p_inj = rd.probability(float(np.max(logits))) if logits.size else 0.001
    return p_inj, sents, logits


def passage_features(text: str, title: str = "", weights: Weights | None = None, embedder=None,
                     vector=None) -> dict:
    """Passage-only signals (prompt injection, superseded), computed once at ingest and handed
    back to the judge as `JudgeInput.passage_features`. Small and JSON-serialisable. The injection
    reading embeds the passage's `EMBED_TOP_K` most suspicious units only. (`vector`, the passage's
    stored vector, is accepted for callers that have it; the reading does not need it.)"""
    w = weights or load_weights()
    return _passage_scores(w, text or "", title or "", embedder)


class LocalJudge:
    name = "local"

    def __init__(self, embedder=None, weights_dir=None, reader: bool = True, rules: bool | None = None,
                 contradiction: bool = False):
        """`reader=True` (the default; `SOURCEGATE_READER=false` turns it off) adds the reader and yes/no
        stages; without them the judge uses the interpretable features alone. `rules=False` drops the
        focus and frequency caps of the evidence question (by default they apply, with the reader too:
        the demo's grease-interval question still needs the frequency cap). `contradiction=True` adds
        the reader's contradiction head."""
        if embedder is None:
            from ...embed import get_embedder

            embedder = get_embedder()
        self.embedder = embedder
        self._weights_dir = weights_dir
        self._w: Weights | None = None
        self._use_reader = reader
        self._rules = rules
        # the reader's contradiction head (`con_rd`): opt-in (SOURCEGATE_READER_CONTRADICTION=true); it
        # separates false premises better but flags some plain questions as contradicted
        self._contradiction = contradiction
        self._reader = None

    @property
    def reader(self) -> ReaderStage | None:
        if not self._use_reader:
            return None
        if self._reader is None:
            self._reader = load_reader_stage(self._weights_dir) or False
        return self._reader or None

    @property
    def weights(self) -> Weights:
        if self._w is None:
            self._w = load_weights(self._weights_dir)
        return self._w

    def warm(self) -> None:
        """Load the weights and the reader now rather than on the first question (a server does
        this before it says it is ready); a missing or corrupt file raises here."""
        self.weights
        self.reader

    @property
    def model_id(self) -> str:
        rd = self.reader
        return f"local-judge-{self.weights.version}" + (f"+reader-{rd.version}" if rd else "")

    def judge(self, query: str, passages: list[JudgeInput]) -> Judgement:
        return self.judge_detailed(query, passages)[0]

    def judge_detailed(self, query: str, passages: list[JudgeInput]) -> tuple[Judgement, dict[int, dict]]:
        """The judgement, and per passage index the interpretable heads' probabilities before the
        reader ("evi_base", "rel", "con", ...) for fitting the reader's heads."""
        t0 = time.perf_counter()
        try:
            w = self.weights
        except Exception as e:  # weights missing or corrupt: every passage fails closed
            return Judgement(
                model="local-judge-unavailable",
                results=[PassageJudgement(p.id, None, f"local judge weights unavailable: {e}") for p in passages],
            ), {}
        results: list[PassageJudgement | None] = [None] * len(passages)
        infos = {}
        for k, p in enumerate(passages):
            try:
                infos[k] = analyse_passage(p.text or "", p.title or "")
            except Exception as e:
                results[k] = PassageJudgement(p.id, None, f"feature extraction failed: {type(e).__name__}: {e}")
        try:
            q = analyse_query(query or "", w.idf)
            q.emb = np.asarray(self.embedder.embed([query or "."]), dtype=np.float32)[0]
            # Sentence embeddings are most of the judge's time. A passage far from the query by
            # its stored vector and sharing few of its words is judged on that vector alone.
            texts: list[str] = []
            spans = {}
            shallow = {}
            for k, info in infos.items():
                pv = _stored_vector(passages[k].embedding, q.emb.shape[0])
                if (pv is not None and info.lang == q.lang and float(pv @ q.emb) < CASCADE_SIM_FLOOR
                        and _cov(q, info.all_stems) < CASCADE_LEX_FLOOR):
                    shallow[k] = pv
                    continue
                spans[k] = (len(texts), len(texts) + len(info.sentences))
                texts.extend(info.sentences)
            embs = (np.asarray(self.embedder.embed(texts), dtype=np.float32) if texts
                    else np.zeros((0, q.emb.shape[0]), dtype=np.float32))
            for k, pv in shallow.items():
                spans[k] = (len(embs), len(embs) + len(infos[k].sentences))
                embs = np.vstack([embs, np.repeat(pv[None, :], len(infos[k].sentences), axis=0)])
        except Exception as e:
            return Judgement(
                model=self.model_id,
                results=[r or PassageJudgement(p.id, None, f"embedding failed: {type(e).__name__}: {e}")
                         for r, p in zip(results, passages)],
            ), {}
        xmaps = {}
        xl = [k for k, info in infos.items() if info.lang != q.lang]
        if xl:
            try:
                xmaps = _cross_lingual_maps(self.embedder, q, {k: infos[k] for k in xl})
            except Exception:
                xmaps = {}
        base: dict[int, dict] = {}
        for k, info in infos.items():
            p = passages[k]
            try:
                base[k] = self._base_scores(w, q, info, p, embs[spans[k][0]:spans[k][1]], xmaps.get(k, {}))
            except Exception as e:
                results[k] = PassageJudgement(p.id, None, f"local judge failed: {type(e).__name__}: {e}")
        readings = self._reader_stage(query, q, passages, base, infos)
        self._polar_stage(q, base, readings, infos)
        _other_unit_stage(q, base, infos)
        _twin_stage(q, base, passages, w)
        _off_subject_stage(base, w)
        for k, b in base.items():
            p = passages[k]
            try:
                scores = PassageScores(
                    is_relevant=_clip(b["rel"]),
                    contains_answer_evidence=_clip(b["evi"]),
                    contradicts_query_premise=_clip(b["con"]),
                    contains_prompt_injection=_clip(b["inj"]),
                    is_superseded=_clip(b["sup"]),
                )
                results[k] = PassageJudgement(p.id, scores, quote=b.get("quote"), readings=_readings(b, readings.get(k)))
            except Exception as e:
                results[k] = PassageJudgement(p.id, None, f"local judge failed: {type(e).__name__}: {e}")
        return Judgement(
            model=self.model_id,
            results=[r for r in results],
            usage={"passages": len(passages), "sentences_embedded": len(texts), "passages_read": len(readings),
                   "latency_ms": round((time.perf_counter() - t0) * 1000, 1)},
        ), base

    def _base_scores(self, w: Weights, q, info, p: JudgeInput, sent_emb: np.ndarray, xmap: dict) -> dict:
        """The five probabilities from the interpretable features and the fitted heads."""
        info.sent_emb = sent_emb
        info.emb = _passage_vector(p.embedding, info.sent_emb)
        xling = q.lang != info.lang
        qk = _translated_query(q, xmap, w.idf) if xling else q
        fr = rel_features(qk, info, w.idf)
        if xling:
            # similarities across languages are systematically lower (measured on translations)
            sc = float(w.meta.get("xling_sim_scale", 1.0)) or 1.0
            for name in ("sim_pass", "sim_max", "sim_2nd", "sim_at_lex"):
                fr[name] = min(1.0, fr[name] / sc)
            fr["sim_x_lex"] = fr["sim_max"] * fr["lex_best"]
        if xling and not xmap:
            # no query word could be matched across languages: embeddings only
            p_rel = float(w.heads["rel_x"].predict(vec(fr, w.heads["rel_x"].names))[0])
            p_evi = float(w.heads["evi_x"].predict(vec(fr, w.heads["evi_x"].names))[0])
        else:
            p_rel = float(w.heads["rel"].predict(vec(fr, w.heads["rel"].names))[0])
            p_evi = float(w.heads["evi"].predict(vec(fr, w.heads["evi"].names))[0])
        # The question names what it asks about ("What is the warranty on ...") and the passage never
        # mentions it: it cannot state the answer, however close its subject. Not across languages (a
        # missing word proves nothing there), nor when the asked quantity is stated ("What torque ..."
        # answered by "25 N·m"). And "How often ...?" is answered by a frequency in the sentences about
        # the subject. Applied in `_reader_stage` unless the reader reads the passage.
        caps = []
        if not xling and fr.get("focus_missing") and not (q.qtype in ("quant", "freq") and fr.get("type_ok_best")):
            caps.append(FOCUS_MISSING_EVIDENCE_MAX)
        if q.qtype == "freq" and not fr.get("type_ok_best"):
            caps.append(ANSWER_TYPE_MISSING_EVIDENCE_MAX)
        if q.premise:
            fc = con_features(qk, info, fr)
            p_con = float(w.heads["con"].predict(vec(fc, w.heads["con"].names))[0])
            if fc.get("subject_mismatch"):
                # the passage is about a sibling unit: it cannot contradict this premise
                p_con = min(p_con, w.heads["con"].no_premise_p)
        else:
            p_con = w.heads["con"].no_premise_p
        pf = p.passage_features
        if not (isinstance(pf, dict) and pf.get("v") == FEATURES_VERSION and pf.get("w") == w.version
                and "inj" in pf and "sup" in pf):
            pf = _passage_scores(w, p.text or "", p.title or "", self.embedder)
        p_sup = float(pf["sup"])
        if p.status and T.fold(str(p.status)).strip() in ARCHIVED_STATUS:
            p_sup = max(p_sup, 0.97)
        return {"qtype": q.qtype, "polar": T.is_polar(q.text), "rel": p_rel, "evi": p_evi, "evi_base": p_evi, "caps": caps, "con": p_con, "inj": float(pf["inj"]),
                "sup": p_sup, "xling": xling, "has_premise": bool(q.premise),
                "subject_mismatch": bool(q.premise and fc.get("subject_mismatch"))}

    def _reader_stage(self, query: str, q, passages: list[JudgeInput], base: dict, infos: dict) -> dict:
        """The reader reads the passages (any language: it is multilingual) that the relevance head keeps
        above `READER_MIN_REL`, in one batch; its readings become inputs of the evidence head, and the
        sentence holding its answer span becomes the passage's quote. Then the focus and frequency caps.
        Returns the readings by passage index."""
        rd = self.reader
        todo = [k for k, b in base.items() if b["rel"] >= READER_MIN_REL] if rd is not None else []
        readings = {}
        if todo:
            try:
                readings = dict(zip(todo, rd.reader.read(query, [passages[k].text or "" for k in todo])))
            except Exception:
                readings = {}  # the reader failed: the interpretable heads answer alone
        use_con = self._contradiction or (rd is not None and rd.contradiction_by_default)
        for k, b in base.items():
            r = readings.get(k)
            if r is not None:
                b["evi"] = rd.evidence(b, r)
                # the NLI reading is trusted for a premise only on a passage in the question's language that
                # is about its subject: across languages and off the subject it contradicts too readily
                con = (rd.contradiction(b, r) if use_con and not b["xling"] and b["rel"] >= CON_READER_MIN_REL
                       else None)
                if con is not None and not b["subject_mismatch"]:
                    b["con"] = con
                if r.span_start >= 0 and r.span_margin > 0:
                    b["quote"] = sentence_at(infos[k].sentences, passages[k].text or "", r.span_start, r.span_end)
            if b["caps"] and self._rules is not False and not (r is not None and rd.caps_read):
                b["evi"] = min([b["evi"]] + b["caps"])
        return readings

    def _polar_stage(self, q, base: dict, readings: dict, infos: dict) -> None:
        """Yes/no questions: whether a passage settles the question, either way, is the reader's yes/no
        reading (a passage that says "never" is evidence), through its own calibrated head; the quote
        is the sentence nearest to the question, which is the one that settles it."""
        rd = self.reader
        if rd is None or not readings or not T.is_polar(q.text):
            return
        for k, r in readings.items():
            b = base[k]
            if b["xling"]:
                continue  # across languages the yes/no reading is near chance (measured): the reader stage decides
            b["evi"] = rd.polar_evidence(b, r)
            b["quote"] = settling_sentence(q, infos[k])


def _readings(b: dict, r) -> dict[str, float]:
    """The numbers behind a passage's scores: the interpretable heads' (before the reader), the flags the
    stages read, and the reader's readings when it read the passage."""
    out = {"evi_base": float(b.get("evi_base", b.get("evi", 0.0))), "rel_base": float(b.get("rel", 0.0)),
           "xling": float(bool(b.get("xling"))), "polar": float(bool(b.get("polar"))),
           "subject_mismatch": float(bool(b.get("subject_mismatch"))), "capped": float(bool(b.get("caps"))),
           "read": float(r is not None)}
    if r is not None:
        out.update({"p_answer": float(r.p_answer), "span_margin": float(r.span_margin),
                    "p_contradiction": float(r.p_contradiction), "p_entailment": float(r.p_entailment),
                    "p_yes": float(r.p_yes), "p_no": float(r.p_no), "p_open": float(r.p_open)})
    return out


def sentence_at(sents: list[str], text: str, start: int, end: int) -> str | None:
    """The sentence of `sents` (the passage's, in order) that holds text[start:end], or None."""
    span = text[start:end].strip()
    pos = 0
    for s in sents:
        i = text.find(s[:40], pos) if s else -1
        if i < 0:
            continue
        if i <= start < i + len(s) + 1 or (span and span in s and i >= start - len(s)):
            return None if T.is_heading(s) else s
        pos = i
    hits = [s for s in sents if span and span in s and not T.is_heading(s)]
    return hits[0] if hits else None


def settling_sentence(q, info) -> str | None:
    """The passage's sentence nearest to a yes/no question: embedding similarity, then shared words."""
    sents = info.sentences
    emb = getattr(info, "sent_emb", None)
    if not sents:
        return None
    qstems = {T.stem(t) for t in T.tokens(q.text) if t not in T.STOP and t not in T.QWORDS}
    best, best_score = None, -1e9
    for i, s in enumerate(sents):
        if T.is_heading(s):
            continue
        sim = float(emb[i] @ q.emb) if emb is not None and len(emb) == len(sents) else 0.0
        stems = {T.stem(t) for t in T.tokens(s)}
        score = sim + 0.1 * (len(qstems & stems) / max(1, len(qstems)))
        if len(s.split()) < 6:  # a label ("CR-5 roaster, daily maintenance.") settles nothing
            score -= 0.2
        if score > best_score:
            best, best_score = s, score
    return best


def _other_unit_stage(q, base: dict, infos: dict) -> None:
    """A passage about another unit than the one the question names is never evidence: the question names
    an identifier (P-200, CR-5) and the passage names none of the question's but a sibling of the same
    family (P-300, CR-7)."""
    if not q.ids:
        return
    qids = set(q.ids)
    for k, b in base.items():
        pids = set(infos[k].ids)
        if pids and not (qids & pids) and any(_ids_similar(i, j) for i in qids for j in pids):
            b["evi"] = min(b["evi"], OTHER_UNIT_EVIDENCE_MAX)
            b["quote"] = None


# below this relevance a passage is off the question's subject (the gate's default relevance threshold)
CON_MIN_REL = 0.45


def _off_subject_stage(base: dict, w: Weights) -> None:
    """A passage off the question's subject cannot contradict its premise: on real documents the
    contradiction head fires on passages that share a number or a negation with the question and
    nothing else."""
    for b in base.values():
        if b["rel"] < CON_MIN_REL:
            b["con"] = min(b["con"], w.heads["con"].no_premise_p)


def _twin_stage(q, base: dict, passages: list[JudgeInput], w: Weights) -> None:
    """A passage whose twin in the library (a near-copy for another product, platform or version, found
    at ingest) is the one the question names is neither evidence nor a contradiction: the question names
    a term that tells the twin apart and none of the passage's own."""
    from ...twins import twin_named

    for k, b in base.items():
        pf = passages[k].passage_features
        twins = pf.get("twins") if isinstance(pf, dict) else None
        if twins and twin_named(q.text, twins) is not None:
            b["evi"] = min(b["evi"], OTHER_UNIT_EVIDENCE_MAX)
            b["con"] = min(b["con"], w.heads["con"].no_premise_p)
            b["quote"] = None


XLING_WORD_MIN_SIM = 0.55


def _cross_lingual_maps(embedder, q, infos: dict) -> dict:
    """For a query in another language than some passages: match each query word to its nearest word in
    each passage with the multilingual embedder (word-level translation), keeping matches above
    XLING_WORD_MIN_SIM. Returns {passage index: {query stem: passage stem}}."""
    qwords = {}
    for t in T.tokens(q.text):
        if t in T.STOP or t in T.QWORDS or len(t) < 3 or any(c.isdigit() for c in t):
            continue
        qwords.setdefault(t, T.stem(t))
    if not qwords:
        return {}
    pwords: dict[str, int] = {}
    per: dict[int, list[int]] = {}
    for k, info in infos.items():
        idx = []
        for t in set(T.tokens(info.title + " " + info.text)):
            if t in T.STOP or len(t) < 3 or any(c.isdigit() for c in t) or "-" in t or "/" in t:
                continue
            if t not in pwords:
                if len(pwords) >= 800:
                    continue
                pwords[t] = len(pwords)
            idx.append(pwords[t])
        per[k] = idx
    qlist = list(qwords)
    plist = list(pwords)
    if not plist:
        return {}
    E = np.asarray(embedder.embed(qlist + plist), dtype=np.float32)
    S = E[: len(qlist)] @ E[len(qlist):].T
    out = {}
    for k, idx in per.items():
        if not idx:
            continue
        sub = S[:, idx]
        m = {}
        for i, w in enumerate(qlist):
            j = int(np.argmax(sub[i]))
            if sub[i, j] >= XLING_WORD_MIN_SIM:
                m[qwords[w]] = T.stem(plist[idx[j]])
        if m:
            out[k] = m
    return out


def _translated_query(q, m: dict, idf):
    if not m:
        return q
    import copy

    stems = list(dict.fromkeys(m.get(s, s) for s in q.stems))
    qk = copy.copy(q)
    qk.stems = stems
    qk.weights = {s: idf(s) for s in stems}
    qk.bigrams = set(zip(stems, stems[1:]))
    qk.premise_stems = {m.get(s, s) for s in q.premise_stems}
    qk.focus = m.get(q.focus, q.focus)
    return qk


def _clip(x: float) -> float:
    if not np.isfinite(x):
        raise ValueError("non-finite score")
    return float(min(1.0, max(0.0, x)))


def _stored_vector(stored, dim: int) -> np.ndarray | None:
    if stored is None:
        return None
    try:
        v = np.asarray(stored, dtype=np.float32).ravel()
    except Exception:
        return None
    n = float(np.linalg.norm(v)) if v.shape[0] == dim else 0.0
    return v / n if n > 0 else None


def _passage_vector(stored, sent_emb: np.ndarray) -> np.ndarray:
    if stored is not None:
        try:
            v = np.asarray(stored, dtype=np.float32).ravel()
            if v.shape[0] == sent_emb.shape[1]:
                n = float(np.linalg.norm(v))
                if n > 0:
                    return v / n
        except Exception:
            pass
    m = sent_emb.mean(axis=0)
    n = float(np.linalg.norm(m))
    return m / n if n > 0 else m
