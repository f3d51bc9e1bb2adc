#!/usr/bin/env bash
# Question negatives (another paragraph of the same document, labelled "no answer") with each
# objective, from the shipped run at the same 15 minutes as run.sh's continuations.
set -u
cd "$(dirname "$0")/../.."; mkdir -p outputs/study
Q=.venv/bin/qa-finetune
PY=".venv/bin/python"
export PYTHONPATH=$PWD
S=outputs/study
SHIP=../shared/models/minilm-31k
DEV=../shared/data/squad-v1.1-dev.json
stamp() { echo "== $(date +%H:%M:%S) $*" >> $S/steps.log; }
stamp start run2
for method in standard shared_norm; do
  stamp "train $method with negatives"
  $Q train --config $SHIP/config.yaml --init-from $SHIP --run-name negatives-$method \
      --set train.method=$method --set train.epochs=1 --max-minutes 15 \
      --learning-rate 3e-5 --set train.eval_every_steps=100000 \
      --set data.max_eval_samples=500 --set train.calibrate=off --overwrite \
      --set data.allow_no_answer=true --set data.question_negatives=0.5 \
      > $S/train-negatives-$method.log 2>&1
  stamp "train $method with negatives done rc=$?"
done
for method in standard shared_norm; do
  stamp "evaluate negatives-$method"
  $Q evaluate --model outputs/negatives-$method --data $DEV --max-samples 2000 \
      --report-dir $S/eval-negatives-$method > $S/eval-negatives-$method.log 2>&1
  stamp "evaluate negatives-$method done rc=$?"
  stamp "long documents negatives-$method"
  $PY bench/long_documents.py $DEV --model outputs/negatives-$method --questions 300 --seed 0 \
      --read passages:5 --output $S/long-negatives-$method.json > $S/long-negatives-$method.log 2>&1
  stamp "long documents negatives-$method done rc=$?"
done
for method in shared_norm standard; do
  stamp "read-all 60 negatives-$method"
  $PY bench/long_documents.py $DEV --model outputs/negatives-$method --questions 60 --seed 0 \
      --read read-all --output $S/readall-negatives-$method.json > $S/readall-negatives-$method.log 2>&1
  stamp "read-all 60 negatives-$method done rc=$?"
done
stamp end run2
