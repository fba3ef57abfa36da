"""Document metadata from every format, and from files beside the documents.

The fields are those of a JSON passage export: `title`, `url`, `status`, `version`, `updated_at`
(also spelled `effective_date`) and `source_type`. A document's status decides whether retrieval
filters it out (`archived`) and feeds the judge's superseded question, so a Markdown revision
marked archived in its front matter is treated like an archived item of an export.

Where they come from, later sources winning:
1. the file itself: Markdown front matter (YAML), HTML `<title>`, `<meta>` and
   `<link rel="canonical">`, DOCX core properties, PDF document information;
2. a manifest `sourcegate.meta.json` in the file's folder: `{"FILE NAME": {fields}, ...}`;
3. a sidecar `FILE NAME.meta.json` beside the file (`manual.pdf.meta.json`), or
   `STEM.meta.json` (`manual.meta.json`) when only one file has that stem.

Neither manifests nor sidecars are ingested as documents.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import stat
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..models import Document
from ..normalize import metadata_text
from .parsers import IngestError

FIELDS = ("title", "url", "status", "version", "updated_at", "source_type")
ALIASES = {"effective_date": "updated_at", "effectivedate": "updated_at", "effective": "updated_at",
           "updated": "updated_at", "sourcetype": "source_type",
           "date": "updated_at", "revision": "version", "type": "source_type", "canonical": "url",
           "link": "url", "doc_status": "status", "document_status": "status"}
SIDECAR_SUFFIX = ".meta.json"
MANIFEST_NAME = "sourcegate.meta.json"
# A status that takes a revision out of service; each is stored as `archived`, the status the
# retrieval filter excludes.
OUT_OF_SERVICE = {"archived", "superseded", "withdrawn", "obsolete", "deprecated", "retired", "expired",
                  "cancelled", "canceled", "void", "historical", "archive"}
MAX_SIDECAR_BYTES = 1024 * 1024


def is_metadata_file(path: Path) -> bool:
    return path.name.lower().endswith(SIDECAR_SUFFIX)


def _text(value: Any) -> str | None:
    """A scalar as text; None for nothing or a structure (lists and maps are not field values)."""
    if value is None or isinstance(value, (list, dict, tuple, set)):
        return None
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, dt.datetime):
        return value.date().isoformat() if value.time() == dt.time() else value.isoformat()
    if isinstance(value, dt.date):
        return value.isoformat()
    # what a reader sees, as filters compare it (control and invisible characters dropped)
    text = metadata_text(str(value))
    return text or None


# Other keys of front matter, sidecars and manifests (`model`, `product`, `site`) are kept as the
# document's metadata, for per-request filters: names like these, scalar values, a bounded number.
EXTRA_KEY = re.compile(r"[a-z][a-z0-9_]{0,39}")
EXTRA_MAX_KEYS = 32
EXTRA_MAX_CHARS = 200
# Names a filter gives another meaning (or that the document's own fields hold).
RESERVED_KEYS = frozenset({"id", "doc_id", "text", "content_hash", "metadata", "page", "section", "heading"})


def normalize(raw: Mapping[str, Any], *, strict: bool = False, origin: str = "",
              extra: bool = False) -> dict[str, str]:
    """The known fields of `raw` as text, keys lower-cased and aliases resolved; status lower-case,
    out-of-service words stored as `archived`. `strict` (sidecars and manifests, written for
    sourcegate) refuses a field whose value is not a scalar instead of ignoring it. With `extra`
    (front matter, sidecars, manifests), other keys with a scalar value are kept too, as
    `metadata.NAME` entries that `apply` puts in `Document.metadata`; a key of those it cannot
    read (a name filters cannot take, a reserved name, a list, one key too many) is returned as an
    `unread.KEY` entry saying why, which `apply` lists in `Document.unread_keys` for the ingest
    summary: never dropped without a word."""
    out: dict[str, str] = {}
    kept = 0

    def unread(key: Any, why: str) -> None:
        out[f"unread.{metadata_text(str(key))[:60]}"] = why

    for key, value in raw.items():
        name = str(key).strip().lower().replace("-", "_").replace(" ", "_")
        name = ALIASES.get(name, name)
        if name == "readers":
            # who may read the document (docs/readers.md): never dropped quietly, or the document
            # would be read as naming no readers
            from ..readers import ReadersError, parse_readers

            try:
                out["readers"] = ",".join(parse_readers(value))
            except ReadersError as e:
                raise IngestError(f"{origin + ': ' if origin else ''}{e}") from None
            continue
        if name not in FIELDS:
            if not extra:
                continue
            text = _text(value)
            if not EXTRA_KEY.fullmatch(name):
                unread(key, "not a name of letters a-z, digits and _")
            elif name in RESERVED_KEYS:
                unread(key, "a reserved name")
            elif text is None:
                if value is not None:
                    unread(key, "a list or a map, not a value")
            elif kept >= EXTRA_MAX_KEYS:
                unread(key, f"over {EXTRA_MAX_KEYS} keys")
            else:
                out[f"metadata.{name}"] = text[:EXTRA_MAX_CHARS]
                kept += 1
            continue
        text = _text(value)
        if text is None:
            if strict and value is not None:
                raise IngestError(f"{origin}: {key!r} must be a string, a number or a date")
            if extra and value is not None:
                unread(key, "a list or a map, not a value")
            continue
        if name == "status":
            text = text.lower()
            if text in OUT_OF_SERVICE:
                text = "archived"
        out[name] = text[:2000]
    return out


def apply(doc: Document, fields: Mapping[str, str]) -> None:
    for name, value in fields.items():
        if name.startswith("metadata."):
            doc.metadata[name.removeprefix("metadata.")] = value
        elif name == "readers":
            doc.readers = value.split(",") if value else []
        elif name.startswith("unread."):
            said = f"{name.removeprefix('unread.')} ({value})"
            if said not in doc.unread_keys:
                doc.unread_keys.append(said)
        else:
            setattr(doc, name, value)


# -- sidecars and manifests ------------------------------------------------------------------------

def read_metadata_file(meta: Path, within: Path | None) -> bytes:
    """The bytes of a sidecar or a manifest: the one place they are opened, for a folder's files
    and for a file named on the command line alike. With `within` (links not followed), read only
    if the file, as it is opened (links resolved), lies inside it: a metadata file that is a
    symlink out of the folder (to a file anywhere on the machine) is refused, as a document there
    would be, and what is read is what was checked."""
    from .parsers import _inside, _opened_path

    fd = os.open(meta, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        st = os.fstat(fd)
        if within is not None:
            real = _opened_path(fd) or os.path.realpath(meta)
            if not _inside(real, os.path.realpath(within)):
                raise IngestError(f"metadata file {meta.name} is a symlink to {real}, outside {within}: not read "
                                  "(--follow-symlinks to read it)")
        if not stat.S_ISREG(st.st_mode):
            raise IngestError(f"metadata file {meta.name} is not a regular file: not read")
        if st.st_size > MAX_SIDECAR_BYTES:
            raise IngestError(f"metadata file {meta.name} is {st.st_size / 1e6:.1f} MB, over the 1 MB limit")
        chunks, size = [], 0
        while size <= MAX_SIDECAR_BYTES and (chunk := os.read(fd, 1 << 16)):
            chunks.append(chunk)
            size += len(chunk)
        if size > MAX_SIDECAR_BYTES:  # grew after it was measured
            raise IngestError(f"metadata file {meta.name} is over the 1 MB limit")
        return b"".join(chunks)
    finally:
        os.close(fd)


def _read_json_object(path: Path, within: Path | None = None) -> dict:
    try:
        data = json.loads(read_metadata_file(path, within).decode("utf-8-sig"))
    except json.JSONDecodeError as e:
        raise IngestError(f"metadata file {path.name}: invalid JSON (line {e.lineno}, column {e.colno}: {e.msg})") from None
    except (UnicodeDecodeError, RecursionError, ValueError) as e:
        raise IngestError(f"metadata file {path.name}: not readable JSON ({type(e).__name__})") from None
    except OSError as e:
        raise IngestError(f"metadata file {path.name}: {e.strerror}") from None
    if not isinstance(data, dict):
        raise IngestError(f"metadata file {path.name}: expected a JSON object of fields ({', '.join(FIELDS)})")
    return data


@lru_cache(maxsize=64)
def _manifest(path: Path, mtime_ns: int, size: int, within: Path | None) -> dict:
    return _read_json_object(path, within)


def sidecar_paths(path: Path) -> list[Path]:
    """The metadata files that describe `path`, weakest first (manifest, stem sidecar, name sidecar)."""
    found = []
    manifest = path.parent / MANIFEST_NAME
    if manifest.is_file():
        found.append(manifest)
    by_stem = path.with_name(path.stem + SIDECAR_SUFFIX)
    if by_stem.is_file() and path.suffix and len(list(path.parent.glob(_glob_escape(path.stem) + ".*"))) <= 2:
        found.append(by_stem)  # the file and its sidecar: no other file shares the stem
    by_name = path.with_name(path.name + SIDECAR_SUFFIX)
    if by_name.is_file():
        found.append(by_name)
    return found


def _glob_escape(text: str) -> str:
    return re.sub(r"([*?\[])", r"[\1]", text)


def sidecar_metadata(path: Path, within: Path | None = None) -> dict[str, str]:
    """Fields for `path` from its folder's manifest and its sidecar (the sidecar wins). With
    `within` (links not followed), a metadata file that leads out of it is refused
    (`read_metadata_file`)."""
    fields: dict[str, str] = {}
    for meta in sidecar_paths(path):
        if meta.name == MANIFEST_NAME:
            try:
                st = meta.stat()
            except OSError as e:
                raise IngestError(f"metadata file {meta.name}: {e.strerror}") from None
            entry = _manifest(meta, st.st_mtime_ns, st.st_size, within).get(path.name)
            if entry is None:
                continue
            if not isinstance(entry, dict):
                raise IngestError(f"metadata file {meta.name}: the entry for {path.name!r} is not an object of fields")
            fields.update(normalize(entry, strict=True, origin=f"{meta.name} [{path.name}]", extra=True))
        else:
            fields.update(normalize(_read_json_object(meta, within), strict=True, origin=meta.name, extra=True))
    return fields


def described_file(meta: Path) -> Path | None:
    """For a sidecar, the file it describes when that file exists; None for a manifest or an orphan."""
    if meta.name == MANIFEST_NAME:
        return None
    base = meta.with_name(meta.name[: -len(SIDECAR_SUFFIX)])
    if base.is_file():
        return base
    siblings = [p for p in meta.parent.glob(_glob_escape(base.name) + ".*") if p != meta and not is_metadata_file(p)]
    return siblings[0] if len(siblings) == 1 else None


# -- embedded metadata -----------------------------------------------------------------------------

_FRONT_MATTER = re.compile(r"\A\ufeff?---[ \t]*\r?\n(.*?)\r?\n(?:---|\.\.\.)[ \t]*(?:\r?\n|\Z)", re.S)
MAX_FRONT_MATTER = 64 * 1024


def split_front_matter(source: str) -> tuple[dict[str, str], str]:
    """(fields, the Markdown after the front matter). A block that is not YAML of key: value pairs
    is left in the text, as Markdown would show it."""
    if not source.startswith(("---", "\ufeff---")):
        return {}, source
    m = _FRONT_MATTER.match(source[: MAX_FRONT_MATTER + 16])
    if m is None:
        return {}, source
    import yaml

    try:
        data = yaml.safe_load(m.group(1))
    except yaml.YAMLError:
        return {}, source
    if not isinstance(data, dict):
        return {}, source
    return normalize(data, extra=True), source[m.end():]


PLACEHOLDER_TITLES = {"untitled", "(untitled)", "untitled document", "anonymous", "(anonymous)", "no title",
                      "title", "document", "none", "null", "unknown", "(unspecified)", "unspecified"}


def is_placeholder_title(title: str | None, path: Path) -> bool:
    """A title a generator wrote rather than a person: empty, reportlab's `untitled` or
    `(anonymous)`, the file's own name, `Microsoft Word - NAME.docx`."""
    if not title or not title.strip():
        return True
    t = title.strip().lower()
    if t in PLACEHOLDER_TITLES:
        return True
    if t.startswith("microsoft word - ") or t in (path.name.lower(), path.stem.lower()):
        return True
    return bool(re.fullmatch(r"[\w\- .]+\.(pdf|docx?|odt|rtf|txt|html?|md)", t))
