"""What an access token costs over the API key: `sourcegate serve` (one worker) on 127.0.0.1 with the
demo corpus, MCP_API_KEY and AUTH_ISSUER both set, the issuer's key set served from this process;
requests alternate between an RS256 token (2048-bit key, as Entra ID signs) and the API key, one at
a time, on one connection each.

    python bench/bench_auth.py [--requests 300] [--ask 40] [--judge local]

Two endpoints: `GET /v1/filters`, cheap and behind the same checks as /v1/ask, where the cost of the
check is not lost in the answer's; and `POST /v1/ask` with the demo questions. Then the check alone,
in process (`Authenticator.authenticate`), in microseconds.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import jwt
from cryptography.hazmat.primitives.asymmetric import rsa

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import emit, lat
from _demo import DEMO, demo_questions, demo_settings, ingest_corpus
from bench_server import free_port, start_server, wait_ready

KEY = "bench-api-key-0123456789abcdef"
# start_server drops MCP_API_KEY from the server's environment: the key is given as API_KEYS, every group
API_KEYS = json.dumps({"bench": {"key": KEY, "groups": ["*"]}})
TENANT = "72f988bf-0000-4000-8000-000000000001"


def serve_jwks(private) -> tuple[ThreadingHTTPServer, str]:
    jwk = {**json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(private.public_key())), "kid": "bench-1", "use": "sig"}
    body = json.dumps({"keys": [jwk]}).encode()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


def token(private, issuer: str, resource: str) -> str:
    now = int(time.time())
    claims = {"iss": issuer, "aud": resource, "exp": now + 3600, "nbf": now - 5, "iat": now - 5, "tid": TENANT,
              "oid": "00000000-0000-4000-8000-00000000beef", "groups": [f"group-{i}" for i in range(20)],
              "roles": ["Reader"], "preferred_username": "bench@contoso.example", "scp": "ask"}
    return jwt.encode(claims, private, algorithm="RS256", headers={"kid": "bench-1"})


def alternate(base: str, method: str, path: str, n: int, bodies: list[dict] | None,
              headers: dict[str, dict[str, str]]) -> dict[str, list[float]]:
    """`n` requests for each credential, alternating, each credential on its own connection."""
    clients = {name: httpx.Client(base_url=base, headers=h, timeout=120) for name, h in headers.items()}
    times: dict[str, list[float]] = {name: [] for name in headers}
    try:
        for i in range(n):
            for name, client in clients.items():
                kw = {"json": bodies[i % len(bodies)]} if bodies else {}
                t0 = time.perf_counter()
                r = client.request(method, path, **kw)
                times[name].append((time.perf_counter() - t0) * 1000)
                if r.status_code != 200:
                    raise SystemExit(f"{name} {path}: {r.status_code} {r.text[:300]}")
    finally:
        for c in clients.values():
            c.close()
    return times


def in_process(issuer: str, resource: str, tok: str, n: int) -> dict[str, float]:
    """Authenticator.authenticate alone (keys cached), in microseconds per call."""
    import anyio

    from sourcegate.server.auth import Authenticator
    from sourcegate.settings import Settings

    auth = Authenticator(Settings(_env_file=None, api_keys_secret=API_KEYS, auth_issuer=issuer, auth_resource=resource,
                                  auth_jwks_uri=issuer + "/jwks", auth_tenant_id=TENANT))
    cases = {"token": {"authorization": f"Bearer {tok}"}, "api_key": {"x-api-key": KEY}}

    async def run() -> dict[str, float]:
        out = {}
        for name, headers in cases.items():
            await auth.authenticate(headers)  # the key set is fetched once here
            t0 = time.perf_counter()
            for _ in range(n):
                await auth.authenticate(headers)
            out[name] = round((time.perf_counter() - t0) / n * 1e6, 1)
        return out

    return anyio.run(run)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=300, help="GET /v1/filters per credential")
    ap.add_argument("--ask", type=int, default=40, help="POST /v1/ask per credential (0: skip)")
    ap.add_argument("--judge", default="local")
    args = ap.parse_args()

    private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    jwks, issuer = serve_jwks(private)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    resource = f"{base}/mcp"
    tok = token(private, issuer, resource)
    with tempfile.TemporaryDirectory(prefix="sourcegate-bench-auth-") as tmp:
        home = Path(tmp)
        ingest_corpus(demo_settings(home), DEMO / "corpus")
        env = {"AUTH_ISSUER": issuer, "AUTH_RESOURCE": resource, "AUTH_JWKS_URI": issuer + "/jwks",
               "AUTH_TENANT_ID": TENANT, "SOURCEGATE_LOG_LEVEL": "warning", "API_KEYS": API_KEYS}
        log = home / "server.log"
        proc = start_server(home, port, args.judge, env, log)
        try:
            wait_ready(base, proc, log)
            headers = {"token": {"authorization": f"Bearer {tok}"}, "api_key": {"x-api-key": KEY}}
            alternate(base, "GET", "/v1/filters", 20, None, headers)  # warm-up: connections, key set, caches
            filters = alternate(base, "GET", "/v1/filters", args.requests, None, headers)
            asks = {}
            if args.ask:
                questions = [{"query": q} for q in demo_questions()]
                alternate(base, "POST", "/v1/ask", 3, questions, headers)
                asks = alternate(base, "POST", "/v1/ask", args.ask, questions, headers)
        finally:
            proc.terminate()
            proc.wait(timeout=60)
    micro = in_process(issuer, resource, tok, 2000)
    jwks.shutdown()

    def summary(times: dict[str, list[float]]) -> dict:
        out = {name: lat(v) for name, v in times.items()}
        out["p50_over_api_key_ms"] = round(statistics.median(times["token"]) - statistics.median(times["api_key"]), 2)
        return out

    data = {"filters": summary(filters), **({"ask": summary(asks)} if asks else {}), "check_alone_us": micro,
            "judge": args.judge}
    line = (f"GET /v1/filters p50 token {data['filters']['token']['p50']} ms, API key "
            f"{data['filters']['api_key']['p50']} ms (+{data['filters']['p50_over_api_key_ms']} ms); "
            + (f"POST /v1/ask p50 token {data['ask']['token']['p50']} ms, API key {data['ask']['api_key']['p50']} ms; "
               if asks else "")
            + f"the check alone: token {micro['token']} us, API key {micro['api_key']} us")
    emit("auth", data, line)


if __name__ == "__main__":
    main()
