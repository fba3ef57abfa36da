"""Train the reader, seeded and resumable.

    python -m training.reader.train [--examples .cache/reader/examples.pt] [--ckpt-dir .cache/reader/ckpt]
        [--max-examples 60000] [--batch 32] [--lr 1e-4] [--threads 2] [--bf16] [--minutes 0]

The run is planned as `--max-examples` question-answering examples (the learning-rate schedule spans
them), with one NLI batch after every `--nli-every` QA batches. A checkpoint (weights, optimiser,
schedule, position in the data, random state) is written every `--ckpt-every` steps and at the end; a
run started again with the same arguments goes on from the last one. `--minutes` stops a run early
(with a checkpoint), so a long CPU run can be split. On a GPU, `--device cuda --bf16` trains the whole
recipe in minutes.

Word embeddings are frozen (half the parameters, most of the optimiser's time on a CPU).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from .data import DEFAULT_CACHE
from .model import build_reader

PAD_MULTIPLE = 16


def batches(units: list[list[dict]], nli: list[dict], batch: int, nli_every: int, seed: int) -> list[tuple[str, list[dict]]]:
    """The whole run's batches, in order: QA units shuffled and cut into batches of similar length
    (within windows of 50 batches), NLI batches interleaved."""
    rng = random.Random(seed)
    flat = [e for u in units for e in u]
    out = []
    win = batch * 50
    for i in range(0, len(flat), win):
        chunk = sorted(flat[i:i + win], key=lambda e: len(e["ids"]))
        bs = [chunk[j:j + batch] for j in range(0, len(chunk), batch)]
        rng.shuffle(bs)
        out.extend(("qa", b) for b in bs)
    nli = sorted(nli, key=lambda e: len(e["ids"]))
    nb = [nli[j:j + batch] for j in range(0, len(nli), batch)]
    rng.shuffle(nb)
    mixed, k = [], 0
    for n, b in enumerate(out):
        mixed.append(b)
        if nli_every and (n + 1) % nli_every == 0 and nb:
            mixed.append(("nli", nb[k % len(nb)]))
            k += 1
    return mixed


def collate(exs: list[dict], device: str) -> dict:
    L = max(len(e["ids"]) for e in exs)
    L = int(math.ceil(L / PAD_MULTIPLE) * PAD_MULTIPLE)
    n = len(exs)
    ids = torch.zeros((n, L), dtype=torch.long)
    tt = torch.zeros((n, L), dtype=torch.long)
    am = torch.zeros((n, L), dtype=torch.long)
    for i, e in enumerate(exs):
        k = len(e["ids"])
        ids[i, :k] = torch.tensor(e["ids"])
        tt[i, :k] = torch.tensor(e["tt"])
        am[i, :k] = 1
    out = {"input_ids": ids.to(device), "token_type_ids": tt.to(device), "attention_mask": am.to(device)}
    if "nli" in exs[0]:
        out["nli"] = torch.tensor([e["nli"] for e in exs], device=device)
    else:
        out["start"] = torch.tensor([e["start"] for e in exs], device=device)
        out["end"] = torch.tensor([e["end"] for e in exs], device=device)
        out["ans"] = torch.tensor([float(e["ans"]) for e in exs], device=device)
    return out


def loss_of(model, b: dict, bf16: bool, device: str):
    with torch.autocast(device_type="cuda" if device.startswith("cuda") else "cpu", dtype=torch.bfloat16, enabled=bf16):
        start, end, ans, nli = model(b["input_ids"], b["attention_mask"], b["token_type_ids"])
    if "nli" in b:
        return F.cross_entropy(nli.float(), b["nli"])
    return (F.cross_entropy(start.float(), b["start"]) + F.cross_entropy(end.float(), b["end"])) / 2 \
        + F.binary_cross_entropy_with_logits(ans.float(), b["ans"])


def latest_checkpoint(d: Path) -> Path | None:
    cks = sorted(d.glob("step-*.pt"), key=lambda p: int(p.stem.split("-")[1]))
    return cks[-1] if cks else None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--examples", type=Path, default=DEFAULT_CACHE / "examples.pt")
    ap.add_argument("--ckpt-dir", type=Path, default=DEFAULT_CACHE / "ckpt")
    ap.add_argument("--max-examples", type=int, default=34000, help="QA examples in the planned run (0 = all)")
    ap.add_argument("--epochs", type=int, default=1, help="passes over the kept examples (reshuffled each pass)")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--warmup", type=float, default=0.05)
    ap.add_argument("--nli-every", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--bf16", action="store_true")
    ap.add_argument("--ckpt-every", type=int, default=200)
    ap.add_argument("--keep", type=int, default=3, help="checkpoints kept")
    ap.add_argument("--minutes", type=float, default=0.0, help="stop (with a checkpoint) after this long; 0 = no limit")
    ap.add_argument("--seed", type=int, default=20261201)
    ap.add_argument("--log", type=Path, default=None)
    a = ap.parse_args()

    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    data = torch.load(a.examples, weights_only=False)
    units = data["qa_train"]
    kept, n = [], 0
    for u in units:
        if a.max_examples and n >= a.max_examples:
            break
        kept.append(u)
        n += len(u)
    plan = []
    for epoch in range(a.epochs):
        plan += batches(kept, data["nli_train"], a.batch, a.nli_every, a.seed + epoch)
    total = len(plan)

    model = build_reader().to(a.device)
    model.encoder.embeddings.word_embeddings.weight.requires_grad_(False)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=a.lr, weight_decay=0.01)
    warm = max(1, int(a.warmup * total))
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: (s + 1) / warm if s < warm else max(0.0, (total - s) / max(1, total - warm)))
    step = 0
    a.ckpt_dir.mkdir(parents=True, exist_ok=True)
    ck = latest_checkpoint(a.ckpt_dir)
    if ck is not None:
        st = torch.load(ck, weights_only=False)
        model.load_state_dict(st["model"])
        opt.load_state_dict(st["opt"])
        sched.load_state_dict(st["sched"])
        step = st["step"]
        torch.set_rng_state(st["rng"])
        print(f"resumed from {ck.name} at step {step}/{total}", flush=True)
    log = open(a.log or (a.ckpt_dir / "train_log.jsonl"), "a")
    t0 = time.time()
    seen = 0
    run = {"qa": [], "nli": []}

    def save():
        path = a.ckpt_dir / f"step-{step}.pt"
        torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "sched": sched.state_dict(), "step": step,
                    "rng": torch.get_rng_state(), "args": {k: str(v) for k, v in vars(a).items()},
                    "qa_examples_seen": sum(len(b) for kind, b in plan[:step] if kind == "qa")}, path)
        for old in sorted(a.ckpt_dir.glob("step-*.pt"), key=lambda p: int(p.stem.split("-")[1]))[:-a.keep]:
            old.unlink()

    model.train()
    while step < total:
        kind, exs = plan[step]
        b = collate(exs, a.device)
        loss = loss_of(model, b, a.bf16, a.device)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        sched.step()
        step += 1
        seen += len(exs)
        run[kind].append(float(loss.detach()))
        if step % 25 == 0 or step == total:
            el = time.time() - t0
            rec = {"step": step, "total": total, "qa_loss": round(sum(run["qa"][-25:]) / max(1, len(run["qa"][-25:])), 4),
                   "nli_loss": round(sum(run["nli"][-10:]) / max(1, len(run["nli"][-10:])), 4) if run["nli"] else None,
                   "ex_per_s": round(seen / el, 1), "lr": sched.get_last_lr()[0], "elapsed_s": round(el)}
            log.write(json.dumps(rec) + "\n")
            log.flush()
            print(json.dumps(rec), flush=True)
        if step % a.ckpt_every == 0 or step == total:
            save()
        if a.minutes and time.time() - t0 > a.minutes * 60:
            save()
            print(f"stopped after {a.minutes} min at step {step}/{total}", flush=True)
            break


if __name__ == "__main__":
    main()
