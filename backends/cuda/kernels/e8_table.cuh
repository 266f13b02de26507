// e8_table.cuh — the packed E8 prototype table (1 KiB, codec/e8/e8_codebook.h) in device memory,
// for the kernels that decode E8 keys: each thread block copies it into shared memory.
#pragma once
#include <cstdint>

#include "codec/e8/e8_codebook.h"

namespace gaacrt::cuda {

static __device__ const uint32_t g_e8_table[E8_N_PROTO] = {GAACRT_E8_PACKED_WORDS};

}  // namespace gaacrt::cuda
