// metal_plan.cpp — kernel choice, grids and buffer plans of the non-attention ops (metal_plan.h).
// The formulas mirror the CPU reference ops in backends/cpu; comments say where the GPU differs.
#include "metal_plan.h"

#include <cmath>
#include <cstring>

#include "common/error.h"

namespace gaacrt::mtl {
namespace {

RowsArgs rows_args(const char* op, const WeightView& w, int64_t n_rows, float scale) {
  require_gguf_layout(w, op);
  const TypeTraits* tr = type_traits(w.type);
  if (!tr || !tr->supported)
    throw Error("quant", "unsupported_type", strfmt("metal %s: weight type %s is not supported", op, type_name(w.type)));
  if (w.n_cols % tr->block_size)
    throw Error("quant", "bad_shape", strfmt("metal %s: row of %lld elements is not a whole number of %s blocks (%u)",
                                            op, (long long)w.n_cols, tr->name, tr->block_size));
  RowsArgs a;
  a.n_rows = checked_u32(op, "rows", n_rows);
  a.n_cols = checked_u32(op, "n_cols", w.n_cols);
  a.n_sub = div_up(w.n_cols, SUB);
  a.row_stride = checked_u32(op, "row_stride", (int64_t)w.row_stride);
  a.scale = scale;
  return a;
}

Dispatch elementwise(const char* kernel, int64_t n, float cap) {
  Dispatch d;
  d.kernel = kernel;
  const ElementwiseArgs a{checked_u32(kernel, "n", n), cap};
  d.grid[0] = div_up(n, ELEMWISE_THREADS);
  d.threads = ELEMWISE_THREADS;
  d.buffers.push_back(BufferArg::stage_one(a));
  return d;
}

// YaRN (spec/gguf.md §3.1), as backends/cpu/rope.cpp computes it: the dims between the two
// correction dims blend interpolated and extrapolated angles.
void yarn_corr_dims(const RopeParams& p, float dims[2]) {
  auto corr = [&](float n) {
    return p.n_rot * std::log((float)p.n_ctx_orig / (n * 2.f * (float)M_PI)) / (2.f * std::log(p.base));
  };
  dims[0] = std::max(0.f, std::floor(corr(p.beta_fast)));
  dims[1] = std::min((float)p.n_rot - 1, std::ceil(corr(p.beta_slow)));
}

}  // namespace

std::string weight_kernel(const char* op, GGMLType t) {
  const TypeTraits* tr = type_traits(t);
  if (!tr || !tr->supported)
    throw Error("quant", "unsupported_type", strfmt("metal %s: weight type %s is not supported", op, type_name(t)));
  return std::string(op) + "_" + tr->name;
}

Dispatch plan_dequantize(const WeightView& w, float* dst) {
  const RowsArgs a = rows_args("dequantize", w, w.n_rows, 1.f);
  Dispatch d;
  d.kernel = weight_kernel("dequantize", w.type);
  d.grid[0] = div_up((int64_t)a.n_rows * a.n_sub, ROWS_THREADS);
  d.threads = ROWS_THREADS;
  d.buffers = {BufferArg::stage_one(a), BufferArg::device(w.data, w.row_stride * w.n_rows),
               BufferArg::device(dst, (size_t)w.n_rows * w.n_cols * 4)};
  return d;
}

Dispatch plan_get_rows(const WeightView& emb, const int32_t* ids, int64_t n, float scale, float* out) {
  const RowsArgs a = rows_args("get_rows", emb, n, scale);
  Dispatch d;
  d.kernel = weight_kernel("get_rows", emb.type);
  d.grid[0] = div_up((int64_t)a.n_rows * a.n_sub, ROWS_THREADS);
  d.threads = ROWS_THREADS;
  d.buffers = {BufferArg::stage_one(a), BufferArg::device(emb.data, emb.row_stride * emb.n_rows),
               BufferArg::device(ids, (size_t)n * 4), BufferArg::device(out, (size_t)n * emb.n_cols * 4)};
  return d;
}

Dispatch plan_matmul(const WeightView& w, const float* x, int64_t n_tok, float* y, const float* bias) {
  const RowsArgs r = rows_args("matmul", w, w.n_rows, 1.f);
  MatmulArgs a;
  a.n_rows = r.n_rows;
  a.n_cols = r.n_cols;
  a.n_sub = r.n_sub;
  a.row_stride = r.row_stride;
  a.n_tok = checked_u32("matmul", "n_tok", n_tok);
  a.has_bias = bias != nullptr;
  Dispatch d;
  if (n_tok <= (int64_t)MATVEC_MAX_TOK) {
    d.kernel = weight_kernel("matvec", w.type);
    d.grid[0] = div_up(w.n_rows, MATVEC_SIMDGROUPS);
    d.threads = MATVEC_SIMDGROUPS * SIMD_WIDTH;
  } else {
    d.kernel = weight_kernel("matmul", w.type);
    d.grid[0] = div_up(w.n_rows, MM_TILE_ROWS);
    d.grid[1] = div_up(n_tok, MM_TILE_TOK);
    d.threads = MM_THREADS;
    d.tg_bytes = {MM_TILE_ROWS * MM_PAD * 4, MM_TILE_TOK * MM_PAD * 4};
  }
  const size_t y_bytes = (size_t)n_tok * w.n_rows * 4;
  d.buffers = {BufferArg::stage_one(a), BufferArg::device(w.data, w.row_stride * w.n_rows),
               BufferArg::device(x, (size_t)n_tok * w.n_cols * 4),
               bias ? BufferArg::device(bias, (size_t)w.n_rows * 4) : BufferArg::device(y, y_bytes),
               BufferArg::device(y, y_bytes)};
  return d;
}

Dispatch plan_rms_norm(const float* x, const float* w, float eps, int64_t rows, int64_t dim, float* y) {
  Dispatch d;
  d.kernel = "rms_norm_f32";
  const RmsNormArgs a{checked_u32("rms_norm", "dim", dim), eps};
  d.grid[0] = checked_u32("rms_norm", "rows", rows);
  d.threads = NORM_THREADS;
  d.tg_bytes = {NORM_THREADS / SIMD_WIDTH * 4};
  d.buffers = {BufferArg::stage_one(a), BufferArg::device(x, (size_t)(rows * dim) * 4), BufferArg::device(w, (size_t)dim * 4),
               BufferArg::device(y, (size_t)(rows * dim) * 4)};
  return d;
}

Dispatch plan_rope(float* x, int64_t n_tok, int32_t n_heads, int32_t head_dim, const int32_t* pos, const RopeParams& p) {
  if (p.n_rot < 2 || p.n_rot % 2 || p.n_rot > head_dim)
    throw Error("backend", "invalid_argument", strfmt("metal rope: n_rot = %d (head_dim %d)", p.n_rot, head_dim));
  const int half = p.n_rot / 2;
  RopeArgs a;
  a.n_tok = checked_u32("rope", "n_tok", n_tok);
  a.n_heads = (uint32_t)n_heads;
  a.head_dim = (uint32_t)head_dim;
  a.n_rot = (uint32_t)p.n_rot;
  a.neox = p.style == RopeStyle::Neox;
  a.mscale = p.attn_factor;
  const bool yarn = p.ext_factor != 0.f;
  float corr[2] = {0, 0};
  if (yarn) {
    yarn_corr_dims(p, corr);
    a.mscale *= 1.f + 0.1f * std::log(1.f / p.freq_scale);
  }
  // Angle per position of pair i, in double as the CPU computes it: freq_scale * inv_freq, or for
  // YaRN the blend theta (1 - mix) + extrapolated * mix = inv_freq (freq_scale (1 - mix) + mix).
  // Split into hi + lo floats for the kernel's two-float angle.
  std::vector<float> hi(half), lo(half);
  for (int i = 0; i < half; ++i) {
    double f = std::pow((double)p.base, -2.0 * i / p.n_rot);
    if (p.freq_factors) f /= p.freq_factors[i];
    double s = f * p.freq_scale;
    if (yarn) {
      const float y = (i - corr[0]) / std::max(0.001f, corr[1] - corr[0]);
      const float mix = (1.f - std::min(1.f, std::max(0.f, y))) * p.ext_factor;
      s = f * p.freq_scale * (1 - mix) + f * mix;
    }
    hi[i] = (float)s;
    lo[i] = (float)(s - (double)hi[i]);
  }
  Dispatch d;
  d.kernel = "rope_f32";
  d.grid[0] = div_up(n_tok * n_heads * half, ROPE_THREADS);
  d.threads = ROPE_THREADS;
  d.buffers = {BufferArg::stage_one(a), BufferArg::device(x, (size_t)(n_tok * n_heads * head_dim) * 4),
               BufferArg::device(pos, (size_t)n_tok * 4), BufferArg::stage(hi.data(), hi.size()),
               BufferArg::stage(lo.data(), lo.size())};
  return d;
}

Dispatch plan_add(float* y, const float* x, int64_t n) {
  Dispatch d = elementwise("add_f32", n, 0.f);
  d.buffers.push_back(BufferArg::device(y, (size_t)n * 4));
  d.buffers.push_back(BufferArg::device(x, (size_t)n * 4));
  return d;
}

Dispatch plan_act_mul(const float* g, const float* u, int64_t n, Activation act, float* h) {
  Dispatch d = elementwise(act == Activation::SiLU ? "act_mul_silu" : "act_mul_gelu_tanh", n, 0.f);
  d.buffers.push_back(BufferArg::device(g, (size_t)n * 4));
  d.buffers.push_back(BufferArg::device(u, (size_t)n * 4));
  d.buffers.push_back(BufferArg::device(h, (size_t)n * 4));
  return d;
}

Dispatch plan_softcap(float* x, int64_t n, float cap) {
  Dispatch d = elementwise("softcap_f32", n, cap);
  d.buffers.push_back(BufferArg::device(x, (size_t)n * 4));
  return d;
}

}  // namespace gaacrt::mtl
