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
from .base import DocumentRecord, ExportedDocument, SearchFilters, StoreStats, checked_upsert
from .sqlite import fts_terms

INSTALL_HINT = 'the Azure AI Search store needs azure-search-documents: pip install "sourcegate[azure]"'
API_VERSION = "2024-07-01"  # the stable REST version requests and responses follow
SEMANTIC_CONFIG = "sourcegate"
VECTOR_PROFILE = "sourcegate-hnsw"
VECTOR_ALGORITHM = "sourcegate-hnsw-cosine"
WRITE_BATCH = 500  # actions per indexing request (the service takes up to 1000 and 16 MB)
READ_PAGE = 1000
META_KEY = "_meta"  # not a base64 key: those have a length that is a multiple of 4

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


def filter_expression(filters: SearchFilters, extra: Iterable[str] = ()) -> str | None:
    clauses = [f"status ne {odata_literal(s)}" for s in filters.exclude_status]
    for col in ("status", "source_type", "version"):
        val = getattr(filters, col)
        if val is not None:
            clauses.append(f"{col} eq {odata_literal(val)}")
    prefix = filters.doc_id_prefix
    if prefix:
        # OData has no startswith in $filter: ids from the prefix up to (not including) the prefix
        # with its last character raised by one, in the service's ordinal string order.
        upper = prefix[:-1] + chr(ord(prefix[-1]) + 1)
        clauses.append(f"doc_id ge {odata_literal(prefix)} and doc_id lt {odata_literal(upper)}")
    for tag in metadata_tags(dict(filters.metadata)):
        clauses.append(f"tags/any(t: t eq {odata_literal(tag)})")
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
                 transport=None, create: bool = True):
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
                SearchField(name="embedding", type="Collection(Edm.Single)", searchable=True, retrievable=True,
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
            ],
        )
        return chunks, documents

    def _ensure_indexes(self) -> None:
        from azure.core.exceptions import (
            ClientAuthenticationError, HttpResponseError, ResourceNotFoundError, ServiceRequestError)

        chunks_def, docs_def = self._index_definitions()
        try:
            for definition in (chunks_def, docs_def):
                try:
                    existing = self._indexes.get_index(definition.name)
                except ResourceNotFoundError:
                    self._indexes.create_or_update_index(definition)
                    continue
                if definition is chunks_def:
                    self._check_existing(existing)
                have = {f.name for f in existing.fields}
                if any(f.name not in have for f in definition.fields):
                    # An index made by an earlier version: the service lets fields be added.
                    self._indexes.create_or_update_index(definition)
            meta = self._lookup(self._docs, META_KEY)
        except (ClientAuthenticationError, HttpResponseError) as e:
            if isinstance(e, ClientAuthenticationError) or e.status_code in (401, 403):
                raise RuntimeError(f"Azure AI Search at {self.endpoint} refused the credentials: set "
                                   f"AZURE_SEARCH_API_KEY to an admin key of the service ({e.message})") from None
            raise
        except ServiceRequestError as e:
            raise RuntimeError(f"cannot reach Azure AI Search at {self.endpoint}: {e.message} "
                               "(check SOURCEGATE_STORE)") from None
        if meta is None:
            self._index_batch(self._docs, [{"@search.action": "mergeOrUpload", "key": META_KEY, "kind": "meta",
                                            "embedder": self.embedder_id, "dim": self.dim, "analyzer": self.analyzer}])
        elif meta.get("embedder") != self.embedder_id or meta.get("dim") != self.dim:
            raise RuntimeError(
                f"The index {self.location} was built with embedder {meta.get('embedder')} ({meta.get('dim')}-d), not "
                f"{self.embedder_id}. Use the same SOURCEGATE_EMBEDDER or another index.")

    def _check_existing(self, index) -> None:
        fields = {f.name: f for f in index.fields}
        emb = fields.get("embedding")
        if emb is None or emb.vector_search_dimensions != self.dim:
            have = None if emb is None else emb.vector_search_dimensions
            raise RuntimeError(f"The index {self.location} has a {have}-d vector field, the embedder gives {self.dim}: "
                               "use another index name or the embedder it was built with.")
        text = fields.get("text")
        if text is not None and text.analyzer_name and text.analyzer_name != self.analyzer:
            raise RuntimeError(
                f"The index {self.location} analyses text with {text.analyzer_name}, not {self.analyzer}: set "
                "SOURCEGATE_LIBRARY_LANGUAGE to the library's language, or use another index for this language.")

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

    def _chunks_by_keys(self, keys: list[str], select: list[str]) -> list[dict]:
        out: list[dict] = []
        for i in range(0, len(keys), READ_PAGE):
            part = keys[i:i + READ_PAGE]
            # Keys are base64url: never a comma, so a comma delimits them safely.
            results = self._chunks.search(search_text=None, filter=f"search.in(key, '{','.join(part)}', ',')",
                                          top=len(part), select=select)
            out.extend(dict(r) for r in results)
        return out

    # -- writes -------------------------------------------------------------------------------
    def upsert_document(self, doc: Document, chunks: list[Chunk], vectors: np.ndarray,
                        features: list[dict | None] | None = None, source_path: str | None = None) -> None:
        vectors, features = checked_upsert(chunks, vectors, features, self.dim)
        status = doc.status or "current"
        doc_key = encode_key(doc.id)
        old = self._lookup(self._docs, doc_key, ["chunk_ids"])
        actions = [{
            "@search.action": "mergeOrUpload", "key": encode_key(ch.id), "chunk_id": ch.id, "doc_id": doc.id,
            "ordinal": ch.ordinal, "title": doc.title, "heading": ch.heading, "text": ch.text, "url": doc.url,
            "version": doc.version or "", "status": status, "source_type": doc.source_type or "",
            "content_hash": doc.content_hash, "page": ch.page, "tags": metadata_tags(doc.metadata or {}),
            "features": json.dumps(feat, separators=(",", ":")) if feat is not None else None,
            "embedding": vec.tolist(),
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
                   "source_path", "chunk_count", "metadata"]

    @staticmethod
    def _record(r: dict) -> DocumentRecord:
        return DocumentRecord(id=r["doc_id"], title=r.get("title") or "", url=r.get("url"),
                              source_type=r.get("source_type"), version=r.get("version"),
                              status=r.get("status") or "current", updated_at=r.get("updated_at"),
                              content_hash=r.get("content_hash") or "", source_path=r.get("source_path"),
                              chunk_count=int(r.get("chunk_count") or 0), metadata=json.loads(r.get("metadata") or "{}"))

    def get_document(self, doc_id: str) -> DocumentRecord | None:
        r = self._lookup(self._docs, encode_key(doc_id), self._DOC_SELECT)
        return self._record(r) if r else None

    def list_documents(self) -> list[DocumentRecord]:
        out: list[DocumentRecord] = []
        while True:
            page = [dict(r) for r in self._docs.search(search_text=None, filter="kind eq 'document'",
                                                       order_by=["doc_id asc"], top=READ_PAGE, skip=len(out),
                                                       select=self._DOC_SELECT)]
            out.extend(self._record(r) for r in page)
            if len(page) < READ_PAGE:
                return out

    def dense_search(self, vector: np.ndarray, k: int, filters: SearchFilters = SearchFilters()) -> list[tuple[str, float]]:
        from azure.search.documents.models import VectorizedQuery

        if k <= 0:
            return []
        q = np.asarray(vector, dtype=np.float32).reshape(-1)
        results = self._chunks.search(
            search_text=None, vector_queries=[VectorizedQuery(vector=q.tolist(), k_nearest_neighbors=k, fields="embedding")],
            vector_filter_mode="preFilter", filter=filter_expression(filters), top=k, select=["chunk_id"])
        return [(r["chunk_id"], similarity_from_score(r["@search.score"])) for r in results]

    def lexical_search(self, query: str, k: int, filters: SearchFilters = SearchFilters()) -> list[tuple[str, float]]:
        text = search_text(query)
        if k <= 0 or not text:
            return []
        results = self._chunks.search(search_text=text, search_mode="any", query_type="simple",
                                      filter=filter_expression(filters), top=k, select=["chunk_id"])
        return [(r["chunk_id"], float(r["@search.score"])) for r in results]

    def hybrid_search(self, query: str, vectors: list[np.ndarray], k: int, k_vector: int,
                      filters: SearchFilters = SearchFilters()) -> list[HybridHit]:
        """One request: the query text and each vector (k_vector neighbours each), fused by the service
        (and reranked by the semantic ranker when enabled); the best k."""
        from azure.search.documents.models import VectorizedQuery

        if k <= 0:
            return []
        text = search_text(query)
        vq = [VectorizedQuery(vector=np.asarray(v, dtype=np.float32).reshape(-1).tolist(),
                              k_nearest_neighbors=k_vector, fields="embedding") for v in vectors]
        kw: dict[str, Any] = {}
        if self.semantic and text:
            kw = {"query_type": "semantic", "semantic_configuration_name": SEMANTIC_CONFIG}
        results = self._chunks.search(search_text=text, search_mode="any", vector_queries=vq,
                                      vector_filter_mode="preFilter", filter=filter_expression(filters), top=k,
                                      select=["chunk_id"], **kw)
        return [HybridHit(r["chunk_id"], float(r["@search.score"]), r.get("@search.reranker_score"))
                for r in results]

    def get_chunks(self, chunk_ids: list[str]) -> list[Candidate]:
        if not chunk_ids:
            return []
        rows = self._chunks_by_keys([encode_key(c) for c in dict.fromkeys(chunk_ids)], _chunk_fields())
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
        rows = self._chunks_by_keys([encode_key(c) for c in dict.fromkeys(chunk_ids)], ["chunk_id", "embedding"])
        return {r["chunk_id"]: np.asarray(r["embedding"], dtype=np.float32) for r in rows}

    def export_document(self, doc_id: str) -> ExportedDocument | None:
        r = self._lookup(self._docs, encode_key(doc_id), [*self._DOC_SELECT, "chunk_ids"])
        if r is None:
            return None
        ids = r.get("chunk_ids") or []
        rows = self._chunks_by_keys([encode_key(c) for c in ids], [*_chunk_fields(), "embedding"])
        rows.sort(key=lambda x: x["ordinal"])
        chunks = [Chunk(id=x["chunk_id"], doc_id=doc_id, ordinal=x["ordinal"], text=x.get("text") or "",
                        page=x.get("page"), heading=x.get("heading")) for x in rows]
        vectors = (np.asarray([x["embedding"] for x in rows], dtype=np.float32) if rows
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
                          by_status=dict(sorted(by_status.items())), embedder=self.embedder_id, location=self.location)

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
