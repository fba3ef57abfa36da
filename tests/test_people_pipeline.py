"""The people's-questions pipeline: passages built from a pinned git snapshot, and the checker that
guards every part of the shipped data (format, labels, paraphrase, audit)."""

from __future__ import annotations

import json
import subprocess

import pytest

from training.people import check, common, convert, passages

DOC_MD = """---
title: ignored front matter
---
# Pump P-9 manual

## Lubrication

Grease the P-9 bearings every 1,500 operating hours with 12 g of lithium grease. Never mix two grease types in one
bearing, and wipe the nipple before you connect the gun. The relief plug stays open for ten minutes of running.

| Part | Interval |
|---|---|
| Bearing | 1,500 h |
| Seal | 8,000 h |
"""
DOC_ADOC = """= Drive D-4 guide
:product: D-4

== Fault codes

The D-4 stops with fault E-12 when the DC bus voltage rises above 820 V during braking; lengthen the deceleration
ramp before you reset it. A reset is refused while the bus is still charged, and the display shows BUSY meanwhile.

[cols="1,2"]
|===
|Code |Meaning
|E-12 |DC bus overvoltage
|E-13 |DC bus undervoltage
|===

NOTE: Call the on-call engineer after three resets in one hour. <<faults,See the fault list>> for the others.
"""


@pytest.fixture()
def snapshot(tmp_path):
    repo = tmp_path / "snap" / "acme+manuals"
    repo.mkdir(parents=True)
    run = lambda *a: subprocess.run(["git", *a], cwd=repo, check=True, capture_output=True)  # noqa: E731
    run("init", "-q")
    (repo / "docs").mkdir()
    (repo / "docs" / "p9.md").write_text(DOC_MD, encoding="utf-8")
    (repo / "docs" / "d4.adoc").write_text(DOC_ADOC, encoding="utf-8")
    (repo / "CHANGES.md").write_text("# Changes\n\nnothing\n", encoding="utf-8")
    run("add", "-A")
    run("-c", "user.name=t", "-c", "user.email=t@example.org", "commit", "-qm", "docs")
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True, check=True).stdout.strip()
    return tmp_path / "snap", commit


def _cfg(commit, fmt, include):
    return {"key": "acme", "name": "Acme manuals", "repo": "acme/manuals", "genre": "equipment manual",
            "licence": "CC0-1.0", "licence_file": "LICENSE", "attribution": "Acme", "fmt": fmt, "lang": "en",
            "versions": [{"label": "1.0", "commit": commit, "status": "current", "only": None}],
            "include": include, "exclude": ["CHANGES.md"]}


def test_passages_come_from_the_pinned_commit_in_the_corpus_format(snapshot):
    snaps, commit = snapshot
    rows = passages.build_source(_cfg(commit, "md", ["docs/*.md"]), str(snaps))
    assert rows, "no passage built"
    r = rows[0]
    assert set(r) == {"id", "doc_id", "title", "text", "url", "version", "lang", "licence", "source", "status"}
    assert r["id"] == "acme/docs-p9.md@1.0#001" and r["doc_id"] == "acme/docs/p9.md"
    assert r["url"] == f"https://github.com/acme/manuals/blob/{commit}/docs/p9.md" and r["status"] == "current"
    text = "\n".join(x["text"] for x in rows)
    assert "front matter" not in text and "Bearing | 1,500 h" in text and "**" not in text
    assert rows == passages.build_source(_cfg(commit, "md", ["docs/*.md"]), str(snaps))  # deterministic


def test_asciidoc_reads_as_text(snapshot):
    snaps, commit = snapshot
    rows = passages.build_source(_cfg(commit, "adoc", ["docs/*.adoc"]), str(snaps))
    text = "\n".join(x["text"] for x in rows)
    assert "E-12 | DC bus overvoltage" in text and "Note: Call the on-call engineer" in text
    assert "See the fault list" in text and "<<" not in text and "|===" not in text and ":product:" not in text


def test_a_missing_snapshot_or_commit_says_what_to_do(snapshot, tmp_path):
    snaps, commit = snapshot
    with pytest.raises(SystemExit, match="no snapshot of acme/other"):
        passages.build_source(dict(_cfg(commit, "md", ["docs/*.md"]), repo="acme/other"), str(snaps))
    with pytest.raises(SystemExit, match="not in the snapshot"):
        passages.build_source(_cfg("0" * 40, "md", ["docs/*.md"]), str(snaps))


def test_the_checker_finds_what_a_writer_gets_wrong():
    p = {"x/a.md@1#001": {"doc_id": "x/a.md", "status": "current",
                          "text": "Grease the P-9 bearings every 1,500 operating hours."},
         "x/a.md@0#001": {"doc_id": "x/a.md", "status": "archived", "text": "Grease every 500 hours."}}
    good = {"id": "x-1", "source": "x", "query": "p9 bearing lube interval", "lang": "en", "kind": "factual",
            "expected_status": "answer_from_evidence", "expected_sources": ["x/a.md@1#001"], "relevant_sources": [],
            "forbidden_sources": ["x/a.md@0#001"], "answer": "every 1,500 operating hours"}
    assert check.check_question(dict(good), "w", "x", p, set(), set()) == []
    bad = dict(good, answer="every 2,000 hours", forbidden_sources=["x/a.md@1#001"], lang="de")
    errs = " ".join(check.check_question(bad, "w", "x", p, set(), set()))
    assert "not text of an expected source" in errs and "both expected_sources and forbidden_sources" in errs
    assert "lang must be en or fr" in errs
    premise = dict(good, kind="false_premise", expected_status="premise_conflict")
    assert "needs 'premise'" in " ".join(check.check_question(premise, "w", "x", p, set(), set()))
    assert check.overlap("Grease the P-9 bearings every 1,500 operating hours?", p["x/a.md@1#001"]["text"]) == 1.0
    assert check.overlap("p9 lube interval", p["x/a.md@1#001"]["text"]) < 0.55


def test_every_shipped_part_passes_its_checks_and_its_audit():
    """The data in training/people: every part well formed, paraphrased, on a source with a licence
    recorded, audited on at least 10 % of its questions with at most 3 % wrong labels in the last round."""
    assert common.people_sources(), "no part shipped"
    for key, cfg in common.source_configs().items():
        for field in ("licence", "licence_file", "attribution", "repo", "versions"):
            assert cfg.get(field), f"sources/{key}.json has no {field}"
        assert all(len(v["commit"]) == 40 for v in cfg["versions"]), f"{key}: pin full commits"
    assert check.main([]) == 0
