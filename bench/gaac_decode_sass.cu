// gaac_decode_sass.cu — counts the SASS instructions of the GAAC tile decode used by the CUDA
// attention kernel (backends/cuda/kernels/attention_tiles.cuh, decode_gaac_lane: one lane, its 8
// groups = 64 values, read from a staged slot in shared memory, written as BF16 rows). k_frame is
// the same kernel without the decode; the difference / 64 is the per-element cost.
//
// Counts (nvcc 13.0, sm_90; cuobjdump from Triton's wheel works on a machine without a GPU):
//   55af8e4 (predicated X/R byte loads per group): k_decode 512, k_frame 32 -> (512 - 32) / 64 = 7.5 per
//           element (47 LDS), the same for every mode mix.
//   gaackern (gaac_lane.cuh: X bytes by PRMT, bases by mask, raw repaired in a rare loop): k_decode 376
//           -> (376 - 32) / 64 = 5.4 per element counting the raw loop; the path a lane takes when it
//           has no raw group ends at instruction 313, i.e. (313 - 21 real frame instructions) / 64 =
//           4.6 per element, and each raw group adds a 47-instruction loop trip. 14 LDS.
//
//   nvcc -O3 -std=c++17 -arch=sm_90 --fmad=false -Isrc -Ibackends -cubin bench/gaac_decode_sass.cu -o /tmp/d.cubin
//   cuobjdump -sass /tmp/d.cubin | awk '/Function :/{f=$3} /\/\*[0-9a-f]{4,5}\*\/ /{n[f]++} END{for(k in n) print n[k], k}'  # gawk
#include "cuda/kernels/attention_tiles.cuh"

using namespace gaacrt;
using namespace gaacrt::cuda::attn;

__global__ void k_decode(const uint32_t* in) {
  extern __shared__ __align__(16) uint8_t sm[];
  const int li = threadIdx.x;
  const GaacU32x2 b3{in[0], in[1]}, b4{in[2], in[3]};
  decode_gaac_lane(sm, 128, li, gaac_lane_tags(sm, 128, li), in[4 + li], in[40 + li], b3, b4,
                   reinterpret_cast<uint16_t*>(sm + 8192), 136);
}

__global__ void k_frame(const uint32_t* in) {
  extern __shared__ __align__(16) uint8_t sm[];
  const int li = threadIdx.x;
  const GaacU32x2 b3{in[0], in[1]}, b4{in[2], in[3]};
  *reinterpret_cast<uint4*>(sm + 8192 + 16 * li) =
      make_uint4(in[4 + li] ^ b3.lo ^ b4.lo, in[40 + li] ^ b3.hi ^ b4.hi, 0u, 0u);
}
