// c_api_session.cpp — sessions, batches, samplers and generation of include/gaacrt.h.
#include <cstring>

#include "c_api_internal.h"
#include "tokenizer/tokenizer.h"

using namespace gaacrt;
using capi::fail;
using capi::guarded;

namespace {

template <typename P>
gaacrt_status read_params(const P* given, P& p, size_t min_size, const char* name) {
  if (!given) return GAACRT_OK;
  if (given->size < min_size || given->size > sizeof(P))
    return fail(GAACRT_ERR_INVALID_ARGUMENT, strfmt("%s.size = %zu is not a size this library knows (expected %zu); "
                                                    "set it to sizeof(%s)", name, given->size, sizeof(P), name));
  std::memcpy(&p, given, given->size);
  return GAACRT_OK;
}

ContextParams context_params(const gaacrt_session_params& p) {
  ContextParams c;
  c.n_ctx = p.n_ctx;
  c.cache = p.cache ? p.cache : "bf16";
  c.budget_bytes = p.kv_budget_bytes;
  c.n_ubatch = p.n_ubatch;
  c.calibration = p.calibration ? p.calibration : "";
  c.raw_sink = p.raw_sink;
  c.raw_window = p.raw_window;
  if (p.e8_center < 0 || p.e8_center > 2)
    throw Error("runtime", "invalid_argument", strfmt("gaacrt_session_params.e8_center = %d: expected 0 (off), 1 (global) "
                                                      "or 2 (block)", p.e8_center));
  c.e8_center = static_cast<E8Center>(p.e8_center);
  return c;
}

std::unique_ptr<gaacrt_session> wrap_session(gaacrt_model* m, std::shared_ptr<Context> ctx, const gaacrt_session_params& p) {
  auto s = std::make_unique<gaacrt_session>();
  s->model = m;
  s->session = std::make_unique<Session>(std::move(ctx));
  if (p.abort) {
    const gaacrt_abort_fn fn = p.abort;
    void* user = p.abort_user;
    s->session->set_abort_callback([fn, user] { return fn(user); });
  }
  return s;
}

}  // namespace

extern "C" {

gaacrt_session_params gaacrt_session_default_params(void) {
  gaacrt_session_params p;
  std::memset(&p, 0, sizeof p);
  p.size = sizeof p;
  p.n_ctx = 4096;
  p.cache = "bf16";
  p.n_ubatch = 512;
  p.raw_window = -1;
  return p;
}

gaacrt_status gaacrt_session_new(gaacrt_model* model, const gaacrt_session_params* params, gaacrt_session** out) {
  return guarded([&] {
    if (!model || !out) return fail(GAACRT_ERR_INVALID_ARGUMENT, "gaacrt_session_new: model and out must not be NULL");
    *out = nullptr;
    gaacrt_session_params p = gaacrt_session_default_params();
    if (gaacrt_status st = read_params(params, p, offsetof(gaacrt_session_params, abort), "gaacrt_session_params")) return st;
    auto ctx = std::make_shared<Context>(*model->model, context_params(p));
    *out = wrap_session(model, std::move(ctx), p).release();
    return GAACRT_OK;
  });
}

void gaacrt_session_free(gaacrt_session* session) {
  if (session && !session->owned_by_batch) delete session;
}

gaacrt_status gaacrt_session_eval(gaacrt_session* s, const gaacrt_token* tokens, size_t n) {
  return guarded([&] {
    if (!s || (!tokens && n)) return fail(GAACRT_ERR_INVALID_ARGUMENT, "gaacrt_session_eval: session and tokens must not be NULL");
    s->session->clear_cancel();
    s->session->eval(tokens, (int32_t)n);
    return GAACRT_OK;
  });
}

const float* gaacrt_session_logits(const gaacrt_session* s) { return s ? s->session->logits().data() : nullptr; }
int32_t gaacrt_session_n_past(const gaacrt_session* s) { return s ? s->session->n_past() : 0; }

gaacrt_status gaacrt_session_truncate(gaacrt_session* s, int32_t n) {
  return guarded([&] {
    if (!s) return fail(GAACRT_ERR_INVALID_ARGUMENT, "gaacrt_session_truncate: session must not be NULL");
    s->session->truncate(n);
    return GAACRT_OK;
  });
}

void gaacrt_session_cancel(gaacrt_session* s) {
  if (s) s->session->cancel();
}

gaacrt_status gaacrt_batch_new(gaacrt_model* model, const gaacrt_session_params* params, int32_t n_seq, gaacrt_batch** out) {
  return guarded([&] {
    if (!model || !out || n_seq <= 0)
      return fail(GAACRT_ERR_INVALID_ARGUMENT, "gaacrt_batch_new: model and out must not be NULL and n_seq > 0");
    *out = nullptr;
    gaacrt_session_params p = gaacrt_session_default_params();
    if (gaacrt_status st = read_params(params, p, offsetof(gaacrt_session_params, abort), "gaacrt_session_params")) return st;
    ContextParams cp = context_params(p);
    cp.n_seq_max = n_seq;
    auto b = std::make_unique<gaacrt_batch>();
    b->ctx = std::make_shared<Context>(*model->model, cp);
    for (int32_t i = 0; i < n_seq; ++i) {
      b->sessions.push_back(wrap_session(model, b->ctx, p));
      b->sessions.back()->owned_by_batch = true;
    }
    *out = b.release();
    return GAACRT_OK;
  });
}

void gaacrt_batch_free(gaacrt_batch* batch) { delete batch; }

gaacrt_session* gaacrt_batch_session(gaacrt_batch* b, int32_t i) {
  if (!b || i < 0 || i >= (int32_t)b->sessions.size()) {
    fail(GAACRT_ERR_INVALID_ARGUMENT, strfmt("gaacrt_batch_session: index %d out of range", i));
    return nullptr;
  }
  return b->sessions[i].get();
}

gaacrt_status gaacrt_batch_decode(gaacrt_batch* b, const int32_t* seq, const gaacrt_token* tokens, size_t n) {
  return guarded([&] {
    if (!b || ((!seq || !tokens) && n)) return fail(GAACRT_ERR_INVALID_ARGUMENT, "gaacrt_batch_decode: NULL argument");
    std::vector<Session*> ss;
    for (size_t k = 0; k < n; ++k) {
      if (seq[k] < 0 || seq[k] >= (int32_t)b->sessions.size())
        return fail(GAACRT_ERR_INVALID_ARGUMENT, strfmt("gaacrt_batch_decode: sequence %d out of range", seq[k]));
      ss.push_back(b->sessions[seq[k]]->session.get());
    }
    Session::decode_batch(ss, std::vector<int32_t>(tokens, tokens + n));
    return GAACRT_OK;
  });
}

gaacrt_sampler_params gaacrt_sampler_default_params(void) {
  const SamplerParams d;
  gaacrt_sampler_params p;
  std::memset(&p, 0, sizeof p);
  p.size = sizeof p;
  p.temperature = d.temperature;
  p.top_k = d.top_k;
  p.top_p = d.top_p;
  p.min_p = d.min_p;
  p.repeat_penalty = d.repeat_penalty;
  p.repeat_last_n = d.repeat_last_n;
  p.frequency_penalty = d.frequency_penalty;
  p.presence_penalty = d.presence_penalty;
  p.seed = d.seed;
  return p;
}

gaacrt_status gaacrt_sampler_new(const gaacrt_model* model, const gaacrt_sampler_params* params, gaacrt_sampler** out) {
  return guarded([&] {
    if (!model || !out) return fail(GAACRT_ERR_INVALID_ARGUMENT, "gaacrt_sampler_new: model and out must not be NULL");
    *out = nullptr;
    gaacrt_sampler_params p = gaacrt_sampler_default_params();
    if (gaacrt_status st = read_params(params, p, sizeof(size_t) + sizeof(float), "gaacrt_sampler_params")) return st;
    SamplerParams sp;
    sp.temperature = p.temperature;
    sp.top_k = p.top_k;
    sp.top_p = p.top_p;
    sp.min_p = p.min_p;
    sp.repeat_penalty = p.repeat_penalty;
    sp.repeat_last_n = p.repeat_last_n;
    sp.frequency_penalty = p.frequency_penalty;
    sp.presence_penalty = p.presence_penalty;
    sp.seed = p.seed;
    *out = new gaacrt_sampler{std::make_unique<Sampler>(sp, model->model->config().n_vocab)};
    return GAACRT_OK;
  });
}

void gaacrt_sampler_free(gaacrt_sampler* s) { delete s; }

gaacrt_token gaacrt_sampler_sample(gaacrt_sampler* smp, const gaacrt_session* s) {
  if (!smp || !s) return GAACRT_TOKEN_NULL;
  const gaacrt_token t = smp->sampler->sample(s->session->logits().data());
  smp->sampler->accept(t);
  return t;
}

void gaacrt_sampler_accept(gaacrt_sampler* smp, gaacrt_token token) {
  if (smp) smp->sampler->accept(token);
}

gaacrt_status gaacrt_generate(gaacrt_session* s, gaacrt_sampler* smp, const char* prompt, int32_t max_tokens,
                              gaacrt_token_fn on_token, void* user, int32_t* n_generated) {
  int32_t produced = 0;
  const gaacrt_status st = guarded([&] {
    if (!s || !smp || !prompt) return fail(GAACRT_ERR_INVALID_ARGUMENT, "gaacrt_generate: NULL argument");
    Session& sess = *s->session;
    sess.clear_cancel();
    const tok::Tokenizer& tk = s->model->model->tokenizer();
    // BOS only at the start of a conversation; later turns continue the same sequence.
    const std::vector<int32_t> ids = tk.tokenize(prompt, sess.n_past() == 0, true);
    for (int32_t t : ids) smp->sampler->accept(t);
    sess.eval(ids.data(), (int32_t)ids.size());
    tok::StreamDecoder dec(tk.shared_vocab());
    for (; produced < max_tokens; ++produced) {
      if (sess.should_stop()) return fail(GAACRT_ERR_ABORTED, strfmt("generation cancelled after %d tokens", produced));
      const int32_t t = smp->sampler->sample(sess.logits().data());
      smp->sampler->accept(t);
      if (tk.is_eog(t)) break;
      const std::string text = dec.push(t);
      if (on_token && !on_token(t, text.data(), text.size(), user)) {
        ++produced;
        sess.eval(&t, 1);  // the caller has seen it: keep the conversation consistent
        break;
      }
      sess.eval(&t, 1);
    }
    return GAACRT_OK;
  });
  if (n_generated) *n_generated = produced;
  return st;
}

}  // extern "C"
