"""Per-request filters on document metadata: `ask --filter`, REST `filters`, the MCP tool's
`filters` argument; written into the audit record; an unknown key, a bad value or filters that
match no document are clear errors. (Each store applies them inside its query:
tests/test_store_contract.py::test_filters_on_document_metadata_and_id_prefix, on SQLite,
PostgreSQL and Azure AI Search's fake.)"""

from __future__ import annotations

import json
from pathlib import Path

import httpx2
import pytest
from click.testing import CliRunner
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from starlette.testclient import TestClient
from test_server_fixtures import run_async

from sourcegate.audit import read_records
from sourcegate.cli import cli
from sourcegate.filters import FilterError, parse_pairs, search_filters
from sourcegate.judges.base import JudgeInput, Judgement, PassageJudgement
from sourcegate.models import PassageScores
from sourcegate.server.app import create_app
from sourcegate.service import QueryError, SourceGate
from sourcegate.settings import Settings
from sourcegate.store.base import DocumentRecord

Q = "What is the maximum rotor speed?"


def _md(model: str, rpm: str, version: str) -> str:
    return f"""---
title: {model} homogeniser manual
model: {model}
product: homogeniser
version: {version}
source_type: manual
---
# {model} homogeniser manual

Never run the {model} rotor above {rpm} rpm.
"""


class RotorJudge:
    """Evidence wherever a passage speaks of the rotor."""

    name = "rotor-test"

    def judge(self, query: str, passages: list[JudgeInput]) -> Judgement:
        out = []
        for p in passages:
            hit = "rotor" in p.text
            out.append(PassageJudgement(p.id, PassageScores(
                is_relevant=0.95 if hit else 0.05, contains_answer_evidence=0.9 if hit else 0.05,
                contradicts_query_premise=0.02, contains_prompt_injection=0.02, is_superseded=0.02)))
        return Judgement(model="rotor-test-1", results=out)


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("filters")
    lib = root / "library"
    (lib / "hg").mkdir(parents=True)
    (lib / "hg" / "hg3.md").write_text(_md("HG-3", "20,000", "3"), encoding="utf-8")
    (lib / "hg" / "hg5.md").write_text(_md("HG-5", "12,000", "2"), encoding="utf-8")
    (lib / "mixer.txt").write_text("Mixer M-7 guide\n\nThe M-7 mixer rotor runs at up to 900 rpm.\n", encoding="utf-8")
    (lib / "mixer.txt.meta.json").write_text(json.dumps({"source_type": "procedure", "site": "north"}),
                                             encoding="utf-8")
    r = CliRunner().invoke(cli, ["--home", str(root / "home"), "ingest", str(lib)])
    assert r.exit_code == 0 and "3 added" in r.output, r.output
    return root / "home"


@pytest.fixture()
def gate(home, tmp_path):
    g = SourceGate(Settings(_env_file=None, home=home, audit_log_path=tmp_path / "audit.jsonl",
                            mcp_allowed_hosts="testserver"), judge=RotorJudge())
    yield g
    g.close()


def _docs(result) -> set[str]:
    return {p.doc_id for p in result.evidence}


def test_front_matter_and_sidecar_keys_are_kept_as_metadata(gate):
    assert gate.store.get_document("hg/hg3.md").metadata == {"model": "HG-3", "product": "homogeniser"}
    assert gate.store.get_document("mixer.txt").metadata == {"site": "north"}


def test_a_front_matter_key_narrows_retrieval(gate):
    assert _docs(gate.ask(Q)) == {"hg/hg3.md", "hg/hg5.md", "mixer.txt"}
    r = gate.ask(Q, filters={"model": "HG-5"})
    assert _docs(r) == {"hg/hg5.md"} and "12,000 rpm" in r.answer
    assert _docs(gate.ask(Q, filters={"version": "3"})) == {"hg/hg3.md"}
    assert _docs(gate.ask(Q, filters={"source_type": "procedure"})) == {"mixer.txt"}
    assert _docs(gate.ask(Q, filters={"doc_id": "hg/"})) == {"hg/hg3.md", "hg/hg5.md"}
    assert _docs(gate.ask(Q, filters={"site": "north"})) == {"mixer.txt"}
    assert _docs(gate.ask(Q, filters={"product": "homogeniser", "model": "HG-3"})) == {"hg/hg3.md"}
    # every candidate the gate saw came from the filtered documents, and the audit record says which
    rec = [rec for _, rec, _ in read_records(gate.settings.audit_path)][-1]
    assert rec["retrieval"]["filters"] == {"model": "HG-3", "product": "homogeniser"}
    assert {c["doc_id"] for c in rec["candidates"]} == {"hg/hg3.md"}
    first = [rec for _, rec, _ in read_records(gate.settings.audit_path)][0]
    assert first["retrieval"]["filters"] == {}


@pytest.mark.parametrize("filters, message", [
    ({"modle": "HG-3"}, "unknown filter key 'modle': the library's documents have doc_id, source_type, version, "
                        "status, model, product, site"),
    ({"model": ""}, "filter 'model' has an empty value"),
    ({"model": 3}, "filter 'model' must have a text value, got int"),
    ({"model": "HG-9"}, "no document matches model=HG-9 (archived revisions are left out): model has HG-3, HG-5"),
    ({"model": "HG-3", "version": "2"}, "no document matches model=HG-3, version=2"),
])
def test_an_unknown_key_or_a_bad_value_is_a_clear_error(gate, filters, message):
    with pytest.raises(QueryError) as e:
        gate.ask(Q, filters=filters)
    assert message in str(e.value)


def test_filter_pairs_and_the_pure_check():
    assert parse_pairs(["model=HG-3", "version=3"]) == {"model": "HG-3", "version": "3"}
    assert parse_pairs(["title=a=b"]) == {"title": "a=b"}
    for bad in (["model"], ["=x"], ["model=a", "model=b"]):
        with pytest.raises(FilterError):
            parse_pairs(bad)
    docs = [DocumentRecord(id="a", title="A", content_hash="h", status="archived", metadata={"model": "X"})]
    assert search_filters(None, docs) is None
    f = search_filters({"status": "withdrawn"}, docs)  # an out-of-service word means archived
    assert f.status == "archived" and f.exclude_status == ()
    with pytest.raises(FilterError, match="archived revisions are left out"):
        search_filters({"model": "X"}, docs)


def test_ask_filter_on_the_command_line(gate, home, tmp_path):
    gate.ask(Q, filters={"model": "HG-5"})  # scores for the CLI's recorded judge
    env = {"SOURCEGATE_JUDGE": "recorded", "SOURCEGATE_RECORDED_SCORES": str(gate.settings.audit_path),
           "AUDIT_LOG_PATH": str(tmp_path / "cli.jsonl")}
    r = CliRunner().invoke(cli, ["--home", str(home), "ask", "--json", "--filter", "model=HG-5", Q], env=env)
    assert r.exit_code == 0, r.output
    assert {p["doc_id"] for p in json.loads(r.output)["evidence"]} == {"hg/hg5.md"}
    bad = CliRunner().invoke(cli, ["--home", str(home), "ask", "--filter", "modle=HG-5", Q], env=env)
    assert bad.exit_code == 2 and "unknown filter key 'modle'" in bad.output
    bad = CliRunner().invoke(cli, ["--home", str(home), "ask", "--filter", "model", Q], env=env)
    assert bad.exit_code == 2 and "KEY=VALUE" in bad.output


def test_rest_filters(gate):
    with TestClient(create_app(gate.settings, gate)) as client:
        ok = client.post("/v1/ask", json={"query": Q, "filters": {"model": "HG-3"}})
        unknown = client.post("/v1/ask", json={"query": Q, "filters": {"modle": "HG-3"}})
        shape = client.post("/v1/ask", json={"query": Q, "filters": ["model=HG-3"]})
        doc = client.get("/openapi.json").json()
    assert ok.status_code == 200 and {p["doc_id"] for p in ok.json()["evidence"]} == {"hg/hg3.md"}
    assert unknown.status_code == 422 and "unknown filter key 'modle'" in unknown.json()["error"]
    assert shape.status_code == 422 and "filters must be an object" in shape.json()["error"]
    body = doc["paths"]["/v1/ask"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert "filters" in body["properties"] and body["required"] == ["query"]


def test_mcp_tool_filters_argument(gate):
    app = create_app(gate.settings, gate)

    async def main():
        async with app.router.lifespan_context(app):
            http = httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url="http://testserver")
            async with http, streamable_http_client("http://testserver/mcp", http_client=http) as (r, w):
                async with ClientSession(r, w) as session:
                    await session.initialize()
                    tool = (await session.list_tools()).tools[0]
                    ok = await session.call_tool("search_procedures", {"query": Q, "filters": {"model": "HG-5"}})
                    bad = await session.call_tool("search_procedures", {"query": Q, "filters": {"modle": "x"}})
                    return tool, ok, bad

    tool, ok, bad = run_async(main, 60)
    assert "filters" in tool.input_schema["properties"] and tool.input_schema["required"] == ["query"]
    assert not ok.is_error and {p["doc_id"] for p in ok.structured_content["evidence"]} == {"hg/hg5.md"}
    assert bad.is_error and "unknown filter key 'modle'" in bad.content[0].text


# -- hostile metadata: what a filter error shows, and what a filter can select -----------------------

ESC, BEL = "\x1b", "\x07"
# OSC 8 (a hyperlink), OSC 0 (the window title), CSI 2J (clear the screen), BEL
TERMINAL_TRAP = f"{ESC}]8;;http://evil.example/{BEL}HG{ESC}]8;;{BEL}{ESC}]0;owned{BEL}{ESC}[2J{BEL}-7"
MARKUP_TRAP = "![leak](http://evil.example/x.png) [go](javascript:alert(1)) <img src=x onerror=alert(1)>"


def _yaml_escaped(text: str) -> str:
    """`text` as a YAML double-quoted scalar (YAML reads \\e and \\a escapes)."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace(ESC, "\\e").replace(BEL, "\\a") + '"'


@pytest.fixture(scope="module")
def hostile_home(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("hostile-filters")
    lib = root / "library"
    lib.mkdir()
    (lib / "trap.md").write_text(
        f"---\ntitle: Trap homogeniser\nmodel: {_yaml_escaped(TERMINAL_TRAP)}\nproduct: {_yaml_escaped(MARKUP_TRAP)}\n"
        f"---\n# Trap homogeniser\n\nNever run the trap rotor above 4,000 rpm.\n", encoding="utf-8")
    (lib / "bell.md").write_text(
        f"---\ntitle: Bell homogeniser\nmodel: {_yaml_escaped('HG' + BEL + '-8')}\n---\n# Bell homogeniser\n\n"
        "Never run the bell rotor above 5,000 rpm.\n", encoding="utf-8")
    (lib / "old.md").write_text(
        "---\ntitle: Old homogeniser\nmodel: OLD-SECRET\nstatus: withdrawn\n---\n# Old homogeniser\n\n"
        "Never run the old rotor above 3,000 rpm.\n", encoding="utf-8")
    for i in range(14):
        (lib / f"unit-{i:02d}.md").write_text(f"# Unit {i}\n\nThe unit {i} rotor runs at up to {i}00 rpm.\n",
                                              encoding="utf-8")
    r = CliRunner().invoke(cli, ["--home", str(root / "home"), "ingest", str(lib)])
    assert r.exit_code == 0 and "17 added" in r.output, r.output
    return root / "home"


@pytest.fixture()
def hostile_gate(hostile_home, tmp_path):
    g = SourceGate(Settings(_env_file=None, home=hostile_home, audit_log_path=tmp_path / "audit.jsonl",
                            mcp_allowed_hosts="testserver"), judge=RotorJudge())
    yield g
    g.close()


def _rest_and_mcp_errors(gate, filters: dict) -> tuple[str, str]:
    app = create_app(gate.settings, gate)
    with TestClient(app) as client:
        rest = client.post("/v1/ask", json={"query": Q, "filters": filters})
    assert rest.status_code == 422, rest.text

    async def main():
        async with app.router.lifespan_context(app):
            http = httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url="http://testserver")
            async with http, streamable_http_client("http://testserver/mcp", http_client=http) as (r, w):
                async with ClientSession(r, w) as session:
                    await session.initialize()
                    return await session.call_tool("search_procedures", {"query": Q, "filters": filters})

    mcp = run_async(main, 60)
    assert mcp.is_error
    return rest.json()["error"], mcp.content[0].text


def test_a_metadata_value_with_control_characters_is_stored_as_seen_and_selected(hostile_gate):
    """Ingest keeps the text a reader sees; a filter compares the same form, whether it is sent as
    seen or with the control characters the file held."""
    assert hostile_gate.store.get_document("bell.md").metadata["model"] == "HG-8"
    assert not any(ch in hostile_gate.store.get_document("trap.md").metadata["model"] for ch in (ESC, BEL))
    assert _docs(hostile_gate.ask(Q, filters={"model": "HG-8"})) == {"bell.md"}
    assert _docs(hostile_gate.ask(Q, filters={"model": "HG" + BEL + "-8"})) == {"bell.md"}
    assert _docs(hostile_gate.ask(Q, filters={"model": TERMINAL_TRAP})) == {"trap.md"}


def test_filter_errors_on_the_terminal_hold_no_control_character(hostile_home, tmp_path):
    env = {"AUDIT_LOG_PATH": str(tmp_path / "cli.jsonl")}
    for pair in ("model=ZZ", f"mo{ESC}]0;x{BEL}del=ZZ", f"model={ESC}[2J"):
        r = CliRunner().invoke(cli, ["--home", str(hostile_home), "ask", "--filter", pair, Q], env=env)
        assert r.exit_code == 2, r.output
        assert not any(ch in r.output for ch in (ESC, BEL)), repr(r.output)
    # a message carrying control characters from an index written before values were cleaned
    docs = [DocumentRecord(id="a", title="A", content_hash="h", status="current", metadata={"model": TERMINAL_TRAP})]
    with pytest.raises(FilterError) as e:
        search_filters({"model": "ZZ"}, docs)
    assert "model has" in str(e.value)
    from sourcegate.cli import _click_message
    assert not any(ch in _click_message(str(e.value)) for ch in (ESC, BEL))


def test_rest_and_mcp_filter_errors_are_inert_markdown(hostile_gate):
    from markdown_render import active_markup

    for filters in ({"model": "ZZ"}, {"product": "ZZ"}, {"product": MARKUP_TRAP + " x"},
                    {"m![a](http://evil.example/k.png)": "x"}, {"doc_id": "![a](http://evil.example/"}):
        for message in _rest_and_mcp_errors(hostile_gate, filters):
            assert not active_markup(message), (filters, message, active_markup(message))
            assert not any(ch in message for ch in (ESC, BEL))


def test_filter_errors_name_no_archived_value_and_no_document_id(hostile_gate):
    rest, mcp = _rest_and_mcp_errors(hostile_gate, {"model": "ZZ"})
    for message in (rest, mcp):
        assert "model has" in message and "HG-8" in message
        assert "OLD-SECRET" not in message
    # a document id prefix that matches nothing is not answered with the library's ids
    ids = [d.id for d in hostile_gate.store.list_documents()]
    for filters in ({"doc_id": "q"}, {"doc_id": "unit-0", "model": "HG-8"}, {"doc_id": "zz"}):
        for message in _rest_and_mcp_errors(hostile_gate, filters):
            assert "no document matches" in message
            assert not [i for i in ids if i in message], message


def test_passages_of_one_document_are_not_sources_that_disagree(tmp_path):
    """Filtered to one manual whose sections state two speeds: one source, no "sources disagree"
    naming it twice; two manuals that state different speeds still disagree, each named once."""
    lib = tmp_path / "library"
    lib.mkdir()
    for model, speeds in (("HG-7", ("20,000", "5,000")), ("HG-8", ("9,000", "4,000"))):
        (lib / f"{model.lower()}.md").write_text(
            f"---\ntitle: {model} homogeniser manual\nmodel: {model}\nsource_type: manual\n---\n"
            f"# {model} homogeniser manual\n\n## Limits\n\nNever run the rotor above {speeds[0]} rpm.\n\n"
            + "Filler sentence about the frame and its paint. " * 40
            + f"\n\n## Start-up\n\nAt start-up, run the rotor at {speeds[1]} rpm for two minutes.\n", encoding="utf-8")
    r = CliRunner().invoke(cli, ["--home", str(tmp_path / "home"), "ingest", str(lib)])
    assert r.exit_code == 0, r.output
    g = SourceGate(Settings(_env_file=None, home=tmp_path / "home", audit_log_path=tmp_path / "audit.jsonl"),
                   judge=RotorJudge())
    try:
        one = g.ask(Q, filters={"model": "HG-7"})
        both = g.ask(Q)
    finally:
        g.close()
    from sourcegate.answer import conflict_warnings

    assert [p.doc_id for p in one.evidence] == ["hg-7.md", "hg-7.md"], one.evidence
    assert not any(p.reason == "evidence_disagrees" for p in one.evidence)
    assert "disagree" not in one.answer
    assert not conflict_warnings(one.status, [p.model_dump() for p in one.evidence], [])
    warnings = conflict_warnings(both.status, [p.model_dump() for p in both.evidence], [])
    assert len(warnings) == 1 and "disagree" in warnings[0], warnings
    assert warnings[0].count("(hg-7.md)") == 1 and warnings[0].count("(hg-8.md)") == 1, warnings


# -- GET /v1/filters: what a question can filter on (the web page's selects) -------------------------

def test_the_filters_endpoint_lists_the_librarys_keys_and_values(gate):
    """On a real SQLite library (two manuals of different `model`, a sidecar `site`): each key once
    with its values, each value one that selects its documents when sent back in `filters`."""
    with TestClient(create_app(gate.settings, gate)) as client:
        r = client.get("/v1/filters")
        assert r.status_code == 200, r.text
        listed = r.json()
        assert listed == {"filters": [
            {"key": "model", "values": [{"value": "HG-3", "label": "HG-3"}, {"value": "HG-5", "label": "HG-5"}],
             "more_values": 0},
            {"key": "product", "values": [{"value": "homogeniser", "label": "homogeniser"}], "more_values": 0},
            {"key": "site", "values": [{"value": "north", "label": "north"}], "more_values": 0},
        ], "more_keys": 0}
        for f in listed["filters"]:
            for v in f["values"]:
                ok = client.post("/v1/ask", json={"query": Q, "filters": {f["key"]: v["value"]}})
                assert ok.status_code == 200 and ok.json()["evidence"], (f["key"], v, ok.text)
        doc = client.get("/openapi.json").json()
    op = doc["paths"]["/v1/filters"]["get"]
    assert op["operationId"] == "ListFilters" and {"200", "401", "503"} <= set(op["responses"])
    schema = op["responses"]["200"]["content"]["application/json"]["schema"]
    assert sorted(schema["properties"]) == ["filters", "more_keys"]
    import jsonschema

    jsonschema.validate(listed, schema)  # the reply is what the document (and the connector) declares


def test_the_filters_endpoint_is_behind_the_key_and_host_checks(gate):
    keyed = gate.settings.model_copy(update={"mcp_api_key": "the-key"})
    with TestClient(create_app(keyed, gate)) as client:
        assert client.get("/v1/filters").status_code == 401
        assert client.get("/v1/filters", headers={"x-api-key": "wrong"}).status_code == 401
        assert client.get("/v1/filters", headers={"x-api-key": "the-key", "host": "evil.example"}).status_code == 421
        r = client.get("/v1/filters", headers={"x-api-key": "the-key"})
    assert r.status_code == 200 and [f["key"] for f in r.json()["filters"]] == ["model", "product", "site"]


def test_the_filters_endpoint_lists_current_values_neutralised(hostile_gate):
    """No withdrawn document's value, no control character, labels inert as Markdown; the value is
    the text that selects the document."""
    from markdown_render import active_markup

    with TestClient(create_app(hostile_gate.settings, hostile_gate)) as client:
        r = client.get("/v1/filters")
        assert r.status_code == 200, r.text
        assert not any(ch in r.text for ch in (ESC, BEL, "\\u001b", "\\u0007"))
        listed = {f["key"]: f["values"] for f in r.json()["filters"]}
        assert sorted(listed) == ["model", "product"]
        assert "OLD-SECRET" not in r.text and not any(d.id in r.text for d in hostile_gate.store.list_documents())
        assert "HG-8" in [v["value"] for v in listed["model"]]
        for values in listed.values():
            for v in values:
                assert not active_markup(v["label"]), v
        trap = next(v for v in listed["product"])
        assert active_markup(trap["value"]), "the value is the text as stored, not escaped"
        sent = client.post("/v1/ask", json={"query": Q, "filters": {"product": trap["value"]}})
    assert sent.status_code == 200 and _docs_json(sent.json()) == {"trap.md"}


def _docs_json(result: dict) -> set[str]:
    return {p["doc_id"] for p in result["evidence"]}


def test_filter_choices_are_bounded_and_say_what_was_cut():
    from sourcegate.filters import filter_choices

    docs = [DocumentRecord(id=f"d{i}", title="T", content_hash="h", status="current",
                           metadata={"model": f"M-{i:02d}", "site": "north" if i % 2 else "south",
                                     **({"line": "L1"} if i == 0 else {})}) for i in range(30)]
    docs.append(DocumentRecord(id="old", title="T", content_hash="h", status="archived",
                               metadata={"model": "M-OLD", "plant": "gone"}))
    cut = filter_choices(docs, max_keys=2, max_values=5)
    # keys held by most documents first; values in order, the rest counted
    assert [f["key"] for f in cut["filters"]] == ["model", "site"] and cut["more_keys"] == 1
    assert [v["value"] for v in cut["filters"][0]["values"]] == ["M-00", "M-01", "M-02", "M-03", "M-04"]
    assert cut["filters"][0]["more_values"] == 25 and cut["filters"][1]["more_values"] == 0
    whole = filter_choices(docs)
    assert [f["key"] for f in whole["filters"]] == ["model", "site", "line"] and whole["more_keys"] == 0
    assert "M-OLD" not in str(whole) and "plant" not in str(whole)
    # a library with no metadata keys offers no filter (the page then shows no controls)
    plain = [DocumentRecord(id="a", title="A", content_hash="h", status="current", source_type="manual", version="2")]
    assert filter_choices(plain) == {"filters": [], "more_keys": 0}
