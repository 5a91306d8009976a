#!/usr/bin/env bash
# The Supervisor variant on this machine: 1 ps + 1 worker.
set -euo pipefail
cd "$(dirname "$0")"
exec ../launch.sh --ps 1 --workers 1 -- distributed_setup_supervisor.py "$@"
