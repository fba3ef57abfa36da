"""Hostile files: every parser, on hostile files and on mutated seeds, either parses or refuses
with a reason (IngestError), within a time and memory budget per file. A short run here; the
longer one is `python bench/bench_fuzz.py`."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fuzz_parsers import hostile, mutate, run_one, seeds

SEEDS = seeds()
MUTATIONS = st.lists(st.tuples(st.integers(0, 4), st.integers(0, 1 << 20), st.integers(1, 64),
                               st.binary(min_size=1, max_size=32)), min_size=1, max_size=6)


@pytest.mark.parametrize("name", sorted(hostile()))
def test_hostile_file(name, tmp_path):
    suffix, data = hostile()[name]
    path = tmp_path / f"{name}{suffix}"
    path.write_bytes(data)
    outcome = run_one(path)
    assert outcome.ok, outcome.line


@pytest.mark.parametrize("suffix", sorted(SEEDS))
def test_seeds_parse(suffix, tmp_path):
    path = tmp_path / f"seed{suffix}"
    path.write_bytes(SEEDS[suffix])
    from sourcegate.ingest.parsers import parse_file

    docs = parse_file(path, path.name)
    assert docs and all(d.text.strip() for d in docs)


@pytest.mark.parametrize("suffix", sorted(SEEDS))
@settings(max_examples=12, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(ops=MUTATIONS)
def test_mutated_seeds(suffix, ops, tmp_path):
    data = mutate(SEEDS[suffix], ops)
    path = tmp_path / f"mutant-{hashlib.sha256(data).hexdigest()[:12]}{suffix}"
    path.write_bytes(data)
    outcome = run_one(path)
    assert outcome.ok, outcome.line
