"""Replay of audit records under new thresholds: changed decisions, tampering, CLI."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from test_server_fixtures import make_gate, make_settings

from sourcegate.audit import read_records
from sourcegate.gate import GateThresholds
from sourcegate.replay import replay, replay_cmd

QUERIES = [
    "How often should I grease the bearings on pump P-200?",
    "P-200 bearings need grease every 500 hours, how much do I add?",
    "zzqx unrelated question about nothing at all",
]


@pytest.fixture(scope="module")
def audit_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("replay") / "audit.jsonl"
    gate = make_gate(make_settings(path))
    results = [gate.ask(q, interface="cli") for q in QUERIES]
    gate.close()
    assert [r.status for r in results] == ["answer_from_evidence", "premise_conflict", "insufficient_evidence"]
    return path


def test_same_thresholds_change_nothing(audit_file):
    report = replay(read_records(audit_file), GateThresholds())
    assert report.ok and report.replayed == 3 and report.passages > 0
    assert report.passage_changes == [] and report.answer_changes == []


def test_raised_evidence_threshold_lists_changed_decisions(audit_file):
    report = replay(read_records(audit_file), GateThresholds(evidence_min=0.85))
    assert report.ok
    # The test judge gives evidence 0.6 or 0.8: above 0.85 nothing is evidence any more.
    assert report.passage_changes and all(c.old_route == "evidence" and c.new_route == "excluded"
                                          for c in report.passage_changes)
    first = next(rec for _, rec, _ in read_records(audit_file))
    changes = [(a.audit_id, a.old_status, a.new_status) for a in report.answer_changes]
    assert (first["audit_id"], "answer_from_evidence", "insufficient_evidence") in changes


def test_cli_env_and_flags(audit_file, monkeypatch):
    runner = CliRunner()
    monkeypatch.setenv("GATE_EVIDENCE_MIN", "0.85")
    r = runner.invoke(replay_cmd, [str(audit_file), "--json"])
    assert r.exit_code == 0, r.output
    data = json.loads(r.output)
    assert data["thresholds"]["evidence_min"] == 0.85 and data["answer_changes"]
    # A flag wins over the environment.
    r = runner.invoke(replay_cmd, [str(audit_file), "--json", "--evidence-min", "0.55"])
    assert json.loads(r.output)["answer_changes"] == []
    r = runner.invoke(replay_cmd, [str(audit_file)])
    assert "answers whose status changes" in r.output and "evidence -> excluded" in r.output
    # each changed answer: its line, audit id, old and new status and the question, under a header
    first = next(rec for _, rec, _ in read_records(audit_file))
    table = r.output[r.output.index("answers whose status changes"):].splitlines()
    assert table[1].split() == ["line", "audit", "id", "was", "now", "question"]
    row = next(line for line in table if first["audit_id"] in line)
    assert row.split()[:4] == ["1", first["audit_id"], "answer_from_evidence", "insufficient_evidence"]
    assert row.endswith(QUERIES[0])
    r = runner.invoke(replay_cmd, [str(audit_file), "--evidence-min", "7"])
    assert r.exit_code != 0 and "between 0 and 1" in r.output


def test_tampered_record_is_reported_with_its_line(audit_file, tmp_path):
    lines = audit_file.read_text(encoding="utf-8").splitlines()
    rec = json.loads(lines[1])
    rec["candidates"][0]["scores"]["contradicts_query_premise"] = 0.01  # an edit that would flip the decision
    lines[1] = json.dumps(rec)
    lines.append("{broken")
    tampered = tmp_path / "tampered.jsonl"
    tampered.write_text("\n".join(lines) + "\n", encoding="utf-8")

    report = replay(read_records(tampered), GateThresholds())
    assert [(i.line, i.audit_id) for i in report.invalid] == [(2, rec["audit_id"]), (4, None)]
    assert "edited" in report.invalid[0].error
    assert report.replayed == 2

    r = CliRunner().invoke(replay_cmd, [str(tampered)])
    assert r.exit_code == 2
    assert "line 2" in r.output and "edited" in r.output


def test_registered_on_the_main_cli(audit_file):
    from sourcegate.cli import cli

    if "replay" not in cli.commands:
        pytest.skip("the replay command is registered by cli._register_commands once every module it imports exists")
    r = CliRunner().invoke(cli, ["replay", str(audit_file), "--json"])
    assert r.exit_code == 0 and json.loads(r.output)["replayed"] == 3


@pytest.mark.parametrize("crafted", [
    {"parts": ["x"]},
    {"candidates": [1]},
    {"candidates": [{"id": 1, "doc_id": "d"}]},
    {"candidates": [{"id": "c", "doc_id": "d", "scores": {"is_relevant": "high"}}]},
    {"parts": [{"question": "q", "evidence_limit": "five"}]},
    {"status": ["answer_from_evidence"]},
])
def test_replay_names_a_sealed_record_of_the_wrong_shape(crafted, tmp_path):
    from click.testing import CliRunner

    from sourcegate.audit import AuditLog
    from sourcegate.cli import cli

    path = tmp_path / "audit.jsonl"
    log = AuditLog(path)
    log.append({"audit_id": "good", "status": "insufficient_evidence", "candidates": []})
    log.append({"audit_id": "crafted", "status": "answer_from_evidence", **crafted})  # it verifies
    r = CliRunner().invoke(cli, ["replay", str(path)])
    assert r.exception is None or isinstance(r.exception, SystemExit), r.exception
    assert r.exit_code == 2 and "Traceback" not in r.output
    assert "expected shape" in r.output and "line 2" in r.output, r.output
    assert "replayed 1 of 2 records" in r.output


def test_replay_prints_no_terminal_escape_sequence_from_a_record(tmp_path):
    # a record (sealed, so it verifies) whose id and question hold escape sequences: clear screen,
    # window title, an 8-bit CSI
    from sourcegate.audit import AuditLog
    from sourcegate.cli import cli

    path = tmp_path / "audit.jsonl"
    log = AuditLog(path)
    bad = "\x1b[2J\x1b]0;owned\x07\x9b31m"
    log.append({"audit_id": "good", "status": "insufficient_evidence", "candidates": []})
    log.append({"audit_id": f"crafted{bad}", "query": f"q{bad}", "status": "answer_from_evidence", "parts": ["x"]})
    for args in (["replay", str(path)], ["replay", str(path), "--json"]):
        r = CliRunner().invoke(cli, args)
        assert "crafted" in r.output or "line 2" in r.output, r.output
        for ch in ("\x1b", "\x07", "\x9b"):
            assert ch not in r.output, (args, r.output)
