"""Twins found at ingest (near-copies for another product, platform or version) and the judge's rule."""

from __future__ import annotations

import json

import numpy as np

from sourcegate.ingest.pipeline import Ingestor
from sourcegate.judges.base import JudgeInput
from sourcegate.store import open_store
from sourcegate.twins import PassageEntry, find_twins, name_terms, twin_named

UBUNTU = ("Install and configure components. This guide uses the Apache HTTP server with mod_wsgi to serve "
          "Identity service requests on port 5000. Run the following command to install the packages: "
          "apt install keystone. Edit the /etc/keystone/keystone.conf file and configure database access.")
RHEL = ("Install and configure components. This guide uses the Apache HTTP server with mod_wsgi to serve "
        "Identity service requests on port 5000. Run the following command to install the packages: "
        "dnf install openstack-keystone httpd. Edit the /etc/keystone/keystone.conf file and configure database access.")


def _entry(cid, doc, title, text, vec, version=""):
    return PassageEntry(cid, doc, title, "", version, text, np.asarray(vec, dtype=np.float32))


def test_name_terms_are_names_numbers_and_versions_not_segment_openers():
    terms = name_terms("Identity installation guide for Ubuntu › Install and configure components", "", "")
    assert "ubuntu" in terms
    assert "install" not in terms and "identity" not in terms and "components" not in terms
    assert name_terms("Documentation PostgreSQL 16 › Configuration du serveur", "", "16") >= {"16", "postgresql"}
    assert "gov.uk" in name_terms("GOV.UK Notify technical documentation › Limits")
    # a one-digit section number is not a name
    assert "6" not in name_terms("Baseline for Google Workspace › 6. Passwords")


def test_twins_found_and_told_apart_by_their_names():
    a = _entry("u#0", "ubuntu", "Identity installation guide for Ubuntu", UBUNTU, [1.0, 0.1, 0.0])
    b = _entry("r#0", "rhel", "Identity installation guide for Red Hat Enterprise Linux", RHEL, [1.0, 0.12, 0.0])
    far = _entry("x#0", "other", "Backup guide for Ubuntu", "Back up the database every night.", [0.0, 0.0, 1.0])
    twins = find_twins([a, b, far])
    assert set(twins) == {"u#0", "r#0"}
    (tu,) = twins["u#0"]
    assert tu["doc"] == "rhel" and tu["own"] == ["ubuntu"] and {"red", "hat", "linux"} <= set(tu["other"])
    # the rule: a question naming the twin's term and not the passage's own
    assert twin_named("Which command installs keystone on Red Hat?", twins["u#0"]) is not None
    assert twin_named("Which command installs keystone on Ubuntu?", twins["u#0"]) is None
    assert twin_named("Which command installs keystone?", twins["u#0"]) is None


def test_versions_are_twins_and_translations_are_not():
    fr16 = _entry("p16", "pg16", "Documentation PostgreSQL 16 › vacuum_buffer_usage_limit",
                  "La valeur par défaut est 256 kB. Les tailles valides vont de 128 kB à 16 GB.", [1, 0, 0], "16")
    fr17 = _entry("p17", "pg17", "Documentation PostgreSQL 17 › vacuum_buffer_usage_limit",
                  "La valeur par défaut est 2 MB. Les tailles valides vont de 128 kB à 16 GB.", [1, 0.01, 0], "17")
    twins = find_twins([fr16, fr17])
    # "16" is in the 17 page's text (16 GB): numbers are told apart by title and version only
    assert twins["p16"][0]["own"] == ["16"] and twins["p16"][0]["other"] == ["17"]
    en = _entry("en", "guard-en", "GC Cloud Guardrails › Protect user accounts",
                "Departments must have between 2 and 5 global administrators.", [0, 1, 0])
    fr = _entry("fr", "guard-fr", "Garde-fous du nuage GC › Protéger les comptes Utilisateurs",
                "Les ministères doivent avoir entre 2 et 5 administrateurs généraux.", [0, 1, 0.02])
    assert find_twins([en, fr]) == {}


def test_ingest_stores_twins_and_the_judge_drops_the_other_platform(tmp_path, embedder):
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "export.json").write_text(json.dumps([
        {"id": "keystone-ubuntu", "title": "Identity installation guide for Ubuntu › Install and configure",
         "text": UBUNTU},
        {"id": "keystone-rhel", "title": "Identity installation guide for Red Hat Enterprise Linux › Install and configure",
         "text": RHEL},
    ]))
    store = open_store(tmp_path / "index.db", embedder.id, embedder.dim)
    report = Ingestor(store, embedder).ingest([lib])
    assert not report.failed and report.twins_rewritten == 2
    exp = store.export_document("keystone-ubuntu")
    assert exp.features[0]["twins"][0]["doc"] == "keystone-rhel"
    # removing one twin removes the other's twins on the next run
    (lib / "export.json").write_text(json.dumps([
        {"id": "keystone-ubuntu", "title": "Identity installation guide for Ubuntu › Install and configure",
         "text": UBUNTU}]))
    Ingestor(store, embedder).ingest([lib], prune=True)
    assert "twins" not in (store.export_document("keystone-ubuntu").features[0] or {})

    from sourcegate.judges.local import LocalJudge

    store2 = open_store(tmp_path / "index2.db", embedder.id, embedder.dim)
    (lib / "export.json").write_text(json.dumps([
        {"id": "keystone-ubuntu", "title": "Identity installation guide for Ubuntu › Install and configure",
         "text": UBUNTU},
        {"id": "keystone-rhel", "title": "Identity installation guide for Red Hat Enterprise Linux › Install and configure",
         "text": RHEL},
    ]))
    Ingestor(store2, embedder).ingest([lib])
    cands = [c for d in ("keystone-ubuntu", "keystone-rhel") for c in store2.get_chunks(
        [ch.id for ch in store2.export_document(d).chunks])]
    inputs = [JudgeInput(id=c.doc_id, text=c.text, title=c.title, passage_features=c.passage_features) for c in cands]
    res = {r.id: r.scores for r in LocalJudge(embedder=embedder).judge(
        "Which command installs the keystone packages on Red Hat Enterprise Linux?", inputs).results}
    assert res["keystone-ubuntu"].contains_answer_evidence <= 0.05
    assert res["keystone-rhel"].contains_answer_evidence > res["keystone-ubuntu"].contains_answer_evidence


def test_revision_numbers_alone_make_twins_only_of_near_copies():
    """Two different procedures of one library differ by their revision numbers too: numbers alone tell
    twins apart only for near-copies, and a one-digit number never does."""
    brg = _entry("b", "brg", "Bearing lubrication P-300 (Rev. 3)", "Grease the P-300 bearings every 2,000 hours.",
                 [1.0, 0.0, 0.0], "3")
    seal = _entry("s", "seal", "Seal replacement P-300 (Rev. 1)", "Replace the P-300 seal with a new cartridge.",
                  [0.7, 0.714, 0.0], "1")
    assert find_twins([brg, seal]) == {}
    r12 = _entry("a", "r12", "Retention guide 12", "Keep logs 30 days.", [1.0, 0.0, 0.0], "12")
    r13 = _entry("c", "r13", "Retention guide 13", "Keep logs 90 days.", [0.99, 0.141, 0.0], "13")
    t = find_twins([r12, r13])
    assert t["a"][0]["own"] == ["12"] and t["a"][0]["other"] == ["13"]
    # "1,000" in a question is not the number 1 or 0
    assert twin_named("Grease every 1,000 hours?", [{"own": ["12"], "other": ["13"]}]) is None
