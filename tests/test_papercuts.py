"""A new user's first hour, the rough edges: a judge without its key, a degraded answer that looked
like success, commands that created an index they then refused, documents that vanished from the
folder but stayed answerable, test questions mixed into the users' audit log, and the README's
MCP client snippet run as written."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner
from test_cli import _recorded
from test_server_fixtures import make_gate, make_settings, running_server

from conftest import DEMO_CORPUS
from sourcegate.cli import EXIT_DEGRADED, cli
from sourcegate.server.app import create_app

Q = "How often should I grease the bearings on pump P-200?"
README = Path(__file__).resolve().parents[1] / "README.md"


def run(*args: str):
    return CliRunner().invoke(cli, list(args))


def _ingest_demo() -> None:
    r = run("ingest", str(DEMO_CORPUS))
    assert r.exit_code == 0, r.output


def test_a_judge_without_its_key_is_named_in_one_line_and_fails(sourcegate_home):
    _ingest_demo()
    for args in (["--judge", "typesafe", "ask", Q], ["ask", Q, "--judge", "typesafe", "--json"],
                 ["--judge", "typesafe", "serve"], ["--judge", "typesafe", "mcp"]):
        r = run(*args)
        assert r.exit_code == 1, (args, r.output)
        lines = [line for line in r.output.splitlines() if line.strip()]
        assert len(lines) == 1 and "TYPESAFE_API_KEY" in lines[0], (args, r.output)
    r = run("--judge", "llm", "ask", Q)
    assert r.exit_code == 1 and "LLM_JUDGE_BASE_URL" in r.output, r.output
    # Nothing was asked, so nothing was audited.
    assert not (sourcegate_home / "audit.jsonl").exists()


def test_a_degraded_answer_exits_non_zero(sourcegate_home, monkeypatch):
    _ingest_demo()
    monkeypatch.setenv("SOURCEGATE_JUDGE", "recorded")
    monkeypatch.setenv("SOURCEGATE_RECORDED_SCORES", str(sourcegate_home / "no-such-scores.jsonl"))
    r = run("ask", Q, "--json")
    assert r.exit_code == EXIT_DEGRADED == 3, r.output
    assert json.loads(r.stdout)["degraded"] is True
    # The warning names what failed, not only its type.
    assert "no-such-scores.jsonl" in r.stderr, r.stderr
    # A judged abstention is not degraded and exits 0.
    scores = _recorded(sourcegate_home, Q, {})
    monkeypatch.setenv("SOURCEGATE_RECORDED_SCORES", str(scores))
    r = run("ask", Q, "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["status"] == "insufficient_evidence" and out["degraded"] is False


def test_refused_commands_create_nothing(tmp_path, sourcegate_home):
    for args in (["ask", Q], ["status"], ["status", "--json"], ["--judge", "typesafe", "ask", Q],
                 ["ingest", str(tmp_path / "no-such-folder")], ["--store", "sqlite:///elsewhere.db", "ask", Q]):
        r = run(*args)
        assert r.exit_code == 1, (args, r.output)
    assert not sourcegate_home.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == [], list(tmp_path.iterdir())
    r = run("ask", Q)
    assert "no index at" in r.output and "holds no documents" not in r.output


def test_ingest_names_vanished_documents_and_hints_at_prune(tmp_path):
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "a.md").write_text("# Pump Q-1\n\nGrease pump Q-1 every 100 hours.\n", encoding="utf-8")
    (lib / "b.md").write_text("# Hydrant H-2\n\nFlush hydrant H-2 once a year.\n", encoding="utf-8")
    assert run("ingest", str(lib)).exit_code == 0
    (lib / "b.md").unlink()
    r = run("ingest", str(lib))
    assert r.exit_code == 0, r.output
    assert "0 removed" in r.stdout
    vanished = [line for line in r.stderr.splitlines() if line.startswith("vanished: ")]
    assert len(vanished) == 1 and vanished[0].startswith("vanished: b.md: ") and "still indexed" in vanished[0]
    assert f"ingest {lib} --prune` to remove it" in r.stderr, r.stderr
    status = json.loads(run("status", "--json").stdout)
    assert status["documents"] == 2  # still there until pruned
    r = run("ingest", str(lib), "--prune")
    assert "1 removed" in r.stdout and "vanished" not in r.stderr
    assert json.loads(run("status", "--json").stdout)["documents"] == 1


def test_eval_and_tune_write_their_own_audit_file(tmp_path, sourcegate_home, monkeypatch):
    _ingest_demo()
    scores = _recorded(tmp_path, Q, {"PROC-P200-BRG-R2": {"is_relevant": 0.97, "contains_answer_evidence": 0.95}})
    monkeypatch.setenv("SOURCEGATE_JUDGE", "recorded")
    monkeypatch.setenv("SOURCEGATE_RECORDED_SCORES", str(scores))
    cases = tmp_path / "cases.jsonl"
    cases.write_text(json.dumps({"query": Q, "expected_status": "answer_from_evidence",
                                 "expected_sources": ["PROC-P200-BRG-R2"]}) + "\n", encoding="utf-8")
    assert run("ask", Q).exit_code == 0
    r = run("eval", str(cases))
    assert r.exit_code == 0, r.output
    r = run("tune", str(cases), "--folds", "0")
    assert r.exit_code == 0, r.output
    users = [json.loads(line) for line in (sourcegate_home / "audit.jsonl").read_text().splitlines()]
    tests = [json.loads(line) for line in (sourcegate_home / "audit.eval.jsonl").read_text().splitlines()]
    assert [rec["interface"] for rec in users] == ["cli"]
    assert [rec["interface"] for rec in tests] == ["eval", "eval"]
    # Both logs are whole hash chains of their own.
    for name in ("audit.jsonl", "audit.eval.jsonl"):
        assert run("audit", "verify", str(sourcegate_home / name)).exit_code == 0


def test_the_web_page_does_not_suggest_the_demo_question(tmp_path):
    from starlette.testclient import TestClient

    settings = make_settings(tmp_path / "audit.jsonl")
    gate = make_gate(settings)
    with TestClient(create_app(settings, gate)) as client:
        page = client.get("/").text
    gate.close()
    placeholder = re.search(r'id="query"[^>]*placeholder="([^"]*)"', page).group(1)
    assert placeholder and "P-200" not in placeholder


def test_the_readme_mcp_client_snippet_runs_as_written(tmp_path):
    text = README.read_text(encoding="utf-8")
    snippet = next(block for block in re.findall(r"```python\n(.*?)```", text, re.S) if "streamable_http_client" in block)
    snippet = "\n".join(line[2:] if line.startswith("  ") else line for line in snippet.splitlines())
    settings = make_settings(tmp_path / "audit.jsonl", mcp_api_key="readme-key")
    gate = make_gate(settings)
    try:
        with running_server(create_app(settings, gate)) as base:
            code = snippet.replace("http://127.0.0.1:8000/mcp", f"{base}/mcp").replace('"change-me"', '"readme-key"')
            out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    finally:
        gate.close()
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "answer_from_evidence"
    # the README and the pages it moved its sections to (docs/)
    documented = text + "".join(p.read_text(encoding="utf-8") for p in sorted((README.parent / "docs").glob("*.md")))
    for words in ("status --json", "Chromium", "exits 0", "audit.eval.jsonl"):
        assert words in documented, words
