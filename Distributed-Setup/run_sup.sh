#!/usr/bin/env bash
# The Supervisor variant on this machine: 1 ps + 1 worker.
set -euo pipefail
# No cd: relative paths in the flags mean what they mean where you are.
here="$(dirname "$0")"
exec "$here/../launch.sh" --ps 1 --workers 1 -- "$here/distributed_setup_supervisor.py" "$@"
