#!/usr/bin/env bash
# bench/llama_bench_gpu.sh — llama.cpp's llama-bench as the baseline for bench/cuda_e2e.py (issue 7),
# built from the llama.cpp source that the llama-cpp-python sdist vendors, on a machine with no
# network (the GPU machine).
#
#   bench/llama_bench_gpu.sh build [TARBALL]      configure + build the llama-bench target only
#   bench/llama_bench_gpu.sh run MODEL [ARGS...]  llama-bench -m MODEL -fa 1 ARGS (default ARGS below)
#
# TARBALL (default: the newest .llamacpp/llama.cpp-*.tar.gz under the repo root) is a trimmed copy
# of llama-cpp-python's vendor/llama.cpp: models, docs, tests, examples and the other backends'
# sources (vulkan, sycl, metal, opencl, ...) dropped, ggml-cpu and ggml-cuda kept. It is made
# on a machine with a registry and carried to the GPU machine (.llamacpp/ is git-ignored: carry it),
# e.g. for llama-cpp-python 0.3.36 (6.5 MB):
#   pip download --no-deps --no-binary :all: llama-cpp-python==0.3.36 -d /tmp/lcp && cd /tmp/lcp &&
#   tar xzf llama_cpp_python-0.3.36.tar.gz && cd llama_cpp_python-0.3.36/vendor &&
#   rm -rf llama.cpp/{models,docs,media,benches,tools/ui} &&
#   for b in virtgpu cann openvino webgpu et metal hexagon sycl vulkan opencl; do rm -rf llama.cpp/ggml/src/ggml-$b; done &&
#   echo "llama-cpp-python 0.3.36 sdist's vendor/llama.cpp, trimmed" > llama.cpp/README.gaacrt &&
#   tar czf "$REPO/.llamacpp/llama.cpp-0.3.36.tar.gz" llama.cpp
#
# ggml-cuda links cuBLAS. A CUDA toolkit without it (nvcc-only images, such as this project's CPU
# machines) is completed from the nvidia-cublas Python wheel that PyTorch installs (nvidia/cu13/
# include and lib): its headers are linked into $LLAMA_DIR/cublas/include (only cublas*, so no other
# CUDA header is shadowed) and its libraries named to CMake directly.
#
# Environment: LLAMA_DIR (build root, default /tmp/llamacpp), LLAMA_CUDA (ON; OFF for a CPU-only
# check), LLAMA_CUDA_ARCH (90), JOBS (nproc), CUBLAS_ROOT (where to look for libcublas.so.* and
# cublas_v2.h when the toolkit lacks them; default: python3's `nvidia` package folder),
# LLAMA_TARGET (llama-bench).
# Default run ARGS: -p 512 -n 128 -d 0,32768,65536 -r 3 -o md -oe json — pp512 and tg128 after a
# context of each depth, f16 KV (llama-bench's default), flash attention on; the table on stdout,
# JSON on stderr (bench/cuda_e2e.py --report --llama-json reads it). llama-bench fills a depth with
# a real prefill once and restores that state (host copy) for the repetitions and for the next test
# at the same depth (order: pp512@0, tg128@0, pp512@32K, tg128@32K, pp512@64K, tg128@64K).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${LLAMA_DIR:-/tmp/llamacpp}
cmd=${1:-}
shift || true

# Prints CMake arguments for ggml-cuda's libraries that the CUDA toolkit may lack: cuBLAS (see above)
# and the driver library libcuda, which ggml-cuda links for its VMM memory pool. libcuda is looked
# for among the toolkit's stubs (CMake's own search), then the driver's folders; without it the
# build uses GGML_CUDA_NO_VMM (ggml's cudaMalloc pool: same kernels, another allocator).
cuda_lib_args() {
  local nvcc_bin cuda_root root_dir lib inc f
  nvcc_bin=$(command -v nvcc || true)
  [ -n "$nvcc_bin" ] || return 0
  cuda_root=$(cd "$(dirname "$(readlink -f "$nvcc_bin")")/.." && pwd)
  if ! ls "$cuda_root"/lib64/stubs/libcuda.so "$cuda_root"/targets/*/lib/stubs/libcuda.so >/dev/null 2>&1; then
    f=$( (ls /usr/local/nvidia/lib64/libcuda.so* /usr/local/nvidia/lib/libcuda.so* /usr/lib/x86_64-linux-gnu/libcuda.so* \
          /usr/lib64/libcuda.so* 2>/dev/null; ldconfig -p 2>/dev/null | grep -o '/[^ ]*libcuda\.so[.0-9]*$') | head -1 || true)
    if [ -n "$f" ]; then
      echo "llama_bench_gpu.sh: driver library $f" >&2
      echo "-DCUDA_cuda_driver_LIBRARY=$f"
    else
      echo "llama_bench_gpu.sh: no libcuda found: building with GGML_CUDA_NO_VMM=ON" >&2
      echo "-DGGML_CUDA_NO_VMM=ON"
    fi
  fi
  if ls "$cuda_root"/lib64/libcublas.so* "$cuda_root"/targets/*/lib/libcublas.so* >/dev/null 2>&1; then return 0; fi
  root_dir=${CUBLAS_ROOT:-$(python3 -c 'import nvidia; print(list(nvidia.__path__)[0])' 2>/dev/null || true)}
  lib=$(find "$root_dir" -name 'libcublas.so*' 2>/dev/null | head -1 || true)
  inc=$(find "$root_dir" -name 'cublas_v2.h' 2>/dev/null | head -1 || true)
  if [ -z "$lib" ] || [ -z "$inc" ]; then
    echo "llama_bench_gpu.sh: no cuBLAS in the CUDA toolkit ($cuda_root) nor under '${root_dir:-python3 nvidia package}'" >&2
    return 0
  fi
  lib=$(dirname "$lib") inc=$(dirname "$inc")
  mkdir -p "$dir/cublas/include"
  for f in "$inc"/cublas*.h; do ln -sf "$f" "$dir/cublas/include/"; done
  echo "llama_bench_gpu.sh: cuBLAS from $lib (headers $inc)" >&2
  echo "-DCUDA_cublas_LIBRARY=$(ls "$lib"/libcublas.so* | head -1)"
  echo "-DCUDA_cublasLt_LIBRARY=$(ls "$lib"/libcublasLt.so* | head -1)"
  echo "-DCMAKE_CUDA_FLAGS=-I$dir/cublas/include"
  echo "-DCMAKE_CXX_FLAGS=-I$dir/cublas/include"
}

case "$cmd" in
build)
  tarball=${1:-$(ls -t "$root"/.llamacpp/llama.cpp-*.tar.gz 2>/dev/null | head -1)}
  [ -f "$tarball" ] || { echo "llama_bench_gpu.sh: no llama.cpp tarball (looked for .llamacpp/llama.cpp-*.tar.gz under $root)" >&2; exit 2; }
  rm -rf "$dir/src" && mkdir -p "$dir/src"
  tar xzf "$tarball" -C "$dir/src" --strip-components=1
  # The tarball has no .git: name the commit (from its README.gaacrt) so llama-bench's build_commit says it.
  commit=$(grep -o 'commit [0-9a-f]\{40\}' "$dir/src/README.gaacrt" 2>/dev/null | head -1 | cut -c8-14 || true)
  extra=()
  if [ "${LLAMA_CUDA:-ON}" = ON ]; then mapfile -t extra < <(cuda_lib_args); fi
  # Only the llama-bench target is built; tests, examples, server and web UI are not configured,
  # and nothing is fetched (no curl/openssl, no prebuilt UI).
  cmake -S "$dir/src" -B "$dir/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DGGML_CUDA="${LLAMA_CUDA:-ON}" -DCMAKE_CUDA_ARCHITECTURES="${LLAMA_CUDA_ARCH:-90}" \
    -DBUILD_SHARED_LIBS=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF \
    -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_UI=OFF \
    -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_COMMIT="${commit:-unknown}" "${extra[@]}"
  cmake --build "$dir/build" --target "${LLAMA_TARGET:-llama-bench}" -j "${JOBS:-$(nproc)}"
  echo "built $dir/build: ${LLAMA_TARGET:-llama-bench}"
  ;;
run)
  model=${1:?usage: llama_bench_gpu.sh run MODEL [llama-bench args]}
  shift
  [ $# -gt 0 ] || set -- -p 512 -n 128 -d 0,32768,65536 -r 3 -o md -oe json
  exec "$dir/build/bin/llama-bench" -m "$model" -fa 1 "$@"
  ;;
*)
  sed -n '2,20p' "$0" >&2
  exit 2
  ;;
esac
