"""Switching embedders: an index built with one embedder, opened with another, is named (status),
refused for questions (ask, the service), and re-embedded by ingest from the text it holds, on
SQLite, on a real PostgreSQL and on Azure AI Search at its wire contract (whose fake refuses, as the
service does, to change a vector field's dimensions)."""

from __future__ import annotations

import json
import signal

import numpy as np
import pytest
from click.testing import CliRunner

from sourcegate.cli import cli
from sourcegate.embed import HashingEmbedder, get_embedder
from sourcegate.ingest.reembed import Reembedder
from sourcegate.models import Chunk, Document
from sourcegate.store import open_store
from sourcegate.store.base import EmbedderMismatch, reembed_text

OLD = HashingEmbedder(384)  # SOURCEGATE_EMBEDDER=hashing
NEW = HashingEmbedder(256)  # SOURCEGATE_EMBEDDER=hashing-256


class Renamed(HashingEmbedder):
    """Another embedder of the same dimension: only its id tells the spaces apart."""

    def __init__(self, dim: int = 384):
        super().__init__(dim)
        self.id = f"other-{dim}"

    def embed(self, texts):
        return super().embed([t[::-1] for t in texts])


class FailsAfter:
    """An embedder that fails on its n-th call (a model crash, a full disk) midway through."""

    def __init__(self, inner, calls: int):
        self.inner, self.left = inner, calls
        self.id, self.dim = inner.id, inner.dim

    def embed(self, texts):
        self.left -= 1
        if self.left < 0:
            raise RuntimeError("embedder crashed")
        return self.inner.embed(texts)


DOCS = {f"D{i}": (f"Manual {i}", [f"pump P-{i}0{j} bearing {j} needs grease every {1000 + 250 * j} hours, "
                                  f"section {i}.{j}" for j in range(5)]) for i in range(6)}


def feats(doc_id, j):
    return {"inj": round(0.01 * j, 3), "doc_inj": 0.04, "doc_inj_sentence": f"sentence of {doc_id}"}


def fill(store, emb=OLD, only=None):
    for doc_id, (title, texts) in DOCS.items():
        if only is not None and doc_id not in only:
            continue
        d = Document(id=doc_id, title=title, text="", content_hash=f"h-{doc_id}", url=f"https://x/{doc_id}")
        chunks = [Chunk(id=f"{doc_id}#{j}", doc_id=doc_id, ordinal=j, text=t) for j, t in enumerate(texts)]
        store.upsert_document(d, chunks, emb.embed([reembed_text(title, t) for t in texts]),
                              [feats(doc_id, j) for j in range(len(texts))], source_path=f"/gone/{doc_id}.md")


def own_text(chunk_id):
    doc_id, j = chunk_id.split("#")
    title, texts = DOCS[doc_id]
    return reembed_text(title, texts[int(j)])


def assert_searches_with(store, emb):
    """Each chunk is the first neighbour of its own text, embedded by `emb`."""
    for chunk_id in ("D0#0", "D3#2", "D5#4"):
        hits = store.dense_search(emb.embed([own_text(chunk_id)])[0], 3)
        assert hits[0][0] == chunk_id and hits[0][1] == pytest.approx(1.0, abs=1e-4), hits


def assert_features_kept(store):
    for c in store.get_chunks([f"{d}#{j}" for d in DOCS for j in range(5)]):
        doc_id, j = c.id.split("#")
        assert c.passage_features == feats(doc_id, int(j))


# -- the three stores ---------------------------------------------------------------------------------

def _sqlite(request, tmp_path, **kw):
    path = tmp_path / "index.db"
    return lambda emb, **more: open_store(path, emb.id, emb.dim, **kw, **more)


def _postgres(request, tmp_path):
    url = request.getfixturevalue("postgres_url")
    return lambda emb, **more: open_store(url, emb.id, emb.dim, **more)


def _azure(request, tmp_path):
    pytest.importorskip("azure.search.documents", reason='needs azure-search-documents (pip install -e ".[test]")')
    from azure.core.credentials import AzureKeyCredential

    from fakes.azure_search import FakeSearchService, FakeSearchTransport
    from sourcegate.store.azure import AzureSearchStore

    service = request.node.__dict__.setdefault("azure_service", FakeSearchService())
    return lambda emb, **more: AzureSearchStore("https://svc.search.windows.net", "lib", emb.id, emb.dim,
                                                credential=AzureKeyCredential(service.api_key),
                                                transport=FakeSearchTransport(service), **more)


OPENERS = {"sqlite-vec": _sqlite, "sqlite-numpy": lambda r, t: _sqlite(r, t, vector_backend="numpy"),
           "sqlite-knn": lambda r, t: _sqlite(r, t, dense_index="sqlite"), "postgresql": _postgres,
           "azure": _azure}


@pytest.fixture(params=list(OPENERS))
def opener(request, tmp_path):
    opened = []
    make = OPENERS[request.param](request, tmp_path)

    def open_(emb, **kw):
        s = make(emb, **kw)
        opened.append(s)
        return s

    open_.kind = request.param
    yield open_
    for s in opened:
        try:
            s.close()
        except Exception:
            pass


def vector_dim(store, chunk_id):
    return len(store.get_vectors([chunk_id])[chunk_id])


def test_reembed_switches_every_store_to_the_new_space(opener):
    old = opener(OLD)
    fill(old)
    assert_searches_with(old, OLD)
    with pytest.raises(EmbedderMismatch) as e:
        opener(NEW)
    assert "hashing-trigram-384 (384-d)" in str(e.value) and "hashing-trigram-256 (256-d)" in str(e.value)

    s = opener(NEW, allow_embedder_mismatch=True)
    assert s.embedder_mismatch and s.index_embedder() == (OLD.id, 384)
    st = s.stats()
    assert (st.documents, st.chunks, st.embedder, st.dim) == (6, 30, OLD.id, 384)
    for refused in (lambda: s.dense_search(NEW.embed(["pump"])[0], 3), lambda: s.get_vectors(["D0#0"]),
                    lambda: fill(s, NEW)):
        with pytest.raises(EmbedderMismatch):
            refused()

    report = Reembedder(s, NEW, batch=7).run()
    assert report.done and report.chunks == 30 and report.embedded == 30
    assert s.index_embedder() == (NEW.id, 256) and not s.embedder_mismatch
    assert vector_dim(s, "D2#1") == 256
    assert_searches_with(s, NEW)
    assert_features_kept(s)
    assert s.content_hash_embedder() == OLD.id and s.reembed_pending() is None

    # opened again (a restart, another process): the new embedder is the index's
    again = opener(NEW)
    assert again.stats().embedder == NEW.id and again.stats().dim == 256
    assert_searches_with(again, NEW)
    assert [d.id for d in again.list_documents()] == list(DOCS)
    with pytest.raises(EmbedderMismatch):
        opener(OLD)
    # the index keeps taking documents of the new embedder
    fill(again, NEW)
    assert_searches_with(again, NEW)


def test_a_failed_reembed_leaves_the_old_index_serving_and_the_next_run_goes_on(opener):
    fill(opener(OLD))
    s = opener(NEW, allow_embedder_mismatch=True)
    with pytest.raises(RuntimeError, match="embedder crashed"):
        Reembedder(s, FailsAfter(NEW, 2), batch=5).run()  # 10 of 30 chunks staged
    assert s.reembed_pending() == f"{NEW.id}|256"
    old = opener(OLD)  # still the old embedder's index, answering as before
    assert old.index_embedder() == (OLD.id, 384)
    assert_searches_with(old, OLD)
    assert vector_dim(old, "D0#0") == 384
    old.close()

    report = Reembedder(opener(NEW, allow_embedder_mismatch=True), NEW, batch=5).run()
    assert report.done and report.chunks == 30 and report.embedded == 20  # the 10 staged are kept
    s2 = opener(NEW)
    assert_searches_with(s2, NEW)
    assert_features_kept(s2)


def test_a_chunk_rewritten_during_an_interrupted_reembed_is_embedded_from_its_new_text(opener):
    fill(opener(OLD))
    job = Reembedder(opener(NEW, allow_embedder_mismatch=True), NEW, batch=10)

    def progress(done, total):
        if done >= 30:
            job.stop(signal.SIGINT)  # Ctrl-C as the last batch is written

    report = job.run(progress)
    assert not report.done and report.interrupted_by == signal.SIGINT and "run ingest again" in report.summary()
    old = opener(OLD)
    assert_searches_with(old, OLD)
    # the old embedder's ingest rewrites a document meanwhile (same chunk ids, new text)
    DOCS_D1 = DOCS["D1"]
    try:
        DOCS["D1"] = ("Manual 1", [f"valve V-{j} is exercised once a year, step {j}" for j in range(5)])
        fill(old, only={"D1"})
        old.close()
        report = Reembedder(opener(NEW, allow_embedder_mismatch=True), NEW).run()
        assert report.done and report.embedded == 5  # only the rewritten document's chunks
        s = opener(NEW)
        hits = s.dense_search(NEW.embed([own_text("D1#3")])[0], 1)
        assert hits[0][0] == "D1#3" and hits[0][1] == pytest.approx(1.0, abs=1e-4)
        assert_searches_with(s, NEW)
    finally:
        DOCS["D1"] = DOCS_D1


def test_a_store_opened_before_the_switch_refuses_to_search_the_new_space(opener):
    if opener.kind == "azure":
        pytest.skip("Azure AI Search: a store opened before keeps searching its own field, with the old vectors")
    fill(opener(OLD))
    serving = opener(OLD)  # a server started before the re-embedding
    assert_searches_with(serving, OLD)
    other = Renamed(384)  # same dimension: nothing but the recorded id tells the spaces apart
    assert Reembedder(opener(other, allow_embedder_mismatch=True), other).run().done
    with pytest.raises(EmbedderMismatch, match="other-384"):
        serving.dense_search(OLD.embed(["pump bearing"])[0], 3)
    with pytest.raises(EmbedderMismatch):
        fill(serving)  # its ingest cannot write old vectors among the new ones
    assert_searches_with(opener(other), other)


def test_the_azure_fake_refuses_to_change_a_vector_fields_dimensions(request, tmp_path):
    open_ = _azure(request, tmp_path)
    s = open_(OLD)
    from azure.core.exceptions import HttpResponseError

    index = s._indexes.get_index("lib")
    for f in index.fields:
        if f.name == "embedding":
            f.vector_search_dimensions = 256
    with pytest.raises(HttpResponseError, match="cannot be changed"):
        s._indexes.create_or_update_index(index)
    index = s._indexes.get_index("lib")
    index.fields = [f for f in index.fields if f.name != "embedding"]
    with pytest.raises(HttpResponseError, match="cannot be removed"):
        s._indexes.create_or_update_index(index)


def test_azure_reembed_adds_a_vector_field_and_keeps_the_old_one(request, tmp_path):
    open_ = _azure(request, tmp_path)
    fill(open_(OLD))
    assert Reembedder(open_(NEW, allow_embedder_mismatch=True), NEW).run().done
    service = request.node.__dict__["azure_service"]
    fields = {f["name"]: f for f in service.indexes["lib"]["fields"]}
    assert fields["embedding"]["dimensions"] == 384
    assert fields["embedding_hashing_trigram_256_256"]["dimensions"] == 256
    s = open_(NEW)
    assert s.vector_field == "embedding_hashing_trigram_256_256"
    searches = [b for m, p, b in service.requests if p.endswith("search.post.search") and b.get("vectorQueries")]
    before = len(searches)
    assert_searches_with(s, NEW)
    searches = [b for m, p, b in service.requests if p.endswith("search.post.search") and b.get("vectorQueries")]
    assert {vq["fields"] for b in searches[before:] for vq in b["vectorQueries"]} == {s.vector_field}


# -- the command line ---------------------------------------------------------------------------------

def run(*args, env=None):
    return CliRunner().invoke(cli, list(args), env=env, catch_exceptions=False)


@pytest.fixture
def library(tmp_path):
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "pump.md").write_text("# Pump P-200\n\nGrease the bearings of pump P-200 every 2000 hours with "
                                 "lithium grease.\n", encoding="utf-8")
    (lib / "valve.md").write_text("# Valves\n\nExercise each isolation valve once a year.\n", encoding="utf-8")
    return lib


def _store_vectors(home, emb):
    s = open_store(home / "index.db", emb.id, emb.dim)
    try:
        ids = [c for d in s.list_documents() for c in (e.id for e in s.export_document(d.id).chunks)]
        return s.stats(), {c.id: c for c in s.get_chunks(ids)}, s.get_vectors(ids)
    finally:
        s.close()


def test_cli_status_names_both_ask_refuses_and_ingest_reembeds(library, sourcegate_home, monkeypatch):
    monkeypatch.setenv("SOURCEGATE_EMBEDDER", "hashing")
    assert run("ingest", str(library)).exit_code == 0
    _, before, _ = _store_vectors(sourcegate_home, OLD)
    assert before and all(c.passage_features for c in before.values())

    monkeypatch.setenv("SOURCEGATE_EMBEDDER", "hashing-256")
    command = f"sourcegate --home {sourcegate_home} ingest"
    r = run("status")
    assert r.exit_code == 0, r.output
    assert "hashing-trigram-384 (384-d)" in r.output and "hashing-trigram-256 (256-d" in r.output
    assert f"`{command}`" in r.output and "documents: 2" in r.output
    data = json.loads(run("status", "--json").output)
    assert data["embedder"] == OLD.id and data["dim"] == 384 and data["embedder_mismatch"] is True
    assert data["configured_embedder"] == {"id": NEW.id, "dim": 256, "setting": "hashing-256"}
    assert data["reembed_command"] == command

    r = run("ask", "How often are the pump bearings greased?")
    assert r.exit_code == 1 and "Traceback" not in r.output
    assert OLD.id in r.output and NEW.id in r.output and f"`{command}`" in r.output

    from sourcegate.service import SourceGate
    from sourcegate.settings import Settings

    with pytest.raises(EmbedderMismatch, match="re-embed") as e:
        SourceGate(Settings())
    assert command in str(e.value)

    r = run("ingest", str(library))
    assert r.exit_code == 0, r.output
    assert "re-embedded 2 chunks with hashing-trigram-256 (256-d), was hashing-trigram-384 (384-d)" in r.output
    assert "0 added, 0 updated, 2 unchanged" in r.output  # not embedded a second time
    st, after, vectors = _store_vectors(sourcegate_home, NEW)
    assert (st.embedder, st.dim) == (NEW.id, 256)
    assert {c: x.passage_features for c, x in after.items()} == {c: x.passage_features for c, x in before.items()}
    for cid, c in after.items():
        assert vectors[cid].shape == (256,)
        assert np.allclose(vectors[cid], NEW.embed([reembed_text(c.title, c.text)])[0], atol=1e-6)
    data = json.loads(run("status", "--json").output)
    assert data["embedder"] == NEW.id and data["embedder_mismatch"] is False and data["reembed_command"] is None
    r = run("ask", "How often are the pump bearings greased?", "--json")
    assert r.exit_code == 0 and json.loads(r.output)["evidence"][0]["doc_id"] == "pump.md"


def test_cli_ingest_without_paths_reembeds_when_the_sources_are_gone(library, sourcegate_home, monkeypatch):
    monkeypatch.setenv("SOURCEGATE_EMBEDDER", "hashing")
    assert run("ingest", str(library)).exit_code == 0
    for f in library.iterdir():
        f.unlink()
    library.rmdir()
    monkeypatch.setenv("SOURCEGATE_EMBEDDER", "hashing-256")
    r = run("ingest")
    assert r.exit_code == 0, r.output
    assert "re-embedded 2 chunks" in r.output
    st, chunks, vectors = _store_vectors(sourcegate_home, NEW)
    assert st.documents == 2 and {v.shape for v in vectors.values()} == {(256,)}
    r = run("ingest")  # nothing left to re-embed, nothing to ingest
    assert r.exit_code == 2 and "give the files or folders to ingest" in r.output


def test_cli_status_names_both_on_postgresql(postgres_url, library, monkeypatch):
    monkeypatch.setenv("SOURCEGATE_STORE", postgres_url)
    monkeypatch.setenv("SOURCEGATE_EMBEDDER", "hashing")
    assert run("ingest", str(library)).exit_code == 0
    monkeypatch.setenv("SOURCEGATE_EMBEDDER", "hashing-256")
    data = json.loads(run("status", "--json").output)
    assert data["embedder_mismatch"] is True and data["reembed_command"].startswith("sourcegate --store postgresql://")
    assert data["reembed_command"].endswith(" ingest")
    r = run("ask", "How often are the pump bearings greased?")
    assert r.exit_code == 1 and OLD.id in r.output and NEW.id in r.output
    r = run("ingest", str(library))
    assert r.exit_code == 0 and "re-embedded 2 chunks" in r.output and "2 unchanged" in r.output
    s = open_store(postgres_url, NEW.id, NEW.dim)
    try:
        assert s.stats().dim == 256
        hits = s.lexical_search("lithium grease", 1)
        cid = hits[0][0]
        c = s.get_chunks([cid])[0]
        assert s.dense_search(NEW.embed([reembed_text(c.title, c.text)])[0], 1)[0][0] == cid
    finally:
        s.close()


def test_hashing_embedders_name_their_dimension():
    assert get_embedder("hashing").id == "hashing-trigram-384" and get_embedder("hashing").dim == 384
    assert get_embedder("hashing-256").id == "hashing-trigram-256" and get_embedder("hashing-256").dim == 256
    assert get_embedder("hashing-trigram-256").dim == 256
    with pytest.raises(ValueError):
        get_embedder("hashing-2")


def test_cli_a_failing_reembed_says_the_index_is_unchanged(library, sourcegate_home, monkeypatch):
    monkeypatch.setenv("SOURCEGATE_EMBEDDER", "hashing")
    assert run("ingest", str(library)).exit_code == 0
    monkeypatch.setenv("SOURCEGATE_EMBEDDER", "hashing-256")
    with monkeypatch.context() as m:
        m.setattr(HashingEmbedder, "embed", lambda self, texts: (_ for _ in ()).throw(MemoryError("out of memory")))
        r = run("ingest", str(library))
    assert r.exit_code == 1 and "Traceback" not in r.output
    assert "re-embedding with hashing-trigram-256 failed (MemoryError: out of memory)" in r.output
    assert "still holds hashing-trigram-384 (384-d) vectors" in r.output
    assert f"`sourcegate --home {sourcegate_home} ingest` again" in r.output
    monkeypatch.setenv("SOURCEGATE_EMBEDDER", "hashing")
    r = run("ask", "How often are the pump bearings greased?", "--json")  # the old embedder still answers
    assert r.exit_code == 0 and json.loads(r.output)["evidence"][0]["doc_id"] == "pump.md"
