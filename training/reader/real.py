"""Reader examples from real documents, labels set by construction.

From `../shared/data/real/corpus/passages.jsonl` (policies, install guides, admin manuals, API docs,
English and French; split by document with `training.real_pairs.split_of`: the reader trains on the
`fit` documents only, `cal` is left to the judge's heads and `test` to the report). Real passages mix
headings, lists, tables and rules, speak in the second person and run past SQuAD's windows: what the
reader must learn to read. From one real sentence holding a stated quantity, name or rule:

- `realqa` (span): the sentence turned into a question whose answer is its quantity ("Test keys are
  limited to 250,000 emails per day." -> "Test keys are limited to how many emails per day?", French
  "combien de ..."), or a definition / default sentence (`real_pairs.value_question`); positive against a
  window of the passage that holds it, negative against the same window without that sentence (when the
  value is stated nowhere else in it) or against another passage of the document without the value:
  every question meets one passage of each label, so the question alone predicts nothing;
- `realpolar` (yes / no / open): "Is it true that <the sentence>?" (yes), the same with its quantity
  changed or its modal negated (no), and against the passage without the sentence (open); rule
  sentences give "Shall X ...?" questions (`real_pairs.polar_question`) the same way;
- `realnli` (the claim in the question's slot): the sentence (entailment), the sentence with one value
  changed or its modal negated (contradiction), the sentence against the passage without it (neutral).

    python -m training.reader.real [--out .cache/reader/examples_real.pt]   # merged into examples.pt's sets
"""

from __future__ import annotations

import argparse
import json
import random
import re
from pathlib import Path

from training.real_pairs import CORPUS, polar_question, split_of, value_question

from .data import window  # a run of whole segments around one, grown at random up to a budget

SEED = 20261203
MIN_WIN, MAX_WIN = 300, 750
KEYWORD_SHARE = 0.5  # span questions asked in a shorter form (`_keyword_question`) rather than as an echo

# a stated quantity: a number (with its thousands separators) and the word or unit after it
_QTY = re.compile(r"(?<![\w.,/:#+-])(?P<num>\d{1,3}(?:[,\u00a0\u202f]\d{3})+|\d+(?:[.,]\d+)?)(?![.,]?\d)"
                  r"(?:(?P<unit>%|\s?(?:kB|KB|MB|GB|TB|Ko|Mo|Go|To|ms)\b)|\s(?P<word>[a-zA-Zéèêàç]{2,14})\b|(?![\w/:@-]))")
_UNIT_SKIP = {"and", "or", "to", "et", "ou", "of", "de", "in", "en", "the", "le", "la", "les", "an", "un", "une", "is", "are",
              "est", "sont", "for", "pour", "with", "avec", "by", "par", "on", "sur"}
_SENT_END = re.compile(r"(?<=[a-zà-ÿ0-9)\]»\"'][.!?])\s+(?=[A-ZÀ-Ý«\"'(\[])")
# a prose sentence: starts with a capital, ends with a full stop, words mostly alphabetic, no code
_PROSE = re.compile(r"^[A-ZÀ-Ý][^=#{}<>*\\_~^$]{28,258}[a-zà-ÿ0-9)%»]\.$")
_NEGATABLE_EN = (("must not", "must"), ("shall not", "shall"), ("should not", "should"), ("cannot", "can"),
                 ("must", "must not"), ("shall", "shall not"), ("should", "should not"), ("can", "cannot"))
_NEGATABLE_FR = ((" ne doit pas ", " doit "), (" ne doivent pas ", " doivent "), (" doit ", " ne doit pas "),
                 (" doivent ", " ne doivent pas "), (" est activé", " est désactivé"), (" est désactivé", " est activé"))


def _segments(text: str) -> list[tuple[int, int]]:
    """Character spans of the passage's lines, each line cut into sentences."""
    out = []
    for m in re.finditer(r"[^\n]+", text):
        a = m.start()
        line, pos = m.group(), 0
        for cut in [c.end() for c in _SENT_END.finditer(line)] + [len(line)]:
            if line[pos:cut].strip():
                out.append((a + pos, a + cut))
            pos = cut
    return out


def _changed_number(num: str, rng: random.Random, text: str) -> str | None:
    digits = re.sub(r"[,  ]", "", num)
    try:
        v = float(digits.replace(",", "."))
    except ValueError:
        return None
    for _ in range(6):
        f = rng.choice((0.5, 2, 3, 4, 5, 10, 0.25, 1.5))
        w = v * f
        if w == v or w <= 0:
            continue
        s = str(int(w)) if float(w).is_integer() else f"{w:.1f}"
        if "," in num and len(s) > 3:
            s = f"{int(w):,}"
        if s not in text:
            return s
    return None


def _quantity_question(sent: str, m: re.Match, lang: str, subj: str) -> str | None:
    """The sentence with its quantity replaced by the question word, or None."""
    unit = (m["unit"] or m["word"] or "").strip()
    if unit.lower() in _UNIT_SKIP:
        unit = ""
    head, tail = sent[:m.start()], sent[m.end() if unit else m.end("num"):]
    tail = tail.rstrip(" .;:")
    if len(head.split()) < 2:
        return None
    if lang == "fr":
        wh = f"combien de {unit}" if unit and unit != "%" else ("quel pourcentage" if unit == "%" else "combien")
        q = f"{head}{wh}{tail} ?"
        if subj:
            q = f"{subj} : {q[0].lower()}{q[1:]}"
    else:
        wh = f"how many {unit}" if unit and unit != "%" else ("what percentage" if unit == "%" else "how many")
        q = f"{head}{wh}{tail}?"
        if subj:
            q = f"In {subj}, {q[0].lower() if not q[:2].isupper() else q[0]}{q[1:]}"
    q = re.sub(r"\s+", " ", q).strip()
    return q if 20 <= len(q) <= 220 else None


_STOP = {"the", "a", "an", "of", "to", "in", "on", "for", "is", "are", "be", "by", "and", "or", "with", "that", "this", "it",
         "le", "la", "les", "un", "une", "des", "de", "du", "d", "l", "à", "au", "aux", "et", "ou", "en", "est", "sont", "par",
         "pour", "sur", "dans", "que", "qui", "ce", "cette", "ces", "se", "sa", "son", "ses"}


def _keyword_question(sent: str, m: re.Match, lang: str, subj: str, rng: random.Random) -> str | None:
    """A shorter question on the same quantity, as people ask it: the question word, its unit and some of
    the sentence's content words (a share dropped at random), with the document's subject."""
    unit = (m["unit"] or m["word"] or "").strip()
    if unit.lower() in _UNIT_SKIP or unit == "%":
        unit = ""
    words = [w for w in re.findall(r"[\w'’-]+", sent[:m.start()] + " " + sent[m.end():]) if w.lower() not in _STOP
             and not any(c.isdigit() for c in w) and w != unit]
    if len(words) < 3:
        return None
    keep = [w for w in words if rng.random() < 0.6][:7] or words[:3]
    if lang == "fr":
        wh = rng.choice([f"Combien de {unit}" if unit else "Combien", f"Quelle valeur ({unit})" if unit else "Quelle valeur"])
        q = f"{wh} pour {' '.join(keep)}" + (f" dans {subj}" if subj and rng.random() < 0.7 else "") + " ?"
    else:
        wh = rng.choice([f"How many {unit}" if unit else "How many", f"What {unit} value" if unit else "What value",
                         f"What is the {unit}" if unit else "What is the number"])
        q = f"{wh} for {' '.join(keep)}" + (f" in {subj}" if subj and rng.random() < 0.7 else "") + "?"
    return q if 20 <= len(q) <= 200 else None


def _negated(sent: str, lang: str) -> str | None:
    if lang == "fr":
        for a, b in _NEGATABLE_FR:
            if a in sent:
                return sent.replace(a, b, 1)
        return None
    low = sent.lower()
    for a, b in _NEGATABLE_EN:
        i = low.find(f" {a} ")
        if i >= 0:
            return sent[:i + 1] + b + sent[i + 1 + len(a):]
    return None


def _claim_question(sent: str, lang: str) -> str:
    s = sent.rstrip(" .;:")
    return (f"Est-il vrai que {s[0].lower()}{s[1:]} ?" if lang == "fr" and not s[:2].isupper()
            else f"Est-il vrai que {s} ?") if lang == "fr" else f"Is it true that {s[0].lower() if not s[:2].isupper() else s[0]}{s[1:]}?"


def _subject(title: str) -> str:
    seg = re.split(r"\s*[›>|]\s*", title or "")[0].strip()
    return seg if 0 < len(seg.split()) <= 6 and not seg.endswith("?") else ""


def build(split: str = "fit", seed: int = SEED, max_per_doc: int = 24) -> dict[str, list[list[dict]]]:
    """{"realqa": units, "realpolar": units, "realnli": units}; a unit is one question's examples."""

    rng = random.Random(f"{seed}:{split}")
    by_doc: dict[str, list[dict]] = {}
    for line in CORPUS.read_text(encoding="utf-8").splitlines():
        r = json.loads(line)
        if split_of(r["doc_id"]) == split:
            by_doc.setdefault(r["doc_id"], []).append(r)
    out = {"realqa": [], "realpolar": [], "realnli": []}
    for doc_id in sorted(by_doc):
        passages = by_doc[doc_id]
        made = {"realqa": 0, "realpolar": 0, "realnli": 0}
        order = list(range(len(passages)))
        rng.shuffle(order)
        for pi in order:
            p = passages[pi]
            text, lang = p["text"], p["lang"]
            segs = _segments(text)
            idx = list(range(len(segs)))
            rng.shuffle(idx)
            for si in idx:
                if all(v >= max_per_doc for v in made.values()):
                    break
                a, b = segs[si]
                sent = text[a:b].strip()
                a = text.find(sent, a)
                if not _PROSE.match(sent) or "`" in sent or "|" in sent or len(sent.split()) < 6:
                    continue
                if sum(ch.isalpha() or ch == " " for ch in sent) < 0.85 * len(sent):
                    continue
                rest_text = (text[:a] + text[a + len(sent):]).strip()
                budget = rng.randint(MIN_WIN, MAX_WIN)
                s0, e0 = window(text, segs, si, budget, rng)
                win = text[s0:e0]
                # the same region of the passage without the sentence
                rs = max(0, s0 - (1 if s0 > 0 else 0))
                neg_win = (text[rs:a] + text[a + len(sent):e0]).strip()
                if len(neg_win) < 120:
                    rsegs = _segments(rest_text)
                    if not rsegs:
                        continue
                    c = min(range(len(rsegs)), key=lambda i: abs(rsegs[i][0] - a))
                    r0, r1 = window(rest_text, rsegs, c, budget, rng)
                    neg_win = rest_text[r0:r1]
                ms = [m for m in _QTY.finditer(sent) if not re.fullmatch(r"(19|20)\d\d", m["num"])]
                g = f"real:{doc_id}"
                n_before = {k: len(v) for k, v in out.items()}
                # --- span questions -------------------------------------------------------------
                if made["realqa"] < max_per_doc:
                    q = val = key = None
                    vq = value_question(sent, p["title"], lang)
                    if vq is not None and len(vq[1].split()) <= 5:
                        q, val = vq
                        key = ms[0]["num"] if ms else val
                    elif 1 <= len(ms) <= 3:
                        m = rng.choice(ms)
                        q = (_keyword_question(sent, m, lang, _subject(p["title"]), rng) if rng.random() < KEYWORD_SHARE
                             else None) or _quantity_question(sent, m, lang, _subject(p["title"]))
                        val, key = sent[m.start():m.end()].strip(), m["num"]
                    if q and val and val in sent:
                        a0 = a + sent.index(val) - s0
                        if win[a0:a0 + len(val)] == val and key not in neg_win:
                            neg = neg_win
                            src = "real-removed"
                            others = [o for o in passages if o is not p and key not in o["text"] and o["lang"] == lang]
                            if others and rng.random() < 0.3:
                                o = rng.choice(others)
                                osegs = _segments(o["text"])
                                if osegs:
                                    o0, o1 = window(o["text"], osegs, rng.randrange(len(osegs)), budget, rng)
                                    neg, src = o["text"][o0:o1], "real-otherpassage"
                            out["realqa"].append([
                                {"kind": "qa", "q": q, "c": win, "a0": a0, "a1": a0 + len(val), "ans": 1, "src": "real-span", "g": g},
                                {"kind": "qa", "q": q, "c": neg, "a0": -1, "a1": -1, "ans": 0, "src": src, "g": g}])
                            made["realqa"] += 1
                # --- yes/no and claims --------------------------------------------------------------
                if len(ms) >= 1 or _negated(sent, lang):
                    changed = None
                    if ms:
                        m = rng.choice(ms)
                        new = _changed_number(m["num"], rng, text)
                        if new:
                            changed = sent[:m.start("num")] + new + sent[m.end("num"):]
                    if changed is None:
                        changed = _negated(sent, lang)
                    if changed and changed != sent:
                        if made["realpolar"] < max_per_doc:
                            pq = polar_question(sent, lang)
                            if pq is not None and rng.random() < 0.5:
                                q1, ans = pq
                                unit = [{"kind": "polar", "q": q1, "c": win, "pol": 0 if ans == "yes" else 1, "src": "real-rule"},
                                        {"kind": "polar", "q": q1, "c": neg_win, "pol": 2, "src": "real-rule-removed"}]
                            else:
                                unit = [{"kind": "polar", "q": _claim_question(sent, lang), "c": win, "pol": 0, "src": "real-claim"},
                                        {"kind": "polar", "q": _claim_question(changed, lang), "c": win, "pol": 1, "src": "real-claim-changed"},
                                        {"kind": "polar", "q": _claim_question(sent, lang), "c": neg_win, "pol": 2,
                                         "src": "real-claim-removed"}]
                            out["realpolar"].append(unit)
                            made["realpolar"] += 1
                        if made["realnli"] < max_per_doc:
                            out["realnli"].append([
                                {"kind": "nli", "q": sent, "c": win, "nli": 0, "src": "real-nli-same"},
                                {"kind": "nli", "q": changed, "c": win, "nli": 2, "src": "real-nli-changed"},
                                {"kind": "nli", "q": sent, "c": neg_win, "nli": 1, "src": "real-nli-removed"}])
                            made["realnli"] += 1
                for k, v in out.items():
                    for u in v[n_before[k]:]:
                        for ex in u:
                            ex["title"], ex["group"] = p["title"], g
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--split", default="fit", choices=("fit", "cal", "test"))
    ap.add_argument("--out", type=Path, default=None, help="merge the sets, encoded, into this examples.pt")
    ap.add_argument("--show", type=int, default=0, help="print this many units of each set")
    a = ap.parse_args(argv)
    sets = build(a.split)
    for k, units in sets.items():
        print(k, len(units), "units", sum(len(u) for u in units), "examples")
        for u in random.Random(1).sample(units, min(a.show, len(units))):
            for ex in u:
                lab = ex.get("ans", ex.get("pol", ex.get("nli")))
                print(f"   {lab} {ex['src']:22s} | {ex['q'][:150]}")
                if ex.get("a0", -1) >= 0:
                    print(f"      span: {ex['c'][ex['a0']:ex['a1']]!r}")
    if a.out:
        from .data import merge_sets

        merge_sets(a.out, {f"{k}_{a.split}": units for k, units in sets.items()})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
