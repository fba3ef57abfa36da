"""Azure AI Search beyond the shared contract, at the azure-core transport boundary
(tests/fakes/azure_search.py): the index definition, writes by key, the hybrid query with the
semantic ranker, its score kept through retrieval and audit, and the demo's questions."""

from __future__ import annotations

import base64
import json

import pytest

pytest.importorskip("azure.search.documents", reason='the Azure store tests need azure-search-documents (pip install -e ".[test]")')

from azure.core.credentials import AzureKeyCredential  # noqa: E402

from fakes.azure_search import API_VERSION, FakeSearchService, FakeSearchTransport  # noqa: E402
from live_azure import ENDPOINT as LIVE_ENDPOINT  # noqa: E402
from sourcegate.embed import HashingEmbedder  # noqa: E402
from sourcegate.models import Chunk, Document  # noqa: E402
from sourcegate.retrieve import RetrievalSettings, Retriever  # noqa: E402
from sourcegate.store import SearchFilters, open_store  # noqa: E402
from sourcegate.store.azure import AzureSearchStore, analyzer_for, filter_expression, search_text  # noqa: E402

EMB = HashingEmbedder(64)


@pytest.fixture
def service():
    return FakeSearchService()


def azure(service, semantic=False, language="en", embedder=EMB, index="lib"):
    return AzureSearchStore("https://svc.search.windows.net", index, embedder.id, embedder.dim,
                            credential=AzureKeyCredential(service.api_key), language=language, semantic=semantic,
                            transport=FakeSearchTransport(service))


def put(store, doc_id, texts, emb=EMB, **kw):
    d = Document(id=doc_id, title=kw.pop("title", f"Title {doc_id}"), text="", content_hash=f"h-{doc_id}-{len(texts)}", **kw)
    chunks = [Chunk(id=f"{doc_id}#{i}", doc_id=doc_id, ordinal=i, text=t) for i, t in enumerate(texts)]
    store.upsert_document(d, chunks, emb.embed(texts))


def bodies(service, method, suffix):
    return [b for m, p, b in service.requests if m == method and p.endswith(suffix)]


def test_query_building():
    assert search_text("What does E-47 mean on the P-200?") == '"e 47" mean "p 200"'
    assert search_text("?!") is None
    assert filter_expression(SearchFilters()) == "status ne 'archived'"
    assert filter_expression(SearchFilters(exclude_status=(), source_type="forum", version="l'an 2")) == \
        "source_type eq 'forum' and version eq 'l''an 2'"
    assert analyzer_for("fr") == "fr.lucene" and analyzer_for("pt-BR") == "pt-PT.lucene" and analyzer_for("xx") == "standard.lucene"


def test_index_is_created_with_vector_profile_and_semantic_configuration(service):
    azure(service, language="fr").close()
    index = service.indexes["lib"]
    fields = {f["name"]: f for f in index["fields"]}
    assert fields["key"]["key"] is True
    emb = fields["embedding"]
    assert emb["type"] == "Collection(Edm.Single)" and emb["dimensions"] == EMB.dim and emb["searchable"]
    profile = next(p for p in index["vectorSearch"]["profiles"] if p["name"] == emb["vectorSearchProfile"])
    algorithm = next(a for a in index["vectorSearch"]["algorithms"] if a["name"] == profile["algorithm"])
    assert algorithm["kind"] == "hnsw" and algorithm["hnswParameters"]["metric"] == "cosine"
    conf = index["semantic"]["configurations"][0]
    assert conf["prioritizedFields"]["titleField"] == {"fieldName": "title"}
    assert conf["prioritizedFields"]["prioritizedContentFields"] == [{"fieldName": "text"}]
    assert fields["text"]["analyzer"] == "fr.lucene"
    assert {f: fields[f]["filterable"] for f in ("status", "source_type", "version")} == dict.fromkeys(
        ("status", "source_type", "version"), True)
    assert "lib-documents" in service.indexes
    # Opening it again creates nothing; another language or embedder is refused.
    puts = len(bodies(service, "PUT", "('lib')"))
    azure(service, language="fr").close()
    assert len(bodies(service, "PUT", "('lib')")) == puts
    with pytest.raises(RuntimeError, match="SOURCEGATE_LIBRARY_LANGUAGE"):
        azure(service, language="en")
    with pytest.raises(RuntimeError, match="embedder"):
        azure(service, language="fr", embedder=HashingEmbedder(32))


def test_writes_merge_or_upload_by_key_and_remove_stale_chunks(service):
    s = azure(service)
    put(s, "folder/proc.md", ["first", "second", "third"])
    put(s, "folder/proc.md", ["first", "new second"])
    actions = [a for b in bodies(service, "POST", "('lib')/docs/search.index") for a in b["value"]]
    uploads = [a for a in actions if a["@search.action"] == "mergeOrUpload"]
    assert {base64.urlsafe_b64decode(a["key"]).decode() for a in uploads} == {f"folder/proc.md#{i}" for i in range(3)}
    assert uploads[0]["chunk_id"] == "folder/proc.md#0" and len(uploads[0]["embedding"]) == EMB.dim
    assert [a["key"] for a in actions if a["@search.action"] == "delete"] == [
        base64.urlsafe_b64encode(b"folder/proc.md#2").decode()]
    assert s.get_document("folder/proc.md").chunk_count == 2 and s.stats().chunks == 2
    s.close()


def test_refused_write_is_an_error_naming_the_key(service, monkeypatch):
    import sourcegate.store.azure as mod

    s = azure(service)
    monkeypatch.setattr(mod, "encode_key", lambda v: v)  # "#" is not allowed in a key
    with pytest.raises(RuntimeError, match="refused 1 of 1 writes.*A#0"):
        put(s, "A", ["text"])
    s.close()


def test_wrong_key_says_which_variable_to_set(service):
    with pytest.raises(RuntimeError, match="AZURE_SEARCH_API_KEY"):
        AzureSearchStore("https://svc.search.windows.net", "lib", EMB.id, EMB.dim,
                         credential=AzureKeyCredential("wrong"), transport=FakeSearchTransport(service))


def test_url_options(monkeypatch):
    seen = {}

    def fake_init(self, endpoint, index_name, embedder_id, dim, **kw):
        seen.update(endpoint=endpoint, index=index_name, **kw)

    monkeypatch.setattr(AzureSearchStore, "__init__", fake_init)
    open_store("azure://acme/procedures?semantic=on", EMB.id, EMB.dim, azure_api_key="k", language="de")
    assert seen["endpoint"] == "https://acme.search.windows.net" and seen["index"] == "procedures"
    assert seen["semantic"] is True and seen["language"] == "de" and seen["api_version"] == API_VERSION
    assert seen["credential"].key == "k"
    open_store("azure://acme.search.windows.net/procedures", EMB.id, EMB.dim, azure_api_key="k")
    assert seen["semantic"] is False


def test_hybrid_query_with_semantic_ranker_keeps_the_reranker_score(service):
    s = azure(service, semantic=True)
    put(s, "P200", ["Grease the P-200 bearings every 2000 hours with lithium grease."])
    put(s, "OLD", ["Grease the P-200 bearings every 500 hours."], status="archived")
    put(s, "F", ["Backwash the sand filter when head loss reaches 2 m."])
    retriever = Retriever(s, EMB, RetrievalSettings(min_score=-1.0))
    cands, _ = retriever.retrieve("How often should I grease the P-200 bearings?")
    search = bodies(service, "POST", "('lib')/docs/search.post.search")[-3]  # then two lookups by key
    assert search["queryType"] == "semantic" and search["semanticConfiguration"] == "sourcegate"
    assert search["search"] == 'grease "p 200" bearings' and search["searchMode"] == "any"
    assert search["vectorQueries"][0]["kind"] == "vector" and search["vectorQueries"][0]["k"] == 15
    assert search["filter"] == "status ne 'archived'" and search["vectorFilterMode"] == "preFilter"
    assert search["top"] == 30
    assert cands[0].doc_id == "P200" and "OLD" not in {c.doc_id for c in cands}
    assert cands[0].reranker_score == 4.0 and all(c.reranker_score is not None for c in cands)
    assert cands[0].embedding is not None and cands[0].dense_score > 0
    s.close()


def test_without_the_semantic_ranker_the_query_is_plain_hybrid(service):
    s = azure(service)
    put(s, "A", ["pump maintenance"])
    cands, _ = Retriever(s, EMB, RetrievalSettings(min_score=-1.0)).retrieve("pump")
    search = bodies(service, "POST", "('lib')/docs/search.post.search")[-3]
    assert "queryType" not in search and "semanticConfiguration" not in search and search["vectorQueries"]
    assert cands[0].reranker_score is None
    s.close()


def test_demo_on_azure_search(demo_index, embedder, service, tmp_path):
    """The demo corpus copied into Azure AI Search (fake): the seeds' questions keep their statuses,
    and the audit record holds the reranker score."""
    from sourcegate.service import SourceGate
    from sourcegate.settings import Settings
    from sourcegate.store.copy import copy_store

    src = open_store(demo_index, embedder.id, embedder.dim)
    dst = azure(service, semantic=True, embedder=embedder)
    report = copy_store(src, dst)
    src.close()
    assert report.ok and report.copied == 14
    audit = tmp_path / "audit.jsonl"
    gate = SourceGate(Settings(audit_log_path=audit), store=dst, embedder=embedder)
    try:
        expected = {
            "How often should I grease the bearings on pump P-200?": "answer_from_evidence",
            "P-200 bearings need grease every 500 hours, how much do I add?": "premise_conflict",
            "Do I need lockout/tagout for bearing work on P-200?": "answer_from_evidence",
            "What is the warranty on the sand filters?": "insufficient_evidence",
        }
        got = {q: gate.ask(q).status for q in expected}
    finally:
        gate.close()
    assert got == expected
    record = json.loads(audit.read_text().splitlines()[0])
    assert record["retrieval"]["store"] == "AzureSearchStore"
    assert all("reranker_score" in c for c in record["candidates"])


@pytest.mark.skipif(not LIVE_ENDPOINT, reason="set SOURCEGATE_TEST_AZURE_SEARCH_ENDPOINT and SOURCEGATE_TEST_AZURE_SEARCH_KEY "
                                               "to run the store contract against a real Azure AI Search service")
def test_live_service_is_configured():
    """With the variables set, tests/test_store_contract.py also runs on the real service (azure-live)."""
    import test_store_contract

    assert "azure-live" in test_store_contract.STORES
