"""Reader examples from people's questions: `../shared/data/real/train` (questions written by hand, as
users who had not read the passage ask them, over seven sources of the real corpus).

Each question meets the passages the judge meets for it: its expected passages, its hard negatives
(`relevant_sources`), and the passages of its source's library nearest to it by embedding
(the list `training.real_heads --collect` wrote, `.cache/real_heads/pairs.jsonl`, or `--nearest` in a few
minutes, `.cache/real_heads/nearest.json`; without either, the labelled passages only). Labels come from
the question's labels only:

- span questions (factual, twin, across languages, superseded, two-part, and the unanswerable kinds):
  an expected passage is answerable (the answer's span when its exact text is in the window read, else
  the answerable logit alone: `start`/`end` = -100, ignored by the span loss); every other passage is
  not. Archived revisions and twins (`forbidden_sources`) are left out: such a passage reads like an
  answer, and what sets it aside is its status or the twin found at ingest, not its text (the reader does
  not read titles, where a twin's unit is often named);
- yes/no questions: an expected passage settles it (yes or no, from the question's kind), every other
  passage leaves it open;
- the question as a claim (the NLI head, which the judge's contradiction head reads): a false premise's
  expected passage contradicts it; an answering passage of any other question does not ("compatible":
  entailment or neutral), so a passage that says "no" to a yes/no question is not read as a conflict;
  the other passages of a false-premise question are neutral.

A long passage is read in windows at run time; here a positive is cut to a window around its answer
when the answer's text is found, and kept whole only when it fits the reader's length, else dropped (an
answer outside the window read would be a wrong label); a negative is cut to a random window.

Sources are split: `HELD_OUT` sources are never read here (the reader is measured on them), and the
other sources' questions are split by document (`split_of`): `fit` trains the reader, `cal` is left to
its heads.

    python -m training.reader.people [--out .cache/reader/examples.pt] [--show 3]
    python -m training.reader.people --evaluate WEIGHTS_DIR [WEIGHTS_DIR ...]   # the readers on the held-out sources
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import sys
from pathlib import Path

from .data import REPO, window
from .real import _segments

TRAIN = REPO.parent / "shared" / "data" / "real" / "train" / "parts"
CORPUS = REPO.parent / "shared" / "data" / "real" / "corpus" / "passages.jsonl"
PAIRS = REPO / ".cache" / "real_heads" / "pairs.jsonl"
NEAREST = REPO / ".cache" / "real_heads" / "nearest.json"
HELD_OUT = ("openstack-b", "vitam", "px4", "cnil-rgpd")  # English and French sources, old and new, the reader and its heads never see
SEED = 20261205
MAX_LEN = 256  # the run-time reader's window
SPAN_KINDS = {"factual", "twin", "fr_en", "en_fr", "superseded", "two_part", "unstated", "out_of_scope", "twin_missing"}
MAX_OTHERS = 5  # passages that do not answer, per question: the labelled hard negatives first
POLAR = {"yes_no_yes": 0, "yes_no_no": 1, "yes_no_open": 2}


def question_doc(q: dict) -> str:
    """The document a question is about: its first expected, else hard-negative, else forbidden passage's."""
    for key in ("expected_sources", "relevant_sources", "forbidden_sources"):
        if q.get(key):
            return q[key][0].split("#")[0]
    return q["id"]


def split_of(q: dict) -> str:
    """By document: `cal` (one in four documents: the heads) or `fit` (the reader)."""
    k = int(hashlib.md5(("people-doc:" + question_doc(q)).encode()).hexdigest(), 16) % 4
    return "cal" if k == 0 else "fit"


def questions(parts: tuple[str, ...] | None = None) -> list[dict]:
    """The shared parts' questions and the project's own (`training/people/parts`); `part` is the source
    (every batch of a source together: `pgdocs.2a` is `pgdocs`)."""
    from training.people.common import people_questions, read_parts

    return read_parts(TRAIN, parts) + people_questions(parts)


def nearest() -> dict[str, list[str]]:
    """Question id -> the passages `real_heads --collect` read for it, else those `real_heads --nearest`
    listed (the same list, without the few the judge did not read); empty without either file."""
    out: dict[str, list[str]] = {}
    if PAIRS.exists():
        for line in PAIRS.read_text(encoding="utf-8").splitlines():
            r = json.loads(line)
            out.setdefault(r["qid"], []).append(r["passage"])
    elif NEAREST.exists():
        out = json.loads(NEAREST.read_text(encoding="utf-8"))
    return out


def _window(text: str, rng: random.Random, around: int | None = None) -> str:
    segs = _segments(text)
    if not segs:
        return text[:900]
    if around is None:
        c = rng.randrange(len(segs))
    else:
        c = min(range(len(segs)), key=lambda i: 0 if segs[i][0] <= around < segs[i][1] else abs(segs[i][0] - around))
    a, b = window(text, segs, c, rng.randint(450, 850), rng)
    return text[a:b]


def units_for(q: dict, passages: dict[str, dict], near: list[str], rng: random.Random, fits,
              max_others: int = MAX_OTHERS) -> list[dict]:
    kind = q["kind"]
    expected = [s for s in q.get("expected_sources") or [] if s in passages]
    # archived revisions and twins are set aside by their status and by the twin stage, not by their text: a
    # twin reads like the answer (its unit is often named only in the title, which the reader does not read)
    skip = set(q.get("archived_sources") or []) | set(q.get("forbidden_sources") or [])
    others = []
    for s in list(q.get("relevant_sources") or []) + list(near):
        if s in passages and s not in expected and s not in skip and s not in others:
            others.append(s)
    query, ans_text = q["query"], (q.get("answer") or "").strip()
    out: list[dict] = []

    def positive_text(pid: str) -> tuple[str, int]:
        """(window, answer offset in it or -1); ("", -1) when no window can be trusted to hold the answer."""
        text = passages[pid]["text"]
        i = text.find(ans_text) if ans_text else -1
        if i >= 0:
            w = _window(text, rng, around=i)
            j = w.find(ans_text)
            if j >= 0:
                return w, j
        return (text, -1) if fits(query, text) else ("", -1)

    for pid in expected:
        if kind in POLAR:
            text, _ = positive_text(pid)
            if text:
                out.append({"kind": "polar", "q": query, "c": text, "pol": POLAR[kind], "src": "people-polar"})
                if kind != "yes_no_open":
                    out.append({"kind": "nli", "q": query, "c": text, "nli": -1, "src": "people-nli-compatible"})
        elif kind == "false_premise":
            text, _ = positive_text(pid)
            if text:
                out.append({"kind": "nli", "q": query, "c": text, "nli": 2, "src": "people-nli-premise"})
                out.append({"kind": "qa", "q": query, "c": text, "a0": -1, "a1": -1, "ans": 0, "src": "people-premise"})
        elif kind in SPAN_KINDS:
            text, j = positive_text(pid)
            if text:
                a0, a1 = (j, j + len(ans_text)) if j >= 0 else (-100, -100)
                out.append({"kind": "qa", "q": query, "c": text, "a0": a0, "a1": a1, "ans": 1, "src": "people-answer"})
                out.append({"kind": "nli", "q": query, "c": text, "nli": -1, "src": "people-nli-compatible"})
    neutral = 0
    for pid in others[:max_others]:
        text = _window(passages[pid]["text"], rng)
        if kind in POLAR:
            out.append({"kind": "polar", "q": query, "c": text, "pol": 2, "src": "people-polar-open"})
        else:
            out.append({"kind": "qa", "q": query, "c": text, "a0": -1, "a1": -1, "ans": 0, "src": "people-other"})
            if kind == "false_premise" and neutral < 2:
                neutral += 1
                out.append({"kind": "nli", "q": query, "c": text, "nli": 1, "src": "people-nli-neutral"})
    return out


def corpus_passages() -> dict[str, dict]:
    """The real corpus's passages and the project's own sources' (`training/people/corpus`), by id."""
    from training.people.common import load_passages

    out = {}
    for line in CORPUS.read_text(encoding="utf-8").splitlines():
        r = json.loads(line)
        out[r["id"]] = r
    out.update(load_passages())
    return out


def build(split: str = "fit", seed: int = SEED, fits=None, max_others: int = MAX_OTHERS) -> list[list[dict]]:
    """One unit per question of the sources not held out, in `split`."""
    rng = random.Random(f"{seed}:{split}")
    passages = corpus_passages()
    near = nearest()
    fits = fits or (lambda q, c: len(c) < 700)
    units = []
    for q in questions():
        if q["part"] in HELD_OUT or split_of(q) != split:
            continue
        u = units_for(q, passages, near.get(q["id"], []), rng, fits, max_others)
        for ex in u:
            ex["group"] = f"people:{q['id']}"
        if u:
            units.append(u)
    return units


class PeopleEncoder:
    """`data.PairEncoder` at the run-time length, with the span left unset (-100) where the answer's place
    is unknown."""

    def __init__(self):
        from .data import base_encoder

        self.enc = base_encoder(MAX_LEN)

    def fits(self, q: str, c: str) -> bool:
        nq = min(64, len(self.enc.tok.encode(q, add_special_tokens=False).ids))
        return nq + len(self.enc.tok.encode(c, add_special_tokens=False).ids) + 3 <= MAX_LEN

    def __call__(self, ex: dict) -> dict | None:
        if ex["kind"] == "qa" and ex["a0"] == -100:
            out = self.enc(dict(ex, a0=-1, a1=-1))
            if out is not None:
                out["start"] = out["end"] = -100
            return out
        return self.enc(ex)


def evaluate(weights_dirs: list[Path], parts: tuple[str, ...] = HELD_OUT, seed: int = 7,
             each: bool = False) -> dict[tuple[str, ...], dict[str, dict]]:
    """Each reader (a weights folder with `reader.onnx`) alone on every question of `parts`, all passages
    whole (the run-time reader reads them in windows): AUROC of its answerable probability on span
    questions' pairs, of how surely it settles yes/no questions, and of its NLI contradiction on the
    question-as-claim pairs (a false premise's passage against the others). Keyed by the parts scored
    together: all of `parts`, and with `each` every part alone as well (from the same readings)."""
    from sklearn.metrics import roc_auc_score

    sys.path.insert(0, str(REPO / "src"))
    from sourcegate.judges.local.reader import Reader

    passages = corpus_passages()
    near = nearest()
    rng = random.Random(seed)
    rows = [dict(ex, part=q["part"]) for q in questions(parts)
            for ex in units_for(q, passages, near.get(q["id"], []), rng, lambda a, b: True)]
    by_q: dict[str, list[int]] = {}
    for i, ex in enumerate(rows):
        by_q.setdefault(ex["q"], []).append(i)
    groups = [tuple(parts)] + ([(p,) for p in parts] if each else [])
    out: dict[tuple[str, ...], dict[str, dict]] = {g: {} for g in groups}

    def auroc(pairs) -> float | None:
        pairs = list(pairs)
        if len({y for y, _ in pairs}) < 2:
            return None
        return round(float(roc_auc_score(*zip(*pairs))), 3)

    for wd in weights_dirs:
        rd = Reader(wd)
        got: list = [None] * len(rows)
        for q, idx in by_q.items():
            for i, r in zip(idx, rd.read(q, [rows[i]["c"] for i in idx])):
                got[i] = r
        for g in groups:
            sel = [i for i, ex in enumerate(rows) if ex["part"] in g]
            qa = [(rows[i]["ans"], got[i].p_answer) for i in sel if rows[i]["kind"] == "qa"]
            pol = [(int(rows[i]["pol"] != 2), 1 - got[i].p_open) for i in sel if rows[i]["kind"] == "polar"]
            nli = [(int(rows[i]["nli"] == 2), got[i].p_contradiction) for i in sel if rows[i]["kind"] == "nli"]
            if "question_only" not in out[g]:
                # a reader of the question alone that knew perfectly whether the question has an answer in
                # the library: the figure a pair score must beat to show it reads the passage
                answered = {rows[i]["q"] for i in sel if rows[i]["kind"] == "qa" and rows[i]["ans"] == 1}
                qo = [(rows[i]["ans"], int(rows[i]["q"] in answered)) for i in sel if rows[i]["kind"] == "qa"]
                out[g]["question_only"] = {"answerable_auroc": auroc(qo)}
            out[g][str(wd)] = {"answerable_auroc": auroc(qa), "span_pairs": len(qa),
                               "settles_auroc": auroc(pol), "yes_no_pairs": len(pol),
                               "premise_contradiction_auroc": auroc(nli), "claim_pairs": len(nli)}
    return out


def main(argv=None) -> int:
    import collections

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=None, help="merge people_fit / people_cal, encoded, into this examples.pt")
    ap.add_argument("--show", type=int, default=0)
    ap.add_argument("--max-others", type=int, default=MAX_OTHERS,
                    help="passages that do not answer, per question (the held-out evaluation always reads 5)")
    ap.add_argument("--evaluate", type=Path, nargs="+", metavar="WEIGHTS_DIR",
                    help="no examples: score these readers on the held-out sources' pairs")
    ap.add_argument("--parts", default=",".join(HELD_OUT),
                    help="with --evaluate: the held-out sources to read (each alone with --each)")
    ap.add_argument("--each", action="store_true", help="with --evaluate: one line per source as well")
    ap.add_argument("--shares", default="",
                    help="with --out: also people_fit_sNN, a seeded share of people_fit's distinct questions (e.g. "
                         "0.125,0.25,0.5: sets people_fit_s12, people_fit_s25, people_fit_s50), for the curve against "
                         "distinct questions (each trained for the same passes, not more)")
    a = ap.parse_args(argv)
    if a.evaluate:
        parts = tuple(a.parts.split(","))
        for group, by_reader in evaluate(a.evaluate, parts, each=a.each).items():
            for wd, res in by_reader.items():
                print(",".join(group), wd, json.dumps(res), flush=True)
        return 0
    enc = PeopleEncoder()
    sets = {s: build(s, fits=enc.fits, max_others=a.max_others) for s in ("fit", "cal")}
    for s, units in sets.items():
        c = collections.Counter(ex["src"] for u in units for ex in u)
        print(f"people_{s}: {len(units)} questions, {sum(c.values())} examples", dict(sorted(c.items())))
        for u in random.Random(1).sample(units, min(a.show, len(units))):
            for ex in u:
                lab = ex.get("ans", ex.get("pol", ex.get("nli")))
                print(f"   {lab} {ex['src']:22s} | {ex['q'][:90]} || {ex['c'][:80]!r}")
    if a.out:
        from .data import merge_sets

        out = {f"people_{s}": units for s, units in sets.items()}
        fit = sets["fit"]
        order = random.Random("shares").sample(range(len(fit)), len(fit))  # nested: a quarter lies inside the half
        for share in (float(x) for x in a.shares.split(",") if x):
            keep = order[:max(1, int(len(fit) * share))]
            out[f"people_fit_s{int(share * 100)}"] = [fit[i] for i in sorted(keep)]
            print(f"people_fit_s{int(share * 100)}: {len(keep)} questions, {sum(len(fit[i]) for i in keep)} examples")
        merge_sets(a.out, out, enc)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
