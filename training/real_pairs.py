"""Question/passage pairs built from real documents, with labels set by construction.

From `../shared/data/real/corpus/passages.jsonl` (real policies, install guides, admin manuals, API
docs, English and French), split by document (`split_of`): questions are built from real sentences,
never written by hand, so the pairs read like the documents the gate serves:

- **value questions** (evidence): a definition sentence "The default value is 256 kB." gives "What is the
  default value of <the passage's subject>?" ("Quelle est la valeur par défaut de ... ?"); a sentence
  "X defaults to Y" / "X is limited to N ..." likewise. Label 1 against the passage; 0 against the same
  passage with that sentence removed (when the value is stated nowhere else in it), or against another
  passage of the same document that does not state the value: each question meets one passage of each
  label, so the question alone predicts nothing (the baseline is reported);
- **yes/no questions** (settles or leaves open): a rule "Automatic forwarding SHALL be disabled." gives
  "Shall automatic forwarding be disabled?" (settled: yes); a negated rule "Passwords SHALL NOT expire."
  gives "Shall passwords expire?" (settled: no); French rules give "Est-ce que ... ?" the same way. Label
  1 (settled) against the passage, 0 (open) against the passage without that sentence.

    python -m training.real_pairs --split train|cal|test   # prints counts and a sample
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT.parent / "shared" / "data" / "real" / "corpus" / "passages.jsonl"


def split_of(doc_id: str) -> str:
    """By document: `fit` (the heads' regression), `cal` (their calibration), `test` (report only)."""
    k = int(hashlib.md5(("real-doc:" + doc_id).encode()).hexdigest(), 16) % 10
    return "test" if k < 2 else ("cal" if k < 5 else "fit")


_DET_EN = {"the", "a", "an", "this", "these", "each", "every", "all", "any", "your", "our", "its", "their"}
_MODALS_EN = ("must not", "shall not", "should not", "cannot", "may not", "must", "shall", "should", "can", "may", "will")
_NEG_EN = {"must not": "must", "shall not": "shall", "should not": "should", "cannot": "can", "may not": "may"}
_EN_RULE = re.compile(r"^(?P<np>[A-Z][\w'’\-/. ]{2,80}?) (?P<m>must not|shall not|should not|cannot|may not|must|shall|"
                      r"should|can|may|will) (?P<vp>[a-z][^;:?!]{4,160})\.$", re.I)
_EN_DEF = re.compile(r"^(?P<det>The|A|An) (?P<np>[a-z][\w \-/]{2,60}?) (?P<v>is|are) (?P<val>[^;:?!]{1,80})\.$")
_EN_DEFAULTS = re.compile(r"^(?P<np>[A-Za-z][\w \-/.]{2,60}?) (?P<v>defaults to|is limited to|is set to|expires after|"
                          r"is retained for|are retained for|are kept for|is kept for) (?P<val>[^;:?!]{1,80})\.$")
_FR_DEF = re.compile(r"^(?P<det>Les|Le|La|L['’])\s?(?P<np>[a-zéèêàâîôûç][\w \-/'’éèêàâîôûç]{2,60}?) (?P<v>est|sont) "
                     r"(?P<val>[^;:?!]{1,80})\.$")
_FR_RULE = re.compile(r"^(?P<np>[A-ZÉ][^,;:?!]{2,80}?) (?P<m>doit|doivent|peut|peuvent) (?P<vp>[^;:?!]{4,160})\.$")
_FR_NEG = re.compile(r"^(?P<np>[A-ZÉ][^,;:?!]{2,80}?) (?:ne |n['’])(?P<m>doit|doivent|peut|peuvent) (?:pas|jamais) "
                     r"(?P<vp>[^;:?!]{4,160})\.$")
_DIGIT = re.compile(r"\d")


def _subject(title: str) -> str:
    """The passage's subject for a question: the last segment of its title, when short."""
    seg = re.split(r"\s*[›>|]\s*", title or "")[-1].strip()
    if seg.endswith("?"):
        return ""
    seg = re.sub(r"^\d+(\.\d+)*\.?\s*", "", seg)
    named = bool(re.search(r"[_\d]|[a-z][A-Z]|\b[A-Z]{2,}\b", seg))
    return seg if 0 < len(seg.split()) <= 6 and (named or len(seg.split()) >= 2) else ""


_BAD_START = {"if", "when", "although", "because", "since", "once", "unless", "while", "as", "in", "for", "on", "to", "by",
              "with", "after", "before", "it", "this", "these", "they", "he", "she", "there", "that", "those", "then",
              "however", "also", "here", "such", "note", "otherwise", "si", "quand", "lorsque", "il", "elle", "ils", "elles",
              "cela", "ceci", "ce", "cette", "on", "dans", "pour", "avec", "sans", "en", "puis", "ensuite", "enfin"}
_BAD_INSIDE = re.compile(r"\b(qui|que|dont|où|which|that|who|whose|where)\b", re.I)


def _good_np(np_: str, max_words: int) -> bool:
    w = np_.split()
    return 0 < len(w) <= max_words and w[0].lower().strip("'’") not in _BAD_START and not _BAD_INSIDE.search(np_)


def _pronoun_you(np_: str) -> str:
    return "I" if np_ in ("You", "you") else ("we" if np_ in ("We", "we") else np_)


def _lower_first(np_: str) -> str:
    w = np_.split(" ", 1)
    return (w[0].lower() + (" " + w[1] if len(w) > 1 else "")) if w[0].lower() in _DET_EN else np_


def value_question(sent: str, title: str, lang: str) -> tuple[str, str] | None:
    """(question, the value it asks for) from a definition sentence, or None."""
    subj = _subject(title)
    if lang == "fr":
        m = _FR_DEF.match(sent)
        if not m or not _good_np(m["np"], 4):
            return None
        det = m["det"].replace("’", "'")
        wh = {"La": "Quelle est la ", "Le": "Quel est le ", "Les": "Quels sont les ", "L'": "Quel est l'"}[det]
        q = wh + m["np"] + (f" pour {subj}" if subj and subj.lower() not in m["np"].lower() else "") + " ?"
        return q, m["val"]
    m = _EN_DEF.match(sent)
    if m and _good_np(m["np"], 5):
        q = f"What {m['v']} the {m['np']}" + (f" for {subj}" if subj and subj.lower() not in m["np"].lower() else "") + "?"
        return q, m["val"]
    m = _EN_DEFAULTS.match(sent)
    if m and _good_np(m["np"], 6):
        np_ = _lower_first(m["np"])
        verb = m["v"]
        if verb == "defaults to":
            q = f"What does {np_} default to?"
        elif verb == "is limited to":
            q = f"What is {np_} limited to?"
        elif verb == "is set to":
            q = f"What is {np_} set to?"
        elif verb == "expires after":
            q = f"When does {np_} expire?"
        else:
            q = f"How long {verb.split()[0]} {np_} {verb.split()[1]}?"
        return q, m["val"]
    return None


def polar_question(sent: str, lang: str) -> tuple[str, str] | None:
    """(yes/no question, "yes" or "no") from a rule sentence, or None."""
    if lang == "fr":
        m = _FR_NEG.match(sent)
        if m and not _good_np(m["np"], 8):
            return None
        if m:
            body, ans = f"{m['np'][0].lower()}{m['np'][1:]} {m['m']} {m['vp']}", "no"
        else:
            m = _FR_RULE.match(sent)
            if not m or not _good_np(m["np"], 8) or re.search(r"\b(ne|n['’])\b", sent):
                return None
            body, ans = f"{m['np'][0].lower()}{m['np'][1:]} {m['m']} {m['vp']}", "yes"
        lead = "Est-ce qu'" if body[:1].lower() in "aeiouéèêh" else "Est-ce que "
        return lead + body + " ?", ans
    m = _EN_RULE.match(sent)
    if not m or not _good_np(m["np"], 8):
        return None
    modal = m["m"].lower()
    ans = "no" if modal in _NEG_EN else "yes"
    modal = _NEG_EN.get(modal, modal)
    if re.search(r"\b(not|never|no)\b", m["vp"]):
        return None
    return f"{modal.capitalize()} {_lower_first(_pronoun_you(m['np']))} {m['vp']}?", ans


def _sentences(text: str) -> list[str]:
    from sourcegate import text as T

    return T.split_sentences(text, max_sentences=60, min_chars=1)


def _without(text: str, sent: str) -> str | None:
    i = text.find(sent)
    if i < 0:
        return None
    out = (text[:i] + text[i + len(sent):]).strip()
    return out if len(out) >= 200 else None


def build(split: str, seed: int = 20261203, max_per_doc: int = 6) -> dict[str, list[dict]]:
    """{"evidence": rows, "polar": rows}; a row is {query, text, title, label, group, kind, lang}."""
    rng = random.Random(f"{seed}:{split}")
    by_doc: dict[str, list[dict]] = {}
    for line in CORPUS.read_text(encoding="utf-8").splitlines():
        r = json.loads(line)
        if r.get("status", "current") != "current" or split_of(r["doc_id"]) != split:
            continue
        by_doc.setdefault(r["doc_id"], []).append(r)
    evi, pol = [], []
    for doc_id in sorted(by_doc):
        passages = by_doc[doc_id]
        made = 0
        for p in passages:
            if made >= max_per_doc:
                break
            for s in _sentences(p["text"]):
                s = s.strip()
                if not (30 <= len(s) <= 260) or s.count("`") or s.count("=") > 1:
                    continue
                vq = value_question(s, p["title"], p["lang"])
                if vq is not None:
                    q, val = vq
                    rest = _without(p["text"], s)
                    keys = [t for t in re.findall(r"[\w.,]+", val) if _DIGIT.search(t)] or [val.strip()]
                    if rest is None or any(k in rest for k in keys):
                        continue
                    others = [o for o in passages if o is not p and not any(k in o["text"] for k in keys)]
                    neg_text, kind = (rest, "removed") if (not others or rng.random() < 0.6) else (rng.choice(others)["text"], "other")
                    g = f"real:{doc_id}"
                    evi.append({"query": q, "text": p["text"], "title": p["title"], "label": 1, "group": g, "kind": "own",
                                "lang": p["lang"]})
                    evi.append({"query": q, "text": neg_text, "title": p["title"], "label": 0, "group": g, "kind": kind,
                                "lang": p["lang"]})
                    made += 1
                    continue
                pq = polar_question(s, p["lang"])
                if pq is not None:
                    q, ans = pq
                    rest = _without(p["text"], s)
                    if rest is None:
                        continue
                    g = f"real:{doc_id}"
                    pol.append({"query": q, "text": p["text"], "title": p["title"], "label": 1, "answer": ans,
                                "group": g, "kind": "settled", "lang": p["lang"]})
                    pol.append({"query": q, "text": rest, "title": p["title"], "label": 0, "answer": "open",
                                "group": g, "kind": "removed", "lang": p["lang"]})
                    made += 1
    return {"evidence": evi, "polar": pol}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--split", default="fit", choices=("fit", "cal", "test"))
    a = ap.parse_args(argv)
    import sys

    sys.path.insert(0, str(ROOT / "src"))
    rows = build(a.split)
    for k, v in rows.items():
        langs = {}
        for r in v:
            langs[r["lang"]] = langs.get(r["lang"], 0) + 1
        print(k, len(v), "rows", langs)
        for r in random.Random(1).sample(v, min(8, len(v))):
            print("   ", r["label"], r["kind"], "|", r["query"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
