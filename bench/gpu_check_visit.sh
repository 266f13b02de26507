#!/usr/bin/env bash
# bench/gpu_check_visit.sh — one GPU-machine visit that builds gaacrt, runs the CUDA tests and
# the quick speed checks, for iterating on kernels (no network there; .whl/ carries the gguf wheel):
#
#   bash bench/gpu_check_visit.sh                 # all stages
#   STAGES="build tests profile e2e" bash bench/gpu_check_visit.sh
#
# Stages:
#   build    pip install --no-build-isolation (~150 s on a fresh machine, less when warm); with
#            PREBUILT=1 instead the wheel .whl/gaacrt-*-cp312-*.whl made on the CPU machine from the
#            tree carried, which spends none of the device time on the build (~7 min there on 2 cores, 37 MB; the GPU
#            machine's python is 3.12 and its nvcc 13.0, as here; cudart is linked statically):
#              CMAKE_BUILD_PARALLEL_LEVEL=2 GAACRT_CUDA=ON python3.12 -m pip wheel --no-build-isolation \
#                --no-deps -w .whl -Cbuild-dir=/tmp/skb-312 -Ccmake.define.GAACRT_CUDA_EMULATION=OFF \
#                -Ccmake.define.GAACRT_METAL_EMULATION=OFF -Ccmake.define.GAACRT_TESTS=OFF .
#            (a python 3.12 with nanobind, scikit-build-core, numpy, cmake and ninja). The rev stage
#            still builds on the GPU machine.
#   tests    the GPU's tests/test_cuda_*.py, test_fused_ops.py, test_bench_hooks.py (~20 s); TEST_PREFILL=q16
#            runs them with that prefill matmul (GAACRT_CUDA_MMA_MATMUL) as the default
#   profile  bench/cuda_kernel_profile.py, decode at depth 0, on bench/gen_8b.py's Llama-3.1-8B
#            shape in Q4_0, PDL off (PROFILE_ARGS adds arguments, e.g. "--cache e8 --depth
#            32768 --tokens 16", or "--cache bf16,gaac,e8 --prefill 512" for the caches side by side)
#   e2e      bench/cuda_e2e.py: pp512 and tg128 at depth 0 (E2E_ARGS adds arguments)
#   small    bench/cuda_decode.py, SmolLM2's shape
#   prefill  pp512 with each prefill matmul (PREFILL_PATHS, default bf16 q8 q16:64 q16 q16:auto; ":N"
#            sets GAACRT_CUDA_Q8MMA_TOKENS) and the kernels of one 512-token prefill, PDL off (not a
#            default stage)
#   ncu      Nsight Compute on NCU_COUNT launches of the kernels matching NCU_REGEX after NCU_SKIP
#            of them, two decode tokens, PDL off (not a default stage)
#   sass     where one launch's instructions and stall samples fall in its SASS: Nsight Compute
#            with dense warp sampling on the SASS_SKIP+1-th launch of a kernel whose demangled name
#            matches SASS_REGEX, run under SASS_CMD (default: the GAAC decode attention at 64K,
#            bench/cuda_attention.py), then bench/ncu_sass_regions.py with SASS_UNITS work units
#            (default 32768 = 64K / 16 x 8 kv-heads) (not a default stage)
#   wide     the prefill attention in row groups of 64 and of 16 (attention_wide.cuh; GAACRT_CUDA_
#            PREFILL_WIDE unset or 2: the default, two-block steps with two bf16 parts at head
#            size 128; 1: one-block steps, three parts; 0: row groups of 16): their distance from the
#            CPU (bench/wide_prefill_precision.py), then pp512 at depth 0 and after 32K for each of
#            WIDE_VALUES (default 1 2 1 2), then the
#            E8 cache's the same way (WIDE_E8_VALUES, default 1 0; attention_e8_wide.cuh) (not a
#            default stage). The wide kernel's SASS regions: STAGES=sass
#            SASS_REGEX="attention_mma_kernel<(.int.)?128, (.bool.0|false), (.int.)?3, (.int.)?2>"
#            (the last argument 1: the one-block kernel of =1) SASS_CMD="python3 bench/cuda_e2e.py $MODEL
#            --caches bf16 --depths 0 --pp-depths 32768 --n-gen 4 --kv-budget-gib 0" with SASS_SKIP
#            past the launches that grow the cache (140 caught a short one on an H100, the twelfth
#            session) and SASS_UNITS the launch's 16-key block steps
#   wgmma    the prefill attention on the warpgroup mma (sm_90a; attention_wide.cuh wg_block_math,
#            wg_block_math_flat): bench/wgmma_layout_probe.cu (its step tiles against the host), the
#            wide prefill's distance from the CPU (the default now the wgmma steps), then pp512 at
#            depth 0 and after 32K, BF16 and GAAC, for each GAACRT_CUDA_PREFILL_WGMMA of WGMMA_VALUES
#            (default d 2 0 d; d: the default, four-block steps from 8,192 tokens; 2 / 4: two- or
#            four-block steps at any length; 0: mma.sync) (not a default stage)
#   expand   a GAAC cache's prefill through BF16 pages (attention_gaac_expand.cu): pp512 at depth 0
#            and after 32K, BF16 and GAAC, for each of EXPAND_VALUES (default d 0 d 0; d: unset, the
#            default; 0: the GAAC kernels decode inside the attention) (not a default stage)
#   layout   tg128 at depth 0 with the weights regrouped by eight and with the GGUF bytes
#            (GAACRT_CUDA_GROUP8=1|0), the same run (not a default stage)
#   q4k      the 8B shape with Q4_K projections (gen_8b.py --body-type q4_k; the same bytes as
#            Q4_0): its decode kernels and tg128 beside the Q4_0 model's (not a default stage)
#   ab       an on/off switch timed in one visit (the same command moves by several percent
#            between visits): AB_SWITCH=GAACRT_CUDA_... set to AB_ON, AB_OFF, AB_ON, AB_OFF (1 and 0
#            unless given) around tg128 of the 8B shape (16- and 8-bit x; AB_CACHES, default bf16, at
#            AB_DEPTHS, default 0) and the SmolLM2 shape's graph decode (not a default stage). E.g. the
#            three-block attention: AB_SWITCH=GAACRT_CUDA_ATTN_BLOCKS_PER_SM AB_ON=3 AB_OFF=2
#            AB_CACHES=bf16,gaac AB_DEPTHS=0,65536 (AB_BITS=16 skips the 8-bit runs). AB_CMD: a
#            command run under each value instead, e.g. the three-block attention against the
#            decode attention table: AB_SWITCH=GAACRT_CUDA_ATTN_BLOCKS_PER_SM AB_ON=3 AB_OFF=2 AB_CMD="$PY
#            bench/cuda_attention.py --kv synthetic --ctx 32768,65536,131072 --batch 1 --lossy e8"
#   rev      code against code in one visit (the last stage run): REV_CMD (default: the decode
#            attention table at 32K-128K) on the tree as carried, then on the tree with REV_DIR laid
#            over it — a folder holding other versions of some files at their repository paths,
#            made here with `git archive REV PATH... | tar -x -C .ab` and carried (.ab is ignored by
#            git) — rebuilt incrementally (~45 s for a few kernel headers on 16 cores); REV_ROUNDS
#            such pairs (default 1); the carried files are put back. Not a default stage. E.g.
#            carry ".ab" and run STAGES="build rev" REV_DIR=.ab. (The thirteenth session timed its
#            GAAC decode cuts this way against 27400a0's two headers.)
# Two builds in one visit without building there (the twenty-seventh session's A/B of the matvecs'
# x order): a wheel's libgaacrt.so xz-compressed is ~30 MB, so two fit the 64 MiB a call carries.
# Here, per build: unzip -q gaacrt-*.whl -d .whl/A && xz -6 -T2 .whl/A/gaacrt/libgaacrt.so; there:
# cp -r .whl/A /tmp/siteA && xz -d /tmp/siteA/gaacrt/libgaacrt.so.xz, then PYTHONPATH=/tmp/siteA
# (plus the gguf wheel installed with --target) before each timed command, alternating A and B.
# Output also goes to $OUT/visit.log.
set -uo pipefail
VISIT_OUT=/tmp/check-out
# shellcheck source=bench/visit_common.sh
. "$(dirname "$0")/visit_common.sh"
STAGES=${STAGES:-build tests profile e2e small}
MODEL=${MODEL:-/tmp/llama31-8b-q4_0.gguf}
PY=${PYTHON:-python3}
has() { [[ " $STAGES " == *" $1 "* ]]; }

gguf_wheel "$PY"
# One build folder for the visit, so that the rev stage's rebuilds are incremental.
# A warm machine keeps that folder between calls, but each call's tree comes with the files' own
# times: a file put back to an older version (a rev overlay copied over the tree in the call
# before, say) looks older than the object built from the other version, and ninja would keep that
# object (the twentieth session profiled the old kernel that way once). So every source whose
# content differs from what the last build saw is touched first.
build_tree() {
  local dir="${BUILD_DIR:-/tmp/skb-visit}" now
  now=$(mktemp)
  find backends src python include CMakeLists.txt -type f | xargs md5sum | sort > "$now"
  [ -f "$dir/.gaacrt-sources.md5" ] && comm -23 "$now" "$dir/.gaacrt-sources.md5" | cut -c35- | xargs -r touch
  MAX_JOBS=16 CMAKE_BUILD_PARALLEL_LEVEL=16 "$PY" -m pip install -q --no-build-isolation --no-deps \
    -Cbuild-dir="$dir" . || { echo "build failed"; exit 1; }
  mv "$now" "$dir/.gaacrt-sources.md5"
}
if has build; then
  if [ -n "${PREBUILT:-}" ]; then
    stage "build: the prebuilt wheel"
    whl=(.whl/gaacrt-*-cp312-*.whl)
    [ -f "${whl[0]}" ] || { echo "PREBUILT: no .whl/gaacrt-*-cp312-*.whl"; exit 1; }
    "$PY" -m pip install -q --no-deps --force-reinstall "${whl[0]}" || { echo "wheel install failed"; exit 1; }
  else
    stage "build"
    build_tree
  fi
fi
if has tests; then
  stage "CUDA tests"
  # (tests/test_cuda_matvec_pieces.py is a host test, CI's; test_cuda_real_model.py skips without
  # the file bench/gpu_real_smollm2.sh brings.)
  GAACRT_CUDA_MMA_MATMUL=${TEST_PREFILL:-} timeout 420 "$PY" -m pytest -q -p no:cacheprovider tests/test_cuda_backend.py \
    tests/test_cuda_ops.py tests/test_cuda_model.py tests/test_cuda_lossy.py tests/test_cuda_timeline.py \
    tests/test_cuda_real_model.py tests/test_fused_ops.py tests/test_bench_hooks.py 2>&1 | tail -25
fi
if has profile || has e2e || has ncu || has prefill || has layout || has q4k || { has ab && [ -z "${AB_CMD:-}" ]; } ||
  has wide || has expand || has sass || has wgmma; then
  [ -s "$MODEL" ] || "$PY" bench/gen_8b.py "$MODEL"
fi
if has profile; then
  stage "kernel profile, 8B shape, depth 0"
  # PDL off: with it, a kernel's time includes its wait for the previous one.
  # shellcheck disable=SC2086
  GAACRT_CUDA_PDL=0 timeout 200 "$PY" bench/cuda_kernel_profile.py "$MODEL" --tokens 8 ${PROFILE_ARGS:-} 2>&1 | tail -150
fi
if has e2e; then
  stage "e2e: pp512 (tensor cores) and tg128 at depth 0"
  # shellcheck disable=SC2086
  timeout 300 "$PY" bench/cuda_e2e.py "$MODEL" --caches bf16 --depths 0 --kv-budget-gib 0 ${E2E_ARGS:-} 2>&1 | tail -45
fi
if has small; then
  stage "SmolLM2 shape decode"
  timeout 200 "$PY" bench/cuda_decode.py --depths 16 2>&1 | tail -12
fi
if has prefill; then
  for PP in ${PREFILL_PATHS:-bf16 q8 q16:64 q16 q16:auto}; do
    M=${PP%%:*} TOK=128
    [[ $PP == *:* ]] && TOK=${PP#*:}  # q16:64 -> the int8 kernel's 64-token thread blocks (128, the default, otherwise)
    stage "prefill matmul $M, $TOK-token tiles: pp512"
    GAACRT_CUDA_MMA_MATMUL=$M GAACRT_CUDA_Q8MMA_TOKENS=$TOK timeout 120 "$PY" bench/cuda_e2e.py "$MODEL" --caches bf16 \
      --depths 0 --kv-budget-gib 0 --n-gen 8 2>&1 | grep -E "^pp512"
    GAACRT_CUDA_MMA_MATMUL=$M GAACRT_CUDA_Q8MMA_TOKENS=$TOK GAACRT_CUDA_PDL=0 timeout 120 "$PY" bench/cuda_kernel_profile.py \
      "$MODEL" --prefill 512 2>&1 | grep -E "^model|^\| \`" | head -7
  done
fi
if has ncu; then
  stage "ncu: ${NCU_REGEX:=matvec_q8|norm_quant}, skip ${NCU_SKIP:=200}, count ${NCU_COUNT:=7}"
  GAACRT_CUDA_PDL=0 timeout 300 ncu --clock-control none -k "regex:$NCU_REGEX" --launch-skip "$NCU_SKIP" \
    --launch-count "$NCU_COUNT" --section SpeedOfLight --section Occupancy --section LaunchStats \
    --section WarpStateStats --section MemoryWorkloadAnalysis \
    "$PY" bench/cuda_kernel_profile.py "$MODEL" --tokens 2 --graph 0 > "$OUT/ncu.txt" 2>&1
  grep -E "^  [a-z_]+.*\(|Duration|DRAM Throughput|Memory Throughput|Achieved Occupancy|Theoretical Occupancy|Registers Per|Block Limit|Grid Size|Warp Cycles Per Issued|L1/TEX Hit|L2 Hit|Mem Busy|Max Bandwidth" \
    "$OUT/ncu.txt" | cut -c1-150 | head -150
fi
if has sass; then
  : "${SASS_REGEX:=attention_mma_kernel<.int.128, .bool.1}" "${SASS_SKIP:=10}" "${SASS_UNITS:=32768}"
  : "${SASS_CMD:=$PY bench/cuda_attention.py --kv synthetic --ctx 65536 --batch 1 --lossy= --reps 2}"
  stage "sass: $SASS_REGEX, skip $SASS_SKIP, under: $SASS_CMD"
  # shellcheck disable=SC2086
  timeout 300 ncu --clock-control none --kernel-name-base demangled -k "regex:$SASS_REGEX" --launch-skip "$SASS_SKIP" \
    --launch-count 1 --warp-sampling-interval 0 --section SpeedOfLight --section WarpStateStats \
    --section SourceCounters -o "$OUT/sass" $SASS_CMD > "$OUT/sass_run.txt" 2>&1
  ncu --import "$OUT/sass.ncu-rep" --page source --print-source sass --csv > "$OUT/sass.csv" 2>&1 &&
    "$PY" bench/ncu_sass_regions.py "$OUT/sass.csv" --units "$SASS_UNITS" | head -60
  ncu --import "$OUT/sass.ncu-rep" --print-details all 2>&1 | grep -E "Duration|Warp Cycles Per Issued|Stall (Wait|Long|Short)" | head -6
  rm -f "$OUT/sass.ncu-rep"
fi
# pp512 at depth 0 and after 32K for each value of the switch $1 in $2, caches $3 (bf16,gaac).
pp512_by() {
  for v in $2; do
    echo "$1=$v (${3:-bf16,gaac}):"
    env "$1=$v" timeout 200 "$PY" bench/cuda_e2e.py "$MODEL" --caches "${3:-bf16,gaac}" --depths 0 \
      --pp-depths 0,32768 --n-gen 4 --kv-budget-gib 0 2>&1 | grep -E "^pp512"
  done
}
if has wide; then
  stage "wide prefill row groups: precision against the CPU, then pp512 at depth 0 / 32K by GAACRT_CUDA_PREFILL_WIDE"
  timeout 120 "$PY" bench/wide_prefill_precision.py 2>&1 | tail -8
  pp512_by GAACRT_CUDA_PREFILL_WIDE "${WIDE_VALUES:-1 2 1 2}"
  pp512_by GAACRT_CUDA_PREFILL_WIDE "${WIDE_E8_VALUES-1 0}" e8  # (WIDE_E8_VALUES="" skips the E8 runs)
fi
if has wgmma; then
  stage "wgmma: the step tile's layout probe"
  nvcc -std=c++17 -arch=sm_90a -I backends/cuda -o /tmp/wgmma_probe bench/wgmma_layout_probe.cu 2>&1 | grep -v C7519
  /tmp/wgmma_probe
  stage "wgmma: the wide prefill against the CPU, then pp512 at depth 0 / 32K by GAACRT_CUDA_PREFILL_WGMMA"
  timeout 120 "$PY" bench/wide_prefill_precision.py 2>&1 | tail -8
  pp512_by GAACRT_CUDA_PREFILL_WGMMA "${WGMMA_VALUES:-d 2 0 d}"
fi
if has expand; then
  stage "GAAC prefill through BF16 pages: pp512 at depth 0 / 32K by GAACRT_CUDA_GAAC_EXPAND"
  for X in ${EXPAND_VALUES:-d 0 d 0}; do  # d: unset (the default)
    echo "GAACRT_CUDA_GAAC_EXPAND=$X:"
    if [ "$X" = d ]; then unset GAACRT_CUDA_GAAC_EXPAND; else export GAACRT_CUDA_GAAC_EXPAND=$X; fi
    timeout 200 "$PY" bench/cuda_e2e.py "$MODEL" --caches bf16,gaac --depths 0 --pp-depths 0,32768 --n-gen 4 \
      --kv-budget-gib 0 2>&1 | grep -E "^pp512"
  done
  unset GAACRT_CUDA_GAAC_EXPAND
fi
if has layout; then
  for G in 1 0; do
    stage "tg128, GAACRT_CUDA_GROUP8=$G"
    GAACRT_CUDA_GROUP8=$G timeout 120 "$PY" bench/cuda_e2e.py "$MODEL" --caches bf16 --depths 0 --pp 0 --kv-budget-gib 0 2>&1 |
      grep -E "^\| 0 \|"
  done
fi
if has ab; then
  : "${AB_SWITCH:?set AB_SWITCH to the variable to flip}"
  AB_VALUES="${AB_ON:-1} ${AB_OFF:-0} ${AB_ON:-1} ${AB_OFF:-0}"
  if [ -n "${AB_CMD:-}" ]; then
    for v in $AB_VALUES; do
      stage "ab: $AB_SWITCH=$v: $AB_CMD"
      # shellcheck disable=SC2086
      env "$AB_SWITCH=$v" timeout 200 $AB_CMD 2>&1 | grep -v "^|---" | tail -25
    done
  else
    for bits in ${AB_BITS:-16 8}; do for v in $AB_VALUES; do
      echo "$AB_SWITCH=$v, ${bits}-bit x:"
      env "$AB_SWITCH=$v" timeout 200 "$PY" bench/cuda_e2e.py "$MODEL" --caches "${AB_CACHES:-bf16}" \
        --depths "${AB_DEPTHS:-0}" --pp 0 --kv-budget-gib 0 --act-bits "$bits" 2>&1 | grep -E "^tg128" | cut -c1-70
    done; done
    for v in $AB_VALUES; do
      echo -n "$AB_SWITCH=$v: "
      env "$AB_SWITCH=$v" timeout 60 "$PY" bench/cuda_decode.py --depths 16 2>&1 | tail -1
    done
  fi
fi
if has q4k; then
  K_MODEL=${K_MODEL:-/tmp/llama31-8b-q4_k.gguf}
  [ -s "$K_MODEL" ] || "$PY" bench/gen_8b.py "$K_MODEL" --body-type q4_k
  stage "q4_k body: decode kernels (PDL off), then tg128 of each model"
  GAACRT_CUDA_PDL=0 timeout 120 "$PY" bench/cuda_kernel_profile.py "$K_MODEL" --tokens 8 2>&1 | grep -E "^model|^ +[0-9.]+ +matvec" | head -6
  for M in "$MODEL" "$K_MODEL"; do
    timeout 120 "$PY" bench/cuda_e2e.py "$M" --caches bf16 --depths 0 --pp 0 --kv-budget-gib 0 2>&1 | grep -E "^\| 0 \|"
  done
fi
if has rev; then
  [ -d "${REV_DIR:-}" ] || { echo "rev: REV_DIR (${REV_DIR:-unset}) is not a folder"; exit 1; }
  REV_CMD=${REV_CMD:-"$PY bench/cuda_attention.py --kv synthetic --ctx 32768,65536,131072 --batch 1 --lossy e8"}
  mapfile -t REV_FILES < <(cd "$REV_DIR" && find . -type f | sed 's|^\./||' | sort)
  REV_KEEP=$(mktemp -d)
  for f in "${REV_FILES[@]}"; do  # the carried versions, put back at the end
    [ -f "$f" ] || { echo "rev: $f is not in the tree"; exit 1; }
    mkdir -p "$REV_KEEP/$(dirname "$f")" && cp "$f" "$REV_KEEP/$f"
  done
  echo "rev: ${#REV_FILES[@]} files from $REV_DIR: ${REV_FILES[*]}"
  for ((i = 0; i < ${REV_ROUNDS:-1}; ++i)); do
    for side in carried "$REV_DIR"; do
      stage "rev: the tree with $side's files"
      # Plain cp, never cp -p: a file put back with its old mtime would look older than the object
      # built from the other version, and the build would keep that object.
      if [ "$i$side" != 0carried ] || ! has build; then
        for f in "${REV_FILES[@]}"; do
          if [ "$side" = carried ]; then cp "$REV_KEEP/$f" "$f"; else cp "$REV_DIR/$f" "$f"; fi
        done
        build_tree
      fi  # (else the build stage built the carried tree just now)
      eval "$REV_CMD"
    done
  done
  for f in "${REV_FILES[@]}"; do cp "$REV_KEEP/$f" "$f"; done
  echo "rev: the carried files are back (the installed build is $REV_DIR's)"
fi
stage "done"
