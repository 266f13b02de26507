// e8_keys.cpp — E8 k2v2 host codec: key encode / decode over the cache's slots, scoring paths
// (B) decode-in-dot and (A) per-query tables, and the value tiles (spec/e8.md §5-§8; layouts in
// e8_layout.h).
#include "e8_keys.h"

#include <cmath>
#include <cstring>

#include "codec/scalar/scalar_codecs.h"
#include "common/error.h"
#include "common/half.h"
#include "e8_encode.h"
#include "e8_layout.h"
#include "e8_simd.h"
#include "kv/kv_view.h"

namespace gaacrt {

static_assert(E8_TILE_TOKENS == KV_BLOCK_TOKENS, "an E8 slot holds one cache block");
static_assert(E8_TILE_MAX_DIM == KV_TILE_MAX_DIM, "E8 halves are the cache's tiles");

namespace {

constexpr int32_t kTok = E8_TILE_TOKENS;

void check_head_dim(int32_t d, const char* op) {
  if (!e8_head_dim_ok(d))
    throw Error("e8", "bad_head_dim",
                strfmt("%s: head dim %d is not supported (multiples of 32 up to 128, of 128 up to 1024)", op, d));
}

void check_codec(const E8LayerCodec& c, const char* op) {
  check_head_dim(c.d, op);
  if (c.rot.size() != (size_t)c.d * (size_t)c.d)
    throw Error("e8", "bad_codec", strfmt("%s: rotation has %zu entries, expected %d x %d", op, c.rot.size(), c.d, c.d));
}

// The CPU decoder's tables, expanded once from the 1 KiB packed table (spec §3: expanding is fine
// on a CPU; GPUs keep the 1 KiB form): base[a] = a' as 8 floats in natural order, and per raw
// sign byte s the float sign masks of its effective flips e = s ^ pi plus its shift. A block
// then decodes as 8 lanes of (base XOR mask) + shift: no nibble extraction, vectorizable.
struct DecodeTables {
  float base[E8_N_PROTO][E8_BLOCK];
  uint32_t mask[256][E8_BLOCK];
  float shift[256];
  DecodeTables() {
    for (int32_t a = 0; a < E8_N_PROTO; ++a)
      for (int32_t i = 0; i < E8_BLOCK; ++i) base[a][i] = 0.5f * (float)e8_word_base_x2(e8_packed_table[a], i);
    for (uint32_t s = 0; s < 256; ++s) {
      const uint32_t pi = e8_parity32(s), e = s ^ pi;
      for (int32_t i = 0; i < E8_BLOCK; ++i) mask[s][i] = ((e >> e8_dim2bit(i)) & 1u) << 31;
      shift[s] = pi ? -0.25f : 0.25f;
    }
  }
};
const DecodeTables kDec;

// Decode the d/8 codes of one token from its quads (all halves) into g (rotated basis, lattice
// units): g[8j + i] for block j. Equal to e8_decode_word on every code (both exact).
void decode_token_g(const uint8_t* const* slots, int32_t d, int32_t t, float* g) {
  const int32_t T = e8_tile_dim(d), nq = T / E8_QUAD_DIMS;
  for (int32_t h = 0; h < e8_n_half(d); ++h)
    for (int32_t q = 0; q < nq; ++q) {
      const E8Quad quad = e8_k_quad(slots[h], T, t, q);
      for (int32_t i = 0; i < E8_QUAD; ++i) {
        const uint32_t s = e8_gather_bits(e8_quad_spread_signs(quad.signs, i));
        const float* b = kDec.base[e8_quad_proto(quad.proto, i)];
        const uint32_t* m = kDec.mask[s];
        const float sh = kDec.shift[s];
        e8_decode_block8(b, m, sh, g + h * T + q * E8_QUAD_DIMS + i * E8_BLOCK);
      }
    }
}

std::vector<float> bf16_halves_to_f32(const uint16_t* const* pages, int32_t d) {
  const int32_t T = e8_tile_dim(d);
  std::vector<float> x((size_t)kTok * d);
  for (int32_t h = 0; h < e8_n_half(d); ++h)
    for (int32_t t = 0; t < kTok; ++t)
      for (int32_t c = 0; c < T; ++c) x[(size_t)t * d + h * T + c] = bf16_to_f32(pages[h][t * T + c]);
  return x;
}

}  // namespace

float e8_alpha(int32_t d) { return d == 128 ? 12.0f : (float)(1.04 * std::sqrt((double)d)); }

E8LayerCodec e8_layer_codec(int32_t d, int32_t layer, uint64_t seed, bool block_mean) {
  check_head_dim(d, "e8_layer_codec");
  E8LayerCodec c;
  c.d = d;
  c.alpha = block_mean ? e8_alpha(d) * E8_BLOCK_ALPHA_SCALE : e8_alpha(d);
  c.block_mean = block_mean;
  c.rot = e8_haar_rotation(d, seed, layer);
  return c;
}

// Block centering, on a block's rotated keys kr (16, d), in place: fits m~ and subtracts it from
// the tokens it brings closer to zero. In fp32, sums in token order:
//   m0 = fp16(mean of all 16 tokens);  C = {t : |k~_t - m0|^2 < |k~_t|^2}
//   m~ = fp16(mean over C) (0 when C is empty);  centered = {t : |k~_t - m~|^2 < |k~_t|^2}
// Outliers (an attention sink far from its block's other keys) stay out of the mean and keep
// their own code. Returns the mask of tokens NOT centered; mean_bits gets m~ (d fp16).
uint32_t e8_fit_block_mean(float* kr, int32_t d, uint16_t* mean_bits) {
  std::vector<float> m(d);
  auto closer = [&](int32_t t) {  // |k~_t - m|^2 < |k~_t|^2, i.e. <m, m - 2 k~_t> < 0
    float acc = 0.0f;
    for (int32_t i = 0; i < d; ++i) acc += m[i] * (m[i] - 2.0f * kr[(size_t)t * d + i]);
    return acc < 0.0f;
  };
  auto fit = [&](uint32_t use) {  // m = fp16(mean over the tokens in `use`)
    int32_t n = 0;
    for (int32_t t = 0; t < kTok; ++t) n += (int32_t)((use >> t) & 1u);
    for (int32_t i = 0; i < d; ++i) {
      float sum = 0.0f;
      for (int32_t t = 0; t < kTok; ++t)
        if ((use >> t) & 1u) sum += kr[(size_t)t * d + i];
      mean_bits[i] = f32_to_fp16(n ? sum / (float)n : 0.0f);
      m[i] = fp16_to_f32(mean_bits[i]);
    }
  };
  fit(0xFFFFu);
  uint32_t use = 0;
  for (int32_t t = 0; t < kTok; ++t) use |= closer(t) ? 1u << t : 0u;
  fit(use);
  uint32_t centered = 0;
  for (int32_t t = 0; t < kTok; ++t) centered |= closer(t) ? 1u << t : 0u;
  for (int32_t t = 0; t < kTok; ++t)
    if ((centered >> t) & 1u)
      for (int32_t i = 0; i < d; ++i) kr[(size_t)t * d + i] -= m[i];
  return ~centered & 0xFFFFu;
}

uint32_t e8_key_slot_bytes(const E8LayerCodec& c) {
  return c.block_mean ? e8_kc_slot_bytes(e8_tile_dim(c.d)) : e8_k_slot_bytes(e8_tile_dim(c.d));
}

void e8_encode_rotated(const float* kr, int64_t n, int32_t d, float alpha, uint16_t* codes, float* norms) {
  if (d <= 0 || d % E8_BLOCK != 0)
    throw Error("e8", "bad_head_dim", strfmt("e8_encode_rotated: head dim %d is not a multiple of 8", d));
  const int32_t M = d / E8_BLOCK;
  for (int64_t r = 0; r < n; ++r) {
    const float* k = kr + r * d;
    const float nrm = std::sqrt(e8_dot8(k, k, d));
    // A zero (or non-finite) norm encodes the zero vector; the stored n makes it decode to n*g.
    const float s = (nrm > 0.0f && std::isfinite(nrm)) ? alpha / nrm : 0.0f;
    norms[r] = nrm;
    for (int32_t j = 0; j < M; ++j) {
      E8Vec8 x;
      for (int32_t i = 0; i < E8_BLOCK; ++i) x.v[i] = k[j * E8_BLOCK + i] * s;
      codes[r * M + j] = (uint16_t)e8_encode_block(x).code;
    }
  }
}

void e8_decode_rotated(const uint16_t* codes, const float* norms, int64_t n, int32_t d, float alpha, float* kr_hat) {
  if (d <= 0 || d % E8_BLOCK != 0)
    throw Error("e8", "bad_head_dim", strfmt("e8_decode_rotated: head dim %d is not a multiple of 8", d));
  const int32_t M = d / E8_BLOCK;
  for (int64_t r = 0; r < n; ++r) {
    const float sc = norms[r] / alpha;
    for (int32_t j = 0; j < M; ++j) {
      const uint32_t code = codes[r * M + j];
      const E8Vec8 g = e8_decode_word(e8_packed_table[code >> 8], code);
      for (int32_t i = 0; i < E8_BLOCK; ++i) kr_hat[r * d + j * E8_BLOCK + i] = sc * g.v[i];
    }
  }
}

void e8_encode_key_block(const E8LayerCodec& c, const float* k, uint8_t* const* slots) {
  check_codec(c, "e8_encode_key_block");
  const int32_t d = c.d, T = e8_tile_dim(d), M = d / E8_BLOCK, nq = T / E8_QUAD_DIMS;
  std::vector<float> kr((size_t)kTok * d), norms(kTok);
  std::vector<uint16_t> codes((size_t)kTok * M), mean_bits;
  e8_rotate(c.rot.data(), d, k, kTok, kr.data());
  uint32_t raw_tokens = 0;  // bit t: token t coded without the block mean (block centering)
  if (c.block_mean) {
    mean_bits.resize(d);
    raw_tokens = e8_fit_block_mean(kr.data(), d, mean_bits.data());
  }
  e8_encode_rotated(kr.data(), kTok, d, c.alpha, codes.data(), norms.data());
  for (int32_t h = 0; h < e8_n_half(d); ++h) {
    uint8_t* slot = slots[h];
    for (int32_t i = 0; c.block_mean && i < T; ++i) {
      slot[e8_k_mean_offset(T, i)] = (uint8_t)mean_bits[h * T + i];
      slot[e8_k_mean_offset(T, i) + 1] = (uint8_t)(mean_bits[h * T + i] >> 8);
    }
    for (int32_t t = 0; t < kTok; ++t) {
      const uint16_t* ct = codes.data() + (size_t)t * M + h * (T / E8_BLOCK);
      for (int32_t q = 0; q < nq; ++q) {
        const E8Quad quad = e8_quad_pack(ct[4 * q], ct[4 * q + 1], ct[4 * q + 2], ct[4 * q + 3]);
        e8_st32(slot + e8_k_quad_offset(T, t, q), quad.proto);
        e8_st32(slot + e8_k_quad_offset(T, t, q) + 4, quad.signs);
      }
      e8_st32(slot + e8_k_norm_offset(T, t), f32_to_bits(norms[t]) | (((raw_tokens >> t) & 1u) ? E8_NORM_RAW : 0u));
    }
  }
}

void e8_encode_key_block_bf16(const E8LayerCodec& c, const uint16_t* const* pages, uint8_t* const* slots) {
  check_codec(c, "e8_encode_key_block_bf16");
  const std::vector<float> k = bf16_halves_to_f32(pages, c.d);
  e8_encode_key_block(c, k.data(), slots);
}

void e8_decode_key_block(const E8LayerCodec& c, const uint8_t* const* slots, float* k_hat) {
  check_codec(c, "e8_decode_key_block");
  const int32_t d = c.d, T = e8_tile_dim(d);
  std::vector<float> kr((size_t)kTok * d);
  for (int32_t t = 0; t < kTok; ++t) {
    float* g = kr.data() + (size_t)t * d;
    decode_token_g(slots, d, t, g);
    const float sc = e8_k_norm(slots[0], T, t) / c.alpha;
    for (int32_t i = 0; i < d; ++i) g[i] *= sc;
    if (c.block_mean && e8_k_centered(slots[0], T, t))
      for (int32_t i = 0; i < d; ++i) g[i] += e8_k_mean(slots[i / T], T, i % T);
  }
  e8_unrotate(c.rot.data(), d, kr.data(), kTok, k_hat);
}

void e8_score_key_block(const E8LayerCodec& c, const uint8_t* const* slots, const float* q_rot, int32_t n_q,
                        float* scores) {
  check_head_dim(c.d, "e8_score_key_block");
  const int32_t d = c.d, T = e8_tile_dim(d);
  float g[1024];
  std::vector<float> qm(n_q);  // <q~_h, m~> per query head (block centering)
  for (int32_t h = 0; h < n_q; ++h) qm[h] = e8_block_mean_dot(c, slots, q_rot + (size_t)h * d);
  for (int32_t t = 0; t < kTok; ++t) {
    decode_token_g(slots, d, t, g);
    const float sc = e8_k_norm(slots[0], T, t) / c.alpha;
    const bool centered = c.block_mean && e8_k_centered(slots[0], T, t);
    for (int32_t h = 0; h < n_q; ++h)
      scores[h * kTok + t] = sc * e8_dot8(q_rot + (size_t)h * d, g, d) + (centered ? qm[h] : 0.0f);
  }
}

float e8_block_mean_dot(const E8LayerCodec& c, const uint8_t* const* slots, const float* q_rot) {
  if (!c.block_mean) return 0.0f;
  const int32_t d = c.d, T = e8_tile_dim(d);
  float m[1024];
  for (int32_t i = 0; i < d; ++i) m[i] = e8_k_mean(slots[i / T], T, i % T);
  return e8_dot8(q_rot, m, d);
}

// tables[j][a*256 + s]: the codeword is eps * a' + shift with eps from e = s ^ pi. Split e into its
// low nibble (dims 0,2,4,6) and high nibble (dims 1,3,5,7): <q, eps a'> = lo[e & 15] + hi[e >> 4],
// 16 + 16 partial sums per prototype instead of 256 dot products of length 8.
void e8_build_query_tables(const float* q_rot, int32_t d, float* tables) {
  if (d <= 0 || d % E8_BLOCK != 0)
    throw Error("e8", "bad_head_dim", strfmt("e8_build_query_tables: head dim %d is not a multiple of 8", d));
  for (int32_t j = 0; j < d / E8_BLOCK; ++j) {
    const float* q = q_rot + j * E8_BLOCK;
    float qsum = 0.0f;
    for (int32_t i = 0; i < E8_BLOCK; ++i) qsum += q[i];
    float* tab = tables + (size_t)j * E8_N_CODES;
    for (int32_t a = 0; a < E8_N_PROTO; ++a) {
      const uint32_t word = e8_packed_table[a];
      float lo[16], hi[16];
      for (uint32_t e = 0; e < 16; ++e) {
        float l = 0.0f, hsum = 0.0f;
        for (int32_t k = 0; k < 4; ++k) {
          const float bl = 0.5f * (float)e8_word_base_x2(word, 2 * k);      // dim 2k (bit k)
          const float bh = 0.5f * (float)e8_word_base_x2(word, 2 * k + 1);  // dim 2k+1 (bit 4+k)
          l += q[2 * k] * (((e >> k) & 1u) ? -bl : bl);
          hsum += q[2 * k + 1] * (((e >> k) & 1u) ? -bh : bh);
        }
        lo[e] = l;
        hi[e] = hsum;
      }
      for (uint32_t s = 0; s < 256; ++s) {
        const uint32_t pi = e8_parity32(s), e = s ^ pi;
        tab[a * 256 + s] = lo[e & 15u] + hi[e >> 4] + (pi ? -0.25f : 0.25f) * qsum;
      }
    }
  }
}

void e8_score_key_block_table(const E8LayerCodec& c, const uint8_t* const* slots, const float* tables, float q_mean,
                              float* scores) {
  check_head_dim(c.d, "e8_score_key_block_table");
  const int32_t d = c.d, T = e8_tile_dim(d), nq = T / E8_QUAD_DIMS;
  for (int32_t t = 0; t < kTok; ++t) {
    float s = 0.0f;
    for (int32_t h = 0; h < e8_n_half(d); ++h)
      for (int32_t q = 0; q < nq; ++q) {
        const E8Quad quad = e8_k_quad(slots[h], T, t, q);
        const int32_t j0 = (h * T + q * E8_QUAD_DIMS) / E8_BLOCK;
        for (int32_t i = 0; i < E8_QUAD; ++i) s += tables[(size_t)(j0 + i) * E8_N_CODES + e8_quad_code(quad, i)];
      }
    scores[t] = e8_k_norm(slots[0], T, t) / c.alpha * s + (c.block_mean && e8_k_centered(slots[0], T, t) ? q_mean : 0.0f);
  }
}

void e8_encode_value_block(int32_t d_v, const float* v, uint8_t* const* slots) {
  check_head_dim(d_v, "e8_encode_value_block");
  const int32_t T = e8_tile_dim(d_v);
  for (int32_t h = 0; h < e8_n_half(d_v); ++h) v2_encode_tile(v + h * T, d_v, T, slots[h]);
}

void e8_encode_value_block_bf16(int32_t d_v, const uint16_t* const* pages, uint8_t* const* slots) {
  check_head_dim(d_v, "e8_encode_value_block_bf16");
  const std::vector<float> v = bf16_halves_to_f32(pages, d_v);
  e8_encode_value_block(d_v, v.data(), slots);
}

void e8_decode_value_block(int32_t d_v, const uint8_t* const* slots, float* v_hat) {
  check_head_dim(d_v, "e8_decode_value_block");
  const int32_t T = e8_tile_dim(d_v);
  for (int32_t h = 0; h < e8_n_half(d_v); ++h) v2_decode_tile(slots[h], T, v_hat + h * T, d_v);
}

}  // namespace gaacrt
