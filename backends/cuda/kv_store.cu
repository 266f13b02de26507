// kv_store.cu — append this step's K and V to their raw BF16 pages, and kv_finalize: encode full
// blocks into the cache format's compressed slots, on the GPU (kv/kv_view.h; DESIGN.md "KV cache").
//
// kv_store reads the slot of each token (table + position) from device memory, so a decode
// step's launch does not depend on host-side positions. kv_finalize runs the portable GAAC
// encoder's lane functions (codec/gaac/gaac_format.h gaac_encode_lane_*) with one warp per tile,
// a thread per encoder lane: the code gaac_encode_tile runs lane after lane on the CPU, so a slot
// is byte-identical whichever backend wrote it.
#include "codec/gaac/gaac_format.h"
#include "common/half.h"
#include "cuda_backend.h"
#include "cuda_common.h"
#include "kv/gaac_codec.h"
#include "lossy_ops.h"

namespace gaacrt::cuda {
namespace {

constexpr int kThreads = 256;

// One thread per (token, kv-head, K|V, channel).
__global__ void kv_store_kernel(KVLayerView kv, const KVTokenSlot* __restrict__ slots, int64_t n_tok,
                                const float* __restrict__ k, const float* __restrict__ v) {
  pdl_begin();
  const int32_t dk = kv.head_dim_k, dv = kv.head_dim_v;
  const int64_t per_tok = (int64_t)kv.n_head_kv * (dk + dv);
  const int64_t total = n_tok * per_tok;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
    const int64_t t = i / per_tok;
    int64_t r = i % per_tok;
    const int32_t h = (int32_t)(r / (dk + dv));
    r %= (dk + dv);
    const int32_t is_v = r >= dk;
    const int32_t c = (int32_t)(is_v ? r - dk : r);
    const float x = is_v ? v[(t * kv.n_head_kv + h) * dv + c] : k[(t * kv.n_head_kv + h) * dk + c];
    const int32_t pos = slots[t].pos, block = pos / KV_BLOCK_TOKENS, row = pos % KV_BLOCK_TOKENS;
    const int32_t half = c / kv.tile_dim, cc = c % kv.tile_dim;
    const uint32_t e = slots[t].table[kv_entry_index(kv, h, is_v, half, block)];
    uint16_t* dst = reinterpret_cast<uint16_t*>(kv.arena + (uint64_t)e * kv.page_bytes) + row * kv.tile_dim;
    dst[cc] = f32_to_bf16(x);
  }
}

// One warp per job, lane l doing encoder lane l (gaac_lanes(d) <= 32): the lanes' tags, the
// warp's escape total (a tile that does not fit is left untouched, as gaac_encode_tile leaves
// it), each lane's escape offsets by an exclusive scan, then the lanes write.
constexpr int kFinalizeWarps = 4;
__global__ void __launch_bounds__(kFinalizeWarps * 32) gaac_finalize_kernel(KVLayerView kv, KVFinalizeJob* jobs,
                                                                            int64_t n_jobs) {
  pdl_begin();
  const int64_t i = (int64_t)blockIdx.x * kFinalizeWarps + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (i >= n_jobs) return;  // warp-uniform
  const GaacKVLayer& st = *static_cast<const GaacKVLayer*>(kv.codec);
  KVFinalizeJob& j = jobs[i];
  const int32_t d = kv.tile_dim, nl = gaac_lanes(d);
  const uint16_t* raw = reinterpret_cast<const uint16_t*>(kv.arena + (uint64_t)j.raw_page * kv.page_bytes);
  const int64_t off = (int64_t)j.head * (j.is_v ? kv.head_dim_v : kv.head_dim_k) + (int64_t)j.half * d;
  const uint8_t *b3 = st.bases[j.is_v][0] + off, *b4 = st.bases[j.is_v][1] + off;
  uint32_t n_x = 0, n_raw = 0, tags = 0;
  if (lane < nl) tags = gaac_encode_lane_tags(raw, d, d, lane, b3, b4, &n_x, &n_raw);
  // Inclusive scans of the lanes' X bytes and R records; the last lane holds the totals.
  uint32_t sx = n_x, sr = n_raw;
  for (int o = 1; o < 32; o <<= 1) {
    const uint32_t ax = __shfl_up_sync(0xffffffffu, sx, o), ar = __shfl_up_sync(0xffffffffu, sr, o);
    if (lane >= o) { sx += ax; sr += ar; }
  }
  const uint32_t tx = __shfl_sync(0xffffffffu, sx, 31), tr = __shfl_sync(0xffffffffu, sr, 31);
  const uint32_t n_esc = tx + 4u * tr;
  const bool fits = n_esc <= st.capacity[j.is_v];
  if (fits && lane < nl)
    gaac_encode_lane_write(raw, d, d, lane, tags, b3, b4, kv_entry_ptr(kv, j.slot, j.is_v), sx - n_x,
                           tx + 4u * (sr - n_raw));
  if (lane == 0) {
    j.fits = fits;
    j.escape_bytes = fits ? (int32_t)n_esc : 0;
  }
}

__global__ void finalize_none_kernel(KVFinalizeJob* jobs, int64_t n_jobs) {
  pdl_begin();
  const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n_jobs) jobs[i].fits = 0;
}

}  // namespace

void CudaBackend::kv_store(const KVLayerView& kv, const KVTokenSlot* slots, int64_t n_tok, const float* k,
                           const float* v) {
  if (n_tok <= 0) return;
  if (kv.head_dim_k != kv.tile_dim * kv.n_half || kv.head_dim_v != kv.tile_dim * kv.n_half)
    throw Error("backend", "invalid_argument",
                strfmt("cuda kv_store: head dims %d/%d are not n_half %d x tile_dim %d", kv.head_dim_k, kv.head_dim_v,
                       kv.n_half, kv.tile_dim));
  if (kv.format != KVFormat::BF16 && kv.format != KVFormat::GAAC && !lossy::is_lossy(kv.format))
    throw Error("backend", "not_implemented",
                strfmt("cuda kv_store: cache format %d is not implemented on CUDA (bf16, gaac, e8, q8, kivi2 are)",
                       (int)kv.format));
  const int64_t n = n_tok * kv.n_head_kv * (kv.head_dim_k + kv.head_dim_v);
  launch_kernel(kv_store_kernel, grid_for_items(n, kThreads), kThreads, 0, stream_, kv, slots, n_tok, k, v);
  GAACRT_CUDA_CHECK(cudaGetLastError());
}

void CudaBackend::kv_finalize(const KVLayerView& kv, KVFinalizeJob* jobs, int64_t n_jobs) {
  if (n_jobs <= 0) return;
  const unsigned grid = (unsigned)((n_jobs + 63) / 64);
  if (kv.format == KVFormat::BF16) {
    launch_kernel(finalize_none_kernel, grid, 64, 0, stream_, jobs, n_jobs);  // no compressed class
  } else if (kv.format == KVFormat::GAAC) {
    if (!gaac_tile_dim_ok(kv.tile_dim))
      throw Error("backend", "invalid_argument", strfmt("cuda kv_finalize: GAAC tile dim %d", kv.tile_dim));
    static_assert(GAAC_MAX_LANES <= 32, "one warp per tile");
    launch_kernel(gaac_finalize_kernel, (unsigned)((n_jobs + kFinalizeWarps - 1) / kFinalizeWarps),
                  kFinalizeWarps * 32, 0, stream_, kv, jobs, n_jobs);
  } else if (lossy::is_lossy(kv.format)) {
    lossy::kv_finalize(kv, jobs, n_jobs, stream_);  // kv_finalize_lossy.cu
  } else {
    throw Error("backend", "not_implemented",
                strfmt("cuda kv_finalize: cache format %d is not implemented on CUDA (bf16, gaac, e8, q8, kivi2 are)", (int)kv.format));
  }
  GAACRT_CUDA_CHECK(cudaGetLastError());
}

}  // namespace gaacrt::cuda
