# bench/visit_common.sh — sourced by the GPU-machine visit scripts (gpu_check_visit.sh,
# gpu_e2e_visit.sh) with VISIT_OUT set to their default output folder: moves to the repo root,
# sets $OUT (the caller's, else VISIT_OUT), copies every line of output to $OUT/visit.log,
# defines stage() (a timestamped header) and gguf_wheel (installs .whl/'s gguf into /tmp/site,
# the machine has no package registry).
#
# Wait for background jobs by PID only: the output goes through a `tee` process substitution,
# and a bare `wait` waits for that too (bash >= 5.1), so it would never return.
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
OUT=${OUT:-$VISIT_OUT}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/visit.log") 2>&1
T0=$(date +%s)
stage() { echo; echo "=== [$(( $(date +%s) - T0 )) s] $*"; }
gguf_wheel() {
  "$1" -m pip install -q --no-deps --target /tmp/site .whl/gguf-*.whl || echo "gguf wheel install failed"
  export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
}
