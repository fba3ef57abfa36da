#!/usr/bin/env bash
# Check the MCP endpoint with the official MCP Inspector CLI (downloaded by npx from npm).
#
# Starts `sourcegate serve` on a free local port with an API key and a temporary home holding
# the demo corpus, calls the search tool through the Inspector, and checks the result has a
# status. Usage: scripts/inspector_check.sh ["question"]   (needs sourcegate on PATH, node >= 20)
set -euo pipefail

QUERY="${1:-How often should I grease the bearings on pump P-200?}"
KEY="inspector-$(date +%s)-$$"
HOME_DIR="$(mktemp -d)"
PYTHON="${PYTHON:-python}"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
CORPUS="$("$PYTHON" -c 'import sourcegate, pathlib; print(pathlib.Path(sourcegate.__file__).parent / "demo" / "corpus")')"
PORT="$("$PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')"
SERVER_PID=""

cleanup() {
  if [[ -n "$SERVER_PID" ]]; then kill "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true; fi
  rm -rf "$HOME_DIR"
}
trap cleanup EXIT

export SOURCEGATE_HOME="$HOME_DIR"
echo "ingesting the demo corpus into $HOME_DIR" >&2
sourcegate ingest "$CORPUS" >&2

MCP_API_KEY="$KEY" sourcegate serve --host 127.0.0.1 --port "$PORT" 2>"$HOME_DIR/server.log" &
SERVER_PID=$!

# Bounded wait for the server (the first request also loads the embedder).
for _ in $(seq 1 60); do
  if curl -fsS "http://127.0.0.1:$PORT/healthz" >/dev/null 2>&1; then break; fi
  if ! kill -0 "$SERVER_PID" 2>/dev/null; then echo "the server exited:" >&2; cat "$HOME_DIR/server.log" >&2; exit 1; fi
  sleep 0.5
done
curl -fsS "http://127.0.0.1:$PORT/healthz" >/dev/null || { echo "the server did not start in 30 s" >&2; exit 1; }

OUT="$(cd "$ROOT" && npx -y "@modelcontextprotocol/inspector@${INSPECTOR_VERSION:-latest}" --cli "http://127.0.0.1:$PORT/mcp" --transport http \
  --header "x-api-key: $KEY" --method tools/call --tool-name search_procedures --tool-arg "query=$QUERY")"
echo "$OUT"

if echo "$OUT" | grep -Eq '"status": ?"(answer_from_evidence|premise_conflict|insufficient_evidence)"'; then
  echo "inspector check: ok" >&2
else
  echo "inspector check: FAILED (no status in the tool result)" >&2
  exit 1
fi
