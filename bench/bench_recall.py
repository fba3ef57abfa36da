"""Retrieval recall on people's questions at library scale: is a passage that answers among the
candidates handed to the judge?

The library is the whole shared corpus (`../shared/data/real/corpus/passages.jsonl`: 10,456 real
passages of 1,106 documents, EN and FR), ingested through the product (`Ingestor`, SQLite). The
questions are the 1,085 of `../shared/data/real/train` that a passage answers or contradicts
(`answer_from_evidence` and `premise_conflict`); a question is found when one of its
`expected_sources` is among the candidates. `../shared/data/real/dev` is measured on its own
61-passage library. Figures per kind, per language direction (question language -> language of the
answering passages) and per source.

    python bench/bench_recall.py [--compare REF] [--workdir DIR] [--rebuild] [--gate N] [--json FILE]

The index of each tree is kept in --workdir, named after the embedder and the code that builds it;
`--compare REF` runs the checkout of a git ref in the same run (its own index). `--gate N` also puts
N of the 1,398 train questions (every kind, a fixed sample) through the whole gate on that index
(`sourcegate eval`): accuracy with sources checked, status accuracy, unsafe answers.
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data" / "real"
PARTS = ("etalab", "notify", "openstack-a", "openstack-b", "pgdocs", "scuba", "vitam")
WORKDIR = Path(tempfile.gettempdir()) / "sourcegate-recall"  # where the indexes are kept (--workdir)


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def _train_rows() -> list[dict]:
    """Every train question, with the source (`part`) it was written on."""
    return [dict(q, part=part) for part in PARTS for q in _jsonl(DATA / "train" / "parts" / f"{part}.jsonl")]


def _questions() -> list[dict]:
    return [q for q in _train_rows() if q["expected_sources"]]


def _dev_questions() -> list[dict]:
    rows = _jsonl(DATA / "dev" / "questions.jsonl")
    return [dict(q, id=q.get("id") or f"dev-{n + 1:03d}") for n, q in enumerate(rows) if q.get("expected_sources")]


def newest_index(workdir: Path, name: str, embedder_id: str) -> Path:
    """The most recently built index of `name` ("corpus" or "dev") for this embedder in `workdir`, for
    scripts that read the benchmark's index (`recall_trials.py`, `training/rerank/pools.py`)."""
    dbs = sorted(workdir.glob(f"{name}-{embedder_id}-*.db"), key=lambda p: p.stat().st_mtime)
    if not dbs:
        raise SystemExit(f"no {name} index in {workdir}: run `python bench/bench_recall.py` first")
    return dbs[-1]


def corpus_export(workdir: Path) -> Path:
    """The corpus as a JSON passage export (one document a passage, as `sourcegate ingest` reads it)."""
    out = workdir / "corpus.json"
    if not out.exists():
        rows = _jsonl(DATA / "corpus" / "passages.jsonl")
        export = [{k: r[k] for k in ("id", "title", "text", "url", "version", "status") if r.get(k)} for r in rows]
        out.write_text(json.dumps(export, ensure_ascii=False))
    return out


# -- run inside the tree being measured (a subprocess with that tree on sys.path) -----------------

def _measure(workdir: Path, rebuild: bool) -> dict:
    from sourcegate.crosslingual import bridge, load_glossary
    from sourcegate.embed import get_embedder
    from sourcegate.ingest.pipeline import Ingestor
    from sourcegate.retrieve import RetrievalSettings, Retriever
    from sourcegate.settings import Settings
    from sourcegate.store.sqlite import SqliteStore

    settings = Settings()
    embedder = get_embedder(settings.embedder)
    code = hashlib.sha256()
    pkg = Path(sys.modules["sourcegate"].__file__).parent
    # what ingest computes and stores: the chunks, their vectors and the passage-only readings (injection,
    # superseded), so a tree with other injection weights or cue patterns builds its own index
    for rel in ("embed.py", "ingest/chunker.py", "ingest/pipeline.py", "store/sqlite.py", "judges/local/lexicons.py",
                "judges/local/model.py", "judges/local/judge.py", "judges/weights/injection_sentences.npz", "judges/weights/injection_sentences.json"):
        if (pkg / rel).exists():
            code.update((pkg / rel).read_bytes())
    results = {"embedder": embedder.id}

    def library(name: str, export: Path) -> tuple[SqliteStore, float | None]:
        db = workdir / f"{name}-{embedder.id}-{code.hexdigest()[:12]}.db"
        built = None
        if rebuild or not db.exists():
            for suffix in ("", "-wal", "-shm"):
                Path(f"{db}{suffix}").unlink(missing_ok=True)
            store = SqliteStore(db, embedder.id, embedder.dim)
            t0 = time.perf_counter()
            report = Ingestor(store, embedder).ingest([export])
            built = time.perf_counter() - t0
            if report.failed:
                raise SystemExit(f"ingest failed: {report.failed[:3]}")
            store.close()
        return SqliteStore(db, embedder.id, embedder.dim), built

    glossary = load_glossary(str(settings.glossary_path) if settings.glossary_path else None)

    def run(store, questions, lang_of) -> dict:
        retriever = Retriever(store, embedder, RetrievalSettings.from_settings(settings))
        rows, ms = [], []
        for q in questions:
            bq = bridge(q["query"], settings.library_language, glossary) if settings.crosslingual else None
            t0 = time.perf_counter()
            cands, _ = retriever.retrieve(q["query"], bridged=bq.text if bq is not None and bq.bridged else None)
            ms.append((time.perf_counter() - t0) * 1000)
            docs = [c.doc_id for c in cands]
            expected = set(q["expected_sources"])
            rank = next((i + 1 for i, d in enumerate(docs) if d in expected), None)
            langs = sorted({lang_of.get(s, "?") for s in expected})
            rows.append({"id": q["id"], "kind": q.get("kind", "?"), "part": q.get("part", "dev"),
                         "direction": f"{q.get('lang', '?')}->{'+'.join(langs)}", "rank": rank})
        return {"rows": rows, "ms": ms}

    export = corpus_export(workdir)
    lang_of = {r["id"]: r.get("lang", "?") for r in _jsonl(DATA / "corpus" / "passages.jsonl")}
    store, built = library("corpus", export)
    results["corpus_db"] = str(store.path)
    results["corpus"] = run(store, _questions(), lang_of)
    results["corpus"]["chunks"] = store.stats().chunks
    results["corpus"]["build_s"] = built
    store.close()
    dev = json.loads((DATA / "dev" / "corpus.json").read_text())
    dev_lang = {p["id"]: "fr" if "-fr-" in p["id"] or p["id"].startswith(("pg", "vitam")) else "en" for p in dev}
    dev_export = workdir / "dev.json"
    dev_export.write_text(json.dumps(dev, ensure_ascii=False))
    store, _ = library("dev", dev_export)
    results["dev"] = run(store, _dev_questions(), dev_lang)
    store.close()
    return results


# -- the report ------------------------------------------------------------------------------------

def _recall(rows: list[dict]) -> float:
    return round(sum(r["rank"] is not None for r in rows) / max(1, len(rows)), 3)


def summarise(res: dict) -> dict:
    out = {"embedder": res["embedder"]}
    for name in ("corpus", "dev"):
        rows = res[name]["rows"]
        ms = sorted(res[name]["ms"])
        s = {"questions": len(rows), "recall": _recall(rows),
             "recall_at_5": round(sum(r["rank"] is not None and r["rank"] <= 5 for r in rows) / max(1, len(rows)), 3),
             "p50_ms": round(ms[len(ms) // 2], 1), "p95_ms": round(ms[int(len(ms) * 0.95)], 1)}
        for key in ("kind", "direction", "part"):
            groups = collections.defaultdict(list)
            for r in rows:
                groups[r[key]].append(r)
            s[f"by_{key}"] = {k: [_recall(v), len(v)] for k, v in sorted(groups.items())}
        if name == "corpus":
            s["chunks"] = res[name].get("chunks")
            s["build_s"] = res[name].get("build_s")
        s["missed"] = [r["id"] for r in rows if r["rank"] is None]
        out[name] = s
    return out


def gate_sample(n: int) -> list[dict]:
    """`n` of the train questions, every kind, the same sample for every tree (by a hash of the id)."""
    rows = sorted(_train_rows(), key=lambda q: hashlib.sha256(q["id"].encode()).hexdigest())
    return [{k: v for k, v in q.items() if k != "part"} for q in rows[:n]]


def run_gate(src: Path, db: Path, n: int, workdir: Path) -> dict:
    import shutil

    home = Path(tempfile.mkdtemp(prefix="sg-recall-gate-", dir=workdir))
    shutil.copy(db, home / "index.db")
    questions = home / "questions.jsonl"
    questions.write_text("".join(json.dumps(q, ensure_ascii=False) + "\n" for q in gate_sample(n)))
    env = dict(os.environ, SOURCEGATE_HOME=str(home), AUDIT_ENABLED="false")
    cli = [sys.executable, "-c", f"import sys; sys.path.insert(0, {str(src / 'src')!r}); from sourcegate.cli import main; main()"]
    out = subprocess.run(cli + ["eval", str(questions), "--json"], env=env, check=True, capture_output=True, text=True).stdout
    shutil.rmtree(home, ignore_errors=True)
    m = json.loads(out)["metrics"]
    return {"cases": m["cases"], "accuracy": m["accuracy"], "status_accuracy": m["status_accuracy"],
            "unsafe_answers": m["unsafe_answers"], "forbidden_leaks": m["forbidden_leaks"],
            "by_kind": {k: v["accuracy"] for k, v in m["by_kind"].items()}}


def measure_tree(src: Path, workdir: Path, rebuild: bool, gate: int = 0) -> dict:
    workdir.mkdir(parents=True, exist_ok=True)
    out = workdir / f"result-{os.getpid()}.json"
    code = (f"import sys, json; sys.path.insert(0, {str(src / 'src')!r}); sys.path.insert(0, {str(REPO / 'bench')!r}); "
            f"import bench_recall as b; from pathlib import Path; "
            f"json.dump(b._measure(Path({str(workdir)!r}), {rebuild!r}), open({str(out)!r}, 'w'))")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=str(src))
    res = json.loads(out.read_text())
    out.unlink()
    summary = summarise(res)
    if gate:
        summary["gate"] = run_gate(src, Path(res["corpus_db"]), gate, workdir)
    return summary


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--compare", metavar="REF", help="also measure the checkout of this git ref, in the same run")
    ap.add_argument("--workdir", type=Path, default=WORKDIR)
    ap.add_argument("--rebuild", action="store_true", help="ingest the libraries again")
    ap.add_argument("--gate", type=int, default=0, metavar="N", help="also N train questions through the whole gate")
    ap.add_argument("--json", type=Path, help="write every figure here")
    a = ap.parse_args(argv)
    report = {}
    if a.compare:
        sys.path.insert(0, str(REPO / "bench"))
        from _common import checkout

        with checkout(a.compare) as wt:
            report[a.compare] = measure_tree(wt, a.workdir, a.rebuild, a.gate)
    report["now"] = measure_tree(REPO, a.workdir, a.rebuild, a.gate)
    for label, s in report.items():
        c, d = s["corpus"], s["dev"]
        print(f"== {label} ({s['embedder']}): corpus {c['chunks']} chunks"
              + (f", built in {c['build_s']:.0f} s" if c.get("build_s") else ""))
        print(f"  train questions, whole corpus: recall {c['recall']} ({c['questions']}), @5 {c['recall_at_5']}, "
              f"retrieve p50/p95 {c['p50_ms']}/{c['p95_ms']} ms")
        for key in ("by_kind", "by_direction", "by_part"):
            print("   ", key, " ".join(f"{k}={v[0]}({v[1]})" for k, v in c[key].items()))
        print(f"  dev, its library: recall {d['recall']} ({d['questions']}), @5 {d['recall_at_5']}; missed {d['missed']}")
        if "gate" in s:
            g = s["gate"]
            print(f"  gate on {g['cases']} train questions, whole corpus: accuracy {g['accuracy']} (status "
                  f"{g['status_accuracy']}), unsafe {g['unsafe_answers']}, forbidden {g['forbidden_leaks']}")
            print("    by_kind", " ".join(f"{k}={v}" for k, v in sorted(g["by_kind"].items())))
    if a.json:
        a.json.write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
