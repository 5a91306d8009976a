#!/usr/bin/env bash
# Multi-Worker-Mirrored-Strategy under Ray Train: 2 workers on a local Ray
# cluster, or on a running one with `--address HEAD:6379`. Needs `make ray`.
set -euo pipefail
# No cd: relative paths in the flags mean what they mean where you are.
here="$(dirname "$0")"
python="$("$here/../launch.sh" --print-python)"
exec "$python" "$here/ray_train.py" "$@"
