"""Quotes that read: of the answers given, the share whose first quote is a whole sentence of the
passage it cites and holds the value asked for.

    python bench/bench_quotes.py [--sets demo,demo-fr,real,lab] [--real ../shared/data/real/dev] [--show N]

Sets: the demo questions (English, French) on the demo corpus; the real development set (a JSON
passage export and its questions); the lab library of tests/lab_library.py (PDF with line wraps and
a hyphenated word, DOCX with "(Rev. 4)" in its title, Markdown, HTML, TXT, a French manual with
"12,5 kg" and "1 500 heures"). Each question is asked through the whole pipeline with the default
offline judge and the extractive writer.

The check is this script's own, not the writer's: the first quoted line of the answer must
- be found in the cited passage (whitespace, line wraps and end-of-line hyphenation undone),
- start where a sentence starts (the passage's start, after . ! ? : ; or a line break) and end where
  one ends (. ! ? or the end of a line), with no number cut at either end ("000 rpm", "is 12"),
- not be a title, heading or label (the document's title; under four words; a line without a verb
  ending in a colon),
- hold the value asked for: on the lab library, the expected value itself ("20,000 rpm", "12,5 kg");
  elsewhere, for a question that asks for a number (how often, how much, combien ...), a number;
  for any other question, at least one of the question's content words (or their translation by
  the cross-language bridge).
Answers of several parts are checked on their first part; an answer that opens with a warning about
a conflict is checked on its first quote after the warning. Prints one JSON document, then one
`[quotes] ...` line per set."""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

DEMO = ROOT / "src" / "sourcegate" / "demo"
WORD = re.compile(r"[a-z0-9\u00e0-\u00ff]+")
STOP = set("""the a an of to in on at for with by from and or is are be do does did can could should must may
how what which who when where why often much many long i we you my our it its this that there their
le la les un une des du de et ou est sont faut il elle on quel quelle quels quelles comment combien pour par
dans sur au aux ce cette ces qui que quoi dois doit peut je nous vous tous toutes""".split())
VALUE_Q = re.compile(r"\b(how (often|much|many|long|deep|frequently|fast|hot|high)|what (interval|torque|level|"
                     r"depth|quantity|speed|temperature|pressure|limit|maximum|minimum|size)|combien|quelle? "
                     r"(fréquence|quantité|vitesse|température|pression|durée|limite|charge)|à quelle)\b", re.I)
NUMBER = re.compile(r"\d|\b(once|twice|daily|weekly|monthly|yearly|annually|hourly|every (day|week|month|year)|"
                    r"one|two|three|four|five|six|seven|eight|nine|ten|twelve|un|une|deux|trois|quatre|cinq|"
                    r"sept|huit|neuf|dix|douze|vingt|cent|mille|quotidien|hebdomadaire|mensuel|annuel)\b", re.I)


def norm(s: str) -> str:
    s = s.replace("\u00ad", "")
    s = re.sub(r"([a-z\u00e0-\u00ff])-\s*\n\s*([a-z\u00e0-\u00ff])", r"\1\2", s)  # end-of-line hyphenation
    return " ".join(s.replace("`", "").split())


def first_quote(answer: str) -> tuple[str, int] | None:
    """The answer's first quote: after "From the documents:" when the answer opens with a warning
    about a conflict (the warning quotes the conflict, not the answer)."""
    body = answer.split("From the documents:", 1)[1] if "From the documents:" in answer else answer
    for line in body.splitlines():
        m = re.match(r'^- "(.*)" \[(\d+)\]', line)
        if m:
            return m.group(1), int(m.group(2))
    return None


def cited_doc(answer: str, n: int) -> str | None:
    block = answer.split("\n\nSources:\n")[-1] if "\n\nSources:\n" in answer else ""
    for line in block.splitlines():
        m = re.match(r"^\[(\d+)\] .* \(`?([^()`]*)`?\)(?: \S+)?$", line)
        if m and int(m.group(1)) == n:
            return m.group(2)
    return None


def words(s: str) -> set[str]:
    return {w for w in WORD.findall(s.lower()) if w not in STOP and len(w) > 2}


def judge_quote(question: str, bridge_terms: list[str], quote: str, passage: str, title: str,
                expected: str | None) -> tuple[bool, str]:
    """(good, reason when not)."""
    text = norm(passage)
    q = norm(quote)
    i = text.find(q)
    if i < 0:
        return False, "not in the passage"
    before = text[:i].rstrip()
    after = text[i + len(q):]
    raw_lines = [norm(x) for x in passage.splitlines() if x.strip()]
    starts_line = any(x.startswith(q[:30]) for x in raw_lines)
    ends_line = any(x.endswith(q[-30:]) for x in raw_lines)
    if before and not (before.endswith((".", "!", "?", ":", ";")) or starts_line):
        return False, "starts mid-sentence"
    if not (re.search(r"[.!?][\"')\u00bb\u201d]*$", q) or ends_line):
        return False, "ends mid-sentence"
    head = text[:i]
    cut_before = q[:1].isdigit() and re.search(r"\d[,.\u202f\u00a0 ]?$", head) and not re.search(r"\d\.\s+$", head)
    cut_after = q[-1:].isdigit() and re.match(r"^[,.\u202f\u00a0 ]?\d", after)
    if cut_before or cut_after:
        return False, "a number cut"
    if q.rstrip(".").strip().lower() == norm(title).lower() or len(q.split()) < 4 or q.endswith(":"):
        return False, "a title, heading or label"
    if expected is not None:
        ok = norm(expected).lower() in q.lower()
        return ok, "" if ok else f"does not hold {expected!r}"
    if VALUE_Q.search(question):
        ok = bool(NUMBER.search(q))
        return ok, "" if ok else "no number for a question that asks one"
    ok = bool(words(question + " " + " ".join(bridge_terms)) & words(q))
    return ok, "" if ok else "shares nothing with the question"


def ask_all(home: Path, corpus: Path, questions: list[tuple[str, str | None]]) -> dict:
    from sourcegate.cli import run_ingest
    from sourcegate.service import SourceGate
    from sourcegate.settings import Settings

    settings = Settings(_env_file=None, home=home, audit_enabled=False, judge="local", writer="extractive")
    report = run_ingest(settings, [corpus], prune=False, quiet=True)
    assert not report.failed, report.failed
    gate = SourceGate(settings, audit=False)
    rows = []
    try:
        for question, expected in questions:
            r = gate.ask(question)
            row = {"query": question, "status": r.status}
            if r.status == "answer_from_evidence" and r.answer:
                fq = first_quote(r.answer)
                if fq is None:
                    row.update(good=False, reason="no quote")
                else:
                    quote, n = fq
                    doc = cited_doc(r.answer, n)
                    same = [p for p in r.evidence + r.conflicts if p.doc_id == doc]
                    passage = next((p for p in same if norm(quote) in norm(p.text)), same[0] if same else None)
                    if passage is None:
                        row.update(good=False, reason=f"cited [{n}] not found", quote=quote)
                    else:
                        bridge_terms = []
                        if gate.settings.crosslingual:
                            bridge_terms = gate._bridge(question).added_terms
                        good, why = judge_quote(question, bridge_terms, quote, passage.text, passage.title, expected)
                        row.update(good=good, reason=why, quote=quote, doc_id=doc)
            rows.append(row)
    finally:
        gate.close()
    answered = [x for x in rows if "good" in x]
    good = sum(x["good"] for x in answered)
    return {"questions": len(rows), "answered": len(answered), "good": good,
            "share": round(good / len(answered), 3) if answered else None, "rows": rows}


def load_questions(path: Path) -> list[tuple[str, str | None]]:
    return [(json.loads(l)["query"], None) for l in path.read_text(encoding="utf-8").splitlines() if l.strip()]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sets", default="demo,demo-fr,real,lab")
    ap.add_argument("--real", default=str(ROOT.parent / "shared" / "data" / "real" / "dev"))
    ap.add_argument("--show", type=int, default=0, help="print the first N failing quotes of each set")
    args = ap.parse_args()
    out: dict = {"cpus": os.cpu_count(), "sets": {}}
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-quotes-") as tmp:
        tmp = Path(tmp)
        for name in args.sets.split(","):
            if name == "demo":
                res = ask_all(tmp / "demo", DEMO / "corpus", load_questions(DEMO / "questions.jsonl"))
            elif name == "demo-fr":
                res = ask_all(tmp / "demo-fr", DEMO / "corpus", load_questions(DEMO / "questions.fr.jsonl"))
            elif name == "real":
                real = Path(args.real)
                res = ask_all(tmp / "real", real / "corpus.json", load_questions(real / "questions.jsonl"))
            elif name == "lab":
                from lab_library import QUESTIONS, make_lab_library

                lib = make_lab_library(tmp / "lab-library")
                res = ask_all(tmp / "lab", lib, [(q, v) for q, _, v in QUESTIONS])
            else:
                raise SystemExit(f"unknown set {name!r}: demo, demo-fr, real or lab")
            out["sets"][name] = res
    out["seconds"] = round(time.perf_counter() - t0, 1)
    out["load_1min"] = os.getloadavg()[0]
    print(json.dumps(out, indent=1, ensure_ascii=False))
    for name, res in out["sets"].items():
        print(f"[quotes] {name}: {res['good']} of {res['answered']} answers quote a whole sentence holding the value "
              f"asked ({res['share']}); {res['questions']} questions")
        if args.show:
            for x in [x for x in res["rows"] if x.get("good") is False][: args.show]:
                print(f"    {x['reason']}: {x['query']!r} -> {x.get('quote')!r}")
    total_a = sum(r["answered"] for r in out["sets"].values())
    total_g = sum(r["good"] for r in out["sets"].values())
    print(f"[quotes] all: {total_g} of {total_a} ({round(total_g / total_a, 3) if total_a else None})")


if __name__ == "__main__":
    main()
