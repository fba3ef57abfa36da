"""Index stores, chosen by a URL: `sqlite:///path` (default), `postgresql://...`, `azure://...`.

SQLite URLs follow SQLAlchemy's convention: `sqlite:///index.db` is relative to the working
directory, `sqlite:////srv/library/index.db` (four slashes) is absolute. A bare path is a SQLite
file too.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from .base import DocumentRecord, ExportedDocument, ReadersRule, SearchFilters, Store, StoreStats

__all__ = ["DocumentRecord", "ExportedDocument", "ReadersRule", "SearchFilters", "Store", "StoreStats", "StoreURLError",
           "SUPPORTED_STORE_URLS", "describe_location", "is_conninfo", "open_store", "sqlite_path", "store_kind"]

SUPPORTED_STORE_URLS = ("sqlite:///relative/index.db", "sqlite:////absolute/index.db",
                        "postgresql://user:password@host/db", "azure://SERVICE.search.windows.net/INDEX")

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*):")


class StoreURLError(ValueError):
    """A store URL sourcegate cannot use; the message lists the forms it takes."""


def _supported() -> str:
    return ", ".join(SUPPORTED_STORE_URLS) + " (or a plain file path)"


def store_kind(url_or_path: str | Path) -> str:
    """'sqlite', 'postgresql' or 'azure'; `StoreURLError` for a URL of any other scheme."""
    url = str(url_or_path)
    if url.startswith(("postgresql://", "postgres://")):
        _check_postgres_url(url)
        return "postgresql"
    if url.startswith("azure://"):
        return "azure"
    if is_conninfo(url):
        # libpq's other form ("host=db password=..."): without this, a SQLite file named after it,
        # the password in its name and in every message that shows the path
        raise StoreURLError(f"the store {redact_url(url)!r} is a libpq keyword/value connection string "
                            "(host=... password=...): give PostgreSQL as a URL, "
                            f"postgresql://user:password@host:5432/dbname ({_ENCODE})")
    if url.startswith("sqlite:"):
        if not url.startswith("sqlite:///") or url == "sqlite:///":
            raise StoreURLError(f"store URL {url!r} names no file: a SQLite URL has three slashes before a "
                                "relative path (sqlite:///index.db) and four before an absolute one "
                                "(sqlite:////srv/library/index.db)")
        return "sqlite"
    m = _SCHEME.match(url)
    # "C:\\index.db" and "C:/index.db" are Windows paths, not URLs
    if m and (url[m.end():].startswith("//") or len(m.group(1)) > 1):
        raise StoreURLError(f"unsupported store URL {redact_url(url)!r}: use {_supported()}")
    return "sqlite"


def sqlite_path(url_or_path: str | Path) -> Path:
    """The file of a SQLite location, as given (relative paths stay relative to the working
    directory, as SQLAlchemy reads `sqlite:///relative.db`)."""
    url = str(url_or_path)
    return Path(url[len("sqlite:///"):] if url.startswith("sqlite:///") else url)


# Query parameters of a store URL that carry a secret (`?password=` is libpq's own, `api-key` and
# the like are other stores').
_SECRET_PARAM = re.compile(r"(?i)^(password|passwd|pwd|sslpassword|secret|api[-_]?key|key|token|access[-_]?token)$")


# libpq's keyword/value connection strings ("host=db port=5432 password=..."): its parameter names.
_CONNINFO_KEYS = frozenset({
    "host", "hostaddr", "port", "dbname", "user", "password", "passfile", "channel_binding", "connect_timeout",
    "client_encoding", "options", "application_name", "fallback_application_name", "keepalives", "sslmode",
    "sslcert", "sslkey", "sslpassword", "sslrootcert", "sslcrl", "requiressl", "gssencmode", "krbsrvname",
    "service", "target_session_attrs", "load_balance_hosts", "require_auth", "sslnegotiation"})
_CONNINFO_KEY = re.compile(r"(?:^|\s)([A-Za-z_]+)\s*=")
# A secret's value in that form: a quoted value (with backslash escapes) or up to the next blank.
_CONNINFO_SECRET = re.compile(r"(?i)((?:^|\s)(?:password|sslpassword)\s*=\s*)('(?:[^'\\]|\\.)*'?|\S*)")


def is_conninfo(text: str) -> bool:
    """Whether `text` is a libpq keyword/value connection string rather than a path or a URL."""
    return "://" not in text and any(m.group(1).lower() in _CONNINFO_KEYS for m in _CONNINFO_KEY.finditer(text))


def _userinfo_end(rest: str) -> int:
    """Where the user part of `rest` (a URL after `://`) ends: its `@`, or -1 when there is none.
    libpq's reading: the first `@` before any `/`, so `#`, `?` and `%` belong to the password (an
    RFC 3986 parser would cut it there and show the rest). A password holding a `/` has no `@`
    before it: then the first `@` after a `:` ends it (libpq would take the password for a port
    and quote it in its error). Where a password is there (a `:` before that `@`), it ends at the
    last `@`: a raw password holding `@` and `/` is read by libpq as a host and a path, but it is
    still the password, and none of it is shown (an `@` in the query hides the host too: too much
    hidden, never too little)."""
    slash = rest.find("/")
    at = rest.find("@", 0, slash if slash >= 0 else len(rest))
    if at < 0:
        at = rest.find("@")
        if not (at >= 0 and ":" in rest[:at] and "=" not in rest[:at]):
            return -1
    return rest.rfind("@") if ":" in rest[:at] else at


def redact_url(url: str) -> str:
    """The URL without its password, in the user part or in the query (`?password=...`), for
    messages, `status` and logs. The user part is read as libpq reads it (see `_userinfo_end`), so
    a password holding `#`, `?`, `/` or a bad `%` escape is hidden too."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return _CONNINFO_SECRET.sub(lambda m: m.group(1) + "***", url) if is_conninfo(url) else url
    at = _userinfo_end(rest)
    if at >= 0:
        user, colon, password = rest[:at].partition(":")
        rest = (f"{user}:***" if colon and password else rest[:at]) + rest[at:]
    at = max(rest.find("@"), -1) if at >= 0 else -1
    head, q, query = rest[at + 1:].partition("?")
    if q:
        pieces = []
        for piece in query.split("&"):
            name, eq, value = piece.partition("=")
            pieces.append(f"{name}=***" if eq and _SECRET_PARAM.match(unquote(name)) else piece)
        query = "&".join(pieces)
    return f"{scheme}://{rest[:at + 1]}{head}{q}{query}"


# What libpq's URL parser says, as a sentence that quotes nothing of the URL (its own message
# quotes the token it choked on, which may be the password).
_ENCODE = "a password or user name holding '@', ':', '/' or '%' must be percent-encoded (%40, %3A, %2F, %25)"
_LIBPQ_URL_FAULTS = (
    ("percent-encoded", f"a '%' that does not start a %XX escape: {_ENCODE}"),
    ("query parameter", "a query parameter libpq does not know (names are case-sensitive: sslmode, "
                        "connect_timeout, ...)"),
    ("IPv6", "an IPv6 host address without its closing ']'"),
)


def _check_postgres_url(url: str) -> None:
    """`StoreURLError` for a PostgreSQL URL libpq cannot read (without psycopg, the missing extra is
    reported when the store is opened)."""
    try:
        from psycopg.conninfo import conninfo_to_dict
    except ImportError:
        return
    form = "the form is postgresql://user:password@host:5432/dbname"
    try:
        params = conninfo_to_dict(url)
    except Exception as e:
        text = str(e)
        why = next((w for key, w in _LIBPQ_URL_FAULTS if key in text), f"a form libpq does not read ({_ENCODE})")
        raise StoreURLError(f"the PostgreSQL URL {redact_url(url)!r} has {why}; {form}") from None
    if not all(p.strip().isdigit() for p in str(params.get("port") or "5432").split(",")):
        raise StoreURLError(f"the PostgreSQL URL {redact_url(url)!r} has a port that is not a number ({_ENCODE}); "
                            f"{form}")


def describe_location(url_or_path: str | Path) -> str:
    """Where the index is, for a person: the absolute path of a SQLite file, the URL of a server
    without its password."""
    if store_kind(url_or_path) == "sqlite":
        return str(sqlite_path(url_or_path).expanduser().absolute())
    return redact_url(str(url_or_path))


def open_store(url_or_path: str | Path, embedder_id: str, dim: int, *, language: str = "en",
               azure_api_key: str | None = None, **options: Any) -> Store:
    """`language` is the library's (full-text stemming and stop words on PostgreSQL and Azure AI
    Search); `azure_api_key` authenticates to Azure AI Search (otherwise Entra ID through
    azure-identity, when installed)."""
    url = str(url_or_path)
    kind = store_kind(url)
    if kind == "postgresql":
        from .postgres import PostgresStore

        return PostgresStore(url, embedder_id=embedder_id, dim=dim, language=language, **options)
    if kind == "azure":
        from .azure import AzureSearchStore

        return AzureSearchStore.from_url(url, embedder_id=embedder_id, dim=dim, language=language,
                                         api_key=azure_api_key, **options)
    from .sqlite import SqliteStore

    return SqliteStore(sqlite_path(url).expanduser(), embedder_id=embedder_id, dim=dim, **options)
