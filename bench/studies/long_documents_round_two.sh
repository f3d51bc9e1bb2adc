#!/usr/bin/env bash
# The runs of bench/reports/27-long-documents-round-two.md, alone on the machine, in order:
#   setsid bash -c 'echo -15 > /proc/$$/autogroup; exec bench/studies/long_documents_round_two.sh'
# Logs and results go to outputs/study/ (steps.log has the clock of each step).
# shellcheck source=bench/studies/long_document_checks.sh
source "$(dirname "$0")/long_document_checks.sh"  # cd to the repository; Q, PY, S, DEV, stamp, checks
SHIP=../shared/models/minilm-31k
NEGATIVES=(--set data.allow_no_answer=true --set data.question_negatives=0.5)

# A 15-minute continuation of the shipped run: NAME METHOD [more --set options].
continuation() {
  local name=$1 method=$2
  shift 2
  stamp "train $name"
  $Q train --config $SHIP/config.yaml --init-from $SHIP --run-name "$name" \
      --set train.method="$method" --set train.epochs=1 --max-minutes 15 \
      --learning-rate 3e-5 --set train.eval_every_steps=100000 \
      --set data.max_eval_samples=500 --set train.calibrate=off --overwrite "$@" \
      > "$S/train-$name.log" 2>&1
  stamp "train $name done rc=$?"
}

# Every window of the article read, on the check's first 60 questions.
read_all() {
  local name=$1
  stamp "read-all 60 $name"
  $PY bench/long_documents.py $DEV --model "outputs/$name" --questions 60 --seed 0 \
      --read read-all --output "$S/readall-$name.json" > "$S/readall-$name.log" 2>&1
  stamp "read-all 60 $name done rc=$?"
}

stamp start
# 1. Shared normalisation against the standard objective; the shipped run's passages ranked
# by BM25, the sentence encoder (dense) and both (hybrid).
continuation continue-standard standard
continuation continue-shared_norm shared_norm
checks continue-standard
checks continue-shared_norm
stamp "long documents shipped, retrievers"
$PY bench/long_documents.py $DEV --model $SHIP --questions 300 --seed 0 \
    --read bm25:3 --read dense:3 --read passages:5:hybrid \
    --output $S/long-shipped-retrievers.json > $S/long-shipped-retrievers.log 2>&1
read_all continue-standard
read_all continue-shared_norm
# 2. Question negatives (another paragraph of the same document, labelled "no answer") with
# each objective.
continuation negatives-standard standard "${NEGATIVES[@]}"
continuation negatives-shared_norm shared_norm "${NEGATIVES[@]}"
checks negatives-standard
checks negatives-shared_norm
read_all negatives-shared_norm
read_all negatives-standard
stamp end
