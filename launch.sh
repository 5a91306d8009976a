#!/usr/bin/env bash
# Runs the launcher (`python -m launcher`, the package launcher/) with the
# right Python: $PYTHON if set, else the virtual environment you activated,
# else the repository's .venv (made by `make venv`), else python3 from PATH.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
if [[ -n "${PYTHON:-}" ]]; then
    python="$PYTHON"
elif [[ -n "${VIRTUAL_ENV:-}" ]]; then
    python=python
elif [[ -x "$repo/.venv/bin/python" ]]; then
    python="$repo/.venv/bin/python"
else
    python=python3
fi
# run_towers.sh-style scripts that need no cluster ask for the Python only.
if [[ "${1:-}" == "--print-python" ]]; then
    echo "$python"
    exit 0
fi
# The repository on the module path, so that the launcher is found from any
# folder: relative paths in the flags are taken from the one you are in.
export PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}"
exec "$python" -m launcher "$@"
