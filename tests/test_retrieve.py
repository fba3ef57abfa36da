"""Hybrid retrieval: pure fusion with numbers, and the real index for identifiers and filters."""

from __future__ import annotations

from sourcegate.crosslingual import Glossary, bridge, detect_language, load_glossary
from sourcegate.retrieve import RetrievalSettings, Retriever, fuse, is_multi_document, lexical_overlap, query_terms
from sourcegate.store import open_store

S = RetrievalSettings()


def test_fuse_weights_and_floor():
    dense = {"a": 0.80, "b": 0.70, "c": 0.05, "d": 0.05}
    overlap = {"a": 0.0, "b": 1.0, "c": 0.6, "d": 0.1}
    ranked = fuse(dense, overlap, lexical_ranked={"c", "d"}, s=S)
    ids = [cid for cid, _ in ranked]
    # b: 0.85*0.7 + 0.15*1 = 0.745 beats a: 0.68; c survives the floor through BM25 + overlap; d does not.
    assert ids == ["b", "a", "c"]
    assert abs(dict(ranked)["b"] - 0.745) < 1e-9
    only_dense = fuse(dense, overlap, set(), RetrievalSettings(dense_weight=1.0, lexical_weight=0.0))
    assert [cid for cid, _ in only_dense] == ["a", "b"]


def test_query_terms_and_overlap():
    assert query_terms("How often should I grease the bearings on pump P-200?") == ["grease", "bearings", "pump", "p-200"]
    assert lexical_overlap(["grease", "p-200"], "Greasing pump P-200 bearings") == 1.0
    assert lexical_overlap(["grease", "p-300"], "Greasing pump P-200 bearings") == 0.5
    assert lexical_overlap([], "anything") == 0.0


def test_multi_document_detection():
    assert is_multi_document("What are the grease intervals for the P-200 and the P-300 pumps?")
    assert is_multi_document("Compare P-200 with P-300")
    assert not is_multi_document("How often should I grease the bearings on pump P-200?")


def test_identifier_questions_find_their_procedure(demo_index, embedder):
    store = open_store(demo_index, embedder.id, embedder.dim)
    r = Retriever(store, embedder, S)
    cands, timings = r.retrieve("E-47")
    assert cands[0].doc_id == "PROC-VFD-E47"
    assert set(timings) == {"embed_query", "search", "rerank"}
    cands, _ = r.retrieve("How often should the P-300 upper motor bearing be greased?")
    assert cands[0].doc_id == "PROC-P300-BRG"
    assert len(cands) <= S.candidates
    # Archived by metadata: never a candidate by default, reachable on request.
    q = "P-300 packing rings braided graphite gland nuts"
    assert "PROC-P300-SEAL-R1" not in {c.doc_id for c in r.retrieve(q)[0]}
    r2 = Retriever(store, embedder, RetrievalSettings(include_archived=True))
    assert "PROC-P300-SEAL-R1" in {c.doc_id for c in r2.retrieve(q)[0]}
    store.close()


def test_language_detection():
    assert detect_language("Faut-il consigner la P-200 avant d'intervenir sur les roulements ?") == "fr"
    assert detect_language("How often should I grease the bearings?") == "en"
    assert detect_language("Wie oft muss die Pumpe geschmiert werden?") == "de"
    assert detect_language("P-200") is None


def test_bridge_adds_library_terms_only_for_other_languages():
    b = bridge("Faut-il consigner la P-200 avant d'intervenir sur les roulements ?")
    assert b.language == "fr" and "lockout" in b.added_terms and "bearing" in b.added_terms
    assert b.text.startswith("Faut-il consigner") and "lockout" in b.text
    assert not bridge("Do I need lockout for bearing work?").bridged


def test_user_glossary_extends_the_default(tmp_path):
    extra = tmp_path / "g.tsv"
    extra.write_text("en\tfr\nclarifier*\tdécanteur*\n", encoding="utf-8")
    g = load_glossary(str(extra))
    assert "clarifier" in g.bridge_terms("Comment nettoyer le décanteur ?", "fr", "en")
    bad = tmp_path / "bad.tsv"
    bad.write_text("en\tfr\nonly-one-column\n", encoding="utf-8")
    import pytest

    with pytest.raises(ValueError, match="bad.tsv:2"):
        Glossary.load(bad)


def test_french_question_reaches_the_english_lockout_procedure(demo_index, embedder):
    store = open_store(demo_index, embedder.id, embedder.dim)
    r = Retriever(store, embedder, S)
    q = "Faut-il consigner la P-200 avant d'intervenir sur les roulements ?"
    bridged = bridge(q)
    docs = [c.doc_id for c in r.retrieve(q, bridged=bridged.text)[0]]
    assert "PROC-LOTO-01" in docs[:6]
    store.close()
