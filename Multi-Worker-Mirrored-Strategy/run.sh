#!/usr/bin/env bash
# MultiWorkerMirroredStrategy on this machine: 2 workers and no ps; `bash
# run.sh --workers 4` etc. A restart (--max_restarts) restarts every worker.
set -euo pipefail
# No cd: relative paths in the flags mean what they mean where you are.
here="$(dirname "$0")"
exec "$here/../launch.sh" --ps 0 --workers 2 --restart_group -- "$here/multi_worker_mirrored_strategy.py" "$@"
