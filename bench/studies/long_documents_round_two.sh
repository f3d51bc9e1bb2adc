#!/usr/bin/env bash
# The runs of bench/reports/27-long-documents-round-two.md, alone on the machine, in order:
#   setsid bash -c 'echo -15 > /proc/$$/autogroup; exec bench/studies/long_documents_round_two.sh'
# Logs and results go to outputs/study/ (steps.log has the clock of each step).
set -u
here="$(dirname "$0")"
bash "$here/long_documents_round_two_objectives.sh"
bash "$here/long_documents_round_two_negatives.sh"
