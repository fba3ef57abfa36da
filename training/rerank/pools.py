"""The candidate pools that the reranker learns to order: for every train question a passage answers
or contradicts, the product's fused order over a wide pool, on the whole shared corpus.

    python -m training.rerank.pools [--db PATH] [--pool 30] [--out .cache/rerank/pools-30.jsonl]

The index is the one `bench/bench_recall.py` builds (the whole corpus ingested through the product,
SQLite); `--db` names it, else the newest corpus index in its work folder is used. Each row: the
question (id, text, kind, part, language, expected and forbidden sources) and its pool in fused
order, each candidate with its chunk id, passage id, title, text and fused score. The dev questions
are dumped the same way from the dev library (`--dev`), for measuring only.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

from .common import CACHE, REPO

sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO / "src"))


def dump(db: Path | None, library: str, questions: list[dict], pool: int, out: Path) -> int:
    """`db`: the index to read; None: `bench_recall.py`'s newest index of `library` ("corpus" or "dev")."""
    from tqdm import tqdm

    import bench_recall

    from sourcegate.crosslingual import bridge, load_glossary
    from sourcegate.embed import get_embedder
    from sourcegate.retrieve import RetrievalSettings, Retriever
    from sourcegate.settings import Settings
    from sourcegate.store.sqlite import SqliteStore

    settings = Settings()
    embedder = get_embedder(settings.embedder)
    db = db or bench_recall.newest_index(bench_recall.WORKDIR, library, embedder.id)
    store = SqliteStore(db, embedder.id, embedder.dim)
    rs = replace(RetrievalSettings.from_settings(settings), dense_pool=pool, lexical_pool=pool, candidates=2 * pool)
    retriever = Retriever(store, embedder, rs)
    glossary = load_glossary(str(settings.glossary_path) if settings.glossary_path else None)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    with tmp.open("w") as f:
        for q in tqdm(questions, desc="pools", unit="q"):
            bq = bridge(q["query"], settings.library_language, glossary) if settings.crosslingual else None
            cands, _ = retriever.retrieve(q["query"], bridged=bq.text if bq is not None and bq.bridged else None)
            row = {k: q.get(k) for k in ("id", "query", "kind", "part", "lang", "expected_sources",
                                         "forbidden_sources", "relevant_sources")}
            row["pool"] = [{"id": c.id, "doc": c.doc_id, "title": c.title, "text": c.text, "score": c.score,
                            "dense": c.dense_score, "bm25": c.lexical_score} for c in cands]
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    tmp.replace(out)
    store.close()
    return len(questions)


def main(argv=None) -> int:
    import bench_recall

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", type=Path)
    ap.add_argument("--pool", type=int, default=30, help="dense and lexical pool sizes (each)")
    ap.add_argument("--dev", action="store_true", help="the dev questions on the dev library instead")
    ap.add_argument("--out", type=Path)
    a = ap.parse_args(argv)
    if a.dev:
        qs = [dict(q, part="dev") for q in bench_recall._dev_questions()]
    else:
        qs = bench_recall._questions()
    out = a.out or CACHE / f"pools{'-dev' if a.dev else ''}-{a.pool}.jsonl"
    n = dump(a.db, "dev" if a.dev else "corpus", qs, a.pool, out)
    print(f"{n} questions, pools of {a.pool}+{a.pool} -> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
