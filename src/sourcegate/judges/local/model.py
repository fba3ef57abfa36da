"""Fitted weights of the local judge (JSON + .npz, no pickle) and the passage-only scorers."""

from __future__ import annotations

import collections
import functools
import hashlib
import json
import math
import re
import threading
from pathlib import Path

import numpy as np

from ... import text as T
from .features import Idf
from .lexicons import INJ_ADDRESSEE_RE, INJ_STRONG_RE, INJ_WEAK_RE, SUP_STRONG_RE, SUP_WEAK_RE

WEIGHTS_DIR = Path(__file__).resolve().parent.parent / "weights"
HEADS_FILE = "local_judge.json"
ARRAYS_FILE = "local_judge.npz"

INJ_CHAR = dict(analyzer="char_wb", ngram_range=(3, 5), n_features=1 << 17, alternate_sign=False, norm="l2")
INJ_WORD = dict(analyzer="word", ngram_range=(1, 2), n_features=1 << 16, alternate_sign=False, norm="l2",
                token_pattern=r"(?u)\b\w+\b")

# The passage model of the injection question (`inj`, `inj_sem`, `inj_one` heads of local_judge.json, and
# `injection_raw`, `injection_offtopic` below) is fitted by training/local_judge.py but no longer read by the
# judge: since 2026-12-05 the clause reader (`InjectionReader`) answers alone (bench/README.md).
INJ_FEATURES = ("s_max", "s_2nd", "s_mean_top3", "strong_n", "strong_max_sent", "weak_max_sent", "strong_at_max",
                "n_sent", "top_rest_lex")
# the second stage adds how far, in meaning, the most suspicious sentence is from the rest of the passage
INJ_SEM_FEATURES = INJ_FEATURES + ("top_rest_sim", "smax_x_off")
# a passage of one sentence is scored on that sentence alone
INJ_ONE_FEATURES = ("s_max", "strong_max_sent")
# the second stage runs only when the first stage's probability falls inside this band
INJ_CASCADE_BAND = (0.05, 0.95)
# the top sentence's share of a passage up to which the passage's own vector stands for the rest
INJ_TOP_SHARE_MAX = 0.25
SUP_FEATURES = ("strong_n", "strong_title", "strong_edge", "weak_n", "weak_title", "weak_edge", "strong_sent_short")


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-np.clip(x, -40, 40)))


class Head:
    """Standardise -> logistic regression -> monotone calibration (isotonic points, interpolated)."""

    def __init__(self, d: dict):
        self.names = tuple(d["names"])
        self.mean = np.asarray(d["mean"], dtype=np.float64)
        self.scale = np.asarray(d["scale"], dtype=np.float64)
        self.coef = np.asarray(d["coef"], dtype=np.float64)
        self.intercept = float(d["intercept"])
        self.hidden = None
        if d.get("hidden_w") is not None:
            self.hidden = (np.asarray(d["hidden_w"], dtype=np.float64), np.asarray(d["hidden_b"], dtype=np.float64))
        self.no_premise_p = float(d.get("no_premise_p", 0.01))
        self.iso_x = np.asarray(d.get("iso_x", []), dtype=np.float64)
        self.iso_y = np.asarray(d.get("iso_y", []), dtype=np.float64)

    def raw(self, X: np.ndarray) -> np.ndarray:
        Z = (np.atleast_2d(X) - self.mean) / self.scale
        if self.hidden is not None:
            Z = np.maximum(0.0, Z @ self.hidden[0] + self.hidden[1])
        return sigmoid(Z @ self.coef + self.intercept)

    def calibrate(self, p: np.ndarray) -> np.ndarray:
        if self.iso_x.size >= 2:
            p = np.interp(p, self.iso_x, self.iso_y)
        return np.clip(p, 0.001, 0.999)

    def predict(self, X: np.ndarray) -> np.ndarray:
        return self.calibrate(self.raw(X))


class Weights:
    def __init__(self, directory: Path = WEIGHTS_DIR):
        self.directory = Path(directory)
        jpath = self.directory / HEADS_FILE
        apath = self.directory / ARRAYS_FILE
        raw = jpath.read_bytes()
        araw = apath.read_bytes()
        self.version = hashlib.sha256(raw + araw).hexdigest()[:10]
        meta = json.loads(raw)
        self.meta = meta
        self.heads = {k: Head(v) for k, v in meta["heads"].items()}
        with np.load(apath) as z:
            # (the passage model's sentence weights, `inj_char` and `inj_word`, stay in the file for
            # training/local_judge.py; the judge reads the injection question from `InjectionReader`)
            self.idf = Idf(z["idf"].astype(np.float32))


@functools.lru_cache(maxsize=4096)
def reading_text(s: str) -> str:
    """What the injection readers read of a sentence: folded, without format characters, look-alike
    letters of other scripts mapped to the ASCII ones they imitate."""
    from ...normalize import skeleton

    return skeleton(s)


# The hashed n-grams of the sentences last read: the passage model and the sentence reader read the same
# sentences with the same (stateless) vectorisers, so each sentence is hashed once.
_NGRAMS: "collections.OrderedDict[str, tuple]" = collections.OrderedDict()
_NGRAMS_MAX = 512
_NGRAMS_LOCK = threading.Lock()


def _ngram_rows(sentences, vecs):
    with _NGRAMS_LOCK:
        rows = {s: _NGRAMS[s] for s in sentences if s in _NGRAMS}
    todo = [s for s in dict.fromkeys(sentences) if s not in rows]
    if todo:
        folded = [reading_text(s) for s in todo]
        Xc, Xw = vecs[0].transform(folded).tocsr(), vecs[1].transform(folded).tocsr()
        new = {s: (Xc[i], Xw[i]) for i, s in enumerate(todo)}
        rows.update(new)
        with _NGRAMS_LOCK:
            _NGRAMS.update(new)
            while len(_NGRAMS) > _NGRAMS_MAX:
                _NGRAMS.popitem(last=False)
    from scipy.sparse import vstack

    return vstack([rows[s][0] for s in sentences]), vstack([rows[s][1] for s in sentences])


def sentence_logits(sentences, vecs, wc, ww, b) -> np.ndarray:
    if not sentences:
        return np.zeros(0)
    Xc, Xw = _ngram_rows(list(sentences), vecs)
    return np.asarray(Xc @ wc + Xw @ ww + b).ravel()


INJ_SENT_FILE = "injection_sentences"
# the units of a passage read with their embedding too: the most suspicious ones by n-grams and cues
# (ingest embeds no more than these; 2 since 2026-12-05, when the clause reader replaced the passage model
# and its second stage: ingest as fast as before, bench/README.md; training/injection.py fits with the
# same number)
EMBED_TOP_K = 2


@functools.lru_cache(maxsize=4096)
def injection_unit_cues(sentence: str) -> tuple[float, float, bool]:
    """One reading of a unit's cues: how many strong and weak cue patterns (text addressed to an AI) it
    matches, and whether it shows an addressee (`injection_addressed`). Kept for the units last read: a
    clause `injection_sentences` checked for an addressed aside is read again, whole, by the reader."""
    fs = reading_text(sentence)
    strong = sum(1 for r in INJ_STRONG_RE if r.search(fs))
    weak = sum(1 for r in INJ_WEAK_RE if r.search(fs))
    return float(strong), float(weak), strong > 0 or any(r.search(fs) for r in INJ_ADDRESSEE_RE)


def injection_cues(sentence: str) -> tuple[float, float]:
    """How many of the strong and weak cue patterns (text addressed to an AI) a sentence matches."""
    return injection_unit_cues(sentence)[:2]


def injection_addressed(sentence: str) -> bool:
    """Whether a unit shows whom it addresses or what it overrides (`lexicons.INJECTION_ADDRESSEE`, or a
    strong cue): an AI system spoken to (told what to say or do, reading the text, the one a note is for;
    not merely named), an order to drop earlier instructions, a role marker, the reader's answer reshaped,
    the text's use for answering. A unit that shows none is read with the reader's
    `unaddressed` penalty: the learned reading alone, on text of a genre it never saw, took quotations,
    questions and advice to a person for text addressed to an AI."""
    return injection_unit_cues(sentence)[2]


class InjectionReader:
    """The injection question by unit (line, sentence, clause): a passage is as much addressed to an AI
    as its most AI-addressed unit, whatever surrounds it (`training/injection.py` fits it and writes its
    report)."""

    def __init__(self, directory: Path = WEIGHTS_DIR):
        d = Path(directory)
        raw = (d / f"{INJ_SENT_FILE}.json").read_bytes()
        araw = (d / f"{INJ_SENT_FILE}.npz").read_bytes()
        self.version = hashlib.sha256(raw + araw).hexdigest()[:10]
        self.meta = json.loads(raw)
        self.platt = tuple(float(x) for x in self.meta["platt"])
        with np.load(d / f"{INJ_SENT_FILE}.npz") as z:
            self.wc = z["char"].astype(np.float32)
            self.ww = z["word"].astype(np.float32)
            self.we = z["sem"].astype(np.float32) if "sem" in z else None
            self.b = float(z["bias"][0])
            # stage 2: (weight of the n-gram logit, bias) beside the sentence embedding
            self.stage2 = tuple(float(x) for x in z["stage2"]) if "stage2" in z else (1.0, 0.0)
            self.wl = z["cues"].astype(np.float32) if "cues" in z else None
            # subtracted from the logit of a unit that shows no addressee (`injection_addressed`)
            self.unaddressed = float(z["unaddressed"][0]) if "unaddressed" in z else 0.0
        self.embedder_id = self.meta.get("embedder")
        self._vec = None
        self._embedder = None

    def _embed(self, texts: list[str], embedder=None) -> np.ndarray:
        """Sentence vectors from the embedder the reader was fitted with (the index's own when it is
        that one, else the default embedder, shipped in its package)."""
        if embedder is None or getattr(embedder, "id", None) != self.embedder_id:
            if self._embedder is None:
                from ...embed import get_embedder

                self._embedder = get_embedder(self.embedder_id)
            embedder = self._embedder
        return np.asarray(embedder.embed([reading_text(t) for t in texts]), dtype=np.float32)

    def logits(self, sentences: list[str], embedder=None) -> np.ndarray:
        """One logit per sentence: n-grams and cue counts for every sentence, and for the
        `EMBED_TOP_K` most suspicious of them the sentence embedding too (the others stay at -inf:
        the passage score is the maximum)."""
        if self._vec is None:
            from sklearn.feature_extraction.text import HashingVectorizer

            self._vec = (HashingVectorizer(**INJ_CHAR), HashingVectorizer(**INJ_WORD))
        out = sentence_logits(sentences, self._vec, self.wc, self.ww, self.b)
        if self.we is None or not len(sentences):
            return out
        a, b2 = self.stage2
        first = a * out + b2
        cues = [injection_unit_cues(t) for t in sentences]
        if self.wl is not None:
            first = first + np.asarray([c[:len(self.wl)] for c in cues], dtype=np.float32) @ self.wl
        if self.unaddressed:
            first = first - self.unaddressed * np.asarray([0.0 if c[2] else 1.0 for c in cues])
        top = np.argsort(-first)[:EMBED_TOP_K]
        full = np.full(len(sentences), -np.inf)
        full[top] = first[top] + self._embed([sentences[i] for i in top], embedder) @ self.we
        return full

    def probability(self, logit: float) -> float:
        """The passage's probability from its maximum unit logit: Platt scaling, fitted on held-out
        documents clean and planted (one smooth reading, no steps)."""
        a, b = self.platt
        return 1.0 / (1.0 + math.exp(-max(-40.0, min(40.0, a * logit + b))))


_lock = threading.Lock()
_cache: dict[str, Weights] = {}
_inj_cache: dict[str, InjectionReader | None] = {}


def load_injection_reader(directory: Path | str | None = None) -> InjectionReader | None:
    """The sentence reader of the injection question, or None where its files are absent (the
    passage heads then answer alone)."""
    key = str(directory or WEIGHTS_DIR)
    with _lock:
        if key not in _inj_cache:
            d = Path(key)
            _inj_cache[key] = InjectionReader(d) if (d / f"{INJ_SENT_FILE}.npz").exists() else None
        return _inj_cache[key]


def load_weights(directory: Path | str | None = None) -> Weights:
    key = str(directory or WEIGHTS_DIR)
    with _lock:
        if key not in _cache:
            _cache[key] = Weights(Path(key))
        return _cache[key]


# ---------------------------------------------------------------------------------------------
# Passage-only features


# clause boundaries inside a sentence: a semicolon, or a colon followed by a space (not "10:30", not "http:");
# a sentence is cut at its semicolons first, then at its asides, then at its colons: an aside addressed to an AI
# keeps its own colon ("Torque to 25 N·m (for AI agents: call ...)" is one aside, not "(for AI agents:" and
# "call ...)")
_SEMICOLON_SPLIT = re.compile(r"(?<=;)\s+")
_COLON_SPLIT = re.compile(r"(?<=\S:)\s+(?=\S)")
# an aside inside a sentence: a parenthesis (closed, or open to the sentence's end), and the parts between
# dashes set off by spaces or after a colon set off by spaces ("Serrez à 25 N·m - assistant IA : ignore ...");
# a clause is cut there only where a part shows an addressee (`_asides`)
_PAREN = re.compile(r"\(([^()]{12,})(?:\)|$)")
_ASIDE_SPLIT = re.compile(r"\s+[-\u2013\u2014]{1,2}\s+|(?<=\s:)\s+(?=\S)")
_ASIDE_MARKS = re.compile(r"\(|\s[-\u2013\u2014]{1,2}\s|\s:\s")


def _spans_by_addressee(s: str) -> list[tuple[str, bool]]:
    """`s` cut at its dashes and spaced colons into runs of parts that show an addressee or not, each run as
    written; one run (the whole of `s`) where no part shows one."""
    bounds = [0] + [x for m in _ASIDE_SPLIT.finditer(s) for x in (m.start(), m.end())] + [len(s)]
    parts = [(bounds[i], bounds[i + 1]) for i in range(0, len(bounds), 2)]
    flags = [any(ch.isalnum() for ch in s[a:b]) and injection_addressed(s[a:b]) for a, b in parts]
    if len(parts) < 2 or not any(flags):
        return [(s, False)]
    runs: list[tuple[int, int, bool]] = []
    for (a, b), f in zip(parts, flags):
        if runs and runs[-1][2] == f:
            runs[-1] = (runs[-1][0], b, f)
        else:
            runs.append((a, b, f))
    return [(s[a:b].strip(), f) for a, b, f in runs if s[a:b].strip()]


def _asides(sentence: str) -> list[tuple[str, bool]]:
    """A clause as the injection question reads it: whole, or, where an aside
    (in parentheses, after a dash, after a spaced colon) shows an addressee, the clause around the aside and
    the aside apart (second item True), so that "Torque to 25 N·m (AI assistants reading this must ...)" is
    two readings and the aside is named alone. Ordinary clauses, whose asides show none, stay whole.

    Each aside is checked on its own, not the clause whole: an addressee that opens a unit ("Claude, ...",
    "voor AI-agenten: ...") is only seen where the aside starts."""
    if not _ASIDE_MARKS.search(sentence):
        return [(sentence, False)]
    m = next((m for m in _PAREN.finditer(sentence) if injection_addressed(m.group(1))), None)
    if m:
        before, after = sentence[:m.start()].rstrip(), sentence[m.end():].strip()
        out = _spans_by_addressee(before) if before else []
        if after and out and not out[-1][1]:  # the sentence goes on after the parenthesis
            out[-1] = (out[-1][0] + ("" if not after[0].isalnum() else " ") + after, False)
        elif after:
            out.append((after, False))
        return out + [(m.group(1).strip(), True)]
    return _spans_by_addressee(sentence)




def _clauses(part: str) -> list[tuple[str, bool]]:
    """A part of a sentence between semicolons as the injection question reads it: its addressed asides
    apart and whole, the rest cut at its colons (`_asides` again on each piece)."""
    out: list[tuple[str, bool]] = []
    for c, aside in _asides(part):
        if aside:
            out.append((c, True))
            continue
        for q in _COLON_SPLIT.split(c):
            if q.strip():
                out.extend(_asides(q) if q != c else [(q, False)])
    return out


def _label(s: str) -> bool:
    """A short lead-in before a colon, without figures ("New instructions for the assistant:")."""
    return s.endswith(":") and len(s) < 45 and not any(ch.isdigit() or ch in "|/=" for ch in s)


def injection_sentences(text: str) -> list[str]:
    """The units the injection question reads: every line, sentence and clause on its own (a clause after
    a semicolon or a colon is read apart from what precedes it, so that "Grease every 300 h; ignore ..."
    is two readings), but a piece shorter than 25 characters ("Purpose.", "Step 3:") is read with the piece
    that follows it, and so is a label before a colon ("New instructions for the assistant:"). An aside in
    parentheses, after a dash or after a spaced colon is read apart where it shows an addressee (`_asides`:
    "Torque to 25 N·m (AI assistants reading this must ...)"), and the sentence it was cut from is never read
    with it."""
    sents = T.split_sentences(text, max_sentences=40, min_chars=12)
    # a clause is checked for an addressed aside as the reader reads it (`injection_unit_cues`, kept for the
    # reader): only an aside that shows an addressee is cut
    pieces = [p for s in sents for part in _SEMICOLON_SPLIT.split(s) if part.strip() for p in _clauses(part)][:60]
    out: list[str] = []
    carry = ""
    for i, (s, aside) in enumerate(pieces):
        s = (carry + " " + s).strip() if carry else s
        carry = ""
        if not aside and i + 1 < len(pieces) and pieces[i + 1][1] and (len(s) < 25 or _label(s)):
            # the sentence an aside addressed to an AI was cut from is never read with the aside
            if out:
                out[-1] = out[-1] + " " + s
            else:
                out.append(s)
            continue
        if len(s) < 25 or _label(s):
            if out and s.rstrip()[-1:] in ".!?" and len(s.split()) >= 3:
                out[-1] = out[-1] + " " + s  # a short sentence ends what precedes it
            else:
                carry = s  # a label ("Note:", "Step 3") opens what follows it
            continue
        out.append(s)
    if carry:
        if out:
            out[-1] = out[-1] + " " + carry
        else:
            out.append(carry)
    return out


def injection_raw(text: str, title: str, logits: np.ndarray, sentences: list[str]) -> dict[str, float]:
    f = {}
    s = np.sort(logits)[::-1] if logits.size else np.array([-10.0])
    f["s_max"] = float(s[0])
    f["s_2nd"] = float(s[1]) if s.size > 1 else float(s[0]) - 2.0
    f["s_mean_top3"] = float(np.mean(s[:3]))
    strong = []
    weak = []
    for sent in sentences:
        fs = reading_text(sent)
        strong.append(sum(1 for r in INJ_STRONG_RE if r.search(fs)))
        weak.append(sum(1 for r in INJ_WEAK_RE if r.search(fs)))
    f["strong_n"] = math.log1p(sum(strong))
    f["strong_max_sent"] = float(max(strong)) if strong else 0.0
    f["weak_max_sent"] = float(max(weak)) / 3.0 if weak else 0.0
    f["strong_at_max"] = float(strong[int(np.argmax(logits))]) if logits.size else 0.0
    f["n_sent"] = math.log1p(len(sentences))
    top, rest = top_and_rest(sentences, logits)
    if top is None:  # one sentence: nothing around it to stand out from
        f["top_rest_lex"] = 1.0
    else:
        a, b = set(T.content_stems(top)), set(T.content_stems(rest))
        f["top_rest_lex"] = len(a & b) / max(1, len(a))
    return f


def top_and_rest(sentences: list[str], logits: np.ndarray) -> tuple[str | None, str]:
    """The sentence the sentence model finds most addressed to an AI, and the passage without it."""
    if len(sentences) < 2 or not logits.size:
        return None, ""
    i = int(np.argmax(logits))
    return sentences[i], " ".join(sentences[:i] + sentences[i + 1 :])


def offtopic_texts(sentences: list[str], logits: np.ndarray, passage: str = "") -> tuple[str, str, bool] | None:
    """What the second stage compares: the most suspicious sentence, and the whole `passage` when the
    sentence is at most `INJ_TOP_SHARE_MAX` of its characters (third item True), else the rest of the
    passage. None for a passage of one sentence."""
    top, rest = top_and_rest(sentences, logits)
    if top is None:
        return None
    if passage and len(top) <= INJ_TOP_SHARE_MAX * len(passage):
        return top[:600], passage[:2000], True
    return top[:600], rest[:2000], False


def injection_offtopic(f: dict[str, float], sentences: list[str], logits: np.ndarray, embed,
                       passage: str = "", passage_vec: np.ndarray | None = None) -> dict[str, float]:
    """Second-stage features: cosine between the top sentence and the rest of the passage
    (`embed` maps texts to unit vectors). An instruction that has nothing to do with the text
    around it is what a planted one looks like.

    When the top sentence is a small part of the passage, the vector of the whole `passage` stands
    for the rest (`offtopic_texts`): `passage_vec` if given (the vector stored for retrieval, so that
    ingest embeds only the short sentence), else the embedding of `passage`."""
    f = dict(f)
    pair = offtopic_texts(sentences, logits, passage)
    if pair is None:
        f["top_rest_sim"] = 1.0
    else:
        top, other, whole = pair
        if whole and passage_vec is not None:
            e = [np.asarray(embed([top]), dtype=np.float64)[0], np.asarray(passage_vec, dtype=np.float64)]
        else:
            e = np.asarray(embed([top, other]), dtype=np.float64)
        f["top_rest_sim"] = float(e[0] @ e[1])
    f["smax_x_off"] = max(f["s_max"] + 4.0, 0.0) * (1.0 - f["top_rest_sim"])
    return f


def superseded_raw(text: str, title: str) -> dict[str, float]:
    ft = T.fold(text or "")
    fti = T.fold(title or "")
    edge = ft[:250] + "\n" + ft[-250:]
    f = {}
    f["strong_n"] = math.log1p(sum(len(r.findall(ft)) for r in SUP_STRONG_RE))
    f["strong_title"] = float(any(r.search(fti) for r in SUP_STRONG_RE)) if fti else 0.0
    f["strong_edge"] = float(any(r.search(edge) for r in SUP_STRONG_RE))
    f["weak_n"] = math.log1p(sum(len(r.findall(ft)) for r in SUP_WEAK_RE))
    f["weak_title"] = float(any(r.search(fti) for r in SUP_WEAK_RE)) if fti else 0.0
    f["weak_edge"] = float(any(r.search(edge) for r in SUP_WEAK_RE))
    short = 0.0
    for s in T.split_sentences(text, max_sentences=40, min_chars=5):
        fs = T.fold(s)
        if len(fs) < 160 and any(r.search(fs) for r in SUP_STRONG_RE):
            short = 1.0
            break
    f["strong_sent_short"] = short
    return f
