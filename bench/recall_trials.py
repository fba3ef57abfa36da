"""Retrieval trials on people's questions at library scale, beside the product's retrieval on the same
index: ideas measured for recall and not kept (`bench/README.md`, "Tried and not kept").

    python bench/recall_trials.py sentences [--workdir DIR]
    python bench/recall_trials.py expand [--workdir DIR] [--grid 0.5:2,0.6:1,0.7:1]

The index is `bench_recall.py`'s (the whole shared corpus ingested through the product, SQLite, in its
work folder; run it first). The questions are its 1,085 answerable train questions.

- `sentences`: dense search over windows of two sentences of every chunk (each with its document title)
  beside the chunk vectors. A chunk scores the best of its windows, or the mean of that and its own
  similarity. Dense recall among the first 12 and 30 chunks, per variant. The window vectors are
  cached in the work folder (`sentences-<embedder>.npy`, ~5 min to embed on 2 cores).
- `expand`: a second lexical search in the other language of a bilingual (EN/FR) library. Each word of the
  question is embedded alone and mapped to the `k` nearest words (cosine >= `tau`) of the library's
  vocabulary in the other language (words of 4+ letters seen 3+ times, embedded once). The second
  search's BM25 scores are scaled to the first search's best, and the fusion is the product's. Recall
  among the 12 candidates, per language direction, for each (tau, k) of `--grid`; "mixed" adds the
  words to the question instead (as the glossary's bridge does: one lexical search on the longer text,
  and its vector beside the question's in the dense search).
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "bench"))

import bench_recall  # noqa: E402

WORD = re.compile(r"[^\W\d_]{4,}")
SENTENCE_SPLIT = re.compile(r"(?<=[.!?;:])\s+|\n+")
QUESTION_WORDS = {"what", "which", "when", "does", "with", "that", "this", "from", "have", "should", "quel", "quelle",
                  "quels", "comment", "dans", "pour", "avec", "faut", "doit", "sont"}


def _setup(workdir: Path):
    from sourcegate.embed import get_embedder
    from sourcegate.settings import Settings
    from sourcegate.store.sqlite import SqliteStore

    settings = Settings()
    embedder = get_embedder(settings.embedder)
    store = SqliteStore(bench_recall.newest_index(workdir, "corpus", embedder.id), embedder.id, embedder.dim)
    passages = bench_recall._jsonl(bench_recall.DATA / "corpus" / "passages.jsonl")
    return settings, embedder, store, passages


def _direction(q: dict, lang_of: dict) -> str:
    return f"{q.get('lang', '?')}->{'+'.join(sorted({lang_of.get(s, '?') for s in q['expected_sources']}))}"


def _query_vectors(q: dict, settings, embedder, glossary) -> np.ndarray:
    from sourcegate.crosslingual import bridge

    bq = bridge(q["query"], settings.library_language, glossary)
    return np.asarray(embedder.embed([q["query"]] + ([bq.text] if bq.bridged else [])), dtype=np.float32)


def sentences(workdir: Path) -> dict:
    from sourcegate.crosslingual import load_glossary

    settings, embedder, store, _ = _setup(workdir)
    rows = store._conn.execute("SELECT c.id, c.doc_id, c.text, d.title FROM chunks c JOIN documents d ON d.id = c.doc_id "
                               "WHERE c.status != 'archived' ORDER BY c.rowid").fetchall()
    ids = [r[0] for r in rows]
    vectors = {}
    for i in range(0, len(ids), 500):
        vectors.update(store.get_vectors(ids[i:i + 500]))
    chunk_m = np.stack([vectors[i] for i in ids])
    windows, owner = [], []
    for n, (_, _, text, title) in enumerate(rows):
        parts = [p.strip() for p in SENTENCE_SPLIT.split(text) if len(p.strip()) >= 25]
        for j in range(len(parts)):
            windows.append(f"{title}\n{' '.join(parts[j:j + 2])}")
            owner.append(n)
    owner = np.asarray(owner)
    cache = workdir / f"sentences-{embedder.id}-{len(windows)}.npy"
    if cache.exists():
        win_m = np.load(cache)
    else:
        t0 = time.perf_counter()
        win_m = np.concatenate([np.asarray(embedder.embed(windows[i:i + 256]), dtype=np.float32)
                                for i in range(0, len(windows), 256)])
        np.save(cache, win_m)
        print(f"embedded {len(windows)} windows in {time.perf_counter() - t0:.0f} s")
    docs = [r[1] for r in rows]
    glossary = load_glossary(None)
    found = collections.defaultdict(list)
    for q in bench_recall._questions():
        v = _query_vectors(q, settings, embedder, glossary)
        chunk = (chunk_m @ v.T).max(1)
        best = np.full(len(rows), -1.0)
        np.maximum.at(best, owner, (win_m @ v.T).max(1))
        expected = set(q["expected_sources"])
        for name, score in (("chunk", chunk), ("windows", best), ("mean", (chunk + best) / 2)):
            top = [docs[i] for i in np.argsort(-score)[:30]]
            rank = next((k for k, d in enumerate(top) if d in expected), None)
            found[name].append(rank)
    out = {"chunks": len(rows), "sentence_windows": len(windows)}
    for name, ranks in found.items():
        out[name] = {f"dense@{k}": round(float(np.mean([r is not None and r < k for r in ranks])), 3) for k in (12, 30)}
    return out


def expand(workdir: Path, grid: list[tuple[float, int]]) -> dict:
    from sourcegate.crosslingual import bridge, detect_language, load_glossary
    from sourcegate.retrieve import RetrievalSettings, Retriever

    settings, embedder, store, passages = _setup(workdir)
    counts = {"en": collections.Counter(), "fr": collections.Counter()}
    for p in passages:
        counts[p["lang"]].update(w.lower() for w in WORD.findall(f"{p['title']} {p['text']}"))
    vocab = {lang: [w for w, c in counts[lang].items() if c >= 3] for lang in counts}
    mats = {lang: np.concatenate([np.asarray(embedder.embed(vocab[lang][i:i + 512]), dtype=np.float32)
                                  for i in range(0, len(vocab[lang]), 512)]) for lang in vocab}

    def other_words(query: str, tau: float, k: int) -> list[str]:
        other = "fr" if (detect_language(query) or "en") == "en" else "en"
        words = [w for w in dict.fromkeys(w.lower() for w in WORD.findall(query)) if w not in QUESTION_WORDS]
        if not words:
            return []
        sims = np.asarray(embedder.embed(words), dtype=np.float32) @ mats[other].T
        out = []
        for i, w in enumerate(words):
            out.extend(vocab[other][j] for j in np.argsort(-sims[i])[:k] if sims[i, j] >= tau and vocab[other][j] != w)
        return list(dict.fromkeys(out))

    lexical_search = store.lexical_search
    extra_terms: list[str] = []

    def with_second_search(text, k, filters):
        first = lexical_search(text, k, filters)
        if not extra_terms:
            return first
        second = lexical_search(" ".join(extra_terms), k, filters)
        top1 = max((s for _, s in first if s > 0), default=1.0)
        top2 = max((s for _, s in second if s > 0), default=1.0)
        return first + [(cid, s / top2 * top1) for cid, s in second]

    store.lexical_search = with_second_search
    retriever = Retriever(store, embedder, RetrievalSettings.from_settings(settings))
    glossary = load_glossary(None)
    lang_of = {p["id"]: p.get("lang", "?") for p in passages}
    found = collections.defaultdict(list)
    for q in bench_recall._questions():
        bq = bridge(q["query"], settings.library_language, glossary)
        expected = set(q["expected_sources"])
        base = bq.text if bq.bridged else None
        for cfg in [None, *grid]:
            words = [] if cfg is None else other_words(q["query"], *cfg)
            variants = [("product", [], base)] if cfg is None else [
                (f"tau {cfg[0]}, k {cfg[1]}", words, base),
                # the words mixed into the question itself: one lexical search, and one more dense vector
                (f"tau {cfg[0]}, k {cfg[1]}, mixed", [], f"{base or q['query']} ({'; '.join(words)})" if words else base)]
            for name, extra, bridged in variants:
                extra_terms[:] = extra
                cands, _ = retriever.retrieve(q["query"], bridged=bridged)
                hit = any(c.doc_id in expected for c in cands)
                found[(name, "all")].append(hit)
                found[(name, _direction(q, lang_of))].append(hit)
    out = {"vocabulary": {lang: len(v) for lang, v in vocab.items()}}
    for (name, group), hits in sorted(found.items()):
        out.setdefault(name, {})[group] = [round(float(np.mean(hits)), 3), len(hits)]
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trial", choices=["sentences", "expand"])
    ap.add_argument("--workdir", type=Path, default=bench_recall.WORKDIR)
    ap.add_argument("--grid", default="0.5:2,0.6:1,0.7:1", help="tau:k pairs for `expand`")
    a = ap.parse_args(argv)
    if a.trial == "sentences":
        res = sentences(a.workdir)
    else:
        grid = [(float(t), int(k)) for t, k in (p.split(":") for p in a.grid.split(","))]
        res = expand(a.workdir, grid)
    print(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
