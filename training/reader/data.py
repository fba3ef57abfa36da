"""Examples for the reader, built deterministically from `shared/data/train`.

Question answering (span supervision; the no-answer position is the first token):
- SQuAD 1.0 train questions: each with a positive (a window of its paragraph around the answer) and a
  hard negative on the same subject: the paragraph with every sentence holding an answer string removed
  (70 %), or another paragraph of the same article without the answer (30 %). Pairing every question
  with both makes the question alone useless.
- SQuAD 2.0 dev questions (32 articles; the three reserved for evaluation are already out of the data):
  answerable ones with their spans over the whole paragraph, the human-written unanswerable ones as
  negatives, and an answer-removed negative for every answerable one. Articles in `STACK_ARTICLES`
  (chosen by hash) are kept out of training: the judge's combination head is fitted and calibrated on them.
NLI (contradiction against the rest): SNLI dev/test, Breaking NLI, FEVER-symmetric, hypothesis first
(the slot of the question), premise second.

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


def qa_examples(data: Path, rng: random.Random) -> dict[str, list[dict]]:
    """{"train": [...], "val": [...], "stack": [...]}: lists of units, each a list of examples of one question."""
    units: dict[str, list[list[dict]]] = {"train": [], "val": [], "stack": []}
    spans_dir = data / "train" / "squad_spans"
    # SQuAD 1.0 train
    by_article: dict[str, list[dict]] = {}
    paras = [json.loads(x) for x in read_text(spans_dir / "squad1_train.jsonl").splitlines() if x.strip()]
    for p in paras:
        by_article.setdefault(p["title"], []).append(p)
    for title, plist in by_article.items():
        split = "val" if is_val_article(title) else "train"
        for pi, p in enumerate(plist):
            ctx = p["context"]
            spans = sentences(ctx)
            for qa in p["qas"]:
                if qa.get("is_impossible") or not qa["answers"]:
                    continue
                ans = qa["answers"][0]
                a0, a1 = ans["start"], ans["start"] + len(ans["text"])
                if ctx[a0:a1] != ans["text"]:
                    continue
                texts = [a["text"] for a in qa["answers"]]
                budget = rng.randint(250, 700)
                si = next((i for i, (a, b) in enumerate(spans) if a <= a0 < b), None)
                if si is None:
                    continue
                s, e = window(ctx, spans, si, budget, rng)
                if not (s <= a0 and a1 <= e):
                    s, e = min(s, a0), max(e, a1)
                pos = {"q": qa["question"], "c": ctx[s:e], "a0": a0 - s, "a1": a1 - s, "ans": 1, "src": "squad1"}
                neg = None
                if rng.random() < 0.7:
                    t = answer_removed(ctx, texts, a0, budget, rng)
                    if t:
                        neg = {"q": qa["question"], "c": t, "a0": -1, "a1": -1, "ans": 0, "src": "squad1-removed"}
                if neg is None and len(plist) > 1:
                    for _ in range(4):
                        o = plist[rng.randrange(len(plist))]
                        if o is p or _has_any(o["context"], texts):
                            continue
                        osp = sentences(o["context"])
                        s2, e2 = window(o["context"], osp, rng.randrange(len(osp)), budget, rng)
                        neg = {"q": qa["question"], "c": o["context"][s2:e2], "a0": -1, "a1": -1, "ans": 0,
                               "src": "squad1-otherpara"}
                        break
                units[split].append([pos] + ([neg] if neg else []))
    # SQuAD 2.0 dev (reserved articles already excluded from the file)
    for x in read_text(spans_dir / "squad2_dev.jsonl").splitlines():
        if not x.strip():
            continue
        p = json.loads(x)
        split = "stack" if is_stack_article(p["title"]) else "train"
        ctx = p["context"]
        for qa in p["qas"]:
            if qa.get("is_impossible") or not qa["answers"]:
                units[split].append([{"q": qa["question"], "c": ctx, "a0": -1, "a1": -1, "ans": 0, "src": "squad2-unanswerable"}])
                continue
            ans = qa["answers"][0]
            a0, a1 = ans["start"], ans["start"] + len(ans["text"])
            if ctx[a0:a1] != ans["text"]:
                continue
            unit = [{"q": qa["question"], "c": ctx, "a0": a0, "a1": a1, "ans": 1, "src": "squad2"}]
            t = answer_removed(ctx, [a["text"] for a in qa["answers"]], a0, 2000, rng)
            if t:
                unit.append({"q": qa["question"], "c": t, "a0": -1, "a1": -1, "ans": 0, "src": "squad2-removed"})
            units[split].append(unit)
    return units


def nli_examples(data: Path, rng: random.Random) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {"train": [], "val": []}
    for folder in ("snli_devtest_esnli", "breaking_nli", "fever_symmetric"):
        for x in read_text(data / "train" / folder / "data.jsonl").splitlines():
            if not x.strip():
                continue
            r = json.loads(x)
            if r.get("label") not in NLI_LABELS:
                continue
            ex = {"q": _detok(r["hypothesis"]), "c": _detok(r["premise"]), "nli": NLI_LABELS[r["label"]], "src": folder}
            split = "val" if zlib.crc32(ex["c"].encode()) % 20 == 0 else "train"
            out[split].append(ex)
    return out


def _detok(s: str) -> str:
    """SNLI and FEVER are PTB-tokenised ("packages ."): undo the spaces before punctuation."""
    s = re.sub(r"\s+([.,;:!?)\]'])", r"\1", s)
    s = re.sub(r"([(\[])\s+", r"\1", s)
    s = s.replace(" n't", "n't").replace("-LRB-", "(").replace("-RRB-", ")")
    return s.strip()


def encode(tok, ex: dict, max_len: int = MAX_LEN) -> dict | None:
    """Token ids and the answer's token span (0, 0 for no answer); None when the answer is cut off."""
    enc = tok(ex["q"], ex["c"], truncation="only_second", max_length=max_len, return_offsets_mapping=True)
    ids = enc["input_ids"]
    tt = enc["token_type_ids"]
    out = {"ids": ids, "tt": tt}
    if "nli" in ex:
        out["nli"] = ex["nli"]
        return out
    out["ans"] = ex["ans"]
    if ex["a0"] < 0:
        out["start"] = out["end"] = 0
        return out
    seq = enc.sequence_ids()
    st = en = None
    for i, (s, (a, b)) in enumerate(zip(seq, enc["offset_mapping"])):
        if s != 1:
            continue
        if st is None and b > ex["a0"]:
            st = i
        if a < ex["a1"]:
            en = i
    if st is None or en is None or en < st:
        return None
    out["start"], out["end"] = st, en
    return out


def build(data: Path, tok, max_len: int = MAX_LEN, seed: int = SEED) -> dict:
    rng = random.Random(seed)
    qa = qa_examples(data, rng)
    nli = nli_examples(data, rng)
    out: dict = {"seed": seed, "max_len": max_len}
    for split, units in qa.items():
        rng.shuffle(units)
        enc_units = []
        for u in units:
            eu = []
            for ex in u:
                e = encode(tok, ex, max_len)
                if e is not None:
                    e["src"] = ex["src"]
                    eu.append(e)
            if eu:
                enc_units.append(eu)
        out[f"qa_{split}"] = enc_units
        out[f"qa_{split}_raw"] = units if split != "train" else None
    for split, exs in nli.items():
        rng.shuffle(exs)
        out[f"nli_{split}"] = [dict(encode(tok, ex, max_len), src=ex["src"]) for ex in exs]
    return out


def main() -> None:
    import torch

    from .model import load_tokenizer

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--out", type=Path, default=DEFAULT_CACHE / "examples.pt")
    ap.add_argument("--max-len", type=int, default=MAX_LEN)
    a = ap.parse_args()
    tok = load_tokenizer()
    d = build(a.data, tok, a.max_len)
    a.out.parent.mkdir(parents=True, exist_ok=True)
    torch.save(d, a.out)
    for k, v in d.items():
        if isinstance(v, list):
            n = sum(len(u) for u in v) if v and isinstance(v[0], list) else len(v)
            print(f"{k}: {len(v)} units, {n} examples")


if __name__ == "__main__":
    main()


def read_jsonl_lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in read_text(path).splitlines() if x.strip()]
