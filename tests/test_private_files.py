"""The library and its audit are private to their user: a fresh home is 0700, the index, its -wal
and -shm, the audit log and its lookup index (which lists every audit id) are 0600, whatever the
umask; another local user cannot read them; and `serve` on a non-loopback address without
MCP_API_KEY does not serve /v1/audit."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import pytest
from test_server_fixtures import KeywordJudge, demo_home, free_socket

from sourcegate.cli import run_ingest
from sourcegate.service import SourceGate
from sourcegate.settings import Settings

CORPUS = Path(__file__).resolve().parents[1] / "src" / "sourcegate" / "demo" / "corpus"
Q = "How often should I grease the bearings on pump P-200?"


def _mode(p: Path) -> int:
    return stat.S_IMODE(p.stat().st_mode)


@pytest.fixture()
def open_umask():
    old = os.umask(0o022)  # the usual default: files 0644, folders 0755 unless asked otherwise
    yield
    os.umask(old)


@pytest.fixture()
def fresh_home(tmp_path, open_umask):
    # a folder other users can enter, as /home or /srv often are (pytest's own folder is 0700)
    shared = Path(tempfile.mkdtemp(prefix="sg-shared-"))
    shared.chmod(0o755)
    home = shared / "home" / ".sourcegate"
    settings = Settings(_env_file=None, home=home)
    report = run_ingest(settings, [CORPUS / "procedures"] if (CORPUS / "procedures").exists() else [CORPUS],
                        prune=False, quiet=True)
    assert not report.failed, report.failed
    gate = SourceGate(settings, judge=KeywordJudge())
    r = gate.ask(Q)
    assert gate.audit.find(r.audit_id)["audit_id"] == r.audit_id  # builds audit.jsonl.index
    yield home, gate
    gate.close()
    shutil.rmtree(shared, ignore_errors=True)


def test_every_file_is_0600_and_the_home_0700(fresh_home):
    home, _ = fresh_home
    files = sorted(p for p in home.iterdir())
    names = {p.name for p in files}
    assert {"index.db", "audit.jsonl", "audit.jsonl.index"} <= names, names
    assert any(n.endswith(("-wal", "-shm")) for n in names), names  # the WAL files are checked too
    assert _mode(home) == 0o700 and _mode(home.parent) == 0o700
    for p in files:
        assert _mode(p) == 0o600, (p.name, oct(_mode(p)))


@pytest.mark.skipif(os.geteuid() != 0, reason="switching to another user needs root")
def test_another_local_user_cannot_read_them(fresh_home):
    home, _ = fresh_home
    import pwd

    try:
        nobody = pwd.getpwnam("nobody")
    except KeyError:
        pytest.skip("no 'nobody' user on this machine")
    cat = shutil.which("cat")
    if cat is None:
        pytest.skip("no cat to read files with")

    def read_as_nobody(path: Path) -> subprocess.CompletedProcess:
        return subprocess.run([cat, str(path)], user=nobody.pw_uid, group=nobody.pw_gid, extra_groups=[],
                              cwd="/", capture_output=True, timeout=60)

    # the user can run it and read what is open to all
    assert read_as_nobody(Path("/etc/hostname") if Path("/etc/hostname").exists() else Path("/etc/passwd")).returncode == 0
    for name in ("index.db", "audit.jsonl", "audit.jsonl.index"):
        r = read_as_nobody(home / name)
        assert r.returncode != 0 and b"Permission denied" in r.stderr, (name, r.returncode, r.stderr[-300:])
    # and the files themselves refuse them, were the folders open
    home.chmod(0o755)
    home.parent.chmod(0o755)
    for name in ("index.db", "audit.jsonl", "audit.jsonl.index"):
        r = read_as_nobody(home / name)
        assert r.returncode != 0 and b"Permission denied" in r.stderr, (name, r.returncode, r.stderr[-300:])


def test_serve_on_a_public_address_without_a_key_does_not_serve_the_audit(tmp_path):
    sock = free_socket()
    port = sock.getsockname()[1]
    sock.close()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SOURCEGATE_", "AUDIT_", "MCP_"))}
    env.update(SOURCEGATE_HOME=str(demo_home()), AUDIT_LOG_PATH=str(tmp_path / "audit.jsonl"),
               SOURCEGATE_READER="false")
    log = (tmp_path / "server.log").open("w")
    proc = subprocess.Popen([sys.executable, "-m", "sourcegate.cli", "serve", "--host", "0.0.0.0", "--port", str(port)],
                            env=env, stdout=subprocess.DEVNULL, stderr=log)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            assert proc.poll() is None, (tmp_path / "server.log").read_text()[-2000:]
            assert time.monotonic() < deadline, "the server never became ready"
            try:
                if httpx.get(base + "/readyz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        r = httpx.get(base + "/v1/audit/" + "0" * 32, timeout=10)
        assert r.status_code == 403 and "MCP_API_KEY" in r.json()["error"]
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()
    assert "/v1/audit is turned off" in (tmp_path / "server.log").read_text()
