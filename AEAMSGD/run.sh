#!/usr/bin/env bash
# AEAMSGD on this machine: 1 ps + 2 workers; `bash run.sh --workers 4` etc.
set -euo pipefail
# No cd: relative paths in the flags mean what they mean where you are.
here="$(dirname "$0")"
exec "$here/../launch.sh" --ps 1 --workers 2 -- "$here/aeamsgd.py" "$@"
