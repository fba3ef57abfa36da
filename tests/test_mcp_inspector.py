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
