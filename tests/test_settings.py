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


def test_dotenv_file_is_read(monkeypatch, tmp_path):
    (tmp_path / ".env").write_text("GATE_RELEVANT_MIN=0.5\nMCP_API_KEY=k\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    s = Settings()
    assert s.gate_relevant_min == 0.5 and s.mcp_api_key == "k"


def test_keywords_win_over_the_environment(monkeypatch):
    monkeypatch.setenv("SOURCEGATE_JUDGE", "typesafe")
    monkeypatch.setenv("GATE_EVIDENCE_MIN", "0.9")
    assert Settings().judge == "typesafe"
    s = Settings(judge="local", gate_evidence_min=0.6)
    assert s.judge == "local" and s.gate_evidence_min == 0.6
