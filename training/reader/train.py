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

PAD_MULTIPLE = 64  # AMX tiles: lengths in multiples of 64 run much faster in bf16
WEIGHTS_NAME = "weights.pt"


# the run's mixture: (key in examples.pt, passes over it)
MIXTURE = (("squad2_train", 1), ("squad1_train", 1), ("piaf_train", 2), ("polar_train", 2), ("polarproc_train", 3),
           ("nli_train", 1))


def parse_mixture(spec: str) -> tuple[tuple[str, float], ...]:
    """"squad1_train:0.1,polarproc_train:3" -> (("squad1_train", 0.1), ("polarproc_train", 3.0))."""
    out = []
    for part in spec.split(","):
        key, _, passes = part.strip().partition(":")
        out.append((key, float(passes or 1)))
    return tuple(out)


def batches(data: dict, batch: int, seed: int, mixture=MIXTURE) -> list[tuple[str, list[dict]]]:
    """The whole run's batches, in order: for each set and pass, its examples shuffled (by unit) and cut
    into batches of one kind and similar length (within windows of 50 batches); then every batch of the
    run shuffled together, so that the kinds are mixed from the first step. A fractional number of
    passes takes that share of the set's units (seeded)."""
    rng = random.Random(seed)
    out = []
    for key, passes in mixture:
        whole = int(passes)
        shares = [1.0] * whole + ([passes - whole] if passes > whole else [])
        for share in shares:
            units = list(data.get(key) or [])
            rng.shuffle(units)
            units = units[: int(round(share * len(units)))]
            flat = [e for u in units for e in (u if isinstance(u, list) else [u])]
            win = batch * 50
            for i in range(0, len(flat), win):
                chunk = sorted(flat[i:i + win], key=lambda e: (e["kind"], len(e["ids"])))
                j = 0
                while j < len(chunk):
                    b = [chunk[j]]
                    j += 1
                    while j < len(chunk) and len(b) < batch and chunk[j]["kind"] == b[0]["kind"]:
                        b.append(chunk[j])
                        j += 1
                    out.append((b[0]["kind"], b))
    rng.shuffle(out)
    return out


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
    kind = exs[0]["kind"]
    out["kind"] = kind
    if kind == "nli":
        out["nli"] = torch.tensor([e["nli"] for e in exs], device=device)
    elif kind == "polar":
        out["pol"] = torch.tensor([e["pol"] for e in exs], device=device)
        out["ans"] = torch.tensor([float(e["pol"] != 2) for e in exs], device=device)
    else:
        out["start"] = torch.tensor([e["start"] for e in exs], device=device)
        out["end"] = torch.tensor([e["end"] for e in exs], device=device)
        out["ans"] = torch.tensor([float(e["ans"]) for e in exs], device=device)
    return out


def loss_of(model, b: dict, bf16: bool, device: str):
    with torch.autocast(device_type="cuda" if device.startswith("cuda") else "cpu", dtype=torch.bfloat16, enabled=bf16):
        start, end, ans, nli, pol = model(b["input_ids"], b["attention_mask"], b["token_type_ids"])
    if b["kind"] == "nli":
        y = b["nli"]
        logp = F.log_softmax(nli.float(), dim=-1)
        three = y >= 0  # DACCORD's "compatible" (-1): not a contradiction, entailment or neutral
        loss = torch.zeros((), device=logp.device)
        if three.any():
            loss = loss + F.nll_loss(logp[three], y[three], reduction="sum")
        if (~three).any():
            loss = loss - torch.logsumexp(logp[~three][:, :2], dim=-1).sum()
        return loss / len(y)
    if b["kind"] == "polar":
        return F.cross_entropy(pol.float(), b["pol"]) + F.binary_cross_entropy_with_logits(ans.float(), b["ans"])
    answerable = F.binary_cross_entropy_with_logits(ans.float(), b["ans"])
    known = b["start"] >= 0  # -100: an answerable passage whose answer's place is not known (the span is not taught)
    if not known.any():
        return answerable
    return (F.cross_entropy(start.float()[known], b["start"][known]) + F.cross_entropy(end.float()[known], b["end"][known])) / 2 \
        + answerable


def latest_checkpoint(d: Path) -> Path | None:
    cks = sorted(d.glob("step-*.pt"), key=lambda p: int(p.stem.split("-")[1]))
    return cks[-1] if cks else None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--examples", type=Path, default=DEFAULT_CACHE / "examples.pt")
    ap.add_argument("--ckpt-dir", type=Path, default=DEFAULT_CACHE / "ckpt")
    ap.add_argument("--init", type=Path, default=None,
                    help="start from these weights (a float16 state dict, `weights.pt`, or a checkpoint) instead "
                         "of the base; default: the last run's `weights.pt` next to the checkpoints when it exists")
    ap.add_argument("--max-batches", type=int, default=0, help="batches in the planned run (0 = the whole mixture)")
    ap.add_argument("--epochs", type=int, default=1, help="passes over the mixture (reshuffled each pass)")
    ap.add_argument("--mixture", type=parse_mixture, default=MIXTURE,
                    help="sets of examples.pt and passes over each, e.g. 'polarproc_train:3,squad1_train:0.05'")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--warmup", type=float, default=0.05)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--bf16", action="store_true")
    ap.add_argument("--ckpt-every", type=int, default=200)
    ap.add_argument("--keep", type=int, default=3, help="checkpoints kept")
    ap.add_argument("--minutes", type=float, default=0.0, help="stop (with a checkpoint) after this long; 0 = no limit")
    ap.add_argument("--seed", type=int, default=20261202)
    ap.add_argument("--log", type=Path, default=None)
    a = ap.parse_args()

    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    data = torch.load(a.examples, weights_only=False)
    plan = []
    for epoch in range(a.epochs):
        plan += batches(data, a.batch, a.seed + epoch, a.mixture)
    if a.max_batches:
        plan = plan[: a.max_batches]
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
    init = a.init or (a.ckpt_dir.parent / WEIGHTS_NAME if (a.ckpt_dir.parent / WEIGHTS_NAME).exists() else None)
    history = []
    if ck is not None:
        st = torch.load(ck, weights_only=False)
        model.load_state_dict(st["model"])
        opt.load_state_dict(st["opt"])
        sched.load_state_dict(st["sched"])
        step = st["step"]
        history = st.get("history", [])
        torch.set_rng_state(st["rng"])
        print(f"resumed from {ck.name} at step {step}/{total}", flush=True)
    elif init is not None:
        st = torch.load(init, weights_only=False, map_location="cpu")
        sd = st.get("model", st)
        missing, unexpected = model.load_state_dict({k: v.float() for k, v in sd.items()}, strict=False)
        history = st.get("history", []) if isinstance(st, dict) else []
        print(f"started from {init} (missing {missing}, unexpected {unexpected})", flush=True)
    log = open(a.log or (a.ckpt_dir / "train_log.jsonl"), "a")
    t0 = time.time()
    seen = 0
    run: dict[str, list[float]] = {"qa": [], "polar": [], "nli": []}

    def examples_seen(upto: int) -> dict[str, int]:
        c: dict[str, int] = {}
        for kind, bb in plan[:upto]:
            c[kind] = c.get(kind, 0) + len(bb)
        return c

    def save():
        path = a.ckpt_dir / f"step-{step}.pt"
        run_rec = {"args": {k: str(v) for k, v in vars(a).items()}, "step": step, "total": total,
                   "examples": examples_seen(step)}
        torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "sched": sched.state_dict(), "step": step,
                    "rng": torch.get_rng_state(), "args": run_rec["args"], "history": history,
                    "examples_seen": run_rec["examples"]}, path)
        # the weights to continue from in a later run (float16, with every run so far)
        torch.save({"model": {k: v.half() for k, v in model.state_dict().items()}, "history": history + [run_rec]},
                   a.ckpt_dir.parent / WEIGHTS_NAME)
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
            rec = {"step": step, "total": total, "ex_per_s": round(seen / el, 1), "lr": sched.get_last_lr()[0],
                   "elapsed_s": round(el)}
            for k, v in run.items():
                if v:
                    rec[f"{k}_loss"] = round(sum(v[-20:]) / len(v[-20:]), 4)
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
