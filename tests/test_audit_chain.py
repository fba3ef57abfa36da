"""The audit log's hash chain: every kind of tampering is named at its line, by `audit verify`,
by `replay` (which refuses a broken chain) and by the indexed lookup behind /v1/audit/{id}."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from sourcegate.audit import (GENESIS, HASH_FIELD, PREV_FIELD, AuditLog, AuditRecordDamaged, canonical_json,
                              record_hash, seal, verify_chain)
from sourcegate.cli import cli

KEY = b"audit-test-key"
SCORES = {"is_relevant": 0.9, "contains_answer_evidence": 0.9, "contradicts_query_premise": 0.0,
          "contains_prompt_injection": 0.0, "is_superseded": 0.0}


def _write_log(path: Path, n: int = 6, key: bytes | None = None) -> list[dict]:
    log = AuditLog(path, key)
    return [log.append({"audit_id": f"a{i}", "status": "answer_from_evidence", "answer": f"answer {i}",
                        "candidates": [{"id": f"c{i}", "doc_id": "d", "route": "evidence",
                                        "scores": dict(SCORES)}]})
            for i in range(n)]


def _lines(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines()


def _rewrite(path: Path, lines: list[bytes]) -> None:
    path.write_bytes(b"\n".join(lines) + b"\n")


def _verify(path: Path, *args: str, key: str | None = None):
    env = {"AUDIT_HMAC_KEY": key} if key else {}
    return CliRunner().invoke(cli, ["audit", "verify", str(path), *args], env=env)


@pytest.fixture
def log_path(tmp_path):
    path = tmp_path / "audit.jsonl"
    _write_log(path)
    return path


def test_an_intact_log_verifies_and_prints_its_anchor(log_path):
    records = [json.loads(x) for x in _lines(log_path)]
    assert [r["seq"] for r in records] == [1, 2, 3, 4, 5, 6]
    assert records[0][PREV_FIELD] == GENESIS
    r = _verify(log_path)
    assert r.exit_code == 0, r.output
    assert "intact: 6 records" in r.output and records[-1][HASH_FIELD] in r.output
    assert "without AUDIT_HMAC_KEY" in r.output  # the limit of an unkeyed chain is said


def test_an_edit_that_recomputes_the_hash_is_found_at_the_next_line(log_path):
    lines = _lines(log_path)
    rec = json.loads(lines[2])
    rec["status"] = "insufficient_evidence"
    lines[2] = canonical_json(seal(rec)).encode()  # the record's own hash is correct again
    _rewrite(log_path, lines)
    r = _verify(log_path)
    assert r.exit_code == 2
    assert "BROKEN at line 4 (a3)" in r.output and "line before" in r.output


def test_an_edit_without_rehash_is_found_at_its_own_line(log_path):
    lines = _lines(log_path)
    lines[2] = lines[2].replace(b"answer 2", b"answer X")
    _rewrite(log_path, lines)
    r = _verify(log_path)
    assert r.exit_code == 2 and "BROKEN at line 3 (a2)" in r.output and "edited" in r.output


@pytest.mark.parametrize("tamper, line", [
    (lambda ls: ls[:3] + ls[4:], 4),                      # a deletion
    (lambda ls: ls[:2] + [ls[3], ls[2]] + ls[4:], 3),      # a reordering
    (lambda ls: ls[:3] + [ls[2]] + ls[3:], 4),             # a duplicated line
    (lambda ls: ls[1:], 1),                                # the head removed
])
def test_deletion_reordering_duplication_are_named(log_path, tamper, line):
    _rewrite(log_path, tamper(_lines(log_path)))
    r = _verify(log_path)
    assert r.exit_code == 2
    assert f"BROKEN at line {line}" in r.output, r.output


def test_a_deletion_says_how_many_records_went(log_path):
    lines = _lines(log_path)
    _rewrite(log_path, lines[:2] + lines[4:])
    r = _verify(log_path)
    assert "BROKEN at line 3 (a4)" in r.output and "2 record(s) removed" in r.output


def test_an_inserted_sealed_record_is_found(log_path):
    lines = _lines(log_path)
    forged = seal({"audit_id": "forged", "status": "answer_from_evidence", "seq": 3,
                   PREV_FIELD: json.loads(lines[2])[PREV_FIELD]})
    _rewrite(log_path, lines[:2] + [canonical_json(forged).encode()] + lines[2:])
    r = _verify(log_path)
    # The forgery links to line 2 perfectly; the record it pushed down no longer links to it.
    assert r.exit_code == 2 and "BROKEN at line 4 (a2)" in r.output


def test_a_bad_byte_is_named_and_nothing_raises(log_path):
    lines = _lines(log_path)
    lines[1] = lines[1].replace(b"answer 1", b"answer \xff")
    _rewrite(log_path, lines)
    r = _verify(log_path)
    assert r.exit_code == 2 and r.exception is None or isinstance(r.exception, SystemExit)
    assert "BROKEN at line 2" in r.output and "invalid UTF-8" in r.output
    # The index still finds the records after it, and names the damaged one.
    log = AuditLog(log_path)
    assert log.find("a4")["answer"] == "answer 4"
    with pytest.raises(AuditRecordDamaged, match="invalid UTF-8"):
        log.find("a1")
    # Replay refuses the chain, then with --ignore-chain replays what it can and names the line.
    r = CliRunner().invoke(cli, ["replay", str(log_path)])
    assert r.exit_code == 2 and "refusing to replay" in r.output and "Traceback" not in r.output
    r = CliRunner().invoke(cli, ["replay", str(log_path), "--ignore-chain"])
    assert r.exit_code == 2 and "line 2" in r.output and "invalid UTF-8" in r.output
    assert "replayed 5 of 6 records" in r.output


def test_replay_refuses_a_broken_chain_unless_told(log_path):
    lines = _lines(log_path)
    _rewrite(log_path, lines[:3] + lines[4:])
    r = CliRunner().invoke(cli, ["replay", str(log_path)])
    assert r.exit_code == 2 and "BROKEN at line 4" in r.output and "--ignore-chain" in r.output
    assert "replayed" not in r.output
    r = CliRunner().invoke(cli, ["replay", str(log_path), "--ignore-chain"])
    # Replayed, but the break is said and the exit code says it too.
    assert r.exit_code == 2 and "replayed 5 of 5 records" in r.output and "BROKEN at line 4" in r.output


def test_replay_ignoring_the_chain_still_names_an_edited_resealed_record(log_path):
    # An unkeyed record edited and resealed verifies on its own: only the chain shows it.
    lines = _lines(log_path)
    rec = json.loads(lines[2])
    rec["status"] = "insufficient_evidence"
    lines[2] = canonical_json(seal(rec)).encode()
    _rewrite(log_path, lines)
    r = CliRunner().invoke(cli, ["replay", str(log_path), "--ignore-chain"])
    assert r.exit_code == 2, r.output
    assert "BROKEN at line 4" in r.output and "hash chain" in r.output and "is broken" in r.output
    r = CliRunner().invoke(cli, ["replay", str(log_path), "--ignore-chain", "--json"])
    assert r.exit_code == 2 and '"ok": false' in r.output


def test_with_a_key_every_record_must_be_keyed(tmp_path):
    # A log rewritten (or written) without the key does not verify under the key, and replay refuses it.
    path = tmp_path / "audit.jsonl"
    _write_log(path)
    r = _verify(path, key=KEY.decode())
    assert r.exit_code == 2 and "BROKEN at line 1 (a0)" in r.output and "plain SHA-256" in r.output
    assert "intact" not in r.output
    r = CliRunner().invoke(cli, ["replay", str(path)], env={"AUDIT_HMAC_KEY": KEY.decode()})
    assert r.exit_code == 2 and "refusing to replay" in r.output
    # A forged plain-SHA-256 record appended to a live keyed log is named at its line.
    keyed = tmp_path / "keyed.jsonl"
    _write_log(keyed, n=3, key=KEY)
    lines = _lines(keyed)
    last = json.loads(lines[-1])
    forged = seal({"audit_id": "forged", "status": "answer_from_evidence", "seq": last["seq"] + 1,
                   PREV_FIELD: "sha256:" + __import__("hashlib").sha256(lines[-1]).hexdigest()})
    _rewrite(keyed, lines + [canonical_json(forged).encode()])
    r = _verify(keyed, key=KEY.decode())
    assert r.exit_code == 2 and "BROKEN at line 4 (forged)" in r.output and "plain SHA-256" in r.output


def test_a_keyed_chain_cannot_be_resealed_without_the_key(tmp_path):
    path = tmp_path / "audit.jsonl"
    _write_log(path, key=KEY)
    assert json.loads(_lines(path)[0])[HASH_FIELD].startswith("hmac-sha256:")
    assert _verify(path, key=KEY.decode()).exit_code == 0
    # Without the key, verify says what it needs rather than calling the log intact.
    r = _verify(path)
    assert r.exit_code == 2 and "AUDIT_HMAC_KEY" in r.output
    # A forger without the key rewrites the last record and reseals it with plain SHA-256 ...
    lines = _lines(path)
    rec = json.loads(lines[-1])
    rec["status"] = "insufficient_evidence"
    lines[-1] = canonical_json(seal(rec)).encode()
    _rewrite(path, lines)
    r = _verify(path, key=KEY.decode())
    assert r.exit_code == 2 and "BROKEN at line 6 (a5)" in r.output
    # ... or with a wrong key: found as well.
    rec[HASH_FIELD] = record_hash(rec, b"wrong key")
    lines[-1] = canonical_json(rec).encode()
    _rewrite(path, lines)
    assert "BROKEN at line 6" in _verify(path, key=KEY.decode()).output


def test_a_truncated_tail_is_found_with_an_anchor(log_path):
    anchor = json.loads(_lines(log_path)[-1])[HASH_FIELD]
    assert _verify(log_path, "--anchor", anchor).exit_code == 0
    _rewrite(log_path, _lines(log_path)[:-2])
    assert _verify(log_path).exit_code == 0  # the limit: a cut tail leaves a valid chain
    r = _verify(log_path, "--anchor", anchor)
    assert r.exit_code == 2 and "truncated or rewritten" in r.output


def test_a_log_written_before_the_chain_says_where_the_chain_starts(tmp_path):
    path = tmp_path / "audit.jsonl"
    old = [seal({"audit_id": f"old{i}", "status": "insufficient_evidence"}) for i in range(3)]
    path.write_text("".join(canonical_json(r) + "\n" for r in old), encoding="utf-8")
    log = AuditLog(path)
    log.append({"audit_id": "new0", "status": "answer_from_evidence"})
    log.append({"audit_id": "new1", "status": "answer_from_evidence"})
    r = _verify(path)
    assert r.exit_code == 0, r.output
    assert "lines 1-3 were written before the log was chained" in r.output
    assert "the chain starts at line 4" in r.output
    # A record without chain fields inside the chain is an insertion.
    with path.open("a", encoding="utf-8") as f:
        f.write(canonical_json(seal({"audit_id": "sneaked", "status": "answer_from_evidence"})) + "\n")
    r = _verify(path)
    assert r.exit_code == 2 and "BROKEN at line 6 (sneaked)" in r.output


def test_fields_added_by_other_code_are_carried_by_the_chain(tmp_path):
    path = tmp_path / "audit.jsonl"
    log = AuditLog(path)
    log.append({"audit_id": "x1", "status": "answer_from_evidence", "missing": ["the P-300"],
                "parts": [{"text": "the P-200", "status": "answer_from_evidence"}]})
    log.append({"audit_id": "x2", "status": "insufficient_evidence"})
    lines = _lines(path)
    rec = json.loads(lines[0])
    rec["missing"] = []
    lines[0] = canonical_json(rec).encode()
    _rewrite(path, lines)
    assert "BROKEN at line 1 (x1)" in _verify(path).output


def test_a_torn_last_line_stays_apart_from_the_next_record(log_path):
    with log_path.open("ab") as f:
        f.write(b'{"audit_id": "torn", "sta')  # a writer killed mid-line
    AuditLog(log_path).append({"audit_id": "after", "status": "answer_from_evidence"})
    lines = _lines(log_path)
    assert json.loads(lines[-1])["audit_id"] == "after"
    r = _verify(log_path)
    assert "BROKEN at line 7" in r.output and "invalid JSON" in r.output
    assert AuditLog(log_path).find("after")["audit_id"] == "after"


def test_the_index_follows_appends_and_a_replaced_log(tmp_path):
    path = tmp_path / "audit.jsonl"
    log = AuditLog(path)
    _write_log(path, n=3)
    assert log.find("a2")["answer"] == "answer 2"
    assert log.index.path.exists()
    # Another writer appends: the index picks the new lines up from where it stopped.
    AuditLog(path).append({"audit_id": "later", "status": "premise_conflict"})
    assert log.find("later")["status"] == "premise_conflict"
    # The log is replaced by another one: the stale index is rebuilt, not trusted.
    path.unlink()
    AuditLog(path).append({"audit_id": "fresh", "status": "insufficient_evidence"})
    assert log.find("a2") is None and log.find("fresh")["status"] == "insufficient_evidence"
    # A deleted index is rebuilt.
    log.index.path.unlink()
    assert log.find("fresh") is not None
