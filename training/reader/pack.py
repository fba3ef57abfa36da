"""Pack what a GPU machine needs to run the whole recipe, small enough to travel with the repository
(the device's limit is 64 MiB for the working tree and what it carries together): the weights to
continue from (the last run's `weights.pt`: word embeddings int8 with a scale per row, since they stay
frozen in training; the rest float16) with the base's config, tokenizer and special ids, and the
training and evaluation data cut to the fields the recipe reads, xz-compressed.

    python -m training.reader.pack [--data ../shared/data] [--out .cache/reader/carry]
    python -m training.reader.pack --unpack CARRY --base-out /tmp/reader/base   # on the GPU machine

Then `bash training/reader/gpu.sh` there (data, training, int8 export and evaluation into $OUT).
"""

from __future__ import annotations

import argparse
import json
import lzma
import shutil
from pathlib import Path

from .data import DEFAULT_CACHE, DEFAULT_DATA
from .model import base_dir

DATA_FILES = {
    "train/squad_spans/squad1_train.jsonl": "spans",
    "train/squad_spans/squad2_dev.jsonl": "spans",
    "train/piaf_fr/data.jsonl": "spans",
    "train/snli_devtest_esnli/data.jsonl": "nli",
    "train/breaking_nli/data.jsonl": "nli",
    "train/fever_symmetric/data.jsonl": "nli",
    "train/nli_fr_rte3/data.jsonl": "nli",
    "train/nli_fr_daccord/data.jsonl": "nli",
    "train/polar_condaqa/data.jsonl": "polar",
    "train/polar_boolq3l/data.jsonl": "polar",
    "squad2-dev/evidence_pairs.jsonl": "pairs",
}
BASE_FILES = ["config.json", "tokenizer.json", "special.json"]
EMB = "embeddings.word_embeddings.weight"


def _slim(kind: str, row: dict) -> dict:
    if kind == "spans":
        return {"title": row["title"], "context": row["context"],
                "qas": [{"question": q["question"], "is_impossible": q.get("is_impossible", False),
                         "answers": [{"text": a["text"], "start": a["start"]} for a in q["answers"]]}
                        for q in row["qas"]]}
    if kind == "nli":
        return {"premise": row["premise"], "hypothesis": row["hypothesis"], "label": row["label"]}
    if kind == "polar":
        return {k: row[k] for k in ("query", "text", "answer", "label", "passage_id") if k in row}
    return {"query": row["query"], "text": row["text"], "label": row["label"]}


def pack(data: Path, out: Path, weights: Path) -> int:
    import torch
    from safetensors.torch import save_file

    if out.exists():
        shutil.rmtree(out)
    (out / "base").mkdir(parents=True)
    src = base_dir()
    for name in BASE_FILES:
        shutil.copy(src / name, out / "base" / name)
    st = torch.load(weights, weights_only=False, map_location="cpu")
    state = {k: v.float() for k, v in st["model"].items()}
    (out / "base" / "history.json").write_text(json.dumps(st.get("history", [])))
    packed = {}
    for k, v in state.items():
        if k.endswith(EMB):
            scale = v.abs().amax(dim=1, keepdim=True).clamp(min=1e-8) / 127.0
            packed[k + ".q"] = torch.round(v / scale).to(torch.int8).contiguous()
            packed[k + ".scale"] = scale.to(torch.float32).contiguous()
        else:
            packed[k] = v.to(torch.float16).contiguous()
    tmp = out / "base" / "packed.safetensors"
    save_file(packed, str(tmp))
    (out / "base" / "packed.safetensors.xz").write_bytes(lzma.compress(tmp.read_bytes(), preset=9))
    tmp.unlink()
    for rel, kind in DATA_FILES.items():
        rows = [json.loads(x) for x in (data / rel).read_text(encoding="utf-8").splitlines() if x.strip()]
        text = "\n".join(json.dumps(_slim(kind, r), ensure_ascii=False) for r in rows) + "\n"
        dst = out / "data" / (rel + ".xz")
        dst.parent.mkdir(parents=True, exist_ok=True)
        dst.write_bytes(lzma.compress(text.encode("utf-8"), preset=9))
    return sum(p.stat().st_size for p in out.rglob("*") if p.is_file())


def unpack(carry: Path, base_out: Path) -> Path:
    """The base folder (config, tokenizer, special ids) and `init.pt`, the float32 weights to continue
    from (`train --init`), from a carry folder."""
    import torch
    from safetensors.torch import load, save_file

    base_out.mkdir(parents=True, exist_ok=True)
    for name in BASE_FILES:
        shutil.copy(carry / "base" / name, base_out / name)
    packed = load(lzma.decompress((carry / "base" / "packed.safetensors.xz").read_bytes()))
    state = {}
    for k, v in packed.items():
        if k.endswith(EMB + ".q"):
            kk = k[: -2]
            state[kk] = (v.to(torch.float32) * packed[kk + ".scale"]).contiguous()
        elif k.endswith(EMB + ".scale"):
            continue
        else:
            state[k] = v.to(torch.float32).contiguous()
    history = json.loads((carry / "base" / "history.json").read_text()) if (carry / "base" / "history.json").exists() else []
    torch.save({"model": state, "history": history}, base_out / "init.pt")
    return base_out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--out", type=Path, default=DEFAULT_CACHE / "carry")
    ap.add_argument("--unpack", type=Path, default=None, help="a carry folder to unpack the base weights from")
    ap.add_argument("--base-out", type=Path, default=Path("/tmp/reader/base"))
    ap.add_argument("--weights", type=Path, default=DEFAULT_CACHE / "weights.pt", help="the weights to continue from")
    a = ap.parse_args()
    if a.unpack:
        print(unpack(a.unpack, a.base_out))
        return
    n = pack(a.data, a.out, a.weights)
    print(f"{a.out}: {n / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
