"""Who may read a document, and which documents a caller may read (docs/readers.md).

A document names its readers in a `readers` field (front matter, a sidecar or a manifest, an HTML
`<meta name="readers">`, a DOCX custom property, a PDF's `/Readers`, a JSON export item's
`readers`) or through `sourcegate ingest --readers`: user ids, group ids and app role names in one
list, as the caller's token names them (Entra ID's object ids, its `roles`) or as API_KEYS gives them
to a key. A caller reads a document when one of its ids (its user id, its groups, its roles) is
among the document's readers. A
document that names no readers is read by everyone or by nobody, as DOCUMENTS_WITHOUT_READERS says
(default `nobody`). Unrestricted callers (MCP_API_KEY, a key with `"groups": ["*"]`, the command
line) read every document.

Pure logic: the stores apply the rule (`store.base.ReadersRule`) inside their queries.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any, Literal

from .identity import Caller
from .normalize import metadata_text
from .store.base import ReadersRule

WithoutReaders = Literal["everyone", "nobody"]
# A reader id: no spaces, commas, semicolons or quotes (lists are written with them; Azure AI
# Search's `search.in` reads a comma as the delimiter), at most 200 characters.
READER_ID = re.compile(r"[^\s,;'\"]{1,200}")
MAX_READERS = 500
READERS_SHAPE = ('a list of user and group ids (readers: [grp-hr, 5f1c...]) or one text of ids separated by '
                 'commas ("grp-hr, 5f1c...")')


class ReadersError(ValueError):
    """A `readers` value that cannot be read; the message says what to write."""


def parse_readers(value: Any) -> list[str]:
    """The reader ids of a `readers` value: a list of ids, or a text of ids separated by commas,
    semicolons or spaces; sorted, each once. Raises ReadersError: a document whose readers cannot be
    read is not ingested (it would otherwise be read as naming none)."""
    if value is None:
        return []
    if isinstance(value, str):
        items: Iterable[Any] = re.split(r"[,;\s]+", value)
    elif isinstance(value, (list, tuple)):
        items = value
    else:
        raise ReadersError(f"readers must be {READERS_SHAPE}, not {type(value).__name__}")
    ids: set[str] = set()
    for item in items:
        if isinstance(item, bool) or not isinstance(item, (str, int)):
            raise ReadersError(f"readers must be {READERS_SHAPE}: {item!r} is not an id")
        text = metadata_text(str(item)).strip()
        if not text:
            continue
        if not READER_ID.fullmatch(text):
            raise ReadersError(f"reader id {text[:60]!r} holds a space, a comma, a semicolon or a quote, or is over "
                               "200 characters: write each user or group id on its own")
        ids.add(text)
    if len(ids) > MAX_READERS:
        raise ReadersError(f"{len(ids)} readers, over {MAX_READERS}: name groups rather than every user")
    return sorted(ids)


def readers_rule(caller: Caller | None, documents_without_readers: WithoutReaders = "nobody") -> ReadersRule | None:
    """The rule a caller reads under: None (every document) for no caller (the Python API, a server
    without keys or tokens) and for an unrestricted one; else the caller's user id, groups and app
    roles (Entra ID's `roles` claim has no overage: docs/entra-id.md)."""
    if caller is None or caller.unrestricted:
        return None
    ids = set(caller.groups) | set(caller.roles) | ({caller.user_id} if caller.user_id else set())
    return ReadersRule(frozenset(ids), unmarked=documents_without_readers == "everyone")


def restricted_callers(settings) -> bool:
    """Whether a server with these settings can have restricted callers: an access token issuer, or
    an API key configured with groups of its own (not `["*"]`)."""
    if settings.auth_issuer:
        return True
    from .server.auth import parse_api_keys

    try:
        keys = parse_api_keys(settings.api_keys_secret)
    except ValueError:  # refused at start with the fix (`key_problem`)
        return False
    return any(not k.all_groups for k in keys)


def unmarked_warning(settings, documents) -> str | None:
    """What `serve` warns at start when restricted callers will read nothing of documents that name
    no readers (DOCUMENTS_WITHOUT_READERS=nobody, the default), with the ways out; None otherwise."""
    if settings.documents_without_readers != "nobody" or not restricted_callers(settings):
        return None
    unmarked = sum(1 for d in documents if not d.readers)
    if not unmarked:
        return None
    total = len(documents)
    return (f"{unmarked} of the library's {total} documents name no readers: with DOCUMENTS_WITHOUT_READERS=nobody "
            "(the default), callers with a token or an API key of their own groups read none of them (MCP_API_KEY "
            "and the command line still read every document). Mark them (a `readers` field, or `sourcegate ingest "
            "--readers GROUP-ID`), or set DOCUMENTS_WITHOUT_READERS=everyone to let every caller read them "
            "(docs/readers.md)")
