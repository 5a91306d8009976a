#!/usr/bin/env bash
# Distributed Setup on this machine: 1 ps + 1 worker; `bash run.sh --workers 2` etc.
set -euo pipefail
cd "$(dirname "$0")"
exec ../launch.sh --ps 1 --workers 1 -- distributed_setup.py "$@"
