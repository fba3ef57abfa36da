"""The web page's sign-in: the OpenID Connect authorization code flow with PKCE (S256), on the server.

`/auth/login` sends the browser to the issuer with a fresh state, nonce and PKCE challenge (Authlib's
OAuth 2.0 client); `/auth/callback` checks the state, exchanges the code with the PKCE verifier,
checks the ID token (signature by the issuer's keys, `iss`, `aud`, `exp`, the nonce) and the access
token exactly as a bearer token is checked, and keeps the access token in a session cookie;
`/auth/logout` ends it; `/auth/session` tells the page who is signed in.

Why on the server rather than in the page: the token never reaches the page's script (an HttpOnly
cookie: text from the library that slipped past the page's escaping could not read it), the page
stays one self-contained file under a strict content security policy, and every call the page
makes is checked by the same verifier as any other bearer token.

Cookies are sealed with Fernet (AES-CBC and HMAC-SHA256, from `cryptography`) under a key derived
with HKDF from AUTH_WEB_SESSION_KEY: a cookie can be neither read nor forged. The session holds no
state on the server, so replicas and workers that share the key share the sessions; it ends when
the access token expires (or at sign-out in that browser).
"""

from __future__ import annotations

import base64
import hmac
import html
import json
import logging
import os
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urljoin, urlparse

import anyio
from cryptography.fernet import Fernet, InvalidToken
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from starlette.requests import Request, cookie_parser
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from ..identity import Caller
from ..private_files import FILE_MODE, private_dir
from ..settings import Settings
from .auth import ISSUER_TIMEOUT_S, IssuerUnavailable, JwtVerifier, TokenRefused, _check_url, _get_json

log = logging.getLogger("sourcegate.signin")

SESSION_COOKIE = "sourcegate_session"
PENDING_COOKIE = "sourcegate_signin"
# A sign-in not finished within this long is begun again.
PENDING_MAX_S = 600
# Browsers keep cookies of up to 4096 bytes: a longer session (a token with many groups) is split.
COOKIE_PIECE = 3800
MAX_PIECES = 4
# The issuer's discovery document is read again after this long (its endpoints rarely move).
DISCOVERY_MAX_AGE_S = 3600.0
SESSION_KEY_FILE = "web_session.key"
# The header the page sends with each of its calls: a request another site makes cannot carry it
# without a CORS preflight this server never grants, so the session cookie is a credential only with it.
WEB_HEADER = ("x-sourcegate-interface", "web")

PAGE_POLICY = "default-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"


def session_secret(settings: Settings) -> str:
    """AUTH_WEB_SESSION_KEY, else the key kept in SOURCEGATE_HOME (made at first start, 0600).
    Several workers starting at once agree on one key: it is written aside and linked in place."""
    if settings.auth_web_session_secret:
        return settings.auth_web_session_secret.strip()
    path = Path(settings.home) / SESSION_KEY_FILE
    if not path.exists():
        private_dir(path.parent)
        aside = path.with_name(f".{SESSION_KEY_FILE}.{os.getpid()}.{secrets.token_hex(4)}")
        fd = os.open(aside, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
        with os.fdopen(fd, "w", encoding="ascii") as f:
            f.write(secrets.token_urlsafe(48) + "\n")
        try:
            os.link(aside, path)
            log.info("made a key for the web page's sign-in cookies", extra={"path": str(path)})
        except FileExistsError:
            pass  # another worker's came first
        finally:
            aside.unlink()
    secret = path.read_text(encoding="ascii").strip()
    if len(secret) < 32:
        raise ValueError(f"{path} holds no usable key (under 32 characters): delete it to have one made, or set "
                         "AUTH_WEB_SESSION_KEY")
    return secret


def web_settings(settings: Settings) -> tuple[str, str]:
    """(the redirect URI or path, the scopes asked for) of the sign-in, or ValueError naming the fix."""
    redirect = settings.auth_web_redirect_uri.strip()
    if "://" in redirect:
        _check_url("AUTH_WEB_REDIRECT_URI", redirect)
    elif not redirect.startswith("/"):
        raise ValueError(f"AUTH_WEB_REDIRECT_URI={redirect!r} is neither a URL nor a path: set it to the redirect URI "
                         "registered for the page (https://HOST/auth/callback), or to /auth/callback")
    scopes = settings.auth_web_scopes
    if scopes is None:
        scopes = " ".join(["openid", "profile", *(s.strip() for s in settings.auth_scopes.split(",") if s.strip())])
    scopes = " ".join(scopes.replace(",", " ").split())
    if "openid" not in scopes.split():
        raise ValueError(f"AUTH_WEB_SCOPES={settings.auth_web_scopes!r} lacks `openid`: without it the issuer sends "
                         "no ID token, so nobody can sign in to the page")
    return redirect, scopes


class Sealer:
    """Encrypts and authenticates what one kind of cookie holds; `purpose` gives each kind its own
    key, so a cookie of one kind is never read as another."""

    def __init__(self, secret: str, purpose: str):
        key = HKDF(algorithm=hashes.SHA256(), length=32, salt=None,
                   info=f"sourcegate web {purpose}".encode()).derive(secret.encode("utf-8"))
        self.fernet = Fernet(base64.urlsafe_b64encode(key))

    def seal(self, data: Mapping[str, Any]) -> str:
        return self.fernet.encrypt(json.dumps(data, separators=(",", ":")).encode("utf-8")).decode("ascii")

    def open(self, value: str | None, max_age_s: int) -> dict[str, Any] | None:
        if not value:
            return None
        try:
            data = json.loads(self.fernet.decrypt(value.encode("ascii"), ttl=max_age_s))
        except (InvalidToken, UnicodeEncodeError, ValueError):
            return None
        return data if isinstance(data, dict) else None


@dataclass(frozen=True)
class Endpoints:
    authorization: str
    token: str


class RefusedSignIn(Exception):
    """A sign-in that cannot be completed: `message` is shown to the person, `detail` logged."""

    def __init__(self, status: int, message: str, detail: str | None = None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.detail = detail or message


def _id_token_problem(reason: str) -> str:
    """The ID token's refusal in words for the person signing in (the exact reason is logged)."""
    if reason.startswith("ExpiredSignatureError"):
        return "the issuer's ID token has expired (if this keeps happening, this server's or the issuer's clock is wrong)"
    if reason.startswith("ImmatureSignatureError"):
        return "the issuer's ID token is not valid yet (this server's or the issuer's clock is wrong)"
    if "nonce" in reason:
        return "the issuer's ID token was not made for this sign-in (its nonce differs)"
    if reason.startswith("InvalidAudienceError") or "azp" in reason:
        return "the issuer's ID token is for another application than AUTH_WEB_CLIENT_ID"
    if reason.startswith("InvalidIssuerError"):
        return "the ID token comes from another issuer than AUTH_ISSUER"
    return "the issuer's ID token did not verify"


class WebSignIn:
    """The sign-in routes and the session cookie. `session_token(path, headers)` is the access
    token of a request from the page, or None."""

    def __init__(self, settings: Settings, verifier: JwtVerifier, key_login: bool):
        assert settings.auth_web_client_id
        self.settings = settings
        self.verifier = verifier
        self.client_id = settings.auth_web_client_id
        self.client_secret = settings.auth_web_client_secret
        self.key_login = key_login  # API keys are configured too: the page keeps its key box
        self.redirect, self.scopes = web_settings(settings)
        secret = session_secret(settings)
        self.sessions = Sealer(secret, "session")
        self.pending = Sealer(secret, "sign-in")
        self._endpoints: tuple[float, Endpoints] | None = None

    # ---- the session, as the page's calls carry it

    def session(self, headers: Mapping[str, str]) -> dict[str, Any] | None:
        """The session a request's cookies hold (not yet expired), or None."""
        cookies = cookie_parser(headers.get("cookie", ""))
        value = "".join(cookies.get(f"{SESSION_COOKIE}{'' if i == 0 else f'_{i}'}", "") for i in range(MAX_PIECES))
        data = self.sessions.open(value, max_age_s=86_400)
        if data is None or not isinstance(data.get("token"), str) or not isinstance(data.get("exp"), int | float):
            return None
        if data["exp"] + self.verifier.leeway < time.time():
            return None
        return data

    def session_token(self, headers: Mapping[str, str]) -> str | None:
        """The access token of a session, on a request the page made: it carries the page's header,
        and its Origin (when sent) is this server's own. A request another site makes with the
        browser's cookies is not served on them."""
        if headers.get(WEB_HEADER[0]) != WEB_HEADER[1]:
            return None
        if headers.get("sec-fetch-site") not in (None, "same-origin"):
            return None
        origin = headers.get("origin")
        if origin is not None and urlparse(origin).netloc.lower() != headers.get("host", "").lower():
            return None
        data = self.session(headers)
        return data["token"] if data else None

    # ---- routes

    def routes(self) -> list[Route]:
        return [Route("/auth/login", self.login, methods=["GET"]),
                Route("/auth/callback", self.callback, methods=["GET"]),
                Route("/auth/logout", self.logout, methods=["GET", "POST"]),
                Route("/auth/session", self.session_info, methods=["GET"])]

    async def session_info(self, request: Request) -> Response:
        data = self.session(request.headers)
        body: dict[str, Any] = {"sign_in": True, "api_key": self.key_login, "signed_in": data is not None}
        if data is not None:
            body.update(name=data.get("name"), username=data.get("username"), expires_at=int(data["exp"]))
        return JSONResponse(body, headers={"cache-control": "no-store"})

    async def login(self, request: Request) -> Response:
        from authlib.common.security import generate_token

        try:
            endpoints = await self.endpoints()
        except IssuerUnavailable as e:
            log.error("sign-in: the issuer's discovery document cannot be read", extra={"error": str(e)[:300]})
            return self.page(503, "Sign-in is not possible now", "the issuer cannot be reached: try again in a minute "
                             "(the operator can see why in the server log)", retry=True)
        redirect_uri = self.redirect_uri(request)
        state, nonce, verifier = generate_token(32), generate_token(32), generate_token(64)
        async with self.client(redirect_uri) as client:
            url, _ = client.create_authorization_url(endpoints.authorization, state=state, code_verifier=verifier,
                                                     nonce=nonce)
        response = RedirectResponse(url, status_code=302, headers={"cache-control": "no-store"})
        self.set_cookie(response, PENDING_COOKIE, self.pending.seal(
            {"state": state, "nonce": nonce, "verifier": verifier, "redirect_uri": redirect_uri}),
            PENDING_MAX_S, redirect_uri)
        return response

    async def callback(self, request: Request) -> Response:
        params = request.query_params
        pending = self.pending.open(request.cookies.get(PENDING_COOKIE), PENDING_MAX_S)
        try:
            session = await self.complete(params, pending)
        except RefusedSignIn as e:
            log.warning("sign-in refused", extra={"detail": e.detail[:500]})
            response = self.page(e.status, "Sign-in refused", e.message, retry=True)
            self.clear_session(response, (pending or {}).get("redirect_uri") or self.redirect_uri(request))
            return response
        redirect_uri = pending["redirect_uri"]  # type: ignore[index]
        response = RedirectResponse(urljoin(redirect_uri, "../"), status_code=303, headers={"cache-control": "no-store"})
        sealed = self.sessions.seal(session)
        pieces = [sealed[i:i + COOKIE_PIECE] for i in range(0, len(sealed), COOKIE_PIECE)]
        max_age = max(1, int(session["exp"] - time.time()))
        for i in range(MAX_PIECES):
            name = f"{SESSION_COOKIE}{'' if i == 0 else f'_{i}'}"
            if i < len(pieces):
                self.set_cookie(response, name, pieces[i], max_age, redirect_uri)
            else:
                self.set_cookie(response, name, "", 0, redirect_uri)
        self.set_cookie(response, PENDING_COOKIE, "", 0, redirect_uri)
        log.info("signed in on the web page", extra={"user_id": session["user_id"]})
        return response

    async def complete(self, params: Mapping[str, str], pending: dict[str, Any] | None) -> dict[str, Any]:
        """The session of a sign-in the issuer answered, or RefusedSignIn."""
        if "error" in params:
            said = " ".join(f"{params.get('error', '')}: {params.get('error_description', '')}".split())[:300]
            raise RefusedSignIn(400, f"the issuer did not sign you in ({said})")
        if pending is None:
            raise RefusedSignIn(400, "this browser has no sign-in under way (it was begun over ten minutes ago, in "
                                     "another browser, or cookies are blocked): sign in again")
        if not hmac.compare_digest(params.get("state", "").encode(), pending["state"].encode()):
            raise RefusedSignIn(400, "the issuer's answer is not for the sign-in this browser began (state mismatch): "
                                     "sign in again")
        code = params.get("code")
        if not code:
            raise RefusedSignIn(400, "the issuer's answer carries no authorization code: sign in again")
        from authlib.integrations.base_client import OAuthError

        try:
            endpoints = await self.endpoints()
            async with self.client(pending["redirect_uri"]) as client:
                token = await client.fetch_token(endpoints.token, grant_type="authorization_code", code=code,
                                                 code_verifier=pending["verifier"])
        except OAuthError as e:
            raise RefusedSignIn(400, f"the issuer refused to exchange the sign-in's code ({e.error or 'no reason'}): "
                                     "sign in again", f"token endpoint: {e.error}: {e.description}") from None
        except IssuerUnavailable as e:
            raise RefusedSignIn(503, "the issuer cannot be reached: try again in a minute", str(e)) from None
        except Exception as e:  # the network (refused, timed out) or an answer that is not a token
            raise RefusedSignIn(503, "the issuer's token endpoint did not answer: try again in a minute",
                                f"token endpoint: {type(e).__name__}: {e}") from None
        id_token, access = token.get("id_token"), token.get("access_token")
        if not isinstance(id_token, str) or not isinstance(access, str):
            raise RefusedSignIn(400, "the issuer sent no ID token or no access token (is `openid` among "
                                     "AUTH_WEB_SCOPES?)", f"token response keys: {sorted(token)}")
        try:
            identity = await self.verifier.verify_id_token(id_token, self.client_id, pending["nonce"])
        except TokenRefused as e:
            raise RefusedSignIn(400, _id_token_problem(e.reason) + ": sign in again", f"ID token: {e.reason}") from None
        except IssuerUnavailable as e:
            raise RefusedSignIn(503, "the issuer's keys cannot be fetched: try again in a minute", str(e)) from None
        try:
            claims = await self.verifier.verify(access)
            caller: Caller = self.verifier.caller(claims)
        except TokenRefused as e:
            raise RefusedSignIn(403, "the issuer signed you in, but its access token is not one this server accepts "
                                     "(the operator can see why in the server log: AUTH_WEB_SCOPES must ask for this "
                                     "server's scope, AUTH_SCOPES)", f"access token: {e.reason}") from None
        except IssuerUnavailable as e:
            raise RefusedSignIn(503, "the issuer's keys cannot be fetched: try again in a minute", str(e)) from None
        if "oid" in identity and "oid" in claims and identity["oid"] != claims["oid"]:
            raise RefusedSignIn(400, "the issuer's ID token and access token name different users: sign in again",
                                "ID token oid != access token oid")
        return {"token": access, "exp": int(claims["exp"]), "user_id": caller.user_id,
                "name": identity.get("name") or claims.get("name"),
                "username": identity.get("preferred_username") or claims.get("preferred_username")
                or identity.get("email")}

    async def logout(self, request: Request) -> Response:
        response = RedirectResponse("../", status_code=303, headers={"cache-control": "no-store"})
        self.clear_session(response, self.redirect_uri(request))
        return response

    # ---- helpers

    def clear_session(self, response: Response, redirect_uri: str) -> None:
        for i in range(MAX_PIECES):
            self.set_cookie(response, f"{SESSION_COOKIE}{'' if i == 0 else f'_{i}'}", "", 0, redirect_uri)
        self.set_cookie(response, PENDING_COOKIE, "", 0, redirect_uri)

    @staticmethod
    def set_cookie(response: Response, name: str, value: str, max_age: int, redirect_uri: str) -> None:
        """HttpOnly, SameSite=Lax (sent on the issuer's redirect back, a top-level GET, and on the
        page's own calls; not on another site's requests), Secure when the page is served over https."""
        secure = urlparse(redirect_uri).scheme == "https"
        if max_age <= 0:
            response.delete_cookie(name, path="/", secure=secure, httponly=True, samesite="lax")
        else:
            response.set_cookie(name, value, max_age=max_age, path="/", secure=secure, httponly=True, samesite="lax")

    def redirect_uri(self, request: Request) -> str:
        """AUTH_WEB_REDIRECT_URI as a URL: a path is taken on the scheme and host the request came to
        (behind a proxy that ends TLS, set the full https URL)."""
        if "://" in self.redirect:
            return self.redirect
        return f"{request.url.scheme}://{request.url.netloc}{self.redirect}"

    def client(self, redirect_uri: str):
        from authlib.integrations.httpx_client import AsyncOAuth2Client

        return AsyncOAuth2Client(client_id=self.client_id, client_secret=self.client_secret,
                                 token_endpoint_auth_method="client_secret_post" if self.client_secret else "none",
                                 scope=self.scopes, redirect_uri=redirect_uri, code_challenge_method="S256",
                                 timeout=ISSUER_TIMEOUT_S, follow_redirects=False)

    async def endpoints(self) -> Endpoints:
        """The issuer's authorization and token endpoints, from its discovery document (cached)."""
        now = time.monotonic()
        if self._endpoints is not None and now - self._endpoints[0] < DISCOVERY_MAX_AGE_S:
            return self._endpoints[1]
        url = self.verifier.issuer.rstrip("/") + "/.well-known/openid-configuration"
        try:
            document = await anyio.to_thread.run_sync(_get_json, url)
        except IssuerUnavailable:
            raise
        except Exception as e:  # the network
            raise IssuerUnavailable(f"GET {url}: {type(e).__name__}: {e}") from None
        if document.get("issuer") != self.verifier.issuer:
            raise IssuerUnavailable(f"{url} names issuer {document.get('issuer')!r}, not AUTH_ISSUER")
        found = []
        for name in ("authorization_endpoint", "token_endpoint"):
            value = document.get(name)
            if not isinstance(value, str):
                raise IssuerUnavailable(f"{url} has no {name}")
            try:
                _check_url(name, value)
            except ValueError as e:
                raise IssuerUnavailable(str(e)) from None
            found.append(value)
        endpoints = Endpoints(*found)
        self._endpoints = (now, endpoints)
        return endpoints

    @staticmethod
    def page(status: int, title: str, message: str, retry: bool = False) -> HTMLResponse:
        """A plain page that says what happened and what to do, with a way back."""
        links = '<p><a href="login">Sign in again</a> &middot; <a href="../">Back to the page</a></p>' if retry else \
            '<p><a href="../">Back to the page</a></p>'
        body = (f'<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><title>sourcegate: {html.escape(title)}'
                f'</title></head><body>'
                f'<h1>{html.escape(title)}</h1><p id="reason">{html.escape(message)}</p>{links}</body></html>')
        return HTMLResponse(body, status_code=status, headers={
            "cache-control": "no-store", "content-security-policy": PAGE_POLICY, "x-frame-options": "DENY",
            "referrer-policy": "no-referrer", "x-content-type-options": "nosniff"})
