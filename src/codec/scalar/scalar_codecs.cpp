// scalar_codecs.cpp — host tile codecs of q8, KIVI-2 keys and the v2 value tile (see
// scalar_codecs.h; layouts and rules in q8_tile.h and asym2.h).
#include "scalar_codecs.h"

#include <cstring>

#include "asym2.h"
#include "common/error.h"
#include "q8_tile.h"

namespace gaacrt {

namespace {

constexpr int32_t kTok = ASYM2_TOKENS;

void check_group_dim(int32_t T, const char* op) {
  if (!v2_tile_dim_ok(T) || T > 1024)
    throw Error("kv", "bad_tile_dim", strfmt("%s: tile_dim %d is not a multiple of 32 in 32..1024", op, T));
}

void st16(uint8_t* p, uint16_t v) {
  p[0] = (uint8_t)v;
  p[1] = (uint8_t)(v >> 8);
}

}  // namespace

// ---- v2 ---------------------------------------------------------------------------------------

void v2_encode_tile(const float* x, int64_t ld, int32_t T, uint8_t* slot) {
  check_group_dim(T, "v2_encode_tile");
  for (int32_t t = 0; t < kTok; ++t)
    for (int32_t g = 0; g < T / ASYM2_VGROUP; ++g) v2_encode_group(x + t * ld + g * ASYM2_VGROUP, T, t, g, slot);
}

void v2_decode_tile(const uint8_t* slot, int32_t T, float* x, int64_t ld) {
  check_group_dim(T, "v2_decode_tile");
  for (int32_t t = 0; t < kTok; ++t)
    for (int32_t g = 0; g < T / ASYM2_VGROUP; ++g) {
      const Asym2Params p = v2_params(slot, T, t, g);
      for (int32_t i = 0; i < ASYM2_VGROUP; ++i) {
        const int32_t c = g * ASYM2_VGROUP + i;
        x[t * ld + c] = asym2_value(v2_code(slot, T, t, c), p);
      }
    }
}

// acc += p_t (z + D q) summed over tokens: per (token, group) the weight p_t z goes to every
// channel of the group and p_t D multiplies the code, so each element costs one multiply-add.
void v2_accumulate_tile(const uint8_t* slot, int32_t T, const float* p, int32_t n_q, float* acc, int64_t acc_ld) {
  check_group_dim(T, "v2_accumulate_tile");
  for (int32_t t = 0; t < kTok; ++t) {
    const uint8_t* codes = slot + v2_codes_offset(T, t);
    for (int32_t g = 0; g < T / ASYM2_VGROUP; ++g) {
      const Asym2Params prm = v2_params(slot, T, t, g);
      float lut[4];
      for (uint32_t q = 0; q < 4; ++q) lut[q] = asym2_value(q, prm);
      for (int32_t h = 0; h < n_q; ++h) {
        const float w = p[h * kTok + t];
        float* a = acc + h * acc_ld + g * ASYM2_VGROUP;
        const uint8_t* cg = codes + g * (ASYM2_VGROUP / 4);
        for (int32_t b = 0; b < ASYM2_VGROUP / 4; ++b) {
          const uint32_t byte = cg[b];
          a[4 * b + 0] += w * lut[byte & 3u];
          a[4 * b + 1] += w * lut[(byte >> 2) & 3u];
          a[4 * b + 2] += w * lut[(byte >> 4) & 3u];
          a[4 * b + 3] += w * lut[(byte >> 6) & 3u];
        }
      }
    }
  }
}

// ---- KIVI-2 keys --------------------------------------------------------------------------------

namespace {
void check_kivi_dim(int32_t T, const char* op) {
  if (T < 1 || T > 1024) throw Error("kv", "bad_tile_dim", strfmt("%s: tile_dim %d is outside 1..1024", op, T));
}
}  // namespace

void kivi2_k_encode_tile(const float* x, int64_t ld, int32_t T, uint8_t* slot) {
  check_kivi_dim(T, "kivi2_k_encode_tile");
  for (int32_t c = 0; c < T; ++c) {
    float mn = x[c], mx = x[c];
    for (int32_t t = 1; t < kTok; ++t) {
      const float v = x[t * ld + c];
      mn = v < mn ? v : mn;
      mx = v > mx ? v : mx;
    }
    const Asym2Params p = asym2_params(mn, mx);
    uint32_t w = 0;
    for (int32_t t = 0; t < kTok; ++t) w |= asym2_code(x[t * ld + c], p) << (2 * t);
    uint8_t* wp = slot + 4 * c;
    wp[0] = (uint8_t)w; wp[1] = (uint8_t)(w >> 8); wp[2] = (uint8_t)(w >> 16); wp[3] = (uint8_t)(w >> 24);
    uint8_t* pp = slot + kivi2_k_params_offset(T, c);
    st16(pp, p.scale_bits);
    st16(pp + 2, p.zero_bits);
  }
}

void kivi2_k_decode_tile(const uint8_t* slot, int32_t T, float* x, int64_t ld) {
  check_kivi_dim(T, "kivi2_k_decode_tile");
  for (int32_t c = 0; c < T; ++c) {
    const uint32_t w = kivi2_k_word(slot, c);
    const Asym2Params p = kivi2_k_params(slot, T, c);
    for (int32_t t = 0; t < kTok; ++t) x[t * ld + c] = asym2_value((w >> (2 * t)) & 3u, p);
  }
}

// score_t = sum_c q_c z_c + sum_c (q_c D_c) q_ct: the first sum is shared by the 16 tokens.
void kivi2_k_score_tile(const uint8_t* slot, int32_t T, const float* q, int64_t q_ld, int32_t n_q, float* scores) {
  check_kivi_dim(T, "kivi2_k_score_tile");
  for (int32_t h = 0; h < n_q; ++h) {
    const float* qh = q + h * q_ld;
    float base = 0.0f;
    float s[kTok] = {};
    for (int32_t c = 0; c < T; ++c) {
      const Asym2Params p = kivi2_k_params(slot, T, c);
      const uint32_t w = kivi2_k_word(slot, c);
      base += qh[c] * p.zero;
      const float qd = qh[c] * p.scale;
      for (int32_t t = 0; t < kTok; ++t) s[t] += qd * (float)((w >> (2 * t)) & 3u);
    }
    for (int32_t t = 0; t < kTok; ++t) scores[h * kTok + t] = base + s[t];
  }
}

// ---- q8 ----------------------------------------------------------------------------------------

void q8_encode_tile(const float* x, int64_t ld, int32_t T, uint8_t* slot) {
  check_group_dim(T, "q8_encode_tile");
  for (int32_t t = 0; t < kTok; ++t)
    for (int32_t g = 0; g < T / Q8_GROUP; ++g) {
      const block_q8_0 b = q8_quantize_group(x + t * ld + g * Q8_GROUP);
      uint8_t* dst = slot + q8_block_offset(T, t, g);
      st16(dst, b.d);
      std::memcpy(dst + 2, b.qs, Q8_GROUP);
    }
}

void q8_decode_tile(const uint8_t* slot, int32_t T, float* x, int64_t ld) {
  check_group_dim(T, "q8_decode_tile");
  for (int32_t t = 0; t < kTok; ++t)
    for (int32_t c = 0; c < T; ++c) x[t * ld + c] = q8_scale(slot, T, t, c / Q8_GROUP) * (float)q8_qs(slot, T, t, c);
}

// Per block: d * sum_i q_i * qs_i (the scale applied once per 32 products).
void q8_score_tile(const uint8_t* slot, int32_t T, const float* q, int64_t q_ld, int32_t n_q, float* scores) {
  check_group_dim(T, "q8_score_tile");
  for (int32_t t = 0; t < kTok; ++t)
    for (int32_t h = 0; h < n_q; ++h) {
      const float* qh = q + h * q_ld;
      float s = 0.0f;
      for (int32_t g = 0; g < T / Q8_GROUP; ++g) {
        const uint8_t* b = slot + q8_block_offset(T, t, g);
        const int8_t* qs = reinterpret_cast<const int8_t*>(b + 2);
        float part = 0.0f;
        for (int32_t i = 0; i < Q8_GROUP; ++i) part += qh[g * Q8_GROUP + i] * (float)qs[i];
        s += q8_scale(slot, T, t, g) * part;
      }
      scores[h * kTok + t] = s;
    }
}

void q8_accumulate_tile(const uint8_t* slot, int32_t T, const float* p, int32_t n_q, float* acc, int64_t acc_ld) {
  check_group_dim(T, "q8_accumulate_tile");
  for (int32_t t = 0; t < kTok; ++t)
    for (int32_t g = 0; g < T / Q8_GROUP; ++g) {
      const uint8_t* b = slot + q8_block_offset(T, t, g);
      const int8_t* qs = reinterpret_cast<const int8_t*>(b + 2);
      const float d = q8_scale(slot, T, t, g);
      for (int32_t h = 0; h < n_q; ++h) {
        const float w = p[h * kTok + t] * d;
        float* a = acc + h * acc_ld + g * Q8_GROUP;
        for (int32_t i = 0; i < Q8_GROUP; ++i) a[i] += w * (float)qs[i];
      }
    }
}

}  // namespace gaacrt
