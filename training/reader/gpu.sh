#!/usr/bin/env bash
# The whole reader recipe on a GPU machine, from the packed carry folder (python -m training.reader.pack):
# data (all of SQuAD 1.0), training continued from the last weights (three passes, bf16), int8 export
# and the reader's evaluation. Writes the
# shipped files (reader.onnx, reader.json, reader_tokenizer.json) and the reports into $OUT (or ./out).
# Back on the CPU machine: copy them into src/sourcegate/judges/weights/ and run
# `python -m training.reader.stack` (it needs the sourcegate package and its embedder) and the evaluations.
set -euo pipefail
cd "$(dirname "$0")/../.."
CARRY=${CARRY:-.cache/reader/carry}
OUTDIR=${OUT:-out}
WORK=${WORK:-/tmp/reader}
mkdir -p "$OUTDIR" "$WORK"
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
PY=${PYTHON:-python3}
$PY -m training.reader.pack --unpack "$CARRY" --base-out "$WORK/base"
export SOURCEGATE_READER_BASE="$WORK/base"
$PY -m training.reader.data --data "$CARRY/data" --out "$WORK/examples.pt" --max-squad1 0
$PY -m training.reader.train --examples "$WORK/examples.pt" --ckpt-dir "$WORK/ckpt" --init "$WORK/base/init.pt" \
  --device cuda --bf16 --batch 64 --lr 5e-5 --epochs 3 --ckpt-every 1000 --keep 2 --threads 8 --log "$OUTDIR/train_log.jsonl"
cp "$WORK/weights.pt" "$OUTDIR/weights.pt"   # float16: the next run, on any machine, continues from it
$PY -m training.reader.export --ckpt "$WORK/weights.pt" --out "$OUTDIR"
$PY -m training.reader.evaluate --weights "$OUTDIR" --data "$CARRY/data" --out "$OUTDIR/eval.jsonl" || echo "evaluation failed"
ls -la "$OUTDIR"
