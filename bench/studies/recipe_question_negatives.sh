#!/usr/bin/env bash
# The general recipe with and without question negatives, from scratch at a 30-minute clock
# (the lever protocol of bench/reports/20-larger-encoder.md), alone on the machine, in order:
#   setsid bash -c 'echo -15 > /proc/$$/autogroup; exec bench/studies/recipe_question_negatives.sh'
# Logs and results go to outputs/study/ (steps.log has the clock of each step).
# shellcheck source=bench/studies/long_document_checks.sh
source "$(dirname "$0")/long_document_checks.sh"  # cd to the repository; Q, PY, S, DEV, stamp, checks

# configs/minilm-31k.yaml at a 30-minute clock: NAME [more --set options]. No mid-run
# validation and no end calibration, so both arms spend their minutes on the same work.
arm() {
  local name=$1
  shift
  stamp "train $name"
  $Q train --config configs/minilm-31k.yaml --run-name "$name" --max-minutes 30 \
      --set train.eval_every_steps=100000 --set train.calibrate=off --overwrite "$@" \
      > "$S/train-$name.log" 2>&1
  stamp "train $name done rc=$?"
}

stamp start
arm recipe30-plain
arm recipe30-negatives --set data.allow_no_answer=true --set data.question_negatives=0.5
checks recipe30-plain
checks recipe30-negatives
stamp end
