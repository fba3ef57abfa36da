"""Trust tiers and conflicts beside an answer, on a lab library built in every format
(tests/lab_library.py): a forum note never outweighs the current procedure that contradicts the
question; evidence that states another value is a disagreement; a conflict beside an answer is shown
in the JSON result, the CLI's plain output, the MCP text and the web page; `replay` with another tier
setting re-decides.

The policy tests use `LabJudge`, a deterministic judge of the lab library (the gate's policy holds
whatever the scores); one test asks the default offline judge, as a new user would."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from urllib.parse import quote

import pytest
from click.testing import CliRunner
from lab_library import make_lab_library

from sourcegate.cli import cli, format_result
from sourcegate.gate import (REASON_DISAGREES_EQUAL, REASON_DISAGREES_HIGHER, REASON_OUTRANKED, GateThresholds, Route,
                             Status, TrustTiers, apply_gate, disagree)
from sourcegate.inert import inert_markup
from sourcegate.judges.base import JudgeInput, Judgement, PassageJudgement
from sourcegate.models import PassageScores
from sourcegate.server.mcp_tool import result_text, tool_payload
from sourcegate.service import SourceGate
from sourcegate.settings import Settings

SPEED_Q = "Can the HG-3 rotor run at 30,000 rpm?"
SEAL_Q = "How often should the HG-3 rotor seal be replaced?"
EQUAL = "*=2"  # every source weighs the same


def run(*args: str):
    return CliRunner().invoke(cli, list(args))


@pytest.fixture(scope="module")
def lab(tmp_path_factory) -> Path:
    """The library ingested once: (home)."""
    root = tmp_path_factory.mktemp("lab")
    library = make_lab_library(root / "library")
    home = root / "home"
    r = run("--home", str(home), "ingest", str(library))
    assert r.exit_code == 0, r.output
    assert "6 added, 0 updated, 0 unchanged, 0 removed, 0 failed, 0 skipped" in r.output
    return home


def scores(rel=0.1, ev=0.1, con=0.02) -> PassageScores:
    return PassageScores(is_relevant=rel, contains_answer_evidence=ev, contradicts_query_premise=con,
                         contains_prompt_injection=0.02, is_superseded=0.02)


class LabJudge:
    """Deterministic scores for the lab library's two HG-3 questions: the current procedure contradicts
    the question that assumes 30,000 rpm and answers the seal question; the forum note answers both
    (with its own values); the other documents are off the subject."""

    name = "lab-test"

    def judge(self, query: str, passages: list[JudgeInput]) -> Judgement:
        out = []
        for p in passages:
            doc = p.id.split("#")[0]
            s = scores()
            if query == SPEED_Q and doc == "hg3-procedure.pdf":
                s = scores(0.99, 0.6, 0.99)
            elif doc in ("hg3-procedure.pdf", "forum-hg3-speed.txt") and query in (SPEED_Q, SEAL_Q):
                s = scores(0.95, 0.9)
            out.append(PassageJudgement(p.id, s))
        return Judgement(model="lab-test-1", results=out)


def lab_gate(home: Path, audit: Path, **settings) -> SourceGate:
    return SourceGate(Settings(_env_file=None, home=home, audit_log_path=audit, **settings), judge=LabJudge())


# -- the setting and the pure policy ---------------------------------------------------------------

def test_the_tier_setting_has_sane_defaults_and_refuses_a_bad_one():
    t = TrustTiers.parse(None)
    assert [t.tier(x) for x in ("procedure", "Manual", "policy", "standard", "regulation")] == [3] * 5
    assert [t.tier(x) for x in ("forum", "note", "community", "email", "chat")] == [1] * 5
    assert t.tier(None) == t.tier("api_docs") == t.tier("") == 2  # unknown types in the middle
    assert t.tier("forum_post") == 1 and t.tier("policy_standard") == 3 and t.tier("Forum Post") == 1
    custom = TrustTiers.parse("forum=3, procedure=1, *=0")
    assert (custom.tier("forum"), custom.tier("procedure"), custom.tier("kb")) == (3, 1, 0)
    assert TrustTiers.parse(custom.as_setting()) == custom == TrustTiers.from_dict(custom.as_dict())
    with pytest.raises(ValueError, match="TYPE=TIER"):
        TrustTiers.parse("forum=low")
    with pytest.raises(ValueError, match="GATE_TRUST_TIERS"):
        Settings(_env_file=None, gate_trust_tiers="procedure")


def test_lower_tier_evidence_never_outweighs_a_higher_tier_conflict():
    t = GateThresholds()
    passages = [("sop#0", "sop", scores(0.99, 0.6, 0.99)), ("forum#0", "forum", scores(0.95, 0.9))]
    gated, status = apply_gate(passages, t, 5, tiers=[3, 1], values=[[], []])
    assert status is Status.CONFLICT
    assert [(g.route, g.reason) for g in gated] == [(Route.CONFLICT, "contradicts_premise"),
                                                    (Route.EXCLUDED, REASON_OUTRANKED)]
    # equal tiers: the evidence answers, and the conflict stays beside it
    gated, status = apply_gate(passages, t, 5, tiers=[2, 2])
    assert status is Status.ANSWER and [g.route for g in gated] == [Route.CONFLICT, Route.EVIDENCE]
    # an archived revision that contradicts outranks nothing
    gated, status = apply_gate(passages, t, 5, tiers=[3, 1], current=[False, True])
    assert status is Status.ANSWER
    # a higher-tier source beside the lower one: the answer stands on the evidence of the conflict's tier
    passages.append(("manual#0", "manual", scores(0.9, 0.8)))
    gated, status = apply_gate(passages, t, 5, tiers=[3, 1, 3])
    assert status is Status.ANSWER and [g.reason for g in gated][1:] == [REASON_OUTRANKED, "evidence"]


def test_evidence_that_states_another_value():
    assert disagree(["2000 h"], ["20000 h"]) and not disagree(["2000 h"], ["2000 h", "15 g"])
    assert disagree(["yes"], ["no"]) and not disagree(["2000 h"], ["15 g"]) and not disagree([], ["no"])
    t = GateThresholds()
    passages = [("forum#0", "forum", scores(0.95, 0.999)), ("sop#0", "sop", scores(0.95, 0.999))]
    values = [["20000 h"], ["2000 h"]]
    gated, status = apply_gate(passages, t, 5, tiers=[1, 3], values=values)
    # the higher tier answers, the other is shown as a conflict
    assert status is Status.ANSWER
    assert [(g.route, g.reason) for g in gated] == [(Route.CONFLICT, REASON_DISAGREES_HIGHER), (Route.EVIDENCE, "evidence")]
    # between equals, both answer and both are marked: the answer says the sources disagree
    gated, status = apply_gate(passages, t, 5, tiers=[2, 2], values=values)
    assert [(g.route, g.reason) for g in gated] == [(Route.EVIDENCE, REASON_DISAGREES_EQUAL)] * 2


# -- the library, through the whole pipeline ---------------------------------------------------------

def test_source_type_is_read_from_every_format(lab):
    r = run("--home", str(lab), "status", "--documents", "--json")
    docs = {d["id"]: d for d in json.loads(r.output)["document_list"]}
    assert {k: docs[k]["source_type"] for k in docs} == {
        "hg3-procedure.pdf": "procedure",      # the folder manifest
        "hg5-manual.docx": "manual",           # DOCX Category
        "hg3-procedure-r1.md": "procedure",    # Markdown front matter
        "forum-hg3-speed.txt": "forum",        # a sidecar
        "acid-spill.html": "procedure",        # an HTML <meta>
        "etuve-es2.docx": "manual",
    }


def test_forum_only_evidence_is_a_premise_conflict_with_the_offline_judge(lab):
    """The default judge, as a new user gets it: where it finds that the procedure contradicts the
    question, the forum note never answers against it, and the premise conflict cites the procedure."""
    r = run("--home", str(lab), "ask", SPEED_Q, "--json")
    assert r.exit_code == 0, r.output
    res = json.loads(r.output)
    excluded = {x["doc_id"]: x["reason"] for x in res["excluded"]}
    if excluded.get("hg3-procedure.pdf") in ("prompt_injection", "superseded", "judge_error"):
        pytest.skip(f"the offline judge excluded the procedure itself ({excluded['hg3-procedure.pdf']}): "
                    "no conflict reaches the trust tiers")
    assert "forum-hg3-speed.txt" not in [p["doc_id"] for p in res["evidence"]], res
    assert res["status"] == "premise_conflict", res
    assert [p["doc_id"] for p in res["conflicts"]] == ["hg3-procedure.pdf"]
    assert res["conflicts"][0]["source_type"] == "procedure" and res["conflicts"][0]["tier"] == 3
    assert "20,000 rpm" in res["answer"] and '"Can the HG-3 rotor run at 30,000 rpm"' in res["answer"]


def test_forum_only_evidence_is_a_premise_conflict_citing_the_procedure(lab, tmp_path):
    gate = lab_gate(lab, tmp_path / "audit.jsonl")
    r = gate.ask(SPEED_Q)
    gate.close()
    assert r.status == "premise_conflict"
    assert [p.doc_id for p in r.conflicts] == ["hg3-procedure.pdf"] and not r.evidence
    assert {x.doc_id: x.reason for x in r.excluded}["forum-hg3-speed.txt"] == REASON_OUTRANKED
    assert r.answer.startswith('The documents contradict a premise of the question: "Can the HG-3 rotor run at 30,000 rpm"')


def _answer_with_conflict(lab, tmp_path):
    gate = lab_gate(lab, tmp_path / "audit.jsonl", gate_trust_tiers=EQUAL)
    r = gate.ask(SPEED_Q)
    gate.close()
    assert r.status == "answer_from_evidence"
    assert [p.doc_id for p in r.evidence] == ["forum-hg3-speed.txt"]
    assert [p.doc_id for p in r.conflicts] == ["hg3-procedure.pdf"]
    return r


def test_an_answer_beside_a_conflict_shows_it_in_json_cli_and_mcp(lab, tmp_path):
    r = _answer_with_conflict(lab, tmp_path)
    opening = ('Warning: the documents contradict a premise of the question: "Can the HG-3 rotor run at 30,000 rpm". '
               'What they say:\n- "Never run the HG-3 rotor above 20,000 rpm: the rotor is rated for 20,000 rpm and '
               'no more." [2]\n')
    # the written answer opens with the conflict, cited; the forum's answer comes after it
    assert r.answer.startswith(opening), r.answer
    assert r.answer.index("[2]") < r.answer.index("From the documents:") < r.answer.index("30,000 rpm for years")
    assert "[2] HG-3 homogeniser operating procedure" in r.answer.split("Sources:")[1]
    assert "open the answer by telling the user which premise the documents contradict" in r.guidance
    # the CLI's plain output says it on the line after the status, before the answer
    plain = format_result(r).splitlines()
    assert plain[0] == "status: answer_from_evidence"
    assert plain[1] == ("warning: 1 document contradicts a premise of the question: HG-3 homogeniser operating "
                        "procedure (hg3-procedure.pdf)")
    assert plain[3] == opening.splitlines()[0]
    # the MCP tool's text, for clients that ignore structured content
    data = tool_payload(r)
    text = result_text(data).splitlines()
    assert text[1] == inert_markup(plain[1]) and opening.splitlines()[0] in text
    assert data["conflicts"][0]["reason"] == "contradicts_premise" and data["evidence"][0]["tier"] == 2


def test_a_model_written_answer_beside_a_conflict_opens_with_it(lab, tmp_path):
    """The model words the forum's answer from the evidence it is given; the opening lines that name
    the contradicted premise and cite the procedure are sourcegate's own, numbered after the evidence."""
    from fakes.chat_server import FakeChatServer

    with FakeChatServer("One user has run the HG-3 rotor at 30,000 rpm for years without trouble [1].") as local:
        gate = lab_gate(lab, tmp_path / "audit.jsonl", gate_trust_tiers=EQUAL, writer="llm", llm_writer_policy="local",
                        llm_writer_local=local.url + "/v1", llm_writer_local_model="m")
        r = gate.ask(SPEED_Q)
        gate.close()
        prompt = local.bodies[0]["messages"][-1]["content"]
    assert r.status == "answer_from_evidence" and r.writer.path == "local", r.writer.fallback_reason
    assert r.answer.startswith('Warning: the documents contradict a premise of the question: "Can the HG-3 rotor run '
                               'at 30,000 rpm". What they say:\n- "Never run the HG-3 rotor above 20,000 rpm')
    assert "\nOne user has run the HG-3 rotor at 30,000 rpm for years without trouble [1]." in r.answer
    sources = r.answer.split("Sources:\n")[1]
    assert "[1] Forum: HG-3 speed" in sources and "[2] HG-3 homogeniser operating procedure" in sources
    assert "Never run" not in prompt  # the model reads the evidence alone


def test_a_less_trusted_source_that_states_another_value_is_shown_as_a_conflict(lab, tmp_path):
    gate = lab_gate(lab, tmp_path / "audit.jsonl")
    r = gate.ask(SEAL_Q)
    gate.close()
    assert r.status == "answer_from_evidence"
    assert [p.doc_id for p in r.evidence] == ["hg3-procedure.pdf"]
    assert [(p.doc_id, p.reason) for p in r.conflicts] == [("forum-hg3-speed.txt", REASON_DISAGREES_HIGHER)]
    assert r.answer.startswith("Warning: a less trusted source states another value than the answer below")
    assert '"The seal lasts about 2,500 runs in my experience." [2] (forum)' in r.answer
    assert '"Replace the rotor seal every 250 runs, and log each replacement in the instrument book." [1]' in r.answer
    assert "warning: a less trusted source states another value: Forum: HG-3 speed" in format_result(r)
    # between equals, the answer says the sources disagree and cites both
    gate = lab_gate(lab, tmp_path / "audit2.jsonl", gate_trust_tiers=EQUAL)
    r = gate.ask(SEAL_Q)
    gate.close()
    assert {p.doc_id: p.reason for p in r.evidence} == {"hg3-procedure.pdf": REASON_DISAGREES_EQUAL,
                                                         "forum-hg3-speed.txt": REASON_DISAGREES_EQUAL}
    body = r.answer.split("\n\nSources:")[0]
    assert "The sources disagree" in body and "[1]" in body and "[2]" in body
    assert "tell the user the sources disagree" in r.guidance


def test_lower_tier_evidence_is_cited_after_higher_tier_and_marked(lab, tmp_path):
    """The seal question with the forum's own value removed from the comparison: the procedure is [1],
    the forum [2], marked as less trusted."""
    from sourcegate.answer import ExtractiveWriter
    from sourcegate.models import Candidate

    sop = Candidate(id="s#0", doc_id="sop", title="SOP", text="Replace the rotor seal every 250 runs.",
                    source_type="procedure", tier=3, gate_reason="evidence")
    note = Candidate(id="f#0", doc_id="forum", title="Forum", text="I replace the rotor seal when it leaks.",
                     source_type="forum", tier=1, gate_reason="evidence")
    a = ExtractiveWriter().write(SEAL_Q, Status.ANSWER, [sop, note], [])
    lines = a.text.split("\n\nSources:")[0].splitlines()
    assert lines[1:] == ['- "Replace the rotor seal every 250 runs." [1]',
                         '- "I replace the rotor seal when it leaks." [2] (forum: less trusted than [1])']


def test_replay_with_another_tier_setting_changes_the_decision(lab, tmp_path):
    audit = tmp_path / "audit.jsonl"
    gate = lab_gate(lab, audit)
    assert gate.ask(SPEED_Q).status == "premise_conflict"
    gate.close()
    rec = json.loads(audit.read_text(encoding="utf-8").splitlines()[0])
    assert rec["trust_tiers"]["tiers"]["forum"] == 1 and rec["trust_tiers"]["unknown"] == 2
    cands = {c["doc_id"]: c for c in rec["candidates"]}
    assert (cands["forum-hg3-speed.txt"]["source_type"], cands["forum-hg3-speed.txt"]["tier"]) == ("forum", 1)
    assert cands["forum-hg3-speed.txt"]["reason"] == REASON_OUTRANKED
    env = {"SOURCEGATE_HOME": str(lab)}
    same = CliRunner(env=env).invoke(cli, ["replay", str(audit), "--json"])
    assert same.exit_code == 0, same.output
    assert json.loads(same.output)["answer_changes"] == []  # the tiers it was decided with
    other = CliRunner(env=env).invoke(cli, ["replay", str(audit), "--json", "--trust-tiers", EQUAL])
    report = json.loads(other.output)
    assert [(a["old_status"], a["new_status"]) for a in report["answer_changes"]] == [
        ("premise_conflict", "answer_from_evidence")]
    assert [(c["doc_id"], c["old_route"], c["new_route"]) for c in report["passage_changes"]] == [
        ("forum-hg3-speed.txt", "excluded", "evidence")]
    plain = CliRunner(env={**env, "GATE_TRUST_TIERS": EQUAL}).invoke(cli, ["replay", str(audit)])
    assert "trust tiers: *=2" in plain.output and "premise_conflict" in plain.output


# -- the web page -----------------------------------------------------------------------------------

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium) - real-browser test skipped")
def test_the_web_page_shows_the_conflict_in_its_main_view(lab, tmp_path):
    """In headless Chromium: the outcome says the question is contradicted, the warning with the
    procedure stands above the answer, outside the operators' fold; screenshots are saved (in
    PAGE_SCREENSHOTS when set, else the test's temporary folder)."""
    from test_ask_stream import headless_page
    from test_server_fixtures import running_server
    from test_web_page import PAGE_DONE, _screenshot, _visible_text

    from sourcegate.server.app import create_app

    shots = Path(os.environ.get("PAGE_SCREENSHOTS") or tmp_path / "screenshots")
    settings = Settings(_env_file=None, home=lab, audit_log_path=tmp_path / "audit.jsonl", gate_trust_tiers=EQUAL,
                        mcp_allowed_hosts="testserver")
    gate = SourceGate(settings, judge=LabJudge())
    try:
        with running_server(create_app(settings, gate)) as base:
            with headless_page(f"{base}/?q={quote(SPEED_Q)}", tmp_path / "profile") as wait_for:
                dom = wait_for(PAGE_DONE)
                heading = _visible_text(wait_for, "status")
                warning = _visible_text(wait_for, "conflict-block")
                answer = _visible_text(wait_for, "answer")
                hidden = wait_for('String(document.getElementById("conflict-block").hidden)')
                folded = wait_for('String(document.getElementById("conflict-block").closest("details") !== null)')
                png = _screenshot(wait_for, shots / "answer-with-conflict.png")
    finally:
        gate.close()
    assert 'class="status answer_from_evidence with-conflict"' in dom  # the badge is not the plain answer's
    assert heading == "Answered from 1 document, but a document contradicts the question"
    assert hidden == "false" and folded == "false"
    assert warning.startswith("Warning: a document contradicts a premise of the question")
    assert "HG-3 homogeniser operating procedure" in warning and "procedure" in warning
    assert answer.startswith("Warning: the documents contradict a premise of the question")
    assert png.startswith(b"\x89PNG") and len(png) > 10_000
