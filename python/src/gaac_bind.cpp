// gaac_bind.cpp — the GAAC codec for tests and benchmarks: tile encode / decode / validate on numpy
// arrays (src/codec/gaac/gaac_format.h), calibration, sidecar files and statistics
// (src/codec/gaac/calibration.h). Only converts types; every decision is in the core.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "bindings.h"
#include "codec/gaac/calibration.h"
#include "codec/gaac/fp8_codec.h"
#include "codec/gaac/gaac_fp8_format.h"
#include "codec/gaac/gaac_format.h"
#include "codec/gaac/gaac_host.h"
#include "common/error.h"
#include "gguf/gguf_reader.h"

namespace nb = nanobind;

namespace gaacrt::py {
namespace {

using U8 = nb::ndarray<const uint8_t, nb::c_contig, nb::device::cpu>;
using U16 = nb::ndarray<const uint16_t, nb::c_contig, nb::device::cpu>;
using U64 = nb::ndarray<const uint64_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;

const char* status_kind(int32_t s) {
  switch (s) {
    case GAAC_STATUS_BAD_TAG: return "bad_tag";
    case GAAC_STATUS_ESCAPE_OVERRUN: return "escape_overrun";
    case GAAC_STATUS_TRUNCATED: return "truncated";
    case GAAC_STATUS_ESCAPE_MISMATCH: return "escape_mismatch";
    case GAAC_STATUS_BAD_TILE_DIM: return "bad_tile_dim";
    default: return "ok";
  }
}

void check_dim(int32_t d, const char* op) {
  if (!gaac_tile_dim_ok(d)) throw Error("gaac", "bad_tile_dim", strfmt("%s: tile_dim %d is not a multiple of 8 in 8..128", op, d));
}

// Bases given as (D,) for every tile or (n, D) per tile.
const uint8_t* tile_bases(const U8& b, size_t n, size_t i, int32_t d, const char* what) {
  const size_t sz = b.size();
  if (sz == static_cast<size_t>(d)) return b.data();
  if (sz == n * static_cast<size_t>(d)) return b.data() + i * d;
  throw nb::value_error(strfmt("%s has %zu bytes: expected tile_dim (%d) or n_tiles * tile_dim (%zu)", what, sz, d,
                               n * static_cast<size_t>(d)).c_str());
}

// raw: uint16 (..., 16, D). Returns (escape int32 (n,), slots uint8 (n, fixed + capacity)); a tile
// that does not fit has escape -1 and an all-zero slot row.
nb::tuple encode_tiles(U16 raw, U8 b3, U8 b4, uint32_t capacity) {
  if (raw.ndim() < 2 || raw.shape(raw.ndim() - 2) != GAAC_TILE_TOKENS)
    throw nb::value_error("gaac_encode_tiles: raw must be uint16 of shape (..., 16, tile_dim)");
  const int32_t d = static_cast<int32_t>(raw.shape(raw.ndim() - 1));
  check_dim(d, "gaac_encode_tiles");
  const size_t n = raw.size() / (GAAC_TILE_TOKENS * static_cast<size_t>(d));
  const size_t sb = gaac_slot_bytes(d, capacity);
  int32_t* esc;
  uint8_t* slots;
  auto esc_arr = owned<int32_t>({n}, &esc);
  auto slot_arr = owned<uint8_t>({n, sb}, &slots);
  for (size_t i = 0; i < n; ++i) {  // bases checked with the GIL held (they may throw)
    tile_bases(b3, n, i, d, "b3");
    tile_bases(b4, n, i, d, "b4");
  }
  {
    nb::gil_scoped_release nogil;
    for (size_t i = 0; i < n; ++i)
      esc[i] = gaac_encode_tile(raw.data() + i * GAAC_TILE_TOKENS * d, d, d, tile_bases(b3, n, i, d, "b3"),
                                tile_bases(b4, n, i, d, "b4"), capacity, slots + i * sb);
  }
  return nb::make_tuple(esc_arr, slot_arr);
}

// slots: uint8 (n, S) with S >= fixed + capacity. Returns uint16 (n, 16, D); raises on a bad tile.
nb::object decode_tiles(U8 slots, int32_t d, U8 b3, U8 b4, uint32_t capacity, bool fast) {
  check_dim(d, "gaac_decode_tiles");
  if (slots.ndim() != 2) throw nb::value_error("gaac_decode_tiles: slots must be uint8 of shape (n, slot_bytes)");
  const size_t n = slots.shape(0), sb = slots.shape(1);
  if (sb < gaac_slot_bytes(d, capacity))
    throw Error("gaac", "truncated", strfmt("gaac_decode_tiles: slots of %zu bytes, capacity %u needs %u", sb, capacity,
                                            gaac_slot_bytes(d, capacity)));
  uint16_t* out;
  auto arr = owned<uint16_t>({n, static_cast<size_t>(GAAC_TILE_TOKENS), static_cast<size_t>(d)}, &out);
  for (size_t i = 0; i < n; ++i) { tile_bases(b3, n, i, d, "b3"); tile_bases(b4, n, i, d, "b4"); }
  GaacCheck bad = {GAAC_OK, 0};
  size_t bad_i = 0;
  {
    nb::gil_scoped_release nogil;
    for (size_t i = 0; i < n && bad.status == GAAC_OK; ++i) {
      const uint8_t* s = slots.data() + i * sb;
      const uint8_t *p3 = tile_bases(b3, n, i, d, "b3"), *p4 = tile_bases(b4, n, i, d, "b4");
      uint16_t* o = out + i * GAAC_TILE_TOKENS * d;
      const GaacCheck c = fast ? gaac_decode_tile_fast(s, d, capacity, p3, p4, o, d)
                               : gaac_decode_tile(s, d, capacity, p3, p4, o, d);
      if (c.status != GAAC_OK) { bad = c; bad_i = i; }
    }
  }
  if (bad.status != GAAC_OK)
    throw Error("gaac", status_kind(bad.status), strfmt("gaac_decode_tiles: tile %zu: %s (detail %d)", bad_i,
                                                        status_kind(bad.status), bad.detail));
  return nb::cast(arr);
}

nb::object decode_row(U8 slot, int32_t d, U8 b3, U8 b4, uint32_t capacity, int32_t t) {
  check_dim(d, "gaac_decode_row");
  if (slot.size() < gaac_slot_bytes(d, capacity))
    throw Error("gaac", "truncated", strfmt("gaac_decode_row: slot of %zu bytes, capacity %u needs %u", slot.size(),
                                            capacity, gaac_slot_bytes(d, capacity)));
  if (t < 0 || t >= GAAC_TILE_TOKENS) throw nb::value_error(strfmt("gaac_decode_row: token %d not in 0..15", t).c_str());
  uint16_t* out;
  auto arr = owned<uint16_t>({static_cast<size_t>(d)}, &out);
  const GaacCheck c = gaac_decode_row(slot.data(), d, capacity, tile_bases(b3, 1, 0, d, "b3"),
                                      tile_bases(b4, 1, 0, d, "b4"), t, out);
  if (c.status != GAAC_OK)
    throw Error("gaac", status_kind(c.status), strfmt("gaac_decode_row: %s (detail %d)", status_kind(c.status), c.detail));
  return nb::cast(arr);
}

nb::dict format_info(int32_t d) {
  check_dim(d, "gaac_format");
  nb::dict r;
  r["tile_dim"] = d;
  r["lanes"] = gaac_lanes(d);
  r["group_cols"] = gaac_group_cols(d);
  r["codes_a_offset"] = gaac_codes_a_offset(d);
  r["codes_b_offset"] = gaac_codes_b_offset(d);
  r["tags_offset"] = gaac_tags_offset(d);
  r["fixed_bytes"] = gaac_fixed_bytes(d);
  r["raw_tile_bytes"] = gaac_raw_tile_bytes(d);
  r["max_escape_bytes"] = gaac_max_escape_bytes(d);
  return r;
}

nb::object hist_array(const std::vector<uint64_t>& h) {
  uint64_t* p;
  auto a = owned<uint64_t>({h.size()}, &p);
  if (!h.empty()) std::memcpy(p, h.data(), 8 * h.size());
  return nb::cast(a);
}

void check_kv(const U16& kv, const GaacModelInfo& m, bool is_v, const char* op) {
  if (kv.ndim() != 3 || kv.shape(1) != static_cast<size_t>(m.n_head_kv) || kv.shape(2) != static_cast<size_t>(m.head_dim(is_v)))
    throw nb::value_error(strfmt("%s: kv must be uint16 (n_tokens, %d, %d)", op, m.n_head_kv, m.head_dim(is_v)).c_str());
}


int32_t parse_fp8(const std::string& k) {
  if (k == "e4m3") return GAAC_FP8_E4M3;
  if (k == "e5m2") return GAAC_FP8_E5M2;
  throw nb::value_error(("unknown FP8 kind '" + k + "' (expected 'e4m3' or 'e5m2')").c_str());
}

GaacElement parse_element(const std::string& e) {
  if (e == "bf16") return GaacElement::BF16;
  if (e == "fp8_e4m3" || e == "e4m3") return GaacElement::FP8_E4M3;
  if (e == "fp8_e5m2" || e == "e5m2") return GaacElement::FP8_E5M2;
  throw nb::value_error(("unknown element '" + e + "' (expected 'bf16', 'fp8_e4m3' or 'fp8_e5m2')").c_str());
}

nb::tuple fp8_encode_tiles(const std::string& kind_name, U8 fp8, U8 b2, U8 b3, uint32_t capacity) {
  const int32_t k = parse_fp8(kind_name);
  if (fp8.ndim() < 2 || fp8.shape(fp8.ndim() - 2) != GAAC_TILE_TOKENS)
    throw nb::value_error("gaac_fp8_encode_tiles: fp8 must be uint8 of shape (..., 16, tile_dim)");
  const int32_t d = static_cast<int32_t>(fp8.shape(fp8.ndim() - 1));
  check_dim(d, "gaac_fp8_encode_tiles");
  const size_t n = fp8.size() / (GAAC_TILE_TOKENS * static_cast<size_t>(d)), sb = gaac_fp8_slot_bytes(k, d, capacity);
  for (size_t i = 0; i < n; ++i) { tile_bases(b2, n, i, d, "b2"); tile_bases(b3, n, i, d, "b3"); }
  int32_t* esc;
  uint8_t* slots;
  auto esc_arr = owned<int32_t>({n}, &esc);
  auto slot_arr = owned<uint8_t>({n, sb}, &slots);
  for (size_t i = 0; i < n; ++i)
    esc[i] = gaac_fp8_encode_tile(k, fp8.data() + i * GAAC_TILE_TOKENS * d, d, d, tile_bases(b2, n, i, d, "b2"),
                                  tile_bases(b3, n, i, d, "b3"), capacity, slots + i * sb);
  return nb::make_tuple(esc_arr, slot_arr);
}

nb::object fp8_decode_tiles(const std::string& kind_name, U8 slots, int32_t d, U8 b2, U8 b3, uint32_t capacity) {
  const int32_t k = parse_fp8(kind_name);
  check_dim(d, "gaac_fp8_decode_tiles");
  if (slots.ndim() != 2) throw nb::value_error("gaac_fp8_decode_tiles: slots must be uint8 (n, slot_bytes)");
  const size_t n = slots.shape(0), sb = slots.shape(1);
  if (sb < gaac_fp8_slot_bytes(k, d, capacity))
    throw Error("gaac", "truncated", strfmt("gaac_fp8_decode_tiles: slots of %zu bytes, capacity %u needs %u", sb,
                                            capacity, gaac_fp8_slot_bytes(k, d, capacity)));
  for (size_t i = 0; i < n; ++i) { tile_bases(b2, n, i, d, "b2"); tile_bases(b3, n, i, d, "b3"); }
  uint8_t* out;
  auto arr = owned<uint8_t>({n, static_cast<size_t>(GAAC_TILE_TOKENS), static_cast<size_t>(d)}, &out);
  for (size_t i = 0; i < n; ++i) {
    const GaacCheck c = gaac_fp8_decode_rows(k, slots.data() + i * sb, d, capacity, tile_bases(b2, n, i, d, "b2"),
                                             tile_bases(b3, n, i, d, "b3"), 0xFFFFu, out + i * GAAC_TILE_TOKENS * d, d);
    if (c.status != GAAC_OK)
      throw Error("gaac", status_kind(c.status), strfmt("gaac_fp8_decode_tiles: tile %zu: %s (detail %d)", i,
                                                        status_kind(c.status), c.detail));
  }
  return nb::cast(arr);
}


// Median seconds of one pass of encode / reference decode / fast decode over all tiles, into
// buffers allocated once (so the figure is the codec's, not the allocator's). One thread.
nb::dict time_codec(U16 raw, U8 b3, U8 b4, uint32_t capacity, int reps) {
  if (raw.ndim() < 2 || raw.shape(raw.ndim() - 2) != GAAC_TILE_TOKENS)
    throw nb::value_error("gaac_time_codec: raw must be uint16 of shape (..., 16, tile_dim)");
  const int32_t d = static_cast<int32_t>(raw.shape(raw.ndim() - 1));
  check_dim(d, "gaac_time_codec");
  if (reps < 1) throw nb::value_error("gaac_time_codec: reps must be >= 1");
  const size_t n = raw.size() / (GAAC_TILE_TOKENS * static_cast<size_t>(d)), sb = gaac_slot_bytes(d, capacity);
  for (size_t i = 0; i < n; ++i) { tile_bases(b3, n, i, d, "b3"); tile_bases(b4, n, i, d, "b4"); }
  std::vector<uint8_t> slots(n * sb);
  std::vector<uint16_t> out(raw.size());
  std::vector<double> t[3];
  bool ok = true;
  {
    nb::gil_scoped_release nogil;
    using clock = std::chrono::steady_clock;
    for (int r = 0; r <= reps; ++r) {  // pass 0 warms caches and page tables, not timed
      const auto t0 = clock::now();
      for (size_t i = 0; i < n; ++i)
        ok &= gaac_encode_tile(raw.data() + i * GAAC_TILE_TOKENS * d, d, d, tile_bases(b3, n, i, d, "b3"),
                               tile_bases(b4, n, i, d, "b4"), capacity, slots.data() + i * sb) >= 0;
      const auto t1 = clock::now();
      for (size_t i = 0; i < n; ++i)
        ok &= gaac_decode_tile(slots.data() + i * sb, d, capacity, tile_bases(b3, n, i, d, "b3"),
                               tile_bases(b4, n, i, d, "b4"), out.data() + i * GAAC_TILE_TOKENS * d, d).status == GAAC_OK;
      const auto t2 = clock::now();
      for (size_t i = 0; i < n; ++i)
        ok &= gaac_decode_tile_fast(slots.data() + i * sb, d, capacity, tile_bases(b3, n, i, d, "b3"),
                                    tile_bases(b4, n, i, d, "b4"), out.data() + i * GAAC_TILE_TOKENS * d, d).status == GAAC_OK;
      const auto t3 = clock::now();
      if (r == 0) continue;
      t[0].push_back(std::chrono::duration<double>(t1 - t0).count());
      t[1].push_back(std::chrono::duration<double>(t2 - t1).count());
      t[2].push_back(std::chrono::duration<double>(t3 - t2).count());
    }
    ok &= std::memcmp(out.data(), raw.data(), 2 * raw.size()) == 0;
  }
  if (!ok) throw Error("gaac", "roundtrip", "gaac_time_codec: a tile did not fit or did not decode bit-exactly");
  nb::dict r;
  const char* names[3] = {"encode_s", "decode_s", "decode_fast_s"};
  for (int k = 0; k < 3; ++k) {
    std::sort(t[k].begin(), t[k].end());
    r[names[k]] = t[k][t[k].size() / 2];
  }
  return r;
}

}  // namespace

void bind_gaac(nb::module_& m) {
  m.def("gaac_format", &format_info, nb::arg("tile_dim"), "byte geometry of a GAAC tile of tile_dim channels");
  m.def("gaac_encode_tiles", &encode_tiles, nb::arg("raw"), nb::arg("b3"), nb::arg("b4"), nb::arg("capacity"),
        "encode BF16 tiles uint16 (..., 16, D) with bases (D,) or (n, D); returns (escape bytes int32 (n,) with -1 "
        "where a tile does not fit, slots uint8 (n, fixed + capacity))");
  m.def("gaac_decode_tiles", &decode_tiles, nb::arg("slots"), nb::arg("tile_dim"), nb::arg("b3"), nb::arg("b4"),
        nb::arg("capacity"), nb::arg("fast") = false,
        "decode slots uint8 (n, >= fixed + capacity) to BF16 uint16 (n, 16, D); GaacrtError (kind bad_tag / "
        "escape_overrun / ...) for a corrupt tile. fast=True: gaac_decode_tile_fast (SIMD interleave)");
  m.def("gaac_decode_tile_fast_isa", &gaac_decode_tile_fast_isa);
  m.def("gaac_time_codec", &time_codec, nb::arg("raw"), nb::arg("b3"), nb::arg("b4"), nb::arg("capacity"),
        nb::arg("reps") = 5, "benchmark: median seconds of encode / decode / fast decode passes over all tiles "
        "(buffers allocated once, one thread, round trip checked)");
  m.def("gaac_decode_row", &decode_row, nb::arg("slot"), nb::arg("tile_dim"), nb::arg("b3"), nb::arg("b4"),
        nb::arg("capacity"), nb::arg("token"), "decode one token row of one slot: uint16 (D,)");
  m.def("gaac_validate", [](U8 slot, int32_t d, uint32_t capacity, int32_t expected) {
        const GaacCheck c = gaac_validate(slot.data(), static_cast<uint32_t>(slot.size()), d, capacity, expected);
        return nb::make_tuple(status_kind(c.status), c.detail);
      }, nb::arg("slot"), nb::arg("tile_dim"), nb::arg("capacity"), nb::arg("expected_escape") = -1,
      "check a slot (all of its bytes given) -> (status, detail): 'ok', 'bad_tag' (group), 'escape_overrun' "
      "(bytes needed), 'truncated' (bytes needed), 'escape_mismatch' (bytes the tags need), 'bad_tile_dim'");
  m.def("gaac_tile_modes", [](U8 slot, int32_t d) {
        check_dim(d, "gaac_tile_modes");
        if (slot.size() < gaac_fixed_bytes(d)) throw Error("gaac", "truncated", "gaac_tile_modes: shorter than the fixed part");
        const GaacModeCounts c = gaac_tile_modes(slot.data(), d);
        return nb::make_tuple(c.n3, c.n4, c.nraw, c.nbad);
      }, nb::arg("slot"), nb::arg("tile_dim"), "(3-bit, 4-bit, raw, reserved-tag) group counts of a slot");
  m.def("gaac_best_window", [](U64 hist, int32_t width) {
        if (hist.size() != 256) throw nb::value_error("gaac_best_window: hist must be uint64 (256,)");
        return gaac_best_window(hist.data(), width);
      }, nb::arg("hist"), nb::arg("width"), "start of the width-wide exponent window covering the most (ties: lowest)");
  m.def("gaac_expected_tile_bytes", [](std::vector<uint64_t> h, uint32_t c, uint32_t fixed, uint32_t raw) {
        return gaac_expected_tile_bytes(h, c, fixed, raw);
      }, nb::arg("escape_hist"), nb::arg("capacity"), nb::arg("fixed_bytes"), nb::arg("raw_tile_bytes"));
  m.def("gaac_choose_capacity", [](std::vector<uint64_t> h, uint32_t fixed, uint32_t raw, uint32_t align) {
        return gaac_choose_capacity(h, fixed, raw, align);
      }, nb::arg("escape_hist"), nb::arg("fixed_bytes"), nb::arg("raw_tile_bytes"), nb::arg("align") = 16,
      "escape capacity (a multiple of align) minimizing expected resident bytes per tile");
  m.def("gaac_sidecar_path", &gaac_sidecar_path, nb::arg("model_path"));

  nb::class_<GaacModelInfo>(m, "GaacModelInfo", "What a GAAC calibration belongs to: dims and identity hash.")
      .def("__init__", [](GaacModelInfo* self, std::string arch, int32_t nl, int32_t nh, int32_t dk, int32_t dv,
                          uint64_t identity) {
             new (self) GaacModelInfo{arch, nl, nh, dk, dv, identity};
           }, nb::arg("arch"), nb::arg("n_layer"), nb::arg("n_head_kv"), nb::arg("head_dim_k"), nb::arg("head_dim_v"),
           nb::arg("identity") = 0)
      .def_static("from_gguf", [](const std::string& path) { return gaac_model_info(GGUFFile(path)); }, nb::arg("path"))
      .def_rw("arch", &GaacModelInfo::arch)
      .def_rw("n_layer", &GaacModelInfo::n_layer)
      .def_rw("n_head_kv", &GaacModelInfo::n_head_kv)
      .def_rw("head_dim_k", &GaacModelInfo::head_dim_k)
      .def_rw("head_dim_v", &GaacModelInfo::head_dim_v)
      .def_rw("identity", &GaacModelInfo::identity)
      .def("tile_dim", &GaacModelInfo::tile_dim, nb::arg("is_v"));

  nb::class_<GaacStats>(m, "GaacStats", "Modes, escapes and ratios over encoded tiles of one tile_dim.")
      .def(nb::init<>())
      .def_ro("tile_dim", &GaacStats::tile_dim)
      .def_ro("tiles", &GaacStats::tiles)
      .def_ro("fixed_bytes", &GaacStats::fixed_bytes)
      .def_ro("raw_tile_bytes", &GaacStats::raw_tile_bytes)
      .def_ro("escape_bytes", &GaacStats::escape_bytes)
      .def_prop_ro("groups", [](const GaacStats& s) { return nb::make_tuple(s.groups[0], s.groups[1], s.groups[2]); })
      .def_prop_ro("escape_hist", [](const GaacStats& s) { return hist_array(s.escape_hist); })
      .def("group_share", &GaacStats::group_share, nb::arg("mode"))
      .def("exponent_entropy", &GaacStats::exponent_entropy)
      .def("codec_ratio", &GaacStats::codec_ratio)
      .def("tiles_over", &GaacStats::tiles_over, nb::arg("capacity"))
      .def("resident_ratio", &GaacStats::resident_ratio, nb::arg("capacity"))
      .def("best_capacity", &GaacStats::best_capacity)
      .def("merge", &GaacStats::merge, nb::arg("other"));

  nb::class_<GaacCalibration>(m, "GaacCalibration", "Per-channel GAAC bases, slot capacities and model identity.")
      .def_prop_ro("model", &GaacCalibration::model)
      .def_prop_ro("element", [](const GaacCalibration& c) { return gaac_element_name(c.element()); })
      .def("width", &GaacCalibration::width, nb::arg("mode"))
      .def_rw("ctx_len", &GaacCalibration::ctx_len)
      .def_rw("n_tokens", &GaacCalibration::n_tokens)
      .def("bases", [](const GaacCalibration& c, int mode, int32_t layer, bool is_v, int32_t head) {
             uint8_t* p;
             const size_t n = static_cast<size_t>(c.model().head_dim(is_v));
             auto a = owned<uint8_t>({n}, &p);
             std::memcpy(p, c.bases(mode, layer, is_v, head), n);
             return a;
           }, nb::arg("mode"), nb::arg("layer"), nb::arg("is_v"), nb::arg("head"), "copy of one head's bases (head_dim,)")
      .def("set_bases", [](GaacCalibration& c, int mode, int32_t layer, bool is_v, int32_t head, U8 b) {
             if (b.size() != static_cast<size_t>(c.model().head_dim(is_v))) throw nb::value_error("set_bases: need head_dim bytes");
             std::memcpy(c.bases(mode, layer, is_v, head), b.data(), b.size());
           }, nb::arg("mode"), nb::arg("layer"), nb::arg("is_v"), nb::arg("head"), nb::arg("bases"))
      .def("scale", nb::overload_cast<int32_t, bool, int32_t>(&GaacCalibration::scale, nb::const_), nb::arg("layer"),
           nb::arg("is_v"), nb::arg("head"), "FP8 calibrations: x = fp8 * scale")
      .def_prop_ro("has_scales", &GaacCalibration::has_scales)
      .def("capacity", &GaacCalibration::capacity, nb::arg("is_v"))
      .def_prop_ro("capacity_shared", &GaacCalibration::capacity_shared)
      .def("set_capacities", nb::overload_cast<uint32_t, uint32_t, uint32_t>(&GaacCalibration::set_capacities),
           nb::arg("k"), nb::arg("v"), nb::arg("shared"))
      .def("set_capacities_from", nb::overload_cast<const GaacStats&, const GaacStats&>(&GaacCalibration::set_capacities),
           nb::arg("k_stats"), nb::arg("v_stats"), "each capacity minimizing expected resident bytes")
      .def("packed_bases", [](const GaacCalibration& c, int32_t layer) {
             const std::vector<uint8_t> v = c.packed_bases(layer);
             uint8_t* p;
             auto a = owned<uint8_t>({v.size()}, &p);
             std::memcpy(p, v.data(), v.size());
             return a;
           }, nb::arg("layer"))
      .def("save", &GaacCalibration::save, nb::arg("path"))
      .def_static("load", nb::overload_cast<const std::string&>(&GaacCalibration::load), nb::arg("path"))
      .def_static("load_for", nb::overload_cast<const std::string&, const GaacModelInfo&>(&GaacCalibration::load),
                  nb::arg("path"), nb::arg("model"), "load and refuse a calibration made for another model")
      .def("check_model", &GaacCalibration::check_model, nb::arg("model"), nb::arg("where") = "calibration");

  nb::class_<GaacCalibrator>(m, "GaacCalibrator", "Exponent histograms of BF16 KV -> GAAC bases.")
      .def(nb::init<const GaacModelInfo&>(), nb::arg("model"))
      .def("add", [](GaacCalibrator& c, int32_t layer, bool is_v, U16 kv) {
             check_kv(kv, c.model(), is_v, "GaacCalibrator.add");
             nb::gil_scoped_release nogil;
             c.add(layer, is_v, kv.data(), static_cast<int64_t>(kv.shape(0)));
           }, nb::arg("layer"), nb::arg("is_v"), nb::arg("kv"),
           "add one layer's K or V: BF16 bits uint16 (n_tokens, n_head_kv, head_dim)")
      .def("finish", &GaacCalibrator::finish, nb::arg("ctx_len"))
      .def("histogram", [](const GaacCalibrator& c, int32_t layer, bool is_v, int32_t head, int32_t ch) {
             const uint64_t* h = c.histogram(layer, is_v, head, ch);
             return hist_array(std::vector<uint64_t>(h, h + 256));
           }, nb::arg("layer"), nb::arg("is_v"), nb::arg("head"), nb::arg("channel"));

  m.def("gaac_measure", [](const GaacCalibration& c, int32_t layer, bool is_v, U16 kv, GaacStats& into) {
        check_kv(kv, c.model(), is_v, "gaac_measure");
        nb::gil_scoped_release nogil;
        gaac_measure(c, layer, is_v, kv.data(), static_cast<int64_t>(kv.shape(0)), into);
      }, nb::arg("calibration"), nb::arg("layer"), nb::arg("is_v"), nb::arg("kv"), nb::arg("stats"),
      "encode every full 16-token tile of one layer's K or V, check the round trip, add to stats");
  // ---- FP8 -----------------------------------------------------------------------------------
  m.def("gaac_fp8_format", [](const std::string& kind, int32_t d) {
        const int32_t k = parse_fp8(kind);
        check_dim(d, "gaac_fp8_format");
        nb::dict r;
        r["codes_offset"] = gaac_fp8_codes_offset(k, d);
        r["tags_offset"] = gaac_fp8_tags_offset(k, d);
        r["fixed_bytes"] = gaac_fp8_fixed_bytes(k, d);
        r["raw_tile_bytes"] = gaac_fp8_raw_tile_bytes(d);
        r["max_escape_bytes"] = gaac_fp8_max_escape_bytes(k, d);
        r["r_bytes"] = gaac_fp8_r_bytes(k);
        r["max"] = gaac_fp8_max(k);
        return r;
      }, nb::arg("kind"), nb::arg("tile_dim"), "byte geometry of an FP8 GAAC tile ('e4m3' or 'e5m2')");
  m.def("gaac_fp8_from_f32", [](const std::string& kind, nb::ndarray<const float, nb::c_contig, nb::device::cpu> x) {
        const int32_t k = parse_fp8(kind);
        uint8_t* out;
        auto a = owned<uint8_t>({x.size()}, &out);
        for (size_t i = 0; i < x.size(); ++i) out[i] = static_cast<uint8_t>(gaac_fp8_from_f32(k, x.data()[i]));
        return a;
      }, nb::arg("kind"), nb::arg("x"), "float32 -> FP8 bits (nearest even, saturating), flattened");
  m.def("gaac_fp8_to_f32", [](const std::string& kind, U8 b) {
        const int32_t k = parse_fp8(kind);
        float* out;
        auto a = owned<float>({b.size()}, &out);
        for (size_t i = 0; i < b.size(); ++i) out[i] = gaac_fp8_to_f32(k, b.data()[i]);
        return a;
      }, nb::arg("kind"), nb::arg("bits"), "FP8 bits -> float32, flattened");
  m.def("gaac_fp8_encode_tiles", &fp8_encode_tiles, nb::arg("kind"), nb::arg("fp8"), nb::arg("b2"), nb::arg("b3"),
        nb::arg("capacity"), "encode FP8 tiles uint8 (..., 16, D): (escape bytes int32 (n,), slots uint8 (n, S))");
  m.def("gaac_fp8_decode_tiles", &fp8_decode_tiles, nb::arg("kind"), nb::arg("slots"), nb::arg("tile_dim"),
        nb::arg("b2"), nb::arg("b3"), nb::arg("capacity"), "decode FP8 slots to uint8 (n, 16, D)");
  m.def("gaac_fp8_validate", [](const std::string& kind, U8 slot, int32_t d, uint32_t capacity, int32_t expected) {
        const GaacCheck c = gaac_fp8_validate(parse_fp8(kind), slot.data(), static_cast<uint32_t>(slot.size()), d,
                                              capacity, expected);
        return nb::make_tuple(status_kind(c.status), c.detail);
      }, nb::arg("kind"), nb::arg("slot"), nb::arg("tile_dim"), nb::arg("capacity"), nb::arg("expected_escape") = -1);
  m.def("gaac_fp8_tile_modes", [](const std::string& kind, U8 slot, int32_t d) {
        const int32_t k = parse_fp8(kind);
        check_dim(d, "gaac_fp8_tile_modes");
        if (slot.size() < gaac_fp8_fixed_bytes(k, d)) throw Error("gaac", "truncated", "gaac_fp8_tile_modes: short slot");
        const GaacModeCounts c = gaac_fp8_tile_modes(k, slot.data(), d);
        return nb::make_tuple(c.n3, c.n4, c.nraw, c.nbad);
      }, nb::arg("kind"), nb::arg("slot"), nb::arg("tile_dim"), "(2-bit, 3-bit, raw, reserved) group counts");

  nb::class_<GaacFp8Calibrator>(m, "GaacFp8Calibrator", "FP8 scales and {2-bit, 3-bit} windows from BF16 KV.")
      .def("__init__", [](GaacFp8Calibrator* self, const GaacModelInfo& mi, const std::string& el) {
             new (self) GaacFp8Calibrator(mi, parse_element(el));
           }, nb::arg("model"), nb::arg("element"))
      .def("add_amax", [](GaacFp8Calibrator& c, int32_t layer, bool is_v, U16 kv) {
             check_kv(kv, c.model(), is_v, "GaacFp8Calibrator.add_amax");
             c.add_amax(layer, is_v, kv.data(), static_cast<int64_t>(kv.shape(0)));
           }, nb::arg("layer"), nb::arg("is_v"), nb::arg("kv"))
      .def("add", [](GaacFp8Calibrator& c, int32_t layer, bool is_v, U16 kv) {
             check_kv(kv, c.model(), is_v, "GaacFp8Calibrator.add");
             c.add(layer, is_v, kv.data(), static_cast<int64_t>(kv.shape(0)));
           }, nb::arg("layer"), nb::arg("is_v"), nb::arg("kv"))
      .def("finish", &GaacFp8Calibrator::finish, nb::arg("ctx_len"));
  m.def("gaac_fp8_measure", [](const GaacCalibration& c, int32_t layer, bool is_v, U16 kv, GaacStats& into) {
        check_kv(kv, c.model(), is_v, "gaac_fp8_measure");
        nb::gil_scoped_release nogil;
        gaac_fp8_measure(c, layer, is_v, kv.data(), static_cast<int64_t>(kv.shape(0)), into);
      }, nb::arg("calibration"), nb::arg("layer"), nb::arg("is_v"), nb::arg("kv"), nb::arg("stats"),
      "quantize to the calibration's FP8 type, encode every full tile, check the round trip, add to stats");
}

}  // namespace gaacrt::py
