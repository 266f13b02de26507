// bench_hooks.h — measurement helpers the benchmarks call through the bindings (not part of the
// serving path): time the attention op alone over a session's cache.
#pragma once
#include <cstdint>

#include "context.h"

namespace gaacrt {

// Seconds per call (median of `reps`, after one warm-up) of the attention op for one decode
// query at the end of sequence `seq`, layer `il`, with a random query.
double time_attention(Context& ctx, int seq, int il, int reps);

}  // namespace gaacrt
