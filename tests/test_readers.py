"""Documents with readers (docs/readers.md): a small library where an HR case, a security runbook, a
restricted notice and a restricted twin of a public procedure state values that would answer or
contradict questions, beside public documents. Two callers ask the same hand-written questions
(tests/data/readers_questions.jsonl): a reader of the groups, and a caller outside them.

For the outsider, no response field, audit record, log line, metrics label, filter choice or error
message names a hidden document's id, title or any of its distinctive values; for the reader, every
question is answered exactly as an unrestricted caller (a library without readers) is answered.
Through the Python API on SQLite, PostgreSQL (where it runs) and the Azure AI Search store's fake of
the wire contract; REST and the official MCP client with per-key groups (API_KEYS); the CLI. Signed-in
people on the web page, REST and MCP with bearer tokens: tests/test_readers_surfaces.py.
"""

from __future__ import annotations

import json
import logging
import shutil
import zipfile
from pathlib import Path

import pytest
from click.testing import CliRunner
from starlette.testclient import TestClient

from sourcegate.identity import Caller
from sourcegate.ingest.pipeline import Ingestor
from sourcegate.readers import ReadersError, parse_readers, readers_rule, unmarked_warning
from sourcegate.service import QueryError, SourceGate
from sourcegate.settings import Settings
from sourcegate.store import ReadersRule, open_store

HERE = Path(__file__).resolve().parent
LIBRARY = HERE / "fixtures" / "readers_library"
QUESTIONS = [json.loads(line) for line in (HERE / "data" / "readers_questions.jsonl").read_text().splitlines()
             if line.strip()]
KINDS = ("direct", "paraphrase", "filtered", "french", "false_premise", "twin")

READER = Caller(user_id="u-reader", name="Rita", groups=frozenset({"grp-hr", "grp-sec"}), via="token")
OUTSIDER = Caller(user_id="u-outsider", name="Otto", groups=frozenset({"grp-staff"}), via="token")
HIDDEN = {"hr/case-hr-2026-014.md", "security/runbook-breakglass.html", "security/pump-p200-bearings-bravo.md",
          "NOTICE-SOC-07"}
# What would tell an outsider that a hidden document exists: ids, titles, metadata, distinctive values.
SECRETS = [
    "case-hr-2026-014", "runbook-breakglass", "pump-p200-bearings-bravo", "notice-soc-07",
    "hr case hr-2026-014", "break-glass administrator access", "(site bravo)", "soc escalation contacts",
    "hr-2026-014", "kowalczyk", "marta", "jonas weber", "e-55821", "71,350", "18,400", "19 days", "24 months",
    "b-214", "14 may 2026", "9 march 2026", "2 april 2026", "unauthorised absence", "case-file", "restricted-hr",
    "bg-admin-7731", "bastion-zeta", "port 2298", "84 88 20 47", "every 12 days", "32 characters", "bypassed",
    "15 minutes", "extension 7319", "break-glass", "runbook",
    "1,350", "polyurea", "nlgi 3", "22 g", "bravo", "channel 6", "45 minutes", "70 °c",
    "ilse varga", "0800 555 0191", "640-118-27", "duty manager", "red line",
]
API_KEYS = {"reader": {"key": "reader-key-0123456789abcdef", "groups": ["grp-hr", "grp-sec"]},
            "outsider": {"key": "outsider-key-0123456789abcdef", "groups": ["grp-staff"]}}
MCP_KEY = "operator-key-0123456789abcdef"


def asked_text(item: dict) -> str:
    filters = item.get("filters") or {}
    return " ".join([item["q"], *filters.keys(), *map(str, filters.values())]).casefold()


def leaked(text: str, asked: str = "") -> list[str]:
    """The secrets `text` holds that the caller did not write in the question itself."""
    text = text.casefold()
    return [s for s in SECRETS if s in text and s not in asked]


def public_view(result) -> str:
    """Everything a caller is shown of an answer (not the random audit id or the timings)."""
    data = result.model_dump()
    data.pop("audit_id")
    data.pop("timings_ms")
    return json.dumps(data, ensure_ascii=False)


def summary(result) -> tuple:
    return (result.status, [p.id for p in result.evidence], [p.id for p in result.conflicts],
            [(x.id, x.reason) for x in result.excluded], result.answer, result.missing)


def ask(gate, item: dict, caller):
    """(summary, what the caller is shown, refusal message): a filter that cannot apply is refused."""
    try:
        result = gate.ask(item["q"], caller=caller, filters=item.get("filters"))
    except QueryError as e:
        return ("refused", str(e)), str(e), str(e)
    return summary(result), public_view(result), None


# -- the library on each store ----------------------------------------------------------------------

def _gate(store, embedder, home: Path, **settings) -> SourceGate:
    settings.setdefault("documents_without_readers", "everyone")
    s = Settings(_env_file=None, home=home, audit_log_path=home / "audit.jsonl", **settings)
    return SourceGate(s, store=store, embedder=embedder, adaptation=False)


def _ingest(store, embedder) -> None:
    report = Ingestor(store, embedder).ingest([LIBRARY])
    assert not report.failed and report.added == 10, report.summary()


@pytest.fixture(scope="module")
def sqlite_store(embedder, tmp_path_factory):
    store = open_store(tmp_path_factory.mktemp("readers-sqlite") / "index.db", embedder.id, embedder.dim)
    _ingest(store, embedder)
    yield store
    store.close()


@pytest.fixture(scope="module")
def postgres_store(embedder, postgres_server):
    import uuid

    import psycopg
    from store_servers import with_schema

    schema = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres_server, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    store = open_store(with_schema(postgres_server, schema), embedder.id, embedder.dim)
    _ingest(store, embedder)
    yield store
    store.close()
    with psycopg.connect(postgres_server, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA {schema} CASCADE")


@pytest.fixture(scope="module")
def azure_store(embedder):
    pytest.importorskip("azure.search.documents", reason="the Azure store needs azure-search-documents")
    from azure.core.credentials import AzureKeyCredential
    from fakes.azure_search import FakeSearchService, FakeSearchTransport

    from sourcegate.store.azure import AzureSearchStore

    service = FakeSearchService()
    store = AzureSearchStore("https://svc.search.windows.net", "readers", embedder.id, embedder.dim,
                             credential=AzureKeyCredential(service.api_key), transport=FakeSearchTransport(service))
    store.service = service
    _ingest(store, embedder)
    yield store
    store.close()


STORES = ("sqlite", "postgresql", "azure")
_GATES: dict[str, SourceGate] = {}
_BASELINE: dict[tuple[str, int], tuple] = {}


@pytest.fixture(scope="module")
def gates(request, embedder, tmp_path_factory):
    def get(name: str) -> SourceGate:
        if name not in _GATES:
            store = request.getfixturevalue({"sqlite": "sqlite_store", "postgresql": "postgres_store",
                                             "azure": "azure_store"}[name])
            _GATES[name] = _gate(store, embedder, tmp_path_factory.mktemp(f"readers-{name}"))
        return _GATES[name]

    yield get
    _GATES.clear()
    _BASELINE.clear()


def baseline(gate: SourceGate, store: str, n: int, item: dict) -> tuple:
    """The answer an unrestricted caller gets: the library as if no document named readers."""
    if (store, n) not in _BASELINE:
        _BASELINE[(store, n)] = ask(gate, item, None)[0]
    return _BASELINE[(store, n)]


def test_the_hand_written_questions():
    assert len(QUESTIONS) >= 200 and {q["kind"] for q in QUESTIONS} == set(KINDS)
    assert all(q["about"] in ("hr", "sec", "soc", "twin") for q in QUESTIONS)
    # the secrets are the hidden documents' own: no public document states one
    public = [p for p in LIBRARY.rglob("*") if p.is_file() and not str(p.relative_to(LIBRARY)).startswith(
        ("hr/", "security/"))]
    for p in public:
        text = p.read_text()
        if p.suffix == ".json":
            text = json.dumps([x for x in json.loads(text) if "readers" not in x])
        assert not leaked(text), (p, leaked(text))


# Questions in groups of about a dozen per test: every question on SQLite, every third on the other
# stores here (slower stores); tests/test_readers_surfaces.py asks them the other two thirds.
PER_TEST = 12
GROUPS = [("sqlite", kind, part) for kind in KINDS
          for part in range(-(-sum(q["kind"] == kind for q in QUESTIONS) // PER_TEST))]
GROUPS += [(store, kind, None) for store in ("postgresql", "azure") for kind in KINDS]


def chosen(store: str, kind: str, part: int | None) -> list[tuple[int, dict]]:
    asked = [(n, q) for n, q in enumerate(QUESTIONS) if q["kind"] == kind]
    return asked[::3] if part is None else asked[part * PER_TEST:(part + 1) * PER_TEST]


def group_id(group) -> str:
    store, kind, part = group
    return f"{store}-{kind}" + ("" if part is None else f"-{part}")


@pytest.mark.parametrize("group", GROUPS, ids=group_id)
def test_the_outsider_is_never_shown_a_hidden_document(gates, group):
    outsider_is_never_shown_a_hidden_document(gates(group[0]), chosen(*group))


@pytest.mark.parametrize("group", GROUPS, ids=group_id)
def test_the_reader_is_answered_as_without_readers(gates, group):
    reader_is_answered_as_without_readers(gates(group[0]), group[0], chosen(*group))


def outsider_is_never_shown_a_hidden_document(gate: SourceGate, asked: list[tuple[int, dict]]) -> None:
    for n, item in asked:
        (shown, view, refusal) = ask(gate, item, OUTSIDER)
        assert not leaked(view, asked_text(item)), (item, leaked(view, asked_text(item)), view)
        if refusal is None:
            ids = {p[0].split("#")[0] for p in shown[3]} | {i.split("#")[0] for i in shown[1] + shown[2]}
            assert not ids & HIDDEN, item
    # nor does its audit record name one (the question aside)
    for rec in (json.loads(line) for line in gate.settings.audit_path.read_text().splitlines()):
        if (rec.get("caller") or {}).get("user_id") == OUTSIDER.user_id:
            assert not {c["doc_id"] for c in rec["candidates"]} & HIDDEN
            assert rec["readers"] == {"trimmed": True, "ids": 2, "documents_without_readers": "everyone"}
            assert not leaked(json.dumps({k: v for k, v in rec.items() if k not in ("query", "parts")}),
                              rec["query"].casefold())


def reader_is_answered_as_without_readers(gate: SourceGate, store: str, asked: list[tuple[int, dict]]) -> None:
    for n, item in asked:
        assert ask(gate, item, READER)[0] == baseline(gate, store, n, item), item


def test_the_questions_reach_the_hidden_documents(gates):
    """For a caller who may read them, the hidden documents are the sources of many answers: the
    questions do surface them."""
    gate = gates("sqlite")
    cited = sum(1 for n, item in enumerate(QUESTIONS) if (b := baseline(gate, "sqlite", n, item))[0] != "refused"
                and {i.split("#")[0] for i in b[1] + b[2]} & HIDDEN)
    assert cited >= len(QUESTIONS) // 2, cited  # 134 of 216 when written


def test_filters_and_their_errors_name_only_what_the_caller_may_read(gates):
    gate = gates("sqlite")
    mine = {f["key"]: [v["value"] for v in f["values"]] for f in gate.filter_choices(OUTSIDER)["filters"]}
    assert mine == {"department": ["human-resources", "it-security"], "site": ["Alpha"]}
    everything = {f["key"] for f in gate.filter_choices(READER)["filters"]}
    assert everything == {"case", "confidentiality", "department", "site", "system"}
    assert gate.filter_choices(READER) == gate.filter_choices(None)
    with pytest.raises(QueryError) as e:
        gate.ask("How often are the bearings greased?", caller=OUTSIDER, filters={"site": "Bravo"})
    assert str(e.value) == "no document matches site=Bravo (archived revisions are left out): site has Alpha"
    with pytest.raises(QueryError) as e:
        gate.ask("What settlement was offered?", caller=OUTSIDER, filters={"case": "HR-2026-014"})
    assert str(e.value).startswith("unknown filter key 'case': the library's documents have doc_id, source_type, "
                                   "version, status, department, site")
    with pytest.raises(QueryError) as e:
        gate.ask("What is the salary?", caller=OUTSIDER, filters={"source_type": "case-file"})
    assert "case-file" not in str(e.value).split(":", 1)[1] and not leaked(str(e.value).split(":", 1)[1])


def test_a_hidden_twin_does_not_change_how_a_public_passage_is_judged(gates):
    gate = gates("sqlite")
    rule = readers_rule(OUTSIDER, "everyone")
    chunk = next(c for c in gate.store.passage_ids() if c.startswith("procedures/pump-p200-bearings.md#"))
    public = gate.store.get_chunks([chunk])[0]
    assert {tw["doc"] for tw in public.passage_features["twins"]} == {"security/pump-p200-bearings-bravo.md"}
    gate._hide_unreadable_twins([public], rule)
    assert public.passage_features["twins"] == []


def test_documents_without_readers_are_read_by_nobody_by_default(sqlite_store, embedder, tmp_path):
    gate = _gate(sqlite_store, embedder, tmp_path, documents_without_readers="nobody")
    leave = "How many days of paid annual leave does an employee receive?"
    assert gate.ask(leave, caller=OUTSIDER).status == "insufficient_evidence"
    assert gate.ask(leave, caller=OUTSIDER).evidence == [] and gate.filter_choices(OUTSIDER)["filters"] == []
    # the reader reads the documents that name its groups only
    hr = gate.ask(leave, caller=READER)
    assert {p.doc_id for p in hr.evidence + hr.conflicts} | {x.doc_id for x in hr.excluded} <= HIDDEN
    # unrestricted callers (MCP_API_KEY, the command line) read every document
    assert gate.ask(leave, caller=Caller(via="local")).evidence[0].doc_id == "policies/annual-leave.md"
    assert gate.ask(leave, caller=Caller(via="api_key", all_groups=True)).evidence[0].doc_id == "policies/annual-leave.md"
    # and serve says so at start, with the ways out
    settings = Settings(_env_file=None, home=tmp_path, api_keys_secret=json.dumps(API_KEYS))
    warning = unmarked_warning(settings, sqlite_store.list_documents())
    assert warning.startswith("6 of the library's 10 documents name no readers") and "DOCUMENTS_WITHOUT_READERS" in warning
    assert unmarked_warning(settings.model_copy(update={"documents_without_readers": "everyone"}),
                            sqlite_store.list_documents()) is None
    every = json.dumps({"ops": {"key": "ops-key-0123456789abcdef", "groups": ["*"]}})
    assert unmarked_warning(Settings(_env_file=None, home=tmp_path, api_keys_secret=every),
                            sqlite_store.list_documents()) is None


# -- REST, MCP and the logs and metrics ------------------------------------------------------------

@pytest.fixture(scope="module")
def app(gates):
    from sourcegate.server.app import create_app

    gate = gates("sqlite")
    settings = gate.settings.model_copy(update={"api_keys_secret": json.dumps(API_KEYS), "mcp_api_key": MCP_KEY,
                                                "mcp_allowed_hosts": "testserver"})
    return create_app(settings, gate)


def test_rest_with_per_key_groups(app, gates, caplog):
    gate = gates("sqlite")
    chosen = QUESTIONS[::8]
    with TestClient(app) as client:
        outsider = {"x-api-key": API_KEYS["outsider"]["key"]}
        reader = {"x-api-key": API_KEYS["reader"]["key"]}
        caplog.clear()
        with caplog.at_level(logging.DEBUG):
            for item in chosen:
                body = {"query": item["q"], **({"filters": item["filters"]} if "filters" in item else {})}
                resp = client.post("/v1/ask", json=body, headers=outsider)
                assert resp.status_code in (200, 422), resp.text
                assert not leaked(resp.text, asked_text(item)), (item, resp.text)
            stream = client.post("/v1/ask/stream", json={"query": "What is the incident bridge code?"}, headers=outsider)
            assert stream.status_code == 200 and not leaked(stream.text, "what is the incident bridge code?")
            filters = client.get("/v1/filters", headers=outsider)
            assert filters.status_code == 200 and not leaked(filters.text)
        lines = "\n".join(json.dumps({k: v for k, v in vars(r).items() if not k.startswith("_")}, default=str)
                          + r.getMessage() for r in caplog.records)
        assert caplog.records and not leaked(lines)
        metrics = client.get("/metrics", headers={"x-api-key": MCP_KEY})
        assert metrics.status_code == 200 and not leaked(metrics.text)
        for n, item in enumerate(chosen):
            body = {"query": item["q"], **({"filters": item["filters"]} if "filters" in item else {})}
            resp = client.post("/v1/ask", json=body, headers=reader)
            expected = baseline(gate, "sqlite", QUESTIONS.index(item), item)
            if expected[0] == "refused":
                assert resp.status_code == 422
                continue
            got = resp.json()
            assert (got["status"], [p["id"] for p in got["evidence"]], got["answer"]) == \
                (expected[0], expected[1], expected[4]), item
        every = client.get("/v1/filters", headers=reader).json()
        assert {f["key"] for f in every["filters"]} >= {"case", "system"}


def test_feedback_does_not_confirm_a_hidden_passage(app, gates):
    """Feedback naming a passage outside the answer is checked against the library: for a caller
    outside its readers, a hidden passage is one the library does not hold."""
    gate = gates("sqlite")
    hidden = next(c for c in gate.store.passage_ids() if c.startswith("hr/case-hr-2026-014.md#"))
    public = next(c for c in gate.store.passage_ids() if c.startswith("policies/annual-leave.md#"))
    with TestClient(app) as client:
        outsider = {"x-api-key": API_KEYS["outsider"]["key"]}
        answer = client.post("/v1/ask", json={"query": "When does the canteen open?"}, headers=outsider).json()
        refused = client.post("/v1/feedback", headers=outsider, json={
            "audit_id": answer["audit_id"], "verdict": "wrong", "passage_id": hidden})
        missing = client.post("/v1/feedback", headers=outsider, json={
            "audit_id": answer["audit_id"], "verdict": "wrong", "passage_id": hidden.replace("#", "#9")})
        assert refused.status_code == missing.status_code == 400
        assert refused.json()["error"] == missing.json()["error"].replace(hidden.replace("#", "#9"), hidden)
        assert client.post("/v1/feedback", headers=outsider, json={
            "audit_id": answer["audit_id"], "verdict": "wrong", "passage_id": public}).status_code == 201


def test_the_mcp_client_with_per_key_groups(app, gates):
    import httpx2
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client
    from test_server_fixtures import run_async

    questions = [q["q"] for q in QUESTIONS if q["kind"] == "direct"][::3]

    async def call(key: str):
        async with app.router.lifespan_context(app):
            http = httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url="http://testserver",
                                      headers={"x-api-key": key})
            async with http, streamable_http_client("http://testserver/mcp", http_client=http) as (r, w):
                async with ClientSession(r, w) as session:
                    await session.initialize()
                    return [await session.call_tool("search_procedures", {"query": q}) for q in questions]

    outsider = run_async(lambda: call(API_KEYS["outsider"]["key"]), 120)
    reader = run_async(lambda: call(API_KEYS["reader"]["key"]), 120)
    from_hidden = 0
    for q, mine, theirs in zip(questions, outsider, reader):
        assert not mine.is_error and not theirs.is_error
        text = json.dumps(mine.structured_content) + "".join(c.text for c in mine.content if hasattr(c, "text"))
        assert not leaked(text, q.casefold()), (q, leaked(text, q.casefold()))
        ids = {p["doc_id"] for p in theirs.structured_content["evidence"] + theirs.structured_content["conflicts"]}
        from_hidden += bool(ids & HIDDEN)
    assert from_hidden >= len(questions) // 2


# -- ingest: every metadata path, and --readers --------------------------------------------------

def _docx_with_readers(path: Path, readers: str) -> None:
    """A DOCX whose custom property Readers (File > Properties > Custom) is `readers`."""
    import docx

    d = docx.Document()
    d.add_heading("Night shift rota for the control room", 1)
    d.add_paragraph("The night shift of the control room is staffed by two operators from 22:00 to 06:00.")
    d.save(path)
    custom = ('<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
              '<Properties xmlns="http://schemas.openxmlformats.org/officeDocument/2006/custom-properties" '
              'xmlns:vt="http://schemas.openxmlformats.org/officeDocument/2006/docPropsVTypes">'
              '<property fmtid="{D5CDD505-2E9C-101B-9397-08002B2CF9AE}" pid="2" name="Readers">'
              f'<vt:lpwstr>{readers}</vt:lpwstr></property></Properties>')
    with zipfile.ZipFile(path) as z:
        parts = {n: z.read(n) for n in z.namelist()}
    parts["docProps/custom.xml"] = custom.encode()
    parts["[Content_Types].xml"] = parts["[Content_Types].xml"].replace(
        b"</Types>", b'<Override PartName="/docProps/custom.xml" '
                     b'ContentType="application/vnd.openxmlformats-officedocument.custom-properties+xml"/></Types>')
    parts["_rels/.rels"] = parts["_rels/.rels"].replace(
        b"</Relationships>", b'<Relationship Id="rIdCustom" Type="http://schemas.openxmlformats.org/officeDocument/'
                             b'2006/relationships/custom-properties" Target="docProps/custom.xml"/></Relationships>')
    with zipfile.ZipFile(path, "w") as z:
        for name, data in parts.items():
            z.writestr(name, data)


def _pdf_with_readers(path: Path, readers: str) -> None:
    from pypdf import PdfWriter
    from reportlab.pdfgen import canvas

    plain = path.with_suffix(".plain.pdf")
    c = canvas.Canvas(str(plain))
    c.drawString(72, 720, "Payroll calendar")
    c.drawString(72, 700, "Salaries are paid on the 25th of each month.")
    c.save()
    writer = PdfWriter(clone_from=plain)
    writer.add_metadata({"/Readers": readers, "/Title": "Payroll calendar"})
    writer.write(path)
    plain.unlink()


def test_readers_come_from_every_metadata_path_and_ingest_readers(tmp_path, monkeypatch):
    from sourcegate.cli import cli

    lib = tmp_path / "lib"
    shutil.copytree(LIBRARY, lib)
    _docx_with_readers(lib / "rota.docx", "grp-ops; u-42")
    _pdf_with_readers(lib / "payroll.pdf", "grp-hr,grp-payroll")
    (lib / "notes.md").write_text("---\nreaders: grp-a, grp-b\n---\n# Notes\n\nThe canteen opens at 11:30.\n")
    (lib / "open.txt").write_text("Visitors sign in at the front desk.\n")
    home = tmp_path / "home"
    monkeypatch.setenv("SOURCEGATE_HOME", str(home))
    runner = CliRunner()
    done = runner.invoke(cli, ["ingest", str(lib), "--readers", "grp-staff, grp-all"])
    assert done.exit_code == 0, done.output
    from sourcegate.embed import get_embedder

    emb = get_embedder(Settings(_env_file=None, home=home).embedder)
    store = open_store(home / "index.db", emb.id, emb.dim)
    readers = {d.id: d.readers for d in store.list_documents()}
    store.close()
    assert readers["hr/case-hr-2026-014.md"] == ["grp-hr"]  # front matter (a YAML list)
    assert readers["security/runbook-breakglass.html"] == ["grp-sec"]  # <meta name="readers">
    assert readers["security/pump-p200-bearings-bravo.md"] == ["grp-sec"]  # sidecar
    assert readers["NOTICE-SOC-07"] == ["grp-sec"]  # a JSON export item
    assert readers["rota.docx"] == ["grp-ops", "u-42"]  # a DOCX custom property
    assert readers["payroll.pdf"] == ["grp-hr", "grp-payroll"]  # a PDF's /Readers
    assert readers["notes.md"] == ["grp-a", "grp-b"]  # front matter, as one text
    # --readers: the documents that name none of their own
    assert readers["open.txt"] == readers["policies/annual-leave.md"] == readers["NOTICE-VPN-01"] == ["grp-all", "grp-staff"]
    # the command line's caller is the operator: it reads every document
    ask = runner.invoke(cli, ["ask", "--json", "What settlement was offered in case HR-2026-014?"])
    assert ask.exit_code == 0 and "18,400" in ask.output, ask.output
    # a readers value that cannot be read fails its file, named: never read as naming no readers
    (lib / "bad.md").write_text("---\nreaders: {hr: yes}\n---\n# Bad\n\nSome text.\n")
    again = runner.invoke(cli, ["ingest", str(lib)])
    assert again.exit_code == 1 and "bad.md" in again.output and "readers must be" in again.output, again.output
    refused = runner.invoke(cli, ["ingest", str(lib), "--readers", "grp hr's"])
    assert refused.exit_code == 2 and "--readers" in refused.output


def test_reader_ids_are_checked():
    assert parse_readers(["grp-hr", "u-1", "grp-hr"]) == ["grp-hr", "u-1"]
    assert parse_readers("grp-hr; u-1 ,grp-sec") == ["grp-hr", "grp-sec", "u-1"]
    assert parse_readers(None) == [] and parse_readers([]) == []
    for bad in ({"a": 1}, ["a b"], ["it's"], [True], ["x" * 201]):
        with pytest.raises(ReadersError):
            parse_readers(bad)
    assert readers_rule(None) is None and readers_rule(Caller(via="local")) is None
    assert readers_rule(OUTSIDER) == ReadersRule(frozenset({"u-outsider", "grp-staff"}), unmarked=False)
    assert readers_rule(OUTSIDER, "everyone").unmarked
    # app roles are ids too (Entra ID's `roles` claim has no overage)
    assert readers_rule(Caller(user_id="u-9", roles=frozenset({"HR.Reader"}), via="token")).admits(["HR.Reader"])


def test_replay_re_routes_the_trimmed_candidates(gates, tmp_path):
    from sourcegate.cli import cli

    gate = gates("sqlite")
    gate.ask("What settlement was offered in case HR-2026-014?", caller=OUTSIDER)
    records = [json.loads(line) for line in gate.settings.audit_path.read_text().splitlines()]
    mine = [r for r in records if (r.get("caller") or {}).get("user_id") == OUTSIDER.user_id][-1]
    assert mine["readers"]["trimmed"] and not {c["doc_id"] for c in mine["candidates"]} & HIDDEN
    done = CliRunner().invoke(cli, ["replay", str(gate.settings.audit_path), "--json"])
    assert done.exit_code == 0, done.output
    report = json.loads(done.output)
    assert report["answer_changes"] == [] and not leaked(json.dumps(report["passage_changes"]))
