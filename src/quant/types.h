// types.h — ggml tensor type ids, their block geometry, and which ones gaacrt computes with.
//
// The GGUF reader accepts every type id ggml defines (so `gaac-inspect` can describe any file);
// the model loader accepts only the types with `supported == true` and names the others.
#pragma once
#include <cstddef>
#include <cstdint>

namespace gaacrt {

enum class GGMLType : uint32_t {
  F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q8_1 = 9,
  Q2_K = 10, Q3_K = 11, Q4_K = 12, Q5_K = 13, Q6_K = 14, Q8_K = 15,
  IQ2_XXS = 16, IQ2_XS = 17, IQ3_XXS = 18, IQ1_S = 19, IQ4_NL = 20, IQ3_S = 21, IQ2_S = 22,
  IQ4_XS = 23, I8 = 24, I16 = 25, I32 = 26, I64 = 27, F64 = 28, IQ1_M = 29, BF16 = 30,
  TQ1_0 = 34, TQ2_0 = 35, MXFP4 = 39, NVFP4 = 40, Q1_0 = 41,
};

struct TypeTraits {
  const char* name;     // ggml's lower-case name, e.g. "q4_K"
  uint32_t block_size;  // elements per block along ne[0]
  uint32_t type_size;   // bytes per block
  bool supported;       // gaacrt dequantizes and multiplies with it (weights)
};

// nullptr for an id ggml does not define (removed ids 4, 5, 31-33, 36-38 included).
const TypeTraits* type_traits(uint32_t type_id);
inline const TypeTraits* type_traits(GGMLType t) { return type_traits(static_cast<uint32_t>(t)); }

// Bytes of one row of `n` elements; n must be a multiple of the block size.
inline size_t row_bytes(GGMLType t, int64_t n) {
  const TypeTraits* tr = type_traits(t);
  return static_cast<size_t>(n / tr->block_size) * tr->type_size;
}

const char* type_name(GGMLType t);  // "q4_K", or "type#N" for an unknown id

}  // namespace gaacrt
