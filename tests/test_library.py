"""No silent empty library: every command that reads the index refuses one that is missing, empty,
unreachable or named by a URL of the wrong form, in one line naming where it looked and what fills
it; the server says so on /readyz; store URLs read as SQLAlchemy's."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner
from starlette.testclient import TestClient

from sourcegate.cli import cli
from sourcegate.store import StoreURLError, describe_location, sqlite_path, store_kind

Q = "How often should I grease the bearings on pump P-200?"
# Nothing listens on port 1 of the loopback address: the connection is refused at once.
DOWN_POSTGRES = "postgresql://sourcegate:s3cret-pw@127.0.0.1:1/library"


def run(*args: str):
    return CliRunner().invoke(cli, list(args))


def one_line(r) -> str:
    """The error line of a refused command, checked to be a single line and no traceback."""
    assert r.exit_code != 0, r.output
    assert "Traceback" not in r.output and r.exception is None or isinstance(r.exception, SystemExit), r.output
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert len(lines) == 1, r.output
    return lines[0]


def test_store_urls_follow_sqlalchemy(tmp_path):
    assert sqlite_path("sqlite:///rel/index.db") == Path("rel/index.db")
    assert sqlite_path("sqlite:////abs/index.db") == Path("/abs/index.db")
    assert describe_location("sqlite:///rel/index.db") == str(tmp_path / "rel" / "index.db")  # the test's cwd
    assert store_kind("/srv/index.db") == store_kind("index.db") == store_kind("sqlite:///x.db") == "sqlite"
    assert store_kind("postgresql://u@h/db") == "postgresql" and store_kind("azure://s/i") == "azure"
    assert describe_location(DOWN_POSTGRES) == "postgresql://sourcegate:***@127.0.0.1:1/library"
    with pytest.raises(StoreURLError, match="three slashes"):
        store_kind("sqlite://index.db")
    with pytest.raises(StoreURLError) as e:
        store_kind("mysql://x@y/z")
    assert all(form in str(e.value) for form in ("sqlite:///", "sqlite:////", "postgresql://", "azure://"))


@pytest.mark.parametrize("command", [["ask", Q], ["status"], ["eval", "QUESTIONS"], ["serve"], ["mcp"],
                                     ["tune", "QUESTIONS"]])
def test_every_reading_command_refuses_a_missing_index(command, tmp_path, sourcegate_home):
    questions = tmp_path / "q.jsonl"
    questions.write_text(json.dumps({"query": Q, "expected_status": "answer_from_evidence"}) + "\n", encoding="utf-8")
    args = [str(questions) if a == "QUESTIONS" else a for a in command]
    line = one_line(run(*args))
    assert f"no index at {sourcegate_home / 'index.db'}" in line
    assert f"sourcegate --home {sourcegate_home} ingest FOLDER" in line
    assert not sourcegate_home.exists()  # asking created nothing


def test_an_empty_index_is_refused_and_a_filled_one_answers(tmp_path, sourcegate_home):
    empty = tmp_path / "empty"
    empty.mkdir()
    r = run("ingest", str(empty))
    assert r.exit_code == 0 and "0 added" in r.output
    line = one_line(run("ask", Q))
    assert line == (f"Error: the index at {sourcegate_home / 'index.db'} holds no documents: run "
                    f"`sourcegate --home {sourcegate_home} ingest FOLDER` to fill it "
                    f"(or `sourcegate --home {sourcegate_home} demo` for the demo library)")
    assert "holds no documents" in one_line(run("status"))
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "p.md").write_text("# Pump P-200\n\nGrease the P-200 bearings every 2,000 operating hours.\n", encoding="utf-8")
    assert run("ingest", str(lib)).exit_code == 0
    r = run("status", "--json")
    assert r.exit_code == 0 and json.loads(r.output)["documents"] == 1


def test_sqlite_urls_on_the_command_line_and_in_the_environment(tmp_path, monkeypatch):
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "p.md").write_text("# Pump P-200\n\nGrease the P-200 bearings every 2,000 operating hours.\n", encoding="utf-8")
    absolute = tmp_path / "abs" / "index.db"
    assert run("ingest", str(lib), "--store", f"sqlite:///{absolute}").exit_code == 0  # four slashes in all
    assert absolute.is_file()
    # three slashes: relative to the working directory, and the refusal says so
    monkeypatch.setenv("SOURCEGATE_STORE", "sqlite:///tmp/x/index.db")
    line = one_line(run("status"))
    assert f"no index at {tmp_path / 'tmp' / 'x' / 'index.db'}" in line and "sqlite:////" in line
    monkeypatch.setenv("SOURCEGATE_STORE", f"sqlite:///{absolute}")
    r = run("status", "--json")
    assert r.exit_code == 0 and json.loads(r.output)["index"] == str(absolute)


def test_an_unknown_scheme_is_an_error_on_every_command(tmp_path, monkeypatch):
    monkeypatch.setenv("SOURCEGATE_STORE", "mysql://x@y/z")
    (tmp_path / "doc.md").write_text("# A\n\nSome text.\n", encoding="utf-8")
    for args in (["ask", Q], ["status"], ["ingest", str(tmp_path / "doc.md")], ["demo"], ["mcp"]):
        line = one_line(run(*args))
        assert "unsupported store URL 'mysql://x@y/z'" in line and "sqlite:////absolute/index.db" in line, args
    assert not (tmp_path / "mysql:").exists()


def test_an_unreachable_postgresql_is_one_line_on_every_command(tmp_path):
    pytest.importorskip("psycopg")
    questions = tmp_path / "q.jsonl"
    questions.write_text(json.dumps({"query": Q, "expected_status": "answer_from_evidence"}) + "\n", encoding="utf-8")
    # (`serve` waits for it instead: tests/test_store_outage.py)
    for args in (["ask", Q], ["status"], ["eval", str(questions)], ["mcp"], ["ingest", str(questions)],
                 ["tune", str(questions)]):
        line = one_line(run(*args, "--store", DOWN_POSTGRES))
        assert "cannot connect to PostgreSQL at postgresql://sourcegate:***@127.0.0.1:1/library" in line, args
        assert "s3cret-pw" not in line


def test_a_password_in_the_query_is_never_printed(tmp_path):
    from sourcegate.store import redact_url

    url = "postgresql://sourcegate@127.0.0.1:1/library?sslmode=disable&password=s3cret-pw&connect_timeout=2"
    assert redact_url(url) == ("postgresql://sourcegate@127.0.0.1:1/library?sslmode=disable&password=***"
                               "&connect_timeout=2")
    assert redact_url("postgresql://u:pw@h/db?PassWord=x%20y") == "postgresql://u:***@h/db?PassWord=***"
    pytest.importorskip("psycopg")
    for args in (["status"], ["ask", Q], ["ingest", str(tmp_path)]):
        r = run(*args, "--store", url)
        assert r.exit_code != 0 and "s3cret-pw" not in r.output, args
        assert "password=***" in r.output, r.output


# Passwords as libpq reads them: everything up to the first "@" before a "/" is the user part, so
# "#", "?" and "%" belong to the password (an RFC 3986 parser cuts the user part there and shows the
# rest); a "/" makes libpq read the password as a port.
ODD_PASSWORDS = {"hash": "se#cr3t", "question": "se?cr3t", "bad-escape": "se%zzcr3t", "slash": "se/cr3t"}


@pytest.mark.parametrize("name", sorted(ODD_PASSWORDS))
def test_a_password_libpq_reads_differently_is_never_printed(name, tmp_path):
    from sourcegate.store import redact_url

    secret = ODD_PASSWORDS[name]
    url = f"postgresql://sourcegate:{secret}@127.0.0.1:1/library"
    assert redact_url(url) == "postgresql://sourcegate:***@127.0.0.1:1/library"
    assert "cr3t" not in redact_url(f"postgresql://sourcegate@127.0.0.1:1/library?sslmode=disable&password={secret}")
    pytest.importorskip("psycopg")
    malformed = name in ("bad-escape", "slash")
    for args in (["status"], ["ask", Q], ["ingest", str(tmp_path)]) + ((["serve"],) if malformed else ()):
        r = run(*args, "--store", url)
        line = one_line(r)
        assert "cr3t" not in r.output and "sourcegate:***@127.0.0.1:1" in line, (args, r.output)
        if malformed:  # what waiting cannot fix: one line, exit 1, even from serve
            assert r.exit_code == 1 and "postgresql://user:password@host:5432/dbname" in line, (args, line)


def test_a_malformed_postgresql_url_is_one_line_naming_the_fault():
    pytest.importorskip("psycopg")
    for url, fault in (("postgresql://u:p@h/db?sslmod=require", "query parameter libpq does not know"),
                       ("postgresql://[::1/db", "closing ']'"), ("postgresql://u:p@h:port/db", "port that is not")):
        with pytest.raises(StoreURLError, match=fault):
            store_kind(url)


def test_global_options_before_or_after_the_command(tmp_path, monkeypatch):
    monkeypatch.delenv("SOURCEGATE_HOME")
    home = tmp_path / "elsewhere"
    for args in (["--home", str(home), "status"], ["status", "--home", str(home)]):
        assert f"no index at {home / 'index.db'}" in one_line(run(*args))
    # a later occurrence wins, as with any repeated option
    assert f"no index at {home / 'index.db'}" in one_line(run("--home", str(tmp_path / "x"), "status", "--home", str(home)))


def test_readyz_reports_an_empty_library(tmp_path):
    from sourcegate.server.app import create_app
    from sourcegate.service import SourceGate
    from sourcegate.settings import Settings

    settings = Settings(_env_file=None, home=tmp_path / "served", audit_log_path=tmp_path / "audit.jsonl")
    gate = SourceGate(settings)
    with TestClient(create_app(settings, gate), base_url="http://127.0.0.1") as client:
        r = client.get("/readyz")
        assert r.status_code == 503
        body = r.json()
        assert body["state"] == "library_empty" and "sourcegate ingest FOLDER" in body["detail"]
        r = client.post("/v1/ask", json={"query": Q})
        assert r.status_code == 503 and "holds no documents" in r.json()["error"]
    gate.close()


def test_the_demo_builds_its_own_library_on_a_fresh_home(sourcegate_home):
    """The demo fills an index that does not exist yet rather than refusing it."""
    from sourcegate.cli import ensure_demo_corpus
    from sourcegate.settings import Settings

    settings = Settings(_env_file=None, home=sourcegate_home)
    ensure_demo_corpus(settings)
    r = run("status", "--json")
    assert r.exit_code == 0 and json.loads(r.output)["documents"] > 10
    assert os.path.isfile(sourcegate_home / "index.db")


# libpq's keyword/value form: never a SQLite file, its password never printed nor made a file name
KEYWORD_FORMS = ("host=127.0.0.1 port=1 user=sg password=s3cret-pw dbname=library",
                 "dbname=library password = 's3cret pw' host=127.0.0.1",
                 "password=s3cret-pw")


@pytest.mark.parametrize("conninfo", KEYWORD_FORMS)
def test_a_keyword_form_connection_string_is_not_a_sqlite_path(conninfo, tmp_path, monkeypatch):
    from sourcegate.store import redact_url

    monkeypatch.chdir(tmp_path)
    assert "s3cret" not in redact_url(conninfo) and "***" in redact_url(conninfo)
    with pytest.raises(StoreURLError) as e:
        store_kind(conninfo)
    assert "s3cret" not in str(e.value) and "postgresql://user:password@host:5432/dbname" in str(e.value)
    for args in (["status"], ["ask", Q], ["ingest", str(tmp_path)]):
        r = run(*args, "--store", conninfo)
        line = one_line(r)
        assert "s3cret" not in r.output and "keyword" in line, (args, r.output)
    assert not [p for p in tmp_path.rglob("*") if "s3cret" in p.name or "password" in p.name]


# A raw password holding both '@' and '/': whatever libpq makes of it, no part of it is shown.
@pytest.mark.parametrize("secret", ["p@ss/w0rd-tail", "a/b@c-tail", "x@y@z/q-tail", "@/-tail"])
def test_a_password_with_at_and_slash_is_hidden_whole(secret):
    from sourcegate.store import redact_url

    for url in (f"postgresql://sourcegate:{secret}@db.example:5432/library",
                f"postgresql://sourcegate:{secret}@db.example/library?sslmode=require"):
        shown = redact_url(url)
        assert "tail" not in shown and "sourcegate:***@" in shown, shown


def test_settings_repr_hides_the_store_password():
    from sourcegate.settings import Settings

    for store in (DOWN_POSTGRES, "postgresql://sg:p@ss/w0rd-s3cret@db/lib", KEYWORD_FORMS[0], KEYWORD_FORMS[1]):
        settings = Settings(_env_file=None, store_url=store)
        assert "s3cret" not in repr(settings) and "s3cret" not in str(settings), store
