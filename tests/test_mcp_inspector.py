"""The MCP endpoint through the official MCP Inspector CLI (opt-in: it downloads from npm)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "inspector_check.sh"


@pytest.mark.skipif(os.environ.get("SOURCEGATE_TEST_INSPECTOR") != "1",
                    reason="set SOURCEGATE_TEST_INSPECTOR=1 to run the MCP Inspector check (downloads it from npm)")
@pytest.mark.skipif(shutil.which("npx") is None, reason="npx (Node.js 20+) is not installed")
@pytest.mark.slow
def test_inspector_calls_the_tool():
    bin_dir = str(Path(sys.executable).parent)  # the venv's `sourcegate` and `python`
    env = {**os.environ, "PATH": bin_dir + os.pathsep + os.environ.get("PATH", ""), "PYTHON": sys.executable}
    out = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, timeout=600, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    assert '"status"' in out.stdout and '"audit_id"' in out.stdout


@pytest.mark.skipif(os.environ.get("SOURCEGATE_TEST_INSPECTOR") != "1",
                    reason="set SOURCEGATE_TEST_INSPECTOR=1 to run the MCP Inspector check (downloads it from npm)")
@pytest.mark.skipif(shutil.which("npx") is None, reason="npx (Node.js 20+) is not installed")
@pytest.mark.slow
def test_inspector_reads_missing_parts():
    """A question with a part the library lacks: the Inspector validates the result against the tool's
    output schema, `missing` included, and shows the part."""
    bin_dir = str(Path(sys.executable).parent)
    env = {**os.environ, "PATH": bin_dir + os.pathsep + os.environ.get("PATH", ""), "PYTHON": sys.executable}
    q = "What are the grease intervals for the P-200 and the P-900 pumps?"
    out = subprocess.run(["bash", str(SCRIPT), q], capture_output=True, text=True, timeout=600, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    assert '"missing"' in out.stdout and "What are the grease intervals for the P-900 pumps?" in out.stdout
    assert '"isError": true' not in out.stdout
