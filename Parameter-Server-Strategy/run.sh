#!/usr/bin/env bash
# TensorFlow 2's ParameterServerStrategy on this machine: a coordinator, 1 ps
# and 2 workers; `bash run.sh --workers 4` etc.
set -euo pipefail
# No cd: relative paths in the flags mean what they mean where you are.
here="$(dirname "$0")"
exec "$here/../launch.sh" --coordinator --ps 1 --workers 2 -- "$here/parameter_server_strategy.py" "$@"
