// ops.h — the CPU implementations of the backend ops, one file each (same stem as the op).
// CpuBackend forwards to these; they are also the reference other backends are tested against.
#pragma once
#include <cstdint>

#include "backend/backend.h"
#include "thread_pool.h"

namespace gaacrt::cpu {

void get_rows(const WeightView& emb, const int32_t* ids, int64_t n, float scale, float* out, ThreadPool& pool);
void rms_norm(const float* x, const float* w, float eps, int64_t rows, int64_t dim, float* y, ThreadPool& pool);
void rope(float* x, int64_t n_tok, int32_t n_heads, int32_t head_dim, const int32_t* pos, const RopeParams& p,
          ThreadPool& pool);
void add(float* y, const float* x, int64_t n);
void act_mul(const float* g, const float* u, int64_t n, Activation act, float* h, ThreadPool& pool);
// act_mul's gate over a range, vectorized (elementwise_avx2.cpp; x86 builds, needs cpu_has_avx2()).
using ActMulFn = void (*)(const float* g, const float* u, int64_t n, float* h);
ActMulFn act_mul_avx2(Activation act);
void softcap(float* x, int64_t n, float cap);
void kv_store(const KVLayerView& kv, const KVTokenSlot* slots, int64_t n_tok, const float* k, const float* v,
              ThreadPool& pool);
void kv_finalize(const KVLayerView& kv, KVFinalizeJob* jobs, int64_t n_jobs, ThreadPool& pool);
// The lossy fixed-slot formats (E8, q8, kivi2): encode jobs, and decode one slot to fp32 rows.
void kv_finalize_lossy(const KVLayerView& kv, KVFinalizeJob* jobs, int64_t n_jobs, ThreadPool& pool);
// E8 keys come out in the rotated basis (plus the rotated mean key when centering is on).
void decode_lossy_tile(const KVLayerView& kv, const uint8_t* slot, int32_t is_v, int32_t head, int32_t half, float* out,
                       int64_t ld);
inline bool kv_format_is_lossy(KVFormat f) { return f == KVFormat::E8 || f == KVFormat::Q8 || f == KVFormat::KIVI2; }
void attention(const KVLayerView& kv, const AttentionArgs& args, const AttnSeq* seqs, int32_t n_seqs, const float* q,
               float* out, ThreadPool& pool);

}  // namespace gaacrt::cpu
