"""Pack what a GPU machine needs to run the whole recipe, small enough to carry (< 64 MB): the base
weights in float16 with their tokenizer and config, and the training and evaluation data, gzipped.

    python -m training.reader.pack [--data ../shared/data] [--out .cache/reader/carry]

Then, on a machine with a GPU and PyTorch + transformers (no network needed):

    bash training/reader/gpu.sh        # data, training, int8 export and evaluation into $OUT (or ./out)
"""

from __future__ import annotations

import argparse
import gzip
import shutil
from pathlib import Path

from .data import DEFAULT_CACHE, DEFAULT_DATA
from .model import base_dir

DATA_FILES = [
    "train/squad_spans/squad1_train.jsonl",
    "train/squad_spans/squad2_dev.jsonl",
    "train/snli_devtest_esnli/data.jsonl",
    "train/breaking_nli/data.jsonl",
    "train/fever_symmetric/data.jsonl",
    "squad2-dev/evidence_pairs.jsonl",
]
BASE_FILES = ["config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt"]


def pack(data: Path, out: Path) -> int:
    import torch
    from safetensors.torch import load_file, save_file

    if out.exists():
        shutil.rmtree(out)
    (out / "base").mkdir(parents=True)
    src = base_dir()
    for name in BASE_FILES:
        shutil.copy(src / name, out / "base" / name)
    state = load_file(str(src / "model.safetensors"))
    save_file({k: v.to(torch.float16).contiguous() for k, v in state.items()}, str(out / "base" / "model.safetensors"))
    for rel in DATA_FILES:
        dst = out / "data" / (rel + ".gz")
        dst.parent.mkdir(parents=True, exist_ok=True)
        dst.write_bytes(gzip.compress((data / rel).read_bytes(), 9))
    return sum(p.stat().st_size for p in out.rglob("*") if p.is_file())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--out", type=Path, default=DEFAULT_CACHE / "carry")
    a = ap.parse_args()
    n = pack(a.data, a.out)
    print(f"{a.out}: {n / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
