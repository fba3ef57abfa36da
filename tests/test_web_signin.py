"""The web page signs in: the OpenID Connect authorization code flow with PKCE against an OpenID
provider run in the test (discovery, key set, an authorization endpoint that signs the test user in
at once, a token endpoint that checks the PKCE verifier), with keys made here; the session's token
is checked as any bearer token; and real Chromium signs in, asks, and signs out."""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import stat
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qsl, urlencode, urlsplit

import httpx2
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from starlette.testclient import TestClient
from test_auth_tokens import GROUPS, RESOURCE, TENANT, USER, _b64, _jwk
from test_server_fixtures import make_gate, make_settings, running_server

from sourcegate.audit import read_records
from sourcegate.server.app import create_app, key_problem
from sourcegate.server.signin import PENDING_COOKIE, SESSION_COOKIE, session_secret
from sourcegate.settings import Settings

CLIENT_ID = "5c1e0b7a-web0-4000-8000-00000000c11e"
NAME = "Ana Lima"
USERNAME = "ana@contoso.example"
SESSION_KEY = "test-session-key-0123456789abcdef0123456789"
Q = "How often should I grease the bearings on pump P-200?"
WEB = {"x-sourcegate-interface": "web"}


class Provider:
    """An OpenID provider: discovery, its key set, `/authorize` (signs the test user in at once and
    sends the browser back with a code bound to the PKCE challenge, nonce and redirect URI it was
    asked with) and `/token` (gives the ID token and an access token for the code, once, to the
    verifier whose S256 hash is the challenge)."""

    def __init__(self):
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.codes: dict[str, dict[str, str]] = {}
        self.token_requests: list[dict[str, str]] = []
        self.id_token_overrides: dict = {}
        self.access_overrides: dict = {}
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802
                url = urlsplit(self.path)
                asked = dict(parse_qsl(url.query))
                if url.path == "/.well-known/openid-configuration":
                    self.json(200, {"issuer": provider.url, "jwks_uri": provider.url + "/jwks",
                                    "authorization_endpoint": provider.url + "/authorize",
                                    "token_endpoint": provider.url + "/token",
                                    "code_challenge_methods_supported": ["S256"]})
                elif url.path == "/jwks":
                    self.json(200, {"keys": [_jwk(provider.key, "op-1")]})
                elif url.path == "/authorize":
                    if (asked.get("client_id") != CLIENT_ID or asked.get("response_type") != "code"
                            or asked.get("code_challenge_method") != "S256" or not asked.get("code_challenge")
                            or "openid" not in asked.get("scope", "").split() or not asked.get("nonce")):
                        self.json(400, {"error": "invalid_request", "asked": asked})
                        return
                    code = secrets.token_urlsafe(24)
                    provider.codes[code] = asked
                    self.send_response(302)
                    self.send_header("location", asked["redirect_uri"] + "?" +
                                     urlencode({"code": code, "state": asked["state"]}))
                    self.send_header("content-length", "0")
                    self.end_headers()
                else:
                    self.json(404, {"error": "not_found"})

            def do_POST(self):  # noqa: N802
                form = dict(parse_qsl(self.rfile.read(int(self.headers.get("content-length", 0))).decode()))
                provider.token_requests.append(form)
                asked = provider.codes.pop(form.get("code", ""), None)
                if self.path != "/token" or asked is None or form.get("grant_type") != "authorization_code" \
                        or form.get("client_id") != CLIENT_ID or form.get("redirect_uri") != asked["redirect_uri"]:
                    self.json(400, {"error": "invalid_grant", "error_description": "unknown or used code"})
                    return
                challenge = _b64(hashlib.sha256(form.get("code_verifier", "").encode()).digest())
                if challenge != asked["code_challenge"]:
                    self.json(400, {"error": "invalid_grant", "error_description": "PKCE verification failed"})
                    return
                self.json(200, {"token_type": "Bearer", "expires_in": 600, "scope": asked["scope"],
                                "access_token": provider.access_token(),
                                "id_token": provider.id_token(asked["nonce"])})

            def json(self, status: int, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def sign(self, claims: dict) -> str:
        return jwt.encode({k: v for k, v in claims.items() if v is not None}, self.key, algorithm="RS256",
                          headers={"kid": "op-1"})

    def id_token(self, nonce: str) -> str:
        now = int(time.time())
        return self.sign({"iss": self.url, "aud": CLIENT_ID, "exp": now + 600, "iat": now, "sub": "pairwise-web",
                          "oid": USER, "tid": TENANT, "nonce": nonce, "name": NAME, "preferred_username": USERNAME,
                          **self.id_token_overrides})

    def access_token(self) -> str:
        now = int(time.time())
        return self.sign({"iss": self.url, "aud": RESOURCE, "exp": now + 600, "nbf": now - 10, "iat": now - 10,
                          "oid": USER, "sub": "pairwise-api", "tid": TENANT, "groups": GROUPS, "roles": ["Reader"],
                          "name": NAME, "preferred_username": USERNAME, "scp": "ask", "azp": CLIENT_ID,
                          **self.access_overrides})

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def provider():
    p = Provider()
    yield p
    p.close()


@pytest.fixture(autouse=True)
def _fresh(provider):
    provider.id_token_overrides = provider.access_overrides = {}
    yield


@pytest.fixture(scope="module")
def gate(tmp_path_factory):
    g = make_gate(make_settings(tmp_path_factory.mktemp("signin") / "audit.jsonl", documents_without_readers="everyone"))
    yield g
    g.close()


def _settings(gate, provider: Provider, **kw) -> Settings:
    kw.setdefault("auth_web_session_secret", SESSION_KEY)
    return make_settings(gate.settings.audit_path, auth_issuer=provider.url, auth_resource=RESOURCE,
                         auth_tenant_id=TENANT, auth_web_client_id=CLIENT_ID, documents_without_readers="everyone", **kw)


def _to_provider(client: TestClient) -> str:
    """Begin a sign-in in `client`'s browser: the authorization URL it is sent to."""
    resp = client.get("/auth/login", follow_redirects=False)
    assert resp.status_code == 302, resp.text
    assert PENDING_COOKIE in client.cookies
    return resp.headers["location"]


def _back_from_provider(authorize_url: str) -> str:
    """The provider signs the user in at once: the callback path and query it sends the browser to."""
    resp = httpx2.get(authorize_url, follow_redirects=False)
    assert resp.status_code == 302, resp.text
    back = urlsplit(resp.headers["location"])
    assert back.netloc == "testserver" and back.path == "/auth/callback"
    return f"{back.path}?{back.query}"


def _sign_in(client: TestClient):
    return client.get(_back_from_provider(_to_provider(client)), follow_redirects=False)


def _signed_out(client: TestClient) -> None:
    """No session: the page is told so, and the page's calls are refused."""
    assert SESSION_COOKIE not in client.cookies
    assert client.get("/auth/session").json()["signed_in"] is False
    resp = client.post("/v1/ask", json={"query": Q}, headers=WEB)
    assert resp.status_code == 401
    assert resp.json()["error"] == "sign in first (the Sign in link at the top of the page)"


def _record(gate, audit_id: str) -> dict:
    return next(rec for _, rec, _ in read_records(gate.settings.audit_path) if rec["audit_id"] == audit_id)


def test_sign_in_ask_and_sign_out(gate, provider):
    with TestClient(create_app(_settings(gate, provider, mcp_allowed_hosts="*"), gate)) as client:
        authorize = urlsplit(_to_provider(client))
        asked = dict(parse_qsl(authorize.query))
        assert f"{authorize.scheme}://{authorize.netloc}{authorize.path}" == provider.url + "/authorize"
        assert asked["code_challenge_method"] == "S256" and len(asked["code_challenge"]) == 43
        assert asked["redirect_uri"] == "http://testserver/auth/callback" and asked["scope"] == "openid profile"
        assert len(asked["state"]) >= 32 and len(asked["nonce"]) >= 32 and asked["state"] != asked["nonce"]
        pending_cookie = client.cookies[PENDING_COOKIE]
        assert asked["state"] not in pending_cookie and asked["nonce"] not in pending_cookie  # sealed, not readable

        resp = client.get(_back_from_provider(authorize.geturl()), follow_redirects=False)
        assert resp.status_code == 303 and resp.headers["location"] == "http://testserver/", resp.text
        # the token exchange sent the verifier of that challenge, no secret (a public client)
        exchange = provider.token_requests[-1]
        assert _b64(hashlib.sha256(exchange["code_verifier"].encode()).digest()) == asked["code_challenge"]
        assert "client_secret" not in exchange
        set_cookies = resp.headers.get_list("set-cookie")
        session = next(c for c in set_cookies if c.startswith(f"{SESSION_COOKIE}="))
        assert "HttpOnly" in session and "SameSite=lax" in session and "Path=/" in session and "Secure" not in session
        assert any(c.startswith(f'{PENDING_COOKIE}=""') or c.startswith(f"{PENDING_COOKIE}=;") for c in set_cookies)
        assert USER not in client.cookies[SESSION_COOKIE] and "eyJ" not in client.cookies[SESSION_COOKIE]

        me = client.get("/auth/session").json()
        assert me["signed_in"] is True and me["name"] == NAME and me["username"] == USERNAME and me["api_key"] is False

        # the page's call carries only the cookie: the caller is the token's user
        answer = client.post("/v1/ask", json={"query": Q}, headers=WEB)
        assert answer.status_code == 200, answer.text
        record = _record(gate, answer.json()["audit_id"])
        assert record["caller"]["user_id"] == USER and record["caller"]["via"] == "token"
        assert record["interface"] == "web"
        assert client.get("/v1/filters", headers=WEB).status_code == 200
        stream = client.post("/v1/ask/stream", json={"query": Q}, headers=WEB)
        assert stream.status_code == 200 and "event: result" in stream.text

        # the cookie is no credential for a request another site makes, nor for /mcp, nor without
        # the page's header (a form or a plain link cannot send it)
        for headers in ({}, {**WEB, "origin": "https://evil.example"}, {**WEB, "sec-fetch-site": "cross-site"}):
            refused = client.post("/v1/ask", json={"query": Q}, headers=headers)
            assert refused.status_code == 401, (headers, refused.text)
        assert client.post("/v1/ask", json={"query": Q}, headers={**WEB, "origin": "http://testserver"}).status_code == 200
        mcp = client.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                          headers={**WEB, "accept": "application/json, text/event-stream"})
        assert mcp.status_code == 401

        out = client.get("/auth/logout", follow_redirects=False)
        assert out.status_code == 303 and out.headers["location"] == "../"
        _signed_out(client)


def test_the_session_is_refused_once_its_token_no_longer_verifies(gate, provider):
    """A session sealed under another key, or a tampered one, is no session; one whose access token
    the verifier refuses (another audience now) gets the page's words, not a bare invalid_token."""
    with TestClient(create_app(_settings(gate, provider), gate)) as client:
        assert _sign_in(client).status_code == 303
        sealed = client.cookies[SESSION_COOKIE]
        client.cookies.clear()
        client.cookies.set(SESSION_COOKIE, sealed[:40] + ("A" if sealed[40] != "A" else "B") + sealed[41:])
        assert client.get("/auth/session").json()["signed_in"] is False
        assert client.post("/v1/ask", json={"query": Q}, headers=WEB).status_code == 401
        client.cookies.clear()
        client.cookies.set(SESSION_COOKIE, sealed)
        assert client.post("/v1/ask", json={"query": Q}, headers=WEB).status_code == 200
    with TestClient(create_app(_settings(gate, provider, auth_web_session_secret="another-key-" + "9" * 40),
                               gate)) as other:
        other.cookies.set(SESSION_COOKIE, sealed)
        assert other.get("/auth/session").json()["signed_in"] is False
    with TestClient(create_app(_settings(gate, provider, auth_audience="api://another"), gate)) as moved:
        moved.cookies.set(SESSION_COOKIE, sealed)
        resp = moved.post("/v1/ask", json={"query": Q}, headers=WEB)
        assert resp.status_code == 401 and resp.json()["error"].startswith("your sign-in has ended: sign in again")


def test_a_token_too_long_for_one_cookie_is_split(gate, provider):
    """A user in many groups: the sealed session is longer than a browser keeps in one cookie."""
    groups = [f"0f5a1c7e-aaaa-4bbb-8ccc-{i:012d}" for i in range(150)]
    provider.access_overrides = {"groups": groups}
    with TestClient(create_app(_settings(gate, provider), gate)) as client:
        resp = _sign_in(client)
        pieces = [c.split(";")[0] for c in resp.headers.get_list("set-cookie")
                  if c.startswith(SESSION_COOKIE) and "Max-Age=0" not in c]
        assert len(pieces) >= 2 and all(len(p) < 4000 for p in pieces), [len(p) for p in pieces]
        answer = client.post("/v1/ask", json={"query": Q}, headers=WEB)
        assert answer.status_code == 200, answer.text
        assert _record(gate, answer.json()["audit_id"])["caller"]["groups"]["count"] == 150
        client.get("/auth/logout")
        assert not [name for name in client.cookies if name.startswith(SESSION_COOKIE)]


def _refused(resp, words: str) -> None:
    assert resp.status_code == 400, resp.text
    assert resp.headers["content-type"].startswith("text/html")
    assert "default-src 'none'" in resp.headers["content-security-policy"]
    assert words in resp.text, resp.text
    assert 'href="login">Sign in again' in resp.text
    assert not any(c.startswith(f"{SESSION_COOKIE}=") and "Max-Age=0" not in c
                   for c in resp.headers.get_list("set-cookie")), "a refused sign-in sets no session"


def test_a_code_redeemed_with_another_sign_ins_verifier_is_refused(gate, provider):
    """Code injection: the code of another sign-in (another browser, another PKCE challenge) brought to
    this browser's callback with this browser's state. The token endpoint refuses this browser's
    verifier for it."""
    with TestClient(create_app(_settings(gate, provider), gate)) as victim, \
            TestClient(create_app(_settings(gate, provider), gate)) as attacker:
        own = dict(parse_qsl(urlsplit(_to_provider(victim)).query))
        foreign = dict(parse_qsl(urlsplit(_back_from_provider(_to_provider(attacker))).query))
        resp = victim.get("/auth/callback?" + urlencode({"code": foreign["code"], "state": own["state"]}),
                          follow_redirects=False)
        _refused(resp, "the issuer refused to exchange the sign-in&#x27;s code (invalid_grant)")
        assert provider.token_requests[-1]["code"] == foreign["code"]
        _signed_out(victim)


def test_a_state_that_is_not_this_browsers_is_refused(gate, provider):
    with TestClient(create_app(_settings(gate, provider), gate)) as client:
        back = _back_from_provider(_to_provider(client))
        query = dict(parse_qsl(urlsplit(back).query))
        before = len(provider.token_requests)
        # another state: its last character changed (to "x", or to "y" where it was "x" already)
        other_state = query["state"][:-1] + ("y" if query["state"].endswith("x") else "x")
        resp = client.get("/auth/callback?" + urlencode({**query, "state": other_state}), follow_redirects=False)
        _refused(resp, "state mismatch")
        assert len(provider.token_requests) == before, "no code is exchanged for a sign-in this browser did not begin"
        _signed_out(client)
    # and a callback in a browser that began no sign-in (login CSRF)
    with TestClient(create_app(_settings(gate, provider), gate)) as client, \
            TestClient(create_app(_settings(gate, provider), gate)) as other:
        back = _back_from_provider(_to_provider(other))
        _refused(client.get(back, follow_redirects=False), "this browser has no sign-in under way")
        _signed_out(client)


@pytest.mark.parametrize("overrides, words", [
    ({"nonce": "a-nonce-of-another-sign-in-0123456789"}, "not made for this sign-in (its nonce differs)"),
    ({"exp": int(time.time()) - 3600, "iat": int(time.time()) - 7200}, "ID token has expired"),
    ({"aud": "another-client"}, "for another application than AUTH_WEB_CLIENT_ID"),
], ids=["nonce_mismatch", "expired_id_token", "another_client"])
def test_an_id_token_that_fails_a_check_is_refused(gate, provider, overrides, words):
    provider.id_token_overrides = overrides
    with TestClient(create_app(_settings(gate, provider), gate)) as client:
        _refused(_sign_in(client), words)
        _signed_out(client)


def test_the_issuers_refusal_is_shown(gate, provider):
    with TestClient(create_app(_settings(gate, provider), gate)) as client:
        state = dict(parse_qsl(urlsplit(_to_provider(client)).query))["state"]
        resp = client.get("/auth/callback?" + urlencode({"error": "access_denied", "state": state,
                                                         "error_description": "<b>the user declined</b>"}))
        _refused(resp, "the issuer did not sign you in (access_denied: &lt;b&gt;the user declined&lt;/b&gt;)")
        _signed_out(client)


def test_cookies_are_secure_behind_https_and_settings_say_the_fix(gate, provider, tmp_path):
    settings = _settings(gate, provider, auth_web_redirect_uri="https://testserver/auth/callback",
                         auth_web_client_secret="web-secret-0123456789")
    with TestClient(create_app(settings, gate), base_url="https://testserver") as client:
        resp = client.get("/auth/login", follow_redirects=False)
        assert "redirect_uri=https%3A%2F%2Ftestserver%2Fauth%2Fcallback" in resp.headers["location"]
        pending = next(c for c in resp.headers.get_list("set-cookie") if c.startswith(PENDING_COOKIE))
        assert "Secure" in pending and "HttpOnly" in pending
        assert _sign_in(client).status_code == 303
        assert provider.token_requests[-1]["client_secret"] == "web-secret-0123456789"
    # the page's sign-in alone: who signs in, with which scopes, and where back
    with pytest.raises(ValueError, match="AUTH_WEB_CLIENT_ID is set without AUTH_ISSUER"):
        Settings(_env_file=None, auth_web_client_id=CLIENT_ID)
    with pytest.raises(ValueError, match="openssl rand -hex 32"):
        _settings(gate, provider, auth_web_session_secret="short")
    assert "lacks `openid`" in key_problem(_settings(gate, provider, auth_web_scopes="profile api://x/ask"))
    assert "neither a URL nor a path" in key_problem(_settings(gate, provider, auth_web_redirect_uri="auth/callback"))
    assert "not an https URL" in key_problem(_settings(gate, provider,
                                                       auth_web_redirect_uri="http://sourcegate.example/auth/callback"))
    # without AUTH_WEB_SESSION_KEY, a key is made once in the home, private to its user
    home = Settings(_env_file=None, home=tmp_path / "home")
    first = session_secret(home)
    path = tmp_path / "home" / "web_session.key"
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600 and len(first) >= 32
    assert session_secret(home) == first and [p.name for p in path.parent.iterdir()] == ["web_session.key"]


def test_the_page_offers_sign_in_without_a_key_box(gate, provider):
    with TestClient(create_app(_settings(gate, provider), gate)) as client:
        html = client.get("/").text
        policy = client.get("/").headers["content-security-policy"]
    assert 'href="auth/login"' in html and 'href="auth/logout"' in html
    assert "script-src 'sha256-" in policy and "unsafe-inline" not in policy
    assert not re.search(r"\son[a-z]+=", html), "no inline event handlers"
    # a server without the page's sign-in has no /auth routes: the page keeps its key box
    with TestClient(create_app(make_settings(gate.settings.audit_path), gate)) as plain:
        assert plain.get("/auth/session").status_code == 404


# ---- real Chromium

def _chromium():
    from test_web_page import CHROMIUM

    return CHROMIUM


@pytest.mark.skipif(_chromium() is None, reason="chromium is not installed (apt-get install chromium) - real-browser test skipped")
def test_chromium_signs_in_asks_and_signs_out(gate, provider, tmp_path):
    from test_ask_stream import headless_page
    from test_web_page import PAGE_DONE

    settings = _settings(gate, provider)
    shown = 'document.getElementById("{}").hidden ? "" : (document.getElementById("{}").innerText || "")'
    with running_server(create_app(settings, gate)) as base:
        with headless_page(f"{base}/auth/login", tmp_path / "profile") as wait_for:
            who = wait_for(shown.format("who", "who"))
            key_box = wait_for('String(document.getElementById("key").hidden)')
            wait_for(f'(document.getElementById("query").value = {json.dumps(Q)}, '
                     'document.getElementById("ask").click(), "asked")')
            dom = wait_for(PAGE_DONE)
            wait_for('(document.getElementById("sign-out").click(), "out")')
            after = wait_for('!document.getElementById("sign-in").hidden && location.pathname === "/" '
                             '? document.getElementById("who").innerText : ""')
            key_box_after = wait_for('String(document.getElementById("key").hidden)')
            wait_for(f'(document.getElementById("query").value = {json.dumps(Q)}, '
                     'document.getElementById("ask").click(), "asked")')
            refused = wait_for('document.getElementById("status").className.includes("error") '
                               '? document.getElementById("next-step").innerText : ""')
    assert who.startswith(f"Signed in as {NAME} ({USERNAME})") and "Sign out" in who, who
    assert key_box == "true", "only an issuer configured: no API key box"
    assert 'class="status answer_from_evidence"' in dom, dom[-3000:]
    web = [rec for _, rec, _ in read_records(settings.audit_path) if rec and rec.get("interface") == "web"]
    assert web and web[-1]["caller"]["user_id"] == USER and web[-1]["caller"]["via"] == "token"
    assert after.startswith("Not signed in") and "Sign in" in after, after
    assert key_box_after == "true"
    assert refused == "sign in first (the Sign in link at the top of the page)", refused
