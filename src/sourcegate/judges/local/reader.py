"""The reader: a small multilingual cross-encoder over (question, passage), run as int8 ONNX with
onnxruntime.

It was trained (`training/reader/`) on English and French: for each passage it returns the probability
that the passage states the answer (for a yes/no question: settles it, either way), the margin of the
best answer span over "no answer", the span itself and where it sits in the passage, a yes/no reading
(the passage says yes, says no, or leaves the question open), and an NLI reading (`nli`) shared with
the written answer's check. Passages longer than one window are read in overlapping windows and the
most confident window is kept. Each window is read on its own (see `Reader._run`).
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np

# standalone (no package imports), so that the training recipe can load this file on its own
WEIGHTS_DIR = Path(__file__).resolve().parent.parent / "weights"

ONNX_NAME = "reader.onnx"
TOKENIZER_NAME = "reader_tokenizer.json"
META_NAME = "reader.json"
MAX_LEN = 256
STRIDE = 96
MAX_ANSWER_TOKENS = 30


@dataclass
class Reading:
    p_answer: float  # the answerable head's probability
    span_margin: float  # best span score minus the no-answer score (start + end logits)
    span: str  # the best span's text ("" when the passage is empty)
    p_contradiction: float  # NLI: the question, read as a claim, is contradicted by the passage
    p_entailment: float
    span_context: str = ""  # the span with a few words before it ("every 2,000 hours")
    span_start: int = -1  # the span's character offsets in the passage (-1 when there is none)
    span_end: int = -1
    p_yes: float = 0.0  # yes/no reading: the passage says yes, says no, leaves the question open
    p_no: float = 0.0
    p_open: float = 1.0


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-np.clip(x, -40, 40)))


def _softmax(x, axis=-1):
    z = x - x.max(axis=axis, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=axis, keepdims=True)


class Reader:
    def __init__(self, directory: Path | str = WEIGHTS_DIR, threads: int | None = None):
        import onnxruntime as ort
        from tokenizers import Tokenizer

        d = Path(directory)
        self.meta = json.loads((d / META_NAME).read_text())
        self.version = str(self.meta.get("sha256", {}).get(ONNX_NAME, ""))[:10]
        opts = ort.SessionOptions()
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        # `serve` sets SOURCEGATE_JUDGE_THREADS to the cores left to each question (`workers.judge_threads`).
        threads = threads or int(os.environ.get("SOURCEGATE_JUDGE_THREADS") or 0) or None
        if threads:
            opts.intra_op_num_threads = threads
        self.session = ort.InferenceSession(str(d / ONNX_NAME), sess_options=opts, providers=["CPUExecutionProvider"])
        self.tok = Tokenizer.from_file(str(d / TOKENIZER_NAME))
        self.tok.no_truncation()
        self.tok.no_padding()
        self.max_len = int(self.meta.get("max_len", MAX_LEN))
        special = self.meta.get("special") or {}
        # <s> question </s> passage </s> (the multilingual reader), or [CLS] ... [SEP] ... [SEP]
        self.bos = int(special["bos"]) if "bos" in special else self.tok.token_to_id("[CLS]")
        self.eos = int(special["eos"]) if "eos" in special else self.tok.token_to_id("[SEP]")
        self.outputs = [o.name for o in self.session.get_outputs()]
        # A session on one thread runs each call on its caller's thread: questions side by side run
        # side by side. With a pool of threads, calls take turns rather than split the pool.
        self._lock = contextlib.nullcontext() if threads == 1 else threading.Lock()

    def _windows(self, q_ids: list[int], passage: str):
        """(input ids, type ids, passage char offsets per token) for each window of the passage."""
        enc = self.tok.encode(passage, add_special_tokens=False)
        p_ids, offs = enc.ids, enc.offsets
        cls, sep = self.bos, self.eos
        q = q_ids[: 64]
        room = max(16, self.max_len - len(q) - 3)
        out = []
        start = 0
        while True:
            part = p_ids[start:start + room]
            ids = [cls] + q + [sep] + part + [sep]
            tt = [0] * (len(q) + 2) + [1] * (len(part) + 1)
            po = [None] * (len(q) + 2) + list(offs[start:start + room]) + [None]
            out.append((ids, tt, po))
            if start + room >= len(p_ids):
                break
            start += STRIDE
        return out

    def _run(self, rows) -> list[np.ndarray]:
        """The model's outputs for windows (`_windows` rows), in their order, per-token outputs padded
        to the longest row.

        Each window goes through on its own, unpadded. The int8 graph quantizes its activations with
        one scale per tensor, so in a shared batch a window's reading would move with the other
        windows and with their padding: alone, a passage reads the same whatever else was retrieved
        with it. It is also faster than one batch padded to its longest window, which on real
        passages spends much of its time on padding (`bench/README.md`, "Reader runs")."""
        parts = []
        with self._lock:
            for ids_, tt_, _ in rows:
                ids = np.asarray([ids_], dtype=np.int64)
                tt = np.asarray([tt_], dtype=np.int64)
                parts.append(self.session.run(None, {"input_ids": ids, "attention_mask": np.ones_like(ids),
                                                     "token_type_ids": tt}))
        L = max(len(r[0]) for r in rows)
        outs = []
        for k, first in enumerate(parts[0]):
            if k < 2:  # start and end logits, one per token
                out = np.full((len(rows), L), -1e4, dtype=first.dtype)
                for i, part in enumerate(parts):
                    out[i, : part[k].shape[1]] = part[k][0]
            else:
                out = np.concatenate([part[k] for part in parts])
            outs.append(out)
        return outs

    def read(self, question: str, passages: list[str]) -> list[Reading]:
        if not passages:
            return []
        q_ids = self.tok.encode(question or "", add_special_tokens=False).ids
        rows, owner = [], []
        for k, p in enumerate(passages):
            for w in self._windows(q_ids, p or ""):
                rows.append(w)
                owner.append(k)
        n = len(rows)
        outs = self._run(rows)
        start, end, ans, nli = outs[:4]
        polar = _softmax(outs[4]) if len(outs) > 4 else None
        windows: dict[int, list[Reading]] = {}
        for i in range(n):
            po = rows[i][2]
            s, e = start[i, : len(po)], end[i, : len(po)]
            null = float(s[0] + e[0])
            # best span with start <= end < start + MAX_ANSWER_TOKENS over passage tokens
            valid = np.array([o is not None for o in po])
            sv = np.where(valid, s, -1e9)
            ev = np.where(valid, e, -1e9)
            m = sv[:, None] + ev[None, :]
            tri = np.triu(np.ones_like(m, dtype=bool)) & ~np.triu(np.ones_like(m, dtype=bool), MAX_ANSWER_TOKENS)
            m = np.where(tri, m, -1e9)
            a, b = np.unravel_index(int(np.argmax(m)), m.shape)
            margin = float(m[a, b]) - null if valid.any() else -20.0
            text = passages[owner[i]] or ""
            span = text[po[a][0]: po[b][1]] if valid.any() else ""
            ctx = text[max(0, po[a][0] - 24): po[b][1]] if valid.any() else ""
            pn = _softmax(nli[i])
            r = Reading(p_answer=float(_sigmoid(ans[i])), span_margin=margin, span=span,
                        p_contradiction=float(pn[2]), p_entailment=float(pn[0]), span_context=ctx,
                        span_start=po[a][0] if valid.any() else -1, span_end=po[b][1] if valid.any() else -1)
            if polar is not None:
                r.p_yes, r.p_no, r.p_open = (float(x) for x in polar[i])
            windows.setdefault(owner[i], []).append(r)
        out = []
        for k in range(len(passages)):
            # the most confident window, with the strongest contradiction over all of them
            best = max(windows[k], key=lambda r: r.p_answer)
            best.p_contradiction = max(r.p_contradiction for r in windows[k])
            out.append(best)
        return out


    def nli(self, pairs: list[tuple[str, str]]) -> np.ndarray:
        """NLI probabilities (entailment, neutral, contradiction), one row per (premise, hypothesis) pair.

        The hypothesis takes the question's slot and the premise the passage's, as in training; a long
        premise is read in windows and the window most in favour of entailment is kept, with the
        strongest contradiction of any window."""
        out = np.zeros((len(pairs), 3), dtype=np.float64)
        rows, owner = [], []
        for k, (premise, hypothesis) in enumerate(pairs):
            h_ids = self.tok.encode(hypothesis or "", add_special_tokens=False).ids
            for w in self._windows(h_ids, premise or ""):
                rows.append(w)
                owner.append(k)
        if not rows:
            return out
        probs = _softmax(self._run(rows)[3])
        seen: dict[int, np.ndarray] = {}
        for i, k in enumerate(owner):
            p = probs[i]
            if k not in seen:
                seen[k] = p.copy()
            else:
                best = seen[k] if seen[k][0] >= p[0] else p.copy()
                best[2] = max(seen[k][2], p[2])
                seen[k] = best
        for k, p in seen.items():
            out[k] = p
        return out


_lock = threading.Lock()
_cache: dict[str, Reader | None] = {}


def load_reader(directory: Path | str | None = None) -> Reader | None:
    """The shipped reader, or None when its files are absent (the judge then works without it)."""
    key = str(directory or WEIGHTS_DIR)
    with _lock:
        if key not in _cache:
            d = Path(key)
            _cache[key] = Reader(d) if (d / ONNX_NAME).exists() and (d / META_NAME).exists() else None
        return _cache[key]
