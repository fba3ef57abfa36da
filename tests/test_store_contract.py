"""The store contract. Every store runs these same tests: add a backend to STORES.

PostgreSQL runs on a real server (tests/store_servers.py); Azure AI Search at the azure-core
transport boundary (tests/fakes/azure_search.py), or on a real service when
SOURCEGATE_TEST_AZURE_SEARCH_ENDPOINT and SOURCEGATE_TEST_AZURE_SEARCH_KEY are set.
"""

from __future__ import annotations

import numpy as np
import pytest

from sourcegate.embed import HashingEmbedder
from sourcegate.models import Chunk, Document
from sourcegate.store import ReadersRule, SearchFilters, open_store
from sourcegate.store.sqlite import SqliteStore, fts_query
from live_azure import ENDPOINT as LIVE_AZURE

EMB = HashingEmbedder(64)


def _sqlite_vec(**kw):
    def opener(request, tmp_path):
        def open_(embedder_id=EMB.id, dim=EMB.dim):
            s = SqliteStore(tmp_path / "index.db", embedder_id, dim, **kw)
            if s.vector_backend != "sqlite-vec":
                s.close()
                pytest.skip("sqlite-vec cannot be loaded by this Python")
            return s
        return open_
    return opener


def sqlite_numpy(request, tmp_path):
    return lambda embedder_id=EMB.id, dim=EMB.dim: SqliteStore(tmp_path / "index.db", embedder_id, dim,
                                                                vector_backend="numpy")


def postgresql(request, tmp_path):
    url = request.getfixturevalue("postgres_url")
    return lambda embedder_id=EMB.id, dim=EMB.dim: open_store(url, embedder_id, dim)


def azure_fake(request, tmp_path):
    """Azure AI Search at the transport boundary: one in-memory service per test."""
    pytest.importorskip("azure.search.documents", reason='needs azure-search-documents (pip install -e ".[test]")')
    from azure.core.credentials import AzureKeyCredential

    from fakes.azure_search import FakeSearchService, FakeSearchTransport
    from sourcegate.store.azure import AzureSearchStore

    service = request.node.__dict__.setdefault("azure_service", FakeSearchService())
    return lambda embedder_id=EMB.id, dim=EMB.dim: AzureSearchStore(
        "https://contract.search.windows.net", "contract", embedder_id, dim,
        credential=AzureKeyCredential(service.api_key), transport=FakeSearchTransport(service))


def azure_live(request, tmp_path):
    """A real Azure AI Search service, when SOURCEGATE_TEST_AZURE_SEARCH_ENDPOINT and _KEY are set."""
    from live_azure import live_azure_store

    return live_azure_store(request, EMB)


STORES = {"sqlite-vec": _sqlite_vec(), "sqlite-vec-knn": _sqlite_vec(dense_index="sqlite"),
          "sqlite-numpy": sqlite_numpy, "postgresql": postgresql, "azure": azure_fake}
if LIVE_AZURE:
    STORES["azure-live"] = azure_live


@pytest.fixture(params=list(STORES))
def open_same(request, tmp_path):
    """Opens a store on the same index each time it is called (a second process, a restart)."""
    opened = []

    def open_(*args, **kw):
        s = STORES[request.param](request, tmp_path)(*args, **kw)
        opened.append(s)
        return s

    yield open_
    for s in opened:
        s.close()


@pytest.fixture
def store(open_same):
    return open_same()


def doc(doc_id, texts, status="current", version="1", source_type="procedure", title=None, metadata=None,
        readers=None):
    d = Document(id=doc_id, title=title or f"Title {doc_id}", text="\n\n".join(texts), status=status, version=version,
                 source_type=source_type, url=f"https://x/{doc_id}", content_hash=f"h-{doc_id}-{len(texts)}",
                 metadata=metadata or {}, readers=list(readers or []))
    chunks = [Chunk(id=f"{doc_id}#{i}", doc_id=doc_id, ordinal=i, text=t) for i, t in enumerate(texts)]
    return d, chunks, EMB.embed(texts)


def put(store, doc_id, texts, **kw):
    d, chunks, vecs = doc(doc_id, texts, **kw)
    store.upsert_document(d, chunks, vecs, [{"k": i} for i in range(len(texts))], source_path=f"/src/{doc_id}")
    return d


def test_upsert_get_and_list(store):
    put(store, "A", ["grease the pump bearings every 2000 hours", "use lithium grease"])
    rec = store.get_document("A")
    assert rec.content_hash == "h-A-2" and rec.chunk_count == 2 and rec.url == "https://x/A"
    assert rec.source_path == "/src/A"
    assert [d.id for d in store.list_documents()] == ["A"]
    chunks = store.get_chunks(["A#1", "A#0", "missing"])
    assert [c.id for c in chunks] == ["A#1", "A#0"]
    assert chunks[0].passage_features == {"k": 1} and chunks[0].title == "Title A" and chunks[0].version == "1"
    assert store.get_document("nope") is None


def test_readers_trim_every_read_inside_the_store(store):
    """A restricted caller's rule (docs/readers.md) is applied by each store in its queries: the
    searches, the chunks fetched by id and the document list; an unrestricted caller (no rule) reads all."""
    text = "the pump seal of station 7 is replaced every 4000 hours with a viton seal"
    put(store, "PUBLIC", [text])
    put(store, "HR", [text + " according to the HR case file"], readers=["grp-hr", "user-ana"])
    put(store, "SEC", [text + " per the security runbook"], readers=["grp-sec"])
    assert store.get_document("HR").readers == ["grp-hr", "user-ana"] and store.get_document("PUBLIC").readers == []
    q = EMB.embed(["pump seal station 7 viton"])[0]
    cases = {
        None: {"PUBLIC", "HR", "SEC"},
        ReadersRule(frozenset({"grp-hr"})): {"HR"},
        ReadersRule(frozenset({"user-ana", "grp-sec"})): {"HR", "SEC"},
        ReadersRule(frozenset({"grp-hr"}), unmarked=True): {"PUBLIC", "HR"},
        ReadersRule(frozenset(), unmarked=True): {"PUBLIC"},
        ReadersRule(frozenset({"nobody-here"})): set(),
        ReadersRule(): set(),
    }
    for rule, readable in cases.items():
        f = SearchFilters(readers=rule)
        docs = lambda hits: {cid.split("#")[0] for cid, _ in hits}  # noqa: E731
        assert docs(store.dense_search(q, 10, f)) == readable, rule
        assert docs(store.lexical_search("pump seal viton", 10, f)) == readable, rule
        if hasattr(store, "hybrid_search"):
            assert {h.id.split("#")[0] for h in store.hybrid_search("pump seal", [q], 10, 10, f)} == readable, rule
        assert {c.doc_id for c in store.get_chunks(["PUBLIC#0", "HR#0", "SEC#0"], rule)} == readable, rule
        assert {d.id for d in store.list_documents(rule)} == readable, rule
    # with other filters: both apply
    assert store.dense_search(q, 10, SearchFilters(readers=ReadersRule(frozenset({"grp-hr"})), version="2")) == []
    # new readers replace the old ones
    put(store, "HR", [text], readers=["grp-sec"])
    assert {d.id for d in store.list_documents(ReadersRule(frozenset({"grp-hr"})))} == set()
    assert {d.id for d in store.list_documents(ReadersRule(frozenset({"grp-sec"})))} == {"HR", "SEC"}


def test_dense_search_ranks_by_cosine(store):
    put(store, "A", ["grease the pump bearings every 2000 hours"])
    put(store, "B", ["backwash the sand filter when head loss reaches 2.5 m"])
    q = EMB.embed(["sand filter backwash head loss"])[0]
    hits = store.dense_search(q, 2)
    assert [h[0] for h in hits] == ["B#0", "A#0"]
    assert hits[0][1] > hits[1][1] and -1.0 <= hits[1][1] <= 1.0001


def test_lexical_search_finds_identifiers(store):
    put(store, "A", ["fault code E-47 means DC bus overvoltage"])
    put(store, "B", ["fault code E-12 means motor overload"])
    put(store, "C", ["pump P-200 bearing lubrication"])
    assert store.lexical_search("what is E-47", 5)[0][0] == "A#0"
    assert store.lexical_search("P-200", 5)[0][0] == "C#0"
    assert store.lexical_search("?!", 5) == []


def test_filters(store):
    put(store, "cur", ["valve exercising every year"], status="current", version="2")
    put(store, "old", ["valve exercising every five years"], status="archived", version="1")
    put(store, "kb", ["valve exercising notes"], status="current", version="3", source_type="forum")
    q = EMB.embed(["valve exercising"])[0]
    default = {h[0] for h in store.dense_search(q, 10)}
    assert default == {"cur#0", "kb#0"}
    assert {h[0] for h in store.dense_search(q, 10, SearchFilters(exclude_status=()))} == {"cur#0", "old#0", "kb#0"}
    assert {h[0] for h in store.dense_search(q, 10, SearchFilters(source_type="forum"))} == {"kb#0"}
    assert {h[0] for h in store.dense_search(q, 10, SearchFilters(exclude_status=(), version="1"))} == {"old#0"}
    assert {h[0] for h in store.lexical_search("valve exercising", 10)} == {"cur#0", "kb#0"}
    assert {h[0] for h in store.lexical_search("valve", 10, SearchFilters(status="archived", exclude_status=()))} == {"old#0"}


def test_filters_on_document_metadata_and_id_prefix(store):
    # Per-request filters: a front-matter key (model) and a doc_id prefix, applied inside the query.
    put(store, "lab/hg3-manual", ["rotor speed limit 20000 rpm"], metadata={"model": "HG-3", "site": "north"})
    put(store, "lab/hg5-manual", ["rotor speed limit 12000 rpm"], metadata={"model": "HG-5", "site": "north"})
    put(store, "plant/pump", ["rotor speed of the pump 3000 rpm"])
    assert store.get_document("lab/hg3-manual").metadata == {"model": "HG-3", "site": "north"}
    assert store.get_document("plant/pump").metadata == {}
    assert store.export_document("lab/hg5-manual").record.metadata == {"model": "HG-5", "site": "north"}
    q = EMB.embed(["rotor speed limit"])[0]
    hg3 = SearchFilters(metadata=(("model", "HG-3"),))
    assert {h[0] for h in store.dense_search(q, 10)} == {"lab/hg3-manual#0", "lab/hg5-manual#0", "plant/pump#0"}
    assert {h[0] for h in store.dense_search(q, 10, hg3)} == {"lab/hg3-manual#0"}
    assert {h[0] for h in store.lexical_search("rotor speed", 10, hg3)} == {"lab/hg3-manual#0"}
    both = SearchFilters(metadata=(("model", "HG-5"), ("site", "north")))
    assert {h[0] for h in store.dense_search(q, 10, both)} == {"lab/hg5-manual#0"}
    assert store.dense_search(q, 10, SearchFilters(metadata=(("model", "HG-5"), ("site", "south")))) == []
    lab = SearchFilters(doc_id_prefix="lab/")
    assert {h[0] for h in store.dense_search(q, 10, lab)} == {"lab/hg3-manual#0", "lab/hg5-manual#0"}
    assert {h[0] for h in store.lexical_search("rotor speed", 10, lab)} == {"lab/hg3-manual#0", "lab/hg5-manual#0"}
    # a prefix is matched literally: % and _ are not wildcards
    assert store.dense_search(q, 10, SearchFilters(doc_id_prefix="lab%")) == []
    assert store.dense_search(q, 10, SearchFilters(doc_id_prefix="lab_")) == []


@pytest.mark.parametrize("last", ["\U0010ffff", "\ud7ff", "\uffff", "z"])
def test_a_doc_id_prefix_ending_in_any_character_is_matched_exactly(store, last):
    # the range a store without startswith builds (Azure: ge prefix, lt the next string) has no
    # next character after U+10FFFF, and after U+D7FF comes a surrogate no request can carry
    inside, outside = f"lab{last}", ("lab{" if last == "z" else "lab\U0010ffff" if last != "\U0010ffff" else "lac")
    put(store, f"{inside}/manual", ["rotor speed limit 20000 rpm"])
    put(store, f"{inside}", ["rotor speed limit 12000 rpm"])
    put(store, f"{outside}/pump", ["rotor speed of the pump 3000 rpm"])
    put(store, "lab", ["rotor speed of the lab 3000 rpm"])
    q = EMB.embed(["rotor speed limit"])[0]
    f = SearchFilters(doc_id_prefix=inside)
    assert {h[0] for h in store.dense_search(q, 10, f)} == {f"{inside}/manual#0", f"{inside}#0"}
    assert {h[0] for h in store.lexical_search("rotor speed", 10, f)} == {f"{inside}/manual#0", f"{inside}#0"}


def test_replace_is_whole(store):
    put(store, "A", ["first text about chlorine", "second text about chlorine"])
    put(store, "A", ["new text about ozone"])
    assert store.get_document("A").chunk_count == 1
    assert store.lexical_search("chlorine", 10) == []
    assert store.get_chunks(["A#1"]) == []
    assert [h[0] for h in store.dense_search(EMB.embed(["chlorine"])[0], 10)] == ["A#0"]
    assert store.stats().chunks == 1


def test_delete(store):
    put(store, "A", ["text one"])
    put(store, "B", ["text two"])
    assert store.delete_document("A") is True
    assert store.delete_document("A") is False
    assert store.get_document("A") is None
    assert all(h[0].startswith("B") for h in store.dense_search(EMB.embed(["text"])[0], 10))
    assert all(h[0].startswith("B") for h in store.lexical_search("text", 10))


def test_stats_and_vectors(store):
    put(store, "A", ["one", "two"])
    put(store, "Z", ["three"], status="archived")
    st = store.stats()
    assert (st.documents, st.chunks) == (2, 3)
    assert st.by_status == {"archived": {"documents": 1, "chunks": 1}, "current": {"documents": 1, "chunks": 2}}
    vecs = store.get_vectors(["A#0", "Z#0"])
    assert set(vecs) == {"A#0", "Z#0"}
    assert np.allclose(vecs["A#0"], EMB.embed(["one"])[0], atol=1e-6)


def test_mismatched_vectors_rejected(store):
    d, chunks, vecs = doc("A", ["one", "two"])
    with pytest.raises(ValueError):
        store.upsert_document(d, chunks, vecs[:1])


def test_reopen_keeps_data_and_checks_embedder(open_same):
    s = open_same()
    put(s, "A", ["persisted text"])
    s.close()
    s2 = open_same()
    assert s2.get_document("A") is not None
    with pytest.raises(RuntimeError, match="embedder"):
        open_same("other-embedder", 32)


def test_writes_from_another_connection_are_seen(open_same):
    reader, writer = open_same(), open_same()
    put(writer, "A", ["chlorine residual at the outlet"])
    q = EMB.embed(["chlorine residual"])[0]
    assert [h[0] for h in reader.dense_search(q, 5)] == ["A#0"]
    put(writer, "B", ["chlorine residual in the network"])
    writer.delete_document("A")
    assert [h[0] for h in reader.dense_search(q, 5)] == ["B#0"]
    assert [h[0] for h in reader.lexical_search("chlorine residual", 5)] == ["B#0"]


def test_export_gives_back_what_was_written(store):
    put(store, "A", ["grease the bearings", "check the seal"], version="3")
    exp = store.export_document("A")
    assert exp.record.content_hash == "h-A-2" and exp.record.version == "3" and exp.record.source_path == "/src/A"
    assert [(c.id, c.ordinal, c.text) for c in exp.chunks] == [("A#0", 0, "grease the bearings"), ("A#1", 1, "check the seal")]
    assert exp.features == [{"k": 0}, {"k": 1}]
    assert exp.vectors.shape == (2, EMB.dim) and np.allclose(exp.vectors, EMB.embed(["grease the bearings", "check the seal"]), atol=1e-6)
    assert store.export_document("nope") is None


def test_migrations_are_named_and_recorded(tmp_path):
    s = SqliteStore(tmp_path / "i.db", EMB.id, EMB.dim)
    names = [r[0] for r in s._conn.execute("SELECT name FROM schema_migrations ORDER BY name")]
    assert names == ["0001_documents_and_chunks", "0002_vectors", "0003_fts_filter_columns", "0004_document_metadata",
                     "0005_document_readers"]
    assert s._conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    s.close()


def test_lexical_search_prunes_common_terms_on_large_indexes(tmp_path, monkeypatch):
    import sourcegate.store.sqlite as mod

    s = SqliteStore(tmp_path / "i.db", EMB.id, EMB.dim)
    for i in range(40):
        put(s, f"D{i}", [f"pump maintenance procedure number {i} for the station pump"])
    put(s, "X", ["pump maintenance procedure for the rare zircon impeller"])
    monkeypatch.setattr(mod, "LEXICAL_PRUNE_MIN_CHUNKS", 10)
    match = s._lexical_match("pump maintenance zircon impeller")
    assert match.split(" OR ")[:2] == ['"impeller"', '"zircon"'] and '"pump"' not in match
    assert s.lexical_search("pump maintenance zircon impeller", 3)[0][0] == "X#0"
    monkeypatch.setattr(mod, "LEXICAL_PRUNE_MIN_CHUNKS", 10_000)
    assert '"pump"' in s._lexical_match("pump maintenance zircon impeller")
    s.close()


def test_fts_query_quotes_identifiers():
    assert fts_query('P-200 "bearings"') == '"p 200" OR "bearings"'
    assert fts_query("the of and") is None
