"""Hybrid retrieval: pure fusion with numbers, and the real index for identifiers and filters."""

from __future__ import annotations

from sourcegate.crosslingual import Glossary, bridge, detect_language, load_glossary
import json

from sourcegate.retrieve import (RetrievalSettings, Retriever, fuse, is_multi_document, lexical_overlap, named_versions,
                                 query_terms)
from sourcegate.store import SearchFilters, open_store

S = RetrievalSettings()


def test_fuse_weights_and_floor():
    dense = {"a": 0.80, "b": 0.70, "c": 0.05, "d": 0.05}
    overlap = {"a": 0.0, "b": 1.0, "c": 0.6, "d": 0.1}
    ranked = fuse(dense, overlap, {"c": 4.0, "d": 8.0}, s=S)
    ids = [cid for cid, _ in ranked]
    # b: 0.85*0.7 + 0.15*1 = 0.745 beats a: 0.68; c survives the floor through BM25 + overlap
    # (0.85*0.05 + 0.15*0.6 + 0.08*4/8 = 0.1725); d, the best BM25 hit, shares too few terms.
    assert ids == ["b", "a", "c"]
    assert abs(dict(ranked)["b"] - 0.745) < 1e-9
    assert abs(dict(ranked)["c"] - 0.1725) < 1e-9
    only_dense = fuse(dense, overlap, {}, RetrievalSettings(dense_weight=1.0, lexical_weight=0.0, bm25_weight=0.0))
    assert [cid for cid, _ in only_dense] == ["a", "b"]


def test_the_bm25_score_lifts_the_passage_that_holds_the_rare_terms():
    # a and b are as close by meaning and share as many of the question's words; BM25 ranks b far
    # above a (b holds the rare ones): b goes first, and without the BM25 weight a would.
    dense, overlap = {"a": 0.61, "b": 0.60}, {"a": 0.5, "b": 0.5}
    assert [c for c, _ in fuse(dense, overlap, {"a": 1.0, "b": 9.0}, S)] == ["b", "a"]
    assert [c for c, _ in fuse(dense, overlap, {"a": 1.0, "b": 9.0}, RetrievalSettings(bm25_weight=0.0))] == ["a", "b"]


def test_named_versions():
    versions = {"1.0", "2.1", "13", "30", "7.0.1"}
    assert named_versions("Under guardrails v1.0, which controls applied?", versions) == ["1.0"]
    assert named_versions("In version 1.0 of the guidance, who signs off?", versions) == ["1.0"]
    assert named_versions("Vitam 2.1 : quel fichier modifier ?", versions) == ["2.1"]
    assert named_versions("Dans la version 13, que vaut le paramètre ?", versions) == ["13"]
    assert named_versions("Dans PostgreSQL 13, que vaut le paramètre ?", versions) == []  # a name, not a version word
    assert named_versions("Upgrading from 7.0.1: what changes?", versions) == ["7.0.1"]
    # a whole number that is a count, not a version; versions of other numbers; numbers inside others
    assert named_versions("Prometheus keeps 30 days of metrics: how do I keep 13?", versions) == []
    assert named_versions("What changed in 12.1 and 2.10?", versions) == []
    assert named_versions("In version 1.0 ...", set()) == []


def _versioned_library(tmp_path, embedder):
    export = [
        {"id": "GUARD-03-v1", "title": "Guardrail 3: cloud console access", "version": "1.0", "status": "archived",
         "text": "Cloud console access. Implement a process for the privileged access review; the departmental "
                 "CIO must approve the process for performing the review every quarter."},
        {"id": "GUARD-03-v2", "title": "Guardrail 3: secure endpoints", "version": "2.0", "status": "current",
         "text": "Secure endpoints. Implement increased levels of protection for management interfaces; "
                 "administrators connect from managed devices only."},
        {"id": "GUARD-01-v2", "title": "Guardrail 1: protect user accounts", "version": "2.0", "status": "current",
         "text": "Protect user accounts and identities with multi-factor authentication for every privileged account."},
        {"id": "NOTES", "title": "Release notes", "status": "current",
         "text": "Version 2.0 of the guardrails replaced version 1.0 in 2023; the numbering of several guardrails changed."},
    ]
    src = tmp_path / "guardrails.json"
    src.write_text(json.dumps(export))
    from sourcegate.ingest.pipeline import Ingestor

    store = open_store(tmp_path / "index.db", embedder.id, embedder.dim)
    assert not Ingestor(store, embedder, workers=1).ingest([src]).failed
    return store


def test_a_question_naming_an_archived_version_reads_that_version(tmp_path, embedder):
    store = _versioned_library(tmp_path, embedder)
    r = Retriever(store, embedder, S)
    assert r.archived_versions() == {"1.0"}
    named = {c.doc_id: c for c in r.retrieve("Under guardrails v1.0, who had to approve the console access review?")[0]}
    assert "GUARD-03-v1" in named and named["GUARD-03-v1"].status == "archived"
    # the same question without the version, or with filters of its own, keeps archived revisions out
    assert "GUARD-03-v1" not in {c.doc_id for c in r.retrieve("Who had to approve the console access review?")[0]}
    own = r.retrieve("Under guardrails v1.0, who had to approve the console access review?",
                     filters=SearchFilters(doc_id_prefix="GUARD"))[0]
    assert own and "GUARD-03-v1" not in {c.doc_id for c in own}
    off = Retriever(store, embedder, RetrievalSettings(named_versions=False))
    assert "GUARD-03-v1" not in {c.doc_id for c in off.retrieve("Under guardrails v1.0, who approves the review?")[0]}
    store.close()


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


def test_an_archived_source_says_so_in_the_source_list():
    from sourcegate.answer import citation, source_line
    from sourcegate.models import Candidate

    old = Candidate(id="g#0", doc_id="GUARD-03-v1", title="Guardrail 3", text="…", status="archived", version="1.0")
    new = Candidate(id="h#0", doc_id="GUARD-03-v2", title="Guardrail 3", text="…", status="current", version="2.0")
    c_old, c_new = citation(1, old), citation(2, new)
    assert source_line(1, c_old.title, c_old.doc_id, note=c_old.note) == \
        "[1] Guardrail 3 (GUARD-03-v1; archived revision, version 1.0)"
    assert source_line(2, c_new.title, c_new.doc_id, note=c_new.note) == "[2] Guardrail 3 (GUARD-03-v2)"
