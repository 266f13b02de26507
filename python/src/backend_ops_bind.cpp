// backend_ops_bind.cpp — gaacrt._core.op_*: run the backend's elementwise, norm, RoPE, embedding
// and attention ops on numpy inputs (uploaded, run, downloaded), so the CUDA (and any other)
// backend is tested op by op against the CPU reference on the same inputs (tests/test_cuda_ops.py).
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstring>
#include <memory>
#include <optional>
#include <algorithm>
#include <vector>

#include "backend/backend.h"
#include "bindings.h"
#include "common/error.h"
#include "common/half.h"
#include "kv/lossy_codecs.h"
#include "model/config.h"

namespace nb = nanobind;

namespace gaacrt::py {

GGMLType parse_type(nb::handle t);  // quant_bind.cpp

namespace {

using F32 = nb::ndarray<const float, nb::c_contig, nb::device::cpu>;
using I32 = nb::ndarray<const int32_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
using Bytes2D = nb::ndarray<const uint8_t, nb::ndim<2>, nb::c_contig, nb::device::cpu>;
using OutF32 = nb::ndarray<nb::numpy, float>;

// A one-layer cache view of n_ctx tokens, hkv heads of d channels (tiles of at most 128), and its
// block table with the pages in reverse order (a kernel must follow the table, not assume order).
KVLayerView one_layer_view(KVFormat f, int32_t hkv, int32_t d, int32_t n_ctx, const char* op,
                           std::vector<uint32_t>& table) {
  KVLayerView kv{};
  kv.format = f;
  kv.n_head_kv = hkv;
  kv.head_dim_k = kv.head_dim_v = d;
  kv.tile_dim = d < KV_TILE_MAX_DIM ? d : KV_TILE_MAX_DIM;
  if (d % kv.tile_dim) throw nb::value_error(strfmt("%s: head dim %d is not whole tiles of 128", op, d).c_str());
  kv.n_half = d / kv.tile_dim;
  kv.max_blocks = (n_ctx + KV_BLOCK_TOKENS - 1) / KV_BLOCK_TOKENS;
  kv.page_bytes = (uint64_t)KV_BLOCK_TOKENS * kv.tile_dim * 2;
  kv.chunk_bytes = KV_CHUNK_PAGES * kv.page_bytes;
  table.resize((size_t)hkv * 2 * kv.n_half * kv.max_blocks);
  for (size_t i = 0; i < table.size(); ++i) table[i] = (uint32_t)(table.size() - 1 - i);
  return kv;
}

std::vector<size_t> shape_of(const F32& a) {
  std::vector<size_t> s(a.ndim());
  for (size_t i = 0; i < a.ndim(); ++i) s[i] = a.shape(i);
  return s;
}

// Runs `op(device_ptr)` on a device copy of x and returns the result, shaped like x.
template <typename Op>
OutF32 in_place(Backend& be, const F32& x, Op op) {
  float* out;
  OutF32 arr = owned<float>(shape_of(x), &out);
  nb::gil_scoped_release nogil;
  Buf xd(be, x.size() * 4, x.data());
  op(xd.f());
  be.download(out, xd.p, x.size() * 4);
  return arr;
}

// A one-layer BF16 cache holding k, v (n_ctx, n_head_kv, d) for one sequence, in pages handed
// out in reverse order (so the block table is really followed), written through kv_store; then
// attention for query rows q (n_q, n_head, d) at positions n_ctx - n_q .. n_ctx - 1.
OutF32 attention_op(Backend& be, F32 k, F32 v, F32 q, float scale, int32_t sliding_window, float softcap) {
  if (k.ndim() != 3 || v.ndim() != 3 || q.ndim() != 3 || k.shape(0) != v.shape(0) || k.shape(1) != v.shape(1) ||
      k.shape(2) != v.shape(2) || q.shape(2) != k.shape(2) || q.shape(1) % k.shape(1) || q.shape(0) > k.shape(0))
    throw nb::value_error("attention: want k, v (n_ctx, n_head_kv, d) and q (n_q <= n_ctx, n_head, d), n_head a "
                          "multiple of n_head_kv");
  const int32_t n_ctx = (int32_t)k.shape(0), hkv = (int32_t)k.shape(1), d = (int32_t)k.shape(2);
  const int32_t n_q = (int32_t)q.shape(0), n_head = (int32_t)q.shape(1);
  std::vector<uint32_t> table;
  KVLayerView kv = one_layer_view(KVFormat::BF16, hkv, d, n_ctx, "attention", table);
  const int64_t n_entries = (int64_t)table.size();
  float* out;
  OutF32 arr = owned<float>({(size_t)n_q, (size_t)n_head, (size_t)d}, &out);
  nb::gil_scoped_release nogil;
  Buf arena(be, n_entries * kv.page_bytes), tab(be, n_entries * 4, table.data());
  kv.arena = static_cast<uint8_t*>(arena.p);
  std::vector<KVTokenSlot> slots(n_ctx);
  for (int32_t t = 0; t < n_ctx; ++t) slots[t] = {static_cast<const uint32_t*>(tab.p), t};
  const AttnSeq seq{static_cast<const uint32_t*>(tab.p), 0, n_q, n_ctx - n_q};
  Buf sd(be, slots.size() * sizeof(KVTokenSlot), slots.data()), qd(be, sizeof(AttnSeq), &seq);
  Buf kd(be, k.size() * 4, k.data()), vd(be, v.size() * 4, v.data()), qq(be, q.size() * 4, q.data());
  Buf od(be, (size_t)n_q * n_head * d * 4);
  be.kv_store(kv, static_cast<const KVTokenSlot*>(sd.p), n_ctx, kd.f(), vd.f());
  const AttentionArgs args{n_head, scale, sliding_window, softcap, n_q, n_ctx};
  be.attention(kv, args, static_cast<const AttnSeq*>(qd.p), 1, qq.f(), od.f());
  be.download(out, od.p, (size_t)n_q * n_head * d * 4);
  return arr;
}


using OutU8 = nb::ndarray<nb::numpy, uint8_t>;
using OutI32 = nb::ndarray<nb::numpy, int32_t>;

// The same for a one-layer lossy cache (e8, q8, kivi2): every token goes to a raw page through
// kv_store, the blocks older than the raw window are compressed by kv_finalize (slots in chunks
// after the pages), then attention. Returns (out, K slots (n, bytes), V slots (n, bytes), fits):
// the slots of the finalized tiles in (kv-head, half, block) order, for byte comparisons.
nb::tuple lossy_attention_op(Backend& be, F32 k, F32 v, F32 q, float scale, const std::string& cache, int32_t window,
                             nb::handle center_arg, int32_t sliding_window, float softcap) {
  const E8Center center = e8_center_arg(center_arg);
  if (k.ndim() != 3 || v.ndim() != 3 || q.ndim() != 3 || k.shape(0) != v.shape(0) || k.shape(1) != v.shape(1) ||
      k.shape(2) != v.shape(2) || q.shape(2) != k.shape(2) || q.shape(1) % k.shape(1) || q.shape(0) > k.shape(0))
    throw nb::value_error("lossy_attention: want k, v (n_ctx, n_head_kv, d) and q (n_q <= n_ctx, n_head, d)");
  KVFormat f;
  if (cache == "e8") f = KVFormat::E8;
  else if (cache == "q8") f = KVFormat::Q8;
  else if (cache == "kivi2") f = KVFormat::KIVI2;
  else throw nb::value_error("lossy_attention: cache is e8, q8 or kivi2");
  const int32_t n_ctx = (int32_t)k.shape(0), hkv = (int32_t)k.shape(1), d = (int32_t)k.shape(2);
  const int32_t n_q = (int32_t)q.shape(0), n_head = (int32_t)q.shape(1);
  ModelConfig cfg;
  cfg.n_layer = 1;
  cfg.n_head = n_head;
  cfg.n_head_kv = hkv;
  cfg.head_dim_k = cfg.head_dim_v = d;
  std::vector<uint32_t> table;
  KVLayerView kv = one_layer_view(f, hkv, d, n_ctx, "lossy_attention", table);
  const int64_t n_entries = (int64_t)table.size();
  const int32_t ready = std::max(0, (n_ctx - window) / KV_BLOCK_TOKENS);

  float* out;
  OutF32 arr = owned<float>({(size_t)n_q, (size_t)n_head, (size_t)d}, &out);
  const int64_t n_fin = (int64_t)hkv * kv.n_half * ready;
  std::vector<KVFinalizeJob> jobs;
  uint8_t *kb = nullptr, *vb = nullptr;
  int32_t* fits = nullptr;
  OutI32 fits_arr = owned<int32_t>({(size_t)2 * n_fin}, &fits);
  std::unique_ptr<LossyKVCodec> codec;
  {
    nb::gil_scoped_release nogil;
    codec = std::make_unique<LossyKVCodec>(f, cfg, be, window, false, center);
  }
  for (int is_v = 0; is_v < 2; ++is_v) kv.slot_bytes[is_v] = codec->slot_bytes(kv.tile_dim, is_v == 1);
  OutU8 k_arr = owned<uint8_t>({(size_t)n_fin, (size_t)kv.slot_bytes[0]}, &kb);
  OutU8 v_arr = owned<uint8_t>({(size_t)n_fin, (size_t)kv.slot_bytes[1]}, &vb);
  {
    nb::gil_scoped_release nogil;
    const uint64_t first_chunk = (n_entries * kv.page_bytes + kv.chunk_bytes - 1) / kv.chunk_bytes;
    uint64_t spc[2], n_chunks[2];
    for (int is_v = 0; is_v < 2; ++is_v) {
      spc[is_v] = std::min<uint64_t>(KV_SLOTS_PER_CHUNK_MAX, kv.chunk_bytes / kv.slot_bytes[is_v]);
      n_chunks[is_v] = ((uint64_t)n_fin + spc[is_v] - 1) / spc[is_v];
    }
    int64_t n_of[2] = {0, 0};
    for (int32_t h = 0; h < hkv; ++h)
      for (int is_v = 0; is_v < 2; ++is_v)
        for (int32_t half = 0; half < kv.n_half; ++half)
          for (int32_t b = 0; b < ready; ++b) {
            const uint64_t n = (uint64_t)n_of[is_v]++;
            const uint64_t chunk = first_chunk + (is_v ? n_chunks[0] : 0) + n / spc[is_v];
            const uint32_t e = KV_ENTRY_SLOT | (uint32_t)(chunk << KV_SLOT_SUB_BITS) | (uint32_t)(n % spc[is_v]);
            jobs.push_back({h, is_v, half, b, table[kv_entry_index(kv, h, is_v, half, b)], e, 0, 0});
          }
    const uint64_t arena_bytes = (first_chunk + n_chunks[0] + n_chunks[1]) * kv.chunk_bytes;
    Buf arena(be, arena_bytes), tab(be, n_entries * 4, table.data());
    kv.arena = static_cast<uint8_t*>(arena.p);
    std::vector<KVTokenSlot> slots(n_ctx);
    for (int32_t t = 0; t < n_ctx; ++t) slots[t] = {static_cast<const uint32_t*>(tab.p), t};
    Buf sd(be, slots.size() * sizeof(KVTokenSlot), slots.data());
    Buf kd(be, k.size() * 4, k.data()), vd(be, v.size() * 4, v.data()), qq(be, q.size() * 4, q.data());
    Buf od(be, (size_t)n_q * n_head * d * 4);
    be.kv_store(kv, static_cast<const KVTokenSlot*>(sd.p), n_ctx, kd.f(), vd.f());
    if (center != E8Center::Off && f == KVFormat::E8) {  // the per-head statistics of all the tokens, as a first prefill fits them
      std::vector<uint16_t> kbf(k.size());
      for (size_t i = 0; i < kbf.size(); ++i) kbf[i] = f32_to_bf16(k.data()[i]);
      codec->calibrate_add(0, kbf.data(), kbf.data(), n_ctx);
      codec->calibrate_finish(n_ctx);
    }
    kv.codec = codec->layer_state(0);
    if (!jobs.empty()) {
      Buf jd(be, jobs.size() * sizeof(KVFinalizeJob), jobs.data());
      KVFinalizeJob* jp = be.shares_host_memory() ? jobs.data() : static_cast<KVFinalizeJob*>(jd.p);
      be.kv_finalize(kv, jp, (int64_t)jobs.size());
      if (!be.shares_host_memory()) be.download(jobs.data(), jd.p, jobs.size() * sizeof(KVFinalizeJob));
      for (const KVFinalizeJob& j : jobs)
        if (j.fits) table[kv_entry_index(kv, j.head, j.is_v, j.half, j.block)] = j.slot;
      be.upload(tab.p, table.data(), n_entries * 4);
      std::vector<uint8_t> host(arena_bytes - first_chunk * kv.chunk_bytes);
      be.download(host.data(), kv.arena + first_chunk * kv.chunk_bytes, host.size());
      int64_t n_k = 0, n_v = 0;
      for (size_t i = 0; i < jobs.size(); ++i) {
        const KVFinalizeJob& j = jobs[i];
        const uint8_t* src = host.data() + (kv_entry_ptr(kv, j.slot, j.is_v) - kv.arena) - first_chunk * kv.chunk_bytes;
        uint8_t* dst = j.is_v ? vb + (n_v++) * kv.slot_bytes[1] : kb + (n_k++) * kv.slot_bytes[0];
        std::memcpy(dst, src, kv.slot_bytes[j.is_v]);
        fits[i] = j.fits;
      }
    }
    const AttnSeq seq{static_cast<const uint32_t*>(tab.p), 0, n_q, n_ctx - n_q};
    Buf qd(be, sizeof(AttnSeq), &seq);
    const AttentionArgs args{n_head, scale, sliding_window, softcap, n_q, n_ctx};
    be.attention(kv, args, static_cast<const AttnSeq*>(qd.p), 1, qq.f(), od.f());
    be.download(out, od.p, (size_t)n_q * n_head * d * 4);
    be.synchronize();
  }
  return nb::make_tuple(arr, k_arr, v_arr, fits_arr);
}


// ---- fused decode ops (backend.h): the backend's own kernels or backend.cpp's composition ----

// Weight matrices uploaded to the backend for one call: (raw rows, type) pairs.
struct DeviceWeights {
  std::vector<std::unique_ptr<PlacedWeight>> placed;
  std::vector<WeightView> w;
  DeviceWeights(Backend& be, const std::vector<std::pair<Bytes2D, nb::handle>>& ws, int64_t n_cols, const char* op) {
    for (const auto& [raw, type] : ws) {
      placed.push_back(std::make_unique<PlacedWeight>(be, raw, parse_type(type)));
      const WeightView& v = placed.back()->w;
      if (v.n_cols != n_cols)
        throw nb::value_error(strfmt("%s: a weight has %lld columns, x has %lld", op, (long long)v.n_cols,
                                     (long long)n_cols).c_str());
      w.push_back(v);
    }
  }
};

int64_t rows_of(const F32& x, int64_t n_cols, const char* op) {
  if (x.ndim() != 2 || (int64_t)x.shape(1) != n_cols)
    throw nb::value_error(strfmt("%s: x must be (n_tok, %lld)", op, (long long)n_cols).c_str());
  return (int64_t)x.shape(0);
}

nb::tuple norm_matmuls_op(Backend& be, F32 x, F32 norm_w, float eps, std::vector<std::pair<Bytes2D, nb::handle>> ws,
                          bool fused) {
  const int64_t dim = (int64_t)norm_w.size(), n_tok = rows_of(x, dim, "norm_matmuls");
  if (ws.empty() || ws.size() > 3) throw nb::value_error("norm_matmuls: 1 to 3 weights");
  DeviceWeights dw(be, ws, dim, "norm_matmuls");
  const int n_w = (int)ws.size();
  std::vector<OutF32> ys;
  std::vector<float*> hy(n_w);
  for (int i = 0; i < n_w; ++i) ys.push_back(owned<float>({(size_t)n_tok, (size_t)dw.w[i].n_rows}, &hy[i]));
  float* hxn;
  OutF32 xn_arr = owned<float>({(size_t)n_tok, (size_t)dim}, &hxn);
  {
    nb::gil_scoped_release nogil;
    Buf xd(be, x.size() * 4, x.data()), nd(be, norm_w.size() * 4, norm_w.data()), xn(be, x.size() * 4);
    std::vector<std::unique_ptr<Buf>> yd;
    std::vector<float*> y(n_w);
    for (int i = 0; i < n_w; ++i) {
      yd.push_back(std::make_unique<Buf>(be, (size_t)n_tok * dw.w[i].n_rows * 4));
      y[i] = yd.back()->f();
    }
    if (fused) be.norm_matmuls(xd.f(), nd.f(), eps, n_tok, dim, n_w, dw.w.data(), nullptr, y.data(), xn.f());
    else be.Backend::norm_matmuls(xd.f(), nd.f(), eps, n_tok, dim, n_w, dw.w.data(), nullptr, y.data(), xn.f());
    for (int i = 0; i < n_w; ++i) be.download(hy[i], y[i], (size_t)n_tok * dw.w[i].n_rows * 4);
    be.download(hxn, xn.p, x.size() * 4);
  }
  nb::list out;
  for (auto& y : ys) out.append(y);
  return nb::make_tuple(out, xn_arr);
}

OutF32 norm_gate_up_op(Backend& be, F32 x, F32 norm_w, float eps, std::pair<Bytes2D, nb::handle> gate,
                       std::pair<Bytes2D, nb::handle> up, int act, bool fused) {
  const int64_t dim = (int64_t)norm_w.size(), n_tok = rows_of(x, dim, "norm_gate_up");
  DeviceWeights dw(be, {gate, up}, dim, "norm_gate_up");
  const int64_t n_ff = dw.w[0].n_rows;
  if (dw.w[1].n_rows != n_ff) throw nb::value_error("norm_gate_up: gate and up differ in rows");
  float* hh;
  OutF32 h_arr = owned<float>({(size_t)n_tok, (size_t)n_ff}, &hh);
  nb::gil_scoped_release nogil;
  Buf xd(be, x.size() * 4, x.data()), nd(be, norm_w.size() * 4, norm_w.data()), xn(be, x.size() * 4);
  Buf h(be, (size_t)n_tok * n_ff * 4), us(be, (size_t)n_tok * n_ff * 4);
  if (fused) be.norm_gate_up(xd.f(), nd.f(), eps, n_tok, dim, dw.w[0], dw.w[1], (Activation)act, h.f(), us.f(), xn.f());
  else be.Backend::norm_gate_up(xd.f(), nd.f(), eps, n_tok, dim, dw.w[0], dw.w[1], (Activation)act, h.f(), us.f(), xn.f());
  be.download(hh, h.p, (size_t)n_tok * n_ff * 4);
  return h_arr;
}

OutF32 matmul_add_op(Backend& be, Bytes2D raw, nb::handle type, F32 x, F32 y, bool fused) {
  DeviceWeights dw(be, {{raw, type}}, x.ndim() == 2 ? (int64_t)x.shape(1) : -1, "matmul_add");
  const WeightView& w = dw.w[0];
  const int64_t n_tok = rows_of(x, w.n_cols, "matmul_add");
  if (y.ndim() != 2 || (int64_t)y.shape(0) != n_tok || (int64_t)y.shape(1) != w.n_rows)
    throw nb::value_error("matmul_add: y must be (n_tok, n_rows)");
  float* hy;
  OutF32 out = owned<float>({(size_t)n_tok, (size_t)w.n_rows}, &hy);
  nb::gil_scoped_release nogil;
  Buf xd(be, x.size() * 4, x.data()), yd(be, y.size() * 4, y.data()), tmp(be, y.size() * 4);
  if (fused) be.matmul_add(w, xd.f(), n_tok, yd.f(), tmp.f());
  else be.Backend::matmul_add(w, xd.f(), n_tok, yd.f(), tmp.f());
  be.download(hy, yd.p, y.size() * 4);
  return out;
}

}  // namespace

void bind_backend_ops(nb::module_& m) {
  m.def("op_rms_norm", [](Backend& be, F32 x, F32 w, float eps) {
        const int64_t dim = (int64_t)w.size(), rows = dim ? (int64_t)x.size() / dim : 0;
        if (rows * dim != (int64_t)x.size()) throw nb::value_error("rms_norm: x is not whole rows of len(w)");
        Buf wd(be, w.size() * 4, w.data());
        return in_place(be, x, [&](float* p) { be.rms_norm(p, wd.f(), eps, rows, dim, p); });
      }, nb::arg("backend"), nb::arg("x"), nb::arg("w"), nb::arg("eps"), "x (rows, dim) -> rms_norm(x) * w");
  m.def("op_rope", [](Backend& be, F32 x, I32 pos, int style, int n_rot, float base, float freq_scale,
                      std::optional<F32> freq_factors, float ext_factor, float attn_factor, float beta_fast,
                      float beta_slow, int n_ctx_orig) {
        if (x.ndim() != 3 || pos.shape(0) != x.shape(0)) throw nb::value_error("rope: x (n_tok, n_heads, head_dim), pos (n_tok)");
        std::optional<Buf> ff;
        if (freq_factors) ff.emplace(be, freq_factors->size() * 4, freq_factors->data());
        Buf pd(be, pos.size() * 4, pos.data());
        RopeParams p;
        p.style = style == 0 ? RopeStyle::Norm : RopeStyle::Neox;
        p.n_rot = n_rot;
        p.base = base;
        p.freq_scale = freq_scale;
        p.freq_factors = ff ? ff->f() : nullptr;
        p.ext_factor = ext_factor;
        p.attn_factor = attn_factor;
        p.beta_fast = beta_fast;
        p.beta_slow = beta_slow;
        p.n_ctx_orig = n_ctx_orig;
        return in_place(be, x, [&](float* d) {
          be.rope(d, (int64_t)x.shape(0), (int32_t)x.shape(1), (int32_t)x.shape(2), static_cast<const int32_t*>(pd.p), p);
        });
      }, nb::arg("backend"), nb::arg("x"), nb::arg("pos"), nb::arg("style"), nb::arg("n_rot"), nb::arg("base"),
      nb::arg("freq_scale") = 1.f, nb::arg("freq_factors") = nb::none(), nb::arg("ext_factor") = 0.f,
      nb::arg("attn_factor") = 1.f, nb::arg("beta_fast") = 32.f, nb::arg("beta_slow") = 1.f, nb::arg("n_ctx_orig") = 0,
      "x (n_tok, n_heads, head_dim) rotated at positions pos; style 0 = NORM, 2 = NEOX");
  m.def("op_add", [](Backend& be, F32 y, F32 x) {
        if (x.size() != y.size()) throw nb::value_error("add: sizes differ");
        Buf xd(be, x.size() * 4, x.data());
        return in_place(be, y, [&](float* p) { be.add(p, xd.f(), (int64_t)y.size()); });
      }, nb::arg("backend"), nb::arg("y"), nb::arg("x"), "y + x");
  m.def("op_act_mul", [](Backend& be, F32 g, F32 u, int act) {
        if (g.size() != u.size()) throw nb::value_error("act_mul: sizes differ");
        Buf ud(be, u.size() * 4, u.data());
        return in_place(be, g, [&](float* p) { be.act_mul(p, ud.f(), (int64_t)g.size(), (Activation)act, p); });
      }, nb::arg("backend"), nb::arg("g"), nb::arg("u"), nb::arg("act"), "act(g) * u; act 0 = SiLU, 1 = GELU-tanh");
  m.def("op_softcap", [](Backend& be, F32 x, float cap) {
        return in_place(be, x, [&](float* p) { be.softcap(p, (int64_t)x.size(), cap); });
      }, nb::arg("backend"), nb::arg("x"), nb::arg("cap"), "cap * tanh(x / cap)");
  m.def("op_get_rows", [](Backend& be, Bytes2D raw, nb::handle type, I32 ids, float scale) {
        PlacedWeight pw(be, raw, parse_type(type));
        const WeightView& w = pw.w;
        for (size_t i = 0; i < ids.size(); ++i)
          if (ids.data()[i] < 0 || ids.data()[i] >= w.n_rows) throw nb::value_error("get_rows: id out of range");
        float* out;
        OutF32 arr = owned<float>({ids.size(), (size_t)w.n_cols}, &out);
        nb::gil_scoped_release nogil;
        Buf id(be, ids.size() * 4, ids.data()), od(be, ids.size() * w.n_cols * 4);
        be.get_rows(w, static_cast<const int32_t*>(id.p), (int64_t)ids.size(), scale, od.f());
        be.download(out, od.p, ids.size() * w.n_cols * 4);
        return arr;
      }, nb::arg("backend"), nb::arg("raw"), nb::arg("type"), nb::arg("ids"), nb::arg("scale") = 1.f,
      "rows ids of the raw weight matrix, dequantized, times scale");
  m.def("op_attention", &attention_op, nb::arg("backend"), nb::arg("k"), nb::arg("v"), nb::arg("q"), nb::arg("scale"),
        nb::arg("sliding_window") = 0, nb::arg("softcap") = 0.f,
        "k, v (n_ctx, n_head_kv, d) stored in a paged BF16 cache via kv_store, then attention of q (n_q, n_head, d) "
        "at the last n_q positions");
  m.def("op_lossy_attention", &lossy_attention_op, nb::arg("backend"), nb::arg("k"), nb::arg("v"), nb::arg("q"),
        nb::arg("scale"), nb::arg("cache"), nb::arg("window") = 0, nb::arg("center") = false,
        nb::arg("sliding_window") = 0, nb::arg("softcap") = 0.f,
        "op_attention over a one-layer lossy cache (e8, q8, kivi2) whose blocks older than `window` tokens are "
        "finalized; returns (out, K slots, V slots, fits) with the finalized slots' bytes");
  m.def("op_norm_matmuls", &norm_matmuls_op, nb::arg("backend"), nb::arg("x"), nb::arg("norm_w"), nb::arg("eps"),
        nb::arg("weights"), nb::arg("fused") = true,
        "([x_n · w_iᵀ for the (raw, type) weights], x_n) with x_n = rms_norm(x) * norm_w: the backend's fused op, "
        "or with fused=False backend.cpp's composition of its primitive ops");
  m.def("op_norm_gate_up", &norm_gate_up_op, nb::arg("backend"), nb::arg("x"), nb::arg("norm_w"), nb::arg("eps"),
        nb::arg("gate"), nb::arg("up"), nb::arg("act"), nb::arg("fused") = true,
        "act(x_n · gateᵀ) * (x_n · upᵀ), x_n = rms_norm(x) * norm_w; act 0 = SiLU, 1 = GELU-tanh (fused as op_norm_matmuls)");
  m.def("op_matmul_add", &matmul_add_op, nb::arg("backend"), nb::arg("raw"), nb::arg("type"), nb::arg("x"), nb::arg("y"),
        nb::arg("fused") = true, "y + x · wᵀ (fused as op_norm_matmuls)");
}

}  // namespace gaacrt::py
