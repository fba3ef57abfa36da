"""Quotes are inert: a Markdown link or image inside a quoted sentence reaches the answer as text
(escaped, so a client that renders Markdown shows it rather than loading or linking it), and a
citation URL is kept only when it is http(s), in the answer, the tool's text and the page's data."""

from __future__ import annotations

import json
import re

import httpx
import pytest
from test_server_fixtures import KeywordJudge, running_server

from sourcegate.cli import run_ingest
from sourcegate.server.app import create_app
from sourcegate.service import SourceGate
from sourcegate.settings import Settings

Q = "How often should I grease the P-900 bearings?"
MCP_HEADERS = {"accept": "application/json, text/event-stream"}


@pytest.fixture(scope="module")
def library_settings(tmp_path_factory):
    root = tmp_path_factory.mktemp("inert")
    lib = root / "lib"
    lib.mkdir()
    (lib / "p900.txt").write_text(
        "Pump P-900 bearings\n\nGrease the P-900 bearings every 300 hours, see [the grease chart]"
        "(http://evil.example/track) and ![diagram](http://evil.example/pixel.png?c=1) <img src=x onerror=alert(1)>.\n",
        encoding="utf-8")
    (lib / "kb.json").write_text(json.dumps([{"id": "KB-P900", "title": "P-900 bearings grease",
                                              "text": "Grease the P-900 bearings with lithium grease.",
                                              "url": "javascript:alert(7)"},
                                             {"id": "KB-P900-2", "title": "P-900 bearings grease, part 2",
                                              "text": "Grease the P-900 bearings again after a wash-down.",
                                              "url": "https://docs.example/p900"}]), encoding="utf-8")
    settings = Settings(_env_file=None, home=root / "home", audit_log_path=root / "audit.jsonl",
                        mcp_allowed_hosts="")
    report = run_ingest(settings, [lib], prune=False, quiet=True)
    assert not report.failed, report.failed
    return settings


def _live_markup(text: str) -> list[str]:
    """Markdown or HTML that a renderer would turn into a link, an image or a tag."""
    return re.findall(r"(?<!\\)\]\(|(?<!\\)!\[|(?<!\\)<[a-zA-Z]|javascript:", text)


def test_answer_tool_text_and_page_data_hold_no_live_markup(library_settings):
    gate = SourceGate(library_settings, judge=KeywordJudge())
    with running_server(create_app(library_settings, gate), library_settings) as base:
        data = httpx.post(base + "/v1/ask", json={"query": Q}, timeout=60).json()
        call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": "search_procedures", "arguments": {"query": Q}}}
        tool = httpx.post(base + "/mcp", json=call, headers=MCP_HEADERS, timeout=60).json()["result"]
    gate.close()
    assert data["status"] == "answer_from_evidence"
    answer = data["answer"]
    # The quoted sentence is still there, word for word, its link and image shown as text (the URLs
    # in code spans, which no renderer links).
    assert "see [the grease chart\\](`http://evil.example/track`)" in answer
    assert "!\\[diagram\\](`http://evil.example/pixel.png?c=1`)" in answer and "\\<img src=x" in answer
    assert _live_markup(answer) == []
    urls = {p["doc_id"]: p["url"] for p in data["evidence"]}
    assert urls.get("KB-P900", "absent") is None and urls.get("KB-P900-2") == "https://docs.example/p900"
    text = tool["content"][0]["text"]
    assert _live_markup(text) == [] and "https://docs.example/p900" in text
    assert "javascript" not in json.dumps(tool["structuredContent"])
