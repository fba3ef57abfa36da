"""Azure AI Search store, through `azure-search-documents`.

    SOURCEGATE_STORE=azure://SERVICE.search.windows.net/INDEX[?semantic=on]
    AZURE_SEARCH_API_KEY=...      (an admin key; without it, Entra ID through azure-identity)

Two indexes: INDEX holds one search document per chunk (text fields with the library's language
analyzer, a vector field with an HNSW profile using cosine, a semantic configuration, filterable
status / source type / version), and INDEX-documents one record per document (content hash,
chunk count, the chunk keys). Both are created when missing.

- Writes use `merge_or_upload` by key (the chunk id, base64url-encoded: keys may only hold
  letters, digits, `_`, `-` and `=`).
- Azure AI Search has no transactions. A document's new chunks are written first, then the
  chunks it no longer has are deleted, then its record: an interrupted write leaves the old
  record, so the next ingest sees the document as changed and writes it again. Readers may see
  old and new chunks side by side for the time that takes, and, as with any search service, a
  write becomes searchable after the index refreshes (about a second).
- `hybrid_search` sends the query text and its vectors in one request (`search_text` with
  `VectorizedQuery`); with `?semantic=on` it asks for the semantic ranker, whose score is kept
  on each candidate (`reranker_score`). The service's pool then goes through the same rerank as
  every other store.
- Archived revisions are filtered out with OData filters (`status ne 'archived'`), before the
  vector search (`vectorFilterMode: preFilter`).
"""

from __future__ import annotations

import base64
import json
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Iterable
from urllib.parse import parse_qs, urlsplit

import numpy as np

from ..models import Candidate, Chunk, Document
from .base import (DocumentRecord, EmbedderMismatch, ExportedDocument, ReadersRule, ReembedRow, SearchFilters,
                   StoreStats, checked_upsert, reembed_text, text_digest)
from .sqlite import fts_terms

INSTALL_HINT = 'the Azure AI Search store needs azure-search-documents: pip install "sourcegate[azure]"'
API_VERSION = "2024-07-01"  # the stable REST version requests and responses follow
SEMANTIC_CONFIG = "sourcegate"
VECTOR_PROFILE = "sourcegate-hnsw"
VECTOR_ALGORITHM = "sourcegate-hnsw-cosine"
WRITE_BATCH = 500  # actions per indexing request (the service takes up to 1000 and 16 MB)
READ_PAGE = 1000
META_KEY = "_meta"  # not a base64 key: those have a length that is a multiple of 4
VECTOR_FIELD = "embedding"  # the vector field of an index as created; a re-embedding adds another
STAGED_DIGEST = "staged_digest"  # the text (and target field) a re-embedding's staged vector was made from


def vector_field_name(embedder_id: str, dim: int) -> str:
    """The vector field a re-embedding adds for an embedder: a field's dimensions cannot change."""
    return f"embedding_{re.sub(r'[^A-Za-z0-9]+', '_', embedder_id).strip('_').lower()}_{int(dim)}"[:128]

# SOURCEGATE_LIBRARY_LANGUAGE to Lucene language analyzers (stemming, stop words).
ANALYZERS = {
    "ar": "ar.lucene", "ca": "ca.lucene", "cs": "cs.lucene", "da": "da.lucene", "de": "de.lucene",
    "el": "el.lucene", "en": "en.lucene", "es": "es.lucene", "eu": "eu.lucene", "fi": "fi.lucene",
    "fr": "fr.lucene", "ga": "ga.lucene", "gl": "gl.lucene", "hi": "hi.lucene", "hu": "hu.lucene",
    "hy": "hy.lucene", "id": "id.lucene", "it": "it.lucene", "ja": "ja.lucene", "ko": "ko.lucene",
    "lv": "lv.lucene", "nl": "nl.lucene", "no": "no.lucene", "pl": "pl.lucene", "pt": "pt-PT.lucene",
    "ro": "ro.lucene", "ru": "ru.lucene", "sv": "sv.lucene", "th": "th.lucene", "tr": "tr.lucene",
    "zh": "zh-Hans.lucene",
}


def analyzer_for(language: str) -> str:
    lang = (language or "").strip().lower()
    if lang.endswith((".lucene", ".microsoft")):
        return lang
    return ANALYZERS.get(lang.split("-")[0].split("_")[0], "standard.lucene")


def encode_key(value: str) -> str:
    return base64.urlsafe_b64encode(value.encode("utf-8")).decode("ascii")


def odata_literal(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def metadata_tags(metadata: dict[str, str]) -> list[str]:
    """A document's metadata as the chunks' `tags` collection: `key=value` strings, filtered with
    `tags/any(t: t eq 'model=HG-3')`."""
    return [f"{k}={v}" for k, v in sorted(metadata.items())]


def _after_prefix(prefix: str) -> str | None:
    """The least string above every string that starts with `prefix` (None: there is none, the
    prefix is all U+10FFFF): its last character raised to the next one a request can carry (after
    U+D7FF comes U+E000, surrogates are not text), a last U+10FFFF dropped first."""
    chars = list(prefix)
    while chars and ord(chars[-1]) >= 0x10FFFF:
        chars.pop()
    if not chars:
        return None
    code = ord(chars[-1]) + 1
    chars[-1] = chr(0xE000 if 0xD800 <= code <= 0xDFFF else code)
    return "".join(chars)


def readers_expression(rule: ReadersRule) -> str:
    """Azure AI Search's security trimming filter over the `readers` collection: one of the caller's
    ids among a document's readers (`search.in` inside `any`), or, where documents without readers are
    readable, none at all (`not readers/any()`, true of an empty or missing collection). Ids never
    hold a comma (`readers.READER_ID`): the comma delimits them safely. A rule that admits nothing is
    never sent (the stores answer it without a request)."""
    parts = []
    ids = sorted(i for i in rule.ids if "," not in i and "'" not in i)
    if ids:
        parts.append(f"readers/any(r: search.in(r, {odata_literal(','.join(ids))}, ','))")
    if rule.unmarked:
        parts.append("not readers/any()")
    return parts[0] if len(parts) == 1 else "(" + " or ".join(parts) + ")"


def admits_nothing(rule: ReadersRule | None) -> bool:
    return rule is not None and not rule.unmarked and not any("," not in i and "'" not in i for i in rule.ids)


def filter_expression(filters: SearchFilters, extra: Iterable[str] = ()) -> str | None:
    clauses = [f"status ne {odata_literal(s)}" for s in filters.exclude_status]
    for col in ("status", "source_type", "version"):
        val = getattr(filters, col)
        if val is not None:
            clauses.append(f"{col} eq {odata_literal(val)}")
    prefix = filters.doc_id_prefix
    if prefix:
        # OData has no startswith in $filter: ids from the prefix up to (not including) the first
        # string after every id that starts with it, in the service's code point order
        upper = _after_prefix(prefix)
        clauses.append(f"doc_id ge {odata_literal(prefix)}"
                       + (f" and doc_id lt {odata_literal(upper)}" if upper is not None else ""))
    for tag in metadata_tags(dict(filters.metadata)):
        clauses.append(f"tags/any(t: t eq {odata_literal(tag)})")
    if filters.readers is not None:
        clauses.append(readers_expression(filters.readers))
    clauses.extend(extra)
    return " and ".join(clauses) or None


_SEPARATORS = re.compile(r"[\W_]+", re.UNICODE)


def search_text(query: str) -> str | None:
    """The query's terms in the simple query syntax, any of them matching: words as they are (the
    index's analyzer stems them), identifiers as quoted phrases ("p 200")."""
    out = []
    for term in fts_terms(query):
        words = _SEPARATORS.sub(" ", term.strip('"')).split()
        if words:
            out.append('"' + " ".join(words) + '"' if len(words) > 1 else words[0])
    return " ".join(dict.fromkeys(out)) or None


def similarity_from_score(score: float) -> float:
    """Cosine similarity from a vector query's @search.score (for the cosine metric the service
    reports 1 / (1 + cosine distance))."""
    return 2.0 - 1.0 / score if score > 0 else -1.0


@dataclass
class HybridHit:
    id: str
    score: float
    reranker_score: float | None = None


def _chunk_fields() -> list[str]:
    return ["key", "chunk_id", "doc_id", "ordinal", "title", "heading", "text", "url", "version", "status",
            "source_type", "content_hash", "page", "features"]


class AzureSearchStore:
    vector_backend = "azure-ai-search"

    def __init__(self, endpoint: str, index_name: str, embedder_id: str, dim: int, *, credential=None,
                 language: str = "en", semantic: bool = False, api_version: str = API_VERSION,
                 transport=None, create: bool = True, allow_embedder_mismatch: bool = False):
        """An index built with another embedder is refused (`EmbedderMismatch`), unless
        `allow_embedder_mismatch`: then it opens for inspection and re-embedding, and searches and
        writes are refused until it is re-embedded."""
        try:
            from azure.search.documents import SearchClient
            from azure.search.documents.indexes import SearchIndexClient
        except ImportError as e:
            raise ImportError(INSTALL_HINT) from e
        if not re.fullmatch(r"[a-z0-9][a-z0-9-]{0,100}[a-z0-9]", index_name or ""):
            raise ValueError(f"invalid Azure AI Search index name {index_name!r}: lower-case letters, digits and dashes")
        if credential is None:
            credential = _default_credential()
        self.endpoint = endpoint.rstrip("/")
        self.index_name = index_name
        self.documents_index = f"{index_name}-documents"
        self.embedder_id = embedder_id
        self.dim = dim
        self._allow_mismatch = allow_embedder_mismatch
        self._index_embedder: tuple[str, int] = (embedder_id, dim)
        self.vector_field = VECTOR_FIELD
        self.analyzer = analyzer_for(language)
        self.semantic = semantic
        self.location = f"azure://{urlsplit(self.endpoint).netloc}/{index_name}" + ("?semantic=on" if semantic else "")
        kw: dict[str, Any] = {"api_version": api_version}
        if transport is not None:
            kw["transport"] = transport
        self._indexes = SearchIndexClient(self.endpoint, credential, **kw)
        self._chunks = SearchClient(self.endpoint, index_name, credential, **kw)
        self._docs = SearchClient(self.endpoint, self.documents_index, credential, **kw)
        if create:
            self._ensure_indexes()

    @classmethod
    def from_url(cls, url: str, embedder_id: str, dim: int, *, api_key: str | None = None, language: str = "en",
                 **kw) -> "AzureSearchStore":
        """`azure://SERVICE[.search.windows.net]/INDEX[?semantic=on&api-version=...]`."""
        parts = urlsplit(url)
        host = parts.hostname or ""
        if not host or not parts.path.strip("/"):
            raise ValueError(f"expected azure://SERVICE.search.windows.net/INDEX, got {url!r}")
        if "." not in host:
            host = f"{host}.search.windows.net"
        query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        semantic = query.get("semantic", "off").lower() in ("on", "true", "1", "yes")
        credential = None
        if api_key:
            from azure.core.credentials import AzureKeyCredential

            credential = AzureKeyCredential(api_key)
        scheme = "http" if query.get("tls", "on").lower() == "off" else "https"
        return cls(f"{scheme}://{host}" + (f":{parts.port}" if parts.port else ""), parts.path.strip("/"), embedder_id,
                   dim, credential=credential, language=language, semantic=semantic,
                   api_version=query.get("api-version", API_VERSION), **kw)

    # -- schema -------------------------------------------------------------------------------
    def _index_definitions(self):
        from azure.search.documents.indexes.models import (
            HnswAlgorithmConfiguration, HnswParameters, SearchableField, SearchField, SearchFieldDataType,
            SearchIndex, SemanticConfiguration, SemanticField, SemanticPrioritizedFields, SemanticSearch,
            SimpleField, VectorSearch, VectorSearchProfile)

        text = dict(analyzer_name=self.analyzer)
        chunks = SearchIndex(
            name=self.index_name,
            fields=[
                SimpleField(name="key", type=SearchFieldDataType.STRING, key=True, filterable=True),
                SimpleField(name="chunk_id", type=SearchFieldDataType.STRING, filterable=True),
                SimpleField(name="doc_id", type=SearchFieldDataType.STRING, filterable=True),
                SimpleField(name="ordinal", type=SearchFieldDataType.INT32, filterable=True, sortable=True),
                SearchableField(name="title", **text),
                SearchableField(name="heading", **text),
                SearchableField(name="text", **text),
                SimpleField(name="url", type=SearchFieldDataType.STRING),
                SimpleField(name="version", type=SearchFieldDataType.STRING, filterable=True),
                SimpleField(name="status", type=SearchFieldDataType.STRING, filterable=True, facetable=True),
                SimpleField(name="source_type", type=SearchFieldDataType.STRING, filterable=True),
                SimpleField(name="content_hash", type=SearchFieldDataType.STRING),
                SimpleField(name="page", type=SearchFieldDataType.INT32),
                SimpleField(name="features", type=SearchFieldDataType.STRING),
                SimpleField(name="tags", type=SearchFieldDataType.Collection(SearchFieldDataType.STRING),
                            filterable=True),
                # who may read the chunk's document (docs/readers.md): the security trimming filter
                SimpleField(name="readers", type=SearchFieldDataType.Collection(SearchFieldDataType.STRING),
                            filterable=True),
                SimpleField(name=STAGED_DIGEST, type=SearchFieldDataType.STRING),
                SearchField(name=VECTOR_FIELD, type="Collection(Edm.Single)", searchable=True, retrievable=True,
                            stored=True, vector_search_dimensions=self.dim, vector_search_profile_name=VECTOR_PROFILE),
            ],
            vector_search=VectorSearch(
                algorithms=[HnswAlgorithmConfiguration(
                    name=VECTOR_ALGORITHM,
                    parameters=HnswParameters(m=4, ef_construction=400, ef_search=500, metric="cosine"))],
                profiles=[VectorSearchProfile(name=VECTOR_PROFILE, algorithm_configuration_name=VECTOR_ALGORITHM)],
            ),
            semantic_search=SemanticSearch(
                default_configuration_name=SEMANTIC_CONFIG,
                configurations=[SemanticConfiguration(
                    name=SEMANTIC_CONFIG,
                    prioritized_fields=SemanticPrioritizedFields(
                        title_field=SemanticField(field_name="title"),
                        content_fields=[SemanticField(field_name="text")],
                        keywords_fields=[SemanticField(field_name="heading")]))],
            ),
        )
        documents = SearchIndex(
            name=self.documents_index,
            fields=[
                SimpleField(name="key", type=SearchFieldDataType.STRING, key=True, filterable=True),
                SimpleField(name="kind", type=SearchFieldDataType.STRING, filterable=True),
                SimpleField(name="doc_id", type=SearchFieldDataType.STRING, filterable=True, sortable=True),
                SimpleField(name="title", type=SearchFieldDataType.STRING),
                SimpleField(name="url", type=SearchFieldDataType.STRING),
                SimpleField(name="source_type", type=SearchFieldDataType.STRING),
                SimpleField(name="version", type=SearchFieldDataType.STRING),
                SimpleField(name="status", type=SearchFieldDataType.STRING, filterable=True, facetable=True),
                SimpleField(name="updated_at", type=SearchFieldDataType.STRING),
                SimpleField(name="content_hash", type=SearchFieldDataType.STRING),
                SimpleField(name="source_path", type=SearchFieldDataType.STRING),
                SimpleField(name="chunk_count", type=SearchFieldDataType.INT32),
                SearchField(name="chunk_ids", type="Collection(Edm.String)", retrievable=True),
                SimpleField(name="ingested_at", type=SearchFieldDataType.DATE_TIME_OFFSET),
                SimpleField(name="embedder", type=SearchFieldDataType.STRING),
                SimpleField(name="dim", type=SearchFieldDataType.INT32),
                SimpleField(name="analyzer", type=SearchFieldDataType.STRING),
                SimpleField(name="metadata", type=SearchFieldDataType.STRING),
                SimpleField(name="readers", type=SearchFieldDataType.Collection(SearchFieldDataType.STRING),
                            filterable=True),
                SimpleField(name="vector_field", type=SearchFieldDataType.STRING),
                SimpleField(name="reembed_target", type=SearchFieldDataType.STRING),
                SimpleField(name="hash_embedder", type=SearchFieldDataType.STRING),
            ],
        )
        return chunks, documents

    def _ensure_indexes(self) -> None:
        from azure.core.exceptions import (
            ClientAuthenticationError, HttpResponseError, ResourceNotFoundError, ServiceRequestError)

        chunks_def, docs_def = self._index_definitions()
        try:
            chunks_existing = None
            for definition in (chunks_def, docs_def):
                try:
                    existing = self._indexes.get_index(definition.name)
                except ResourceNotFoundError:
                    self._indexes.create_or_update_index(definition)
                    continue
                if definition is chunks_def:
                    chunks_existing = existing
                have = {f.name for f in existing.fields}
                added = [f for f in definition.fields if f.name not in have and f.name != VECTOR_FIELD]
                if added:
                    # An index made by an earlier version: the service lets fields be added (never
                    # changed: the existing fields, vector fields included, are sent as they are).
                    existing.fields = list(existing.fields) + added
                    self._indexes.create_or_update_index(existing)
            meta = self._lookup(self._docs, META_KEY)
        except (ClientAuthenticationError, HttpResponseError) as e:
            if isinstance(e, ClientAuthenticationError) or e.status_code in (401, 403):
                raise RuntimeError(f"Azure AI Search at {self.endpoint} refused the credentials: set "
                                   f"AZURE_SEARCH_API_KEY to an admin key of the service ({e.message})") from None
            raise
        except ServiceRequestError as e:
            raise RuntimeError(f"cannot reach Azure AI Search at {self.endpoint}: {e.message} "
                               "(check SOURCEGATE_STORE)") from None
        if meta is not None and meta.get("embedder"):
            self._note_meta(meta)
        if chunks_existing is not None:
            self._check_existing(chunks_existing)
        if meta is None:
            self._index_batch(self._docs, [{"@search.action": "mergeOrUpload", "key": META_KEY, "kind": "meta",
                                            "embedder": self.embedder_id, "dim": self.dim, "analyzer": self.analyzer,
                                            "vector_field": VECTOR_FIELD}])
        elif self.embedder_mismatch and not self._allow_mismatch:
            raise self._mismatch()

    def _note_meta(self, meta: dict) -> None:
        self._index_embedder = (meta.get("embedder"), int(meta.get("dim") or 0))
        self.vector_field = meta.get("vector_field") or VECTOR_FIELD

    def _check_existing(self, index) -> None:
        fields = {f.name: f for f in index.fields}
        emb = fields.get(self.vector_field)
        dim = self._index_embedder[1]
        if emb is None or emb.vector_search_dimensions != dim:
            have = None if emb is None else emb.vector_search_dimensions
            raise RuntimeError(f"The index {self.location} has a {have}-d vector field {self.vector_field}, its "
                               f"embedder gives {dim}: use another index name or the embedder it was built with.")
        text = fields.get("text")
        if text is not None and text.analyzer_name and text.analyzer_name != self.analyzer:
            raise RuntimeError(
                f"The index {self.location} analyses text with {text.analyzer_name}, not {self.analyzer}: set "
                "SOURCEGATE_LIBRARY_LANGUAGE to the library's language, or use another index for this language.")

    # -- the index's embedder ------------------------------------------------------------------
    @property
    def embedder_mismatch(self) -> bool:
        return self._index_embedder != (self.embedder_id, self.dim)

    def _mismatch(self) -> EmbedderMismatch:
        return EmbedderMismatch(self.location, *self._index_embedder, self.embedder_id, self.dim)

    def _check_embedder(self) -> None:
        if self.embedder_mismatch:
            raise self._mismatch()

    def index_embedder(self) -> tuple[str, int]:
        """(embedder id, dimension) the index's vectors come from, as recorded now."""
        meta = self._lookup(self._docs, META_KEY)
        if meta is not None and meta.get("embedder"):
            self._note_meta(meta)
        return self._index_embedder

    def content_hash_embedder(self) -> str | None:
        meta = self._lookup(self._docs, META_KEY) or {}
        return meta.get("hash_embedder") or None

    def reembed_pending(self) -> str | None:
        meta = self._lookup(self._docs, META_KEY) or {}
        return meta.get("reembed_target") or None

    # -- re-embedding (sourcegate.ingest.reembed) ---------------------------------------------
    # A vector field's dimensions cannot change on an existing index, and fields cannot be removed:
    # the new vectors go into a new field named after the embedder (`vector_field_name`), with the
    # digest of the text they were made from (`staged_digest`). Once every chunk has one, the meta
    # record names the new field and embedder: one write switches searches to it. The old field
    # keeps its vectors (the service frees its space only when the index is rebuilt).

    def reembed_begin(self, embedder_id: str, dim: int) -> None:
        from azure.search.documents.indexes.models import SearchField

        field = vector_field_name(embedder_id, dim)
        index = self._indexes.get_index(self.index_name)
        fields = {f.name: f for f in index.fields}
        if field not in fields:
            index.fields = list(index.fields) + [SearchField(
                name=field, type="Collection(Edm.Single)", searchable=True, retrievable=True, stored=True,
                vector_search_dimensions=int(dim), vector_search_profile_name=VECTOR_PROFILE)]
            self._indexes.create_or_update_index(index)
        elif fields[field].vector_search_dimensions != int(dim):
            raise RuntimeError(f"the index {self.location} has a field {field} of "
                               f"{fields[field].vector_search_dimensions} dimensions, not {dim}")
        self._index_batch(self._docs, [{"@search.action": "merge", "key": META_KEY,
                                        "reembed_target": f"{embedder_id}|{int(dim)}"}])
        self._reembed_target = (embedder_id, int(dim), field)

    def _reembed_rows(self, keys: list[str]) -> list[ReembedRow]:
        field = self._reembed_target[2]
        out = []
        for r in self._chunks_by_keys(keys, ["key", "title", "text", STAGED_DIGEST]):
            t = reembed_text(r.get("title"), r.get("text"))
            digest = text_digest(f"{field}|{t}")  # a vector staged for another field never counts
            out.append(ReembedRow(r["key"], t, digest, r.get(STAGED_DIGEST) == digest))
        return out

    def _all_chunk_keys(self) -> list[str]:
        keys: list[str] = []
        skip = 0
        while True:
            page = [dict(r) for r in self._docs.search(search_text=None, filter="kind eq 'document'",
                                                       order_by=["doc_id asc"], top=READ_PAGE, skip=skip,
                                                       select=["chunk_ids"])]
            skip += len(page)
            keys.extend(encode_key(c) for r in page for c in r.get("chunk_ids") or [])
            if len(page) < READ_PAGE:
                return keys

    def reembed_batches(self, size: int):
        keys = self._all_chunk_keys()
        for i in range(0, len(keys), size):
            rows = self._reembed_rows(keys[i:i + size])
            if rows:
                yield rows

    def reembed_stage(self, rows: list[ReembedRow], vectors) -> None:
        field, dim = self._reembed_target[2], self._reembed_target[1]
        vectors = np.asarray(vectors, dtype=np.float32)
        if vectors.shape != (len(rows), dim):
            raise ValueError(f"staged vectors have shape {vectors.shape}, expected ({len(rows)}, {dim})")
        self._index_batch(self._chunks, [{"@search.action": "merge", "key": r.key, field: v.tolist(),
                                          STAGED_DIGEST: r.digest} for r, v in zip(rows, vectors)])

    def reembed_finish(self, embed_missing) -> int:
        """Stage what is still missing (chunks written since their pass), then switch: the meta
        record names the new embedder and field. Returns the number of chunks."""
        embedder_id, dim, field = self._reembed_target
        keys = self._all_chunk_keys()
        rows: list[ReembedRow] = []
        for i in range(0, len(keys), READ_PAGE):
            rows.extend(self._reembed_rows(keys[i:i + READ_PAGE]))
        missing = [r for r in rows if not r.done]
        if missing:
            self.reembed_stage(missing, embed_missing(missing))
        old = self.index_embedder()[0]
        meta = self._lookup(self._docs, META_KEY) or {}
        self._index_batch(self._docs, [{"@search.action": "merge", "key": META_KEY, "embedder": embedder_id,
                                        "dim": int(dim), "vector_field": field, "reembed_target": None,
                                        "hash_embedder": meta.get("hash_embedder") or old}])
        self.embedder_id, self.dim, self.vector_field = embedder_id, int(dim), field
        self._index_embedder = (embedder_id, int(dim))
        return len(rows)

    # -- helpers ------------------------------------------------------------------------------
    @staticmethod
    def _lookup(client, key: str, select: list[str] | None = None) -> dict | None:
        from azure.core.exceptions import ResourceNotFoundError

        try:
            return dict(client.get_document(key, selected_fields=select))
        except ResourceNotFoundError:
            return None

    @staticmethod
    def _index_batch(client, actions: list[dict]) -> None:
        for i in range(0, len(actions), WRITE_BATCH):
            batch = actions[i:i + WRITE_BATCH]
            results = _index(client, batch)
            failed = [r for r in results if not r.succeeded]
            if failed:
                r = failed[0]
                raise RuntimeError(f"Azure AI Search refused {len(failed)} of {len(batch)} writes "
                                   f"(first: key {r.key}, status {r.status_code}: {r.error_message})")

    def _chunks_by_keys(self, keys: list[str], select: list[str], also: str | None = None) -> list[dict]:
        out: list[dict] = []
        for i in range(0, len(keys), READ_PAGE):
            part = keys[i:i + READ_PAGE]
            # Keys are base64url: never a comma, so a comma delimits them safely.
            where = f"search.in(key, '{','.join(part)}', ',')" + (f" and {also}" if also else "")
            results = self._chunks.search(search_text=None, filter=where, top=len(part), select=select)
            out.extend(dict(r) for r in results)
        return out

    # -- writes -------------------------------------------------------------------------------
    def upsert_document(self, doc: Document, chunks: list[Chunk], vectors: np.ndarray,
                        features: list[dict | None] | None = None, source_path: str | None = None) -> None:
        self._check_embedder()
        vectors, features = checked_upsert(chunks, vectors, features, self.dim)
        status = doc.status or "current"
        doc_key = encode_key(doc.id)
        old = self._lookup(self._docs, doc_key, ["chunk_ids"])
        actions = [{
            "@search.action": "mergeOrUpload", "key": encode_key(ch.id), "chunk_id": ch.id, "doc_id": doc.id,
            "ordinal": ch.ordinal, "title": doc.title, "heading": ch.heading, "text": ch.text, "url": doc.url,
            "version": doc.version or "", "status": status, "source_type": doc.source_type or "",
            "content_hash": doc.content_hash, "page": ch.page, "tags": metadata_tags(doc.metadata or {}),
            "readers": sorted(set(doc.readers or ())),
            "features": json.dumps(feat, separators=(",", ":")) if feat is not None else None,
            self.vector_field: vec.tolist(),
        } for ch, vec, feat in zip(chunks, vectors, features)]
        self._index_batch(self._chunks, actions)
        new_ids = {ch.id for ch in chunks}
        stale = [c for c in (old or {}).get("chunk_ids") or [] if c not in new_ids]
        if stale:
            self._index_batch(self._chunks, [{"@search.action": "delete", "key": encode_key(c)} for c in stale])
        self._index_batch(self._docs, [{
            "@search.action": "mergeOrUpload", "key": doc_key, "kind": "document", "doc_id": doc.id,
            "title": doc.title, "url": doc.url, "source_type": doc.source_type, "version": doc.version,
            "status": status, "updated_at": doc.updated_at, "content_hash": doc.content_hash,
            "source_path": source_path, "chunk_count": len(chunks), "chunk_ids": [ch.id for ch in chunks],
            "metadata": json.dumps(doc.metadata or {}, ensure_ascii=False, sort_keys=True),
            "readers": sorted(set(doc.readers or ())),
            "ingested_at": datetime.now(timezone.utc).isoformat().replace("+00:00", "Z"),
        }])

    def delete_document(self, doc_id: str) -> bool:
        key = encode_key(doc_id)
        old = self._lookup(self._docs, key, ["chunk_ids"])
        if old is None:
            return False
        # The record first loses its hash, so a delete cut short is finished by the next ingest or prune.
        self._index_batch(self._docs, [{"@search.action": "merge", "key": key, "content_hash": ""}])
        ids = old.get("chunk_ids") or []
        if ids:
            self._index_batch(self._chunks, [{"@search.action": "delete", "key": encode_key(c)} for c in ids])
        self._index_batch(self._docs, [{"@search.action": "delete", "key": key}])
        return True

    # -- reads --------------------------------------------------------------------------------
    _DOC_SELECT = ["doc_id", "title", "url", "source_type", "version", "status", "updated_at", "content_hash",
                   "source_path", "chunk_count", "metadata", "readers"]

    @staticmethod
    def _record(r: dict) -> DocumentRecord:
        return DocumentRecord(id=r["doc_id"], title=r.get("title") or "", url=r.get("url"),
                              source_type=r.get("source_type"), version=r.get("version"),
                              status=r.get("status") or "current", updated_at=r.get("updated_at"),
                              content_hash=r.get("content_hash") or "", source_path=r.get("source_path"),
                              chunk_count=int(r.get("chunk_count") or 0), metadata=json.loads(r.get("metadata") or "{}"),
                              readers=list(r.get("readers") or []))

    def get_document(self, doc_id: str) -> DocumentRecord | None:
        r = self._lookup(self._docs, encode_key(doc_id), self._DOC_SELECT)
        return self._record(r) if r else None

    def list_documents(self, readers: ReadersRule | None = None) -> list[DocumentRecord]:
        if admits_nothing(readers):
            return []
        where = "kind eq 'document'" + (f" and {readers_expression(readers)}" if readers is not None else "")
        out: list[DocumentRecord] = []
        while True:
            page = [dict(r) for r in self._docs.search(search_text=None, filter=where,
                                                       order_by=["doc_id asc"], top=READ_PAGE, skip=len(out),
                                                       select=self._DOC_SELECT)]
            out.extend(self._record(r) for r in page)
            if len(page) < READ_PAGE:
                return out

    def dense_search(self, vector: np.ndarray, k: int, filters: SearchFilters = SearchFilters()) -> list[tuple[str, float]]:
        from azure.search.documents.models import VectorizedQuery

        if k <= 0 or admits_nothing(filters.readers):
            return []
        self._check_embedder()
        q = np.asarray(vector, dtype=np.float32).reshape(-1)
        results = self._chunks.search(
            search_text=None, vector_queries=[VectorizedQuery(vector=q.tolist(), k_nearest_neighbors=k,
                                                              fields=self.vector_field)],
            vector_filter_mode="preFilter", filter=filter_expression(filters), top=k, select=["chunk_id"])
        return [(r["chunk_id"], similarity_from_score(r["@search.score"])) for r in results]

    def lexical_search(self, query: str, k: int, filters: SearchFilters = SearchFilters()) -> list[tuple[str, float]]:
        text = search_text(query)
        if k <= 0 or not text or admits_nothing(filters.readers):
            return []
        results = self._chunks.search(search_text=text, search_mode="any", query_type="simple",
                                      filter=filter_expression(filters), top=k, select=["chunk_id"])
        return [(r["chunk_id"], float(r["@search.score"])) for r in results]

    def hybrid_search(self, query: str, vectors: list[np.ndarray], k: int, k_vector: int,
                      filters: SearchFilters = SearchFilters()) -> list[HybridHit]:
        """One request: the query text and each vector (k_vector neighbours each), fused by the service
        (and reranked by the semantic ranker when enabled); the best k."""
        from azure.search.documents.models import VectorizedQuery

        if k <= 0 or admits_nothing(filters.readers):
            return []
        self._check_embedder()
        text = search_text(query)
        vq = [VectorizedQuery(vector=np.asarray(v, dtype=np.float32).reshape(-1).tolist(),
                              k_nearest_neighbors=k_vector, fields=self.vector_field) for v in vectors]
        kw: dict[str, Any] = {}
        if self.semantic and text:
            kw = {"query_type": "semantic", "semantic_configuration_name": SEMANTIC_CONFIG}
        results = self._chunks.search(search_text=text, search_mode="any", vector_queries=vq,
                                      vector_filter_mode="preFilter", filter=filter_expression(filters), top=k,
                                      select=["chunk_id"], **kw)
        return [HybridHit(r["chunk_id"], float(r["@search.score"]), r.get("@search.reranker_score"))
                for r in results]

    def get_chunks(self, chunk_ids: list[str], readers: ReadersRule | None = None) -> list[Candidate]:
        if not chunk_ids or admits_nothing(readers):
            return []
        rows = self._chunks_by_keys([encode_key(c) for c in dict.fromkeys(chunk_ids)], _chunk_fields(),
                                    readers_expression(readers) if readers is not None else None)
        by_id = {
            r["chunk_id"]: Candidate(
                id=r["chunk_id"], doc_id=r["doc_id"], title=r.get("title") or "", text=r.get("text") or "",
                url=r.get("url"), version=r.get("version") or None, status=r.get("status"),
                source_type=r.get("source_type") or None, content_hash=r.get("content_hash"), page=r.get("page"),
                heading=r.get("heading"), passage_features=json.loads(r["features"]) if r.get("features") else None)
            for r in rows
        }
        return [by_id[i] for i in chunk_ids if i in by_id]

    def get_vectors(self, chunk_ids: list[str]) -> dict[str, np.ndarray]:
        if not chunk_ids:
            return {}
        self._check_embedder()
        rows = self._chunks_by_keys([encode_key(c) for c in dict.fromkeys(chunk_ids)], ["chunk_id", self.vector_field])
        return {r["chunk_id"]: np.asarray(r[self.vector_field], dtype=np.float32) for r in rows}

    def export_document(self, doc_id: str) -> ExportedDocument | None:
        r = self._lookup(self._docs, encode_key(doc_id), [*self._DOC_SELECT, "chunk_ids"])
        if r is None:
            return None
        ids = r.get("chunk_ids") or []
        self._check_embedder()
        rows = self._chunks_by_keys([encode_key(c) for c in ids], [*_chunk_fields(), self.vector_field])
        rows.sort(key=lambda x: x["ordinal"])
        chunks = [Chunk(id=x["chunk_id"], doc_id=doc_id, ordinal=x["ordinal"], text=x.get("text") or "",
                        page=x.get("page"), heading=x.get("heading")) for x in rows]
        vectors = (np.asarray([x[self.vector_field] for x in rows], dtype=np.float32) if rows
                   else np.zeros((0, self.dim), np.float32))
        return ExportedDocument(record=self._record(r), chunks=chunks, vectors=vectors,
                                features=[json.loads(x["features"]) if x.get("features") else None for x in rows])

    def stats(self) -> StoreStats:
        records = self.list_documents()
        by_status: dict[str, dict[str, int]] = {}
        for rec in records:
            s = by_status.setdefault(rec.status, {"documents": 0, "chunks": 0})
            s["documents"] += 1
            s["chunks"] += rec.chunk_count
        return StoreStats(documents=len(records), chunks=int(self._chunks.get_document_count()),
                          by_status=dict(sorted(by_status.items())), embedder=self._index_embedder[0],
                          location=self.location, dim=self._index_embedder[1])

    def close(self) -> None:
        self._chunks.close()
        self._docs.close()
        self._indexes.close()


def _index(client, actions: list[dict]):
    """One indexing request (`POST /indexes('name')/docs/search.index`) with the actions as given."""
    from azure.search.documents import IndexDocumentsBatch

    batch = IndexDocumentsBatch()
    for a in actions:
        action = a["@search.action"]
        body = {k: v for k, v in a.items() if k != "@search.action"}
        {"mergeOrUpload": batch.add_merge_or_upload_actions, "merge": batch.add_merge_actions,
         "delete": batch.add_delete_actions, "upload": batch.add_upload_actions}[action]([body])
    return client.index_documents(batch)


def _default_credential():
    try:
        from azure.identity import DefaultAzureCredential
    except ImportError:
        raise RuntimeError("Azure AI Search needs a credential: set AZURE_SEARCH_API_KEY to an admin key, or "
                           'pip install "sourcegate[azure]" to sign in with Entra ID (azure-identity)') from None
    return DefaultAzureCredential()
