// c_api.cpp — library, model and token functions of include/gaacrt.h.
//
// Every entry point catches C++ exceptions at the boundary, stores the message in a
// thread-local string and returns a status code; nothing throws across the C ABI.
#include "gaacrt.h"

#include <cstring>
#include <string>

#include "backend/devices.h"
#include "c_api_internal.h"
#include "common/error.h"
#include "common/log.h"
#include "gguf/gguf_reader.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace gaacrt::capi {

thread_local std::string g_last_error;

gaacrt_status status_of(const Error& e) {
  const std::string& area = e.area();
  const std::string& kind = e.kind();
  if (area == "io") return GAACRT_ERR_IO;
  if (area == "gguf") return kind == "unknown_tensor_type" ? GAACRT_ERR_UNSUPPORTED : GAACRT_ERR_BAD_FILE;
  if (kind == "unsupported_type" || kind == "unknown_architecture" || kind == "unknown_tokenizer" ||
      kind == "unsupported_format" || kind == "not_implemented")
    return GAACRT_ERR_UNSUPPORTED;
  if (kind == "out_of_memory" || kind == "arena_full") return GAACRT_ERR_OUT_OF_MEMORY;
  if (kind == "context_full") return GAACRT_ERR_CONTEXT_FULL;
  if (kind == "aborted") return GAACRT_ERR_ABORTED;
  if (area == "backend") return GAACRT_ERR_BACKEND;
  if (kind == "invalid_argument" || kind == "unknown_format" || kind == "unknown_template" || kind == "bad_token")
    return GAACRT_ERR_INVALID_ARGUMENT;
  if (area == "model") return GAACRT_ERR_BAD_FILE;
  return GAACRT_ERR_INTERNAL;
}

gaacrt_status fail(gaacrt_status s, const std::string& message) {
  g_last_error = message;
  return s;
}

gaacrt_status copy_out(const std::string& s, char* buf, size_t cap, size_t* len, bool nul) {
  if (len) *len = s.size();
  if (!buf || cap < s.size() + (nul ? 1 : 0))
    return fail(GAACRT_ERR_BUFFER_TOO_SMALL, strfmt("buffer of %zu bytes is too small: %zu needed", cap, s.size() + (nul ? 1 : 0)));
  std::memcpy(buf, s.data(), s.size());
  if (nul) buf[s.size()] = '\0';
  return GAACRT_OK;
}

}  // namespace gaacrt::capi

using namespace gaacrt;
using capi::fail;
using capi::guarded;

extern "C" {

const char* gaacrt_version(void) { return GAACRT_VERSION; }

const char* gaacrt_last_error(void) { return capi::g_last_error.c_str(); }

const char* gaacrt_backends(void) {
  static const std::string list = [] {
    std::string s;
    for (const std::string& b : compiled_backends()) s += (s.empty() ? "" : ",") + b;
    return s;
  }();
  return list.c_str();
}

void gaacrt_set_log(gaacrt_log_fn fn, void* user) { set_log(reinterpret_cast<LogFn>(fn), user); }

gaacrt_model_params gaacrt_model_default_params(void) {
  gaacrt_model_params p;
  std::memset(&p, 0, sizeof p);
  p.size = sizeof p;
  p.backend = "auto";
  return p;
}

gaacrt_status gaacrt_model_load(const char* path, const gaacrt_model_params* params, gaacrt_model** out) {
  return guarded([&] {
    if (!path || !out) return fail(GAACRT_ERR_INVALID_ARGUMENT, "gaacrt_model_load: path and out must not be NULL");
    *out = nullptr;
    gaacrt_model_params p = gaacrt_model_default_params();
    if (params) {
      if (params->size < offsetof(gaacrt_model_params, progress) || params->size > sizeof p)
        return fail(GAACRT_ERR_INVALID_ARGUMENT, strfmt("gaacrt_model_params.size = %zu is not a size this library knows "
                                                        "(expected %zu); set it to sizeof(gaacrt_model_params)",
                                                        params->size, sizeof p));
      std::memcpy(&p, params, params->size);
    }
    ModelParams mp;
    mp.backend = p.backend ? p.backend : "auto";
    mp.device = p.device;
    mp.n_threads = p.n_threads;
    if (p.progress) {
      const gaacrt_progress_fn fn = p.progress;
      void* user = p.progress_user;
      mp.progress = [fn, user](float f) { return fn(f, user); };
    }
    auto* m = new gaacrt_model{std::make_unique<Model>(path, mp), {}};
    m->desc = m->model->description();
    if (p.progress) p.progress(1.0f, p.progress_user);
    *out = m;
    return GAACRT_OK;
  });
}

void gaacrt_model_free(gaacrt_model* model) { delete model; }

int32_t gaacrt_model_n_vocab(const gaacrt_model* model) { return model ? model->model->config().n_vocab : 0; }
int32_t gaacrt_model_n_ctx_train(const gaacrt_model* model) { return model ? model->model->config().n_ctx_train : 0; }
const char* gaacrt_model_desc(const gaacrt_model* model) { return model ? model->desc.c_str() : ""; }

gaacrt_status gaacrt_model_meta(const gaacrt_model* model, const char* key, char* buf, size_t cap, size_t* len) {
  return guarded([&] {
    if (!model || !key) return fail(GAACRT_ERR_INVALID_ARGUMENT, "gaacrt_model_meta: model and key must not be NULL");
    const GGUFValue* v = model->model->file().find(key);
    if (!v) return fail(GAACRT_ERR_INVALID_ARGUMENT, strfmt("no metadata key '%s'", key));
    std::string s;
    if (v->type == GGUFValueType::STRING) s = std::string(v->str);
    else if (v->is_array()) s = strfmt("[%llu items]", (unsigned long long)v->count);
    else if (v->is_float()) s = strfmt("%.9g", v->f);
    else if (v->type == GGUFValueType::BOOL) s = v->u ? "true" : "false";
    else if (v->type == GGUFValueType::UINT64) s = strfmt("%llu", (unsigned long long)v->u);
    else s = strfmt("%lld", (long long)v->i);
    return capi::copy_out(s, buf, cap, len, true);
  });
}

gaacrt_status gaacrt_tokenize(const gaacrt_model* model, const char* text, size_t len, bool add_special,
                              bool parse_special, gaacrt_token* tokens, size_t cap, size_t* n_tokens) {
  return guarded([&] {
    if (!model || (!text && len)) return fail(GAACRT_ERR_INVALID_ARGUMENT, "gaacrt_tokenize: model and text must not be NULL");
    const std::vector<int32_t> ids = model->model->tokenizer().tokenize(std::string_view(text ? text : "", len),
                                                                        add_special, parse_special);
    if (n_tokens) *n_tokens = ids.size();
    if (!tokens || cap < ids.size())
      return fail(GAACRT_ERR_BUFFER_TOO_SMALL, strfmt("token buffer of %zu is too small: %zu needed", cap, ids.size()));
    std::memcpy(tokens, ids.data(), ids.size() * sizeof(int32_t));
    return GAACRT_OK;
  });
}

gaacrt_status gaacrt_detokenize(const gaacrt_model* model, const gaacrt_token* tokens, size_t n, bool render_special,
                                char* buf, size_t cap, size_t* len) {
  return guarded([&] {
    if (!model || (!tokens && n)) return fail(GAACRT_ERR_INVALID_ARGUMENT, "gaacrt_detokenize: model and tokens must not be NULL");
    const std::string s = model->model->tokenizer().detokenize(tokens, n, false, render_special);
    return capi::copy_out(s, buf, cap, len, false);
  });
}

bool gaacrt_token_is_eog(const gaacrt_model* model, gaacrt_token token) {
  try {
    return model && model->model->tokenizer().is_eog(token);
  } catch (...) {
    return false;
  }
}

gaacrt_token gaacrt_token_bos(const gaacrt_model* model) {
  try {
    return model ? model->model->tokenizer().vocab().bos : GAACRT_TOKEN_NULL;
  } catch (...) {
    return GAACRT_TOKEN_NULL;
  }
}

gaacrt_token gaacrt_token_eos(const gaacrt_model* model) {
  try {
    return model ? model->model->tokenizer().vocab().eos : GAACRT_TOKEN_NULL;
  } catch (...) {
    return GAACRT_TOKEN_NULL;
  }
}

gaacrt_status gaacrt_chat_apply_template(const gaacrt_model* model, const char* template_name,
                                         const gaacrt_chat_message* messages, size_t n_messages,
                                         bool add_generation_prompt, char* buf, size_t cap, size_t* len) {
  return guarded([&] {
    if (!model || (!messages && n_messages))
      return fail(GAACRT_ERR_INVALID_ARGUMENT, "gaacrt_chat_apply_template: model and messages must not be NULL");
    const tok::ChatTemplate t = template_name ? tok::chat_template_from_name(template_name)
                                              : tok::chat_template_for_model(model->model->file());
    std::vector<tok::ChatMessage> msgs;
    for (size_t i = 0; i < n_messages; ++i) {
      if (!messages[i].role || !messages[i].content)
        return fail(GAACRT_ERR_INVALID_ARGUMENT, strfmt("message %zu has a NULL role or content", i));
      msgs.push_back({messages[i].role, messages[i].content});
    }
    return capi::copy_out(tok::chat_apply(t, msgs, add_generation_prompt), buf, cap, len, true);
  });
}

}  // extern "C"
