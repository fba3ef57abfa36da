"""The store contract against a real Azure AI Search service, when one is given:

    SOURCEGATE_TEST_AZURE_SEARCH_ENDPOINT=https://SERVICE.search.windows.net
    SOURCEGATE_TEST_AZURE_SEARCH_KEY=<admin key>
    SOURCEGATE_TEST_AZURE_SEARCH_SEMANTIC=on     # optional: the service has the semantic ranker
    pytest tests/test_store_contract.py -k azure-live

Each test creates its own pair of indexes (`sgtest-<random>` and `sgtest-<random>-documents`) and
deletes them afterwards. A write becomes searchable once the index refreshes (about a second),
so after each write the store waits until the service's document count reflects it.
"""

from __future__ import annotations

import os
import time
import uuid

import pytest

# Read at import: the autouse fixture in conftest.py scrubs SOURCEGATE_* variables from each test.
ENDPOINT = os.environ.get("SOURCEGATE_TEST_AZURE_SEARCH_ENDPOINT")
KEY = os.environ.get("SOURCEGATE_TEST_AZURE_SEARCH_KEY")
SEMANTIC = os.environ.get("SOURCEGATE_TEST_AZURE_SEARCH_SEMANTIC", "off").lower() in ("on", "true", "1")
SETTLE_TIMEOUT_S = 30.0


class _Settling:
    """The store, waiting after each write until the service has indexed it."""

    def __init__(self, store):
        self._store = store

    def __getattr__(self, name):
        attr = getattr(self._store, name)
        if name not in ("upsert_document", "delete_document"):
            return attr

        def write(*args, **kw):
            result = attr(*args, **kw)
            self._settle()
            return result

        return write

    def _settle(self) -> None:
        deadline = time.monotonic() + SETTLE_TIMEOUT_S
        s = self._store
        while time.monotonic() < deadline:
            records = s.list_documents()
            if int(s._chunks.get_document_count()) == sum(r.chunk_count for r in records):
                time.sleep(1.0)  # counts settle before every replica answers searches
                return
            time.sleep(0.5)


def live_azure_store(request, emb):
    if not (ENDPOINT and KEY):
        pytest.skip("set SOURCEGATE_TEST_AZURE_SEARCH_ENDPOINT and SOURCEGATE_TEST_AZURE_SEARCH_KEY to run the "
                    "store contract against a real Azure AI Search service")
    from azure.core.credentials import AzureKeyCredential

    from sourcegate.store.azure import AzureSearchStore

    name = request.node.__dict__.setdefault("azure_index", f"sgtest-{uuid.uuid4().hex[:10]}")
    credential = AzureKeyCredential(KEY)

    def cleanup():
        from azure.search.documents.indexes import SearchIndexClient

        client = SearchIndexClient(ENDPOINT, credential)
        for index in (name, f"{name}-documents"):
            try:
                client.delete_index(index)
            except Exception:
                pass
        client.close()

    if not request.node.__dict__.get("azure_cleanup"):
        request.node.__dict__["azure_cleanup"] = True
        request.addfinalizer(cleanup)
    return lambda embedder_id=emb.id, dim=emb.dim: _Settling(AzureSearchStore(
        ENDPOINT, name, embedder_id, dim, credential=credential, semantic=SEMANTIC))
