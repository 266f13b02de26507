/* gaacrt.h — the stable C API of gaacrt (C99).
 *
 * Conventions (modelled on llama.h, shared/spec/gguf.md §8.3):
 *  - opaque handles: gaacrt_model, gaacrt_session, gaacrt_batch, gaacrt_sampler;
 *  - parameter structs begin with their size (`size = sizeof(struct)`, so the library can
 *    tell which fields a caller compiled against) and come from *_default_params();
 *  - calls return a gaacrt_status; on failure gaacrt_last_error() gives a message naming the
 *    problem (thread-local, valid until the next failing call on the same thread);
 *  - two-pass buffers: a call given a short buffer returns GAACRT_ERR_BUFFER_TOO_SMALL and
 *    writes the needed size to its size out-parameter.
 *
 * Thread safety: a gaacrt_model may be shared by any number of threads (it is read-only after
 * loading). A gaacrt_session, gaacrt_batch or gaacrt_sampler is used by one thread at a time;
 * the only exception is gaacrt_session_cancel(), which any thread may call at any time.
 *
 * A minimal program (examples/chat.c is a complete one):
 *   gaacrt_model* m;  gaacrt_model_load("model.gguf", NULL, &m);
 *   gaacrt_session* s; gaacrt_session_new(m, NULL, &s);
 *   gaacrt_sampler* smp; gaacrt_sampler_new(m, NULL, &smp);
 *   gaacrt_generate(s, smp, "The capital of France is", 32, on_token, NULL, NULL);
 */
#ifndef GAACRT_H
#define GAACRT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32) && !defined(GAACRT_STATIC)
#  ifdef GAACRT_BUILDING_LIBRARY
#    define GAACRT_API __declspec(dllexport)
#  else
#    define GAACRT_API __declspec(dllimport)
#  endif
#else
#  define GAACRT_API __attribute__((visibility("default")))
#endif

typedef int32_t gaacrt_token;
#define GAACRT_TOKEN_NULL (-1)

typedef enum gaacrt_status {
  GAACRT_OK = 0,
  GAACRT_ERR_INVALID_ARGUMENT = 1, /* a NULL handle, a bad size field, an out-of-range value */
  GAACRT_ERR_IO = 2,               /* a file could not be opened or mapped */
  GAACRT_ERR_BAD_FILE = 3,         /* malformed or unsupported GGUF; see gaacrt_last_error() */
  GAACRT_ERR_UNSUPPORTED = 4,      /* unknown architecture, tensor type or tokenizer */
  GAACRT_ERR_OUT_OF_MEMORY = 5,    /* allocation failed, or the KV arena is full */
  GAACRT_ERR_CONTEXT_FULL = 6,     /* the prompt or generation would pass the context length */
  GAACRT_ERR_BUFFER_TOO_SMALL = 7, /* the needed size was written to the size out-parameter */
  GAACRT_ERR_ABORTED = 8,          /* a callback asked to stop, or the session was cancelled */
  GAACRT_ERR_BACKEND = 9,          /* the requested backend or device is not available */
  GAACRT_ERR_INTERNAL = 10
} gaacrt_status;

typedef struct gaacrt_model gaacrt_model;
typedef struct gaacrt_session gaacrt_session;
typedef struct gaacrt_batch gaacrt_batch;
typedef struct gaacrt_sampler gaacrt_sampler;

/* ---- library ------------------------------------------------------------------------------ */

GAACRT_API const char* gaacrt_version(void);      /* e.g. "0.1.0" */
GAACRT_API const char* gaacrt_last_error(void);   /* "" when the last call on this thread succeeded */
GAACRT_API const char* gaacrt_backends(void);     /* compiled backends, e.g. "cuda,cpu" */

typedef enum gaacrt_log_level { GAACRT_LOG_DEBUG = 0, GAACRT_LOG_INFO = 1, GAACRT_LOG_WARN = 2, GAACRT_LOG_ERROR = 3 } gaacrt_log_level;
/* Receives the library's log lines (no trailing newline). NULL restores the default (stderr,
 * warnings and errors only). The callback may be called from any thread. */
typedef void (*gaacrt_log_fn)(gaacrt_log_level level, const char* message, void* user);
GAACRT_API void gaacrt_set_log(gaacrt_log_fn fn, void* user);

/* ---- model -------------------------------------------------------------------------------- */

/* Called during loading with progress in [0, 1]; return false to cancel (the load then fails
 * with GAACRT_ERR_ABORTED). */
typedef bool (*gaacrt_progress_fn)(float progress, void* user);

typedef struct gaacrt_model_params {
  size_t size;                  /* sizeof(gaacrt_model_params) */
  const char* backend;          /* "auto" (default: CUDA when usable, else CPU), "cpu", "cuda" */
  int32_t device;               /* GPU index */
  int32_t n_threads;            /* CPU threads; 0 = all cores */
  gaacrt_progress_fn progress;  /* may be NULL */
  void* progress_user;
} gaacrt_model_params;

GAACRT_API gaacrt_model_params gaacrt_model_default_params(void);
/* params may be NULL (defaults). */
GAACRT_API gaacrt_status gaacrt_model_load(const char* path, const gaacrt_model_params* params, gaacrt_model** out);
GAACRT_API void gaacrt_model_free(gaacrt_model* model);

GAACRT_API int32_t gaacrt_model_n_vocab(const gaacrt_model* model);
GAACRT_API int32_t gaacrt_model_n_ctx_train(const gaacrt_model* model);
/* "llama 135M Q4_1"; the string lives as long as the model. */
GAACRT_API const char* gaacrt_model_desc(const gaacrt_model* model);
/* A metadata value rendered as text (numbers in decimal, arrays as "[n items]"). */
GAACRT_API gaacrt_status gaacrt_model_meta(const gaacrt_model* model, const char* key, char* buf, size_t cap, size_t* len);

/* ---- tokens and text ---------------------------------------------------------------------- */

/* Token ids of `len` bytes of UTF-8 (malformed bytes never fail; see src/tokenizer/tokenizer.h).
 * add_special: BOS/EOS as the model's vocabulary asks; parse_special: turn special-token texts
 * such as "<|im_start|>" into their ids (never do this with untrusted user text).
 * *n_tokens gets the count; with a short buffer: GAACRT_ERR_BUFFER_TOO_SMALL and the needed count. */
GAACRT_API gaacrt_status gaacrt_tokenize(const gaacrt_model* model, const char* text, size_t len, bool add_special,
                                         bool parse_special, gaacrt_token* tokens, size_t cap, size_t* n_tokens);
/* Bytes of token ids (not NUL-terminated; *len gets the byte count). */
GAACRT_API gaacrt_status gaacrt_detokenize(const gaacrt_model* model, const gaacrt_token* tokens, size_t n,
                                           bool render_special, char* buf, size_t cap, size_t* len);
GAACRT_API bool gaacrt_token_is_eog(const gaacrt_model* model, gaacrt_token token);
GAACRT_API gaacrt_token gaacrt_token_bos(const gaacrt_model* model);
GAACRT_API gaacrt_token gaacrt_token_eos(const gaacrt_model* model);

typedef struct gaacrt_chat_message {
  const char* role;     /* "system", "user", "assistant" */
  const char* content;
} gaacrt_chat_message;
/* Formats a conversation with the model's built-in chat template (or `template_name`, e.g.
 * "chatml", "llama3", "gemma", "mistral-v7" when not NULL). Output is NUL-terminated;
 * *len excludes the NUL; with a short buffer: GAACRT_ERR_BUFFER_TOO_SMALL and the needed length. */
GAACRT_API gaacrt_status gaacrt_chat_apply_template(const gaacrt_model* model, const char* template_name,
                                                    const gaacrt_chat_message* messages, size_t n_messages,
                                                    bool add_generation_prompt, char* buf, size_t cap, size_t* len);

/* ---- sessions ----------------------------------------------------------------------------- */

/* Polled between prefill chunks and generated tokens; return true to abort. */
typedef bool (*gaacrt_abort_fn)(void* user);

typedef struct gaacrt_session_params {
  size_t size;                  /* sizeof(gaacrt_session_params) */
  int32_t n_ctx;                /* context length (default 4096; 0 = the model's training context) */
  const char* cache;            /* KV format: "bf16" (default), "gaac", "e8", ... */
  uint64_t kv_budget_bytes;     /* KV arena size; 0 = sized for n_ctx */
  int32_t n_ubatch;             /* prefill chunk (default 512) */
  gaacrt_abort_fn abort;        /* may be NULL */
  void* abort_user;
  /* Added later: a caller built against an older header passes a smaller size and gets the
   * defaults for these. */
  const char* calibration;      /* GAAC sidecar path; NULL or "" = "model.gaac" beside the model, else online */
  int32_t raw_sink;             /* lossy formats: first tokens kept BF16 for good (default 0) */
  int32_t e8_center;            /* E8 key centering, not in the paper: 0 off (default); 1 global: keys coded as
                                 * (k - mean) / sqrt(std) per channel; 2 block: each 16-token block's own mean
                                 * stored and subtracted, channels scaled (CPU only, 100 B per token-head at d = 128) */
  int32_t raw_window;           /* compressing formats: the newest raw_window tokens (and up to 15 more: blocks
                                 * are compressed whole) stay raw BF16; -1 (default) = the format's own: 128 for
                                 * e8 and kivi2, 0 for gaac and q8 */
} gaacrt_session_params;

GAACRT_API gaacrt_session_params gaacrt_session_default_params(void);
GAACRT_API gaacrt_status gaacrt_session_new(gaacrt_model* model, const gaacrt_session_params* params, gaacrt_session** out);
GAACRT_API void gaacrt_session_free(gaacrt_session* session);
/* Appends tokens (prefill); afterwards gaacrt_session_logits() are the last token's. A prompt
 * that would pass the context fails with GAACRT_ERR_CONTEXT_FULL before anything is evaluated. */
GAACRT_API gaacrt_status gaacrt_session_eval(gaacrt_session* session, const gaacrt_token* tokens, size_t n);
/* n_vocab floats, valid until the next eval/decode on this session. */
GAACRT_API const float* gaacrt_session_logits(const gaacrt_session* session);
GAACRT_API int32_t gaacrt_session_n_past(const gaacrt_session* session);
/* Keeps the first n tokens (re-evaluating from the history when the cache cannot keep them). */
GAACRT_API gaacrt_status gaacrt_session_truncate(gaacrt_session* session, int32_t n);
/* Thread-safe: the session's running eval/generate stops at the next token with GAACRT_ERR_ABORTED. */
GAACRT_API void gaacrt_session_cancel(gaacrt_session* session);

/* ---- batched decode: several sequences sharing one KV arena, one forward per step ---------- */

GAACRT_API gaacrt_status gaacrt_batch_new(gaacrt_model* model, const gaacrt_session_params* params, int32_t n_seq,
                                          gaacrt_batch** out);
GAACRT_API void gaacrt_batch_free(gaacrt_batch* batch);  /* frees its sessions too */
/* Sequence i of the batch, a session owned by the batch (eval it to prefill a prompt). */
GAACRT_API gaacrt_session* gaacrt_batch_session(gaacrt_batch* batch, int32_t i);
/* One step: tokens[k] is appended to sequence seq[k] (distinct indices), all in one forward. */
GAACRT_API gaacrt_status gaacrt_batch_decode(gaacrt_batch* batch, const int32_t* seq, const gaacrt_token* tokens, size_t n);

/* ---- sampling ----------------------------------------------------------------------------- */

typedef struct gaacrt_sampler_params {
  size_t size;                  /* sizeof(gaacrt_sampler_params) */
  float temperature;            /* 0.8; <= 0: greedy */
  int32_t top_k;                /* 40; <= 0: off */
  float top_p;                  /* 0.95; 1: off */
  float min_p;                  /* 0.05; 0: off */
  float repeat_penalty;         /* 1.0 = off */
  int32_t repeat_last_n;        /* 64 */
  float frequency_penalty;      /* 0 */
  float presence_penalty;       /* 0 */
  uint32_t seed;                /* 0xFFFFFFFF = random */
} gaacrt_sampler_params;

GAACRT_API gaacrt_sampler_params gaacrt_sampler_default_params(void);
GAACRT_API gaacrt_status gaacrt_sampler_new(const gaacrt_model* model, const gaacrt_sampler_params* params,
                                            gaacrt_sampler** out);
GAACRT_API void gaacrt_sampler_free(gaacrt_sampler* sampler);
/* Samples from the session's current logits and records the token in the penalty history. */
GAACRT_API gaacrt_token gaacrt_sampler_sample(gaacrt_sampler* sampler, const gaacrt_session* session);
/* Records a token (e.g. the prompt's) in the penalty history without sampling. */
GAACRT_API void gaacrt_sampler_accept(gaacrt_sampler* sampler, gaacrt_token token);

/* ---- generation --------------------------------------------------------------------------- */

/* Receives each generated token and its text (UTF-8, never half a character; may be empty
 * while a character is incomplete). Return false to stop generating. */
typedef bool (*gaacrt_token_fn)(gaacrt_token token, const char* text, size_t len, void* user);

/* Tokenizes `prompt` (parse_special = true: it may hold chat markup from
 * gaacrt_chat_apply_template), evaluates it after what the session already holds, then samples
 * up to max_tokens tokens, stopping at an end-of-generation token, when on_token returns false,
 * on cancel/abort (GAACRT_ERR_ABORTED) or at the context limit (GAACRT_ERR_CONTEXT_FULL; the
 * tokens so far are kept). *n_generated (may be NULL) gets the number of tokens generated. */
GAACRT_API gaacrt_status gaacrt_generate(gaacrt_session* session, gaacrt_sampler* sampler, const char* prompt,
                                         int32_t max_tokens, gaacrt_token_fn on_token, void* user, int32_t* n_generated);

#ifdef __cplusplus
}
#endif

#endif /* GAACRT_H */
