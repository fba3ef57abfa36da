from pathlib import Path

from sourcegate.settings import Settings


def test_home_defaults_to_dot_sourcegate_whatever_HOME_says(monkeypatch):
    monkeypatch.delenv("SOURCEGATE_HOME", raising=False)
    monkeypatch.setenv("HOME", "/somewhere/else")
    s = Settings()
    assert s.home == Path(".sourcegate")
    assert s.index_path == Path(".sourcegate/index.db")


def test_home_from_environment_and_keyword(monkeypatch, tmp_path):
    monkeypatch.setenv("SOURCEGATE_HOME", str(tmp_path / "a"))
    assert Settings().home == tmp_path / "a"
    assert Settings(home=tmp_path / "b").home == tmp_path / "b"


def test_gate_thresholds_from_environment(monkeypatch):
    monkeypatch.setenv("GATE_EVIDENCE_MIN", "0.6")
    monkeypatch.setenv("GATE_CANDIDATES", "8")
    s = Settings()
    assert s.thresholds().evidence_min == 0.6 and s.gate_candidates == 8
    assert s.thresholds().injection_max == 0.7


def test_a_dotenv_file_is_read_when_given(tmp_path):
    (tmp_path / "settings.env").write_text("GATE_RELEVANT_MIN=0.5\nMCP_API_KEY=k\n", encoding="utf-8")
    s = Settings(_env_file=tmp_path / "settings.env")
    assert s.gate_relevant_min == 0.5 and s.mcp_api_key == "k"


def test_the_working_directorys_dotenv_is_not_read_but_the_homes_is(monkeypatch, tmp_path):
    """Running a command inside a folder that holds a .env (a library being ingested) does not let
    that file redirect the index or turn auditing off; HOME/.env and --env-file are read."""
    from click.testing import CliRunner

    from sourcegate.cli import cli

    library = tmp_path / "library"
    library.mkdir()
    elsewhere = tmp_path / "elsewhere"
    (library / ".env").write_text(f"SOURCEGATE_STORE=sqlite:///{elsewhere}/index.db\nAUDIT_ENABLED=false\n",
                                  encoding="utf-8")
    monkeypatch.chdir(library)
    assert Settings().audit_enabled is True  # (the library's .env is not read)
    home = tmp_path / "home"
    r = CliRunner().invoke(cli, ["--home", str(home), "-vv", "status"])
    assert f"{library / '.env'} is not read" in r.output and "--env-file" in r.output
    assert "settings from the environment" in r.output
    assert not elsewhere.exists() and str(elsewhere) not in r.output.split("is not read")[-1]
    # the home's own .env is read, and said
    home.mkdir()
    (home / ".env").write_text("GATE_EVIDENCE_MIN=0.61\n", encoding="utf-8")
    r = CliRunner().invoke(cli, ["--home", str(home), "-v", "tune", "--help"])
    assert r.exit_code == 0
    r = CliRunner().invoke(cli, ["--home", str(home), "-v", "status"])
    assert f"settings from the environment and {home / '.env'}" in r.output
    # --env-file reads the file named, the working directory's included
    r = CliRunner().invoke(cli, ["--env-file", str(library / ".env"), "-v", "status"])
    assert f"settings from the environment and {library / '.env'}" in r.output
    assert str(elsewhere / "index.db") in r.output  # it was read: the store it names is where status looked
    r = CliRunner().invoke(cli, ["--env-file", str(tmp_path / "nope.env"), "status"])
    assert r.exit_code == 1 and "no settings file" in r.output


def test_the_default_homes_dotenv_is_not_read_either(monkeypatch, tmp_path):
    """The default home, ./.sourcegate, is in the working directory: a folder that plants
    .sourcegate/.env there could move the index or send questions to a "cloud" writer of its own.
    It is treated as ./.env is (not read, and said); a home chosen with --home or SOURCEGATE_HOME
    is read, and which file was read is said at warning level (seen without -v)."""
    from click.testing import CliRunner

    from sourcegate.cli import cli

    monkeypatch.delenv("SOURCEGATE_HOME", raising=False)
    library = tmp_path / "library"
    (library / ".sourcegate").mkdir(parents=True)
    elsewhere = tmp_path / "elsewhere"
    planted = library / ".sourcegate" / ".env"
    planted.write_text(f"SOURCEGATE_STORE=sqlite:///{elsewhere}/index.db\nSOURCEGATE_WRITER=cloud\n"
                       "AZURE_OPENAI_ENDPOINT=http://127.0.0.1:9/\n", encoding="utf-8")
    monkeypatch.chdir(library)
    r = CliRunner().invoke(cli, ["status"])
    assert str(elsewhere) not in r.output.split("is not read")[-1], r.output
    assert f"{planted} is not read" in r.output and "--env-file" in r.output, r.output
    # chosen, it is read, and said without -v
    r = CliRunner().invoke(cli, ["--home", ".sourcegate", "status"])
    assert f"settings from the environment and {Path('.sourcegate') / '.env'}" in r.output, r.output
    assert str(elsewhere / "index.db") in r.output
    monkeypatch.setenv("SOURCEGATE_HOME", str(library / ".sourcegate"))
    r = CliRunner().invoke(cli, ["status"])
    assert f"settings from the environment and {planted}" in r.output and "is not read" not in r.output, r.output


def test_keywords_win_over_the_environment(monkeypatch):
    monkeypatch.setenv("SOURCEGATE_JUDGE", "typesafe")
    monkeypatch.setenv("GATE_EVIDENCE_MIN", "0.9")
    assert Settings().judge == "typesafe"
    s = Settings(judge="local", gate_evidence_min=0.6)
    assert s.judge == "local" and s.gate_evidence_min == 0.6
