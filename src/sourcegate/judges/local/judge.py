"""LocalJudge: the default offline judge (CPU, no network, calibrated probabilities)."""

from __future__ import annotations

import time

import numpy as np

from ...models import PassageScores
from ..base import JudgeInput, Judgement, PassageJudgement
from . import text as T
from .features import (
    CON_FEATURES,
    REL_FEATURES,
    XLING_FEATURES,
    analyse_passage,
    analyse_query,
    con_features,
    rel_features,
    vec,
)
from .lexicons import ARCHIVED_STATUS
from .model import (
    INJ_FEATURES,
    SUP_FEATURES,
    Weights,
    injection_raw,
    injection_sentences,
    load_weights,
    superseded_raw,
)

FEATURES_VERSION = 1


def _passage_scores(w: Weights, text: str, title: str) -> dict:
    sents = injection_sentences(text)
    logits = w.sentence_injection_logits(sents)
    fi = injection_raw(text, title, logits, sents)
    p_inj = float(w.heads["inj"].predict(vec(fi, INJ_FEATURES))[0])
    fs = superseded_raw(text, title)
    p_sup = float(w.heads["sup"].predict(vec(fs, SUP_FEATURES))[0])
    out = {
        "v": FEATURES_VERSION,
        "w": w.version,
        "inj": round(p_inj, 5),
        "sup": round(p_sup, 5),
    }
    if logits.size:
        i = int(np.argmax(logits))
        if p_inj > 0.5:
            out["inj_sentence"] = sents[i][:300]
    return out


def passage_features(text: str, title: str = "", weights: Weights | None = None) -> dict:
    """Passage-only signals (prompt injection, superseded), computed once at ingest and handed
    back to the judge as `JudgeInput.passage_features`. Small and JSON-serialisable."""
    w = weights or load_weights()
    return _passage_scores(w, text or "", title or "")


class LocalJudge:
    name = "local"

    def __init__(self, embedder=None, weights_dir=None):
        if embedder is None:
            from ...embed import get_embedder

            embedder = get_embedder()
        self.embedder = embedder
        self._weights_dir = weights_dir
        self._w: Weights | None = None

    @property
    def weights(self) -> Weights:
        if self._w is None:
            self._w = load_weights(self._weights_dir)
        return self._w

    @property
    def model_id(self) -> str:
        return f"local-judge-{self.weights.version}"

    def judge(self, query: str, passages: list[JudgeInput]) -> Judgement:
        t0 = time.perf_counter()
        try:
            w = self.weights
        except Exception as e:  # weights missing or corrupt: every passage fails closed
            return Judgement(
                model="local-judge-unavailable",
                results=[PassageJudgement(p.id, None, f"local judge weights unavailable: {e}") for p in passages],
            )
        results: list[PassageJudgement | None] = [None] * len(passages)
        infos = {}
        for k, p in enumerate(passages):
            try:
                infos[k] = analyse_passage(p.text or "", p.title or "")
            except Exception as e:
                results[k] = PassageJudgement(p.id, None, f"feature extraction failed: {type(e).__name__}: {e}")
        try:
            q = analyse_query(query or "", w.idf)
            texts = [query or "."]
            spans = {}
            for k, info in infos.items():
                spans[k] = (len(texts), len(texts) + len(info.sentences))
                texts.extend(info.sentences)
            embs = np.asarray(self.embedder.embed(texts), dtype=np.float32)
            q.emb = embs[0]
        except Exception as e:
            return Judgement(
                model=self.model_id,
                results=[r or PassageJudgement(p.id, None, f"embedding failed: {type(e).__name__}: {e}")
                         for r, p in zip(results, passages)],
            )
        for k, info in infos.items():
            p = passages[k]
            try:
                a, b = spans[k]
                info.sent_emb = embs[a:b]
                info.emb = _passage_vector(p.embedding, info.sent_emb)
                fr = rel_features(q, info, w.idf)
                xling = q.lang != info.lang
                if xling:
                    xr = vec(fr, XLING_FEATURES)
                    p_rel = float(w.heads["rel_x"].predict(xr)[0])
                    p_evi = float(w.heads["evi_x"].predict(xr)[0])
                else:
                    xr = vec(fr, REL_FEATURES)
                    p_rel = float(w.heads["rel"].predict(xr)[0])
                    p_evi = float(w.heads["evi"].predict(xr)[0])
                fc = con_features(q, info, fr)
                p_con = float(w.heads["con"].predict(vec(fc, CON_FEATURES))[0])
                pf = p.passage_features
                if not (isinstance(pf, dict) and pf.get("v") == FEATURES_VERSION and pf.get("w") == w.version
                        and "inj" in pf and "sup" in pf):
                    pf = _passage_scores(w, p.text or "", p.title or "")
                p_inj = float(pf["inj"])
                p_sup = float(pf["sup"])
                if p.status and T.fold(str(p.status)).strip() in ARCHIVED_STATUS:
                    p_sup = max(p_sup, 0.97)
                scores = PassageScores(
                    is_relevant=_clip(p_rel),
                    contains_answer_evidence=_clip(p_evi),
                    contradicts_query_premise=_clip(p_con),
                    contains_prompt_injection=_clip(p_inj),
                    is_superseded=_clip(p_sup),
                )
                results[k] = PassageJudgement(p.id, scores)
            except Exception as e:
                results[k] = PassageJudgement(p.id, None, f"local judge failed: {type(e).__name__}: {e}")
        return Judgement(
            model=self.model_id,
            results=[r for r in results],
            usage={"passages": len(passages), "sentences": len(texts) - 1,
                   "latency_ms": round((time.perf_counter() - t0) * 1000, 1)},
        )


def _clip(x: float) -> float:
    if not np.isfinite(x):
        raise ValueError("non-finite score")
    return float(min(1.0, max(0.0, x)))


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
