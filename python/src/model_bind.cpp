// model_bind.cpp — Model, Context, Session and Sampler. The GIL is released for every call that
// computes; numpy inputs are checked for dtype and shape with errors naming the expected form.
#include <cstring>

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "common/error.h"
#include "model/model.h"
#include "runtime/bench_hooks.h"
#include "runtime/calibrate.h"
#include "runtime/session.h"
#include "sampling/sampler.h"

namespace nb = nanobind;

namespace gaacrt::py {
namespace {

// Token ids from a Python sequence of ints or a 1-D integer numpy array.
std::vector<int32_t> to_tokens(nb::handle obj, const char* what) {
  std::vector<int32_t> out;
  if (nb::isinstance<nb::str>(obj) || nb::isinstance<nb::bytes>(obj))
    throw nb::type_error(strfmt("%s: expected a sequence of token ids (ints), got a string; tokenize it first", what).c_str());
  if (nb::ndarray_check(obj)) {
    auto arr = nb::cast<nb::ndarray<nb::device::cpu>>(obj);
    if (arr.ndim() != 1) throw nb::value_error(strfmt("%s: expected a 1-D array of token ids, got %zu dims", what, arr.ndim()).c_str());
    if (arr.dtype().code != (uint8_t)nb::dlpack::dtype_code::Int && arr.dtype().code != (uint8_t)nb::dlpack::dtype_code::UInt)
      throw nb::type_error(strfmt("%s: expected an integer array of token ids", what).c_str());
  }
  try {
    for (nb::handle h : obj) out.push_back(nb::cast<int32_t>(h));
  } catch (const nb::cast_error&) {
    throw nb::type_error(strfmt("%s: expected a sequence of token ids (ints)", what).c_str());
  }
  return out;
}

nb::ndarray<nb::numpy, float, nb::ndim<1>> copy_to_numpy(const float* src, size_t n) {
  float* buf = new float[n];
  std::memcpy(buf, src, n * sizeof(float));
  nb::capsule owner(buf, [](void* p) noexcept { delete[] static_cast<float*>(p); });
  size_t shape[1] = {n};
  return nb::ndarray<nb::numpy, float, nb::ndim<1>>(buf, 1, shape, owner);
}

nb::dict config_dict(const ModelConfig& c) {
  nb::dict d;
  d["arch"] = c.arch;
  d["name"] = c.name;
  d["n_vocab"] = c.n_vocab;
  d["n_embd"] = c.n_embd;
  d["n_layer"] = c.n_layer;
  d["n_head"] = c.n_head;
  d["n_head_kv"] = c.n_head_kv;
  d["head_dim_k"] = c.head_dim_k;
  d["head_dim_v"] = c.head_dim_v;
  d["n_ff"] = c.n_ff;
  d["n_ctx_train"] = c.n_ctx_train;
  d["rms_eps"] = c.rms_eps;
  d["rope_base"] = c.rope.base;
  d["rope_base_swa"] = c.rope_swa.base;
  d["rope_freq_scale"] = c.rope.freq_scale;
  d["n_rot"] = c.rope.n_rot;
  d["rope_style"] = c.rope.style == RopeStyle::Norm ? "norm" : "neox";
  d["qk_norm"] = c.qk_norm;
  d["post_norms"] = c.post_norms;
  d["activation"] = c.act == Activation::SiLU ? "silu" : "gelu_tanh";
  d["embed_scale"] = c.embed_scale;
  d["attn_scale"] = c.attn_scale;
  d["sliding_window"] = c.sliding_window;
  nb::list swa;
  for (int il = 0; il < c.n_layer; ++il) swa.append(c.is_swa(il));
  d["layer_is_swa"] = swa;
  d["final_logit_softcap"] = c.final_logit_softcap;
  return d;
}

nb::dict codec_dict(const CodecStats& cs) {
  nb::dict d;
  const uint64_t tiles = cs.tiles_encoded + cs.tiles_raw;
  const uint64_t groups = cs.groups[0] + cs.groups[1] + cs.groups[2];
  d["tiles_encoded"] = cs.tiles_encoded;
  d["tiles_raw_fallback"] = cs.tiles_raw;
  d["raw_tile_share"] = tiles ? (double)cs.tiles_raw / (double)tiles : 0.0;
  // Against the element type's own bytes (BF16, or FP8 for the fp8 formats: the seed's figures).
  d["codec_ratio"] = cs.used_bytes ? (double)cs.element_bytes / (double)cs.used_bytes : 0.0;
  d["ratio_vs_bf16"] = cs.used_bytes ? (double)cs.bf16_bytes / (double)cs.used_bytes : 0.0;
  d["share_3bit"] = groups ? (double)cs.groups[0] / (double)groups : 0.0;
  d["share_4bit"] = groups ? (double)cs.groups[1] / (double)groups : 0.0;
  d["share_raw_groups"] = groups ? (double)cs.groups[2] / (double)groups : 0.0;
  return d;
}

nb::dict kv_stats_dict(Context& c) {
  const KVStats s = c.cache().stats();
  nb::dict d;
  d["format"] = c.params().cache;
  d["tokens"] = s.tokens;
  d["arena_bytes"] = s.arena_bytes;
  d["resident_bytes"] = s.resident_bytes;
  d["bf16_bytes"] = s.bf16_bytes;
  d["resident_ratio"] = s.resident_bytes ? (double)s.bf16_bytes / (double)s.resident_bytes : 0.0;
  d["bytes_per_token"] = s.tokens ? (double)s.resident_bytes / (double)s.tokens : 0.0;
  d["raw_pages_used"] = s.raw_pages_used;
  d["slots_used"] = s.slots_used;
  d["pages_free"] = s.pages_free;
  d["tiles_raw"] = s.tiles_raw;
  d["tiles_slot"] = s.tiles_slot;
  if (c.params().cache != "bf16") {
    d["k"] = codec_dict(s.codec[0]);
    d["v"] = codec_dict(s.codec[1]);
  }
  return d;
}

}  // namespace

void bind_model(nb::module_& m) {
  nb::class_<Model>(m, "Model", "A loaded GGUF model on a backend (weights placed once, shared by sessions).")
      .def("__init__", [](Model* self, const std::string& path, const std::string& backend, int n_threads, int device,
                          int act_bits) {
             ModelParams p;
             p.backend = backend;
             p.n_threads = n_threads;
             p.device = device;
             p.act_bits = act_bits;
             nb::gil_scoped_release nogil;
             new (self) Model(path, p);
           }, nb::arg("path"), nb::arg("backend") = "auto", nb::arg("n_threads") = 0, nb::arg("device") = 0,
           nb::arg("act_bits") = 16)
      .def_prop_ro("config", [](const Model& mo) { return config_dict(mo.config()); })
      .def_prop_ro("description", &Model::description)
      .def_prop_ro("path", &Model::path)
      .def_prop_ro("n_vocab", [](const Model& mo) { return mo.config().n_vocab; })
      .def_prop_ro("backend", [](const Model& mo) { return mo.backend().device().backend; })
      .def_prop_ro("device_name", [](const Model& mo) { return mo.backend().device().name; })
      .def_prop_ro("weight_bytes", [](const Model& mo) { return mo.weights().bytes; });

  nb::class_<Context>(m, "Context", "A KV cache and forward pass shared by the sessions decoding together.")
      .def("__init__", [](Context* self, const Model& model, int32_t n_ctx, int32_t n_seq_max, const std::string& cache,
                          uint64_t budget_bytes, int32_t n_ubatch, const std::string& calibration, bool keep_raw,
                          const std::string& e8_scoring, nb::handle e8_center, int32_t raw_sink,
                          int32_t raw_window) {
             ContextParams p;
             p.n_ctx = n_ctx;
             p.n_seq_max = n_seq_max;
             p.cache = cache;
             p.budget_bytes = budget_bytes;
             p.n_ubatch = n_ubatch;
             p.calibration = calibration;
             p.keep_raw = keep_raw;
             p.e8_scoring = e8_scoring;
             p.e8_center = e8_center_arg(e8_center);
             p.raw_sink = raw_sink;
             p.raw_window = raw_window;
             nb::gil_scoped_release nogil;
             new (self) Context(model, p);
           }, nb::arg("model"), nb::arg("n_ctx") = 4096, nb::arg("n_seq_max") = 1, nb::arg("cache") = "bf16",
           nb::arg("budget_bytes") = 0, nb::arg("n_ubatch") = 512, nb::arg("calibration") = "", nb::arg("keep_raw") = false,
           nb::arg("e8_scoring") = "decode", nb::arg("e8_center") = false, nb::arg("raw_sink") = 0,
           nb::arg("raw_window") = -1, nb::keep_alive<1, 2>())
      .def_prop_ro("n_ctx", [](const Context& c) { return c.params().n_ctx; })
      .def_prop_ro("cache_format", [](const Context& c) { return c.params().cache; })
      .def("_corrupt_first_slot_for_test", [](Context& c, const Session& s, int layer) {
             return c.cache().corrupt_first_slot_for_test(s.seq(), layer);
           }, "test hook: mark a compressed tile of the session as corrupt (reserved tags)")
      .def("_extend_for_bench", [](Context& c, const Session& s, int32_t n) {
             nb::gil_scoped_release nogil;
             c.cache().extend_by_repeating_for_bench(s.seq(), n);
           }, "benchmark hook: grow the session's cache to n tokens by repeating its complete blocks")
      .def("_export_kv", [](Context& c, const Session& s, int layer) {
             const ModelConfig& cfg = c.model().config();
             if (layer < 0 || layer >= cfg.n_layer)
               throw Error("python", "invalid_argument", strfmt("_export_kv: layer %d of %d", layer, cfg.n_layer));
             std::vector<uint16_t> k, v;
             int32_t n;
             {
               nb::gil_scoped_release nogil;
               n = c.cache().export_layer(s.seq(), layer, k, v);
             }
             const std::vector<size_t> shape = {(size_t)n, (size_t)cfg.n_head_kv, (size_t)cfg.head_dim_k};
             uint16_t *kd, *vd;
             auto ka = owned<uint16_t>(shape, &kd), va = owned<uint16_t>(shape, &vd);
             std::memcpy(kd, k.data(), k.size() * sizeof(uint16_t));
             std::memcpy(vd, v.data(), v.size() * sizeof(uint16_t));
             return nb::make_tuple(ka, va);
           }, nb::arg("session"), nb::arg("layer"),
           "benchmark hook: one layer's K and V as BF16 bits [n][n_head_kv][head_dim] (keys after RoPE; a bf16 cache)")
      .def("_import_kv_for_bench", [](Context& c, const Session& s,
                                      nb::ndarray<const uint16_t, nb::ndim<3>, nb::c_contig, nb::device::cpu> k,
                                      nb::ndarray<const uint16_t, nb::ndim<3>, nb::c_contig, nb::device::cpu> v) {
             const ModelConfig& cfg = c.model().config();
             if (k.shape(0) != v.shape(0) || k.shape(1) != (size_t)cfg.n_head_kv || v.shape(1) != (size_t)cfg.n_head_kv ||
                 k.shape(2) != (size_t)cfg.head_dim_k || v.shape(2) != (size_t)cfg.head_dim_v)
               throw Error("python", "invalid_argument",
                           strfmt("_import_kv_for_bench: k and v must be uint16 [n][%d][%d]", cfg.n_head_kv, cfg.head_dim_k));
             nb::gil_scoped_release nogil;
             c.cache().import_for_bench(s.seq(), k.data(), v.data(), (int32_t)k.shape(0));
           }, nb::arg("session"), nb::arg("k"), nb::arg("v"),
           "benchmark hook: append recorded KV (BF16 bits [n][n_head_kv][head_dim], keys after RoPE) to the "
           "session's cache in every layer, then commit (calibration and compression as after a prefill)")
      .def("_time_attention", [](Context& c, const Session& s, int layer, int reps, bool back_to_back) {
             nb::gil_scoped_release nogil;
             return time_attention(c, s.seq(), layer, reps, back_to_back);
           }, nb::arg("session"), nb::arg("layer"), nb::arg("reps"), nb::arg("back_to_back") = false,
           "benchmark hook: seconds of the attention op for one decode query over the cache (median of "
           "synchronous calls, or the mean of back_to_back queued calls)")
      .def("_time_attention_batch", [](Context& c, const std::vector<const Session*>& ss, int layer, int reps,
                                       bool back_to_back) {
             std::vector<int> seqs;
             for (const Session* s : ss) seqs.push_back(s->seq());
             nb::gil_scoped_release nogil;
             return time_attention(c, seqs, layer, reps, back_to_back);
           }, nb::arg("sessions"), nb::arg("layer"), nb::arg("reps"), nb::arg("back_to_back") = false,
           "benchmark hook: as _time_attention, one decode query in each session, one batched call")
      .def("_graph_stats", [](const Context& c) {
             nb::dict d;
             d["replays"] = c.forward().graph_replays();
             d["captures"] = c.forward().graph_captures();
             return d;
           }, "test hook: decode steps replayed from a recorded graph, and graphs recorded, so far")
      .def("kv_stats", [](Context& c) { return kv_stats_dict(c); },
           "bytes resident, ratios and, for compressed formats, per-K/V codec figures");

  nb::class_<Session>(m, "Session", "One sequence of a Context: eval tokens, read logits, truncate.")
      .def(nb::init<std::shared_ptr<Context>>(), nb::arg("context"))
      .def("eval", [](Session& s, nb::handle tokens, bool all_logits) -> nb::object {
             std::vector<int32_t> t = to_tokens(tokens, "Session.eval");
             if (!all_logits || t.empty()) {
               nb::gil_scoped_release nogil;
               s.eval(t.data(), (int32_t)t.size());
               return nb::none();
             }
             const size_t V = s.logits().size();
             float* buf = new float[t.size() * V];
             nb::capsule owner(buf, [](void* p) noexcept { delete[] static_cast<float*>(p); });
             {
               nb::gil_scoped_release nogil;
               s.eval(t.data(), (int32_t)t.size(), buf);
             }
             size_t shape[2] = {t.size(), V};
             return nb::cast(nb::ndarray<nb::numpy, float, nb::ndim<2>>(buf, 2, shape, owner));
           }, nb::arg("tokens"), nb::arg("all_logits") = false,
           "append tokens (prefill); afterwards logits() are the last token's. With all_logits=True "
           "returns every token's logits as a (n, n_vocab) float32 array.")
      .def("logits", [](const Session& s) { return copy_to_numpy(s.logits().data(), s.logits().size()); },
           "the last evaluated token's logits as a float32 numpy array (a copy)")
      .def_prop_ro("n_past", &Session::n_past)
      .def_prop_ro("history", [](const Session& s) { return s.history(); })
      .def("truncate", [](Session& s, int32_t n) { nb::gil_scoped_release nogil; s.truncate(n); }, nb::arg("n"))
      .def("reset", [](Session& s) { nb::gil_scoped_release nogil; s.reset(); })
      .def("cancel", &Session::cancel, "stop the running eval/generation at the next token (thread-safe)")
      .def("clear_cancel", &Session::clear_cancel)
      .def_prop_ro("cancelled", &Session::cancelled)
      .def_prop_ro("context", [](const Session& s) { return s.context_ptr(); });

  m.def("gaac_calibrate", [](const Model& model, std::vector<std::vector<int32_t>> texts, int32_t ctx,
                             const std::string& out) {
        GaacCalibrationReport r;
        {
          nb::gil_scoped_release nogil;
          r = gaac_calibrate(model, texts, ctx);
          if (!out.empty()) r.calibration.save(out);
        }
        nb::dict d;
        d["tokens"] = r.tokens;
        d["ctx"] = ctx;
        d["capacity_k"] = r.calibration.capacity(false);
        d["capacity_v"] = r.calibration.capacity(true);
        for (int is_v = 0; is_v < 2; ++is_v) {
          const GaacStats& st = is_v ? r.v : r.k;
          const char* kv = is_v ? "v" : "k";
          d[(std::string("codec_ratio_") + kv).c_str()] = st.codec_ratio();
          d[(std::string("resident_ratio_") + kv).c_str()] = st.resident_ratio(r.calibration.capacity(is_v));
          d[(std::string("share_3bit_") + kv).c_str()] = st.group_share(0);
          d[(std::string("share_4bit_") + kv).c_str()] = st.group_share(1);
          d[(std::string("share_raw_") + kv).c_str()] = st.group_share(2);
          d[(std::string("exponent_entropy_") + kv).c_str()] = st.exponent_entropy();
        }
        return d;
      }, nb::arg("model"), nb::arg("texts"), nb::arg("ctx"), nb::arg("out") = "",
      "GAAC calibration over token lists (cut into ctx-token windows); writes the sidecar when out is given");

  m.def("decode_batch", [](std::vector<Session*> sessions, nb::handle tokens) {
          std::vector<int32_t> t = to_tokens(tokens, "decode_batch");
          nb::gil_scoped_release nogil;
          Session::decode_batch(sessions, t);
        }, nb::arg("sessions"), nb::arg("tokens"), "one decode step: tokens[i] appended to sessions[i] (one Context)");

  nb::class_<Sampler>(m, "Sampler", "llama.cpp's sampler chain: penalties, top_k, top_p, min_p, temperature, draw.")
      .def("__init__", [](Sampler* self, int32_t n_vocab, float temperature, int32_t top_k, float top_p, float min_p,
                          float repeat_penalty, int32_t repeat_last_n, float frequency_penalty, float presence_penalty,
                          int64_t seed) {
             SamplerParams p;
             p.temperature = temperature;
             p.top_k = top_k;
             p.top_p = top_p;
             p.min_p = min_p;
             p.repeat_penalty = repeat_penalty;
             p.repeat_last_n = repeat_last_n;
             p.frequency_penalty = frequency_penalty;
             p.presence_penalty = presence_penalty;
             p.seed = seed < 0 ? kRandomSeed : (uint32_t)seed;
             new (self) Sampler(p, n_vocab);
           }, nb::arg("n_vocab"), nb::arg("temperature") = 0.8f, nb::arg("top_k") = 40, nb::arg("top_p") = 0.95f,
           nb::arg("min_p") = 0.05f, nb::arg("repeat_penalty") = 1.0f, nb::arg("repeat_last_n") = 64,
           nb::arg("frequency_penalty") = 0.f, nb::arg("presence_penalty") = 0.f, nb::arg("seed") = -1)
      .def("sample", [](Sampler& s, nb::ndarray<const float, nb::ndim<1>, nb::c_contig, nb::device::cpu> logits) {
             if ((int64_t)logits.shape(0) != s.n_vocab())
               throw nb::value_error(strfmt("Sampler.sample: logits of shape (%zu,), expected (%d,) float32",
                                            logits.shape(0), s.n_vocab()).c_str());
             return s.sample(logits.data());
           }, nb::arg("logits").noconvert(), "a token from (n_vocab,) float32 logits (no dtype conversion)")
      .def("accept", &Sampler::accept, nb::arg("token"))
      .def("reset", &Sampler::reset)
      .def_prop_ro("seed", &Sampler::seed);
}

}  // namespace gaacrt::py
