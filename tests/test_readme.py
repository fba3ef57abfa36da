"""The README fits its reader: under 15 KB, its test command the one `.ci/run` runs, every page it
links to there, and the commands of "Your own documents" run as written on a small library."""

from __future__ import annotations

import os
import sys
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
AC300 = """---
title: AC-300 compressor maintenance
model: AC-300
source_type: procedure
---
# AC-300 compressor maintenance

Change the AC-300 compressor oil every 5,000 operating hours.
"""


def _blocks_under(text: str, heading: str) -> list[str]:
    section = text.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```\n(.*?)```", section, re.S)


def test_the_readme_is_short_and_links_to_pages_that_exist():
    text = README.read_text(encoding="utf-8")
    assert len(text.encode("utf-8")) < 15_000
    first_screen = text[:text.index("\n## Contents")]
    for must in ("sourcegate demo", "pytest", "## Your own documents", "## Connect Copilot Studio"):
        assert must in first_screen, must
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
        if not target.startswith("http"):
            assert (ROOT / target).exists(), target


def test_the_readme_test_command_is_the_one_ci_runs():
    text = README.read_text(encoding="utf-8")
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    command = next(b.strip() for b in re.findall(r"```\n(.*?)```", text, re.S) if b.strip().endswith("&& pytest"))
    assert command in ci.splitlines()


def test_your_own_documents_runs_as_written(tmp_path):
    """Run from the folder the demo ran in (its index is `.sourcegate` there, the default home), the
    commands put the reader's library in an index of its own: never into the demo's."""
    (tmp_path / "procedures").mkdir()
    (tmp_path / "procedures" / "ac300.md").write_text(AC300, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "SOURCEGATE_HOME"}
    env["HOME"] = str(tmp_path)
    # the `sourcegate` of the environment running the tests, whether or not it was activated
    env["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), env.get("PATH", "")])
    lines = [line.split("  #", 1)[0].strip() for b in _blocks_under(README.read_text(encoding="utf-8"),
                                                                    "Your own documents")
             for line in b.splitlines() if line.strip()]
    exports = [line for line in lines if line.startswith("export ")]
    commands = [line for line in lines if not line.startswith("export ")]
    assert commands[0].startswith("sourcegate ingest") and any("--filter" in line for line in commands)
    for line in commands:
        if line.startswith("sourcegate serve"):
            continue  # a server that runs until stopped: the server's own tests serve it
        script = "\n".join([*exports, line])  # as typed one after the other in one shell
        r = subprocess.run(["bash", "-c", script], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, (line, r.stdout[-2000:], r.stderr[-2000:])
        if line.startswith("sourcegate ask"):
            assert "status: answer_from_evidence" in r.stdout and "5,000 operating hours" in r.stdout, r.stdout
    assert not (tmp_path / ".sourcegate").exists(), "the library went into the demo's index (.sourcegate)"
