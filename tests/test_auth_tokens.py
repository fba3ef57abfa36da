"""Callers with an identity: access tokens signed with keys made here, the issuer's key set served by
a local HTTP server, checked on /v1 (REST) and /mcp (the official MCP client) with real
cryptography; and API keys, each with the groups it may read."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx2
import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from pydantic import ValidationError
from starlette.testclient import TestClient
from test_server_fixtures import make_gate, make_settings, mcp_tool_calls, run_async

from sourcegate.audit import read_records
from sourcegate.identity import Caller, caller_from_claims
from sourcegate.server.app import create_app, key_problem
from sourcegate.settings import Settings

RESOURCE = "http://testserver/mcp"
TENANT = "72f988bf-0000-4000-8000-000000000001"
USER = "d1f0c2a4-1111-4222-8333-444455556666"
GROUPS = ["0f5a1c7e-aaaa-4bbb-8ccc-000000000001", "0f5a1c7e-aaaa-4bbb-8ccc-000000000002"]
MCP_KEY = "service-key-0123456789abcdef"
TEAM_KEY = "team-key-0123456789abcdef012345"
Q = "How often should I grease the bearings on pump P-200?"
TIMEOUT = 60


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _jwk(private, kid: str) -> dict:
    jwk = json.loads(jwt.algorithms.get_default_algorithms()["RS256" if isinstance(private, rsa.RSAPrivateKey)
                                                                else "ES256"].to_jwk(private.public_key()))
    return {**jwk, "kid": kid, "use": "sig"}


class Issuer:
    """An OpenID Connect issuer's public side: its discovery document and its key set (JWKS),
    served over HTTP on 127.0.0.1, counting the fetches of the key set."""

    def __init__(self):
        self.rsa = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.ec = ec.generate_private_key(ec.SECP256R1())
        self.other = rsa.generate_private_key(public_exponent=65537, key_size=2048)  # never published
        self.keys = [_jwk(self.rsa, "rsa-1"), _jwk(self.ec, "ec-1")]
        self.jwks_fetches = 0
        issuer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802
                if self.path == "/jwks":
                    issuer.jwks_fetches += 1
                    body = {"keys": issuer.keys}
                elif self.path == "/.well-known/openid-configuration":
                    body = {"issuer": issuer.url, "jwks_uri": issuer.url + "/jwks"}
                else:
                    self.send_error(404)
                    return
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def claims(self, **overrides) -> dict:
        now = int(time.time())
        claims = {"iss": self.url, "aud": RESOURCE, "exp": now + 600, "nbf": now - 10, "iat": now - 10,
                  "oid": USER, "sub": "pairwise-subject", "tid": TENANT, "groups": GROUPS, "roles": ["Reader"],
                  "preferred_username": "ana@contoso.example", "scp": "ask"}
        claims.update(overrides)
        return {k: v for k, v in claims.items() if v is not None}

    def token(self, key=None, kid: str = "rsa-1", alg: str = "RS256", **overrides) -> str:
        return jwt.encode(self.claims(**overrides), key or self.rsa, algorithm=alg, headers={"kid": kid})

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def issuer():
    i = Issuer()
    yield i
    i.close()


@pytest.fixture(scope="module")
def gate(tmp_path_factory):
    # the demo library names no readers: every caller reads it (docs/readers.md; tests/test_readers.py
    # covers documents with readers and the default, nobody)
    g = make_gate(make_settings(tmp_path_factory.mktemp("auth") / "audit.jsonl", documents_without_readers="everyone"))
    yield g
    g.close()


class Spy:
    """Counts the questions that reach the service (a refused request must reach none)."""

    def __init__(self, gate, monkeypatch):
        self.calls: list[dict] = []
        real = gate.ask

        def ask(query, **kw):
            self.calls.append(kw)
            return real(query, **kw)

        monkeypatch.setattr(gate, "ask", ask)


def _settings(gate, issuer: Issuer, **kw) -> Settings:
    kw.setdefault("auth_jwks_uri", issuer.url + "/jwks")
    return make_settings(gate.settings.audit_path, auth_issuer=issuer.url, auth_resource=RESOURCE,
                         auth_tenant_id=TENANT, mcp_api_key=MCP_KEY, **kw)


def _ask(client: TestClient, token: str | None = None, key: str | None = None):
    headers = {}
    if token is not None:
        headers["authorization"] = f"Bearer {token}"
    if key is not None:
        headers["x-api-key"] = key
    return client.post("/v1/ask", json={"query": Q}, headers=headers)


def _record(gate, audit_id: str) -> dict:
    return next(rec for _, rec, _ in read_records(gate.settings.audit_path) if rec["audit_id"] == audit_id)


@pytest.fixture
def served(gate, issuer, monkeypatch):
    spy = Spy(gate, monkeypatch)
    with TestClient(create_app(_settings(gate, issuer), gate)) as client:
        yield client, spy


def test_a_good_token_names_the_caller_in_the_audit_record(served, gate, issuer):
    client, spy = served
    resp = _ask(client, issuer.token())
    assert resp.status_code == 200, resp.text
    assert spy.calls[-1]["caller"] == Caller(user_id=USER, name="ana@contoso.example", groups=frozenset(GROUPS),
                                             roles=frozenset({"Reader"}), via="token")
    caller = _record(gate, resp.json()["audit_id"])["caller"]
    joined = "\n".join(sorted(GROUPS)).encode()
    assert caller == {"user_id": USER, "via": "token", "roles": ["Reader"],
                      "groups": {"count": 2, "sha256": hashlib.sha256(joined).hexdigest()}}
    # the streamed answer names the same caller
    stream = client.post("/v1/ask/stream", json={"query": Q}, headers={"authorization": f"Bearer {issuer.token()}"})
    assert stream.status_code == 200 and "event: result" in stream.text
    assert spy.calls[-1]["caller"].user_id == USER
    # an EC key of the same issuer, and a token a few seconds past `exp` (within the clock skew)
    assert _ask(client, issuer.token(issuer.ec, kid="ec-1", alg="ES256")).status_code == 200
    assert _ask(client, issuer.token(exp=int(time.time()) - 20)).status_code == 200


def _none_token(issuer: Issuer) -> str:
    header = _b64(json.dumps({"alg": "none", "typ": "JWT", "kid": "rsa-1"}).encode())
    return f"{header}.{_b64(json.dumps(issuer.claims()).encode())}."


def _hmac_confusion(issuer: Issuer) -> str:
    """HS256 with the issuer's public key (its PEM) as the secret: what a verifier that lets the
    token choose the algorithm would accept."""
    pem = issuer.rsa.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    signing_input = (_b64(json.dumps({"alg": "HS256", "typ": "JWT", "kid": "rsa-1"}).encode()) + "."
                     + _b64(json.dumps(issuer.claims()).encode()))
    return signing_input + "." + _b64(hmac.new(pem, signing_input.encode(), hashlib.sha256).digest())


def _tampered(issuer: Issuer) -> str:
    header, _, signature = issuer.token().split(".")
    payload = _b64(json.dumps(issuer.claims(groups=[*GROUPS, "admins"])).encode())
    return f"{header}.{payload}.{signature}"


BAD_TOKENS = {
    "expired": (lambda i: i.token(exp=int(time.time()) - 120), "expired"),
    "not_yet_valid": (lambda i: i.token(nbf=int(time.time()) + 300), "not yet valid"),
    "wrong_audience": (lambda i: i.token(aud="api://another-app"), "audience"),
    "wrong_issuer": (lambda i: i.token(iss="https://login.example.net/other/v2.0"), "issuer"),
    "unknown_key": (lambda i: i.token(i.other, kid="rsa-unpublished"), "no key 'rsa-unpublished'"),
    "alg_none": (_none_token, "alg 'none'"),
    "hmac_confusion": (_hmac_confusion, "alg 'HS256'"),
    "tampered_payload": (_tampered, "signature"),
    "another_tenant": (lambda i: i.token(tid="00000000-0000-4000-8000-0000000000ff"), "tenant"),
    "group_overage": (lambda i: i.token(groups=None, _claim_names={"groups": "src1"},
                                        _claim_sources={"src1": {"endpoint": "https://graph.microsoft.com/v1.0/x"}}),
                      "app roles"),
    "has_groups": (lambda i: i.token(groups=None, hasgroups=True), "overage"),
    "no_user": (lambda i: i.token(oid=None, sub=None), "names no user"),
    "not_a_jwt": (lambda i: "not-a-token", "not a signed JWT"),
}


@pytest.mark.parametrize("case", list(BAD_TOKENS))
def test_a_bad_token_is_refused_with_the_reason_in_the_log_only(served, issuer, caplog, case):
    client, spy = served
    make, reason = BAD_TOKENS[case]
    caplog.set_level("INFO")
    resp = _ask(client, make(issuer))
    assert resp.status_code == 401
    challenge = resp.headers["www-authenticate"]
    assert challenge.startswith("Bearer ") and 'error="invalid_token"' in challenge
    assert 'resource_metadata="http://testserver/.well-known/oauth-protected-resource/mcp"' in challenge
    assert resp.json() == {"error": "invalid_token"}  # the reason is not the client's to read
    details = [getattr(r, "detail", "") for r in caplog.records if getattr(r, "reason", None) == "auth"]
    assert any(reason.lower() in d.lower() for d in details), details
    assert spy.calls == []
    if case == "group_overage":  # the operator's fix, at warning level
        assert any(r.levelname == "WARNING" and "Groups assigned to the application" in r.getMessage()
                   for r in caplog.records)


def test_missing_credentials_point_to_the_resource_metadata(served):
    client, spy = served
    resp = client.post("/v1/ask", json={"query": Q})
    assert resp.status_code == 401 and "error=" not in resp.headers["www-authenticate"]
    assert "Authorization: Bearer" in resp.json()["error"]
    meta = client.get("/.well-known/oauth-protected-resource/mcp")
    assert meta.status_code == 200
    assert client.get("/.well-known/oauth-protected-resource").json() == meta.json()
    assert meta.json()["resource"] == RESOURCE
    assert spy.calls == []


def test_the_metadata_names_the_issuer(served, issuer):
    client, _ = served
    body = client.get("/.well-known/oauth-protected-resource").json()
    assert body["resource"] == RESOURCE and body["authorization_servers"] == [issuer.url]
    assert body["bearer_methods_supported"] == ["header"]


def test_an_unknown_key_fetches_the_key_set_at_a_bounded_rate(served, issuer):
    client, spy = served
    assert _ask(client, issuer.token()).status_code == 200
    before = issuer.jwks_fetches
    for n in range(5):
        assert _ask(client, issuer.token(issuer.other, kid=f"unknown-{n}")).status_code == 401
    assert issuer.jwks_fetches == before  # fetched on the first token: not again within 60 s
    assert len(spy.calls) == 1


def test_a_rotated_key_is_fetched_once(gate, issuer, monkeypatch):
    spy = Spy(gate, monkeypatch)
    new = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    saved = list(issuer.keys)
    with TestClient(create_app(_settings(gate, issuer, auth_jwks_refresh_min_s=0), gate)) as client:
        assert _ask(client, issuer.token()).status_code == 200
        before = issuer.jwks_fetches
        issuer.keys = [_jwk(new, "rsa-2")]  # the issuer rolls its key over
        try:
            assert _ask(client, issuer.token(new, kid="rsa-2")).status_code == 200
            assert _ask(client, issuer.token(new, kid="rsa-2")).status_code == 200
            assert issuer.jwks_fetches == before + 1
            # the withdrawn key is gone from the set fetched
            assert _ask(client, issuer.token()).status_code == 401
        finally:
            issuer.keys = saved
    assert len(spy.calls) == 3


def test_the_key_set_is_found_by_discovery(gate, issuer):
    with TestClient(create_app(_settings(gate, issuer, auth_jwks_uri=None), gate)) as client:
        assert _ask(client, issuer.token()).status_code == 200


def test_an_issuer_that_cannot_be_reached_is_a_503_not_a_401(gate, issuer, monkeypatch, caplog):
    spy = Spy(gate, monkeypatch)
    with TestClient(create_app(_settings(gate, issuer, auth_jwks_uri="http://127.0.0.1:9/jwks"), gate)) as client:
        resp = _ask(client, issuer.token())
    assert resp.status_code == 503 and resp.headers["retry-after"]
    assert any("cannot be fetched" in r.getMessage() for r in caplog.records)
    assert spy.calls == []


def test_the_api_key_still_works_and_reads_every_group(served, gate):
    client, spy = served
    resp = _ask(client, key=MCP_KEY)
    assert resp.status_code == 200
    assert spy.calls[-1]["caller"].via == "api_key" and spy.calls[-1]["caller"].unrestricted
    assert _record(gate, resp.json()["audit_id"])["caller"]["groups"] == "all"
    wrong = _ask(client, key="wrong-key-0123456789")
    assert wrong.status_code == 401 and "x-api-key" in wrong.json()["error"]


def test_per_key_groups_reach_the_caller(gate, issuer, monkeypatch, tmp_path):
    spy = Spy(gate, monkeypatch)
    keys = {"team": {"key_sha256": hashlib.sha256(TEAM_KEY.encode()).hexdigest(), "groups": GROUPS[:1]},
            "reports": {"key": "reports-key-0123456789abcdef", "groups": ["*"]}}
    path = tmp_path / "keys.json"
    path.write_text(json.dumps(keys))
    for value in (json.dumps(keys), str(path)):  # JSON, or a file
        with TestClient(create_app(_settings(gate, issuer, api_keys_secret=value), gate)) as client:
            resp = _ask(client, key=TEAM_KEY)
            assert resp.status_code == 200
            caller = spy.calls[-1]["caller"]
            assert caller == Caller(user_id="api_key:team", name="team", groups=frozenset(GROUPS[:1]), via="api_key")
            assert _record(gate, resp.json()["audit_id"])["caller"]["groups"]["count"] == 1
            assert _ask(client, key="reports-key-0123456789abcdef").status_code == 200
            assert spy.calls[-1]["caller"].all_groups
    with pytest.raises(ValueError, match="key_sha256 must be 64 hex digits"):
        create_app(_settings(gate, issuer, api_keys_secret='{"x": {"key_sha256": "abc", "groups": []}}'), gate)


def test_an_audit_record_is_read_by_its_own_caller_only(served, issuer):
    client, _ = served
    mine = _ask(client, issuer.token()).json()["audit_id"]
    other = issuer.token(oid="another-user")
    assert client.get(f"/v1/audit/{mine}", headers={"authorization": f"Bearer {issuer.token()}"}).status_code == 200
    assert client.get(f"/v1/audit/{mine}", headers={"authorization": f"Bearer {other}"}).status_code == 404
    assert client.get(f"/v1/audit/{mine}", headers={"x-api-key": MCP_KEY}).status_code == 200


def test_hmac_and_none_are_refused_even_if_configured():
    for algorithms in ("HS256", "RS256,none", "hs512"):
        with pytest.raises(ValidationError, match="refused"):
            Settings(_env_file=None, auth_algorithms=algorithms)
    with pytest.raises(ValidationError, match="AUTH_RESOURCE"):
        Settings(_env_file=None, auth_issuer="https://login.microsoftonline.com/t/v2.0")


def test_serve_refuses_bad_auth_settings_with_the_fix():
    assert "API_KEYS is not valid JSON" in key_problem(Settings(_env_file=None, api_keys_secret="{oops"))
    assert "API_KEYS is neither JSON nor a readable file" in key_problem(Settings(_env_file=None,
                                                                                  api_keys_secret="/no/such/keys.json"))
    assert "not an https URL" in key_problem(Settings(_env_file=None, auth_issuer="http://login.example.net/t/v2.0",
                                                      auth_resource=RESOURCE))
    assert key_problem(Settings(_env_file=None, auth_issuer="https://login.microsoftonline.com/t/v2.0",
                                auth_resource=RESOURCE)) is None


def test_claims_become_a_caller():
    caller = caller_from_claims({"sub": "s", "name": "Ana", "roles": "Reader"})
    assert caller == Caller(user_id="s", name="Ana", roles=frozenset({"Reader"}), via="token")
    assert Caller(via="local").unrestricted and not caller.unrestricted


def test_the_mcp_client_with_a_bearer_token(gate, issuer, monkeypatch):
    spy = Spy(gate, monkeypatch)
    app = create_app(_settings(gate, issuer), gate)

    async def call(token: str):
        return (await mcp_tool_calls(app, token, "search_procedures", [{"query": Q}]))[0]

    result = run_async(lambda: call(issuer.token()), TIMEOUT)
    assert not result.is_error and result.structured_content["status"] == "answer_from_evidence"
    assert spy.calls[-1]["caller"].user_id == USER and spy.calls[-1]["interface"] == "mcp"
    with pytest.raises(Exception):
        run_async(lambda: call(issuer.token(exp=int(time.time()) - 3600)), TIMEOUT)
    assert len(spy.calls) == 1

    async def raw(token: str):
        async with app.router.lifespan_context(app):
            async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url="http://testserver") as h:
                return await h.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                                    headers={"authorization": f"Bearer {token}",
                                             "accept": "application/json, text/event-stream"})

    resp = run_async(lambda: raw(issuer.token(aud="api://another-app")), TIMEOUT)
    assert resp.status_code == 401 and 'error="invalid_token"' in resp.headers["www-authenticate"]
    assert resp.json()["error"]["message"] == "invalid_token"
