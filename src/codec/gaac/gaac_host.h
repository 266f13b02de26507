// gaac_host.h — the fast host (CPU) decoder of a GAAC BF16 tile: the same format and the same
// word-level steps as gaac_format.h, with the final byte interleave done 16 values at a time by
// SSE2 (x86-64 baseline) or NEON (aarch64 baseline); elsewhere it is the portable reference.
// This is the routine a CPU attention loader calls to expand one tile into an L1 scratch tile.
#pragma once
#include <cstdint>

#include "gaac_format.h"

namespace gaacrt {

// Decodes a whole BF16 tile into out[t * stride + c] (t < 16, c < d). Checks the tags first
// (GAAC_STATUS_BAD_TAG / ESCAPE_OVERRUN, nothing written) and reads nothing past fixed + capacity.
// Bit-identical to gaac_decode_tile.
GaacCheck gaac_decode_tile_fast(const uint8_t* slot, int32_t d, uint32_t capacity, const uint8_t* b3, const uint8_t* b4,
                                uint16_t* out, int32_t stride);

// Which implementation gaac_decode_tile_fast uses in this build: "sse2", "neon" or "portable".
const char* gaac_decode_tile_fast_isa();

}  // namespace gaacrt
