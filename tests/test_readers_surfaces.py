"""Documents with readers, as two signed-in people meet them: on the readers library of
tests/test_readers.py, the OpenID provider of tests/test_web_signin.py signs in user A (in the hidden
documents' groups) and user B (in neither). Each asks, in real Chromium, the crafted questions that
surface the hidden documents (direct, paraphrased, French, a false premise, and filtered by their
metadata through the page's own filter selects): B's page, its whole DOM and every response the page
received never name a hidden document's id, title or distinctive values; A's page cites them, and A is
answered as an unrestricted caller is. The same two people then ask through REST and the official MCP
client with their own bearer tokens (signed by the provider), not with per-key groups.

And the rest of the crafted questions on the slower stores: tests/test_readers.py asks every third on
PostgreSQL and the Azure store's fake; the other two thirds are asked here, so every one of the 216
questions is asked on every store (about a minute and a half on a busy two-core machine, which would
take tests/test_readers.py past three minutes).
"""

from __future__ import annotations

import json
import logging
import re

import pytest
from starlette.testclient import TestClient
from test_auth_tokens import RESOURCE
from test_readers import (  # noqa: F401  (gates and the stores are fixtures)
    HIDDEN, KINDS, OUTSIDER, QUESTIONS, READER, asked_text, azure_store, baseline, gates, leaked,
    outsider_is_never_shown_a_hidden_document, postgres_store, reader_is_answered_as_without_readers,
    sqlite_store)
from test_web_signin import CLIENT_ID, SESSION_KEY, TENANT, Provider, _chromium

from sourcegate.audit import read_records
from sourcegate.server.app import create_app

# Two people of the same tenant; A's groups are the reader's of tests/test_readers.py.
USER_A = {"oid": "a0000000-1111-4222-8333-00000000000a", "name": "Alma Reyes",
          "preferred_username": "alma@contoso.example", "groups": sorted(READER.groups)}
USER_B = {"oid": "b0000000-1111-4222-8333-00000000000b", "name": "Bruno Costa",
          "preferred_username": "bruno@contoso.example", "groups": sorted(OUTSIDER.groups)}
TIMEOUT = 120


@pytest.fixture(scope="module")
def provider():
    p = Provider()
    yield p
    p.close()


def signing_in(provider: Provider, user: dict) -> None:
    """The next sign-in at the provider is `user`'s (its ID token and its access token)."""
    who = {k: user[k] for k in ("oid", "name", "preferred_username")}
    provider.id_token_overrides = who
    provider.access_overrides = {**who, "groups": user["groups"], "roles": []}


def token_of(provider: Provider, user: dict) -> str:
    signing_in(provider, user)
    return provider.access_token()


@pytest.fixture(scope="module")
def gate(gates):
    return gates("sqlite")


@pytest.fixture(scope="module")
def settings(gate, provider):
    """The readers library served with an issuer: the page signs in, /v1 and /mcp take its tokens."""
    return gate.settings.model_copy(update={
        "auth_issuer": provider.url, "auth_resource": RESOURCE, "auth_tenant_id": TENANT,
        "auth_web_client_id": CLIENT_ID, "auth_web_session_secret": SESSION_KEY, "mcp_allowed_hosts": "testserver"})


def cites_hidden(result: tuple) -> bool:
    return result[0] != "refused" and bool({i.split("#")[0] for i in result[1] + result[2]} & HIDDEN)


def surfacing(gate, kind: str, count: int, keys: set[str] | None = None) -> list[tuple[int, dict]]:
    """The first `count` questions of `kind` an unrestricted caller is answered from a hidden document
    (filtered ones: by keys among `keys`)."""
    found = []
    for n, item in enumerate(QUESTIONS):
        if item["kind"] != kind or (keys is not None and not set(item.get("filters") or {}) <= keys):
            continue
        if cites_hidden(baseline(gate, "sqlite", n, item)):
            found.append((n, item))
        if len(found) == count:
            break
    assert len(found) == count, (kind, found)
    return found


def page_questions(gate) -> list[tuple[int, dict]]:
    selects = {f["key"] for f in gate.filter_choices(READER)["filters"]}  # the selects the reader's page shows
    picked = [x for kind in ("direct", "paraphrase", "french", "false_premise") for x in surfacing(gate, kind, 2)]
    return picked + surfacing(gate, "filtered", 4, selects)


# ---- the page in real Chromium

# Every response the page receives, as text, kept in window.__received; __pending counts the requests
# still open (the page's own scripts are left as they are: this is added by the DevTools protocol).
RECORDER = """
window.__received = []; window.__pending = 0;
const send = XMLHttpRequest.prototype.send;
XMLHttpRequest.prototype.send = function (...args) {
  window.__pending++;
  this.addEventListener("loadend", () => { window.__received.push(this.responseText); window.__pending--; });
  return send.apply(this, args);
};
const plainFetch = window.fetch;
window.fetch = async (...args) => {
  window.__pending++;
  try {
    const resp = await plainFetch(...args);
    window.__received.push(await resp.clone().text());
    return resp;
  } finally { window.__pending--; }
};
"""

# Picks `value` in the filter select of `key`: "offered" when the page lists it; otherwise the option
# is added by hand (as anyone can with the browser's tools) and "added" is returned. What was added
# is taken away again before the next question (CLEAR), so a page's text is the server's only.
PICK = """((key, value) => {
  const box = document.getElementById("filters");
  let select = box.querySelector(`select[data-key="${key}"]`);
  let how = "offered";
  if (!select) {
    select = document.createElement("select");
    select.dataset.key = key;
    select.dataset.added = how = "added";
    box.append(select);
  }
  if (![...select.options].some(o => o.value === value)) {
    const option = new Option(value, value);
    option.dataset.added = how = "added";
    select.append(option);
  }
  select.value = value;
  return how;
})(%s, %s)"""

CLEAR = ('(document.querySelectorAll("#filters [data-added]").forEach(e => e.remove()), '
         'document.querySelectorAll("#filters select").forEach(s => { s.value = ""; }), "any")')
DONE = ('document.getElementById("status").textContent.length > 1 && !document.getElementById("ask").disabled '
        '&& window.__pending === 0 ? "done" : ""')
WHOLE_PAGE = ('(() => { const copy = document.documentElement.cloneNode(true); '
              'for (const s of copy.querySelectorAll("script, style")) s.remove(); '
              'return copy.outerHTML + "\\n" + document.body.innerText; })()')


def stream_result(received: list[str]) -> dict | None:
    """The `result` event of the answer stream among the responses the page received."""
    for text in received:
        found = re.search(r"^event: result\ndata: (.*)$", text, re.M)
        if found:
            return json.loads(found.group(1))
    return None


def ask_on_the_page(base: str, user: dict, questions, provider, profile) -> dict:
    """Signs `user` in through the page's Sign in link and asks each question on the page: for each,
    the page's whole text, the responses it received, and how each filter value was picked; and the
    responses received before the first question (the session, the filter choices)."""
    from test_ask_stream import headless_page

    signing_in(provider, user)
    seen = {"questions": []}
    with headless_page("about:blank", profile, timeout=TIMEOUT) as wait_for:
        wait_for.call("Page.enable")  # without it, Chromium runs no script added on new documents
        wait_for.call("Page.addScriptToEvaluateOnNewDocument", source=RECORDER)
        wait_for.call("Page.navigate", url=f"{base}/auth/login")
        seen["who"] = wait_for('location.pathname === "/" && !document.getElementById("who").hidden '
                               '&& window.__pending === 0 ? document.getElementById("who").innerText : ""')
        seen["selects"] = json.loads(wait_for(
            'JSON.stringify(Object.fromEntries([...document.querySelectorAll("#filters select")].map('
            's => [s.dataset.key, [...s.options].map(o => o.value).filter(Boolean)])))'))
        seen["on_load"] = json.loads(wait_for("JSON.stringify(window.__received.splice(0))"))
        for n, item in questions:
            wait_for(CLEAR)
            picked = {k: wait_for(PICK % (json.dumps(k), json.dumps(v))) for k, v in (item.get("filters") or {}).items()}
            wait_for(f'(document.getElementById("query").value = {json.dumps(item["q"])}, '
                     'document.getElementById("ask").click(), "asked")')
            wait_for(DONE)
            seen["questions"].append({"n": n, "item": item, "picked": picked, "page": wait_for(WHOLE_PAGE),
                                      "received": json.loads(wait_for("JSON.stringify(window.__received.splice(0))"))})
    return seen


@pytest.mark.skipif(_chromium() is None, reason="chromium is not installed (apt-get install chromium) - real-browser test skipped")
def test_two_people_on_the_page(gate, settings, provider, tmp_path):
    from test_server_fixtures import running_server

    questions = page_questions(gate)
    with running_server(create_app(settings, gate)) as base:
        a = ask_on_the_page(base, USER_A, questions, provider, tmp_path / "a")
        b = ask_on_the_page(base, USER_B, questions, provider, tmp_path / "b")
    assert a["who"].startswith(f"Signed in as {USER_A['name']}") and b["who"].startswith(f"Signed in as {USER_B['name']}")

    # B: the page's selects offer only what B may read; nothing B's page shows or receives names a
    # hidden document, even for a filter value B added by hand
    assert b["selects"] == {"department": ["human-resources", "it-security"], "site": ["Alpha"]}
    assert not leaked(json.dumps(b["on_load"]))
    added = 0
    for seen in b["questions"]:
        asked = asked_text(seen["item"])
        assert not leaked(seen["page"], asked), (seen["item"], leaked(seen["page"], asked))
        assert seen["received"] and not leaked(json.dumps(seen["received"]), asked), seen["item"]
        result = stream_result(seen["received"])
        if result is not None:
            cited = {p["doc_id"] for p in result["evidence"] + result["conflicts"] + result["excluded"]}
            assert not cited & HIDDEN, seen["item"]
        added += "added" in seen["picked"].values()
    assert added, "some filter values are the hidden documents' own: B's page does not offer them"

    # A: every value is offered, the hidden documents are cited, as for an unrestricted caller
    assert {"case", "system"} <= set(a["selects"]) and "Bravo" in a["selects"]["site"]
    for seen in a["questions"]:
        assert set(seen["picked"].values()) <= {"offered"}, seen
        expected = baseline(gate, "sqlite", seen["n"], seen["item"])
        got = stream_result(seen["received"])
        assert got is not None, seen["received"]
        assert (got["status"], [p["id"] for p in got["evidence"]], [p["id"] for p in got["conflicts"]],
                got["answer"]) == (expected[0], expected[1], expected[2], expected[4]), seen["item"]
        assert leaked(seen["page"]), ("the page cites a hidden document", seen["item"])

    # the audit records name each person as the token says, asking from the page
    web = [rec for _, rec, _ in read_records(settings.audit_path) if rec and rec.get("interface") == "web"]
    asked_by = {rec["caller"]["user_id"] for rec in web[-2 * len(questions):]}
    assert asked_by == {USER_A["oid"], USER_B["oid"]}


# ---- REST and the official MCP client, with each person's bearer token

def test_two_people_through_rest_with_their_tokens(gate, settings, provider, caplog):
    chosen = [(n, q) for n, q in enumerate(QUESTIONS)][1::6]
    a = {"authorization": f"Bearer {token_of(provider, USER_A)}"}
    b = {"authorization": f"Bearer {token_of(provider, USER_B)}"}
    with TestClient(create_app(settings, gate)) as client:
        with caplog.at_level(logging.DEBUG):
            for _, item in chosen:
                body = {"query": item["q"], **({"filters": item["filters"]} if "filters" in item else {})}
                resp = client.post("/v1/ask", json=body, headers=b)
                assert resp.status_code in (200, 422), resp.text
                assert not leaked(resp.text, asked_text(item)), (item, resp.text)
            filters = client.get("/v1/filters", headers=b)
            assert filters.status_code == 200 and not leaked(filters.text)
        lines = "\n".join(json.dumps({k: v for k, v in vars(r).items() if not k.startswith("_")}, default=str)
                          + r.getMessage() for r in caplog.records)
        assert caplog.records and not leaked(lines)
        from_hidden = 0
        for n, item in chosen:
            body = {"query": item["q"], **({"filters": item["filters"]} if "filters" in item else {})}
            resp = client.post("/v1/ask", json=body, headers=a)
            expected = baseline(gate, "sqlite", n, item)
            if expected[0] == "refused":
                assert resp.status_code == 422, resp.text
                continue
            got = resp.json()
            assert (got["status"], [p["id"] for p in got["evidence"]], [p["id"] for p in got["conflicts"]],
                    got["answer"]) == (expected[0], expected[1], expected[2], expected[4]), item
            from_hidden += cites_hidden(expected)
        assert from_hidden >= len(chosen) // 3, from_hidden
    records = [rec for _, rec, _ in read_records(settings.audit_path) if rec and rec.get("interface") == "rest"]
    mine = {rec["caller"]["user_id"]: rec for rec in records[-2 * len(chosen):]}
    assert set(mine) == {USER_A["oid"], USER_B["oid"]}
    assert mine[USER_B["oid"]]["caller"]["via"] == "token" and mine[USER_B["oid"]]["readers"]["trimmed"]


def test_two_people_through_the_mcp_client_with_their_tokens(gate, settings, provider):
    from test_server_fixtures import mcp_tool_calls, run_async

    app = create_app(settings, gate)
    questions = [q["q"] for q in QUESTIONS if q["kind"] in ("direct", "french")][1::3]

    async def call(token: str):
        return await mcp_tool_calls(app, token, "search_procedures", [{"query": q} for q in questions])

    b = run_async(lambda: call(token_of(provider, USER_B)), TIMEOUT)
    a = run_async(lambda: call(token_of(provider, USER_A)), TIMEOUT)
    from_hidden = 0
    for q, mine, theirs in zip(questions, b, a):
        assert not mine.is_error and not theirs.is_error
        text = json.dumps(mine.structured_content) + "".join(c.text for c in mine.content if hasattr(c, "text"))
        assert not leaked(text, q.casefold()), (q, leaked(text, q.casefold()))
        ids = {p["doc_id"] for p in theirs.structured_content["evidence"] + theirs.structured_content["conflicts"]}
        from_hidden += bool(ids & HIDDEN)
    assert from_hidden >= len(questions) // 2, from_hidden


# ---- the rest of the crafted questions on PostgreSQL and the Azure store's fake

THE_REST = [(store, kind, offset) for store in ("postgresql", "azure") for kind in KINDS for offset in (1, 2)]


def the_rest(store: str, kind: str, offset: int) -> list[tuple[int, dict]]:
    """The questions of `kind` that tests/test_readers.py does not ask on `store` (it asks [::3])."""
    return [(n, q) for n, q in enumerate(QUESTIONS) if q["kind"] == kind][offset::3]


def rest_id(group) -> str:
    store, kind, offset = group
    return f"{store}-{kind}-{offset}"


def test_every_question_is_asked_on_every_store():
    from test_readers import GROUPS, chosen

    for store in ("postgresql", "azure"):
        asked = [n for g in GROUPS if g[0] == store for n, _ in chosen(*g)]
        asked += [n for g in THE_REST if g[0] == store for n, _ in the_rest(*g)]
        assert sorted(asked) == list(range(len(QUESTIONS))), store


@pytest.mark.parametrize("group", THE_REST, ids=rest_id)
def test_the_outsider_is_never_shown_a_hidden_document(gates, group):
    outsider_is_never_shown_a_hidden_document(gates(group[0]), the_rest(*group))


@pytest.mark.parametrize("group", THE_REST, ids=rest_id)
def test_the_reader_is_answered_as_without_readers(gates, group):
    reader_is_answered_as_without_readers(gates(group[0]), group[0], the_rest(*group))
