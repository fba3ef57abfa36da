"""A longer fuzz of every parser than the test suite's: mutated seeds of each format and the
hostile files, each within a CPU time and memory budget; one line per failure, naming the file
kept for it.

    python bench/bench_fuzz.py [--examples 500] [--seed 0] [--keep DIR]
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import emit  # noqa: E402
from fuzz_parsers import hostile, mutate, run_one, seeds  # noqa: E402


def random_ops(rng: random.Random) -> list[tuple[int, int, int, bytes]]:
    return [(rng.randrange(5), rng.randrange(1 << 20), rng.randrange(1, 256),
             bytes(rng.randrange(256) for _ in range(rng.randrange(1, 64)))) for _ in range(rng.randrange(1, 12))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--examples", type=int, default=500, help="mutants per format")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--keep", type=Path, default=None, help="folder for the failing files (default: a temporary one)")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    keep = args.keep or Path(tempfile.mkdtemp(prefix="sg-fuzz-"))
    keep.mkdir(parents=True, exist_ok=True)
    failures: list[str] = []
    worst: dict[str, float] = {}
    t0 = time.perf_counter()
    cases = [(f"hostile-{name}{suffix}", data) for name, (suffix, data) in hostile().items()]
    for suffix, seed in seeds().items():
        cases += [(f"mutant-{suffix[1:]}-{i:05d}{suffix}", mutate(seed, random_ops(rng))) for i in range(args.examples)]
    for name, data in cases:
        path = keep / name
        path.write_bytes(data)
        outcome = run_one(path)
        fmt = path.suffix
        worst[fmt] = max(worst.get(fmt, 0.0), outcome.seconds)
        if outcome.ok:
            path.unlink()
        else:
            failures.append(outcome.line)
            print(outcome.line, flush=True)
    emit("fuzz", {"files": len(cases), "failures": failures, "worst_cpu_s": {k: round(v, 3) for k, v in worst.items()},
                  "wall_s": round(time.perf_counter() - t0, 1), "kept": str(keep)},
         f"{len(cases)} files, {len(failures)} failures; worst CPU s per format: "
         + ", ".join(f"{k} {v:.2f}" for k, v in sorted(worst.items())))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
