#!/usr/bin/env bash
# Shared normalisation against the standard objective, from the shipped run at equal minutes,
# then both checks; and dense/hybrid ranking of a document's passages with the shipped run.
set -u
cd "$(dirname "$0")/../.."; mkdir -p outputs/study
Q=.venv/bin/qa-finetune
PY=".venv/bin/python"
export PYTHONPATH=$PWD
S=outputs/study
SHIP=../shared/models/minilm-31k
DEV=../shared/data/squad-v1.1-dev.json
stamp() { echo "== $(date +%H:%M:%S) $*" >> $S/steps.log; }
stamp start
for method in standard shared_norm; do
  stamp "train $method"
  $Q train --config $SHIP/config.yaml --init-from $SHIP --run-name continue-$method \
      --set train.method=$method --set train.epochs=1 --max-minutes 15 \
      --learning-rate 3e-5 --set train.eval_every_steps=100000 \
      --set data.max_eval_samples=500 --set train.calibrate=off --overwrite \
      > $S/train-$method.log 2>&1
  stamp "train $method done rc=$?"
done
for method in standard shared_norm; do
  stamp "evaluate $method"
  $Q evaluate --model outputs/continue-$method --data $DEV --max-samples 2000 \
      --report-dir $S/eval-$method > $S/eval-$method.log 2>&1
  stamp "evaluate $method done rc=$?"
done
for method in standard shared_norm; do
  stamp "long documents $method"
  $PY bench/long_documents.py $DEV --model outputs/continue-$method --questions 300 --seed 0 \
      --read passages:5 --output $S/long-$method.json > $S/long-$method.log 2>&1
  stamp "long documents $method done rc=$?"
done
stamp "long documents shipped, retrievers"
$PY bench/long_documents.py $DEV --model $SHIP --questions 300 --seed 0 \
    --read bm25:3 --read dense:3 --read passages:5:hybrid \
    --output $S/long-shipped-retrievers.json > $S/long-shipped-retrievers.log 2>&1
stamp "long documents shipped done rc=$?"
for method in standard shared_norm; do
  stamp "read-all 60 $method"
  $PY bench/long_documents.py $DEV --model outputs/continue-$method --questions 60 --seed 0 \
      --read read-all --read bm25:3 \
      --output $S/readall-$method.json > $S/readall-$method.log 2>&1
  stamp "read-all 60 $method done rc=$?"
done
stamp end
