#!/usr/bin/env bash
# Between-graph: 1 ps + 2 workers, worker i on the i-th visible GPU (or on the
# CPU without GPUs); `bash run.sh --workers 4` etc.
set -euo pipefail
# No cd: relative paths in the flags mean what they mean where you are.
here="$(dirname "$0")"
exec "$here/../launch.sh" --gpu_per_worker --ps 1 --workers 2 -- "$here/multiple_gpus.py" "$@"
