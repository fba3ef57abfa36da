"""Examples for the reader, built deterministically from `shared/data/train` (and the hand-written
procedure yes/no questions in `training/data/polar_procedures_train.jsonl`).

- Question answering (span supervision; the no-answer position is the first token):
  - SQuAD 1.0 train (24,000 questions by default): a positive window of the paragraph and one negative
    on the same subject: the question edited SQuAD 2.0's way (`perturb_question`: an antonym, a
    negation, another entity of the paragraph, an attribute it does not give) against the same window,
    the paragraph without its answer sentences, or another paragraph of the article;
  - SQuAD 2.0 dev (32 articles; the three reserved ones are not in the data): spans, the human-written
    unanswerable questions, answer-removed negatives; one article in four (`is_stack_article`) kept
    apart for fitting the judge's heads;
  - PIAF (French): as SQuAD 1.0 without the edits; one article in five kept for evaluation.
- Yes/no (`polar`: yes, no, the passage leaves it open): CondaQA (one passage in five, with all its
  edits, held out), BoolQ_3L, the hand-written procedure questions.
- NLI (the claim in the question's slot): SNLI, Breaking NLI, FEVER-symmetric (English, capped),
  RTE3-FR and DACCORD (French); one premise in twenty held out.

    python -m training.reader.data [--data ../shared/data] [--out .cache/reader/examples.pt]
"""

from __future__ import annotations

import argparse
import json
import random
import re
import zlib
from pathlib import Path

SEED = 20261201
MAX_LEN = 192
REPO = Path(__file__).resolve().parents[2]
DEFAULT_DATA = REPO.parent / "shared" / "data"
DEFAULT_CACHE = REPO / ".cache" / "reader"
NLI_LABELS = {"entailment": 0, "neutral": 1, "contradiction": 2}
# SQuAD 2.0 dev articles held out of training: the combination head is fitted on them (1 in 4 by hash)
STACK_SHARE = 4
# SQuAD 1.0 train articles held out for validation during training (1 in 50 by hash)
VAL_SHARE = 50

_SENT = re.compile(r"(?<=[.!?])[\"')\]]?\s+(?=[A-Z0-9\"'(\[])")


def read_text(path: Path) -> str:
    """A data file, or its xz-compressed copy (`path` + ".xz", as `pack.py` writes them)."""
    xz = path.with_name(path.name + ".xz")
    if not path.exists() and xz.exists():
        import lzma

        return lzma.decompress(xz.read_bytes()).decode("utf-8")
    return path.read_text(encoding="utf-8")


def read_jsonl_lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in read_text(path).splitlines() if x.strip()]


def is_stack_article(title: str) -> bool:
    return zlib.crc32(title.encode()) % STACK_SHARE == 0


def is_val_article(title: str) -> bool:
    return zlib.crc32(("val:" + title).encode()) % VAL_SHARE == 0


def sentences(text: str) -> list[tuple[int, int]]:
    """Character spans of the sentences of `text`."""
    out, start = [], 0
    for m in _SENT.finditer(text):
        out.append((start, m.start()))
        start = m.end()
    out.append((start, len(text)))
    return [(a, b) for a, b in out if b > a]


def window(text: str, spans: list[tuple[int, int]], centre: int, budget: int, rng: random.Random) -> tuple[int, int]:
    """A run of whole sentences around sentence `centre`, grown at random sides up to `budget` characters."""
    lo = hi = centre
    while True:
        grow = []
        if lo > 0 and spans[hi][1] - spans[lo - 1][0] <= budget:
            grow.append(-1)
        if hi + 1 < len(spans) and spans[hi + 1][1] - spans[lo][0] <= budget:
            grow.append(1)
        if not grow:
            break
        if rng.choice(grow) < 0:
            lo -= 1
        else:
            hi += 1
    return spans[lo][0], spans[hi][1]


def _has_any(text: str, answers: list[str]) -> bool:
    t = text.lower()
    return any(a.lower() in t for a in answers if a.strip())


def answer_removed(context: str, answers: list[str], anchor: int, budget: int, rng: random.Random) -> str | None:
    """The paragraph without the sentences that hold an answer string, windowed near where the answer was."""
    spans = sentences(context)
    keep = [(a, b) for a, b in spans if not _has_any(context[a:b], answers)]
    if len(keep) < 1:
        return None
    # the kept sentence nearest to the answer's place
    centre = min(range(len(keep)), key=lambda i: abs(keep[i][0] - anchor))
    text = " ".join(context[a:b] for a, b in keep)
    new_spans, pos = [], 0
    for a, b in keep:
        new_spans.append((pos, pos + (b - a)))
        pos += (b - a) + 1
    s, e = window(text, new_spans, centre, budget, rng)
    out = text[s:e].strip()
    if len(out) < 40 or _has_any(out, answers):
        return None
    return out


def _detok(s: str) -> str:
    """SNLI and FEVER are PTB-tokenised ("packages ."): undo the spaces before punctuation."""
    s = re.sub(r"\s+([.,;:!?)\]'])", r"\1", s)
    s = re.sub(r"([(\[])\s+", r"\1", s)
    s = s.replace(" n't", "n't").replace("-LRB-", "(").replace("-RRB-", ")")
    return s.strip()


# --- SQuAD 2.0's kind of negative, generated from SQuAD 1.0 train ----------------------------------
# SQuAD 2.0's unanswerable questions keep the paragraph and change the question. The same edits, made
# by rule on SQuAD 1.0 train questions (whose paragraph answers the original): an antonym, an inserted
# negation, an entity of the question swapped for another entity of the paragraph, or an attribute the
# paragraph does not give. Each edited question is paired with the original's paragraph window, the
# original question with the same window as the positive, so the paragraph alone predicts nothing.
ANTONYMS = [
    ("first", "last"), ("earliest", "latest"), ("largest", "smallest"), ("biggest", "smallest"),
    ("highest", "lowest"), ("most", "least"), ("before", "after"), ("older", "younger"), ("oldest", "youngest"),
    ("longest", "shortest"), ("maximum", "minimum"), ("increase", "decrease"), ("increased", "decreased"),
    ("north", "south"), ("east", "west"), ("begin", "end"), ("began", "ended"), ("start", "end"),
    ("won", "lost"), ("win", "lose"), ("more", "fewer"), ("higher", "lower"), ("larger", "smaller"),
    ("best", "worst"), ("accepted", "rejected"), ("allowed", "forbidden"), ("strongest", "weakest"),
]
_ANT = {}
for a, b in ANTONYMS:
    _ANT.setdefault(a, b)
    _ANT.setdefault(b, a)
ATTRIBUTE_SWAPS = [
    ("population", "area"), ("area", "population"), ("capital", "currency"), ("founded", "dissolved"),
    ("born", "buried"), ("died", "was born"), ("height", "weight"), ("width", "depth"), ("year", "month"),
    ("cost", "weight"), ("founder", "owner"), ("author", "publisher"), ("length", "width"),
    ("mother", "grandmother"), ("father", "grandfather"), ("wife", "sister"), ("speed", "weight"),
]
_PARTICIPLES = {"known", "given", "taken", "written", "built", "born", "made", "sent", "held", "found", "called", "seen",
                "chosen", "done", "begun", "spoken", "shown", "grown", "thrown", "driven", "eaten", "fought", "bought",
                "brought", "taught", "thought", "sold", "told", "paid", "laid", "led", "left", "lost", "met", "run", "won"}
_AUX = re.compile(r"^(what|which|who|whom|whose|when|where|why|how(?: many| much)?)\s+(did|does|do|is|was|are|were|can|could|has|have|had|will|would)\s+", re.I)
_ENT = re.compile(r"\b(?:[A-Z][a-z]+(?:\s+[A-Z][a-z]+)*|\d{3,4})\b")
_STARTERS = {"What", "Which", "Who", "Whom", "Whose", "When", "Where", "Why", "How", "In", "On", "At", "The", "A", "An",
             "During", "After", "Before", "From", "To", "For", "By", "Of", "If", "As", "With", "Since", "Although",
             "While", "Under", "Upon", "Along", "Between", "Besides", "Like", "Unlike", "Through", "Despite",
             "Following", "According", "Among", "Within", "Without", "Into", "Over", "Across", "Against", "Around"}


def perturb_question(q: str, ctx: str, answers: list[str], rng: random.Random) -> tuple[str, str] | None:
    """(edited question, kind of edit), or None when no edit applies. The edit must not bring the answer
    into the question, and a swapped-in entity must occur in the paragraph (SQuAD 2.0's plausible
    distractors do)."""
    words = q.split()
    low = [w.lower().strip("?,.") for w in words]
    kinds = []
    if any(w in _ANT for w in low[:-1]):
        kinds.append("antonym")
    if _AUX.match(q) and " not " not in q and " never " not in q:
        kinds.append("negation")
    q_ents = [m.group(0) for m in _ENT.finditer(q) if m.group(0) not in _STARTERS]
    # entities of the paragraph, not counting capitals that only start a sentence ("According", "His")
    c_ents = sorted({m.group(0) for m in _ENT.finditer(ctx) if m.group(0) not in _STARTERS
                     and m.start() > 0 and not re.search(r"[.!?\"]\s*$", ctx[max(0, m.start() - 3):m.start()])})
    if q_ents and len(c_ents) > 1:
        kinds.append("entity")
    if any(a in q.lower().split() for a, _ in ATTRIBUTE_SWAPS):
        kinds.append("attribute")
    rng.shuffle(kinds)
    for kind in kinds:
        out = None
        if kind == "antonym":
            idx = [i for i, w in enumerate(low[:-1]) if w in _ANT]
            i = rng.choice(idx)
            w = words[i]
            rep = _ANT[low[i]]
            if w[0].isupper():
                rep = rep.capitalize()
            tail = w[len(w.rstrip("?,.")):]
            out = " ".join(words[:i] + [rep + tail] + words[i + 1:])
        elif kind == "negation":
            # "When were the aftershocks recorded?" -> "When were the aftershocks never recorded?"; "When did
            # the earthquake occur?" -> "When did the earthquake not occur?"
            m = _AUX.match(q)
            aux = m.group(2).lower()
            rest = m.end()
            tail = q[rest:].split()
            if aux in ("did", "does", "do"):
                if 2 <= len(tail) <= 4 and tail[-1].endswith("?") and tail[-1][:-1].isalpha() and tail[-1][:-1].islower():
                    out = q[:rest] + " ".join(tail[:-1] + ["not", tail[-1]])
            else:
                for i in range(1, len(tail)):
                    w = tail[i].rstrip("?,.")
                    if w.islower() and len(w) > 3 and (w.endswith("ed") or w in _PARTICIPLES):
                        out = q[:rest] + " ".join(tail[:i] + ["never"] + tail[i:])
                        break
        elif kind == "entity":
            e = rng.choice(q_ents)
            digits = e.isdigit()
            cands = [c for c in c_ents if c != e and c not in q and len(c) >= 3 and c.isdigit() == digits
                     and c.lower() not in ctx and not any(c in a or a in c for a in answers)]
            if cands:
                out = q.replace(e, rng.choice(cands), 1)
        elif kind == "attribute":
            pairs = [(a, b) for a, b in ATTRIBUTE_SWAPS if a in q.lower().split() and b not in ctx.lower()]
            if pairs:
                a, b = rng.choice(pairs)
                out = re.sub(rf"\b{a}\b", b, q, count=1, flags=re.I)
        if out and out != q and not _has_any(out, answers):
            return out, kind
    return None


def answer_window(ctx: str, spans: list[tuple[int, int]], qa: dict, rng: random.Random):
    """(a0, a1, answer texts, budget, s, e): the first answer's offsets in `ctx`, every reference
    answer's text, and a window ctx[s:e] of whole sentences around it (250-700 characters, grown at
    random) that holds it; None when the answer is not where its offset says, or in no sentence."""
    ans = qa["answers"][0]
    a0, a1 = ans["start"], ans["start"] + len(ans["text"])
    if ctx[a0:a1] != ans["text"]:
        return None
    texts = [a["text"] for a in qa["answers"]]
    budget = rng.randint(250, 700)
    si = next((i for i, (a, b) in enumerate(spans) if a <= a0 < b), None)
    if si is None:
        return None
    s, e = window(ctx, spans, si, budget, rng)
    return a0, a1, texts, budget, min(s, a0), max(e, a1)


def squad1_units(data: Path, rng: random.Random, max_questions: int) -> dict[str, list[list[dict]]]:
    """SQuAD 1.0 train: per question a positive window and one negative on the same subject: the question
    edited SQuAD 2.0's way (55 %), the window without its answer sentences (30 %) or another paragraph of
    the article (15 %)."""
    units: dict[str, list[list[dict]]] = {"train": [], "val": []}
    spans_dir = data / "train" / "squad_spans"
    by_article: dict[str, list[dict]] = {}
    for p in read_jsonl_lines(spans_dir / "squad1_train.jsonl"):
        by_article.setdefault(p["title"], []).append(p)
    titles = sorted(by_article)
    rng.shuffle(titles)
    n = 0
    for title in titles:
        plist = by_article[title]
        split = "val" if is_val_article(title) else "train"
        for p in plist:
            ctx = p["context"]
            spans = sentences(ctx)
            qas = [qa for qa in p["qas"] if qa["answers"] and not qa.get("is_impossible")]
            rng.shuffle(qas)
            for qa in qas[:3]:
                w = answer_window(ctx, spans, qa, rng)
                if w is None:
                    continue
                a0, a1, texts, budget, s, e = w
                win = ctx[s:e]
                pos = {"kind": "qa", "q": qa["question"], "c": win, "a0": a0 - s, "a1": a1 - s, "ans": 1, "src": "squad1"}
                neg = None
                r = rng.random()
                if r < 0.55:
                    pq = perturb_question(qa["question"], win, texts, rng)
                    if pq:
                        neg = {"kind": "qa", "q": pq[0], "c": win, "a0": -1, "a1": -1, "ans": 0, "src": "squad1-edit-" + pq[1]}
                if neg is None and r < 0.85:
                    t = answer_removed(ctx, texts, a0, budget, rng)
                    if t:
                        neg = {"kind": "qa", "q": qa["question"], "c": t, "a0": -1, "a1": -1, "ans": 0, "src": "squad1-removed"}
                if neg is None and len(plist) > 1:
                    o = plist[rng.randrange(len(plist))]
                    if o is not p and not _has_any(o["context"], texts):
                        osp = sentences(o["context"])
                        s2, e2 = window(o["context"], osp, rng.randrange(len(osp)), budget, rng)
                        neg = {"kind": "qa", "q": qa["question"], "c": o["context"][s2:e2], "a0": -1, "a1": -1, "ans": 0,
                               "src": "squad1-otherpara"}
                units[split].append([pos] + ([neg] if neg else []))
                n += 1
            if max_questions and n >= max_questions and split == "train":
                break
        if max_questions and n >= max_questions:
            break
    return units


def squad2_units(data: Path, rng: random.Random) -> dict[str, list[list[dict]]]:
    """SQuAD 2.0 dev (the reserved articles are not in the file): answerable questions with spans and an
    answer-removed negative, the human-written unanswerable questions. One article in four is kept apart
    (`is_stack_article`) for fitting the judge's heads."""
    units: dict[str, list[list[dict]]] = {"train": [], "stack": []}
    for p in read_jsonl_lines(data / "train" / "squad_spans" / "squad2_dev.jsonl"):
        split = "stack" if is_stack_article(p["title"]) else "train"
        ctx = p["context"]
        for qa in p["qas"]:
            if qa.get("is_impossible") or not qa["answers"]:
                units[split].append([{"kind": "qa", "q": qa["question"], "c": ctx, "a0": -1, "a1": -1, "ans": 0,
                                      "src": "squad2-unanswerable"}])
                continue
            ans = qa["answers"][0]
            a0, a1 = ans["start"], ans["start"] + len(ans["text"])
            if ctx[a0:a1] != ans["text"]:
                continue
            unit = [{"kind": "qa", "q": qa["question"], "c": ctx, "a0": a0, "a1": a1, "ans": 1, "src": "squad2"}]
            t = answer_removed(ctx, [a["text"] for a in qa["answers"]], a0, 2000, rng)
            if t:
                unit.append({"kind": "qa", "q": qa["question"], "c": t, "a0": -1, "a1": -1, "ans": 0, "src": "squad2-removed"})
            units[split].append(unit)
    return units


def is_piaf_eval(title: str) -> bool:
    """PIAF articles held out for evaluation (1 in 5 by hash)."""
    return zlib.crc32(("piaf:" + title).encode()) % 5 == 0


def piaf_units(data: Path, rng: random.Random) -> dict[str, list[list[dict]]]:
    """PIAF (French, spans): a positive window and an answer-removed or other-paragraph negative, as for
    SQuAD 1.0; articles in `is_piaf_eval` kept for evaluation."""
    units: dict[str, list[list[dict]]] = {"train": [], "eval": []}
    paras = read_jsonl_lines(data / "train" / "piaf_fr" / "data.jsonl")
    by_title: dict[str, list[dict]] = {}
    for p in paras:
        by_title.setdefault(p["title"], []).append(p)
    for title, plist in sorted(by_title.items()):
        split = "eval" if is_piaf_eval(title) else "train"
        for p in plist:
            ctx = p["context"]
            spans = sentences(ctx)
            for qa in p["qas"]:
                w = answer_window(ctx, spans, qa, rng) if qa["answers"] else None
                if w is None:
                    continue
                a0, a1, texts, budget, s, e = w
                unit = [{"kind": "qa", "q": qa["question"], "c": ctx[s:e], "a0": a0 - s, "a1": a1 - s, "ans": 1, "src": "piaf"}]
                t = answer_removed(ctx, texts, a0, budget, rng) if rng.random() < 0.7 else None
                if t:
                    unit.append({"kind": "qa", "q": qa["question"], "c": t, "a0": -1, "a1": -1, "ans": 0, "src": "piaf-removed"})
                else:
                    others = [o for o in plist if o is not p and not _has_any(o["context"], texts)]
                    if others:
                        o = rng.choice(others)
                        osp = sentences(o["context"])
                        s2, e2 = window(o["context"], osp, rng.randrange(len(osp)), budget, rng)
                        unit.append({"kind": "qa", "q": qa["question"], "c": o["context"][s2:e2], "a0": -1, "a1": -1,
                                     "ans": 0, "src": "piaf-otherpara"})
                units[split].append(unit)
    return units


POLAR = {"yes": 0, "no": 1, "unknown": 2}


def is_condaqa_eval(passage_id: str) -> bool:
    """CondaQA passages held out for evaluation (1 in 5 by hash of `passage_id`: every edit of a passage
    falls on the same side)."""
    return zlib.crc32(("condaqa:" + str(passage_id)).encode()) % 5 == 0


def polar_units(data: Path, repo: Path) -> dict[str, list[list[dict]]]:
    """Yes/no questions: CondaQA (split by passage), BoolQ_3L, and hand-written procedure questions
    (`training/data/polar_procedures_train.jsonl`). `pol`: yes 0, no 1, the passage leaves it open 2."""
    units: dict[str, list[list[dict]]] = {"train": [], "eval": []}
    by_pid: dict[str, list[dict]] = {}
    for r in read_jsonl_lines(data / "train" / "polar_condaqa" / "data.jsonl"):
        by_pid.setdefault(str(r["passage_id"]), []).append(r)
    for pid, rows in sorted(by_pid.items()):
        split = "eval" if is_condaqa_eval(pid) else "train"
        units[split].append([{"kind": "polar", "q": r["query"], "c": r["text"], "pol": POLAR[r["answer"]],
                              "src": "condaqa"} for r in rows])
    for r in read_jsonl_lines(data / "train" / "polar_boolq3l" / "data.jsonl"):
        units["train"].append([{"kind": "polar", "q": r["query"].rstrip("?") + "?", "c": r["text"],
                                "pol": POLAR[r["answer"]], "src": "boolq3l"}])
    return units


def procedure_polar_units(repo: Path) -> dict[str, list[list[dict]]]:
    """The hand-written procedure yes/no questions (English, French and across the two), by question."""
    units: dict[str, list[list[dict]]] = {"train": []}
    own = repo / "training" / "data" / "polar_procedures_train.jsonl"
    if own.exists():
        groups: dict[str, list[dict]] = {}
        for r in read_jsonl_lines(own):
            groups.setdefault(str(r.get("group", r["query"])), []).append(
                {"kind": "polar", "q": r["query"], "c": r["text"], "pol": POLAR[r["answer"]], "src": "procedures"})
        units["train"] = list(groups.values())
    return units


def nli_examples(data: Path, rng: random.Random, max_en: int = 12000) -> dict[str, list[dict]]:
    """NLI, the claim in the question's slot: SNLI, Breaking NLI, FEVER-symmetric (English, capped), RTE3-FR
    and DACCORD (French). DACCORD's "compatible" means "not a contradiction" (`nli` = -1: the loss is
    then on contradiction against the rest). One premise in twenty is held out."""
    out: dict[str, list[dict]] = {"train": [], "val": []}
    en = []
    for folder in ("snli_devtest_esnli", "breaking_nli", "fever_symmetric", "nli_fr_rte3", "nli_fr_daccord"):
        for r in read_jsonl_lines(data / "train" / folder / "data.jsonl"):
            lab = r.get("label")
            if lab == "compatible":
                y = -1
            elif lab in NLI_LABELS:
                y = NLI_LABELS[lab]
            else:
                continue
            ex = {"kind": "nli", "q": _detok(r["hypothesis"]), "c": _detok(r["premise"]), "nli": y, "src": folder}
            split = "val" if zlib.crc32(ex["c"].encode()) % 20 == 0 else "train"
            if split == "train" and not folder.startswith("nli_fr"):
                en.append(ex)
            else:
                out[split].append(ex)
    rng.shuffle(en)
    fr = [e for e in out["train"]]
    out["train"] = en[:max_en] + fr + fr  # the French sets are small: twice
    return out


# --- encoding --------------------------------------------------------------------------------------


class PairEncoder:
    """`<s> question </s> passage </s>` (type ids 0, then 1 from the passage on), as the runtime reader
    builds it, from a `tokenizers` file; the question is cut to 64 tokens, the passage to fit."""

    def __init__(self, tokenizer_file: Path, special: dict, max_len: int = MAX_LEN):
        from tokenizers import Tokenizer

        self.tok = Tokenizer.from_file(str(tokenizer_file))
        self.tok.no_truncation()
        self.tok.no_padding()
        self.bos, self.eos = special["bos"], special["eos"]
        self.max_len = max_len

    def __call__(self, ex: dict) -> dict | None:
        q = self.tok.encode(ex["q"], add_special_tokens=False).ids[:64]
        enc = self.tok.encode(ex["c"], add_special_tokens=False)
        room = self.max_len - len(q) - 3
        c_ids, offs = enc.ids[:room], enc.offsets[:room]
        ids = [self.bos] + q + [self.eos] + c_ids + [self.eos]
        tt = [0] * (len(q) + 2) + [1] * (len(c_ids) + 1)
        out = {"ids": ids, "tt": tt, "kind": ex["kind"], "src": ex["src"]}
        if ex["kind"] == "nli":
            out["nli"] = ex["nli"]
            return out
        if ex["kind"] == "polar":
            out["pol"] = ex["pol"]
            return out
        out["ans"] = ex["ans"]
        if ex["a0"] < 0:
            out["start"] = out["end"] = 0
            return out
        base = len(q) + 2
        st = en = None
        for i, (a, b) in enumerate(offs):
            if st is None and b > ex["a0"]:
                st = i
            if a < ex["a1"]:
                en = i
        if st is None or en is None or en < st:
            return None  # the answer was cut off
        out["start"], out["end"] = base + st, base + en
        return out


def base_encoder(max_len: int = MAX_LEN) -> PairEncoder:
    """The pair encoder of the base checkpoint's tokenizer (`model.base_dir`)."""
    from .model import base_dir

    b = base_dir()
    return PairEncoder(b / "tokenizer.json", json.loads((b / "special.json").read_text()), max_len)


def merge_sets(path: Path, sets: dict[str, list[list[dict]]], enc=None) -> None:
    """Encode each set's units (an example the encoder drops, e.g. an answer cut off, leaves its unit; an
    emptied unit is dropped) and write them into the examples file at `path` under their key. `enc`
    defaults to the base encoder at the file's own length."""
    import sys

    import torch

    d = torch.load(path, weights_only=False)
    enc = enc or base_encoder(d.get("max_len", MAX_LEN))
    for key, units in sets.items():
        eu = [[e for e in (enc(ex) for ex in u) if e is not None] for u in units]
        d[key] = [u for u in eu if u]
        print(f"{key}: {len(d[key])} units encoded", file=sys.stderr)
    torch.save(d, path)


def build(data: Path, enc: PairEncoder, seed: int = SEED, max_squad1: int = 24000) -> dict:
    rng = random.Random(seed)
    parts = {
        "squad1": squad1_units(data, rng, max_squad1),
        "squad2": squad2_units(data, rng),
        "piaf": piaf_units(data, rng),
        "polar": polar_units(data, REPO),
        "polarproc": procedure_polar_units(REPO),
    }
    nli = nli_examples(data, rng)
    out: dict = {"seed": seed, "max_len": enc.max_len}
    for name, splits in parts.items():
        for split, units in splits.items():
            rng.shuffle(units)
            enc_units = []
            for u in units:
                eu = [e for e in (enc(ex) for ex in u) if e is not None]
                if eu:
                    enc_units.append(eu)
            out[f"{name}_{split}"] = enc_units
            if split != "train":
                out[f"{name}_{split}_raw"] = units
    for split, exs in nli.items():
        out[f"nli_{split}"] = [e for e in (enc(ex) for ex in exs) if e is not None]
    return out


def main() -> None:
    import torch

    from .model import base_dir

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--out", type=Path, default=DEFAULT_CACHE / "examples.pt")
    ap.add_argument("--max-len", type=int, default=MAX_LEN)
    ap.add_argument("--max-squad1", type=int, default=24000, help="SQuAD 1.0 train questions used")
    a = ap.parse_args()
    b = base_dir()
    enc = PairEncoder(b / "tokenizer.json", json.loads((b / "special.json").read_text()), a.max_len)
    d = build(a.data, enc, max_squad1=a.max_squad1)
    a.out.parent.mkdir(parents=True, exist_ok=True)
    torch.save(d, a.out)
    for k, v in d.items():
        if isinstance(v, list) and not k.endswith("_raw"):
            n = sum(len(u) for u in v) if v and isinstance(v[0], list) else len(v)
            print(f"{k}: {len(v)} units, {n} examples")


if __name__ == "__main__":
    main()

