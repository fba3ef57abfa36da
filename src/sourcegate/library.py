"""Is there a library to answer from?

A question asked of an index that does not exist, holds no documents, or cannot be reached would
come back "nothing reliable found", which reads like "the documents do not say". Every command
that reads the library opens it through `open_library`, which refuses such an index with one line
naming the resolved location and the command that fills it.
"""

from __future__ import annotations

from pathlib import Path

from .settings import Settings
from .store import Store, StoreURLError, describe_location, open_store, redact_url, sqlite_path, store_kind
from .store.base import EmbedderMismatch

DEFAULT_HOME = Path(".sourcegate")


class LibraryUnavailable(Exception):
    """The library cannot answer questions. `state` is one of `bad_url`, `missing`, `empty`,
    `unreachable`, `embedder_mismatch`; the message is one line a person can act on."""

    def __init__(self, message: str, state: str):
        super().__init__(message)
        self.state = state


def _command(settings: Settings, *words: str) -> str:
    """A sourcegate command on this settings' index."""
    prefix = ["sourcegate"]
    if settings.store_url:
        prefix += ["--store", redact_url(settings.store_url)]
    elif Path(settings.home) != DEFAULT_HOME:
        prefix += ["--home", str(settings.home)]
    return " ".join(prefix + list(words))


def fill_command(settings: Settings) -> str:
    """The command that fills this settings' index."""
    return _command(settings, "ingest", "FOLDER")


def reembed_command(settings: Settings) -> str:
    """The command that re-embeds this settings' index with the configured embedder."""
    return _command(settings, "ingest")


def reembed_hint(settings: Settings, e: EmbedderMismatch) -> str:
    return (f"run `{reembed_command(settings)}` to re-embed every chunk with {e.embedder} (then ingest as usual), "
            f"or set SOURCEGATE_EMBEDDER={e.index_embedder} to use the index as it is")


def explain_mismatch(settings: Settings, e: EmbedderMismatch) -> EmbedderMismatch:
    """The mismatch with the exact command for this settings' index."""
    return e.with_hint(reembed_hint(settings, e))


def _fill_hint(settings: Settings) -> str:
    return f"run `{fill_command(settings)}` to fill it (or `{_command(settings, 'demo')}` for the demo library)"


def _relative_note(settings: Settings) -> str:
    url = settings.store_url or ""
    if url.startswith("sqlite:///") and not url.startswith("sqlite:////"):
        return " (sqlite:/// is relative to the working directory; sqlite://// starts an absolute path)"
    return ""


def empty_message(settings: Settings, where: str) -> str:
    return f"the index at {where} holds no documents: {_fill_hint(settings)}"


def check_location(settings: Settings) -> None:
    """What `serve` checks before it starts, without opening the store: a URL of a form sourcegate
    takes, and for SQLite an index file that exists (waiting fixes neither). A store that is
    empty, locked or unreachable is the running server's state (`/readyz`), retried until it can
    be opened. Raises `LibraryUnavailable`."""
    location = settings.store_location
    try:
        kind = store_kind(location)
    except StoreURLError as e:
        raise LibraryUnavailable(f"{e} (set by SOURCEGATE_STORE or --store)", "bad_url") from None
    if kind == "sqlite" and not sqlite_path(location).expanduser().is_file():
        raise LibraryUnavailable(f"no index at {describe_location(location)}{_relative_note(settings)}: "
                                 f"{_fill_hint(settings)}", "missing")


def open_library(settings: Settings, embedder_id: str, dim: int, *, require_documents: bool = True,
                 allow_embedder_mismatch: bool = False) -> Store:
    """The settings' store, opened. Raises `LibraryUnavailable` when the URL is not one sourcegate
    takes, the server cannot be reached, or (with `require_documents`) the index does not exist
    or holds no documents. A missing SQLite file is not created. An index built with another
    embedder is refused with the command that re-embeds it, unless `allow_embedder_mismatch`
    (inspection, re-embedding: the store then refuses searches)."""
    location = settings.store_location
    try:
        kind = store_kind(location)
    except StoreURLError as e:
        raise LibraryUnavailable(f"{e} (set by SOURCEGATE_STORE or --store)", "bad_url") from None
    where = describe_location(location)
    if kind == "sqlite" and require_documents and not sqlite_path(location).expanduser().is_file():
        raise LibraryUnavailable(f"no index at {where}{_relative_note(settings)}: {_fill_hint(settings)}",
                                 "missing")
    options = settings.store_options()
    if allow_embedder_mismatch:
        options["allow_embedder_mismatch"] = True
    try:
        store = open_store(location, embedder_id, dim, **options)
    except EmbedderMismatch as e:
        raise LibraryUnavailable(str(explain_mismatch(settings, e)), "embedder_mismatch") from None
    except (RuntimeError, ImportError) as e:  # a server down, a refused key, a missing extra
        raise LibraryUnavailable(" ".join(str(e).split()) or type(e).__name__, "unreachable") from None
    if require_documents:
        try:
            documents = store.stats().documents
        except BaseException:
            store.close()
            raise
        if documents == 0:
            store.close()
            raise LibraryUnavailable(empty_message(settings, where), "empty")
    return store
