// e8_bind.cpp — the E8 k2v2 codec and the scalar cache tiles (q8, KIVI-2, v2 values) on numpy
// arrays, for tests and benchmarks: codebook, block encoder, rotation, key/value blocks, both
// scoring paths, and the per-format byte accounting. Only converts types and shapes; every
// decision is in src/codec/e8 and src/codec/scalar.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include <cstring>
#include <vector>

#include "bindings.h"
#include "codec/e8/e8_encode.h"
#include "codec/e8/e8_keys.h"
#include "codec/e8/e8_layout.h"
#include "codec/scalar/asym2.h"
#include "codec/scalar/kv_codec_bytes.h"
#include "codec/scalar/q8_tile.h"
#include "codec/scalar/scalar_codecs.h"
#include "common/error.h"
#include "kv/kv_format.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace gaacrt::py {
namespace {

using F32 = nb::ndarray<const float, nb::c_contig, nb::device::cpu>;
using U16 = nb::ndarray<const uint16_t, nb::c_contig, nb::device::cpu>;
using U8 = nb::ndarray<const uint8_t, nb::c_contig, nb::device::cpu>;
constexpr size_t kTok = E8_TILE_TOKENS;

template <typename A>
void want_shape(const A& a, std::vector<long> shape, const char* what) {
  bool ok = a.ndim() == shape.size();
  for (size_t i = 0; ok && i < shape.size(); ++i) ok = shape[i] < 0 || a.shape(i) == (size_t)shape[i];
  if (!ok) {
    std::string s = "(";
    for (size_t i = 0; i < shape.size(); ++i) s += (shape[i] < 0 ? std::string("n") : std::to_string(shape[i])) + (i + 1 < shape.size() ? ", " : "");
    throw nb::value_error(strfmt("%s must have shape %s)", what, s.c_str()).c_str());
  }
}

// Slot pointers of block b: (nb, n_half, slot_bytes) arrays.
std::vector<const uint8_t*> slot_ptrs(const U8& s, size_t b) {
  std::vector<const uint8_t*> p(s.shape(1));
  for (size_t h = 0; h < p.size(); ++h) p[h] = s.data() + (b * s.shape(1) + h) * s.shape(2);
  return p;
}
void check_slots(const U8& s, int32_t d, bool is_v, const char* op) {
  const int32_t T = e8_tile_dim(d);
  want_shape(s, {-1, e8_n_half(d), (long)(is_v ? e8_v_slot_bytes(T) : e8_k_slot_bytes(T))},
             strfmt("%s: slots", op).c_str());
}
void check_key_slots(const U8& s, const E8LayerCodec& c, const char* op) {
  want_shape(s, {-1, e8_n_half(c.d), (long)e8_key_slot_bytes(c)}, strfmt("%s: slots", op).c_str());
}

// ---- codebook and block encoder ------------------------------------------------------------------
nb::object packed_table() {
  uint32_t* p;
  auto a = owned<uint32_t>({(size_t)E8_N_PROTO}, &p);
  for (int i = 0; i < E8_N_PROTO; ++i) p[i] = e8_packed_table[i];
  return nb::cast(a);
}

nb::object decode_codes(U16 codes) {
  std::vector<size_t> shape(codes.shape_ptr(), codes.shape_ptr() + codes.ndim());
  shape.push_back(E8_BLOCK);
  float* out;
  auto a = owned<float>(shape, &out);
  for (size_t i = 0; i < codes.size(); ++i) {
    const E8Vec8 g = e8_decode_word(e8_packed_table[codes.data()[i] >> 8], codes.data()[i]);
    std::memcpy(out + i * E8_BLOCK, g.v, sizeof g.v);
  }
  return nb::cast(a);
}

nb::tuple encode_blocks(F32 x) {
  want_shape(x, {-1, E8_BLOCK}, "e8_encode_blocks: x");
  const size_t n = x.shape(0);
  uint16_t* codes;
  float* err;
  auto ca = owned<uint16_t>({n}, &codes);
  auto ea = owned<float>({n}, &err);
  {
    nb::gil_scoped_release nogil;
    for (size_t i = 0; i < n; ++i) {
      E8Vec8 v;
      std::memcpy(v.v, x.data() + i * E8_BLOCK, sizeof v.v);
      const E8Encoded e = e8_encode_block(v);
      codes[i] = (uint16_t)e.code;
      err[i] = e.err;
    }
  }
  return nb::make_tuple(ca, ea);
}

// ---- rotation and rotated keys ---------------------------------------------------------------------
nb::object rotation(int32_t d, int32_t layer, uint64_t seed) {
  const std::vector<float> R = e8_haar_rotation(d, seed, layer);
  float* p;
  auto a = owned<float>({(size_t)d, (size_t)d}, &p);
  std::memcpy(p, R.data(), R.size() * sizeof(float));
  return nb::cast(a);
}

nb::object rotate(F32 R, F32 x, bool inverse) {
  if (R.ndim() != 2 || R.shape(0) != R.shape(1)) throw nb::value_error("e8_rotate: R must be (d, d)");
  const long d = (long)R.shape(0);
  want_shape(x, {-1, d}, "e8_rotate: x");
  float* y;
  auto a = owned<float>({x.shape(0), (size_t)d}, &y);
  if (inverse) e8_unrotate(R.data(), (int32_t)d, x.data(), (int64_t)x.shape(0), y);
  else e8_rotate(R.data(), (int32_t)d, x.data(), (int64_t)x.shape(0), y);
  return nb::cast(a);
}

nb::tuple encode_rotated(F32 kr, float alpha) {
  if (kr.ndim() != 2) throw nb::value_error("e8_encode_rotated: kr must be (n, d)");
  const size_t n = kr.shape(0), d = kr.shape(1);
  uint16_t* codes;
  float* norms;
  auto ca = owned<uint16_t>({n, d / E8_BLOCK}, &codes);
  auto na = owned<float>({n}, &norms);
  if (d == 0 || d % E8_BLOCK != 0)
    throw Error("e8", "bad_head_dim", strfmt("e8_encode_rotated: head dim %zu is not a multiple of 8", d));
  {
    nb::gil_scoped_release nogil;
    e8_encode_rotated(kr.data(), (int64_t)n, (int32_t)d, alpha, codes, norms);
  }
  return nb::make_tuple(ca, na);
}

nb::object decode_rotated(U16 codes, F32 norms, float alpha) {
  if (codes.ndim() != 2) throw nb::value_error("e8_decode_rotated: codes must be (n, d/8)");
  const size_t n = codes.shape(0), d = codes.shape(1) * E8_BLOCK;
  want_shape(norms, {(long)n}, "e8_decode_rotated: norms");
  float* out;
  auto a = owned<float>({n, d}, &out);
  e8_decode_rotated(codes.data(), norms.data(), (int64_t)n, (int32_t)d, alpha, out);
  return nb::cast(a);
}

// ---- E8LayerCodec: cache blocks --------------------------------------------------------------------
nb::object encode_keys(const E8LayerCodec& c, F32 k) {
  want_shape(k, {-1, (long)kTok, c.d}, "E8LayerCodec.encode_keys: k");
  const size_t nb_ = k.shape(0), nh = e8_n_half(c.d), sb = e8_key_slot_bytes(c);
  uint8_t* out;
  auto a = owned<uint8_t>({nb_, nh, sb}, &out);
  {
    nb::gil_scoped_release nogil;
    for (size_t b = 0; b < nb_; ++b) {
      std::vector<uint8_t*> s(nh);
      for (size_t h = 0; h < nh; ++h) s[h] = out + (b * nh + h) * sb;
      e8_encode_key_block(c, k.data() + b * kTok * c.d, s.data());
    }
  }
  return nb::cast(a);
}

nb::object encode_keys_bf16(const E8LayerCodec& c, U16 pages) {
  const int32_t T = e8_tile_dim(c.d);
  want_shape(pages, {-1, e8_n_half(c.d), (long)kTok, T}, "E8LayerCodec.encode_keys_bf16: pages");
  const size_t nb_ = pages.shape(0), nh = e8_n_half(c.d), sb = e8_key_slot_bytes(c);
  uint8_t* out;
  auto a = owned<uint8_t>({nb_, nh, sb}, &out);
  for (size_t b = 0; b < nb_; ++b) {
    std::vector<uint8_t*> s(nh);
    std::vector<const uint16_t*> p(nh);
    for (size_t h = 0; h < nh; ++h) {
      s[h] = out + (b * nh + h) * sb;
      p[h] = pages.data() + (b * nh + h) * kTok * T;
    }
    e8_encode_key_block_bf16(c, p.data(), s.data());
  }
  return nb::cast(a);
}

nb::object decode_keys(const E8LayerCodec& c, U8 slots) {
  check_key_slots(slots, c, "E8LayerCodec.decode_keys");
  float* out;
  auto a = owned<float>({slots.shape(0), kTok, (size_t)c.d}, &out);
  for (size_t b = 0; b < slots.shape(0); ++b) e8_decode_key_block(c, slot_ptrs(slots, b).data(), out + b * kTok * c.d);
  return nb::cast(a);
}

nb::object score(const E8LayerCodec& c, U8 slots, F32 q_rot) {
  check_key_slots(slots, c, "E8LayerCodec.score");
  want_shape(q_rot, {-1, c.d}, "E8LayerCodec.score: q_rot");
  const size_t nb_ = slots.shape(0), nq = q_rot.shape(0);
  float* out;
  auto a = owned<float>({nq, nb_ * kTok}, &out);
  {
    nb::gil_scoped_release nogil;
    std::vector<float> s(nq * kTok);
    for (size_t b = 0; b < nb_; ++b) {
      e8_score_key_block(c, slot_ptrs(slots, b).data(), q_rot.data(), (int32_t)nq, s.data());
      for (size_t h = 0; h < nq; ++h) std::memcpy(out + h * nb_ * kTok + b * kTok, s.data() + h * kTok, kTok * 4);
    }
  }
  return nb::cast(a);
}

nb::object block_mean_dot(const E8LayerCodec& c, U8 slots, F32 q_rot) {
  check_key_slots(slots, c, "E8LayerCodec.block_mean_dot");
  want_shape(q_rot, {c.d}, "E8LayerCodec.block_mean_dot: q_rot");
  float* out;
  auto a = owned<float>({slots.shape(0)}, &out);
  for (size_t b = 0; b < slots.shape(0); ++b) out[b] = e8_block_mean_dot(c, slot_ptrs(slots, b).data(), q_rot.data());
  return nb::cast(a);
}

nb::object build_tables(const E8LayerCodec& c, F32 q_rot) {
  want_shape(q_rot, {c.d}, "E8LayerCodec.build_tables: q_rot");
  float* out;
  auto a = owned<float>({(size_t)c.d / E8_BLOCK, (size_t)E8_N_CODES}, &out);
  {
    nb::gil_scoped_release nogil;
    e8_build_query_tables(q_rot.data(), c.d, out);
  }
  return nb::cast(a);
}

nb::object score_table(const E8LayerCodec& c, U8 slots, F32 tables, std::optional<F32> q_rot) {
  check_key_slots(slots, c, "E8LayerCodec.score_table");
  want_shape(tables, {c.d / E8_BLOCK, E8_N_CODES}, "E8LayerCodec.score_table: tables");
  const size_t nb_ = slots.shape(0);
  float* out;
  auto a = owned<float>({nb_ * kTok}, &out);
  {
    nb::gil_scoped_release nogil;
    for (size_t b = 0; b < nb_; ++b) {
      const std::vector<const uint8_t*> sp = slot_ptrs(slots, b);
      const float qm = q_rot ? e8_block_mean_dot(c, sp.data(), q_rot->data()) : 0.0f;
      e8_score_key_block_table(c, sp.data(), tables.data(), qm, out + b * kTok);
    }
  }
  return nb::cast(a);
}

void check_value_dim(int32_t dv, const char* op) {
  if (!e8_head_dim_ok(dv)) throw Error("e8", "bad_head_dim", strfmt("%s: value head dim %d is not supported", op, dv));
}

nb::object encode_values(F32 v) {
  if (v.ndim() != 3 || v.shape(1) != kTok) throw nb::value_error("e8_encode_values: v must be (n_blocks, 16, d_v)");
  const int32_t dv = (int32_t)v.shape(2);
  const size_t nb_ = v.shape(0);
  check_value_dim(dv, "e8_encode_values");
  const size_t nh = e8_n_half(dv), sb = e8_v_slot_bytes(e8_tile_dim(dv));
  uint8_t* out;
  auto a = owned<uint8_t>({nb_, nh, sb}, &out);
  for (size_t b = 0; b < nb_; ++b) {
    std::vector<uint8_t*> s(nh);
    for (size_t h = 0; h < nh; ++h) s[h] = out + (b * nh + h) * sb;
    e8_encode_value_block(dv, v.data() + b * kTok * dv, s.data());
  }
  return nb::cast(a);
}

nb::object decode_values(U8 slots, int32_t dv) {
  check_value_dim(dv, "e8_decode_values");
  check_slots(slots, dv, true, "e8_decode_values");
  float* out;
  auto a = owned<float>({slots.shape(0), kTok, (size_t)dv}, &out);
  for (size_t b = 0; b < slots.shape(0); ++b) e8_decode_value_block(dv, slot_ptrs(slots, b).data(), out + b * kTok * dv);
  return nb::cast(a);
}

// ---- scalar tiles: (n, 16, T) floats <-> (n, slot_bytes) ------------------------------------------
struct TileFormat {
  const char* name;
  bool (*ok)(int32_t);
  uint32_t (*bytes)(int32_t);
  void (*enc)(const float*, int64_t, int32_t, uint8_t*);
  void (*dec)(const uint8_t*, int32_t, float*, int64_t);
};
const TileFormat kV2 = {"v2", v2_tile_dim_ok, v2_slot_bytes, v2_encode_tile, v2_decode_tile};
const TileFormat kKivi2K = {"kivi2_k", kivi2_k_tile_dim_ok, kivi2_k_slot_bytes, kivi2_k_encode_tile, kivi2_k_decode_tile};
const TileFormat kQ8 = {"q8", q8_tile_dim_ok, q8_slot_bytes, q8_encode_tile, q8_decode_tile};

void check_tile_dim(const TileFormat& f, int32_t T, const char* op) {
  if (!f.ok(T) || T > 1024) throw Error("kv", "bad_tile_dim", strfmt("%s_%s: tile_dim %d is not supported", f.name, op, T));
}
void check_tile_slots(const TileFormat& f, const U8& slots, int32_t T, const char* op) {
  check_tile_dim(f, T, op);
  want_shape(slots, {-1, (long)f.bytes(T)}, strfmt("%s_%s: slots", f.name, op).c_str());
}

nb::object tiles_encode(const TileFormat& f, F32 x) {
  if (x.ndim() != 3 || x.shape(1) != kTok)
    throw nb::value_error(strfmt("%s_encode_tiles: x must be (n, 16, tile_dim)", f.name).c_str());
  const int32_t T = (int32_t)x.shape(2);
  check_tile_dim(f, T, "encode_tiles");
  const size_t n = x.shape(0), sb = f.bytes(T);
  uint8_t* out;
  auto a = owned<uint8_t>({n, sb}, &out);
  {
    nb::gil_scoped_release nogil;
    for (size_t i = 0; i < n; ++i) f.enc(x.data() + i * kTok * T, T, T, out + i * sb);
  }
  return nb::cast(a);
}

nb::object tiles_decode(const TileFormat& f, U8 slots, int32_t T) {
  check_tile_slots(f, slots, T, "decode_tiles");
  const size_t n = slots.shape(0);
  float* out;
  auto a = owned<float>({n, kTok, (size_t)T}, &out);
  for (size_t i = 0; i < n; ++i) f.dec(slots.data() + i * slots.shape(1), T, out + i * kTok * T, T);
  return nb::cast(a);
}

// Scores of n_q queries (n_q, T) against every tile: (n_q, n * 16).
nb::object tiles_score(const TileFormat& f, void (*fn)(const uint8_t*, int32_t, const float*, int64_t, int32_t, float*),
                       U8 slots, int32_t T, F32 q) {
  check_tile_slots(f, slots, T, "score_tiles");
  want_shape(q, {-1, T}, strfmt("%s_score_tiles: q", f.name).c_str());
  const size_t n = slots.shape(0), nq = q.shape(0);
  float* out;
  auto a = owned<float>({nq, n * kTok}, &out);
  std::vector<float> s(nq * kTok);
  for (size_t i = 0; i < n; ++i) {
    fn(slots.data() + i * slots.shape(1), T, q.data(), T, (int32_t)nq, s.data());
    for (size_t h = 0; h < nq; ++h) std::memcpy(out + h * n * kTok + i * kTok, s.data() + h * kTok, kTok * 4);
  }
  return nb::cast(a);
}

// sum over tiles and tokens of p[h][i*16 + t] * v^_t: (n_q, T).
nb::object tiles_accumulate(const TileFormat& f, void (*fn)(const uint8_t*, int32_t, const float*, int32_t, float*, int64_t),
                            U8 slots, int32_t T, F32 p) {
  check_tile_slots(f, slots, T, "accumulate_tiles");
  const size_t n = slots.shape(0);
  want_shape(p, {-1, (long)(n * kTok)}, strfmt("%s_accumulate_tiles: p", f.name).c_str());
  const size_t nq = p.shape(0);
  float* out;
  auto a = owned<float>({nq, (size_t)T}, &out);
  std::vector<float> w(nq * kTok);
  for (size_t i = 0; i < n; ++i) {
    for (size_t h = 0; h < nq; ++h) std::memcpy(w.data() + h * kTok, p.data() + h * n * kTok + i * kTok, kTok * 4);
    fn(slots.data() + i * slots.shape(1), T, w.data(), (int32_t)nq, out, T);
  }
  return nb::cast(a);
}

nb::dict bytes_per_token_head(const std::string& format, int32_t dk, int32_t dv) {
  const KVTokenHeadBytes b = kv_codec_bytes_per_token_head(parse_kv_format(format), dk, dv);
  nb::dict r;
  r["k"] = b.k;
  r["v"] = b.v;
  r["total"] = b.total();
  return r;
}

}  // namespace

void bind_e8(nb::module_& m) {
  m.attr("E8_DEFAULT_SEED") = E8_DEFAULT_SEED;
  m.def("e8_packed_table", &packed_table, "The 1 KiB packed prototype table (256 uint32 words, spec/e8.md §3).");
  m.def("e8_decode_codes", &decode_codes, "codes"_a, "Reference decode of 16-bit codes: float32 (..., 8).");
  m.def("e8_encode_blocks", &encode_blocks, "x"_a,
        "Nearest codeword of each 8-dim row of x (n, 8): (codes uint16 (n,), squared error float32 (n,)).");
  m.def("e8_alpha", &e8_alpha, "d"_a, "Block scale alpha for head dim d (12 at 128, else 1.04 sqrt(d)).");
  m.def("e8_rotation", &rotation, "d"_a, "layer"_a, "seed"_a = E8_DEFAULT_SEED,
        "The seeded per-layer Haar rotation R (d, d), k~ = R k (e8_rotation.h documents the generator).");
  m.def("e8_rotate", [](F32 R, F32 x) { return rotate(R, x, false); }, "R"_a, "x"_a, "Rows of x (n, d) times R: R x.");
  m.def("e8_unrotate", [](F32 R, F32 x) { return rotate(R, x, true); }, "R"_a, "x"_a, "R^T x for rows x (n, d).");
  m.def("e8_encode_rotated", &encode_rotated, "kr"_a, "alpha"_a,
        "Encode rotated keys (n, d): (codes uint16 (n, d/8), norms float32 (n,)).");
  m.def("e8_decode_rotated", &decode_rotated, "codes"_a, "norms"_a, "alpha"_a, "Rotated-basis reconstruction (n/alpha) g.");
  m.def("e8_k_slot_bytes", [](int32_t T) { return e8_k_slot_bytes(T); }, "tile_dim"_a);
  m.def("e8_v_slot_bytes", [](int32_t T) { return e8_v_slot_bytes(T); }, "tile_dim"_a);
  m.def("e8_encode_values", &encode_values, "v"_a, "Value blocks (n, 16, d_v) -> slots (n, n_half, 6*tile_dim).");
  m.def("e8_decode_values", &decode_values, "slots"_a, "d_v"_a, "Value slots -> (n, 16, d_v).");

  nb::class_<E8LayerCodec>(m, "E8LayerCodec", "Per-layer E8 key state: head dim, alpha and rotation.")
      .def("__init__", [](E8LayerCodec* c, int32_t d, int32_t layer, uint64_t seed, bool block_mean) {
             new (c) E8LayerCodec(e8_layer_codec(d, layer, seed, block_mean));
           }, "d"_a, "layer"_a, "seed"_a = E8_DEFAULT_SEED, "block_mean"_a = false,
           "block_mean: key slots carry their block's fp16 mean (rotated basis) and code the residual "
           "(alpha x E8_BLOCK_ALPHA_SCALE).")
      .def_prop_ro("block_mean", [](const E8LayerCodec& c) { return c.block_mean; })
      .def_prop_ro("key_slot_bytes", [](const E8LayerCodec& c) { return e8_key_slot_bytes(c); })
      .def_prop_ro("d", [](const E8LayerCodec& c) { return c.d; })
      .def_prop_ro("alpha", [](const E8LayerCodec& c) { return c.alpha; })
      .def_prop_ro("rotation", [](const E8LayerCodec& c) {
        float* p;
        auto a = owned<float>({(size_t)c.d, (size_t)c.d}, &p);
        std::memcpy(p, c.rot.data(), c.rot.size() * 4);
        return nb::cast(a);
      })
      .def("encode_keys", &encode_keys, "k"_a, "Key blocks (n, 16, d) -> slots (n, n_half, k_slot_bytes).")
      .def("encode_keys_bf16", &encode_keys_bf16, "pages"_a, "BF16 pages (n, n_half, 16, tile_dim) -> slots.")
      .def("decode_keys", &decode_keys, "slots"_a, "Slots -> reconstructed keys (n, 16, d), original basis.")
      .def("score", &score, "slots"_a, "q_rot"_a, "Path (B): <q, k^> for rotated queries (n_q, d) -> (n_q, n*16).")
      .def("build_tables", &build_tables, "q_rot"_a, "Path (A): per-block tables (d/8, 65536) of one rotated query.")
      .def("score_table", &score_table, "slots"_a, "tables"_a, "q_rot"_a = nb::none(),
           "Path (A): scores (n*16,) from a query's tables; with block centering pass the rotated query (d,) too.")
      .def("block_mean_dot", &block_mean_dot, "slots"_a, "q_rot"_a, "<q~, m~> per block (n,): 0 without block centering.");

  m.def("v2_encode_tiles", [](F32 x) { return tiles_encode(kV2, x); }, "x"_a, "2-bit per-token value tiles (n, 16, T) -> (n, 6T).");
  m.def("v2_decode_tiles", [](U8 s, int32_t T) { return tiles_decode(kV2, s, T); }, "slots"_a, "tile_dim"_a);
  m.def("v2_accumulate_tiles", [](U8 s, int32_t T, F32 p) { return tiles_accumulate(kV2, v2_accumulate_tile, s, T, p); },
        "slots"_a, "tile_dim"_a, "p"_a, "sum_t p[h, t] v^_t over all tiles: (n_q, T).");
  m.def("kivi2_k_encode_tiles", [](F32 x) { return tiles_encode(kKivi2K, x); }, "x"_a, "KIVI-2 key tiles (n, 16, T) -> (n, 8T).");
  m.def("kivi2_k_decode_tiles", [](U8 s, int32_t T) { return tiles_decode(kKivi2K, s, T); }, "slots"_a, "tile_dim"_a);
  m.def("kivi2_k_score_tiles", [](U8 s, int32_t T, F32 q) { return tiles_score(kKivi2K, kivi2_k_score_tile, s, T, q); },
        "slots"_a, "tile_dim"_a, "q"_a, "<q_h, k^_t> for queries (n_q, T): (n_q, n*16).");
  m.def("q8_encode_tiles", [](F32 x) { return tiles_encode(kQ8, x); }, "x"_a, "q8 (Q8_0) tiles (n, 16, T) -> (n, 17T).");
  m.def("q8_decode_tiles", [](U8 s, int32_t T) { return tiles_decode(kQ8, s, T); }, "slots"_a, "tile_dim"_a);
  m.def("q8_score_tiles", [](U8 s, int32_t T, F32 q) { return tiles_score(kQ8, q8_score_tile, s, T, q); },
        "slots"_a, "tile_dim"_a, "q"_a);
  m.def("q8_accumulate_tiles", [](U8 s, int32_t T, F32 p) { return tiles_accumulate(kQ8, q8_accumulate_tile, s, T, p); },
        "slots"_a, "tile_dim"_a, "p"_a);

  m.def("kv_codec_slot_bytes", [](const std::string& f, int32_t T, bool is_v) { return kv_codec_slot_bytes(parse_kv_format(f), T, is_v); },
        "format"_a, "tile_dim"_a, "is_v"_a, "Bytes of one compressed 16-token tile of a fixed-size format.");
  m.def("kv_codec_bytes_per_token_head", &bytes_per_token_head, "format"_a, "head_dim_k"_a, "head_dim_v"_a,
        "Compressed bytes per token-head {k, v, total} (without the BF16 window).");
}

}  // namespace gaacrt::py
