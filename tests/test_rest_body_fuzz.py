"""Fuzzing the body of POST /v1/ask on a real server on loopback, as the parsers are fuzzed: any
body gets an answer or a 4xx naming the problem, never a 500 and never a dropped connection."""

from __future__ import annotations

import json

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_server_fixtures import make_gate, make_settings, running_server

from fuzz_parsers import ASK_BODY_SEEDS, HOSTILE_ASK_BODIES, mutate

from sourcegate.server.app import create_app

MUTATIONS = st.lists(st.tuples(st.integers(0, 4), st.integers(0, 1 << 16), st.integers(1, 16),
                               st.binary(min_size=1, max_size=16)), min_size=1, max_size=6)
# JSON values of every shape, with strings that may hold any code point (lone surrogates too,
# written as \u escapes as a client library would).
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(st.characters(), max_size=40),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12)
SURROGATES = st.integers(0xD800, 0xDFFF).map(lambda c: f"\\u{c:04x}")
ALLOWED = {200, 400, 413, 422}


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    settings = make_settings(tmp_path_factory.mktemp("fuzz") / "audit.jsonl", max_body_bytes=200_000,
                             max_query_chars=500)
    gate = make_gate(settings)
    with running_server(create_app(settings, gate)) as url:
        yield url
    gate.close()


def _post(base: str, body: bytes) -> httpx.Response:
    r = httpx.post(base + "/v1/ask", content=body, headers={"content-type": "application/json"}, timeout=60)
    assert r.status_code in ALLOWED, (body[:200], r.status_code, r.text[:300])
    data = r.json()
    assert ("error" in data) if r.status_code != 200 else ("status" in data)
    return r


@pytest.mark.parametrize("name", sorted(HOSTILE_ASK_BODIES))
def test_hostile_bodies(base, name):
    r = _post(base, HOSTILE_ASK_BODIES[name])
    if name in ("lone-surrogate", "low-surrogate"):
        assert r.status_code == 422 and "Unicode" in r.json()["error"]


@settings(max_examples=25, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(seed=st.sampled_from(ASK_BODY_SEEDS), ops=MUTATIONS)
def test_mutated_bodies(base, seed, ops):
    _post(base, mutate(seed, ops))


@settings(max_examples=25, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(query=JSON_VALUES, extra=JSON_VALUES, surrogate=st.none() | SURROGATES)
def test_generated_json_bodies(base, query, extra, surrogate):
    body = json.dumps({"query": query, "extra": extra})
    if surrogate and isinstance(query, str):
        body = json.dumps({"query": "pump P-200 ", "extra": extra})[:-1] + f', "query": "x{surrogate}"}}'
    _post(base, body.encode("utf-8"))
