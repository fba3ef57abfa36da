"""Answers that state what was asked: of the answers right on status and sources, the share whose
returned text holds the answer's value (`eval`'s `states_answer`: the case's `answer` text and every
`must_state` value, compared as people write them).

    python bench/bench_answer_value.py run [--sets demo,demo-fr,etalab,...] [--record DIR]
    python bench/bench_answer_value.py replay DIR                   # the writer only, on recorded inputs

Sets: `demo` and `demo-fr` (the demo questions with their `must_state` values, on the demo corpus), and
each source of `../shared/data/real/train` as its own library (`bench_real_train.library`: its questions
and every passage of every document they name; `answer` is the exact answering text). Each question is
asked through the whole pipeline with the default offline judge and the extractive writer; the
writer's inputs (question, status, evidence and conflict passages with the judge's quotes) are kept in
DIR/SET.pkl, so `replay` rewrites every answer with the current writer in seconds, on the same
evidence, and reports the same figure beside the recorded one. Prints one JSON document, then a
`[value]` line per set: right answers checked, the share that state the value, and unsafe answers.
"""

from __future__ import annotations

import argparse
import json
import pickle
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT))

DEMO = ROOT / "src" / "sourcegate" / "demo"
DEFAULT_SETS = ("demo", "demo-fr", "etalab", "notify", "openstack-a", "openstack-b", "pgdocs", "scuba", "vitam")


def library_of(name: str) -> tuple[Path, Path]:
    """(corpus path, questions file) of a set."""
    if name == "demo":
        return DEMO / "corpus", DEMO / "questions.jsonl"
    if name == "demo-fr":
        return DEMO / "corpus", DEMO / "questions.fr.jsonl"
    from bench_real_train import library

    lib = library(name)
    return lib / "corpus.json", lib / "questions.jsonl"


class Recorder:
    """A writer that passes every call to the real one and keeps its inputs, per question."""

    def __init__(self, inner):
        self.inner, self.calls = inner, []
        self.name = getattr(inner, "name", "extractive")

    def write(self, query, status, evidence, conflicts, search_text=None, on_event=None):
        strip = lambda cs: [replace(c, embedding=None) for c in cs]  # noqa: E731
        self.calls.append((query, status, strip(evidence), strip(conflicts), search_text))
        return self.inner.write(query, status, evidence, conflicts, search_text=search_text, on_event=on_event)


def run_set(name: str) -> list[dict]:
    from _demo import ingest_corpus

    from sourcegate.cli import _library_gate, eval_audit_settings
    from sourcegate.evaluation.cases import load_cases
    from sourcegate.evaluation.runner import run_case
    from sourcegate.settings import Settings

    corpus, qfile = library_of(name)
    cases = load_cases(qfile)
    home = Path(tempfile.mkdtemp(prefix=f"sg-value-{name}-"))
    settings = Settings(home=home, judge="local")
    ingest_corpus(settings, corpus)
    gate = _library_gate(eval_audit_settings(settings))
    rec = Recorder(gate.writer)
    gate.writer = rec
    rows = []
    try:
        for case in cases:
            rec.calls = []
            r = run_case(gate, case)
            rows.append({"case": case, "status": r.status, "evidence_doc_ids": r.evidence_doc_ids,
                         "conflict_doc_ids": r.conflict_doc_ids, "answer_text": r.answer_text,
                         "parts": r.parts, "missing": r.missing, "calls": rec.calls})
    finally:
        gate.close()
    return rows


def result_of(row: dict, answer_text: str | None):
    from sourcegate.evaluation.runner import CaseResult

    return CaseResult(case=row["case"], status=row["status"], evidence_doc_ids=row["evidence_doc_ids"],
                      conflict_doc_ids=row["conflict_doc_ids"], excluded=[], candidates=[], timings_ms={},
                      parts=row["parts"], missing=row["missing"], answer_text=answer_text)


def rewrite(row: dict) -> str | None:
    """The answer the current extractive writer gives on the recorded inputs (as the service returns it)."""
    from sourcegate.answer import ExtractiveWriter, assemble_parts
    from sourcegate.inert import inert_markup
    from sourcegate.gate import Status

    if not row["calls"]:
        return row["answer_text"]
    w = ExtractiveWriter()
    if len(row["calls"]) == 1 and not row["parts"]:
        q, status, ev, cf, st = row["calls"][0]
        return inert_markup(w.write(q, status, ev, cf, search_text=st).text)
    sections, calls = [], iter(row["calls"])
    for part in row["parts"]:
        if part["status"] == Status.INSUFFICIENT.value:
            sections.append((part["question"], None))
        else:
            q, status, ev, cf, st = next(calls)
            sections.append((q, w.write(q, status, ev, cf, search_text=st)))
    return inert_markup(assemble_parts(sections).text)


def figures(results) -> dict:
    right = [r for r in results if r.states_answer is not None and r.status_correct
             and r.expected_source_cited is not False and not r.leaks]
    stated = sum(1 for r in right if r.states_answer)
    return {"questions": len(results), "right_checked": len(right), "states_value": stated,
            "rate": round(stated / len(right), 3) if right else None,
            "unsafe": sum(1 for r in results if r.truthfulness() < 0),
            "not_stated": [{"query": r.case.query, "value": r.case.must_state or r.case.answer,
                            "answer": (r.answer_text or "")[:400]} for r in right if not r.states_answer]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mode", choices=("run", "replay"))
    ap.add_argument("dir", nargs="?", type=Path)
    ap.add_argument("--sets", default=",".join(DEFAULT_SETS))
    ap.add_argument("--record", type=Path, help="keep the writer's inputs here (run)")
    ap.add_argument("--show", type=int, default=0, help="print N answers that do not state the value, per set")
    a = ap.parse_args(argv)
    out = {}
    if a.mode == "run":
        for name in a.sets.split(","):
            t0 = time.time()
            rows = run_set(name)
            if a.record:
                a.record.mkdir(parents=True, exist_ok=True)
                with open(a.record / f"{name}.pkl", "wb") as f:
                    pickle.dump(rows, f)
            out[name] = figures([result_of(r, r["answer_text"]) for r in rows])
            out[name]["seconds"] = round(time.time() - t0)
            print(f"[value] {name}: {out[name]['states_value']}/{out[name]['right_checked']} = {out[name]['rate']}, "
                  f"unsafe {out[name]['unsafe']} ({out[name]['seconds']} s)", file=sys.stderr, flush=True)
    else:
        for pkl in sorted(a.dir.glob("*.pkl")):
            rows = pickle.loads(pkl.read_bytes())
            before = figures([result_of(r, r["answer_text"]) for r in rows])
            after = figures([result_of(r, rewrite(r)) for r in rows])
            out[pkl.stem] = {"recorded": {k: v for k, v in before.items() if k != "not_stated"}, "now": after}
    for name, d in out.items():
        now = d.get("now", d)
        for x in now["not_stated"][: a.show]:
            print(f"  [{name}] {x['query']}\n     value: {x['value']}\n     answer: {x['answer'][:300]!r}")
        now = dict(now, not_stated=len(now["not_stated"]))
        if "now" in d:
            d["now"] = now
        else:
            out[name] = now
    print(json.dumps(out, indent=1, ensure_ascii=False))
    for name, d in out.items():
        if "now" in d:
            r, n = d["recorded"], d["now"]
            print(f"[value] {name}: recorded {r['states_value']}/{r['right_checked']} = {r['rate']}; "
                  f"now {n['states_value']}/{n['right_checked']} = {n['rate']} (unsafe {n['unsafe']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
