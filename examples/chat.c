/* chat.c — a minimal terminal chat on the gaacrt C API.
 *
 *   cc examples/chat.c -I<prefix>/include -L<prefix>/lib -lgaacrt -o chat
 *   ./chat model.gguf [-p "one-shot prompt"] [-n max_tokens] [--cache bf16|gaac|e8] [--seed N]
 *
 * Without -p it reads user turns from stdin, one per line, until EOF. Each turn is formatted
 * with the model's chat template and only the new turn is evaluated: the session keeps the
 * conversation in its KV cache.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gaacrt.h"

static bool print_token(gaacrt_token token, const char* text, size_t len, void* user) {
  (void)token;
  (void)user;
  fwrite(text, 1, len, stdout);
  fflush(stdout);
  return true;
}

static int die(const char* what, gaacrt_status st) {
  fprintf(stderr, "chat: %s failed (status %d): %s\n", what, (int)st, gaacrt_last_error());
  return 1;
}

/* Formats one user turn (plus the assistant opening) with the model's template. The first turn
 * includes whatever the template adds at the start (e.g. a default system prompt). */
static char* format_turn(gaacrt_model* m, const char* user_text, int first) {
  gaacrt_chat_message msg = {"user", user_text};
  size_t len = 0;
  gaacrt_status st = gaacrt_chat_apply_template(m, NULL, &msg, 1, true, NULL, 0, &len);
  if (st != GAACRT_ERR_BUFFER_TOO_SMALL) return NULL;
  char* buf = malloc(len + 1);
  if (!buf) return NULL;
  if (gaacrt_chat_apply_template(m, NULL, &msg, 1, true, buf, len + 1, &len) != GAACRT_OK) {
    free(buf);
    return NULL;
  }
  (void)first;
  return buf;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s model.gguf [-p prompt] [-n max_tokens] [--cache fmt] [--seed N]\n", argv[0]);
    return 2;
  }
  const char* path = argv[1];
  const char* prompt = NULL;
  const char* cache = "bf16";
  int max_tokens = 128;
  long seed = -1;
  for (int i = 2; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "-p")) prompt = argv[i + 1];
    else if (!strcmp(argv[i], "-n")) max_tokens = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--cache")) cache = argv[i + 1];
    else if (!strcmp(argv[i], "--seed")) seed = atol(argv[i + 1]);
  }

  gaacrt_model* model = NULL;
  gaacrt_status st = gaacrt_model_load(path, NULL, &model);
  if (st != GAACRT_OK) return die("gaacrt_model_load", st);
  fprintf(stderr, "chat: %s (gaacrt %s, backends %s)\n", gaacrt_model_desc(model), gaacrt_version(), gaacrt_backends());

  gaacrt_session_params sp = gaacrt_session_default_params();
  sp.n_ctx = 2048;
  sp.cache = cache;
  gaacrt_session* session = NULL;
  if ((st = gaacrt_session_new(model, &sp, &session)) != GAACRT_OK) return die("gaacrt_session_new", st);

  gaacrt_sampler_params smp = gaacrt_sampler_default_params();
  if (seed >= 0) smp.seed = (uint32_t)seed;
  if (seed == -2) smp.temperature = 0.0f; /* --seed -2: greedy, for reproducible tests */
  gaacrt_sampler* sampler = NULL;
  if ((st = gaacrt_sampler_new(model, &smp, &sampler)) != GAACRT_OK) return die("gaacrt_sampler_new", st);

  char line[4096];
  int first = 1;
  int rc = 0;
  while (prompt || fgets(line, sizeof line, stdin)) {
    const char* user_text = prompt ? prompt : line;
    if (!prompt) line[strcspn(line, "\n")] = '\0';
    char* turn = format_turn(model, user_text, first);
    if (!turn) {
      rc = die("gaacrt_chat_apply_template", GAACRT_ERR_INTERNAL);
      break;
    }
    int32_t n = 0;
    st = gaacrt_generate(session, sampler, turn, max_tokens, print_token, NULL, &n);
    free(turn);
    printf("\n");
    if (st != GAACRT_OK) {
      rc = die("gaacrt_generate", st);
      break;
    }
    fprintf(stderr, "chat: %d tokens generated, %d in the session\n", n, gaacrt_session_n_past(session));
    first = 0;
    if (prompt) break;
  }
  gaacrt_sampler_free(sampler);
  gaacrt_session_free(session);
  gaacrt_model_free(model);
  return rc;
}
