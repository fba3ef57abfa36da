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

from .ingest.metadata import ALIASES, OUT_OF_SERVICE
from .store.base import DocumentRecord, SearchFilters

COLUMNS = ("source_type", "version", "status")
MAX_VALUE_CHARS = 200
MAX_FILTERS = 16
# How many of a key's values an error message lists.
SHOWN_VALUES = 12


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
    value = " ".join(raw.split())
    if not value:
        raise FilterError(f"filter {key!r} has an empty value: give the value to keep, e.g. {key}=...")
    if len(value) > MAX_VALUE_CHARS:
        raise FilterError(f"filter {key!r} has a value of {len(value)} characters, over {MAX_VALUE_CHARS}")
    if any(unicodedata.category(ch) in ("Cc", "Cf", "Cs") for ch in value):
        raise FilterError(f"filter {key!r} holds control or invisible characters: send plain text")
    if key == "status":
        value = value.lower()
        value = "archived" if value in OUT_OF_SERVICE else value
    return value


def _values(documents: list[DocumentRecord], key: str) -> list[str]:
    if key == "doc_id":
        found = {d.id for d in documents}
    elif key in COLUMNS:
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
        held = "; ".join(f"{k} has {', '.join(_values(documents, k)) or 'no value'}" for k in wanted)
        shown = ", ".join(f"{k}={v}" for k, v in wanted.items())
        archived = "" if "status" in wanted or include_archived else " (archived revisions are left out)"
        raise FilterError(f"no document matches {shown}{archived}: {held}")
    return chosen


def described(chosen: SearchFilters | None) -> dict[str, str]:
    """The filters as the audit record and logs keep them."""
    if chosen is None:
        return {}
    out = {k: getattr(chosen, k) for k in COLUMNS if getattr(chosen, k) is not None}
    if chosen.doc_id_prefix is not None:
        out["doc_id"] = chosen.doc_id_prefix
    out.update(dict(chosen.metadata))
    return out
