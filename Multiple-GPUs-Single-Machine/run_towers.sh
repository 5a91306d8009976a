#!/usr/bin/env bash
# In-graph: one process, a tower per GPU (or per logical CPU device without
# GPUs); `bash run_towers.sh --towers 4` etc.
set -euo pipefail
# No cd: relative paths in the flags mean what they mean where you are.
here="$(dirname "$0")"
exec "$("$here/../launch.sh" --print-python)" "$here/multiple_gpus.py" --mode in_graph "$@"
