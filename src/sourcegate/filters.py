"""Per-request filters on document metadata: `ask --filter model=HG-3`, REST `"filters"`, the MCP
tool's `filters` argument.

Keys: `source_type`, `version`, `status`, `doc_id` (a prefix of the document id) and any key of
the library's front matter or sidecars (`model`, `product`). Each store applies them inside its
query (`SearchFilters`). A key no document has, a value that is empty or not text, or filters that
no document of the library matches are refused with a message that names what the library holds:
a filter never quietly leaves a question with nothing to read.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Mapping

from .ingest.metadata import ALIASES, EXTRA_KEY, OUT_OF_SERVICE
from .inert import inert_markup
from .normalize import metadata_text
from .store.base import DocumentRecord, SearchFilters

COLUMNS = ("source_type", "version", "status")
MAX_VALUE_CHARS = 200
MAX_FILTERS = 16
# How many of a key's values an error message lists.
SHOWN_VALUES = 12
# What `GET /v1/filters` (the web page's selects) lists: at most this many keys, this many values each.
LISTED_KEYS = 16
LISTED_VALUES = 50


class FilterError(ValueError):
    """A filter that cannot be applied; the message says what to send instead."""


def parse_pairs(items: Iterable[str]) -> dict[str, str]:
    """`key=value` strings (the CLI's `--filter`) as a mapping."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise FilterError(f"filter {item!r} is not KEY=VALUE: write it as --filter model=HG-3")
        if key.strip() in out:
            raise FilterError(f"filter key {key.strip()!r} is given twice: give each key once")
        out[key.strip()] = value
    return out


def _key(name: str) -> str:
    k = name.strip().lower().replace("-", "_").replace(" ", "_")
    return ALIASES.get(k, k)


def _value(key: str, raw: object) -> str:
    if not isinstance(raw, str):
        raise FilterError(f"filter {key!r} must have a text value, got {type(raw).__name__}: send \"{key}\": \"...\"")
    # the form ingest stores (`normalize.metadata_text`): a value written with control or invisible
    # characters is selected by the text a reader sees of it
    value = metadata_text(raw)
    if not value:
        raise FilterError(f"filter {key!r} has an empty value: give the value to keep, e.g. {key}=...")
    if len(value) > MAX_VALUE_CHARS:
        raise FilterError(f"filter {key!r} has a value of {len(value)} characters, over {MAX_VALUE_CHARS}")
    if any(unicodedata.category(ch) == "Cs" for ch in value):
        raise FilterError(f"filter {key!r} holds a lone surrogate: send text")
    if key == "status":
        value = value.lower()
        value = "archived" if value in OUT_OF_SERVICE else value
    return value


def _values(documents: list[DocumentRecord], key: str) -> list[str]:
    """The values of `key` among `documents` (those the request may read: archived revisions only
    when it asks for them), at most SHOWN_VALUES. Document ids are never listed: a prefix that
    matches nothing would otherwise read the library's ids out, a dozen at a time."""
    if key == "doc_id":
        return []
    if key in COLUMNS:
        found = {getattr(d, key) or "" for d in documents}
    else:
        found = {d.metadata[key] for d in documents if key in d.metadata}
    found.discard("")
    shown = sorted(found)[:SHOWN_VALUES]
    return shown + (["..."] if len(found) > SHOWN_VALUES else [])


def search_filters(filters: Mapping[str, object] | None, documents: list[DocumentRecord],
                   include_archived: bool = False) -> SearchFilters | None:
    """The stores' filters for a request's `filters`, checked against the library's documents;
    None when there are none. Archived revisions stay out unless `status` asks for them."""
    if not filters:
        return None
    if not isinstance(filters, Mapping):
        raise FilterError('filters must be an object of key: value pairs, e.g. {"model": "HG-3"}')
    if len(filters) > MAX_FILTERS:
        raise FilterError(f"{len(filters)} filters, over {MAX_FILTERS}: send the ones that narrow the question")
    metadata_keys = sorted({k for d in documents for k in d.metadata})
    allowed = ["doc_id", *COLUMNS, *(k for k in metadata_keys if k not in COLUMNS)]
    wanted: dict[str, str] = {}
    for name, raw in filters.items():
        key = _key(str(name))
        if key not in allowed:
            raise FilterError(f"unknown filter key {str(name)!r}: the library's documents have "
                              f"{', '.join(allowed)} (front matter and sidecar keys are filters too)")
        if key in wanted:
            raise FilterError(f"filter key {key!r} is given twice: give each key once")
        wanted[key] = _value(key, raw)
    chosen = SearchFilters(
        exclude_status=() if include_archived or "status" in wanted else ("archived",),
        status=wanted.get("status"), source_type=wanted.get("source_type"), version=wanted.get("version"),
        doc_id_prefix=wanted.get("doc_id"),
        metadata=tuple(sorted((k, v) for k, v in wanted.items() if k not in ("doc_id", *COLUMNS))))
    if documents and not any(chosen.matches(d) for d in documents):
        # values are named from the documents the request could read: an archived (withdrawn,
        # superseded) revision's only when the request or the server reads archived revisions
        archived_ok = include_archived or wanted.get("status") == "archived"
        readable = [d for d in documents if archived_ok or d.status != "archived"]
        held = "; ".join("no document id starts with it" if k == "doc_id" else
                         f"{k} has {', '.join(_values(readable, k)) or 'no value'}" for k in wanted)
        shown = ", ".join(f"{k}={v}" for k, v in wanted.items())
        archived = "" if "status" in wanted or include_archived else " (archived revisions are left out)"
        raise FilterError(f"no document matches {shown}{archived}: {held}")
    return chosen


def filter_choices(documents: list[DocumentRecord], max_keys: int = LISTED_KEYS,
                   max_values: int = LISTED_VALUES) -> dict[str, object]:
    """The metadata keys a question can filter on (front matter, sidecar and HTML `<meta>` keys:
    `model`, `product`) with their values among the library's current documents: what
    `GET /v1/filters` answers and the web page offers as selects.

    Archived (withdrawn, superseded) revisions are left out, as a filter leaves them out, and so
    are document ids and the fields every document has (`source_type`, `version`, `status`).
    Each value comes twice: `value`, the text to send back in `filters` (as ingest stores it and a
    filter compares it: what a reader sees, no control or invisible character) and `label`, the
    same as inert Markdown (`inert.inert_markup`) for a client that renders it. Keys held by most
    documents come first, values in order; at most `max_keys` keys and `max_values` values of each,
    and `more_keys` / `more_values` count what was cut."""
    values: dict[str, set[str]] = {}
    held: dict[str, int] = {}
    for d in documents:
        if d.status == "archived":
            continue
        for key, raw in d.metadata.items():
            value = metadata_text(raw) if isinstance(raw, str) else ""
            # a key as ingest writes them (an index written otherwise is not listed), a value a filter takes
            if not EXTRA_KEY.fullmatch(key) or key in ("doc_id", *COLUMNS) or not value \
                    or len(value) > MAX_VALUE_CHARS:
                continue
            values.setdefault(key, set()).add(value)
            held[key] = held.get(key, 0) + 1
    keys = sorted(values, key=lambda k: (-held[k], k))
    listed = []
    for key in keys[:max_keys]:
        found = sorted(values[key])
        listed.append({"key": key,
                       "values": [{"value": v, "label": inert_markup(v) or ""} for v in found[:max_values]],
                       "more_values": max(0, len(found) - max_values)})
    return {"filters": listed, "more_keys": max(0, len(keys) - max_keys)}


def described(chosen: SearchFilters | None) -> dict[str, str]:
    """The filters as the audit record and logs keep them."""
    if chosen is None:
        return {}
    out = {k: getattr(chosen, k) for k in COLUMNS if getattr(chosen, k) is not None}
    if chosen.doc_id_prefix is not None:
        out["doc_id"] = chosen.doc_id_prefix
    out.update(dict(chosen.metadata))
    return out
