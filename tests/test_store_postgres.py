"""PostgreSQL beyond the shared contract: migrations, the library's language, lexical pruning from
the planner's statistics, kill -9 during ingest, copying an index, and the demo end to end with
the same statuses as on SQLite."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from urllib.parse import quote

import numpy as np
import pytest
from click.testing import CliRunner

from conftest import DEMO_CORPUS, DEMO_QUESTIONS
from sourcegate.cli import cli
from sourcegate.embed import HashingEmbedder
from sourcegate.models import Chunk, Document
from sourcegate.store import open_store
from sourcegate.store.postgres import PostgresStore, redact_url, text_search_config, tsquery_terms, tsv_text

EMB = HashingEmbedder(64)


def put(store, doc_id, texts, emb=EMB, **kw):
    d = Document(id=doc_id, title=kw.pop("title", f"Title {doc_id}"), text="\n\n".join(texts),
                 content_hash=f"h-{doc_id}", **kw)
    chunks = [Chunk(id=f"{doc_id}#{i}", doc_id=doc_id, ordinal=i, text=t) for i, t in enumerate(texts)]
    store.upsert_document(d, chunks, emb.embed(texts))


def run(*args, env=None):
    return CliRunner().invoke(cli, list(args), env=env, catch_exceptions=False)


def test_text_preparation_matches_the_sqlite_tokenizer():
    assert tsv_text("Pump P-200", None, "Réglage: 2.5 bar_max") == "pump p 200 reglage 2 5 bar max"
    assert tsquery_terms("What is E-47 on the P-200?") == ['"e 47"', '"p 200"']
    assert tsquery_terms("grease the bearings") == ["grease", "bearings"]
    assert text_search_config("fr") == "french" and text_search_config("en-GB") == "english"
    assert text_search_config("german") == "german" and text_search_config("xx") == "simple"
    assert redact_url("postgresql://sg:s3cret@db:5432/lib") == "postgresql://sg:***@db:5432/lib"


def test_migrations_are_named_and_processes_starting_together_agree(postgres_url):
    stores, errors = [], []

    def open_one():
        try:
            stores.append(PostgresStore(postgres_url, EMB.id, EMB.dim))
        except Exception as e:  # pragma: no cover - what the test guards against
            errors.append(e)

    threads = [threading.Thread(target=open_one) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors and len(stores) == 3
    assert stores[0].migrations() == ["0000_pgvector", "0001_documents_and_chunks", "0002_search_indexes",
                                      "0003_document_metadata", "0004_readers"]
    for s in stores:
        s.close()


def test_library_language_sets_stemming_and_cannot_change_silently(postgres_url):
    s = open_store(postgres_url, EMB.id, EMB.dim, language="fr")
    put(s, "FR", ["Graisser les roulements toutes les 2 000 heures de marche."])
    put(s, "EN", ["Check the seals every week."])
    assert s.text_config == "french"
    assert [h[0] for h in s.lexical_search("roulement graissé", 5)] == ["FR#0"]  # stemmed and unaccented
    s.close()
    with pytest.raises(RuntimeError, match="SOURCEGATE_LIBRARY_LANGUAGE"):
        open_store(postgres_url, EMB.id, EMB.dim, language="en")


def test_lexical_search_prunes_common_terms_from_planner_statistics(postgres_url, monkeypatch):
    import sourcegate.store.postgres as mod

    s = open_store(postgres_url, EMB.id, EMB.dim)
    for i in range(40):
        put(s, f"D{i}", [f"pump maintenance procedure number {i} for the station pump"])
    put(s, "X", ["pump maintenance procedure for the rare zircon impeller"])
    s.analyze()
    monkeypatch.setattr(mod, "LEXICAL_PRUNE_MIN_CHUNKS", 10)
    with s._pool.connection() as conn:
        kept = s._prune(conn, tsquery_terms("pump maintenance zircon impeller"))
    assert set(kept[:2]) == {"zircon", "impeller"} and "pump" not in kept
    assert s.lexical_search("pump maintenance zircon impeller", 3)[0][0] == "X#0"
    # Rare terms are ranked on every row they match; a common one on a bounded number of rows.
    monkeypatch.setattr(mod, "LEXICAL_RANK_CAP", 5)
    with s._pool.connection() as conn:
        assert s._plan(conn, tsquery_terms("zircon impeller")) == (["impeller", "zircon"], [])
        assert s._plan(conn, tsquery_terms("station")) == ([], ["station"])
    assert len(s.lexical_search("station", 3)) == 3
    monkeypatch.setattr(mod, "LEXICAL_PRUNE_MIN_CHUNKS", 10_000)
    with s._pool.connection() as conn:
        assert "pump" in s._prune(conn, tsquery_terms("pump maintenance zircon impeller"))
    s.close()


def test_bulk_load_builds_the_vector_index_once_and_a_load_cut_short_gets_it_back(postgres_url):
    s = PostgresStore(postgres_url, EMB.id, EMB.dim)

    def has_index():
        with s._pool.connection() as conn:
            return conn.execute("SELECT to_regclass('chunks_embedding_hnsw') IS NOT NULL").fetchone()[0]

    with s.bulk_load():
        assert not has_index()
        put(s, "A", ["grease the bearings"])
        put(s, "B", ["backwash the filter"])
        assert s.dense_search(EMB.embed(["grease the bearings"])[0], 1)[0][0] == "A#0"  # exact scan meanwhile
    assert has_index()
    with s.bulk_load():  # not empty: the index stays
        assert has_index()
    with s._pool.connection() as conn:
        conn.execute("DROP INDEX chunks_embedding_hnsw")  # as a load killed before its end leaves it
    s.close()
    s = PostgresStore(postgres_url, EMB.id, EMB.dim)
    assert has_index()
    s.close()


def test_a_read_replica_is_searched_without_migrating(postgres_server, postgres_url):
    """Serve replicas may point at a hot standby: opening it must not write."""
    schema = postgres_url.rsplit("search_path%3D", 1)[1].split("%2C", 1)[0]
    sep = "&" if "?" in postgres_server else "?"
    read_only = f"{postgres_server}{sep}options=" + quote(f"-csearch_path={schema},public -cdefault_transaction_read_only=on",
                                                          safe="")
    with pytest.raises(RuntimeError, match="holds no sourcegate index"):
        PostgresStore(read_only, EMB.id, EMB.dim)
    s = PostgresStore(postgres_url, EMB.id, EMB.dim)
    put(s, "A", ["chlorine residual at the outlet"])
    s.close()
    r = PostgresStore(read_only, EMB.id, EMB.dim)
    assert r.read_only and [h[0] for h in r.lexical_search("chlorine", 5)] == ["A#0"]
    with pytest.raises(Exception, match="read-only"):
        put(r, "B", ["text"])
    r.close()
    with pytest.raises(RuntimeError, match="embedder"):
        PostgresStore(read_only, "other", 32)


def test_unreachable_server_says_what_to_check(tmp_path):
    with pytest.raises(RuntimeError, match="SOURCEGATE_STORE"):
        PostgresStore(f"postgresql://nobody@/nodb?host={tmp_path}", EMB.id, EMB.dim, connect_timeout=2)


# -- kill -9 during ingest --------------------------------------------------------------------------

def _library(root: Path, docs: int) -> None:
    root.mkdir()
    for i in range(docs):
        paras = [f"Section {j} of procedure {i}. " + " ".join(
            f"Check valve V-{i}-{j}-{k} and record the reading on sheet {k} before the next step." for k in range(9))
            for j in range(5)]
        (root / f"proc-{i:04d}.md").write_text(f"# Procedure {i}\n\n" + "\n\n".join(paras) + "\n", encoding="utf-8")


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_kill_9_during_ingest_leaves_whole_documents(backend, request, tmp_path):
    location = request.getfixturevalue("postgres_url") if backend == "postgresql" else f"sqlite:///{tmp_path / 'index.db'}"
    emb = HashingEmbedder()
    store = open_store(location, emb.id, emb.dim)  # schema in place before the writer starts
    _library(tmp_path / "lib", 400)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SOURCEGATE_")}
    env.update(SOURCEGATE_STORE=location, SOURCEGATE_EMBEDDER="hashing", SOURCEGATE_HOME=str(tmp_path / "home"))
    proc = subprocess.Popen([sys.executable, "-m", "sourcegate.cli", "ingest", str(tmp_path / "lib")], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while store.stats().documents < 20 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert proc.poll() is None, f"ingest ended before it could be killed: {proc.stderr.read().decode()[-2000:]}"
        os.killpg(proc.pid, signal.SIGKILL)  # the ingest and its embedding workers
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.stderr.close()
    records = store.list_documents()
    assert 20 <= len(records) < 400
    for rec in records:
        exp = store.export_document(rec.id)
        assert rec.chunk_count == len(exp.chunks) > 0, rec.id
        assert [c.ordinal for c in exp.chunks] == list(range(rec.chunk_count)), rec.id
    assert store.stats().chunks == sum(r.chunk_count for r in records)  # no chunk without its document
    store.close()


# -- moving an index and the demo end to end --------------------------------------------------------

def test_store_copy_moves_the_embedded_index_to_postgresql(demo_index, embedder, postgres_url, tmp_path):
    r = run("store", "copy", str(demo_index), postgres_url)
    assert r.exit_code == 0, r.output
    assert "14 copied, 0 unchanged" in r.output and "counts checked" in r.output
    src = open_store(demo_index, embedder.id, embedder.dim)
    dst = open_store(postgres_url, embedder.id, embedder.dim)
    try:
        assert [(d.id, d.content_hash, d.chunk_count) for d in src.list_documents()] == \
               [(d.id, d.content_hash, d.chunk_count) for d in dst.list_documents()]
        a, b = src.export_document("PROC-P200-BRG-R2"), dst.export_document("PROC-P200-BRG-R2")
        assert [c.id for c in a.chunks] == [c.id for c in b.chunks] and a.features == b.features
        assert np.allclose(a.vectors, b.vectors, atol=1e-7)
        q = embedder.embed(["grease interval P-200 bearings"])[0]
        assert [h[0] for h in src.dense_search(q, 10)] == [h[0] for h in dst.dense_search(q, 10)]
        put(dst, "EXTRA", ["a document only the destination holds"], emb=embedder)
    finally:
        src.close()
        dst.close()
    r = run("store", "copy", str(demo_index), postgres_url)
    assert r.exit_code == 0 and "0 copied, 14 unchanged, 0 removed" in r.output
    r = run("store", "copy", "--prune", str(demo_index), postgres_url)
    assert r.exit_code == 0 and "1 removed" in r.output
    r = run("store", "copy", str(tmp_path / "nothing.db"), postgres_url)
    assert r.exit_code == 1 and "no index at" in r.output


def _eval(store_location: str, home: Path) -> dict:
    r = run("--home", str(home), "eval", str(DEMO_QUESTIONS), "--json", env={"SOURCEGATE_STORE": store_location})
    assert r.exit_code == 0, r.output
    return json.loads(r.output[r.output.index("{"):])


def test_demo_eval_gives_the_same_statuses_on_postgresql_as_on_sqlite(demo_index, postgres_url, tmp_path):
    r = run("ingest", "--store", postgres_url, str(DEMO_CORPUS))
    assert r.exit_code == 0 and "14 added" in r.output, r.output
    on_sqlite = _eval(f"sqlite:///{demo_index}", tmp_path / "a")
    on_postgres = _eval(postgres_url, tmp_path / "b")
    assert len(on_sqlite["cases"]) == len(on_postgres["cases"]) >= 27

    def outcome(case):
        return case["query"], case["status"], sorted(case["evidence_doc_ids"]), sorted(case["conflict_doc_ids"])

    assert [outcome(c) for c in on_postgres["cases"]] == [outcome(c) for c in on_sqlite["cases"]]
    assert on_postgres["metrics"]["status_accuracy"] == on_sqlite["metrics"]["status_accuracy"]
    r = run("status", "--json", env={"SOURCEGATE_STORE": postgres_url})
    data = json.loads(r.output)
    assert data["vector_search"] == "pgvector-hnsw" and data["documents"] == 14
