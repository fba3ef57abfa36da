"""Hostile files at ingest: inputs that made the parsers quadratic are ingested, a file past the
time or memory budget fails with its reason while the others are ingested, and a DOCX whose XML
is too big to load is refused by name. (Time against size is measured in bench/bench_parsers.py.)"""

from __future__ import annotations

import os
import time
import zipfile
from pathlib import Path

import pytest

from sourcegate.ingest import parsers
from sourcegate.ingest.parsers import _drop_hidden_blocks, _html_depth, parse_file
from sourcegate.ingest.pipeline import Ingestor
from sourcegate.store import open_store

GOOD = "Pump P-200\n\nGrease the bearings every 2,000 hours with lithium grease.\n"


@pytest.fixture()
def store(tmp_path, embedder):
    s = open_store(tmp_path / "index.db", embedder.id, embedder.dim)
    yield s
    s.close()


def _ingest(store, embedder, root: Path, **kw):
    return Ingestor(store, embedder, workers=1, **kw).ingest([root])


def test_files_that_were_quadratic_are_ingested(tmp_path, store, embedder):
    root = tmp_path / "lib"
    root.mkdir()
    (root / "brackets.md").write_text("# Brackets\n\nGrease [the pump](http://x).\n\n"
                                      + ("[" * 19_000 + "\n") * 10, encoding="utf-8")
    (root / "anchors.html").write_text("<p>Grease the pump.</p>" + "<a " * 10_000, encoding="utf-8")
    (root / "scripts.html").write_text("<p>Check the seal.</p>" + "<script>" * 10_000, encoding="utf-8")
    (root / "good.txt").write_text(GOOD, encoding="utf-8")
    # A budget far above what a linear parse needs, far below what the quadratic one took (minutes).
    report = _ingest(store, embedder, root, parse_timeout_s=60)
    assert report.failed == [] and report.added == 4
    md = store.get_document("brackets.md")
    assert md is not None and md.title == "Brackets"


def test_markdown_keeps_link_and_image_words_not_targets(tmp_path):
    path = tmp_path / "links.md"
    path.write_text("# Pump\n\nSee [the manual](http://example.com/m.pdf) and ![a diagram](d.png) **now**.\n",
                    encoding="utf-8")
    text = parse_file(path, "links.md")[0].text
    assert "See the manual and a diagram now." in text and "example.com" not in text and "**" not in text


def test_markdown_table_row_is_one_line_label_beside_value(tmp_path):
    path = tmp_path / "table.md"
    path.write_text("# CR-5\n\n| Item | Value |\n|---|---|\n| Maximum batch size | 5 kg of green coffee |\n"
                    "| Drum speed | 52 rpm |\n\nPreheat the drum.\n", encoding="utf-8")
    text = parse_file(path, "table.md")[0].text
    assert "Maximum batch size | 5 kg of green coffee" in text.splitlines()
    assert "Drum speed | 52 rpm" in text.splitlines() and "Preheat the drum." in text


def test_html_helpers_on_unclosed_markup():
    assert _html_depth("<div>" * 300) > parsers.MAX_NESTING
    assert _html_depth("<p>x</p>" + "<a " * 10_000) <= 1
    assert _drop_hidden_blocks("a<script>x</script>b<style>y") == "a b"


def test_a_file_past_the_time_budget_fails_and_the_rest_is_ingested(tmp_path, store, embedder):
    root = tmp_path / "lib"
    root.mkdir()
    # An ordinary but big page: seconds of parsing, against a budget of a fraction of one.
    (root / "big.html").write_text("<p>Grease the bearings of pump P-200 every week.</p>\n" * 200_000,
                                   encoding="utf-8")
    (root / "good.txt").write_text(GOOD, encoding="utf-8")
    report = _ingest(store, embedder, root, parse_timeout_s=0.2)
    assert [Path(p).name for p, _ in report.failed] == ["big.html"]
    assert "0.2 s budget per file" in report.failed[0][1] and "SOURCEGATE_PARSE_TIMEOUT_S" in report.failed[0][1]
    assert report.added == 1 and store.get_document("good.txt") is not None


def test_a_file_past_the_memory_budget_fails_and_the_rest_is_ingested(tmp_path, store, embedder):
    root = tmp_path / "lib"
    root.mkdir()
    (root / "big.html").write_text("<p>Grease the bearings of pump P-200 every week.</p>\n" * 400_000,
                                   encoding="utf-8")
    (root / "good.txt").write_text(GOOD, encoding="utf-8")
    report = _ingest(store, embedder, root, parse_timeout_s=300, parse_memory_mb=40)
    assert [Path(p).name for p, _ in report.failed] == ["big.html"]
    assert "SOURCEGATE_PARSE_MEMORY_MB" in report.failed[0][1]
    assert report.added == 1 and store.get_document("good.txt") is not None


def test_a_docx_with_too_much_xml_is_refused_by_name(tmp_path, store, embedder, monkeypatch):
    monkeypatch.setattr(parsers, "MAX_DOCX_XML_BYTES", 1_000_000)  # the child process is forked: it sees this
    root = tmp_path / "lib"
    root.mkdir()
    run = "<w:p><w:r><w:t>grease the bearings</w:t></w:r></w:p>"
    xml = ('<?xml version="1.0"?><w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main">'
           f"<w:body>{run * 40_000}</w:body></w:document>")
    with zipfile.ZipFile(root / "huge.docx", "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("[Content_Types].xml", "<Types/>")
        z.writestr("word/document.xml", xml)
    (root / "good.txt").write_text(GOOD, encoding="utf-8")
    report = _ingest(store, embedder, root)
    assert [Path(p).name for p, _ in report.failed] == ["huge.docx"]
    assert "MB of XML" in report.failed[0][1]
    assert report.added == 1


def _export(path: Path, text: str, pid: str = "PROC-LOTO-01") -> Path:
    import json

    path.write_text(json.dumps([{"id": pid, "title": "Lockout", "text": text}]), encoding="utf-8")
    return path


def test_an_id_claimed_by_two_files_in_one_run_refuses_both_naming_them(tmp_path, store, embedder):
    # In a fresh index, the file read first took the id and the other was refused: an export named
    # to sort first served its text under a genuine id. A contested id is neither file's.
    root = tmp_path / "lib"
    root.mkdir()
    impostor = _export(root / "0-export.json", "Ignore the lockout and start the pump.")
    genuine = _export(root / "b.json", "Lock out the pump at the isolator before any work.")
    for _ in range(2):  # and again on the next run
        report = _ingest(store, embedder, root)
        assert report.added == report.updated == 0
        failed = dict(report.failed)
        assert set(failed) == {str(impostor), str(genuine)}, report.failed
        assert str(genuine) in failed[str(impostor)] and str(impostor) in failed[str(genuine)]
        assert "neither is indexed" in failed[str(genuine)]
        assert store.get_document("PROC-LOTO-01") is None
    # One claimant left: it takes the id; the other, back later, is refused while the first holds it.
    impostor.unlink()
    report = _ingest(store, embedder, root)
    assert report.failed == [] and report.added == 1
    _export(root / "0-export.json", "Ignore the lockout and start the pump.")
    for _ in range(2):
        report = _ingest(store, embedder, root)
        assert [(Path(p).name, r) for p, r in report.failed] == [
            ("0-export.json", f"document id 'PROC-LOTO-01' is already taken by {genuine}: give one of them another "
                              "id (ids are unique in the library)")]
        assert report.updated == 0
    assert "isolator" in store.get_chunks([c for c, _ in store.lexical_search("lockout pump", 5)])[0].text
    # The owner is deleted: its id moves to the file that now holds it.
    genuine.unlink()
    report = _ingest(store, embedder, root)
    assert report.failed == [] and report.updated == 1
    assert store.get_document("PROC-LOTO-01").source_path == str(root / "0-export.json")


def test_a_contested_id_written_before_its_rival_was_read_is_taken_back(tmp_path, store, embedder):
    # The first claimant's batch is written before the second file is read (a small batch): it is
    # deleted again, and the counts say so.
    root = tmp_path / "lib"
    root.mkdir()
    first = _export(root / "a.json", "Lock out the pump at the isolator before any work.")
    (root / "m.txt").write_text(GOOD, encoding="utf-8")
    second = _export(root / "z.json", "Ignore the lockout and start the pump.")
    report = Ingestor(store, embedder, workers=1, batch_chunks=1).ingest([root])
    assert {Path(p).name for p, _ in report.failed} == {"a.json", "z.json"}, report.failed
    assert report.added == 1 and report.chunks == 1 and store.get_document("PROC-LOTO-01") is None
    assert {d.id for d in store.list_documents()} == {"m.txt"}
    assert first.exists() and second.exists()


LOOK_ALIKES = {
    "zero-width": "PROC-LOTO\u200b-01",
    "cyrillic": "PROC-L\u041e\u0422\u041e-01",  # О, Т, О
    "fullwidth": "PROC-LOTO-\uff10\uff11",
    "tag characters": "PROC-LOTO-01\U000e0041",
    "variation selector and filler": "PROC-LOTO\u3164-01\ufe0f",
    # punctuation that reads as the hyphen: minus sign, hyphen, en dash, modifier letter minus
    "minus sign": "PROC\u2212LOTO-01",
    "hyphen": "PROC\u2010LOTO-01",
    "en dash": "PROC-LOTO\u201301",
    "modifier minus": "PROC\u02d7LOTO\u02d701",
}


@pytest.mark.parametrize("name", sorted(LOOK_ALIKES))
def test_an_id_that_reads_like_another_is_that_id(name, tmp_path, store, embedder):
    root = tmp_path / "lib"
    root.mkdir()
    genuine = _export(root / "b.json", "Lock out the pump at the isolator before any work.")
    fake = _export(root / "a.json", "Ignore the lockout and start the pump.", LOOK_ALIKES[name])
    report = _ingest(store, embedder, root)  # one run, a fresh index: contested, both refused
    assert {Path(p).name for p, _ in report.failed} == {"a.json", "b.json"}, report.failed
    assert store.list_documents() == []
    fake.unlink()
    assert _ingest(store, embedder, root).added == 1
    _export(root / "a.json", "Ignore the lockout and start the pump.", LOOK_ALIKES[name])
    report = _ingest(store, embedder, root)  # the genuine id is stored: the look-alike is refused
    assert [Path(p).name for p, _ in report.failed] == ["a.json"], report.failed
    assert "PROC-LOTO-01" in report.failed[0][1] and str(genuine) in report.failed[0][1]
    assert {d.id for d in store.list_documents()} == {"PROC-LOTO-01"}


def test_look_alike_punctuation_reads_as_ascii_in_ids():
    from sourcegate.normalize import id_key

    assert id_key("a\u2215b\u0589c\u2212d\u2010e\u2013f\u02d7g") == id_key("a/b:c-d-e-f-g") == "a/b:c-d-e-f-g"
    assert id_key("kb-1") != id_key("KB-1")  # case still tells ids apart


def test_symlinks_out_of_the_folder_are_not_followed_unless_asked(tmp_path, store, embedder):
    root, outside = tmp_path / "lib", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (outside / "secret.txt").write_text("Secret: the vault code is 4711.\n", encoding="utf-8")
    (outside / "folder").mkdir()
    (outside / "folder" / "more.txt").write_text("More secrets here.\n", encoding="utf-8")
    (root / "good.txt").write_text(GOOD, encoding="utf-8")
    (root / "inside.txt").symlink_to(root / "good.txt")  # a link inside the folder is a file like any
    (root / "link.txt").symlink_to(outside / "secret.txt")
    (root / "linkdir").symlink_to(outside / "folder")
    report = _ingest(store, embedder, root)
    assert report.failed == [] and report.added == 2
    skipped = dict(report.skipped)
    assert set(skipped) == {str(root / "link.txt"), str(root / "linkdir") + os.sep}  # the folder is named too
    assert "--follow-symlinks" in skipped[str(root / "link.txt")] and str(outside / "secret.txt") in skipped[str(root / "link.txt")]
    assert str(outside / "folder") in skipped[str(root / "linkdir") + os.sep]
    assert store.get_document("link.txt") is None and store.get_document("linkdir/more.txt") is None

    report = Ingestor(store, embedder, workers=1, follow_symlinks=True).ingest([root])
    assert report.added == 2 and report.skipped == []
    assert store.get_document("link.txt") is not None and store.get_document("linkdir/more.txt") is not None
    # Prune treats a link like a file: removing the link removes its document.
    (root / "link.txt").unlink()
    report = Ingestor(store, embedder, workers=1, follow_symlinks=True).ingest([root], prune=True)
    assert report.removed == 1 and store.get_document("link.txt") is None
    assert store.get_document("linkdir/more.txt") is not None


@pytest.mark.parametrize("kind", ["sidecar", "manifest"])
def test_metadata_files_linked_out_of_the_folder_are_not_read(kind, tmp_path, store, embedder):
    # a sidecar or manifest that is a symlink out of the folder was followed, and its values shown
    # as the document's metadata
    import json

    root, outside = tmp_path / "lib", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (outside / "meta.json").write_text(json.dumps({"title": "SECRET-TITLE from outside", "status": "current"}),
                                       encoding="utf-8")
    (outside / "manifest.json").write_text(json.dumps({"good.txt": {"title": "SECRET-TITLE from outside"}}),
                                           encoding="utf-8")
    (root / "good.txt").write_text(GOOD, encoding="utf-8")
    if kind == "sidecar":
        (root / "good.txt.meta.json").symlink_to(outside / "meta.json")
    else:
        (root / "sourcegate.meta.json").symlink_to(outside / "manifest.json")
    report = _ingest(store, embedder, root)
    assert [Path(p).name for p, _ in report.failed] == ["good.txt"], report.failed
    assert "outside" in report.failed[0][1] and "--follow-symlinks" in report.failed[0][1]
    assert all("SECRET-TITLE" not in d.title for d in store.list_documents())
    report = Ingestor(store, embedder, workers=1, follow_symlinks=True).ingest([root])  # asked: read
    assert report.failed == [] and store.get_document("good.txt").title == "SECRET-TITLE from outside"


@pytest.mark.parametrize("kind", ["sidecar", "stem sidecar", "manifest"])
def test_a_named_files_metadata_linked_out_of_its_folder_is_not_read(kind, tmp_path, store, embedder):
    # `ingest lib/good.md` read `lib/good.meta.json`, a symlink to a file anywhere, where the
    # folder's ingest refuses it: the file named is read where it leads, its metadata files only
    # inside its folder, as in a folder's ingest
    import json

    root, outside = tmp_path / "lib", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (outside / "meta.json").write_text(json.dumps({"title": "SECRET-TITLE from outside"}), encoding="utf-8")
    (outside / "manifest.json").write_text(json.dumps({"good.md": {"title": "SECRET-TITLE from outside"}}),
                                           encoding="utf-8")
    (root / "good.md").write_text(GOOD, encoding="utf-8")
    link = {"sidecar": "good.md.meta.json", "stem sidecar": "good.meta.json", "manifest": "sourcegate.meta.json"}[kind]
    (root / link).symlink_to(outside / ("manifest.json" if kind == "manifest" else "meta.json"))
    report = Ingestor(store, embedder, workers=1).ingest([root / "good.md"])
    assert [Path(p).name for p, _ in report.failed] == ["good.md"], report.failed
    assert "outside" in report.failed[0][1] and "--follow-symlinks" in report.failed[0][1]
    assert all("SECRET-TITLE" not in d.title for d in store.list_documents())
    report = Ingestor(store, embedder, workers=1, follow_symlinks=True).ingest([root / "good.md"])  # asked: read
    assert report.failed == [] and store.get_document("good.md").title == "SECRET-TITLE from outside"


def test_a_named_files_metadata_inside_its_folder_is_read(tmp_path, store, embedder):
    import json

    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "good.md").write_text(GOOD, encoding="utf-8")
    (tmp_path / "lib" / "meta").mkdir()
    (tmp_path / "lib" / "meta" / "m.json").write_text(json.dumps({"title": "Pump P-200 manual"}), encoding="utf-8")
    (tmp_path / "lib" / "good.md.meta.json").symlink_to(tmp_path / "lib" / "meta" / "m.json")
    report = Ingestor(store, embedder, workers=1).ingest([tmp_path / "lib" / "good.md"])
    assert report.failed == [] and store.get_document("good.md").title == "Pump P-200 manual"


def test_a_file_swapped_for_a_link_during_the_ingest_is_not_read(tmp_path, store, embedder):
    root, outside = tmp_path / "lib", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (outside / "secret.txt").write_text("Secret: the vault code is 4711.\n", encoding="utf-8")
    (outside / "dir").mkdir()
    (outside / "dir" / "b.txt").write_text("Secret: the alarm code is 9090.\n", encoding="utf-8")
    (root / "a.txt").write_text(GOOD, encoding="utf-8")
    (root / "b.txt").write_text("Pump P-300 manual.\n\nGrease the P-300 bearings every 1,000 hours.\n", encoding="utf-8")
    (root / "sub").mkdir()
    (root / "sub" / "b.txt").write_text("Pump P-400 manual.\n\nGrease the P-400 every 500 hours.\n", encoding="utf-8")

    def swap(n, total, path):
        # after the folder was listed and checked, before the files are read
        if n == 1:
            (root / "b.txt").unlink()
            (root / "b.txt").symlink_to(outside / "secret.txt")
            (root / "sub" / "b.txt").unlink()
            (root / "sub").rmdir()
            (root / "sub").symlink_to(outside / "dir")

    report = Ingestor(store, embedder, workers=1).ingest([root], progress=swap)
    failed = dict(report.failed)
    assert set(failed) == {str(root / "b.txt"), str(root / "sub" / "b.txt")}, report.failed
    assert str(outside / "secret.txt") in failed[str(root / "b.txt")] and "outside" in failed[str(root / "b.txt")]
    assert str(outside / "dir" / "b.txt") in failed[str(root / "sub" / "b.txt")]
    assert store.get_document("b.txt") is None and store.get_document("sub/b.txt") is None
    assert store.get_document("a.txt") is not None
    assert not store.lexical_search("vault code 4711", 5) and not store.lexical_search("alarm code 9090", 5)


def test_a_file_named_on_the_command_line_is_read_where_it_leads(tmp_path, store, embedder):
    (tmp_path / "real.txt").write_text(GOOD, encoding="utf-8")
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "named.txt").symlink_to(tmp_path / "real.txt")
    report = Ingestor(store, embedder, workers=1).ingest([tmp_path / "lib" / "named.txt"])
    assert report.failed == [] and report.added == 1


def test_cli_names_skipped_links(tmp_path):
    from click.testing import CliRunner

    from sourcegate.cli import cli

    root = tmp_path / "lib"
    root.mkdir()
    (tmp_path / "secret.txt").write_text("Secret text.\n", encoding="utf-8")
    (root / "good.txt").write_text(GOOD, encoding="utf-8")
    (root / "link.txt").symlink_to(tmp_path / "secret.txt")
    r = CliRunner().invoke(cli, ["--home", str(tmp_path / "home"), "ingest", str(root)])
    assert r.exit_code == 0, r.output
    assert f"skipped: {root / 'link.txt'}: a symlink to {tmp_path / 'secret.txt'}" in r.output
    assert "1 added" in r.output and "1 skipped" in r.output


def test_an_export_cannot_claim_the_id_of_a_file(tmp_path, store, embedder):
    import json

    root = tmp_path / "lib"
    root.mkdir()
    (root / "a.json").write_text(json.dumps([{"id": "z1.md", "title": "Fake", "text": "Grease nothing, ever."}]),
                                 encoding="utf-8")
    (root / "z1.md").write_text("# Real\n\nGrease the P-200 bearings every 2,000 hours.\n", encoding="utf-8")
    for _ in range(2):  # in one run and the next, on a fresh index and an existing one
        report = _ingest(store, embedder, root)
        failed = dict(report.failed)
        assert set(failed) == {str(root / "a.json")}, report.failed
        assert "'z1.md'" in failed[str(root / "a.json")] and "file's document id" in failed[str(root / "a.json")]
        doc = store.get_document("z1.md")
        assert doc is not None and doc.title == "Real" and doc.source_path == str(root / "z1.md")


ESCAPES = ["\x1b]8;;https://evil.example/\x07click\x1b]8;;\x07", "\x1b[2J\x1b[H", "\x1b]0;owned\x07", "\x9b31m",
           "\x1bP+q\x1b\\"]


def test_terminal_escape_sequences_never_reach_the_operators_terminal(tmp_path, monkeypatch):
    # hyperlinks, clear screen, window title, an 8-bit CSI, a device query: in titles, ids and file
    # names, printed by `ingest` and `status --documents` even when piped
    import json

    from click.testing import CliRunner

    from sourcegate.cli import cli

    monkeypatch.setenv("SOURCEGATE_HOME", str(tmp_path / "home"))
    root = tmp_path / "lib"
    root.mkdir()
    bad = "".join(ESCAPES)
    (root / "kb.json").write_text(json.dumps([{"id": f"KB-1{bad}", "title": f"Pump {bad} manual",
                                               "text": "Grease the P-200 bearings every 2,000 hours."}]),
                                  encoding="utf-8")
    (root / f"note{ESCAPES[1]}.txt").write_text("Stop the pump first.\n", encoding="utf-8")
    (root / f"broken{ESCAPES[2]}.json").write_text("{not json", encoding="utf-8")
    (root / f"skip{ESCAPES[3]}.xyz").write_text("x", encoding="utf-8")
    for args in (["ingest", str(root)], ["status", "--documents"], ["status", "--json"], ["-v", "status"]):
        r = CliRunner().invoke(cli, args)
        assert r.exit_code in (0, 1), r.output
        for ch in ("\x1b", "\x9b", "\x07"):
            assert ch not in r.output, (args, r.output)
        if args[0] == "ingest":
            assert "broken" in r.output and "\\u001b" in r.output, r.output  # shown, as an escape
    r = CliRunner().invoke(cli, ["status", "--documents", "--json"])
    listed = json.loads(r.output)["document_list"]
    assert any(d["title"].startswith("Pump") for d in listed), listed
    assert not any("\x1b" in d["title"] or "\x1b" in d["id"] for d in listed)  # stored without them


class _SlowEmbedder:
    """The real embedder, a set time per call: a document of many chunks takes long to embed."""

    def __init__(self, inner, seconds: float):
        self.inner, self.seconds = inner, seconds
        self.id, self.dim = inner.id, inner.dim

    def embed(self, texts):
        time.sleep(self.seconds)
        return self.inner.embed(texts)

    def __getattr__(self, name):
        return getattr(self.inner, name)


@pytest.mark.parametrize("workers", [1, 2])
def test_embedding_one_document_has_a_time_budget(workers, tmp_path, store, embedder):
    # one 3.5 MB file took 3 min 14 s to embed, with no limit: the document now has one budget
    root = tmp_path / "lib"
    root.mkdir()
    paragraph = "Grease the P-200 bearings every 2,000 hours with lithium grease and check the seals. "
    (root / "huge.txt").write_text("\n\n".join(f"Section {i}. " + paragraph * 8 for i in range(400)),
                                   encoding="utf-8")
    (root / "small.txt").write_text(GOOD, encoding="utf-8")
    slow = _SlowEmbedder(embedder, 0.25)
    t0 = time.monotonic()
    report = Ingestor(store, slow, workers=workers, embed_timeout_s=1.0, batch_chunks=16).ingest([root])
    elapsed = time.monotonic() - t0
    failed = dict((Path(p).name, r) for p, r in report.failed)
    assert set(failed) == {"huge.txt"} and "embedding took over 1 s" in failed["huge.txt"], report.failed
    assert "SOURCEGATE_EMBED_TIMEOUT_S" in failed["huge.txt"]
    assert store.get_document("small.txt") is not None and store.get_document("huge.txt") is None
    assert elapsed < 20, elapsed  # not the ~7 s per 64 chunks of the whole file
