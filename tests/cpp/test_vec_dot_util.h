// test_vec_dot_util.h — inputs the kernel tests share (test_vec_dot.cpp, test_vec_dot_q16.cpp):
// plausible random weight rows of every type, Gaussian activations, odd row lengths.
#pragma once
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "common/half.h"
#include "quant/types.h"

namespace gaacrt::test {

inline const GGMLType kTypes[] = {GGMLType::F32,  GGMLType::F16,  GGMLType::BF16,   GGMLType::Q4_0, GGMLType::Q4_1,
                                  GGMLType::Q5_0, GGMLType::Q5_1, GGMLType::Q8_0,   GGMLType::IQ4_NL,
                                  GGMLType::Q4_K, GGMLType::Q5_K, GGMLType::Q6_K,   GGMLType::IQ4_XS};

// Random blocks: random quant bytes, scale fields set to plausible fp16 values (random bytes
// there would be NaN/Inf/huge half the time).
inline std::vector<uint8_t> random_row(GGMLType t, int64_t n, std::mt19937& rng) {
  const gaacrt::TypeTraits* tr = gaacrt::type_traits(t);
  std::vector<uint8_t> row(gaacrt::row_bytes(t, n));
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> scale(1e-4f, 2e-3f), wval(-0.05f, 0.05f);
  for (auto& b : row) b = static_cast<uint8_t>(byte(rng));
  auto put16 = [](uint8_t* p, uint16_t v) { std::memcpy(p, &v, 2); };
  if (tr->block_size == 1) {  // float weights
    for (int64_t i = 0; i < n; ++i) {
      const float v = wval(rng);
      if (t == GGMLType::F32) std::memcpy(&row[4 * i], &v, 4);
      if (t == GGMLType::F16) put16(&row[2 * i], gaacrt::f32_to_fp16(v));
      if (t == GGMLType::BF16) put16(&row[2 * i], gaacrt::f32_to_bf16(v));
    }
    return row;
  }
  for (size_t off = 0; off < row.size(); off += tr->type_size) {
    uint8_t* b = &row[off];
    if (t == GGMLType::Q6_K) { put16(b + 208, gaacrt::f32_to_fp16(scale(rng))); continue; }
    put16(b, gaacrt::f32_to_fp16(scale(rng)));  // d
    if (t == GGMLType::Q4_1 || t == GGMLType::Q5_1) put16(b + 2, gaacrt::f32_to_fp16(wval(rng)));  // m
    if (t == GGMLType::Q4_K || t == GGMLType::Q5_K) put16(b + 2, gaacrt::f32_to_fp16(scale(rng)));  // dmin
  }
  return row;
}

inline std::vector<float> random_activations(int64_t n, std::mt19937& rng) {
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<float> x(n);
  for (auto& v : x) v = g(rng);
  return x;
}

inline int64_t test_length(GGMLType t, int blocks) {
  const uint32_t bs = gaacrt::type_traits(t)->block_size;
  return bs == 1 ? 32 * blocks + 5 : int64_t(bs) * blocks;  // odd lengths for the float tails
}

}  // namespace gaacrt::test
