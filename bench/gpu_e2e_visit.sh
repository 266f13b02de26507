#!/usr/bin/env bash
# bench/gpu_e2e_visit.sh — issue 7's end-to-end comparison in one GPU-machine command (no network):
# gaacrt on the Llama-3.1-8B shape in Q4_0 (bench/cuda_e2e.py) beside llama.cpp's llama-bench on
# the same GGUF (bench/llama_bench_gpu.sh). Run from the repo root, with .whl/ (the gguf wheel) and
# .llamacpp/ (the trimmed llama.cpp tarball) carried along:
#
#   bash bench/gpu_e2e_visit.sh
#
# Stages (times measured or estimated for one H200, 16 cores):
#   1. gguf wheel into /tmp/site                                     ~2 s
#   2. llama-bench build starts in the background (nice 19, 14 jobs)  ~4-5 min, overlaps 3-5
#   3. gaacrt build (pip install --no-build-isolation --no-deps .)    ~30-60 s (beside stage 2)
#      and the CUDA tests (tests/test_cuda_*.py, test_fused_ops.py,
#      test_bench_hooks.py: the depth hook, CUDA vs CPU)                ~10-20 s
#   4. the model: bench/gen_8b.py -> /tmp/llama31-8b-q4_0.gguf        ~10-20 s (kept if present)
#   5. bench/cuda_e2e.py: pp512, tg128 at 0/32K/64K, equal memory     ~2-3 min
#  5b. with ATTN_ARGS: bench/cuda_attention.py (carry bench/kv_rec/)  ~1 min
#   6. wait for the build, then llama-bench -fa 1 pp512/tg128 at
#      depths 0/32K/64K, 3 repetitions (each depth prefilled once)    ~1-2 min
#   7. the comparison table (cuda_e2e.py --report)                    instant
# Everything goes to stdout and to $OUT (default /tmp/e2e-out): visit.log, gaacrt_e2e.json/.txt,
# llama_build.log, llama_bench.md, llama_bench.json, summary.md.
# Environment: E2E_ARGS (extra bench/cuda_e2e.py arguments), LLAMA_ARGS (replace llama-bench's
# test arguments), E2E_SERIAL=1 (wait for the llama.cpp build before timing gaacrt, so compiler
# jobs do not share the CPU with it; costs the build's remaining minutes), SKIP_LLAMA=1.
# For a dry run on a machine without a GPU: MODEL, GEN_ARGS (--small), PYTHON, SKIP_BUILD=1,
# LLAMA_CUDA=OFF, LLAMA_DIR, E2E_ARGS="--backend cpu ...", LLAMA_ARGS.
set -uo pipefail
VISIT_OUT=/tmp/e2e-out
# shellcheck source=bench/visit_common.sh
. "$(dirname "$0")/visit_common.sh"
MODEL=${MODEL:-/tmp/llama31-8b-q4_0.gguf}
PYTHON=${PYTHON:-python3}
export LLAMA_DIR=${LLAMA_DIR:-/tmp/llamacpp}

stage "1. gguf wheel"
gguf_wheel "$PYTHON"

if [ -z "${SKIP_LLAMA:-}" ]; then
  stage "2. llama-bench build (background; log: $OUT/llama_build.log)"
  ( JOBS=14 nice -n 19 bash bench/llama_bench_gpu.sh build > "$OUT/llama_build.log" 2>&1; echo $? > "$OUT/llama_build.rc" ) &
  LLAMA_PID=$!
fi

stage "3. gaacrt build"
if [ -z "${SKIP_BUILD:-}" ]; then
  "$PYTHON" -m pip install -q --no-build-isolation --no-deps . || { echo "gaacrt build failed"; exit 1; }
fi
"$PYTHON" -c "import gaacrt; print('gaacrt', gaacrt.__file__, gaacrt.cuda_devices())"
# The CUDA tests (~10 s; the cache-growing hook the depths rely on is tests/test_bench_hooks.py).
"$PYTHON" -m pytest -q -p no:cacheprovider tests/test_cuda_backend.py tests/test_cuda_ops.py tests/test_fused_ops.py \
  tests/test_cuda_model.py tests/test_cuda_lossy.py tests/test_bench_hooks.py 2>&1 | tail -3

stage "4. model"
# shellcheck disable=SC2086
if [ -s "$MODEL" ]; then ls -la "$MODEL"; else "$PYTHON" bench/gen_8b.py "$MODEL" ${GEN_ARGS:-} || exit 1; fi

if [ -n "${E2E_SERIAL:-}" ] && [ -n "${LLAMA_PID:-}" ]; then
  stage "   (E2E_SERIAL: waiting for the llama.cpp build first)"
  wait "$LLAMA_PID"
fi
stage "5. gaacrt: bench/cuda_e2e.py ${E2E_ARGS:-}"
[ -f "$OUT/llama_build.rc" ] || echo "(the llama.cpp build is still running beside this, niced)"
# shellcheck disable=SC2086
"$PYTHON" bench/cuda_e2e.py "$MODEL" --json "$OUT/gaacrt_e2e.json" ${E2E_ARGS:-} | tee "$OUT/gaacrt_e2e.txt"

if [ -n "${ATTN_ARGS:-}" ]; then  # e.g. "--kv smollm2 --ctx 65536 --batch 1" (needs bench/kv_rec/ carried)
  stage "5b. attention kernels: bench/cuda_attention.py $ATTN_ARGS"
  # shellcheck disable=SC2086
  timeout 240 "$PYTHON" bench/cuda_attention.py $ATTN_ARGS 2>&1 | tee "$OUT/attention.txt" | tail -40
fi

if [ -n "${LLAMA_PID:-}" ]; then
  stage "6. llama.cpp: waiting for the build"
  wait "$LLAMA_PID"
  tail -3 "$OUT/llama_build.log"
  if [ "$(cat "$OUT/llama_build.rc" 2>/dev/null)" = "0" ]; then
    stage "6. llama-bench"
    # shellcheck disable=SC2086
    bash bench/llama_bench_gpu.sh run "$MODEL" ${LLAMA_ARGS:-} > "$OUT/llama_bench.md" 2> "$OUT/llama_bench.json"
    echo "llama-bench exit $?"
    cat "$OUT/llama_bench.md"
  else
    echo "llama.cpp build failed:"; tail -40 "$OUT/llama_build.log"
  fi
fi

stage "7. comparison"
if [ -s "$OUT/llama_bench.json" ] && grep -q '"avg_ts"' "$OUT/llama_bench.json"; then
  "$PYTHON" bench/cuda_e2e.py --report "$OUT/gaacrt_e2e.json" --llama-json "$OUT/llama_bench.json" | tee "$OUT/summary.md"
else
  [ -s "$OUT/llama_bench.json" ] && tail -20 "$OUT/llama_bench.json"
  "$PYTHON" bench/cuda_e2e.py --report "$OUT/gaacrt_e2e.json" | tee "$OUT/summary.md"
fi
stage "done"
