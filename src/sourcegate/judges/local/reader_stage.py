"""The reader's place in the local judge: its readings, with the interpretable heads' probabilities,
go through small calibrated heads fitted on data apart from both (`training/reader/stack.py`).

`reader_heads.json` holds those heads in the format of `local_judge.json` (standardise, logistic
regression, isotonic calibration):
- `evi_rd`: contains_answer_evidence from the reader's answerable probability, span margin and span
  form, and the interpretable evidence and relevance probabilities;
- `evi_polar`: the same for yes/no questions, from the reader's yes/no reading (how surely the passage
  settles the question, either way) with the answerable probability and the interpretable ones;
- `con_rd` (when fitted): contradicts_query_premise from the interpretable contradiction probability and
  the reader's NLI reading of the question, as a claim, against the passage (same forward pass).
The reader's NLI reading serves the written answer's check (`Reader.nli`).
"""

from __future__ import annotations

import hashlib
import json
import math
import threading
from pathlib import Path

import numpy as np

from .features import _type_ok, vec
from .model import WEIGHTS_DIR, Head
from .reader import ONNX_NAME, Reader, Reading, load_reader

HEADS_NAME = "reader_heads.json"
MARGIN_CLIP = 15.0


def _logit(p: float) -> float:
    p = min(1 - 1e-4, max(1e-4, float(p)))
    return math.log(p / (1 - p))


# question types whose answer has a recognisable form; the extracted span is checked against it
TYPED = ("freq", "quant", "when", "who")


def reader_features(base: dict, r: Reading) -> dict[str, float]:
    """`base`: the interpretable heads' probabilities for the passage ("evi_base", "rel") and the
    question's type ("qtype"). `span_ok`: the extracted span has the form the question asks for (a
    frequency for "how often", a number for "how much", a date for "when", a person or organisation for
    "who"); 1 for other questions."""
    qt = base.get("qtype", "")
    return {
        "span_ok": _type_ok(qt, r.span_context or r.span) if qt in TYPED else 1.0,
        "lo_evi": _logit(base["evi_base"]),
        "lo_rel": _logit(base["rel"]),
        "lo_ans": _logit(r.p_answer),
        "margin": float(np.clip(r.span_margin, -MARGIN_CLIP, MARGIN_CLIP)),
    }


POLAR_NAMES = ("lo_evi", "lo_rel", "lo_ans", "lo_settle")


def polar_features(base: dict, r: Reading) -> dict[str, float]:
    return {
        "lo_evi": _logit(base["evi_base"]),
        "lo_rel": _logit(base["rel"]),
        "lo_ans": _logit(r.p_answer),
        "lo_settle": _logit(1.0 - r.p_open),
    }


CON_NAMES = ("lo_con", "lo_rel", "lo_nli_con", "lo_nli_ent", "has_premise")


def con_features(base: dict, r: Reading) -> dict[str, float]:
    return {
        "lo_con": _logit(base["con"]),
        "lo_rel": _logit(base["rel"]),
        "lo_nli_con": _logit(r.p_contradiction),
        "lo_nli_ent": _logit(r.p_entailment),
        "has_premise": float(bool(base.get("has_premise"))),
    }


QTYPES = ("freq", "quant", "when", "who", "where", "define", "directive", "why", "how", "what", "yesno")


def stack_features(base: dict, r: Reading) -> dict[str, float]:
    """Every input a reader head may read: the interpretable heads' probabilities and flags of the pair
    (`base`), and the reader's readings; each head picks its own by name (`Head.names`)."""
    f = reader_features(base, r) | polar_features(base, r) | con_features(base, r)
    qt = base.get("qtype", "")
    f.update({
        "lo_yes": _logit(r.p_yes), "lo_no": _logit(r.p_no), "lo_open": _logit(r.p_open),
        "xling": float(bool(base.get("xling"))), "capped": float(bool(base.get("caps"))),
        "subject_mismatch": float(bool(base.get("subject_mismatch"))),
        **{f"q_{t}": float(qt == t) for t in QTYPES},
        "polar": float(bool(base.get("polar"))),
    })
    f["ans_x_rel"] = f["lo_ans"] * (f["lo_rel"] > 0)
    f["margin_pos"] = max(0.0, f["margin"])
    return f


class ReaderStage:
    def __init__(self, reader: Reader, heads: dict, raw: bytes):
        self.reader = reader
        self.heads = {k: Head(v) for k, v in heads["heads"].items()}
        self.prior = {k: Head(v) for k, v in (heads.get("prior_heads") or {}).items()}
        self.meta = heads
        self.version = hashlib.sha256(reader.version.encode() + raw).hexdigest()[:10]

    def _features(self, base: dict, r: Reading, polar: bool) -> dict[str, float]:
        """`stack_features`, and `lo_v1`: the logit of the earlier heads (`prior_heads`, fitted on SQuAD,
        CondaQA and hand-written procedures) that the heads fitted on real questions continue from."""
        f = stack_features(base, r)
        prior = self.prior.get("evi_polar" if polar else "evi_rd") or self.prior.get("evi_rd")
        if prior is not None:
            f["lo_v1"] = _logit(float(prior.predict(vec(f, prior.names))[0]))
        return f

    def evidence(self, base: dict, r: Reading) -> float:
        h = self.heads["evi_rd"]
        return float(h.predict(vec(self._features(base, r, False), h.names))[0])

    def contradiction(self, base: dict, r: Reading) -> float | None:
        """contradicts_query_premise from the reading, or None when no such head is shipped."""
        h = self.heads.get("con_rd")
        if h is None:
            return None
        return float(h.predict(vec(stack_features(base, r), h.names))[0])

    def polar_evidence(self, base: dict, r: Reading) -> float:
        """contains_answer_evidence for a yes/no question: does the passage settle it, either way."""
        h = self.heads.get("evi_polar")
        if h is None:
            return self.evidence(base, r)
        return float(h.predict(vec(self._features(base, r, True), h.names))[0])

    @property
    def caps_read(self) -> bool:
        """True when the heads read the focus and frequency caps as an input (`capped`): the caps are then
        not applied on top of them."""
        return bool(self.meta.get("caps_read"))

    @property
    def contradiction_by_default(self) -> bool:
        """True when the contradiction head was fitted on real questions and measured better than the
        interpretable head (see `reader_heads.json`'s report): it then applies without the opt-in."""
        return bool(self.meta.get("contradiction_by_default"))


_lock = threading.Lock()
_cache: dict[str, ReaderStage | None] = {}


def load_reader_stage(directory: Path | str | None = None) -> ReaderStage | None:
    """The shipped reader and its heads, or None when their files are absent."""
    key = str(directory or WEIGHTS_DIR)
    with _lock:
        if key not in _cache:
            d = Path(key)
            stage = None
            if (d / ONNX_NAME).exists() and (d / HEADS_NAME).exists():
                raw = (d / HEADS_NAME).read_bytes()
                reader = load_reader(d)  # one session per process, shared with the written answer's check
                stage = ReaderStage(reader, json.loads(raw), raw) if reader is not None else None
            _cache[key] = stage
        return _cache[key]
