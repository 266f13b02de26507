// metal_plan.h — the portable half of the Metal backend's host side: for each op, the kernel, the
// grid, the threadgroup sizes and the buffer plan (dispatch.h), from the op's arguments alone.
// Pure functions: no Metal, no memory of their own; they throw gaacrt::Error naming the op and
// the offending value for anything the kernels do not handle. The constants they size launches
// with come from ../kernels/args.h, the header the kernels include too.
#pragma once
#include <vector>

#include "backend/backend.h"
#include "dispatch.h"
#include "metal/kernels/args.h"

namespace gaacrt::mtl {

uint32_t div_up(int64_t a, int64_t b);
// v as uint32_t; throws Error("backend", "invalid_argument") naming the op and value when it does not fit.
uint32_t checked_u32(const char* op, const char* what, int64_t v);

// "<op>_<ggml type name>"; throws Error("quant", "unsupported_type") for a type with no kernel.
std::string weight_kernel(const char* op, GGMLType t);

Dispatch plan_dequantize(const WeightView& w, float* dst);
Dispatch plan_get_rows(const WeightView& emb, const int32_t* ids, int64_t n, float scale, float* out);
// matvec for n_tok <= MATVEC_MAX_TOK, the tiled matmul above.
Dispatch plan_matmul(const WeightView& w, const float* x, int64_t n_tok, float* y, const float* bias);
Dispatch plan_rms_norm(const float* x, const float* w, float eps, int64_t rows, int64_t dim, float* y);
Dispatch plan_rope(float* x, int64_t n_tok, int32_t n_heads, int32_t head_dim, const int32_t* pos,
                   const RopeParams& p);
Dispatch plan_add(float* y, const float* x, int64_t n);
Dispatch plan_act_mul(const float* g, const float* u, int64_t n, Activation act, float* h);
Dispatch plan_softcap(float* x, int64_t n, float cap);

// Reads the host-visible token slots (and their block tables) to stage them.
Dispatch plan_kv_store(const KVLayerView& kv, const KVTokenSlot* slots, int64_t n_tok, const float* k, const float* v);
// GAAC: reads the layer's GaacKVLayer (kv.codec) on the host; jobs come back through the staged
// buffer's readback.
Dispatch plan_kv_finalize_gaac(const KVLayerView& kv, KVFinalizeJob* jobs, int64_t n_jobs);
// q8 / KIVI-2 / E8: one dispatch for the scalar tiles and, for E8, one for the keys, grouped per
// (head, block) like the CPU (a group missing a half keeps its pages: fits = 0).
std::vector<Dispatch> plan_kv_finalize_lossy(const KVLayerView& kv, KVFinalizeJob* jobs, int64_t n_jobs);
bool kv_format_has_metal_finalize(KVFormat f);

// Attention: the work partition (CPU's chunks of 32 blocks aligned to absolute block indices,
// query tokens tiled so a threadgroup holds at most ATTN_MAX_ROWS rows), the two dispatches, and
// what the caller must provide: scratch for the partial rows and the per-item status words.
struct AttentionPlan {
  std::vector<AttnItem> items;
  std::vector<AttnMergeRow> merge;
  uint32_t partial_rows = 0;
  size_t partial_bytes(int32_t dv) const;  // rows of (m, l, dv accumulators)
  size_t status_bytes() const { return items.size() * ATTN_SIMDGROUPS * sizeof(int32_t); }
};
AttentionPlan partition_attention(const KVLayerView& kv, const gaacrt::AttentionArgs& args, const AttnSeq* seqs,
                                   int32_t n_seqs);
// Bytes of the rotated-query scratch attention needs (E8: every query row in the keys' basis), or 0.
size_t attention_rotation_bytes(const KVLayerView& kv, const gaacrt::AttentionArgs& args, const AttnSeq* seqs,
                                int32_t n_seqs);
// The (E8: rotation,) attention and merge dispatches; partials/status/q_rot: device scratch of the
// plan's sizes (q_rot null unless attention_rotation_bytes > 0).
std::vector<Dispatch> plan_attention(const KVLayerView& kv, const gaacrt::AttentionArgs& args, const AttnSeq* seqs,
                                     int32_t n_seqs, const float* q, float* out, const AttentionPlan& part,
                                     float* partials, int32_t* status, float* q_rot);

// Block tables staged once per distinct table: returns each table's offset (entries).
struct StagedTables {
  std::vector<uint32_t> entries;
  std::vector<const uint32_t*> seen;
  uint32_t add(const uint32_t* table, int64_t n_entries);
};

}  // namespace gaacrt::mtl
