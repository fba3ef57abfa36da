"""The container image, built from this repository and run with podman: the demo ingested through
the container onto a volume, questions answered over MCP (the official client) and REST, the
probes, a non-root user, a graceful stop, and the index and audit log on the volume surviving a
restart.

No image registry is reachable where the tests run, so the base is made here: `debootstrap
--variant=minbase bookworm` with python3 and python3-venv, imported with `podman import`, and
handed to the Containerfile as its BASE build argument. The Python packages come from a wheelhouse
downloaded on this machine (for the base's Python, 3.11.2) and the image is built OFFLINE=1 from
it. The base and the wheelhouse are cached under the temporary folder, keyed by the date (and the
dependencies), and podman reuses the dependency layer between runs, so a run on a machine that
has them takes about a minute; the first one of the day a few.

Skipped, not failed, where podman cannot run containers (not installed, no privileges), or where
the Debian mirror or the package index cannot be reached to make the base."""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "src" / "sourcegate" / "demo" / "corpus"
CACHE = Path(tempfile.gettempdir()) / "sourcegate-podman-cache"
Q = "How often should I grease the bearings on pump P-200?"
KEY = "container-test-key"
TODAY = datetime.date.today().strftime("%Y%m%d")
BASE_TAG = f"localhost/sourcegate-test-base:bookworm-{TODAY}"
IMAGE_TAG = "localhost/sourcegate-test:latest"
# The Python of Debian bookworm's python3 package: the wheels must accept it.
BASE_PYTHON = "3.11.2"
PLATFORMS = [f"manylinux_2_{v}_x86_64" for v in (36, 35, 34, 31, 28, 27, 17)] + ["manylinux2014_x86_64", "linux_x86_64"]

pytestmark = pytest.mark.slow

DEPLOY_DOC = ROOT / "docs" / "deploy.md"
DOC_BEGIN = "<!-- begin: the container test's commands (tests/test_container.py COMMANDS) -->"
DOC_END = "<!-- end: the container test's commands -->"

# Every command the test runs, as a function of its values; docs/deploy.md shows the same list with
# the values as shell variables (`rendered_commands()`), and a test checks that they agree.
COMMANDS: dict[str, Callable[[dict[str, str]], list[str]]] = {
    "debootstrap": lambda v: ["debootstrap", "--variant=minbase", "--include=python3,python3-venv", "bookworm",
                              v["ROOTFS"], "http://deb.debian.org/debian"],
    "tar": lambda v: ["tar", "-C", v["ROOTFS"], "-cf", v["TAR"], "."],
    "import": lambda v: ["podman", "import", v["TAR"], v["BASE"]],
    "wheels": lambda v: ["pip", "download", "-q", "--dest", v["WHEELS"], "--only-binary=:all:", "--python-version",
                         BASE_PYTHON, "--implementation", "cp", "--abi", "cp311",
                         *[a for p in PLATFORMS for a in ("--platform", p)], ".[postgres]", "setuptools>=69",
                         "wheel"],
    "build": lambda v: ["podman", "build", "--isolation=chroot", "--format", "docker", "--build-arg",
                        f"BASE={v['BASE']}", "--build-arg", "OFFLINE=1", "-t", v["IMAGE"], "-f", "Containerfile",
                        v["CONTEXT"]],
    "volume": lambda v: ["podman", "volume", "create", v["VOLUME"]],
    "ingest": lambda v: ["podman", "run", "--rm", "--network", "none", "-v", f"{v['VOLUME']}:/data",
                         "-v", f"{v['CORPUS']}:/corpus:ro", v["IMAGE"], "ingest", "/corpus"],
    "serve": lambda v: ["podman", "run", "-d", "--name", v["NAME"], "-v", f"{v['VOLUME']}:/data",
                        "-p", f"127.0.0.1:{v['PORT']}:8000", "-e", "MCP_API_KEY", "-e", f"ALLOWED_HOSTS={v['HOST']}",
                        "-e", "SERVE_SHUTDOWN_TIMEOUT_S=20", v["IMAGE"]],
    "healthcheck": lambda v: ["podman", "healthcheck", "run", v["NAME"]],
    "user": lambda v: ["podman", "exec", v["NAME"], "id", "-u"],
    "stop": lambda v: ["podman", "stop", "-t", "40", v["NAME"]],
    "start": lambda v: ["podman", "start", v["NAME"]],
    "verify": lambda v: ["podman", "run", "--rm", "--network", "none", "-v", f"{v['VOLUME']}:/data",
                         v["IMAGE"], "audit", "verify", "--json"],
}
# What docs/deploy.md names each value.
PLACEHOLDERS = {k: f"${k}" for k in ("ROOTFS", "TAR", "BASE", "WHEELS", "IMAGE", "CONTEXT", "VOLUME", "NAME", "PORT",
                                     "CORPUS", "HOST")}


def _shell_word(word: str) -> str:
    return word if re.fullmatch(r"[\w@%+=:,./${}\[\]*-]+", word) else shlex.quote(word)


def rendered_commands() -> list[str]:
    """The commands as docs/deploy.md shows them, one a line."""
    return [" ".join(_shell_word(w) for w in make(PLACEHOLDERS)) for make in COMMANDS.values()]


def documented_commands(text: str) -> list[str]:
    """The commands of docs/deploy.md's block between DOC_BEGIN and DOC_END (continuation lines
    joined, comments and blank lines left out)."""
    block = text.split(DOC_BEGIN, 1)[1].split(DOC_END, 1)[0]
    block = block.split("```bash", 1)[1].rsplit("```", 1)[0]
    out, cur = [], ""
    for line in block.splitlines():
        line = line.split(" # ", 1)[0].rstrip() if not line.lstrip().startswith("#") else ""
        if line.endswith("\\"):
            cur += line[:-1].strip() + " "
            continue
        cur += line.strip()
        if cur:
            out.append(cur)
        cur = ""
    return out


def run_command(name: str, values: dict[str, str], check: bool = True, timeout: float = 600,
                **kw) -> subprocess.CompletedProcess:
    """One of COMMANDS, with podman told to use runc (the machines the tests run on need it)."""
    args = COMMANDS[name](values)
    if args[0] == "podman":
        args = ["podman", "--runtime", "runc", *args[1:]]
    if args[0] == "pip":
        args = [sys.executable, "-m", "pip", *args[1:]]
    env = _env()
    env.setdefault("MCP_API_KEY", KEY)
    r = subprocess.run(args, capture_output=True, text=True, env=env, timeout=timeout, **kw)
    if check and r.returncode != 0:
        raise AssertionError(f"{name}: {' '.join(args[:4])} ... exited {r.returncode}:\n{r.stdout[-3000:]}\n"
                             f"{r.stderr[-3000:]}")
    return r


def _env() -> dict[str, str]:
    CACHE.mkdir(parents=True, exist_ok=True)
    conf = CACHE / "containers.conf"
    # The machines the tests run on refuse the default ulimits podman sets for a container.
    conf.write_text("[containers]\ndefault_ulimits = []\n", encoding="utf-8")
    return {**os.environ, "CONTAINERS_CONF": str(conf)}


def podman(*args: str, check: bool = True, timeout: float = 600, **kw) -> subprocess.CompletedProcess:
    r = subprocess.run(["podman", "--runtime", "runc", *args], capture_output=True, text=True, env=_env(),
                       timeout=timeout, **kw)
    if check and r.returncode != 0:
        raise AssertionError(f"podman {' '.join(args[:3])} ... exited {r.returncode}:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
    return r


def _skip_unless_podman_runs() -> None:
    if sys.platform != "linux" or shutil.which("podman") is None or shutil.which("runc") is None:
        pytest.skip("podman and runc are not installed (Debian: apt-get install podman runc debootstrap)")
    r = subprocess.run(["podman", "--runtime", "runc", "info"], capture_output=True, text=True, env=_env(), timeout=120)
    if r.returncode != 0:
        pytest.skip(f"podman cannot run here: {(r.stderr or r.stdout).strip().splitlines()[-1:]}")


def _base_image() -> str:
    """The bookworm base with Python, made with debootstrap once a day (the root file system is
    cached as a tar, the image kept in podman's store)."""
    if podman("image", "exists", BASE_TAG, check=False).returncode == 0:
        return BASE_TAG
    tar = CACHE / f"bookworm-minbase-python-{TODAY}.tar"
    if not tar.exists():
        if shutil.which("debootstrap") is None:
            pytest.skip("debootstrap is not installed (apt-get install debootstrap): no base image can be made")
        if os.geteuid() != 0:
            pytest.skip("debootstrap needs root to make the base image")
        with tempfile.TemporaryDirectory(prefix="sg-rootfs-", dir=CACHE) as root:
            r = run_command("debootstrap", {"ROOTFS": root}, check=False, timeout=900)
            if r.returncode != 0:
                pytest.skip(f"debootstrap could not make the base (is the Debian mirror reachable?): "
                            f"{(r.stdout + r.stderr).strip().splitlines()[-1:]}")
            for sub in ("var/cache/apt/archives", "var/lib/apt/lists"):
                for f in (Path(root) / sub).glob("*"):
                    if f.is_file():
                        f.unlink()
            part = tar.with_suffix(".part")
            run_command("tar", {"ROOTFS": root, "TAR": str(part)})
            part.rename(tar)
    run_command("import", {"TAR": str(tar), "BASE": BASE_TAG})
    r = podman("run", "--rm", "--network", "none", BASE_TAG, "python3", "-c", "import venv, sys; print(sys.version)",
               check=False)
    if r.returncode != 0:
        pytest.skip(f"podman cannot run a container here: {r.stderr.strip().splitlines()[-1:]}")
    return BASE_TAG


def _wheelhouse() -> Path:
    """The wheels of sourcegate's dependencies for the base's Python, downloaded once per day and
    set of dependencies."""
    key = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()[:12]
    out = CACHE / f"wheels-{TODAY}-{key}"
    if (out / ".complete").exists():
        return out
    tmp = Path(tempfile.mkdtemp(prefix="wheels-", dir=CACHE))
    r = run_command("wheels", {"WHEELS": str(tmp)}, check=False, timeout=900, cwd=ROOT)
    if r.returncode != 0:
        shutil.rmtree(tmp, ignore_errors=True)
        pytest.skip(f"the dependencies' wheels could not be downloaded (is the package index reachable?): "
                    f"{r.stderr.strip().splitlines()[-1:]}")
    for f in tmp.glob("sourcegate-*"):
        f.unlink()
    (tmp / ".complete").write_text("ok")
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    return out


def _build(base: str, wheels: Path, context: Path) -> None:
    """The repository's Containerfile, built from a context holding what `podman build .` at the
    root would send (its .containerignore) plus the wheelhouse."""
    for name in ("pyproject.toml", "README.md", "Containerfile", ".containerignore"):
        shutil.copy2(ROOT / name, context / name)
    shutil.copytree(ROOT / "src", context / "src", ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info"))
    (context / "wheels").mkdir()
    for f in wheels.glob("*.whl"):  # hard links: the same bytes, so podman's layer cache holds between runs
        os.link(f, context / "wheels" / f.name)
    (context / ".containerignore").write_text((ROOT / ".containerignore").read_text() + "!wheels\n")
    before = podman("image", "inspect", IMAGE_TAG, "--format", "{{.Id}}", check=False).stdout.strip()
    run_command("build", {"BASE": base, "IMAGE": IMAGE_TAG, "CONTEXT": str(context)}, timeout=1500)
    after = podman("image", "inspect", IMAGE_TAG, "--format", "{{.Id}}").stdout.strip()
    if before and before != after:  # the previous run's image, untagged now: free its layers (the build cache stays)
        podman("rmi", before, check=False)


@pytest.fixture(scope="module")
def image(tmp_path_factory) -> str:
    _skip_unless_podman_runs()
    base = _base_image()
    wheels = _wheelhouse()
    _build(base, wheels, tmp_path_factory.mktemp("context"))
    return IMAGE_TAG


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_ready(base: str, name: str, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:  # two workers: ready when several connections in a row say so
            if all(httpx.get(base + "/readyz", timeout=3).status_code == 200 for _ in range(4)):
                return
        except httpx.HTTPError:
            pass
        state = podman("inspect", name, "--format", "{{.State.Status}}", check=False).stdout.strip()
        assert state == "running", podman("logs", name, check=False).stderr[-3000:]
        time.sleep(1)
    raise AssertionError("the container never became ready:\n" + podman("logs", name, check=False).stderr[-3000:])


# The public name Copilot Studio calls (a Container Apps app's), sent as the Host header.
PUBLIC_HOST = "sourcegate.purplesea-1a2b3c.westeurope.azurecontainerapps.io"


def _ask_mcp(base: str, host: str | None = None) -> dict:
    import httpx2
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client
    from test_server_fixtures import run_async

    headers = {"x-api-key": KEY, **({"host": host} if host else {})}

    async def main() -> dict:
        async with httpx2.AsyncClient(headers=headers, timeout=120) as http, \
                streamable_http_client(f"{base}/mcp", http_client=http) as (r, w):
            async with ClientSession(r, w) as session:
                await session.initialize()
                assert [t.name for t in (await session.list_tools()).tools] == ["search_procedures", "give_feedback"]
                res = await session.call_tool("search_procedures", {"query": Q})
                assert not res.is_error, res.content
                return res.structured_content

    return run_async(main, 180)


def test_the_image_serves_the_demo_and_keeps_its_audit_log_across_a_restart(image):
    volume = f"sg-test-{uuid.uuid4().hex[:8]}"
    name = f"sg-test-{uuid.uuid4().hex[:8]}"
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    v = {"IMAGE": image, "VOLUME": volume, "NAME": name, "PORT": str(port), "CORPUS": str(CORPUS), "HOST": PUBLIC_HOST}
    run_command("volume", v)
    try:
        inspected = json.loads(podman("image", "inspect", image).stdout)[0]
        config = inspected["Config"]
        assert config["User"] == "10001:10001" and "/data" in config["Volumes"]
        assert any("healthz" in part for part in inspected["Healthcheck"]["Test"])
        assert config["StopSignal"] == "SIGTERM"
        assert "SOURCEGATE_HOME=/data" in config["Env"]

        # Ingest through the container, onto the volume (no network needed).
        r = run_command("ingest", v)
        assert "14 added" in r.stdout and "0 failed" in r.stdout, r.stdout + r.stderr

        run_command("serve", v)  # MCP_API_KEY from the environment, as the guide keeps it
        _wait_ready(base, name)
        assert run_command("user", v).stdout.strip() == "10001"
        assert httpx.get(base + "/healthz", timeout=5).json()["alive"] is True
        assert run_command("healthcheck", v, check=False).returncode == 0

        assert httpx.post(base + "/v1/ask", json={"query": Q}, timeout=60).status_code == 401  # the key is required
        rest = httpx.post(base + "/v1/ask", json={"query": Q}, headers={"x-api-key": KEY}, timeout=120)
        assert rest.status_code == 200, rest.text
        assert rest.json()["status"] == "answer_from_evidence" and not rest.json()["degraded"]
        mcp = _ask_mcp(base)
        assert mcp["status"] == "answer_from_evidence"
        # As Copilot Studio calls it: the public name in ALLOWED_HOSTS is answered, another is
        # refused with the setting and the fix in the body and in the container's log.
        assert _ask_mcp(base, host=PUBLIC_HOST)["status"] == "answer_from_evidence"
        refused = httpx.post(base + "/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                             headers={"x-api-key": KEY, "host": "other.example.org",
                                      "accept": "application/json, text/event-stream"}, timeout=30)
        assert refused.status_code == 421 and "ALLOWED_HOSTS=other.example.org" in refused.json()["error"]["message"]
        assert "ALLOWED_HOSTS=other.example.org" in podman("logs", name).stderr

        # A graceful stop: SIGTERM, every worker finishes, the container exits 0.
        run_command("stop", v)
        assert podman("inspect", name, "--format", "{{.State.ExitCode}}").stdout.strip() == "0"
        logs = podman("logs", name).stderr
        assert logs.count("Application shutdown complete") >= 1, logs[-3000:]

        # The same volume after a restart: the index and both audit records are still there.
        run_command("start", v)
        _wait_ready(base, name)
        for audit_id in (rest.json()["audit_id"], mcp["audit_id"]):
            rec = httpx.get(f"{base}/v1/audit/{audit_id}", headers={"x-api-key": KEY}, timeout=30)
            assert rec.status_code == 200 and rec.json()["audit_id"] == audit_id
        again = httpx.post(base + "/v1/ask", json={"query": Q}, headers={"x-api-key": KEY}, timeout=120)
        assert again.json()["status"] == "answer_from_evidence"
        run_command("stop", v)
        verify = run_command("verify", v)
        report = json.loads(verify.stdout)
        assert report["records"] == 4 and not report["breaks"], report  # REST, MCP twice, REST after the restart
    finally:
        podman("rm", "-f", name, check=False)
        podman("volume", "rm", "-f", volume, check=False)


def test_the_deployment_guide_shows_the_commands_this_test_runs():
    """docs/deploy.md's list of the container test's commands is COMMANDS, rendered: a command
    changed here and not there (or the reverse) fails, with podman or without."""
    documented = documented_commands(DEPLOY_DOC.read_text(encoding="utf-8"))
    assert documented == rendered_commands(), "\n".join(["docs/deploy.md should list:", *rendered_commands()])


def test_no_layer_of_the_image_keeps_the_wheel(image):
    # `COPY --from=build /dist` made a layer that held the wheel (15.9 MB) a later step deleted
    history = podman("history", "--no-trunc", "--format", "{{.CreatedBy}}\t{{.Size}}", image).stdout
    copies = [line for line in history.splitlines() if "/dist" in line and "COPY" in line.upper().split("\t")[0]
              and "--mount" not in line]
    assert copies == [], history
    assert any("--mount=type=bind" in line and "/dist" in line for line in history.splitlines()), history
