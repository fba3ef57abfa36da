"""An in-memory Azure AI Search service behind an azure-core `HttpTransport`.

Azure AI Search has no emulator, so the store is tested at the transport boundary: the real
`azure-search-documents` clients build their requests, and this transport answers them with
bodies shaped like the service's REST API version 2024-07-01 (the version the store pins):

- `PUT /indexes('name')` (create or update; 201 with the definition), `GET /indexes('name')`
  (200, or 404 with an OData error body), `DELETE /indexes('name')`;
- `POST /indexes('name')/docs/search.index` with `{"value": [{"@search.action", ...}]}`, answered
  `{"value": [{"key", "status", "errorMessage", "statusCode"}]}` (200, or 207 when some fail);
- `GET /indexes('name')/docs('key')` and `GET /indexes('name')/docs/$count` (a plain number);
- `POST /indexes('name')/docs/search.post.search` with `search`, `searchMode`, `queryType`,
  `semanticConfiguration`, `filter`, `orderby`, `select`, `top`, `skip`, `count`, `vectorQueries`
  (`{"kind": "vector", "vector", "k", "fields"}`) and `vectorFilterMode`, answered
  `{"value": [{"@search.score", "@search.rerankerScore"?, ...fields}]}`.

What the service checks, the fake checks: the `api-version` parameter and `api-key` header, one
key field, vector fields with dimensions and a profile whose algorithm exists, a semantic
configuration over existing fields, document keys' characters, vector lengths, selected fields
being retrievable, filters on filterable fields, and that an update of an index adds fields
but never removes or changes one (a vector field's dimensions included). Scoring follows the documentation's shapes, not
its numbers: BM25 for text, 1 / (1 + cosine distance) for a vector query, reciprocal rank fusion
(k = 60) for hybrid queries, and a semantic reranker score in [0, 4] (here the share of query
words found in the title and text) that reorders the fused results.
"""

from __future__ import annotations

import json
import math
import re
import threading
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import numpy as np
import snowballstemmer
from azure.core.pipeline.transport import HttpTransport
from azure.core.rest._http_response_impl import HttpResponseImpl

API_VERSION = "2024-07-01"
KEY_CHARS = re.compile(r"^[A-Za-z0-9_\-=]+$")
_STOP = {"a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is", "it", "no", "not",
         "of", "on", "or", "such", "that", "the", "their", "then", "there", "these", "they", "this", "to", "was",
         "will", "with"}
_STEM = snowballstemmer.stemmer("english")


def analyze(text: str | None) -> list[str]:
    """Lower case, split at non-alphanumerics (Unicode text segmentation, roughly), English stop
    words and stems: close enough to `en.lucene` for ranking tests."""
    words = [w for w in re.split(r"[\W_]+", (text or "").lower()) if w]
    return [_STEM.stemWord(w) for w in words if w not in _STOP]


class ServiceError(Exception):
    def __init__(self, status: int, code: str, message: str):
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def _lone_surrogate(value: Any) -> bool:
    """Whether a parsed JSON value holds a string with half a surrogate pair (`"\\ud800"`)."""
    if isinstance(value, str):
        return any("\ud800" <= ch <= "\udfff" for ch in value)
    if isinstance(value, dict):
        return any(_lone_surrogate(k) or _lone_surrogate(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_lone_surrogate(v) for v in value)
    return False


class FakeSearchService:
    def __init__(self, api_key: str = "test-admin-key"):
        self.api_key = api_key
        self.indexes: dict[str, dict] = {}
        self.docs: dict[str, dict[str, dict]] = {}
        self.requests: list[tuple[str, str, Any]] = []  # (method, path, body) as received
        self._lock = threading.Lock()

    # -- dispatch -----------------------------------------------------------------------------
    def handle(self, method: str, url: str, headers: dict[str, str], body: bytes | None) -> tuple[int, dict, bytes]:
        parts = urlsplit(url)
        query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        path = unquote(parts.path)
        payload = json.loads(body) if body else None
        with self._lock:
            self.requests.append((method, path, payload))
            try:
                if query.get("api-version") != API_VERSION:
                    raise ServiceError(400, "InvalidApiVersion", f"api-version must be {API_VERSION}, got {query.get('api-version')}")
                if headers.get("api-key") != self.api_key:
                    raise ServiceError(403, "Forbidden", "Authorization failed: invalid api-key.")
                if _lone_surrogate(payload):
                    # the service reads the body as UTF-16 text: an escaped half of a pair is not text
                    raise ServiceError(400, "InvalidRequestBody", "The request body is not valid JSON: invalid UTF-16 "
                                                                  "surrogate in a string.")
                status, result = self._route(method, path, query, payload)
            except ServiceError as e:
                return e.status, {"Content-Type": "application/json; odata.metadata=minimal"}, json.dumps(
                    {"error": {"code": e.code, "message": e.message}}).encode()
        if isinstance(result, (int, float)) and not isinstance(result, bool):
            return status, {"Content-Type": "text/plain"}, str(result).encode()
        if result is None:
            return status, {}, b""
        return status, {"Content-Type": "application/json; odata.metadata=minimal"}, json.dumps(result).encode()

    def _route(self, method: str, path: str, query: dict, body: Any):
        m = re.fullmatch(r"/indexes\('([^']+)'\)(/docs(?:/(\$count|search\.index|search\.post\.search)|\('([^']*)'\))?)?", path)
        if not m:
            raise ServiceError(404, "NotFound", f"no route for {method} {path}")
        name, docs, op, key = m.group(1), m.group(2), m.group(3), m.group(4)
        if docs is None:
            if method == "PUT":
                return self._put_index(name, body)
            if method == "GET":
                return 200, self._index(name)
            if method == "DELETE":
                self._index(name)
                del self.indexes[name], self.docs[name]
                return 204, None
        index = self._index(name)
        if op == "search.index" and method == "POST":
            return self._index_documents(name, index, body)
        if op == "search.post.search" and method == "POST":
            return 200, self._search(name, index, body)
        if op == "$count" and method == "GET":
            return 200, len(self.docs[name])
        if key is not None and method == "GET":
            doc = self.docs[name].get(key)
            if doc is None:
                raise ServiceError(404, "NotFound", f"Document with key '{key}' not found.")
            select = query.get("$select")
            return 200, self._project(index, doc, select.split(",") if select else None)
        raise ServiceError(405, "MethodNotAllowed", f"{method} {path}")

    # -- indexes ------------------------------------------------------------------------------
    def _index(self, name: str) -> dict:
        if name not in self.indexes:
            raise ServiceError(404, "ResourceNameNotFound", f"No index with the name '{name}' was found in the service.")
        return self.indexes[name]

    def _put_index(self, name: str, body: dict):
        if body.get("name") != name:
            raise ServiceError(400, "InvalidRequestParameter", "The index name in the body must match the URL.")
        fields = body.get("fields") or []
        keys = [f for f in fields if f.get("key")]
        if len(keys) != 1 or keys[0].get("type") != "Edm.String":
            raise ServiceError(400, "InvalidRequestParameter", "An index must have exactly one key field of type Edm.String.")
        vs = body.get("vectorSearch") or {}
        algorithms = {a["name"]: a for a in vs.get("algorithms") or []}
        profiles = {p["name"]: p for p in vs.get("profiles") or []}
        for a in algorithms.values():
            if a.get("kind") not in ("hnsw", "exhaustiveKnn"):
                raise ServiceError(400, "InvalidRequestParameter", f"Unknown vector algorithm kind {a.get('kind')}.")
            if (a.get("hnswParameters") or {}).get("metric", "cosine") not in ("cosine", "euclidean", "dotProduct", "hamming"):
                raise ServiceError(400, "InvalidRequestParameter", "Unknown vector metric.")
        for p in profiles.values():
            if p.get("algorithm") not in algorithms:
                raise ServiceError(400, "InvalidRequestParameter", f"Profile {p['name']} names an unknown algorithm.")
        names = {f["name"]: f for f in fields}
        for f in fields:
            if f.get("type") == "Collection(Edm.Single)":
                if not f.get("dimensions") or f.get("vectorSearchProfile") not in profiles or not f.get("searchable"):
                    raise ServiceError(400, "InvalidRequestParameter",
                                       f"Vector field {f['name']} needs dimensions, a vectorSearchProfile and searchable.")
        for conf in (body.get("semantic") or {}).get("configurations") or []:
            pf = conf.get("prioritizedFields") or {}
            used = [pf.get("titleField")] + (pf.get("prioritizedContentFields") or []) + (pf.get("prioritizedKeywordsFields") or [])
            for u in filter(None, used):
                f = names.get(u.get("fieldName"))
                if f is None or f.get("type") != "Edm.String" or not f.get("searchable"):
                    raise ServiceError(400, "InvalidRequestParameter",
                                       f"Semantic configuration {conf['name']}: {u.get('fieldName')} is not a searchable string field.")
        if name in self.indexes:
            self._check_update(self.indexes[name], names)
        created = name not in self.indexes
        stored = dict(body, **{"@odata.etag": '"0x1"'})
        self.indexes[name] = stored
        self.docs.setdefault(name, {})
        return (201 if created else 200), stored

    # What an update may not do to an existing index's fields (the service answers 400
    # "CannotChangeExistingField"): remove one, or change its type, key, analyzer, the attributes
    # that shape its index, or a vector field's dimensions. New fields may be added.
    _FIXED = ("type", "key", "searchable", "filterable", "sortable", "facetable", "analyzer", "dimensions")

    def _check_update(self, old_index: dict, new_fields: dict[str, dict]) -> None:
        for old in old_index["fields"]:
            new = new_fields.get(old["name"])
            if new is None:
                raise ServiceError(400, "OperationNotAllowed",
                                   f"Existing field '{old['name']}' cannot be removed from index '{old_index['name']}'.")
            for attr in self._FIXED:
                a, b = old.get(attr), new.get(attr)
                if attr in ("type", "analyzer", "dimensions") and a != b or attr not in ("type", "analyzer", "dimensions") \
                        and bool(a) != bool(b):
                    raise ServiceError(400, "OperationNotAllowed",
                                       f"Existing field '{old['name']}' cannot be changed: {attr} {a!r} -> {b!r}.")

    @staticmethod
    def _fields(index: dict) -> dict[str, dict]:
        return {f["name"]: f for f in index["fields"]}

    def _key_field(self, index: dict) -> str:
        return next(f["name"] for f in index["fields"] if f.get("key"))

    # -- documents ----------------------------------------------------------------------------
    def _index_documents(self, name: str, index: dict, body: dict):
        fields = self._fields(index)
        key_name = self._key_field(index)
        results, any_failed = [], False
        store = self.docs[name]
        for action in body.get("value") or []:
            kind = action.get("@search.action", "upload")
            doc = {k: v for k, v in action.items() if k != "@search.action"}
            key = doc.get(key_name)
            try:
                if not isinstance(key, str) or not KEY_CHARS.match(key):
                    raise ServiceError(400, "InvalidDocumentKey", f"Invalid document key: '{key}'. Keys can only contain "
                                       "letters, digits, underscore (_), dash (-), or equal sign (=).")
                for k, v in doc.items():
                    f = fields.get(k)
                    if f is None:
                        raise ServiceError(400, "InvalidField", f"The property '{k}' does not exist on type '{name}'.")
                    if f.get("type") == "Collection(Edm.Single)" and v is not None and len(v) != f["dimensions"]:
                        raise ServiceError(400, "InvalidVector",
                                           f"The vector field '{k}' expects {f['dimensions']} dimensions, got {len(v)}.")
                status = 200
                if kind == "upload":
                    status = 200 if key in store else 201
                    store[key] = doc
                elif kind == "mergeOrUpload":
                    status = 200 if key in store else 201
                    store[key] = {**store.get(key, {}), **doc}
                elif kind == "merge":
                    if key not in store:
                        raise ServiceError(404, "DocumentNotFound", "Document not found.")
                    store[key] = {**store[key], **doc}
                elif kind == "delete":
                    store.pop(key, None)
                else:
                    raise ServiceError(400, "InvalidAction", f"Unknown action {kind}.")
                results.append({"key": key, "status": True, "errorMessage": None, "statusCode": status})
            except ServiceError as e:
                any_failed = True
                results.append({"key": key, "status": False, "errorMessage": e.message, "statusCode": e.status})
        return (207 if any_failed else 200), {"value": results}

    def _project(self, index: dict, doc: dict, select: list[str] | None) -> dict:
        fields = self._fields(index)
        names = select or [n for n, f in fields.items() if f.get("retrievable", True)]
        out = {}
        for n in names:
            f = fields.get(n)
            if f is None:
                raise ServiceError(400, "InvalidRequestParameter", f"Invalid expression: Could not find a property named '{n}'.")
            if f.get("retrievable") is False:
                raise ServiceError(400, "InvalidRequestParameter", f"The field '{n}' is not retrievable.")
            out[n] = doc.get(n)
        return out

    # -- search -------------------------------------------------------------------------------
    def _search(self, name: str, index: dict, body: dict) -> dict:
        fields = self._fields(index)
        docs = list(self.docs[name].values())
        keep = self._filter(body.get("filter"), fields)
        candidates = [d for d in docs if keep(d)]
        text = body.get("search")
        text_ranked: list[tuple[dict, float]] = []
        if text and text != "*":
            text_ranked = self._bm25(text, candidates, [n for n, f in fields.items() if f.get("searchable")
                                                         and f.get("type") == "Edm.String"], body.get("searchMode", "any"))
        vector_rankings = []
        for vq in body.get("vectorQueries") or []:
            if vq.get("kind") != "vector":
                raise ServiceError(400, "InvalidRequestParameter", f"Unsupported vector query kind {vq.get('kind')}.")
            f = fields.get(vq.get("fields"))
            if f is None or f.get("type") != "Collection(Edm.Single)":
                raise ServiceError(400, "InvalidRequestParameter", f"'{vq.get('fields')}' is not a vector field.")
            if len(vq["vector"]) != f["dimensions"]:
                raise ServiceError(400, "InvalidRequestParameter", "The vector query's dimensions do not match the field.")
            pool = candidates if body.get("vectorFilterMode", "preFilter") == "preFilter" else docs
            q = np.asarray(vq["vector"], dtype=np.float64)
            scored = []
            for d in pool:
                v = d.get(vq["fields"])
                if v is None:
                    continue
                v = np.asarray(v, dtype=np.float64)
                cos = float(q @ v / (np.linalg.norm(q) * np.linalg.norm(v) or 1.0))
                scored.append((d, 1.0 / (1.0 + (1.0 - cos))))
            scored.sort(key=lambda x: -x[1])
            ranked = scored[: vq.get("k") or 50]
            if body.get("vectorFilterMode") == "postFilter":
                ranked = [x for x in ranked if keep(x[0])]
            vector_rankings.append(ranked)
        if vector_rankings and text_ranked:
            results = self._rrf([text_ranked, *vector_rankings])
        elif vector_rankings:
            results = self._rrf(vector_rankings) if len(vector_rankings) > 1 else vector_rankings[0]
        elif text and text != "*":
            results = text_ranked
        else:
            results = [(d, 1.0) for d in candidates]
        for ob in reversed([o.strip() for o in (body.get("orderby") or "").split(",") if o.strip()]):
            fname, _, direction = ob.partition(" ")
            if not (fields.get(fname) or {}).get("sortable"):
                raise ServiceError(400, "InvalidRequestParameter", f"The field '{fname}' is not sortable.")
            results.sort(key=lambda x: (x[0].get(fname) is None, x[0].get(fname)), reverse=direction.strip() == "desc")
        reranker: dict[int, float] = {}
        if body.get("queryType") == "semantic":
            results = self._semantic(index, body, text, results[:50], reranker)
        skip, top = int(body.get("skip") or 0), int(body.get("top") or 50)
        page = results[skip: skip + top]
        select = [s.strip() for s in body["select"].split(",")] if body.get("select") else None
        value = []
        for d, score in page:
            row = {"@search.score": score}
            if id(d) in reranker:
                row["@search.rerankerScore"] = reranker[id(d)]
            row.update(self._project(index, d, select))
            value.append(row)
        out: dict[str, Any] = {"value": value}
        if body.get("count"):
            out["@odata.count"] = len(results)
        return out

    def _semantic(self, index: dict, body: dict, text: str | None, results, reranker: dict[int, float]):
        configs = {c["name"]: c for c in (index.get("semantic") or {}).get("configurations") or []}
        name = body.get("semanticConfiguration") or (index.get("semantic") or {}).get("defaultConfiguration")
        if name not in configs:
            raise ServiceError(400, "InvalidRequestParameter", f"Unknown semantic configuration '{name}'.")
        if not text:
            raise ServiceError(400, "InvalidRequestParameter", "A semantic query needs search text.")
        pf = configs[name]["prioritizedFields"]
        used = [(pf.get("titleField") or {}).get("fieldName")] + [c["fieldName"] for c in pf.get("prioritizedContentFields") or []]
        words = set(analyze(text))
        for d, _ in results:
            have = set(analyze(" ".join(str(d.get(f) or "") for f in used if f)))
            reranker[id(d)] = round(4.0 * len(words & have) / max(1, len(words)), 6)
        return sorted(results, key=lambda x: -reranker[id(x[0])])

    @staticmethod
    def _rrf(rankings: list[list[tuple[dict, float]]], k: int = 60) -> list[tuple[dict, float]]:
        scores: dict[int, float] = {}
        by_id: dict[int, dict] = {}
        for ranking in rankings:
            for rank, (d, _) in enumerate(ranking, start=1):
                scores[id(d)] = scores.get(id(d), 0.0) + 1.0 / (k + rank)
                by_id[id(d)] = d
        return sorted(((by_id[i], s) for i, s in scores.items()), key=lambda x: -x[1])

    @staticmethod
    def _bm25(text: str, docs: list[dict], fields: list[str], mode: str, k1: float = 1.2, b: float = 0.75):
        """BM25 over the searchable fields; quoted phrases must appear as consecutive terms."""
        clauses = []
        for phrase, word in re.findall(r'"([^"]*)"|(\S+)', text):
            terms = analyze(phrase if phrase else word)
            if terms:
                clauses.append(terms)
        if not clauses:
            return []
        tokens = {id(d): analyze(" ".join(str(d.get(f) or "") for f in fields)) for d in docs}
        avg = sum(len(t) for t in tokens.values()) / max(1, len(tokens))

        def matches(toks: list[str], clause: list[str]) -> int:
            n = len(clause)
            return sum(1 for i in range(len(toks) - n + 1) if toks[i:i + n] == clause)

        df = [sum(1 for d in docs if matches(tokens[id(d)], c)) for c in clauses]
        out = []
        for d in docs:
            toks = tokens[id(d)]
            score, hit = 0.0, 0
            for c, n in zip(clauses, df):
                tf = matches(toks, c)
                if tf:
                    hit += 1
                    idf = math.log(1 + (len(docs) - n + 0.5) / (n + 0.5))
                    score += idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * len(toks) / (avg or 1)))
            if hit and (mode == "any" or hit == len(clauses)):
                out.append((d, score))
        out.sort(key=lambda x: -x[1])
        return out

    @staticmethod
    def _filter(expr: str | None, fields: dict[str, dict]):
        """OData: clauses joined by `and`, each `field eq|ne|gt|ge|lt|le 'literal'`, `field eq|ne number`,
        `search.in(field, 'a,b', ',')`, `collection/any(t: t eq 'literal')`,
        `collection/any(t: search.in(t, 'a,b', ','))` (security trimming), `not collection/any()`, or a
        parenthesised `or` of those."""
        if not expr:
            return lambda d: True
        outside_quotes = r"(?=(?:[^']*'[^']*')*[^']*$)"
        clauses = []
        for part in re.split(r"\s+and\s+" + outside_quotes, expr.strip()):
            part = part.strip()
            if part.startswith("(") and part.endswith(")"):
                alternatives = [FakeSearchService._clause(a.strip())
                                for a in re.split(r"\s+or\s+" + outside_quotes, part[1:-1].strip())]
                clauses.append(([f for f, _ in alternatives],
                                lambda d, alts=alternatives: any(test(d.get(f)) for f, test in alts)))
            else:
                fname, test = FakeSearchService._clause(part)
                clauses.append(([fname], lambda d, f=fname, t=test: t(d.get(f))))
        for names, _ in clauses:
            for fname in names:
                if not (fields.get(fname) or {}).get("filterable"):
                    raise ServiceError(400, "InvalidRequestParameter", f"The field '{fname}' is not filterable.")
        return lambda d: all(test(d) for _, test in clauses)

    @staticmethod
    def _clause(part: str):
        """(field, test of the field's value) for one clause of a filter."""
        m = re.fullmatch(r"search\.in\((\w+),\s*'((?:[^']|'')*)'(?:,\s*'([^']*)')?\)", part)
        if m:
            fname, values, delim = m.group(1), m.group(2).replace("''", "'"), m.group(3)
            allowed = set(values.split(delim) if delim else re.split(r"[ ,]", values))
            return fname, lambda v, a=allowed: v in a
        m = re.fullmatch(r"(\w+)/any\((\w+):\s*search\.in\((\w+),\s*'((?:[^']|'')*)'(?:,\s*'([^']*)')?\)\)", part)
        if m:
            if m.group(2) != m.group(3):
                raise ServiceError(400, "InvalidRequestParameter", f"Invalid expression: unknown variable in '{part}'.")
            values, delim = m.group(4).replace("''", "'"), m.group(5)
            allowed = set(values.split(delim) if delim else re.split(r"[ ,]", values))
            return m.group(1), lambda v, a=allowed: isinstance(v, list) and any(x in a for x in v)
        m = re.fullmatch(r"not\s+(\w+)/any\(\)", part)
        if m:
            return m.group(1), lambda v: not (isinstance(v, list) and v)
        m = re.fullmatch(r"(\w+)/any\((\w+):\s*(\w+)\s+eq\s+'((?:[^']|'')*)'\)", part)
        if m:
            if m.group(2) != m.group(3):
                raise ServiceError(400, "InvalidRequestParameter", f"Invalid expression: unknown variable in '{part}'.")
            value = m.group(4).replace("''", "'")
            return m.group(1), lambda v, x=value: isinstance(v, list) and x in v
        m = re.fullmatch(r"(\w+)\s+(eq|ne|gt|ge|lt|le)\s+(?:'((?:[^']|'')*)'|(-?\d+))", part)
        if not m:
            raise ServiceError(400, "InvalidRequestParameter", f"Invalid expression: syntax error in '{part}'.")
        fname, op = m.group(1), m.group(2)
        value = m.group(3).replace("''", "'") if m.group(3) is not None else int(m.group(4))
        compare = {"eq": lambda v, x: v == x, "ne": lambda v, x: v != x,
                   "gt": lambda v, x: v is not None and v > x, "ge": lambda v, x: v is not None and v >= x,
                   "lt": lambda v, x: v is not None and v < x, "le": lambda v, x: v is not None and v <= x}[op]
        return fname, lambda v, x=value, c=compare: c(v, x)


class _Closable:
    def close(self) -> None:
        pass


class FakeSearchTransport(HttpTransport):
    """Answers the SDK's requests from a `FakeSearchService`, without a socket."""

    def __init__(self, service: FakeSearchService):
        self.service = service

    def __enter__(self):
        return self

    def __exit__(self, *args):
        pass

    def open(self) -> None:
        pass

    def close(self) -> None:
        pass

    def send(self, request, **kwargs):
        body = request.content if hasattr(request, "content") else request.data
        if isinstance(body, str):
            body = body.encode()
        status, headers, content = self.service.handle(request.method, request.url, dict(request.headers), body)
        response = HttpResponseImpl(request=request, internal_response=_Closable(), status_code=status,
                                    reason="OK" if status < 400 else "Error", headers=headers,
                                    content_type=headers.get("Content-Type"), block_size=4096,
                                    stream_download_generator=None)
        response._content = content
        return response
