"""Cold start of `sourcegate ask`: a fresh process per question, on the demo index, with the
embedder's model parsed from its package files (as before the model cache) and loaded from the
cache, alternating so both see the same machine.

    python bench/bench_cli_start.py [--runs 5]
    python bench/bench_cli_start.py --compare REF     # and the checkout of git REF, alternated with this one
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import REPO, checkout, emit, pct  # noqa: E402
from _demo import DEMO, demo_settings, ingest_corpus  # noqa: E402

Q = "How often should I grease the bearings on pump P-200?"


def ask(home: Path, cache: str, src: Path = REPO / "src") -> tuple[float, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SOURCEGATE_")}
    # the package of `src` before any installed one
    env.update(SOURCEGATE_HOME=str(home), SOURCEGATE_CACHE_DIR=cache, PYTHONPATH=str(src))
    t = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "sourcegate.cli", "ask", Q], env=env, cwd=src.parent, capture_output=True,
                       text=True, timeout=300)
    took = time.perf_counter() - t
    if r.returncode != 0:
        raise SystemExit(f"ask failed: {r.stdout}{r.stderr}")
    return took, r.stderr


def measure(trees: dict[str, Path], runs: int) -> dict[str, dict]:
    """Per tree, cold asks with the model parsed and from the cache, the trees taking turns."""
    out = {label: {"parsed": [], "cached": [], "stderr_lines": 0} for label in trees}
    with tempfile.TemporaryDirectory(prefix="sg-bench-start-") as tmp:
        home = Path(tmp) / "home"
        ingest_corpus(demo_settings(home), DEMO / "corpus")
        caches = {}
        for i, (label, src) in enumerate(trees.items()):
            caches[label] = str(Path(tmp) / f"cache{i}")  # each tree writes its own cache format
            ask(home, caches[label], src)
        for _ in range(runs):
            for label, src in trees.items():
                took, err = ask(home, "off", src)
                out[label]["parsed"].append(took * 1000)
                took, err2 = ask(home, caches[label], src)
                out[label]["cached"].append(took * 1000)
                out[label]["stderr_lines"] += len(err.splitlines()) + len(err2.splitlines())
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--compare", metavar="REF", help="also the checkout of this git ref, alternated with this one")
    args = ap.parse_args()
    with contextlib.ExitStack() as stack:
        trees = {}
        if args.compare:
            trees[args.compare] = stack.enter_context(checkout(args.compare)) / "src"
        trees["this checkout"] = REPO / "src"
        results = measure(trees, args.runs)
    for label, r in results.items():
        parsed, cached = r["parsed"], r["cached"]
        emit("cli-start", {"tree": label, "runs": args.runs,
                           "parsed_ms": {"p50": pct(parsed, 50), "min": round(min(parsed), 1)},
                           "cached_ms": {"p50": pct(cached, 50), "min": round(min(cached), 1)},
                           "stderr_lines": r["stderr_lines"]},
             f"{label}: cold `sourcegate ask`: model parsed p50 {pct(parsed, 50)} ms (min {min(parsed):.0f}), "
             f"from the cache p50 {pct(cached, 50)} ms (min {min(cached):.0f}); {r['stderr_lines']} stderr lines")


if __name__ == "__main__":
    main()
