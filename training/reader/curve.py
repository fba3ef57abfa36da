"""The reader's learning curve on people's questions: each checkpoint of a run, exported as the product
ships it (int8 ONNX), read alone on the held-out sources' pairs (`people.evaluate`: `HELD_OUT`, which
neither the reader nor its heads read), against the examples it has been trained on.

    python -m training.reader.curve --ckpt-dir .cache/reader/runB/ckpt [--start src/sourcegate/judges/weights] \
        [--work .cache/reader/curve] [--json FILE]

`--start` is the weights folder the run continued from (its point: no example of this run). Each
checkpoint becomes a weights folder `WORK/step-N` (the shipped files, this reader's three files), which
`bench/bench_real_train.py --fold-weights` and `SOURCEGATE_JUDGE_WEIGHTS` read once `stack.py --weights`
has fitted its heads.
"""

from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path

import torch

from training.weights_folder import SHIPPED, linked_weights

from .data import REPO
from .export import META_NAME, ONNX_NAME, TOKENIZER_NAME, export
from .people import HELD_OUT, evaluate
from .train import batches

READER_FILES = (ONNX_NAME, TOKENIZER_NAME, META_NAME)
HEADS_NAME = "reader_heads.json"


def checkpoints(ckpt_dir: Path) -> list[Path]:
    return sorted(ckpt_dir.glob("step-*.pt"), key=lambda p: int(p.stem.split("-")[1]))


def weights_folder(ckpt: Path, out: Path) -> Path:
    """`out`: the shipped weights (linked) with this checkpoint's reader exported in place of the shipped one,
    and a copy of the shipped heads, which `stack.py --weights` refits for this reader."""
    linked_weights(out, own=READER_FILES, copied=(HEADS_NAME,))
    if not (out / ONNX_NAME).exists():
        export(ckpt, out)
    return out


_DATA: dict[str, dict] = {}


def examples_of(ckpt: Path) -> dict[str, int]:
    """Examples the checkpoint's run has trained on, by set of `examples.pt`: its plan rebuilt from the
    run's arguments (`train.batches`, same seed), up to its step. `examples.pt` must be the file the run
    read (a set added since changes the plan)."""
    import ast

    st = torch.load(ckpt, weights_only=False, map_location="cpu")
    args = st["args"]
    path = args["examples"]
    if path not in _DATA:
        _DATA[path] = torch.load(path, weights_only=False)
    data = _DATA[path]
    mixture = tuple((k, float(v)) for k, v in ast.literal_eval(args["mixture"]))
    set_of = {id(e): key for key, _ in mixture for u in data.get(key) or [] for e in (u if isinstance(u, list) else [u])}
    plan = []
    for epoch in range(int(args["epochs"])):
        plan += batches(data, int(args["batch"]), int(args["seed"]) + epoch, mixture)
    if int(args["max_batches"]):
        plan = plan[: int(args["max_batches"])]
    out: dict[str, int] = {}
    for _, b in plan[: st["step"]]:
        key = set_of[id(b[0])]
        out[key] = out.get(key, 0) + len(b)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ckpt-dir", type=Path, required=True)
    ap.add_argument("--start", type=Path, default=SHIPPED, help="the weights folder the run continued from")
    ap.add_argument("--work", type=Path, default=REPO / ".cache" / "reader" / "curve")
    ap.add_argument("--json", type=Path, default=None)
    a = ap.parse_args(argv)
    points = [(a.start, {})]
    for ck in checkpoints(a.ckpt_dir):
        points.append((weights_folder(ck, a.work / ck.stem), examples_of(ck)))
    rows = []
    done_file = a.work / "points.json"  # readings already made, by reader file: a stopped run goes on
    done = json.loads(done_file.read_text()) if done_file.exists() else {}
    for wd, seen in points:
        key = hashlib.sha256((wd / ONNX_NAME).read_bytes()).hexdigest()
        if key not in done:
            done[key] = evaluate([wd])[tuple(HELD_OUT)][str(wd)]
            a.work.mkdir(parents=True, exist_ok=True)
            done_file.write_text(json.dumps(done, indent=1) + "\n")
        res = done[key]
        rows.append({"weights": str(wd.resolve()).replace(str(REPO) + "/", ""), "examples": sum(seen.values()),
                     "people_examples": seen.get("people_fit", 0),
                     **res})
        print(json.dumps(rows[-1]), flush=True)
    print(f"\nheld-out sources: {', '.join(HELD_OUT)}\n")
    print("| examples (people's) | answerable AUROC | settles AUROC | premise contradiction AUROC |")
    print("|---|---|---|---|")
    for r in rows:
        print(f"| {r['examples']:,} ({r['people_examples']:,}) | {r['answerable_auroc']:.3f} | {r['settles_auroc']:.3f} "
              f"| {r['premise_contradiction_auroc']:.3f} |")
    if a.json:
        a.json.write_text(json.dumps({"held_out": list(HELD_OUT), "points": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
