#!/usr/bin/env bash
# Synchronous SGD with a learning rate per worker: 1 ps + 2 workers; `bash run.sh --learning_rates 0.3,0.1` etc.
set -euo pipefail
# No cd: relative paths in the flags mean what they mean where you are.
here="$(dirname "$0")"
exec "$here/../launch.sh" --ps 1 --workers 2 -- "$here/synchronous_sgd_different_learning_rates.py" "$@"
