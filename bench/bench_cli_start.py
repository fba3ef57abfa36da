"""Cold start of `sourcegate ask`: a fresh process per question, on the demo index, with the
embedder's model parsed from its package files (as before the model cache) and loaded from the
cache, alternating so both see the same machine.

    python bench/bench_cli_start.py [--runs 5]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import REPO, emit, pct  # noqa: E402
from _demo import DEMO, demo_settings, ingest_corpus  # noqa: E402

Q = "How often should I grease the bearings on pump P-200?"


def ask(home: Path, cache: str) -> tuple[float, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SOURCEGATE_")}
    env.update(SOURCEGATE_HOME=str(home), SOURCEGATE_CACHE_DIR=cache)
    t = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "sourcegate.cli", "ask", Q], env=env, cwd=REPO, capture_output=True,
                       text=True, timeout=300)
    took = time.perf_counter() - t
    if r.returncode != 0:
        raise SystemExit(f"ask failed: {r.stdout}{r.stderr}")
    return took, r.stderr


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="sg-bench-start-") as tmp:
        home = Path(tmp) / "home"
        cache = Path(tmp) / "cache"
        ingest_corpus(demo_settings(home), DEMO / "corpus")
        ask(home, str(cache))  # writes the cache
        parsed, cached, stderr_lines = [], [], 0
        for _ in range(args.runs):
            took, err = ask(home, "off")
            parsed.append(took * 1000)
            took, err = ask(home, str(cache))
            cached.append(took * 1000)
            stderr_lines += len(err.splitlines())
    emit("cli-start", {"runs": args.runs, "parsed_ms": {"p50": pct(parsed, 50), "min": round(min(parsed), 1)},
                       "cached_ms": {"p50": pct(cached, 50), "min": round(min(cached), 1)},
                       "stderr_lines": stderr_lines},
         f"cold `sourcegate ask`: model parsed p50 {pct(parsed, 50)} ms (min {min(parsed):.0f}), "
         f"from the cache p50 {pct(cached, 50)} ms (min {min(cached):.0f}); {stderr_lines} stderr lines")


if __name__ == "__main__":
    main()
