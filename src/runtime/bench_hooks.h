// bench_hooks.h — measurement helpers the benchmarks call through the bindings (not part of the
// serving path): time the attention op alone over a session's cache.
#pragma once
#include <vector>
#include <cstdint>

#include "context.h"

namespace gaacrt {

// Seconds per call (median of `reps`, after one warm-up) of the attention op for one decode
// query at the end of sequence `seq`, layer `il`, with a random query. Each call is timed on the
// host around a synchronous launch (launch latency and the wait included). With back_to_back,
// the `reps` calls are instead queued without waiting and the total divided by reps (the launch
// latency then overlaps the previous call, as in a decode step or a CUDA graph).
double time_attention(Context& ctx, int seq, int il, int reps, bool back_to_back = false);
// The same for one decode query in each of several sequences, in one attention call (a batch).
double time_attention(Context& ctx, const std::vector<int>& seqs, int il, int reps, bool back_to_back = false);

}  // namespace gaacrt
