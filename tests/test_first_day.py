"""An operator's first day, the smaller items: the web page speaks to a person about the API key
and shows no empty decision fold after an error; per-file ingest lines come before the summary;
`status --documents` names each document's type; the terminal shows answers without Markdown
escapes; `tune` labels `after:` only a setting it suggests."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from starlette.testclient import TestClient
from test_server_fixtures import make_gate, make_settings
from test_tune import synthetic_results

from sourcegate.cli import cli, format_result
from sourcegate.evaluation.tune import tune_cmd
from sourcegate.inert import inert_markup, plain_text
from sourcegate.server.app import create_app
from sourcegate.service import AskResult

Q = "How often should I grease the bearings on pump P-200?"
PAGE = Path(__file__).resolve().parents[1] / "src" / "sourcegate" / "server" / "static" / "index.html"


def test_the_page_asks_a_person_for_the_key_in_the_box(tmp_path):
    settings = make_settings(tmp_path / "audit.jsonl", mcp_api_key="first-day-key")
    gate = make_gate(settings)
    with TestClient(create_app(settings, gate)) as client:
        web = client.post("/v1/ask", json={"query": Q}, headers={"x-sourcegate-interface": "web"})
        wrong = client.post("/v1/ask", json={"query": Q}, headers={"x-sourcegate-interface": "web", "x-api-key": "x"})
        rest = client.post("/v1/ask", json={"query": Q})
    gate.close()
    assert web.status_code == 401 and "type it in the API key box" in web.json()["error"]
    assert "header" not in web.json()["error"]
    assert wrong.status_code == 401 and "API key box" in wrong.json()["error"]
    assert rest.status_code == 401 and rest.json()["error"] == "missing API key: send it in the x-api-key header"


@pytest.mark.skipif(not (os.path.exists("/usr/bin/node") or os.path.exists("/usr/local/bin/node")),
                    reason="node is not installed")
def test_an_error_hides_the_decision_fold():
    """The page's own functions, run in node over a stub DOM: an error leaves no empty "How this
    was decided" fold; a decision shows it again."""
    page = PAGE.read_text(encoding="utf-8")
    assert 'id="technical"' in page
    funcs = [re.search(r"\nfunction " + name + r"\(.*?\n\}\n", page, re.S).group(0)
             for name in ("writing", "auditLink", "showError")]
    # the page's sign-in state: no session here (an error with a session that has ended reloads it)
    funcs.append(re.search(r"\nfunction signedIn\(\)[^\n]*\n", page).group(0))
    script = ("const els = {};\nlet session = null;\n"
              "const $ = id => (els[id] = els[id] || {hidden: false, textContent: '', className: '',"
              " classList: {toggle() {}}});\n" + "".join(funcs)
              + "$('technical').hidden = false;\nshowError('missing key');\n"
              "console.log(JSON.stringify({technical: $('technical').hidden, next: $('next-step').textContent}));\n")
    out = subprocess.run(["node", "-e", script], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == {"technical": True, "next": "missing key"}
    assert re.search(r"function renderDecision\(r\) \{\n  \$\(\"result\"\)\.hidden = false;\n"
                     r"  \$\(\"technical\"\)\.hidden = false;", page)


def test_per_file_lines_come_before_the_summary(tmp_path):
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "a.txt").write_text("Pump P-1\n\nGrease the P-1 every week.\n", encoding="utf-8")
    (lib / "b.txt").write_text("Pump P-2\n\nGrease the P-2 every month.\n", encoding="utf-8")
    (lib / "notes.xyz").write_text("x", encoding="utf-8")
    env = {**os.environ, "SOURCEGATE_HOME": str(tmp_path / "home")}

    def ingest() -> list[str]:
        # stdout and stderr into one pipe, as a terminal or a container log shows them
        r = subprocess.run([sys.executable, "-m", "sourcegate.cli", "ingest", str(lib)], env=env, cwd=tmp_path,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600)
        assert r.returncode == 0, r.stdout
        return r.stdout.splitlines()

    lines = ingest()
    summary = next(i for i, line in enumerate(lines) if " added, " in line)
    assert any(line.startswith("skipped: ") for line in lines[:summary]), lines
    (lib / "b.txt").unlink()
    lines = ingest()
    summary = next(i for i, line in enumerate(lines) if " added, " in line)
    assert any(line.startswith("vanished: b.txt") for line in lines[:summary]), lines
    assert any("--prune" in line for line in lines[summary + 1:]), lines


def test_status_documents_names_the_type(tmp_path):
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "a.md").write_text("---\nsource_type: procedure\nmodel: P-1\n---\n# Pump P-1\n\nGrease it weekly.\n",
                              encoding="utf-8")
    home = str(tmp_path / "home")
    assert CliRunner().invoke(cli, ["--home", home, "ingest", str(lib)]).exit_code == 0
    out = CliRunner().invoke(cli, ["--home", home, "status", "--documents"]).output
    header = next(line for line in out.splitlines() if line.startswith("id "))
    row = next(line for line in out.splitlines() if line.startswith("a.md "))
    assert header.split()[:3] == ["id", "status", "type"] and row.split()[:3] == ["a.md", "current", "procedure"]
    data = json.loads(CliRunner().invoke(cli, ["--home", home, "status", "--documents", "--json"]).output)
    assert data["document_list"][0]["source_type"] == "procedure"
    assert data["document_list"][0]["metadata"] == {"model": "P-1"}


def test_the_terminal_shows_the_answer_without_markdown_escapes():
    said = 'From the documents:\n- "Posted by `k.lee` on the forum: see [the manual](http://x.example/m.pdf)." [1]'
    r = AskResult(status="answer_from_evidence", guidance="g", answer=inert_markup(said), audit_id="a", model="m")
    assert "\\`" in r.answer  # inert where Markdown is rendered (MCP, REST, JSON)
    assert said in format_result(r) and "\\`" not in format_result(r)
    assert plain_text(inert_markup("a \\ b <b> ![x](y)")) == "a \\ b <b> ![x](y)"
    assert plain_text("bell\x07 and \x1b[31m") == "bell and [31m"  # nothing drives the terminal


def test_tune_says_after_only_for_a_setting_it_suggests(tmp_path, monkeypatch):
    for k in ("GATE_INJECTION_MAX", "GATE_SUPERSEDED_MAX", "GATE_CONTRADICTS_MIN", "GATE_RELEVANT_MIN", "GATE_EVIDENCE_MIN"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.chdir(tmp_path)
    results = synthetic_results()
    cases = tmp_path / "cases.jsonl"
    cases.write_text("".join(json.dumps({"query": r.case.query, "expected_status": r.case.expected_status,
                                         "expected_sources": r.case.expected_sources,
                                         "forbidden_sources": r.case.forbidden_sources, "kind": r.case.kind}) + "\n"
                             for r in results), encoding="utf-8")
    scores = tmp_path / "eval.json"
    scores.write_text(json.dumps({"cases": [r.to_json() for r in results], "metrics": {}}), encoding="utf-8")
    out = CliRunner().invoke(tune_cmd, [str(cases), "--scores", str(scores), "--folds", "1"])
    assert out.exit_code == 0, out.output
    lines = out.output.splitlines()
    assert "no change suggested" in out.output
    assert not any(line.startswith("after:") for line in lines), out.output
    assert any(line.startswith("fitted: ") and "not the setting suggested" in line for line in lines)
