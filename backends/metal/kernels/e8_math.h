// e8_math.h — the E8 rotation on the GPU: the 8-lane dot product in exactly the host's order
// (src/codec/e8/e8_simd.h e8_dot8: lanes k accumulate a[j+k]*b[j+k], combined as
// ((l0+l4)+(l2+l6))+((l1+l5)+(l3+l7)), no FMA), so rotated keys, their norms and hence the E8 codes
// come out bit-identical to the CPU encoder's; and rotate_rows, the queries into the keys' basis.
#pragma once
#include "common.h"
#include "metal/kernels/args.h"

namespace gaacrt {
namespace mtl {

template <typename PA, typename PB>
inline float e8_dot8_gpu(PA a, PB b, uint32_t d) {
  float l[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
  for (uint32_t j = 0; j < d; j += 8)
    for (uint32_t k = 0; k < 8; ++k) l[k] += a[j + k] * b[j + k];
  return ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]));
}

// y(n_rows, d) = x(n_rows, d) . R^T with R (d, d) row-major: y_i = <R_i, x> (e8_rotate).
template <typename T>
kernel void rotate_rows(constant RotateArgs& a [[buffer(0)]], device const T* x [[buffer(1)]],
                        device const T* rot [[buffer(2)]], device T* y [[buffer(3)]], GAACRT_POSITIONS) {
  const uint32_t id = tgpig.x * ROTATE_THREADS + tiitg;
  if (id >= a.n_rows * a.d) return;
  const uint32_t r = id / a.d, i = id % a.d;
  y[id] = e8_dot8_gpu(rot + (uint64_t)i * a.d, x + (uint64_t)r * a.d, a.d);
}

}  // namespace mtl
}  // namespace gaacrt
