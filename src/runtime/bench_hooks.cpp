// bench_hooks.cpp — time_attention().
#include "bench_hooks.h"

#include "common/error.h"

#include <algorithm>
#include <chrono>
#include <random>
#include <vector>

namespace gaacrt {

double time_attention(Context& ctx, int seq, int il, int reps, bool back_to_back) {
  return time_attention(ctx, std::vector<int>{seq}, il, reps, back_to_back);
}

double time_attention(Context& ctx, const std::vector<int>& seqs, int il, int reps, bool back_to_back) {
  const ModelConfig& c = ctx.model().config();
  Backend& be = ctx.model().backend();
  KVCache& cache = ctx.cache();
  const int32_t ns = (int32_t)seqs.size();
  if (ns < 1) throw Error("bench", "invalid_argument", "time_attention: no sequence");
  std::vector<float> q((size_t)ns * c.n_head * c.head_dim_k);
  std::mt19937 rng(1234);
  std::normal_distribution<float> nd(0.f, 1.f);
  for (float& x : q) x = nd(rng);
  float* dq = static_cast<float*>(be.alloc(q.size() * sizeof(float)));
  float* dout = static_cast<float*>(be.alloc((size_t)ns * c.n_head * c.head_dim_v * sizeof(float)));
  AttnSeq* dseq = static_cast<AttnSeq*>(be.alloc(ns * sizeof(AttnSeq)));
  be.upload(dq, q.data(), q.size() * sizeof(float));
  std::vector<AttnSeq> sq;  // one decode query per sequence, after its last token
  for (int32_t i = 0; i < ns; ++i) sq.push_back(AttnSeq{cache.table(seqs[i], il), i, 1, cache.length(seqs[i]) - 1});
  be.upload(dseq, sq.data(), ns * sizeof(AttnSeq));
  const AttentionArgs args{c.n_head, c.attn_scale, c.is_swa(il) ? c.sliding_window : 0, 0.f, 1};
  const KVLayerView kv = cache.layer_view(il);
  std::vector<double> times;
  if (back_to_back) {
    be.attention(kv, args, dseq, ns, dq, dout);  // warm-up
    be.synchronize();
    const auto t0 = std::chrono::steady_clock::now();
    for (int r = 0; r < reps; ++r) be.attention(kv, args, dseq, ns, dq, dout);
    be.synchronize();
    const auto t1 = std::chrono::steady_clock::now();
    times.push_back(std::chrono::duration<double>(t1 - t0).count() / std::max(1, reps));
  }
  for (int r = 0; r <= reps && !back_to_back; ++r) {
    be.synchronize();
    const auto t0 = std::chrono::steady_clock::now();
    be.attention(kv, args, dseq, ns, dq, dout);
    be.synchronize();
    const auto t1 = std::chrono::steady_clock::now();
    if (r > 0) times.push_back(std::chrono::duration<double>(t1 - t0).count());
  }
  be.free(dq);
  be.free(dout);
  be.free(dseq);
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

}  // namespace gaacrt
