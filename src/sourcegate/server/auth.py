"""Who may call /mcp and /v1: API keys (each with the groups it may read) and access tokens of an
OpenID Connect issuer (Microsoft Entra ID first; any issuer that publishes its keys as a JWKS).

A token is verified by PyJWT with the issuer's public keys: the signature by a key of the issuer's
key set (fetched, cached, fetched again for an unknown `kid` at most once per
AUTH_JWKS_REFRESH_MIN_S), `iss`, `aud` (this server's resource, RFC 8707), `exp` and `nbf` with
AUTH_CLOCK_SKEW_S of leeway, the algorithm against AUTH_ALGORITHMS (asymmetric only), `tid` when
AUTH_TENANT_ID is set. `JwtVerifier` is the MCP SDK's `TokenVerifier`; the protected resource
metadata (RFC 9728) is the SDK's route. The reason a token is refused goes to the log, never to
the client, which reads only `error="invalid_token"` (MCP authorization, 2025-06-18).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import anyio
import jwt
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.routes import build_resource_metadata_url, create_protected_resource_routes
from pydantic import AnyHttpUrl
from starlette.routing import Route

from ..identity import GROUP_OVERAGE, Caller, ClaimsRefused, caller_from_claims
from ..settings import Settings
from .openapi import API_KEY_HEADER

log = logging.getLogger("sourcegate.auth")

# The largest key set or discovery document read from the issuer.
MAX_ISSUER_DOCUMENT_BYTES = 1_000_000
ISSUER_TIMEOUT_S = 5.0
KEY_TYPES = {"RS": "RSA", "PS": "RSA", "ES": "EC", "Ed": "OKP"}


class TokenRefused(Exception):
    """A token that fails a check; `reason` is for the log only."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class IssuerUnavailable(Exception):
    """The issuer's keys cannot be fetched: no token can be checked now (503, not the token's fault)."""


def _loopback(host: str | None) -> bool:
    return (host or "").lower() in ("localhost", "127.0.0.1", "::1", "[::1]")


def _check_url(name: str, url: str) -> None:
    parsed = urlparse(url)
    if parsed.scheme != "https" and not (parsed.scheme == "http" and _loopback(parsed.hostname)):
        raise ValueError(f"{name}={url!r} is not an https URL: keys fetched over plain HTTP could be anyone's "
                         "(http is accepted for localhost only)")


def _get_json(url: str) -> dict[str, Any]:
    """GET a JSON object from the issuer (bounded in time and size, no redirects)."""
    import httpx

    with httpx.Client(timeout=ISSUER_TIMEOUT_S, follow_redirects=False) as client:
        with client.stream("GET", url, headers={"accept": "application/json"}) as response:
            if response.status_code != 200:
                raise IssuerUnavailable(f"GET {url} answered {response.status_code}")
            body = bytearray()
            for chunk in response.iter_bytes():
                body.extend(chunk)
                if len(body) > MAX_ISSUER_DOCUMENT_BYTES:
                    raise IssuerUnavailable(f"GET {url} sent over {MAX_ISSUER_DOCUMENT_BYTES} bytes")
    try:
        data = json.loads(body)
    except ValueError:
        raise IssuerUnavailable(f"GET {url} did not send JSON") from None
    if not isinstance(data, dict):
        raise IssuerUnavailable(f"GET {url} did not send a JSON object")
    return data


class JwksCache:
    """The issuer's public keys by `kid`. `key(kid, alg)` reads the cache only; `refresh()` fetches
    the set, at most once per `refresh_min_s` (a flood of tokens naming unknown keys costs the
    issuer one request per interval), and always when the set is older than `max_age_s`."""

    def __init__(self, issuer: str, jwks_uri: str | None, *, refresh_min_s: float, max_age_s: float,
                 get_json: Callable[[str], dict[str, Any]] = _get_json,
                 clock: Callable[[], float] = time.monotonic):
        self.issuer = issuer
        self.jwks_uri = jwks_uri
        self.refresh_min_s = refresh_min_s
        self.max_age_s = max_age_s
        self.get_json = get_json
        self.clock = clock
        self.fetches = 0
        self._keys: dict[str, dict[str, Any]] = {}
        self._prepared: dict[tuple[str, str], jwt.PyJWK] = {}
        self._fetched_at: float | None = None
        self._tried_at: float | None = None
        self._last_error: str | None = None
        self._lock = threading.Lock()

    def stale(self) -> bool:
        return self._fetched_at is None or self.clock() - self._fetched_at >= self.max_age_s

    def key(self, kid: str, alg: str) -> jwt.PyJWK | None:
        """The key `kid` bound to `alg`, or None when the cached set has no such key. A key whose
        type cannot sign with `alg` (an EC key and RS256), or whose own `alg` is another, raises."""
        prepared = self._prepared.get((kid, alg))
        if prepared is not None:
            return prepared
        data = self._keys.get(kid)
        if data is None:
            return None
        if data.get("alg") not in (None, alg):
            raise TokenRefused(f"the token says alg {alg} but the issuer's key {kid!r} is for {data.get('alg')}")
        if data.get("kty") != KEY_TYPES.get(alg[:2]):
            raise TokenRefused(f"the issuer's key {kid!r} ({data.get('kty')}) cannot verify alg {alg}")
        try:
            prepared = jwt.PyJWK(data, algorithm=alg)
        except jwt.PyJWTError as e:
            raise TokenRefused(f"the issuer's key {kid!r} cannot verify alg {alg}: {e}") from None
        self._prepared[(kid, alg)] = prepared
        return prepared

    def refresh(self) -> bool:
        """Fetch the key set, unless it was fetched or tried less than `refresh_min_s` ago. Returns
        whether it fetched. A failed fetch keeps the keys held; with none held, IssuerUnavailable."""
        with self._lock:
            now = self.clock()
            if self._tried_at is not None and now - self._tried_at < self.refresh_min_s:
                if not self._keys and self._last_error:
                    raise IssuerUnavailable(self._last_error)
                return False
            self._tried_at = now
            try:
                uri = self.jwks_uri or self._discover()
                document = self.get_json(uri)
                if not isinstance(document.get("keys"), list):
                    raise IssuerUnavailable(f"the key set at {uri} has no `keys` list")
            except Exception as e:  # the network (refused, timed out, DNS) or the issuer's answer
                self._last_error = str(e) if isinstance(e, IssuerUnavailable) else f"{type(e).__name__}: {e}"
                log.warning("the issuer's signing keys could not be fetched%s: %s",
                            " (the keys held are kept meanwhile)" if self._keys else "", self._last_error)
                if self._keys:
                    return False
                raise IssuerUnavailable(self._last_error) from None
            self._last_error = None
            keys = document["keys"]
            # Signing keys with an id; a symmetric (`oct`) key never verifies anything here.
            self._keys = {k["kid"]: k for k in keys if isinstance(k, dict) and isinstance(k.get("kid"), str)
                          and k.get("kty") in ("RSA", "EC", "OKP") and k.get("use", "sig") == "sig"}
            self._prepared = {}
            self._fetched_at = self.clock()
            self.fetches += 1
            log.info("fetched the issuer's signing keys", extra={"jwks_uri": uri, "keys": len(self._keys)})
            return True

    def _discover(self) -> str:
        """`jwks_uri` from the issuer's OpenID Connect discovery document (kept once read)."""
        url = self.issuer.rstrip("/") + "/.well-known/openid-configuration"
        document = self.get_json(url)
        if document.get("issuer") != self.issuer:
            raise IssuerUnavailable(f"{url} names issuer {document.get('issuer')!r}, not AUTH_ISSUER {self.issuer!r}")
        uri = document.get("jwks_uri")
        if not isinstance(uri, str):
            raise IssuerUnavailable(f"{url} has no jwks_uri")
        _check_url("jwks_uri", uri)
        self.jwks_uri = uri
        return uri


class JwtVerifier:
    """Access tokens of one issuer. `verify(token)` returns the claims or raises TokenRefused (or
    IssuerUnavailable); `verify_token` is the MCP SDK's `TokenVerifier` protocol."""

    def __init__(self, settings: Settings, keys: JwksCache | None = None):
        assert settings.auth_issuer and settings.auth_resource
        _check_url("AUTH_ISSUER", settings.auth_issuer)
        if settings.auth_jwks_uri:
            _check_url("AUTH_JWKS_URI", settings.auth_jwks_uri)
        self.issuer = settings.auth_issuer
        self.resource = settings.auth_resource
        self.audiences = [a.strip() for a in (settings.auth_audience or settings.auth_resource).split(",") if a.strip()]
        self.algorithms = [a.strip() for a in settings.auth_algorithms.split(",") if a.strip()]
        self.tenant = settings.auth_tenant_id
        self.leeway = settings.auth_clock_skew_s
        self.keys = keys or JwksCache(self.issuer, settings.auth_jwks_uri,
                                      refresh_min_s=settings.auth_jwks_refresh_min_s,
                                      max_age_s=settings.auth_jwks_max_age_s)

    async def verify(self, token: str) -> dict[str, Any]:
        alg, key = await self._signing_key(token)
        try:
            claims = jwt.decode(token, key, algorithms=[alg], audience=self.audiences, issuer=self.issuer,
                                leeway=self.leeway, options={"require": ["exp", "iss", "aud"]})
        except jwt.PyJWTError as e:
            raise TokenRefused(f"{type(e).__name__}: {e}") from None
        if self.tenant and claims.get("tid") != self.tenant:
            raise TokenRefused(f"the token is of tenant {claims.get('tid')!r}, not AUTH_TENANT_ID")
        return claims

    async def verify_id_token(self, token: str, client_id: str, nonce: str) -> dict[str, Any]:
        """An ID token of the web page's sign-in (OpenID Connect Core 3.1.3.7): signed by a key of the
        same issuer, `iss`, `aud` naming `client_id` (and `azp`, when present, equal to it), `exp`
        with the same leeway, and the `nonce` of the sign-in it answers."""
        alg, key = await self._signing_key(token)
        try:
            claims = jwt.decode(token, key, algorithms=[alg], audience=client_id, issuer=self.issuer,
                                leeway=self.leeway, options={"require": ["exp", "iat", "iss", "aud", "sub"]})
        except jwt.PyJWTError as e:
            raise TokenRefused(f"{type(e).__name__}: {e}") from None
        if "azp" in claims and claims["azp"] != client_id:
            raise TokenRefused(f"the ID token's azp {claims['azp']!r} is not AUTH_WEB_CLIENT_ID")
        if not isinstance(claims.get("nonce"), str) or not hmac.compare_digest(claims["nonce"].encode(), nonce.encode()):
            raise TokenRefused("the ID token's nonce is not this sign-in's")
        if self.tenant and claims.get("tid") != self.tenant:
            raise TokenRefused(f"the ID token is of tenant {claims.get('tid')!r}, not AUTH_TENANT_ID")
        return claims

    async def _signing_key(self, token: str) -> tuple[str, jwt.PyJWK]:
        """The token's algorithm (one of AUTH_ALGORITHMS) and the issuer's key it names."""
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError as e:
            raise TokenRefused(f"not a signed JWT: {e}") from None
        alg, kid = header.get("alg"), header.get("kid")
        if alg not in self.algorithms:
            raise TokenRefused(f"alg {alg!r} is not one of AUTH_ALGORITHMS ({', '.join(self.algorithms)})")
        if not isinstance(kid, str):
            raise TokenRefused("the token names no key (`kid`)")
        key = None if self.keys.stale() else self.keys.key(kid, alg)
        if key is None:
            # the network and a lock: not on the event loop
            fetched = await anyio.to_thread.run_sync(self.keys.refresh)
            key = self.keys.key(kid, alg)
            if key is None:
                how = "fetched again now" if fetched else \
                    f"not fetched again: fetched less than AUTH_JWKS_REFRESH_MIN_S={self.keys.refresh_min_s:g} s ago"
                raise TokenRefused(f"the issuer's key set has no key {kid!r} (the set was {how})")
        return alg, key

    async def verify_token(self, token: str) -> AccessToken | None:
        try:
            claims = await self.verify(token)
        except (TokenRefused, IssuerUnavailable):
            return None
        return access_token(token, claims, self.resource)

    def caller(self, claims: Mapping[str, Any]) -> Caller:
        try:
            return caller_from_claims(claims)
        except ClaimsRefused as e:
            raise TokenRefused(str(e)) from None


def access_token(token: str, claims: Mapping[str, Any], resource: str) -> AccessToken:
    """The MCP SDK's view of a verified token (its handlers read it with `get_access_token()`)."""
    scopes = claims.get("scp")
    return AccessToken(token=token, client_id=str(claims.get("azp") or claims.get("appid") or claims.get("client_id")
                                                  or ""),
                       scopes=scopes.split() if isinstance(scopes, str) else [],
                       expires_at=int(claims["exp"]), resource=resource,
                       subject=str(claims.get("sub") or "") or None, claims=dict(claims))


@dataclass(frozen=True)
class ApiKey:
    name: str
    sha256: bytes
    groups: frozenset[str]
    all_groups: bool

    def caller(self) -> Caller:
        return Caller(user_id=f"api_key:{self.name}", name=self.name, groups=self.groups, via="api_key",
                      all_groups=self.all_groups)


API_KEYS_SHAPE = '{"NAME": {"key_sha256": "HEX" (or "key": "..."), "groups": ["GROUP-ID", ...]}}'


def parse_api_keys(value: str | None, mcp_api_key: str | None = None) -> list[ApiKey]:
    """The keys of API_KEYS (JSON, or the path of a JSON file) and MCP_API_KEY (every group).
    Raises ValueError naming what is wrong."""
    keys: list[ApiKey] = []
    if mcp_api_key:
        keys.append(ApiKey("MCP_API_KEY", hashlib.sha256(mcp_api_key.encode("utf-8")).digest(), frozenset(), True))
    if not value or not value.strip():
        return keys
    text = value
    if not value.lstrip().startswith("{"):
        path = Path(value).expanduser()
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as e:
            raise ValueError(f"API_KEYS is neither JSON nor a readable file ({path}: {e.strerror}): "
                             f"set it to {API_KEYS_SHAPE} or to that file's path") from None
    try:
        data = json.loads(text)
    except ValueError as e:
        raise ValueError(f"API_KEYS is not valid JSON ({e}): expected {API_KEYS_SHAPE}") from None
    if not isinstance(data, dict):
        raise ValueError(f"API_KEYS must be a JSON object: {API_KEYS_SHAPE}")
    for name, entry in data.items():
        where = f"API_KEYS[{name!r}]"
        if not isinstance(entry, dict):
            raise ValueError(f"{where} must be an object: {API_KEYS_SHAPE}")
        if ("key" in entry) == ("key_sha256" in entry):
            raise ValueError(f"{where} needs exactly one of `key` and `key_sha256` (the key's SHA-256 in hex: "
                             "`printf %s KEY | sha256sum`)")
        if "key" in entry:
            key = entry["key"]
            if not isinstance(key, str) or len(key) < 16 or not all(" " < ch < "\x7f" for ch in key):
                raise ValueError(f"{where}.key must be 16 printable ASCII characters or more (`openssl rand -hex 32`)")
            digest = hashlib.sha256(key.encode("utf-8")).digest()
        else:
            try:
                digest = bytes.fromhex(entry["key_sha256"])
            except (TypeError, ValueError):
                digest = b""
            if len(digest) != 32:
                raise ValueError(f"{where}.key_sha256 must be 64 hex digits: `printf %s KEY | sha256sum`")
        groups = entry.get("groups")
        if not isinstance(groups, list) or not all(isinstance(g, str) and g for g in groups):
            raise ValueError(f'{where}.groups must be a list of group ids (["*"] for every group, [] for none)')
        keys.append(ApiKey(str(name), digest, frozenset(g for g in groups if g != "*"), "*" in groups))
    return keys


class Refusal(Exception):
    """A request refused for its credentials: `kind` is "missing", "wrong_key" or "invalid_token";
    `reason` is for the log."""

    def __init__(self, kind: str, reason: str):
        super().__init__(reason)
        self.kind = kind
        self.reason = reason


class Authenticator:
    """Recognises the caller of a request to /mcp or /v1 from its `x-api-key` header or its
    `Authorization: Bearer` token. `required` is False when neither is configured (an open
    server: every request is served, with no caller)."""

    def __init__(self, settings: Settings):
        self.api_keys = parse_api_keys(settings.api_keys_secret, settings.mcp_api_key)
        self.verifier = JwtVerifier(settings) if settings.auth_issuer else None
        self.required = bool(self.api_keys) or self.verifier is not None
        self.metadata_url = (str(build_resource_metadata_url(AnyHttpUrl(settings.auth_resource)))
                             if self.verifier is not None and settings.auth_resource else None)
        self.scopes = [s.strip() for s in settings.auth_scopes.split(",") if s.strip()]

    def www_authenticate(self, error: str | None) -> str | None:
        """The header of a 401 (RFC 6750, RFC 9728): where the resource's metadata is, and the error
        only when a token was sent."""
        if self.metadata_url is None:
            return None
        return f'Bearer resource_metadata="{self.metadata_url}"' + (f', error="{error}"' if error else "")

    def key_caller(self, given: str) -> Caller | None:
        """The caller of an API key, or None. Every configured key is compared, in constant time."""
        digest = hashlib.sha256(given.encode("utf-8")).digest()
        found = None
        for key in self.api_keys:
            if hmac.compare_digest(digest, key.sha256) and found is None:
                found = key
        return found.caller() if found is not None else None

    async def authenticate(self, headers: Mapping[str, str]) -> tuple[Caller, dict[str, Any] | None]:
        """(the caller, the token's claims or None). Raises Refusal, or IssuerUnavailable."""
        given = headers.get(API_KEY_HEADER, "")
        auth = headers.get("authorization", "")
        bearer = auth[7:].strip() if auth[:7].lower() == "bearer " else ""
        if given or not (bearer and self.verifier is not None):
            if not given:
                raise Refusal("missing", "no x-api-key header" + (" and no bearer token" if self.verifier else ""))
            caller = self.key_caller(given) if self.api_keys else None
            if caller is None:
                raise Refusal("wrong_key", "the x-api-key header matches no configured key")
            return caller, None
        assert self.verifier is not None
        try:
            claims = await self.verifier.verify(bearer)
            return self.verifier.caller(claims), claims
        except TokenRefused as e:
            if e.reason == GROUP_OVERAGE:
                log.warning("a token was refused for its group overage claim: %s", GROUP_OVERAGE)
            raise Refusal("invalid_token", e.reason) from None

    def routes(self) -> list[Route]:
        """/.well-known/oauth-protected-resource (RFC 9728) for the resource, at the root and at the
        path the resource's own URL gives it (the SDK's route)."""
        if self.verifier is None:
            return []
        # Strings, which the metadata model reads keeping a path-less URL as written (RFC 8414 compares
        # issuers as strings: AnyHttpUrl alone would add a slash).
        sdk = create_protected_resource_routes(self.verifier.resource,  # type: ignore[arg-type]
                                               [self.verifier.issuer],  # type: ignore[list-item]
                                               scopes_supported=self.scopes or None, resource_name="sourcegate")
        root = "/.well-known/oauth-protected-resource"
        if sdk[0].path != root:
            sdk.append(Route(root, endpoint=sdk[0].endpoint, methods=["GET", "OPTIONS"]))
        return sdk
