# Sourced by the long-document studies (bench/studies/*.sh): run from the repository with its
# environment, logs and results in outputs/study/ (steps.log has the clock of each step), and
# the two checks every model of them gets.
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
mkdir -p outputs/study
Q=.venv/bin/qa-finetune
PY=".venv/bin/python"
export PYTHONPATH=$PWD
S=outputs/study
DEV=../shared/data/squad-v1.1-dev.json

stamp() { echo "== $(date +%H:%M:%S) $*" >> "$S/steps.log"; }

# SQuAD v1.1 dev's first 2,000 questions, then the long-document check as the grid of 5 passages.
checks() {
  local name=$1
  stamp "evaluate $name"
  $Q evaluate --model "outputs/$name" --data "$DEV" --max-samples 2000 \
      --report-dir "$S/eval-$name" > "$S/eval-$name.log" 2>&1
  stamp "long documents $name"
  $PY bench/long_documents.py "$DEV" --model "outputs/$name" --questions 300 --seed 0 \
      --read passages:5 --output "$S/long-$name.json" > "$S/long-$name.log" 2>&1
  stamp "checks $name done rc=$?"
}
