"""Fine-tune a cross-encoder that orders the retrieval pool, from the shipped reader, and measure it on
sources it did not train on.

    python -m training.rerank.train [--hold-out PART[,PART]] [--epochs 1] [--group 8] [--lr 3e-5]
        [--init .cache/rerank/init.pt] [--out .cache/rerank/fold-PART.pt] [--bf16] [--threads 2]

For each train question a passage answers or contradicts (`pools.py`), one group: an answering passage
and `--group - 1` others from the top of its fused pool (on-topic passages that do not answer it,
twins, other versions), scored by the reader's first-token head; the loss is the softmax cross-entropy
of the answering passage within its group (listwise). `--hold-out` leaves whole sources out of
training and writes their reranked pools' scores, so that the figure is read on a library the model
never saw (`evaluate.py`). The starting weights are the shipped reader's
(`python -m training.reader.recover --out .cache/rerank/init.pt`); word embeddings stay frozen.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from .common import CACHE, REPO, RERANK_DEPTH, corpus, groups_of, load_pools, passage_text

MAX_LEN = 256
PAD_MULTIPLE = 64


class Encoder:
    def __init__(self, max_len: int = MAX_LEN):
        from tokenizers import Tokenizer

        w = REPO / "src" / "sourcegate" / "judges" / "weights"
        meta = json.loads((w / "reader.json").read_text())
        self.tok = Tokenizer.from_file(str(w / "reader_tokenizer.json"))
        self.tok.no_truncation()
        self.tok.no_padding()
        self.bos, self.eos = int(meta["special"]["bos"]), int(meta["special"]["eos"])
        self.max_len = max_len

    def pair(self, q: str, c: str) -> tuple[list[int], list[int]]:
        qi = self.tok.encode(q, add_special_tokens=False).ids[:64]
        ci = self.tok.encode(c, add_special_tokens=False).ids[: self.max_len - len(qi) - 3]
        return [self.bos] + qi + [self.eos] + ci + [self.eos], [0] * (len(qi) + 2) + [1] * (len(ci) + 1)


def collate(pairs: list[tuple[list[int], list[int]]]) -> dict:
    L = max(len(p[0]) for p in pairs)
    L = min(MAX_LEN, ((L + PAD_MULTIPLE - 1) // PAD_MULTIPLE) * PAD_MULTIPLE)
    ids = torch.zeros(len(pairs), L, dtype=torch.long)
    tt = torch.zeros(len(pairs), L, dtype=torch.long)
    am = torch.zeros(len(pairs), L, dtype=torch.long)
    for i, (a, t) in enumerate(pairs):
        ids[i, : len(a)] = torch.tensor(a)
        tt[i, : len(t)] = torch.tensor(t)
        am[i, : len(a)] = 1
    return {"input_ids": ids, "attention_mask": am, "token_type_ids": tt}


def load_model(init: Path):
    sys.path.insert(0, str(REPO))
    from training.reader.model import build_reader

    model = build_reader(attn="sdpa")
    state = torch.load(init, map_location="cpu", weights_only=False)
    model.load_state_dict({k: v.float() for k, v in state["model"].items()})
    return model, state.get("history", [])


def score(model, enc: Encoder, query: str, texts: list[str], bf16: bool) -> list[float]:
    model.eval()
    out = []
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        for i in range(0, len(texts), 16):
            b = collate([enc.pair(query, t) for t in texts[i:i + 16]])
            out.extend(model(**b)[2].float().tolist())
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pools", type=Path, default=CACHE / "pools-30.jsonl")
    ap.add_argument("--hold-out", default="", help="sources left out of training (comma-separated)")
    ap.add_argument("--epochs", type=float, default=1.0)
    ap.add_argument("--group", type=int, default=8)
    ap.add_argument("--lr", type=float, default=3e-5)
    ap.add_argument("--init", type=Path, default=CACHE / "init.pt")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--bf16", action="store_true")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument("--limit", type=int, default=0, help="train on this many groups only (a timing run)")
    a = ap.parse_args(argv)
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    held = {p for p in a.hold_out.split(",") if p}
    rows = load_pools(a.pools)
    train_rows = [r for r in rows if r["part"] not in held]
    test_rows = [r for r in rows if r["part"] in held]
    passages = corpus()
    enc = Encoder()
    model, history = load_model(a.init)
    for p in model.encoder.embeddings.word_embeddings.parameters():
        p.requires_grad = False
    params = [p for p in model.parameters() if p.requires_grad]
    rng = random.Random(a.seed)
    plan = []
    for e in range(math.ceil(a.epochs)):
        g = groups_of(train_rows, passages, a.group, rng)
        rng.shuffle(g)
        share = min(1.0, a.epochs - e)
        plan.extend(g[: int(round(share * len(g)))])
    if a.limit:
        plan = plan[: a.limit]
    opt = torch.optim.AdamW(params, lr=a.lr, weight_decay=0.01)
    warm = max(1, len(plan) // 10)
    sched = torch.optim.lr_scheduler.LambdaLR(  # linear warm-up over a tenth of the run, then linear decay
        opt, lambda s: (s + 1) / warm if s < warm else max(0.0, (len(plan) - s) / max(1, len(plan) - warm)))
    model.train()
    t0 = time.time()
    run_loss = 0.0
    for step, (q, texts) in enumerate(plan, 1):
        b = collate([enc.pair(q, t) for t in texts])
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.bf16):
            logits = model(**b)[2].float()
        loss = F.cross_entropy(logits[None], torch.zeros(1, dtype=torch.long))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        run_loss = 0.98 * run_loss + 0.02 * loss.item() if step > 1 else loss.item()
        if step % 50 == 0 or step == len(plan):
            el = time.time() - t0
            print(json.dumps({"step": step, "of": len(plan), "loss": round(run_loss, 4), "groups_per_s": round(step / el, 2),
                              "elapsed_s": round(el)}), flush=True)
    out = a.out or CACHE / f"fold-{a.hold_out.replace(',', '+') or 'all'}.pt"
    rec = {"run": "rerank", "hold_out": sorted(held), "groups": len(plan), "group": a.group, "epochs": a.epochs,
           "lr": a.lr, "seed": a.seed, "pools": a.pools.name, "init": str(a.init), "seconds": round(time.time() - t0)}
    torch.save({"model": {k: v.half() for k, v in model.state_dict().items()}, "history": history + [rec]}, out)
    if test_rows:
        scores = {}
        for r in test_rows:
            pool = r["pool"][:RERANK_DEPTH]
            scores[r["id"]] = score(model, enc, r["query"], [passage_text(c["title"], c["text"]) for c in pool], a.bf16)
        out.with_suffix(".scores.json").write_text(json.dumps(scores))
    print(f"wrote {out}" + (f" and the scores of {len(test_rows)} held-out questions" if test_rows else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
