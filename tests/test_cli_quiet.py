"""A quiet CLI: answers for people by default, JSON logs only when asked; a faster model load."""

from __future__ import annotations

import json
import logging
import os
import time

import numpy as np
import pytest
from click.testing import CliRunner

from conftest import DEMO_CORPUS
from sourcegate.cli import cli
from test_cli import _recorded

Q = "How often should I grease the bearings on pump P-200?"


@pytest.fixture()
def recorded_home(tmp_path, monkeypatch):
    scores = _recorded(tmp_path, Q, {"PROC-P200-BRG-R2": {"is_relevant": 0.97, "contains_answer_evidence": 0.95}})
    monkeypatch.setenv("SOURCEGATE_RECORDED_SCORES", str(scores))
    monkeypatch.setenv("SOURCEGATE_JUDGE", "recorded")
    r = CliRunner().invoke(cli, ["ingest", str(DEMO_CORPUS)], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    yield
    logging.getLogger().setLevel(logging.WARNING)


def _json_lines(text: str) -> list[dict]:
    out = []
    for line in text.splitlines():
        if line.startswith("{"):
            out.append(json.loads(line))
    return out


def test_ask_prints_the_answer_and_no_log_line(recorded_home):
    r = CliRunner().invoke(cli, ["ask", Q], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    assert r.stdout.startswith("status: answer_from_evidence")
    assert r.stderr == "", f"ask wrote to stderr without --verbose: {r.stderr[:300]!r}"


@pytest.mark.parametrize("how", ["--verbose", "env"])
def test_verbose_or_log_level_gives_the_json_log_line(recorded_home, monkeypatch, how):
    args = ["ask", Q]
    if how == "--verbose":
        args = ["--verbose", *args]
    else:
        monkeypatch.setenv("SOURCEGATE_LOG_LEVEL", "info")
    r = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert r.exit_code == 0, r.output
    events = [rec for rec in _json_lines(r.stderr) if rec.get("event") == "ask"]
    assert len(events) == 1, r.stderr
    assert events[0]["interface"] == "cli" and events[0]["status"] == "answer_from_evidence"
    assert Q not in r.stderr
    assert r.stdout.startswith("status: ")


def test_an_unknown_log_level_names_the_variable(monkeypatch):
    monkeypatch.setenv("SOURCEGATE_LOG_LEVEL", "loud")
    r = CliRunner().invoke(cli, ["status"])
    assert r.exit_code == 1
    assert "SOURCEGATE_LOG_LEVEL" in r.output and "loud" in r.output


def test_warnings_reach_a_person_as_plain_lines(recorded_home, monkeypatch):
    # A judge that is down: the warning is one readable line, not JSON.
    monkeypatch.setenv("SOURCEGATE_RECORDED_SCORES", str(DEMO_CORPUS / "missing-scores.jsonl"))
    r = CliRunner().invoke(cli, ["ask", Q], catch_exceptions=False)
    assert r.exit_code == 3, r.output  # a degraded answer
    assert "(degraded)" in r.stdout
    assert not _json_lines(r.stderr)
    assert all(line.startswith(("warning: ", "error: ")) for line in r.stderr.splitlines()), r.stderr


def test_the_model_cache_loads_the_same_model_faster(tmp_path):
    from sourcegate import embed

    cache = tmp_path / "cache"
    embed.configure_model_cache(cache)
    try:
        t0 = time.perf_counter()
        first = embed.UseEmbedder()
        v1 = first.embed(["Grease the bearings every 2,000 hours.", "Consigner la pompe avant l'intervention."])
        cold = time.perf_counter() - t0
        files = sorted(cache.iterdir())
        assert [f.name.split(".", 1)[1] for f in files] == ["pickle", "table.npy"], files
        assert all(f.stat().st_mode & 0o077 == 0 for f in files), "the cache files must be private"
        t0 = time.perf_counter()
        second = embed.UseEmbedder()
        v2 = second.embed(["Grease the bearings every 2,000 hours.", "Consigner la pompe avant l'intervention."])
        warm = time.perf_counter() - t0
        np.testing.assert_array_equal(v1, v2)
        assert isinstance(second._load()._backend.table, np.memmap), "the table is mapped, not copied"
        print(f"model load: {cold:.2f} s parsed, {warm:.2f} s from the cache")
        pickled, table = files
        assert embed._load_cached_backend(pickled) is not None
        # A cache file that others can write is not trusted (one is a pickle), nor a missing table.
        os.chmod(table, 0o666)
        assert embed._load_cached_backend(pickled) is None
        table.unlink()
        assert embed._load_cached_backend(pickled) is None
        os.chmod(pickled, 0o666)
        assert embed._load_cached_backend(pickled) is None
        # the next start parses the model again and rewrites both files
        third = embed.UseEmbedder()
        np.testing.assert_array_equal(v1, third.embed(["Grease the bearings every 2,000 hours.",
                                                      "Consigner la pompe avant l'intervention."]))
        assert sorted(f.name for f in cache.iterdir()) == [f.name for f in files]
    finally:
        embed.configure_model_cache(None)


def test_the_model_cache_can_be_turned_off(tmp_path):
    from sourcegate import embed

    embed.configure_model_cache("off")
    try:
        assert embed.model_cache_dir() is None and embed._use_cache_path() is None
    finally:
        embed.configure_model_cache(None)
    embed.configure_model_cache(tmp_path / "c")
    try:
        assert embed._use_cache_path().parent == tmp_path / "c"
    finally:
        embed.configure_model_cache(None)
