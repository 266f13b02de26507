#!/usr/bin/env bash
# bench/gpu_real_smollm2.sh — the real SmolLM2-135M-Instruct (Q4_1, 98 MB) on the GPU machine,
# which takes at most 64 MiB of files per call and reaches no package index. Here, once:
#
#   mkdir -p .gpu/smol && split -n 2 -d ~/.cache/gaacrt/SmolLM2-135M-Instruct.Q4_1.gguf .gpu/smol/part
#
# then two calls back to back (the machine keeps /tmp while it stays warm, 30 s), each carrying
# .gpu with one part (move the other aside) and running this script: every call files the parts it
# finds; once all are there and the sha256 matches, the file is assembled and the stages run:
#   tests   tests/test_cuda_real_model.py (CPU vs CUDA logits and a greedy reply)
#   decode  bench/cuda_decode.py --model: tg128 of the real model, eager and graph
#   profile bench/cuda_kernel_profile.py: its decode step kernel by kernel, PDL off
set -uo pipefail
cd "$(dirname "$0")/.."
SHA=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
STORE=/tmp/smollm2-parts
MODEL=/tmp/SmolLM2-135M-Instruct.Q4_1.gguf
STAGES=${STAGES:-tests decode profile}
has() { [[ " $STAGES " == *" $1 "* ]]; }
mkdir -p "$STORE"
cp .gpu/smol/part* "$STORE"/ 2>/dev/null
echo "parts here: $(ls "$STORE" | tr '\n' ' ')"
if [ ! -s "$MODEL" ]; then
  cat "$STORE"/part* > "$MODEL.tmp"
  if [ "$(sha256sum < "$MODEL.tmp" | cut -d' ' -f1)" != "$SHA" ]; then
    rm -f "$MODEL.tmp"
    echo "not all parts yet (sha256 differs): send the next one"
    exit 0
  fi
  mv "$MODEL.tmp" "$MODEL"
fi
echo "assembled $MODEL, sha256 ok"
export GAACRT_MODEL_SMOLLM2_135M=$MODEL
if has tests; then
  echo "=== tests/test_cuda_real_model.py"
  (cd tests && timeout 300 python3 -m pytest -q -s -p no:cacheprovider test_cuda_real_model.py 2>&1 | grep -E "passed|failed|Error|real SmolLM2|reply|assert" | head -20)
fi
if has decode; then
  echo "=== bench/cuda_decode.py --model (real SmolLM2), depth 16"
  timeout 200 python3 bench/cuda_decode.py --model "$MODEL" --depths 16 --n-gen 128 2>&1 | tail -3
fi
if has profile; then
  echo "=== kernel profile, real SmolLM2, PDL off"
  GAACRT_CUDA_PDL=0 timeout 200 python3 bench/cuda_kernel_profile.py "$MODEL" --tokens 16 2>&1 | tail -40
fi
