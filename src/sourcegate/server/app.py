"""One ASGI app: MCP (Streamable HTTP) at /mcp, REST at /v1, the web page at /, /healthz, /metrics.

The MCP endpoint is stateless with JSON responses, so replicas can sit behind a load balancer
without sticky sessions. `SourceGate.ask` is synchronous and CPU-bound: it runs in a worker
thread so the event loop keeps serving health checks and other requests.

`/v1/ask/stream` answers the same question as server-sent events: the gate's decision as soon as
it is made, then the answer as a model writes it, then the complete result.
"""

from __future__ import annotations

import base64
import contextlib
import contextvars
import functools
import hashlib
import hmac
import json
import logging
import math
import re
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from importlib import resources
from typing import Any
from urllib.parse import urlparse

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream
from mcp.server.auth.middleware.auth_context import auth_context_var
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..audit import AuditLog, AuditRecordDamaged, AuditWriteError, verify
from ..feedback import (FEEDBACK_BODY_HINT, FeedbackError, FeedbackRequest, FeedbackStore, UnknownAnswer, open_feedback,
                        record_feedback)
from ..feedback import parse_request as parse_feedback
from ..identity import Caller
from ..readers import readers_rule
from ..inert import inert_markup
from ..logs import log_ask, log_rejected, new_request_id
from ..service import AskResult, QueryError, SourceGate
from ..settings import Settings
from ..store.base import EmbedderMismatch, StoreUnavailable
from .admission import AdmissionControl, Overloaded, Unavailable
from .auth import Authenticator, IssuerUnavailable, Refusal, access_token
from .mcp_tool import build_mcp_server
from .metrics import CONTENT_TYPE_LATEST, Metrics
from .openapi import API_KEY_HEADER, openapi_document
from .signin import WebSignIn, web_settings

log = logging.getLogger("sourcegate.server")

PROTECTED_PREFIXES = ("/mcp", "/v1/")
# The web page's sign-in (signin.py): answered only for the host names /mcp and /v1 answer for.
SIGNIN_PREFIX = "/auth/"
INTERFACE_HEADER = "x-sourcegate-interface"
_REQUEST_ID_OK = re.compile(r"^[A-Za-z0-9._-]{1,64}$")
_AUDIT_ID_OK = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
# A Host header quoted back in a refusal only when it is a plain host name.
_HOST_NAME = re.compile(r"^[A-Za-z0-9.-]{1,253}$")
# How long a question that arrives while the server starts waits for the library to load.
STARTUP_WAIT_S = 60.0
# Seconds between attempts to open a library that could not be opened (then every last one).
LOAD_RETRY_S = (1, 2, 5, 10)
# A readiness check that takes longer than this (a store that does not answer) says not ready.
READINESS_TIMEOUT_S = 5.0
# How often the served library is counted again (an empty one answers nothing).
LIBRARY_CHECK_S = 5.0
LIBRARY_EMPTY = ("the library holds no documents: run `sourcegate ingest FOLDER` with this server's "
                 "SOURCEGATE_HOME or SOURCEGATE_STORE")

# The request id of the HTTP request being served, so the MCP tool handler can log it.
current_request_id: contextvars.ContextVar[str | None] = contextvars.ContextVar("sourcegate_request_id", default=None)
# Who sent it (None on a server with neither API keys nor an issuer configured).
current_caller: contextvars.ContextVar[Caller | None] = contextvars.ContextVar("sourcegate_caller", default=None)
# Retry-After of a request whose token cannot be checked because the issuer's keys cannot be fetched.
ISSUER_RETRY_S = 10


def transport_security(settings: Settings) -> TransportSecuritySettings:
    """DNS-rebinding protection for /mcp and /v1: localhost always, plus the hosts in ALLOWED_HOSTS
    (comma list of host names, host:port or URLs; `*` turns the check off, e.g. behind a proxy
    that already validates Host). `GuardMiddleware` applies it to both, with one message."""
    extra = [h.strip() for h in settings.mcp_allowed_hosts.split(",") if h.strip()]
    if "*" in extra:
        return TransportSecuritySettings(enable_dns_rebinding_protection=False)
    hosts: list[str] = []
    origins: list[str] = []
    for h in ["127.0.0.1", "localhost", "[::1]", *extra]:
        if "://" in h:
            h = urlparse(h).netloc
        h = h.lower()  # host names are compared without case (`_host_allowed` lowers the header too)
        has_port = bool(re.search(r":\d+$", h))
        hosts.append(h)
        origins += [f"http://{h}", f"https://{h}"]
        if not has_port:
            hosts.append(f"{h}:*")
            origins += [f"http://{h}:*", f"https://{h}:*"]
    return TransportSecuritySettings(enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins)


def openapi_server_url(settings: Settings, request: Request) -> str:
    """The `servers` URL of /openapi.json: the request's own when its Host is one the server
    answers for (localhost, ALLOWED_HOSTS, or any with `*`), else the first allowed host
    (https), else localhost. A Host header alone never writes a URL into the document."""
    security = transport_security(settings)
    host = request.headers.get("host", "").lower()

    def allowed(pattern: str) -> bool:
        pattern = pattern.lower()
        if pattern.endswith(":*"):
            name, _, port = host.rpartition(":")
            return name == pattern[:-2] and port.isdigit()
        return host == pattern

    if not security.enable_dns_rebinding_protection or any(allowed(p) for p in security.allowed_hosts or []):
        return str(request.base_url)
    extra = [h.strip() for h in settings.mcp_allowed_hosts.split(",") if h.strip()]
    if extra:
        first = extra[0]
        return first if "://" in first else f"https://{first}"
    # the port the connection came in on (the Host header's, from a host not answered for, is not
    # this server's: without one it read as port 80)
    server = request.scope.get("server") or (None, None)
    return f"http://127.0.0.1:{server[1] or request.url.port or 80}"


def _json_error(status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status, headers=headers)


# The JSON-RPC code of a request refused before the MCP server reads it ("Invalid Request").
JSONRPC_REFUSED = -32600


def _refusal(path: str, status: int, message: str, headers: dict[str, str] | None = None,
             data: dict[str, Any] | None = None) -> JSONResponse:
    """A refusal from in front of the routes. On /mcp it is a JSON-RPC error response (id null: the
    body was not read), which MCP clients surface as the error of the call, so the person at the
    client reads the fix (the official client otherwise reports "Server returned an error
    response"); elsewhere `{"error": message}`."""
    if not path.startswith("/mcp"):
        return _json_error(status, message, headers)
    error = {"code": JSONRPC_REFUSED, "message": message, "data": {"http_status": status, **(data or {})}}
    return JSONResponse({"jsonrpc": "2.0", "id": None, "error": error}, status_code=status, headers=headers)


def _key_matches(headers: dict[str, str], key: str) -> bool:
    """The key in `x-api-key`, or as `Authorization: Bearer <key>` (what Prometheus sends)."""
    given = headers.get(API_KEY_HEADER, "")
    auth = headers.get("authorization", "")
    if not given and auth[:7].lower() == "bearer ":
        given = auth[7:].strip()
    return hmac.compare_digest(given.encode("utf-8"), key.encode("utf-8"))


# Metric labels come from fixed sets: a client inventing HTTP methods must not create series.
_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH"})


def _method_label(method: str) -> str:
    return method if method in _METHODS else "other"


def _host_allowed(security: TransportSecuritySettings, host: str) -> bool:
    host = host.lower()
    return host in security.allowed_hosts or any(
        a.endswith(":*") and host.startswith(a[:-1]) and host[len(a) - 1:].isdigit() for a in security.allowed_hosts)


def _origin_allowed(security: TransportSecuritySettings, origin: str) -> bool:
    origin = origin.lower()
    return origin in security.allowed_origins or any(
        a.endswith(":*") and origin.startswith(a[:-1]) and origin[len(a) - 1:].isdigit()
        for a in security.allowed_origins)


def _route_label(path: str) -> str:
    if path.startswith("/v1/audit/"):
        return "/v1/audit"
    if path in ("/", "/mcp", "/mcp/", "/v1/ask", "/v1/ask/stream", "/v1/filters", "/v1/feedback", "/healthz", "/readyz", "/metrics", "/openapi.json",
                "/auth/login", "/auth/callback", "/auth/logout", "/auth/session"):
        return path.rstrip("/") or "/"
    return "other"


class GuardMiddleware:
    """Request id, API key, body size cap and HTTP metrics, in front of every route (MCP too).

    The body is read up to the cap before the app runs, so an oversized body gets a clear 413
    whether or not it declared its length."""

    def __init__(self, app: ASGIApp, settings: Settings, metrics: Metrics, auth: Authenticator | None = None,
                 web: WebSignIn | None = None):
        self.app = app
        self.settings = settings
        self.metrics = metrics
        self.security = transport_security(settings)
        self.auth = auth or Authenticator(settings)
        self.web = web

    def rebinding_refusal(self, path: str, headers: dict[str, str]) -> tuple[Response, dict[str, str]] | None:
        """A page on another site that rebinds its name to this server's address must not reach
        /mcp or /v1: both answer only for localhost and the names in ALLOWED_HOSTS, whether or
        not a key is set (one rule, so a name that works for REST works for MCP). Returns the
        refusal and the fields its log line carries, or None."""
        if not self.security.enable_dns_rebinding_protection or not path.startswith((*PROTECTED_PREFIXES, SIGNIN_PREFIX)):
            return None
        host = headers.get("host", "")
        if not _host_allowed(self.security, host):
            name = host.rpartition(":")[0] if re.search(r":\d+$", host) else host
            shown = name if _HOST_NAME.match(name) else "the public host name"
            fix = f"add the name to ALLOWED_HOSTS (ALLOWED_HOSTS={shown}, comma separated for several)"
            return (_refusal(path, 421, f"this server does not answer for the Host header it was sent: {fix}",
                             data={"setting": "ALLOWED_HOSTS", "fix": fix}),
                    {"host": host[:100], "setting": "ALLOWED_HOSTS", "fix": fix})
        origin = headers.get("origin")
        # (the sign-in's pages are navigated to from the issuer: their Origin is the issuer's)
        if origin and path.startswith(PROTECTED_PREFIXES) and not _origin_allowed(self.security, origin):
            fix = "add the page's host name to ALLOWED_HOSTS"
            return (_refusal(path, 403, f"requests from that Origin are refused: {fix}",
                             data={"setting": "ALLOWED_HOSTS", "fix": fix}),
                    {"origin": origin[:200], "setting": "ALLOWED_HOSTS", "fix": fix})
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path: str = scope["path"]
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        rid = headers.get("x-request-id", "")
        rid = rid if _REQUEST_ID_OK.match(rid) else new_request_id()
        token = current_request_id.set(rid)
        identity: list[tuple[contextvars.ContextVar, contextvars.Token]] = []
        code = {"status": 500}
        interface = "mcp" if path.startswith("/mcp") else ("web" if headers.get(INTERFACE_HEADER) == "web" else "rest")

        async def send_wrapped(message: Message) -> None:
            if message["type"] == "http.response.start":
                code["status"] = message["status"]
                extra = [(b"x-request-id", rid.encode())]
                if message["status"] == 503:
                    # A client told to come back later does not keep an idle connection meanwhile:
                    # it opens a fresh one, which the server cannot close under it.
                    extra.append((b"connection", b"close"))
                message = {**message, "headers": [*message.get("headers", []), *extra]}
            await send(message)

        try:
            metrics_key = self.settings.metrics_api_key or self.settings.mcp_api_key
            if path == "/metrics" and metrics_key and not _key_matches(headers, metrics_key):
                await _json_error(401, "/metrics needs the key (METRICS_API_KEY, else MCP_API_KEY) in the x-api-key "
                                       "header or as Authorization: Bearer")(scope, receive, send_wrapped)
                return
            refused = self.rebinding_refusal(path, headers)
            if refused is not None:
                response, fields = refused
                self.metrics.observe_rejected(interface, "host")
                log_rejected(interface, "host", rid, **fields)
                await response(scope, receive, send_wrapped)
                return
            if self.auth.required and path.startswith(PROTECTED_PREFIXES):
                session = False
                if self.web is not None and path.startswith("/v1/") and not headers.get(API_KEY_HEADER) \
                        and not headers.get("authorization"):
                    # the page's calls carry the signed-in person's access token in its session
                    # cookie: checked exactly as a bearer token, by the same verifier
                    bearer = self.web.session_token(headers)
                    if bearer is not None:
                        headers = {**headers, "authorization": f"Bearer {bearer}"}
                        session = True
                outcome = await self.authenticate(path, headers, interface, rid, session)
                if isinstance(outcome, Response):
                    await outcome(scope, receive, send_wrapped)
                    return
                # for the routes, the MCP tool (current_caller) and the SDK's get_access_token()
                caller, claims = outcome
                identity.append((current_caller, current_caller.set(caller)))
                if claims is not None and self.auth.verifier is not None:
                    user = AuthenticatedUser(access_token(headers["authorization"][7:].strip(), claims,
                                                          self.auth.verifier.resource))
                    identity.append((auth_context_var, auth_context_var.set(user)))
            cap = self.settings.max_body_bytes
            too_big = _refusal(path, 413, f"request body over {cap} bytes (MAX_BODY_BYTES): send only the question")
            declared = headers.get("content-length")
            if declared and declared.isdigit() and int(declared) > cap:
                self.metrics.observe_rejected(interface, "body_too_large")
                log_rejected(interface, "body_too_large", rid)
                await too_big(scope, receive, send_wrapped)
                return
            body = bytearray()
            more = True
            trailing: Message | None = None
            while more:
                message = await receive()
                if message["type"] != "http.request":
                    trailing = message
                    break
                body.extend(message.get("body", b""))
                more = message.get("more_body", False)
                if len(body) > cap:
                    self.metrics.observe_rejected(interface, "body_too_large")
                    log_rejected(interface, "body_too_large", rid)
                    await too_big(scope, receive, send_wrapped)
                    return
            queued: list[Message] = [{"type": "http.request", "body": bytes(body), "more_body": False}]
            if trailing is not None:
                queued.append(trailing)

            async def replay() -> Message:
                return queued.pop(0) if queued else await receive()

            await self.app(scope, replay, send_wrapped)
        finally:
            self.metrics.observe_http(_route_label(path), _method_label(scope.get("method", "")), code["status"])
            current_request_id.reset(token)
            for var, value in reversed(identity):
                var.reset(value)

    async def authenticate(self, path: str, headers: dict[str, str], interface: str, rid: str,
                           session: bool = False) -> tuple[Caller, dict[str, Any] | None] | Response:
        """The caller and their token's claims, or the response that refuses the request: the
        reason goes to the log; a token's refusal says only `invalid_token`, as the MCP
        authorization spec has it."""
        try:
            return await self.auth.authenticate(headers)
        except IssuerUnavailable as e:
            self.metrics.observe_rejected(interface, "auth")
            log.error("a bearer token cannot be checked: the issuer's signing keys cannot be fetched",
                      extra={"request_id": rid, "error": str(e)[:300]})
            return _refusal(path, 503, "the server cannot check access tokens now (the operator can see why in the "
                                       "server log)", headers={"retry-after": str(ISSUER_RETRY_S)})
        except Refusal as e:
            self.metrics.observe_rejected(interface, "auth")
            log_rejected(interface, "auth", rid, detail=e.reason)
            challenge = self.auth.www_authenticate("invalid_token" if e.kind == "invalid_token" else None)
            extra = {"www-authenticate": challenge} if challenge else None
            if e.kind == "invalid_token":
                if session:  # the page's own session: the person is told what to do
                    return _refusal(path, 401, "your sign-in has ended: sign in again (the link at the top of the page)",
                                    headers=extra, data={"setting": "AUTH_WEB_CLIENT_ID"})
                return _refusal(path, 401, "invalid_token", headers=extra)
            if interface == "web" and self.web is not None and e.kind == "missing":
                msg = "sign in first (the Sign in link at the top of the page)" + (
                    ", or type the API key in the API key box" if self.auth.api_keys else "")
            elif interface == "web":  # a person at the page: the box, not a header
                msg = ("this server needs its API key: type it in the API key box and ask again"
                       if e.kind == "missing" else "wrong API key: check the key in the API key box and ask again")
            elif self.auth.verifier is not None and e.kind == "missing":
                msg = "missing credentials: send an access token (Authorization: Bearer) or the x-api-key header"
            else:
                msg = ("missing API key: send it in the x-api-key header" if e.kind == "missing"
                       else "wrong API key in the x-api-key header")
            setting = "MCP_API_KEY" if self.settings.mcp_api_key else ("API_KEYS" if self.auth.api_keys else "AUTH_ISSUER")
            return _refusal(path, 401, msg, headers=extra, data={"setting": setting})


class _McpEndpoint:
    """ASGI endpoint forwarding to the session manager of the running lifespan (a manager can
    only run once, and a test may start the app's lifespan several times)."""

    def __init__(self) -> None:
        self.manager: StreamableHTTPSessionManager | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("method") == "GET":
            # Stateless, JSON responses: the server never sends messages of its own, so it offers no
            # event stream to hold open (the MCP transport's answer for that case is 405).
            await _json_error(405, "this MCP server offers no event stream: send requests with POST /mcp",
                              {"allow": "POST"})(scope, receive, send)
            return
        if self.manager is None:
            await _json_error(503, "the MCP endpoint runs inside the app's lifespan: serve the app with "
                                   "uvicorn (sourcegate serve) or enter `with TestClient(app)`")(scope, receive, send)
            return
        await self.manager.handle_request(scope, receive, send)


class _AsgiEndpoint:
    """A plain ASGI function as a route endpoint (Starlette treats a bare function as a
    request -> response handler)."""

    def __init__(self, fn: Callable[[Scope, Receive, Send], Awaitable[None]]) -> None:
        self.fn = fn

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.fn(scope, receive, send)


# Proxies (nginx) buffer responses unless told not to, which would hold every event to the end.
SSE_HEADERS = {"cache-control": "no-cache", "x-accel-buffering": "no"}
STREAM_INTERNAL_ERROR = "the answer could not be completed (internal error; see the server log): discard it"


def _sse(kind: str, data: Any) -> bytes:
    return f"event: {kind}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n".encode("utf-8")


async def _sse_events(first: tuple[str, Any], events: MemoryObjectReceiveStream[tuple[str, Any]]
                      ) -> AsyncIterator[bytes]:
    """`gate`, `delta`, `reset`, `replace` as the service sends them; then `result` (the AskResult)
    or `error`."""
    item = first
    while True:
        kind, data = item
        if kind == "result":
            yield _sse("result", data.model_dump(mode="json"))
            return
        if kind == "failed":
            message = str(data) if isinstance(data, Unavailable) else STREAM_INTERNAL_ERROR
            yield _sse("error", {"error": message})
            return
        yield _sse(kind, data)
        try:
            item = await events.receive()
        except anyio.EndOfStream:
            yield _sse("error", {"error": STREAM_INTERNAL_ERROR})
            return


class _GateHolder:
    """One SourceGate per app. The served app builds it as it starts, in the background (loading
    the embedder takes seconds), so /healthz answers at once and /readyz says when questions can be
    answered; without that, it is built on first use."""

    def __init__(self, settings: Settings, gate: SourceGate | None):
        self.settings = settings
        self.gate = gate
        self._lock = threading.Lock()
        self.owned = gate is None
        self.load_error: str | None = None  # exception type only: clients see it in /readyz
        self._loaded: anyio.Event | None = None
        self._store_probe: tuple[float, str | None] | None = None
        self._library_empty: bool | None = None
        self._library_checked = 0.0
        self.judge_error: str | None = None  # exception type only: clients see the state in /readyz

    def get_sync(self) -> SourceGate:
        with self._lock:
            if self.gate is None:
                gate = SourceGate(self.settings)
                self._load_judge(gate)  # the judge's weights load now, not on the first question
                self._warm(gate)
                self._warn_unmarked(gate)
                self.gate = gate
            return self.gate

    def _load_judge(self, gate: SourceGate) -> bool:
        """Load the judge; while it cannot be loaded, answers are degraded (fail closed) and
        /readyz says `judge_unavailable`. The server tries again every LOAD_RETRY_S[-1] seconds."""
        try:
            warm = getattr(gate.judge, "warm", None)  # the local judge's weights and reader
            if callable(warm):
                warm()
        except Exception as e:
            self.judge_error = type(e).__name__
            log.error("the judge could not be loaded (trying again in %s s): %s", LOAD_RETRY_S[-1],
                      " ".join(str(e).split())[:300], extra={"error": type(e).__name__})
            return False
        self.judge_error = None
        return True

    def _warm(self, gate: SourceGate) -> None:
        """One retrieval before the server says it is ready: the embedder's query path and the
        store's vectors (held in memory for SQLite: seconds at 100k chunks) load now, not on the
        first question."""
        try:
            gate.retriever.retrieve("sourcegate readiness warm-up")
        except Exception as e:  # an empty or unreadable store: readiness says so
            log.warning("the warm-up retrieval failed", extra={"error": type(e).__name__})

    def _warn_unmarked(self, gate: SourceGate) -> None:
        """Say at start when restricted callers will read nothing of the documents that name no
        readers (docs/readers.md): a library ingested before readers existed names none."""
        from ..readers import unmarked_warning

        try:
            warning = unmarked_warning(self.settings, gate.store.list_documents())
        except Exception as e:  # an unreadable store: readiness says so
            log.debug("documents without readers not counted: %s", type(e).__name__)
            return
        if warning:
            log.warning(warning)

    def begin_loading(self) -> None:
        self._loaded = anyio.Event()

    async def load(self) -> None:
        """Open the library, and keep trying while it cannot be opened (a store locked or
        unreachable at start): the server becomes ready by itself once it can."""
        delays = iter(LOAD_RETRY_S)
        delay = LOAD_RETRY_S[0]
        while True:
            try:
                await anyio.to_thread.run_sync(self.get_sync)
                self.load_error = None
                break
            except Exception as e:
                self.load_error = type(e).__name__
                delay = next(delays, delay)
                log.error("the library could not be opened (trying again in %s s): %s", delay, e,
                          extra={"error": type(e).__name__})
            finally:
                if self._loaded is not None:
                    self._loaded.set()
            await anyio.sleep(delay)
        await anyio.to_thread.run_sync(self._warm_audit_index)  # ready meanwhile: lookups wait for it
        while self.judge_error is not None and self.gate is not None:
            await anyio.sleep(LOAD_RETRY_S[-1])
            await anyio.to_thread.run_sync(self._load_judge, self.gate)

    def _warm_audit_index(self) -> None:
        """Bring the audit log's index up to date now rather than on the first lookup."""
        audit = self.audit()
        try:
            if audit is not None:
                audit.find("index-warm-up")
        except Exception as e:  # a damaged or unreadable log: lookups will say so
            log.warning("the audit index could not be brought up to date", extra={"error": type(e).__name__})

    async def get(self) -> SourceGate:
        if self.gate is not None:
            return self.gate
        if self.load_error is not None:
            raise Unavailable("the library cannot be opened now (the server keeps trying; the operator can see why "
                              "in the server log)", "not_ready", retry_after=LOAD_RETRY_S[-1])
        if self._loaded is not None:
            with anyio.move_on_after(STARTUP_WAIT_S):
                await self._loaded.wait()
            if self.gate is not None:
                return self.gate
            raise Unavailable("the server is still starting", "starting", retry_after=5)
        return await anyio.to_thread.run_sync(self.get_sync)

    def audit_problem(self) -> AuditWriteError | None:
        """Why the audit log cannot be written now, or None (also None when auditing is off)."""
        audit = self.audit()
        if audit is None:
            return None
        try:
            audit.check_writable()
        except AuditWriteError as e:
            return e
        return None

    def store_problem(self) -> str | None:
        """Why the store cannot be read now, or None; probed at most once a second."""
        now = time.monotonic()
        if self._store_probe is not None and now - self._store_probe[0] < 1.0:
            return self._store_probe[1]
        problem = None
        try:
            assert self.gate is not None
            self.gate.store.get_document("readiness-probe")
        except Exception as e:
            problem = type(e).__name__
            log.warning("the store cannot be read", extra={"error": problem})
        self._store_probe = (time.monotonic(), problem)
        return problem

    def library_empty(self) -> bool:
        """Whether the loaded library holds no documents (counted at most every LIBRARY_CHECK_S)."""
        gate = self.gate
        if gate is None:
            return False
        now = time.monotonic()
        if self._library_empty is None or now - self._library_checked >= LIBRARY_CHECK_S:
            try:
                empty = gate.store.stats().documents == 0
            except Exception as e:  # an unreadable store shows in the answers' errors and the log
                log.warning("the library could not be counted", extra={"error": type(e).__name__})
                empty = False
            if empty and not self._library_empty:
                log.error("the library holds no documents: run `sourcegate ingest FOLDER` on %s",
                          getattr(gate.store, "location", None) or getattr(gate.store, "path", None)
                          or self.settings.store_location,
                          extra={"error": "library_empty"})
            self._library_empty, self._library_checked = empty, now
        return bool(self._library_empty)

    def readiness(self) -> tuple[bool, str]:
        """(ready, state). Runs in a worker thread: it touches the audit log's disk and the store."""
        if self.gate is None:
            return False, "starting" if self.load_error is None else "unavailable"
        if self.library_empty():
            return False, "library_empty"
        if self.judge_error is not None:
            return False, "judge_unavailable"
        if self.audit_problem() is not None:
            return False, "audit_log_unwritable"
        if self.store_problem() is not None:
            return False, "store_unreachable"
        return True, "ready"

    def audit(self) -> AuditLog | None:
        if self.gate is not None:
            return self.gate.audit
        return AuditLog(self.settings.audit_path, self.settings.audit_key) if self.settings.audit_enabled else None


def _web_page() -> str:
    return resources.files("sourcegate.server").joinpath("static/index.html").read_text(encoding="utf-8")


STORE_UNAVAILABLE = ("the library's store cannot be reached now (the server keeps trying; the operator can see "
                     "why in the server log)")
# Retry-After of a question refused because the store cannot be reached.
STORE_RETRY_S = 5
AUDIT_UNWRITABLE = ("no answer is given while the audit log cannot be written (auditing is on); "
                    "the operator must fix it (see the server log)")


ASK_BODY_HINT = 'send {"query": "your question"}'


def parse_question(body: bytes) -> tuple[str, int, dict[str, Any] | None]:
    """The query of an /v1/ask body, 0 and its `filters` (or None), or the reason it is refused,
    the status (400 for a body that is not JSON, 422 for JSON that is not a question) and None."""
    try:
        payload = json.loads(body or b"null")
    except (json.JSONDecodeError, UnicodeDecodeError):
        return f"the body is not valid JSON (UTF-8): {ASK_BODY_HINT}", 400, None
    except RecursionError:
        return f"the body is nested too deeply: {ASK_BODY_HINT}", 400, None
    except ValueError as e:  # an integer with more digits than Python converts
        return f"the body holds a number that cannot be read ({str(e)[:80]}): {ASK_BODY_HINT}", 400, None
    if not isinstance(payload, dict) or not isinstance(payload.get("query"), str):
        return f'expected a JSON object with a string query: {ASK_BODY_HINT}', 422, None
    filters = payload.get("filters")
    if filters is not None and not isinstance(filters, dict):
        return 'filters must be an object of key: value pairs, e.g. {"model": "HG-3"}', 422, None
    return payload["query"], 0, filters or None


def _hash_source(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode() + "'"


def content_security_policy(page: str) -> str:
    """The web page's policy: its own inline script and style by hash, calls to this origin only,
    no frames, plugins, base or foreign forms."""
    scripts = " ".join(_hash_source(t) for t in re.findall(r"<script>(.*?)</script>", page, re.S)) or "'none'"
    styles = " ".join(_hash_source(t) for t in re.findall(r"<style>(.*?)</style>", page, re.S)) or "'none'"
    return (f"default-src 'none'; script-src {scripts}; style-src {styles}; connect-src 'self'; "
            "img-src 'self' data:; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")


def is_loopback(host: str) -> bool:
    """Whether a bind address only accepts connections from this machine."""
    import ipaddress

    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def key_problem(settings: Settings) -> str | None:
    """Why an API key in the settings can never match a request, or None. HTTP header values are
    read as ISO-8859-1 and clients send ASCII: a key with other characters would refuse everyone."""
    for name, key in (("MCP_API_KEY", settings.mcp_api_key), ("METRICS_API_KEY", settings.metrics_api_key)):
        if key is None:
            continue
        if key == "":
            return (f"{name} is set but empty, which would mean no key at all: set a key (for example "
                    f"`openssl rand -hex 32`), or unset {name} to serve without one")
        bad = next((ch for ch in key if not (" " <= ch < "\x7f")), None)
        if bad is not None:
            return (f"{name} holds the character {bad!r} (U+{ord(bad):04X}): HTTP headers carry printable ASCII "
                    "only, so no client could send this key; use letters, digits and ASCII punctuation (for "
                    "example `openssl rand -hex 32`)")
        if key != key.strip():
            return f"{name} begins or ends with a space, which HTTP clients drop: remove it"
    try:  # API_KEYS' JSON (or file) and the AUTH_* URLs: refused at start with what to fix
        Authenticator(settings)
        if settings.auth_web_client_id:
            web_settings(settings)
    except ValueError as e:
        return str(e)
    return None


AUDIT_LOOPBACK_ONLY = ("the audit API answers without MCP_API_KEY only on a loopback address (127.0.0.1): "
                       "set MCP_API_KEY, or serve on 127.0.0.1")


def create_app(settings: Settings, gate: SourceGate | None = None, *, audit_lookup: bool = True) -> Starlette:
    """`audit_lookup=False` turns `/v1/audit/{id}` away (403): `serve` does so on a non-loopback
    address without MCP_API_KEY, where anyone who reaches the port could read every record."""
    holder = _GateHolder(settings, gate)
    metrics = Metrics()
    admission = AdmissionControl.from_settings(settings)
    auth = Authenticator(settings)  # a bad API_KEYS or AUTH_* setting fails here, at start
    web = WebSignIn(settings, auth.verifier, key_login=bool(auth.api_keys)) \
        if settings.auth_web_client_id and auth.verifier is not None else None

    async def ask(query: str, interface: str, filters: dict[str, Any] | None = None,
                  on_event: Callable[[str, dict[str, Any]], None] | None = None) -> AskResult:
        """One question through admission control, with its metrics and log line. `on_event` is
        called from the worker thread (see `SourceGate.ask`)."""
        rid = current_request_id.get() or new_request_id()
        caller = current_caller.get()
        try:
            g = await holder.get()
            if await anyio.to_thread.run_sync(holder.library_empty):  # counts the store: not on the event loop
                raise Unavailable(LIBRARY_EMPTY, "library_empty")
            problem = holder.audit_problem()
            if problem is not None:
                log.error("audit log unwritable", extra={"request_id": rid, "error": problem.message})
                raise Unavailable(AUDIT_UNWRITABLE, "audit_log_unwritable")
        except Unavailable as e:
            metrics.observe_rejected(interface, "not_ready")
            log_rejected(interface, "not_ready", rid, detail=e.reason)
            raise
        t0 = time.perf_counter()
        try:
            async with admission.slot():
                t0 = time.perf_counter()
                result = await anyio.to_thread.run_sync(
                    functools.partial(g.ask, query, interface=interface, on_event=on_event, filters=filters,
                                      caller=caller))
        except Overloaded as e:
            metrics.observe_rejected(interface, "overloaded")
            log_rejected(interface, "overloaded", rid, detail=e.reason, retry_after_s=e.retry_after)
            raise
        except QueryError:
            metrics.observe_rejected(interface, "query")
            log_rejected(interface, "query", rid)
            raise
        except StoreUnavailable as e:
            # The database is down or not answering: a 503 the client can retry, fast (the store
            # waits for a connection a few seconds at most), never a 500 with the driver's text.
            metrics.observe_rejected(interface, "not_ready")
            log.error("the store cannot be reached", extra={"request_id": rid, "interface": interface, "error": str(e)})
            raise Unavailable(STORE_UNAVAILABLE, "store_unreachable", retry_after=STORE_RETRY_S) from None
        except EmbedderMismatch as e:
            # The index was re-embedded for another embedder while this server runs: its vectors
            # and this server's questions are in different spaces. Never answered from them.
            metrics.observe_rejected(interface, "not_ready")
            log.error("the index holds another embedder's vectors", extra={"request_id": rid, "interface": interface,
                                                                           "error": str(e)})
            raise Unavailable("the index now holds another embedder's vectors than this server's: the operator must "
                              "restart it with the index's SOURCEGATE_EMBEDDER", "embedder_mismatch") from None
        except AuditWriteError as e:
            # The answer exists but cannot be recorded: it is not given.
            metrics.observe_error(interface)
            log.error("audit log write failed", extra={"request_id": rid, "interface": interface, "error": e.message})
            raise Unavailable(AUDIT_UNWRITABLE, "audit_log_unwritable") from None
        except Exception as e:
            metrics.observe_error(interface)
            log.error("ask failed", extra={"request_id": rid, "interface": interface, "error": type(e).__name__})
            raise
        judge_errors = sum(1 for x in result.excluded if x.reason == "judge_error")
        metrics.observe_ask(interface, result.status, time.perf_counter() - t0, judge_errors, result.degraded)
        log_ask(result, interface, settings, rid, g)
        return result

    async def mcp_ask(query: str, filters: dict[str, Any] | None = None) -> AskResult:
        return await ask(query, "mcp", filters)

    feedback_store: list[FeedbackStore] = []  # opened on the first feedback, closed with the app
    feedback_lock = threading.Lock()

    def feedback_sync(request: FeedbackRequest, interface: str, caller: Caller | None = None) -> dict[str, Any]:
        with feedback_lock:
            if not feedback_store:
                feedback_store.append(open_feedback(settings))
        g = holder.gate
        # a passage id outside the answer is looked up among the documents the caller may read only
        rule = readers_rule(caller, g.settings.documents_without_readers) if g is not None else None
        return record_feedback(request, feedback_store[0], holder.audit(), g.store if g is not None else None,
                               interface=interface, readers=rule).to_json()

    async def give_feedback(request: FeedbackRequest, interface: str) -> dict[str, Any]:
        """One piece of feedback, checked against the answer's audit record and the library; it takes
        an answering slot like an audit lookup (it reads the log)."""
        await holder.get()  # the library, to check a passage id that was not among the answer's
        async with admission.slot():
            row = await anyio.to_thread.run_sync(feedback_sync, request, interface, current_caller.get())
        log.info("feedback recorded", extra={"request_id": current_request_id.get(), "interface": interface,
                                             "audit_id": row["audit_id"], "verdict": row["verdict"]})
        return row

    async def mcp_feedback(arguments: dict[str, Any]) -> dict[str, Any]:
        return await give_feedback(parse_feedback(arguments), "mcp")

    mcp_server = build_mcp_server(settings, mcp_ask, mcp_feedback)
    mcp_endpoint = _McpEndpoint()

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        manager = StreamableHTTPSessionManager(
            # Host and Origin are checked by GuardMiddleware for /mcp and /v1 alike, with a refusal
            # that names ALLOWED_HOSTS (the SDK's own check answers a bare "Invalid Host header").
            app=mcp_server, json_response=True, stateless=True,
            security_settings=TransportSecuritySettings(enable_dns_rebinding_protection=False),
            max_request_body_size=settings.max_body_bytes,
        )
        async with anyio.create_task_group() as tasks:
            if holder.gate is None:
                holder.begin_loading()
                tasks.start_soon(holder.load)
            async with manager.run():
                mcp_endpoint.manager = manager
                try:
                    yield
                finally:
                    mcp_endpoint.manager = None
            tasks.cancel_scope.cancel()  # a library still being retried is not waited for
        while feedback_store:
            feedback_store.pop().close()
        if holder.owned and holder.gate is not None:
            holder.gate.close()
            holder.gate = None

    async def read_question(request: Request) -> tuple[str, str, dict[str, Any] | None] | Response:
        """(query, interface, filters) from a request to /v1/ask or /v1/ask/stream, or the error
        response (400 or 422, counted and logged as rejected: no body makes a 500)."""
        interface = "web" if request.headers.get(INTERFACE_HEADER) == "web" else "rest"
        problem, status, filters = parse_question(await request.body())
        if status:
            metrics.observe_rejected(interface, "bad_body")
            log_rejected(interface, "bad_body", current_request_id.get() or new_request_id())
            return _json_error(status, problem)
        return problem, interface, filters

    def refusal(e: Exception) -> Response:
        """The response to an exception raised before any answer was given; any other than a
        refusal is raised again (a 500)."""
        if isinstance(e, QueryError):
            # a refusal may quote the request and the library's metadata (a filter's values): inert
            # Markdown with no control character, as answers are, for the agent or page showing it
            return _json_error(422, inert_markup(str(e)) or "query refused")
        if isinstance(e, Unavailable):
            headers = {"retry-after": str(e.retry_after)} if e.retry_after else None
            return _json_error(503, str(e), headers)
        raise e

    async def rest_ask(request: Request) -> Response:
        question = await read_question(request)
        if isinstance(question, Response):
            return question
        try:
            result = await ask(*question)
        except (QueryError, Unavailable) as e:
            return refusal(e)
        return JSONResponse(result.model_dump(mode="json"))

    async def rest_ask_stream(scope: Scope, receive: Receive, send: Send) -> None:
        """The answer as server-sent events. The status code is only sent once the gate has
        decided, so a question that is refused (400, 422, 503 with Retry-After) gets the same
        response as from /v1/ask; after that, a failure is an `error` event."""
        request = Request(scope, receive)
        question = await read_question(request)
        if isinstance(question, Response):
            await question(scope, receive, send)
            return
        # Unbounded: the worker thread never waits for a slow reader, so a client that reads
        # slowly does not hold an answering slot any longer than the answer takes.
        events_in, events_out = anyio.create_memory_object_stream[tuple[str, Any]](math.inf)

        def on_event(kind: str, data: dict[str, Any]) -> None:  # in the worker thread
            with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
                anyio.from_thread.run_sync(events_in.send_nowait, (kind, data))

        async def run() -> None:
            async with events_in:
                item: tuple[str, Any]
                try:
                    item = ("result", await ask(*question, on_event=on_event))
                except Exception as e:  # ask() has counted and logged it
                    item = ("failed", e)
                with contextlib.suppress(anyio.BrokenResourceError):  # the client went away
                    events_in.send_nowait(item)

        failure: Exception | None = None
        async with anyio.create_task_group() as tasks, events_out:
            tasks.start_soon(run)
            first = await events_out.receive()
            if first[0] == "failed":
                failure = first[1]
            else:
                response = StreamingResponse(_sse_events(first, events_out), media_type="text/event-stream",
                                             headers=SSE_HEADERS)
                # A client that goes away stops the stream, not the answer: it is still
                # completed, audited and logged (the task group waits for it).
                with contextlib.suppress(ClientDisconnect):
                    await response(scope, receive, send)
        if failure is not None:
            await refusal(failure)(scope, receive, send)

    async def rest_filters(request: Request) -> Response:
        """The metadata keys a question can filter on and their values (`filters.filter_choices`):
        what the web page offers as selects. Behind the same Host and API-key checks as /v1/ask."""
        try:
            g = await holder.get()
            # the keys and values of the documents this caller may read only (docs/readers.md)
            choices = await anyio.to_thread.run_sync(g.filter_choices, current_caller.get())
        except Unavailable as e:
            return refusal(e)
        except StoreUnavailable as e:
            log.error("the store cannot be reached", extra={"request_id": current_request_id.get(), "error": str(e)})
            return _json_error(503, STORE_UNAVAILABLE, {"retry-after": str(STORE_RETRY_S)})
        return JSONResponse(choices)

    async def rest_feedback(request: Request) -> Response:
        """POST /v1/feedback: 201 with the stored row; 400 for a body or a passage that cannot be
        recorded, 404 for an answer the audit log does not hold."""
        interface = "web" if request.headers.get(INTERFACE_HEADER) == "web" else "rest"
        try:
            body = json.loads(await request.body() or b"null")
        except (ValueError, RecursionError):
            return _json_error(400, f"the body is not valid JSON (UTF-8): {FEEDBACK_BODY_HINT}")
        try:
            row = await give_feedback(parse_feedback(body), interface)
        except UnknownAnswer as e:
            return _json_error(404, inert_markup(str(e)) or "no such answer")
        except FeedbackError as e:
            return _json_error(400, inert_markup(str(e)) or "feedback refused")
        except (Unavailable, Overloaded) as e:
            return refusal(e)
        except StoreUnavailable as e:
            log.error("the store cannot be reached", extra={"request_id": current_request_id.get(), "error": str(e)})
            return _json_error(503, STORE_UNAVAILABLE, {"retry-after": str(STORE_RETRY_S)})
        return JSONResponse(row, status_code=201)

    async def audit_record(request: Request) -> Response:
        if not audit_lookup:
            return _json_error(403, AUDIT_LOOPBACK_ONLY)
        audit_id = request.path_params["audit_id"]
        if not _AUDIT_ID_OK.match(audit_id):
            return _json_error(404, "no such audit record: audit ids are the audit_id field of an answer")
        audit = holder.audit()
        if audit is None:
            return _json_error(404, "the audit log is off (AUDIT_ENABLED=false): no record is kept")
        try:
            # A lookup reads the log: it takes an answering slot like a question, so lookups
            # cannot starve the questions.
            async with admission.slot():
                record = await anyio.to_thread.run_sync(audit.find, audit_id)
        except Overloaded as e:
            return refusal(e)
        except AuditRecordDamaged as e:
            return _json_error(409, str(e))
        caller = current_caller.get()
        if record is not None and caller is not None and not caller.unrestricted \
                and (record.get("caller") or {}).get("user_id") != caller.user_id:
            record = None  # another caller's question and documents: as if there were no such record
        if record is None:
            return _json_error(404, f"no audit record {audit_id} in this server's audit log")
        verified = verify(record, settings.audit_key)
        return JSONResponse(record, headers={"x-audit-verified": "true" if verified else "false"})

    async def health() -> dict:
        ready, state = False, "store_unreachable"
        with anyio.move_on_after(READINESS_TIMEOUT_S):
            ready, state = await anyio.to_thread.run_sync(holder.readiness, abandon_on_cancel=True)
        body = {"status": "ok", "alive": True, "ready": ready, "state": state,
                "in_flight": admission.running, "queued": admission.waiting}
        gate = holder.gate
        if gate is not None:  # which adaptation answers (`sourcegate adapt`), or why the home's is not used
            ad = getattr(gate, "adaptation", None)
            body["adaptation"] = ad.id if ad is not None else None
            if getattr(gate, "adaptation_problem", None):
                body["adaptation_problem"] = gate.adaptation_problem
        if state == "library_empty":
            body["detail"] = LIBRARY_EMPTY
        elif state == "judge_unavailable":
            body["detail"] = ("the judge could not be loaded: every answer would be a degraded abstention; the "
                              "server tries again every 10 s (the server log says why)")
        return body

    async def healthz(request: Request) -> Response:
        """Alive: the process answers. The body says whether it is also ready."""
        return JSONResponse(await health())

    async def readyz(request: Request) -> Response:
        """Ready: the library is loaded, the store answers and answers can be recorded (503
        otherwise)."""
        body = await health()
        return JSONResponse(body, status_code=200 if body["ready"] else 503)

    async def metrics_endpoint(request: Request) -> Response:
        metrics.set_load(admission.running, admission.waiting)
        return Response(metrics.render(), media_type=CONTENT_TYPE_LATEST)

    async def openapi(request: Request) -> Response:
        return JSONResponse(openapi_document(settings, openapi_server_url(settings, request)))

    page = _web_page()
    page_headers = {"cache-control": "no-store", "content-security-policy": content_security_policy(page),
                    "x-content-type-options": "nosniff", "referrer-policy": "no-referrer", "x-frame-options": "DENY"}

    async def index(request: Request) -> Response:
        return HTMLResponse(page, headers=page_headers)

    routes = [
        Route("/", index, methods=["GET"]),
        Route("/healthz", healthz, methods=["GET"]),
        Route("/readyz", readyz, methods=["GET"]),
        Route("/metrics", metrics_endpoint, methods=["GET"]),
        Route("/openapi.json", openapi, methods=["GET"]),
        Route("/v1/ask", rest_ask, methods=["POST"]),
        Route("/v1/ask/stream", _AsgiEndpoint(rest_ask_stream), methods=["POST"]),
        Route("/v1/filters", rest_filters, methods=["GET"]),
        Route("/v1/feedback", rest_feedback, methods=["POST"]),
        Route("/v1/audit/{audit_id}", audit_record, methods=["GET"]),
        Route("/mcp", mcp_endpoint),
        *auth.routes(),
        *(web.routes() if web is not None else []),
    ]
    app = Starlette(routes=routes, lifespan=lifespan)
    app.add_middleware(GuardMiddleware, settings=settings, metrics=metrics, auth=auth, web=web)
    app.state.metrics = metrics
    app.state.gate_holder = holder
    app.state.admission = admission
    return app


def serve(settings: Settings, host: str = "127.0.0.1", port: int = 8000, sockets: list | None = None) -> None:
    """Serve until SIGTERM; on `sockets` already bound (a worker of `serve --workers`) when given."""
    import uvicorn

    from ..logs import configure_logging

    configure_logging(settings.log_level or "info")
    if host not in ("127.0.0.1", "localhost", "::1") and not settings.mcp_allowed_hosts:
        log.warning("serving on a non-local address without ALLOWED_HOSTS: /mcp and /v1 answer 421 to requests "
                    "whose Host header is not localhost; set ALLOWED_HOSTS=your.host.name")
    open_files = raise_open_files_limit()
    log.info("up to %d connections at once (open-file limit %d)", max_connections(settings, open_files), open_files)
    audit_lookup = is_loopback(host) or bool(settings.mcp_api_key or settings.api_keys_secret or settings.auth_issuer)
    if not audit_lookup:
        log.warning("serving on a non-local address without MCP_API_KEY: anyone who reaches it can query the "
                    "library; /v1/audit is turned off (403) until MCP_API_KEY is set")
    uvicorn.Server(server_config(create_app(settings, audit_lookup=audit_lookup), settings, host=host, port=port)).run(sockets=sockets)


# File descriptors kept for what is not a connection (the index, the audit log, the model files,
# the worker pipes), when the connection cap is taken from the open-file limit.
FD_RESERVE = 256
MAX_AUTO_CONNECTIONS = 16384


def raise_open_files_limit() -> int:
    """Raise this process's soft limit on open files to its hard limit (a shell's default soft
    limit, 1024, is a few hundred idle clients); returns the soft limit now in force."""
    try:
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if hard == resource.RLIM_INFINITY:
            hard = max(soft, 1 << 20) if soft != resource.RLIM_INFINITY else 1 << 20
        if soft == resource.RLIM_INFINITY or soft >= hard:
            return int(hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        return int(hard)
    except (ImportError, ValueError, OSError):  # no resource module, or a limit we may not change
        try:
            import resource

            return int(resource.getrlimit(resource.RLIMIT_NOFILE)[0])
        except Exception:
            return 1024


def max_connections(settings: Settings, open_files: int | None = None) -> int:
    """The connection cap of one server process: SERVE_MAX_CONNECTIONS, else what the open-file
    limit leaves after FD_RESERVE (at most MAX_AUTO_CONNECTIONS)."""
    if settings.serve_max_connections:
        return settings.serve_max_connections
    if open_files is None:
        try:
            import resource

            open_files = int(resource.getrlimit(resource.RLIMIT_NOFILE)[0])
        except Exception:
            open_files = 1024
    return max(16, min(MAX_AUTO_CONNECTIONS, open_files - FD_RESERVE))


CAP_LOG_EVERY_S = 10.0
_cap_said = [float("-inf")]


def _timed_protocol(request_timeout_s: float, connection_cap: int | None = None):
    """uvicorn's h11 protocol with a deadline on receiving each request: a connection that sends
    nothing, or a request's headers or body only in part, is closed `request_timeout_s` after the
    connection opened or the request's first byte arrived (uvicorn times out idle keep-alive
    connections only, so half-open requests were held for good)."""
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class TimedH11Protocol(H11Protocol):
        _request_timer = None

        def connection_made(self, transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._arm()
            if connection_cap is not None and len(self.connections) > connection_cap:
                self._make_room()

        def _idle(self) -> bool:
            return (self.cycle is None or self.cycle.response_complete) and self.conn.their_state is h11.IDLE \
                and not self.transport.is_closing()

        def _make_room(self) -> None:
            """Over the cap: close an idle connection (no request under way), else this new one."""
            victim = next((c for c in self.connections if c is not self and getattr(c, "_idle", None) and c._idle()),
                          None)
            now = time.monotonic()
            if now - _cap_said[0] >= CAP_LOG_EVERY_S:  # once in a while, not once per connection
                _cap_said[0] = now
                log.warning("%d connections open, over the cap of %d (SERVE_MAX_CONNECTIONS): closing %s",
                            len(self.connections), connection_cap,
                            "idle ones" if victim is not None else "new ones (none is idle)")
            (victim or self).transport.close()

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            if self.conn.their_state in (h11.DONE, h11.MUST_CLOSE, h11.CLOSED, h11.ERROR):
                self._disarm()  # the whole request is in: answering it is the app's time
            else:  # a request begun (or its headers in part): its deadline runs from its first byte
                self._arm()

        def connection_lost(self, exc) -> None:
            self._disarm()
            super().connection_lost(exc)

        def _arm(self) -> None:
            if self._request_timer is None:
                self._request_timer = self.loop.call_later(request_timeout_s, self._request_timed_out)

        def _disarm(self) -> None:
            if self._request_timer is not None:
                self._request_timer.cancel()
                self._request_timer = None

        def _request_timed_out(self) -> None:
            self._request_timer = None
            if self.conn.their_state not in (h11.DONE, h11.MUST_CLOSE, h11.CLOSED) and not self.transport.is_closing():
                log.info("closing a connection whose request did not arrive within %s s", request_timeout_s)
                self.transport.close()

    return TimedH11Protocol


def server_config(app: ASGIApp, settings: Settings, **kw: Any):
    """uvicorn's configuration for `app` (`sourcegate serve`, and the tests that serve it)."""
    import uvicorn

    # SIGTERM: stop accepting, let the questions in flight finish (and be audited), then exit.
    return uvicorn.Config(app, log_config=None, access_log=False, lifespan="on",
                          timeout_graceful_shutdown=settings.serve_shutdown_timeout_s,
                          timeout_keep_alive=settings.serve_keep_alive_s,
                          http=_timed_protocol(settings.serve_request_timeout_s, max_connections(settings)), **kw)
