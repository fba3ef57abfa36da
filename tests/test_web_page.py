"""The web page: self-contained, and working in a real (headless) browser when one is installed."""

from __future__ import annotations

import re
import shutil
import subprocess
from urllib.parse import quote

import pytest
from starlette.testclient import TestClient
from test_server_fixtures import make_gate, make_settings, running_server

from sourcegate.server.app import create_app

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
Q = "How often should I grease the bearings on pump P-200?"


def test_page_is_self_contained(tmp_path):
    settings = make_settings(tmp_path / "audit.jsonl", mcp_api_key="k")
    gate = make_gate(settings)
    with TestClient(create_app(settings, gate)) as client:
        r = client.get("/")  # open: the page itself holds no data, its API calls carry the key
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
        html = r.text
    gate.close()
    assert not re.search(r"<script[^>]+src=", html, re.I), "no external scripts"
    assert not re.search(r"<link[^>]+href=", html, re.I), "no external stylesheets"
    assert "@import" not in html and "cdn" not in html.lower()
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", html, re.I)
    for needed in ('fetch("v1/ask"', "x-api-key", "v1/audit/", "is_superseded", "citations"):
        assert needed in html


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium) - real-browser test skipped")
def test_page_in_headless_chromium(tmp_path):
    settings = make_settings(tmp_path / "audit.jsonl")
    gate = make_gate(settings)
    app = create_app(settings, gate)
    with running_server(app) as base:
        # ?q= asks on load; --virtual-time-budget lets the page's fetch finish before the dump.
        cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
               "--disable-component-update", "--no-first-run", "--disable-dev-shm-usage",
               f"--user-data-dir={tmp_path / 'chromium-profile'}", "--virtual-time-budget=20000",
               "--dump-dom", f"{base}/?q={quote(Q)}"]
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=90)
    gate.close()
    dom = out.stdout
    assert 'id="status" class="status answer_from_evidence"' in dom, (dom[-2000:], out.stderr[-2000:])
    assert "PROC-P200-BRG-R2" in dom  # a candidate row / citation
    assert 'href="https://docs.example-water.org/' in dom  # citation links
    assert re.search(r'id="audit-link" href="v1/audit/[0-9a-f]{32}"', dom)
    assert settings.audit_path.read_text(encoding="utf-8").count('"interface":"web"') == 1


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium) - real-browser test skipped")
def test_page_names_the_parts_not_found(tmp_path):
    settings = make_settings(tmp_path / "audit.jsonl")
    gate = make_gate(settings)
    app = create_app(settings, gate)
    q = "What are the grease intervals for the P-200 and the P-900 pumps?"
    with running_server(app) as base:
        cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
               "--disable-component-update", "--no-first-run", "--disable-dev-shm-usage",
               f"--user-data-dir={tmp_path / 'chromium-profile'}", "--virtual-time-budget=20000",
               "--dump-dom", f"{base}/?q={quote(q)}"]
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=90)
    gate.close()
    dom = out.stdout
    assert 'id="status" class="status answer_from_evidence"' in dom, (dom[-2000:], out.stderr[-2000:])
    assert re.search(r'<p id="missing" class="missing">Not found in the library: '
                     r'What are the grease intervals for the P-900 pumps\?</p>', dom), dom[-3000:]


def test_page_shows_missing_parts(tmp_path):
    """Without a browser: the page renders `missing` under the status, hidden when empty."""
    settings = make_settings(tmp_path / "audit.jsonl")
    gate = make_gate(settings)
    with TestClient(create_app(settings, gate)) as client:
        html = client.get("/").text
    gate.close()
    assert '<p id="missing" class="missing" hidden></p>' in html
    assert '"Not found in the library: " + missing.join("; ")' in html
