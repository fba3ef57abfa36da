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
Each answer's first evidence passage is also quoted the way the writer of commit bdf573e quoted
(bench/_quotes_before.py, verbatim), with the same judge's sentence: the "before" figure, on the very
same answers. Answers of several parts are checked on their first part; an answer that opens with a warning about
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
sys.path.insert(0, str(ROOT / "bench"))

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
    """The answer's first quote: the settling sentence of a yes/no answer (`Yes: "..." [n]`), else
    the first after "From the documents:" when the answer opens with a warning about a conflict
    (the warning quotes the conflict, not the answer)."""
    for line in answer.splitlines():
        m = re.match(r'^(?:Yes|No|Oui|Non): "(.*)"(?: \(.*\))? \[(\d+)\]', line)
        if m:
            return m.group(1), int(m.group(2))
    body = answer.split("From the documents:", 1)[1] if "From the documents:" in answer else answer
    for line in body.splitlines():
        m = re.match(r'^- "(.*)"(?: \(.*\))? \[(\d+)\]', line)  # (a table row's header) after it
        if m:
            return m.group(1), int(m.group(2))
    return None


def cited_doc(answer: str, n: int) -> str | None:
    block = answer.split("\n\nSources:\n")[-1] if "\n\nSources:\n" in answer else ""
    for line in block.splitlines():
        # "[1] Title (doc-id), p. 3 URL" or "..., § Section > Sub URL": the place after the id
        m = re.match(r"^\[(\d+)\] .*? \(`?([^()`]*)`?\)(?:, (?:p\. \d+|§ [^`]*?)(?:, § [^`]*?)?)?(?: \S+)?$", line)
        if m and int(m.group(1)) == n:
            return m.group(2)
    return None


def words(s: str) -> set[str]:
    return {w for w in WORD.findall(s.lower()) if w not in STOP and len(w) > 2}


def judge_quote(question: str, bridge_terms: list[str], quote: str, passage: str, title: str,
                expected: str | None) -> tuple[bool, str]:
    """(good, reason when not)."""
    raw = re.sub(r"([a-z\u00e0-\u00ff])-\n\s*([a-z\u00e0-\u00ff])", r"\1\2", passage.replace("\u00ad", "").replace("`", ""))
    q = norm(quote)
    words_q = q.split()
    m = re.search(r"\s+".join(re.escape(w) for w in words_q), raw) if words_q else None
    if m is None:
        return False, "not in the passage"
    head, tail = raw[:m.start()], raw[m.end():]
    # a sentence starts at the text's start, after . ! ? : ; or at a line's start in capitals (after a
    # heading, a list mark); it ends with . ! ? or where its paragraph, list item or table row ends
    starts = (not head.strip() or re.search(r"[.!?:;][\"')\]\u00bb\u201d]*\s*$", head)
              or (re.search(r"\n\s*$", head) and re.match(r"[-*\u2022(\d\"'A-Z\u00c0-\u00dd\u00ab\u201c]", q)))
    if not starts:
        return False, "starts mid-sentence"
    ends = (re.search(r"[.!?][\"')\]\u00bb\u201d]*$", q) or re.match(r"[ \t]*(\n[ \t]*\n|$)", tail)
            or re.match(r"[ \t]*\n\s*(?:[-*\u2022|]|\d+[.)])", tail))
    if not ends:
        return False, "ends mid-sentence"
    cut_before = q[:1].isdigit() and re.search(r"\d[,.\u202f\u00a0 ]?$", head) and not re.search(r"\d\.\s+$", head)
    cut_after = q[-1:].isdigit() and re.match(r"^[,.\u202f\u00a0 ]?\d", tail)
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


class RecordingWriter:
    """The extractive writer, keeping the evidence passages (with the judge's sentence) it was given."""

    name = "extractive"

    def __init__(self):
        from sourcegate.answer import ExtractiveWriter

        self.inner = ExtractiveWriter()
        self.calls: list[tuple[str, str, list]] = []

    def write(self, query, status, evidence, conflicts, search_text=None, on_event=None):
        self.calls.append((status.value, search_text or query, list(evidence)))
        return self.inner.write(query, status, evidence, conflicts, search_text, on_event)


def ask_all(home: Path, corpus: Path, questions: list[tuple[str, str | None]]) -> dict:
    """Each question through the pipeline; its answer's first quote checked, and the first quote the
    writer of bdf573e makes of the same first evidence passage (same judge, same sentence found)."""
    import _quotes_before as before

    from sourcegate.cli import run_ingest
    from sourcegate.service import SourceGate
    from sourcegate.settings import Settings

    settings = Settings(_env_file=None, home=home, audit_enabled=False, judge="local", writer="extractive")
    report = run_ingest(settings, [corpus], prune=False, quiet=True)
    assert not report.failed, report.failed
    writer = RecordingWriter()
    gate = SourceGate(settings, audit=False, writer=writer)
    rows = []
    try:
        for question, expected in questions:
            writer.calls.clear()
            r = gate.ask(question)
            row = {"query": question, "status": r.status}
            first = next(((q, ev) for st, q, ev in writer.calls if st == "answer_from_evidence" and ev), None)
            if r.status == "answer_from_evidence" and r.answer and first is not None:
                match_text, evidence = first
                c = evidence[0]
                bridge_terms = gate._bridge(question).added_terms if gate.settings.crosslingual else []
                fq = first_quote(r.answer)
                if fq is None:
                    row.update(good=False, reason="no quote")
                else:
                    # the passage the quote cites (a yes/no answer's settling sentence may be in [2])
                    cited = evidence[fq[1] - 1] if 1 <= fq[1] <= len(evidence) else c
                    good, why = judge_quote(question, bridge_terms, fq[0], cited.text, cited.title, expected)
                    row.update(good=good, reason=why, quote=fq[0], doc_id=cited.doc_id)
                old = (before.quoted(match_text, c, 2) or [""])[0]
                good, why = judge_quote(question, bridge_terms, old, c.text, c.title, expected)
                row.update(before_good=good, before_reason=why, before_quote=old)
            rows.append(row)
    finally:
        gate.close()
    answered = [x for x in rows if "good" in x]
    good = sum(x["good"] for x in answered)
    old_good = sum(x["before_good"] for x in answered)
    return {"questions": len(rows), "answered": len(answered), "good": good,
            "share": round(good / len(answered), 3) if answered else None,
            "before_good": old_good, "before_share": round(old_good / len(answered), 3) if answered else None,
            "rows": rows}


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
              f"asked ({res['share']}); the writer of bdf573e on the same evidence: {res['before_good']} "
              f"({res['before_share']}); {res['questions']} questions")
        if args.show:
            for x in [x for x in res["rows"] if x.get("good") is False][: args.show]:
                print(f"    now, {x['reason']}: {x['query']!r} -> {x.get('quote')!r}")
            for x in [x for x in res["rows"] if x.get("before_good") is False][: args.show]:
                print(f"    before, {x['before_reason']}: {x['query']!r} -> {x.get('before_quote')!r}")
    total_a = sum(r["answered"] for r in out["sets"].values())
    total_g = sum(r["good"] for r in out["sets"].values())
    total_b = sum(r["before_good"] for r in out["sets"].values())
    share = (lambda g: round(g / total_a, 3) if total_a else None)
    print(f"[quotes] all: {total_g} of {total_a} ({share(total_g)}); before: {total_b} ({share(total_b)})")


if __name__ == "__main__":
    main()
