#!/usr/bin/env bash
# tools/dev_venv.sh NAME — an isolated developer environment: a venv (sharing the system's
# numpy/gguf/pytest) with gaacrt installed editable from build/NAME, rebuilt on import.
#   tools/dev_venv.sh dev && /tmp/venv-dev/bin/python -m pytest tests
# Set GAACRT_CUDA=OFF to skip the CUDA backend (faster builds on a machine without a GPU).
set -euo pipefail
name=${1:-dev}
root=$(cd "$(dirname "$0")/.." && pwd)
venv=/tmp/venv-$name
[ -x "$venv/bin/python" ] || python3 -m venv --system-site-packages "$venv"
"$venv/bin/pip" install -q --no-build-isolation -Cbuild-dir="build/$name" -Ceditable.rebuild=true -Ceditable.verbose=false \
  -Ccmake.define.GAACRT_CUDA="${GAACRT_CUDA:-AUTO}" -e "$root"
echo "gaacrt installed editable in $venv (build dir build/$name)"
