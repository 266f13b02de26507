/* gaacrt.h — the stable C API of gaacrt (C99).
 *
 * Conventions (modelled on llama.h, shared/spec/gguf.md §8.3):
 *  - opaque handles; parameter structs begin with their size and come from *_default_params();
 *  - every call returns a gaacrt_status; on failure gaacrt_last_error() gives a message naming
 *    the problem (thread-local, valid until the next failing call on the same thread);
 *  - two-pass buffers: a call given a short buffer returns the needed size.
 * Thread safety: a model may be shared by threads; a session is used by one thread at a time.
 */
#ifndef GAACRT_H
#define GAACRT_H

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

typedef enum gaacrt_status {
  GAACRT_OK = 0,
  GAACRT_ERR_INVALID_ARGUMENT = 1, /* a NULL handle, a bad size field, an out-of-range value */
  GAACRT_ERR_IO = 2,               /* a file could not be opened or mapped */
  GAACRT_ERR_BAD_FILE = 3,         /* malformed or unsupported GGUF; see gaacrt_last_error() */
  GAACRT_ERR_UNSUPPORTED = 4,      /* unknown architecture, tensor type or tokenizer */
  GAACRT_ERR_OUT_OF_MEMORY = 5,    /* allocation failed, or the KV arena is full */
  GAACRT_ERR_CONTEXT_FULL = 6,     /* the prompt or generation would pass the context length */
  GAACRT_ERR_BUFFER_TOO_SMALL = 7, /* the needed size was written to the size out-parameter */
  GAACRT_ERR_ABORTED = 8,          /* a callback asked to stop */
  GAACRT_ERR_BACKEND = 9,          /* the requested backend or device is not available */
  GAACRT_ERR_INTERNAL = 10
} gaacrt_status;

/* Library version, e.g. "0.1.0". */
GAACRT_API const char* gaacrt_version(void);

/* The message of the last failing call on this thread ("" if none). */
GAACRT_API const char* gaacrt_last_error(void);

/* Backends compiled into this library, comma-separated, e.g. "cpu,cuda". */
GAACRT_API const char* gaacrt_backends(void);

#ifdef __cplusplus
}
#endif

#endif /* GAACRT_H */
