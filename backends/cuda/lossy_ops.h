// lossy_ops.h — the CUDA ops of the fixed-slot lossy cache formats (E8 k2v2, q8, kivi2;
// src/kv/lossy_codecs.h): block finalization (kv_finalize_lossy.cu) and attention
// (attention_lossy.cu). CudaBackend::kv_finalize / ::attention dispatch here for those formats.
#pragma once
#include <cuda_runtime.h>

#include "codec/e8/e8_layout.h"
#include "common/error.h"
#include "kv/kv_view.h"

namespace gaacrt::cuda::lossy {

inline bool is_lossy(KVFormat f) { return f == KVFormat::E8 || f == KVFormat::Q8 || f == KVFormat::KIVI2; }

// What both ops need of an E8 cache view (tiles of T channels): its layer state, and the paper's
// slots — block centering (e8_center=block) has bigger key slots and no CUDA kernels yet.
inline void check_e8_view(const KVLayerView& kv, int32_t T, const char* op) {
  if (kv.format != KVFormat::E8) return;
  if (!kv.codec) throw Error("backend", "invalid_argument", strfmt("cuda %s: E8 cache without its layer state", op));
  if (kv.slot_bytes[0] != e8_k_slot_bytes(T))
    throw Error("backend", "unsupported_format",
                strfmt("cuda %s: E8 block centering (e8_center=block) runs on the CPU backend only; CUDA has no "
                       "kernels for it", op));
}

// Encodes each job's raw BF16 tile into its slot with the portable codecs (byte-identical to the
// CPU backend's backends/cpu/kv_finalize_lossy.cpp); jobs live in device memory.
void kv_finalize(const KVLayerView& kv, KVFinalizeJob* jobs, int64_t n_jobs, cudaStream_t stream);

// Device scratch attention() needs for a batch of n_seqs sequences on a GPU of `sms` SMs. For E8
// it starts with the rotated queries: [seq][kv-head][e8_rot_rows rows][dk] floats.
size_t attention_scratch_bytes(const KVLayerView& kv, const AttentionArgs& a, int32_t n_seqs, int sms);
// decode_on_mma: the sequences of at most 16 rows (decode steps) are the E8 tensor-core kernel's
// (CudaBackend::attention launches it next, kernels/attention_e8_mma.cuh): only their rotated
// queries are made here (at the scratch's start), and longer sequences attended — or, with
// e8_prefill_on_mma, rotated too and left to that kernel as well.
void attention(const KVLayerView& kv, const AttentionArgs& a, const AttnSeq* seqs, int32_t n_seqs, const float* q,
               float* out, void* scratch, int sms, int max_smem, cudaStream_t stream, bool decode_on_mma);

// Whether an E8 cache's decode steps run on the tensor-core kernel: head dims 32, 64 or 128 (one
// tile per block) and the paper's slots. GAACRT_CUDA_E8_MMA=0 keeps them on the CUDA-core kernel
// (for comparisons; read once).
bool e8_mma_ok(const KVLayerView& kv);

// Rows per (sequence, kv-head) of the rotated E8 queries attention() leaves at its scratch's start
// for a decode launch (the tensor-core kernel's decode row group; e8_rot_rows gives a prefill's).
constexpr int kRotatedRows = 16;

// Whether the E8 tensor-core kernel also takes a launch's prefill-sized sequences: e8_mma_ok, the
// launch's largest sequence known (AttentionArgs::max_q > 0), and the rotated queries of n_seqs
// sequences that long within kMaxRotBytes (a batch of many sequences beside a long one: the
// CUDA-core kernel); GAACRT_CUDA_E8_MMA_PREFILL=0 keeps them on the CUDA-core kernel (read on
// every call).
constexpr size_t kMaxRotBytes = size_t(64) << 20;
bool e8_prefill_on_mma(const KVLayerView& kv, const AttentionArgs& a, int32_t n_seqs);
// Rows per (sequence, kv-head) of the rotated queries: kRotatedRows, or with e8_prefill_on_mma the
// launch's largest sequence's rows (max_q x the GQA group) rounded up to a multiple of it.
int32_t e8_rot_rows(const KVLayerView& kv, const AttentionArgs& a, int32_t n_seqs);

}  // namespace gaacrt::cuda::lossy
