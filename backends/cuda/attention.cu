// attention.cu — CudaBackend::attention: checks the cache view, chooses the split-K width and the
// shared-memory plan, and launches the tensor-core kernel of kernels/attention_mma.cuh (whose
// header comment explains the work split, the fused reduce and why BF16 and GAAC caches give
// bit-identical results), or for E8 decode steps kernels/attention_e8_mma.cuh; the other lossy
// formats go to attention_lossy.cu. The CPU reference is backends/cpu/attention.cpp.
#include <algorithm>
#include <cstdlib>

#include "codec/gaac/gaac_format.h"
#include "cuda_backend.h"
#include "attention_timeline.h"
#include "cuda_common.h"
#include "kernels/attention_e8_mma.cuh"
#include "kernels/attention_mma.cuh"
#include "lossy_ops.h"

namespace gaacrt::cuda {

#if defined(GAACRT_CUDA_SM90A)
constexpr bool kHaveWgmma = true;  // sm90a/attention_prefill_wgmma_bf16.cu
#else
constexpr bool kHaveWgmma = false;
bool attn::launch_attention_prefill_wgmma_bf16(const KernelArgs&, dim3, size_t, cudaStream_t, int, int) {
  return false;
}
#endif

void CudaBackend::attention(const KVLayerView& kv, const AttentionArgs& args, const AttnSeq* seqs, int32_t n_seqs,
                            const float* q, float* out) {
  if (n_seqs <= 0) return;
  const bool gaac = kv.format == KVFormat::GAAC;
  if (kv.n_head_kv <= 0 || args.n_head % kv.n_head_kv)
    throw Error("backend", "invalid_argument",
                strfmt("cuda attention: %d query heads are not a multiple of %d kv-heads", args.n_head, kv.n_head_kv));
  // E8 k2v2, q8, kivi2: attention_lossy.cu, but for E8 decode steps of head size 32, 64 or 128,
  // which run on the tensor cores below (with the queries lossy::attention rotates).
  // (The shared-memory test is a guard: the E8 kernel needs under 48 KB at every head size.)
  const bool e8 = lossy::e8_mma_ok(kv) &&  // (its tile dims are the kernel's head sizes)
                  attn::e8_smem_bytes(kv.tile_dim, attn::kMaxSplits) <= (size_t)max_dynamic_smem(device_);
  size_t lossy_bytes = 0;
  if (lossy::is_lossy(kv.format)) {
    lossy_bytes = (lossy::attention_scratch_bytes(kv, args, n_seqs, info_.multiprocessors) + 255) & ~(size_t)255;
    if (!e8) {
      void* scr = scratch(lossy_bytes);
      lossy::attention(kv, args, seqs, n_seqs, q, out, scr, info_.multiprocessors, max_dynamic_smem(device_), stream_,
                       false);
      return;
    }
  }
  if (kv.format != KVFormat::BF16 && !gaac && !e8)
    throw Error("backend", "not_implemented",
                strfmt("cuda attention: cache format %d is not implemented on CUDA (bf16, gaac, e8, q8, kivi2 are)",
                       (int)kv.format));
  const int32_t td = kv.tile_dim;
  if (td <= 0 || td > KV_TILE_MAX_DIM || kv.n_half < 1 || kv.n_half > 2 || (kv.n_half == 2 && td != KV_TILE_MAX_DIM) ||
      kv.head_dim_k != kv.n_half * td || kv.head_dim_v != kv.n_half * td)
    throw Error("backend", "invalid_argument",
                strfmt("cuda attention: head dims %d/%d (tile %d x %d) unsupported (at most 256, whole tiles)",
                       kv.head_dim_k, kv.head_dim_v, kv.n_half, td));
  if (n_seqs > 65535) throw Error("backend", "invalid_argument", strfmt("cuda attention: %d sequences", n_seqs));
  // A two-tile head (n_half = 2) runs on kD = 256 and every other head on kD <= 128: the kernels
  // take n_half from kD (kernels/attention_tiles.cuh TileGeom::kNHalf), so the two must agree.
  const int kD = kv.n_half == 2 ? 256 : (td <= 16 ? 16 : (td <= 32 ? 32 : (td <= 64 ? 64 : 128)));

  // GAAC staging: a tile's slot is its fixed part plus the escape capacity (kv.slot_bytes); its
  // constants go to the kernel as one word per K / V (attention_tiles.cuh GaacStaging), the
  // staging buffer holds the larger of the two.
  uint32_t half_bytes = 0;
  attn::GaacStaging staging{0u, 0u};
  if (gaac) {
    if (!gaac_tile_dim_ok(td))
      throw Error("backend", "invalid_argument", strfmt("cuda attention: GAAC tile dim %d is not a multiple of 8", td));
    for (int is_v = 0; is_v < 2; ++is_v) {
      if (kv.slot_bytes[is_v] == 0) continue;  // not calibrated yet: every tile is a raw page
      if (kv.slot_bytes[is_v] < gaac_fixed_bytes(td))
        throw Error("backend", "invalid_argument",
                    strfmt("cuda attention: GAAC %s slot of %llu bytes is smaller than the fixed part (%u)",
                           is_v ? "V" : "K", (unsigned long long)kv.slot_bytes[is_v], gaac_fixed_bytes(td)));
      (is_v ? staging.v : staging.k) = attn::gaac_stage_word(td, kv.slot_bytes[is_v], kv.arena, kv.chunk_bytes);
      half_bytes = std::max(half_bytes, staging.staged(is_v));
    }
    // A prefill-sized launch (the view checked above): its tiles decoded once into BF16 pages,
    // then this function again on those (attention_gaac_expand.cu).
    if (attention_expanded(kv, args, seqs, n_seqs, q, out)) return;
  }

  // Split-K width: as many thread blocks per multiprocessor as the kernel is built for (three for
  // E8; for BF16/GAAC `blocks` below: three at head size 128 unless GAACRT_CUDA_ATTN_BLOCKS_PER_SM=2
  // asks two, else two), rounded down so that every block runs in the one wave (rounded up, two
  // sequences of 8 kv-heads on 132 SMs made 272 blocks for 264 places: 8 blocks ran as a second
  // wave); a function of the batch shape, the cache's context and the GPU only, never of the
  // positions, and the same for BF16 and GAAC, so those two sum in the same order; a captured
  // graph stays valid.
  // GAACRT_CUDA_E8_SPLITS_PER_SM sets E8's (3, as many as its decode kernel is built to hold per
  // SM; at 64K, tg128 of the 8B shape, when each thread block still rotated its queries: 2 173
  // tok/s, 3 194). The kernel of launches with a prefill-sized sequence (kPrefill) holds two, as
  // BF16's and GAAC's kShared kernels do: such a launch's decode-sized sequences run their splits
  // in ~1.5 waves beside the prefill's row groups (slower, not wrong).
  const int32_t units = n_seqs * kv.n_head_kv;
  static const int e8_per_sm = [] {
    const char* e = std::getenv("GAACRT_CUDA_E8_SPLITS_PER_SM");
    return e ? std::max(1, std::min(8, std::atoi(e))) : 3;
  }();
  // BF16 and GAAC at head size 128: the kernel built for three thread blocks per SM (two stages,
  // GAAC's V decoded into K's tile; 168 registers); GAACRT_CUDA_ATTN_BLOCKS_PER_SM=2 the one for two
  // (three stages). One setting for both formats, so their splits and sums stay the same. H200, 8B
  // shape, tg128, one visit, 2 -> 3 (twice each): GAAC at 64K 162.3 / 161.2 -> 172.4 / 173.6 tok/s,
  // BF16 at 64K 206.9 / 207.1 -> 206.3 / 204.9, at depth 0 level; attention alone at 64K GAAC 129.2
  // -> 120.6 us, BF16 91.8 -> 94.7. (Three fit only while a GAAC tile's staging is at most ~3.7 KB,
  // an escape capacity up to ~816 bytes at 128 channels; beyond it two fit and the launch runs as
  // 1.5 waves: slower, not wrong.) test_cuda_model.py::test_cuda_gaac_head_128_is_bit_identical_to_bf16
  // covers both.
  static const int attn_blocks = [] {
    const char* e = std::getenv("GAACRT_CUDA_ATTN_BLOCKS_PER_SM");
    return e && e[0] == '2' ? 2 : 3;
  }();
  const int blocks = kD == 128 ? attn_blocks : 2;
  const int per_sm = e8 ? e8_per_sm : blocks;
  // No more splits than the cache's longest sequence has chunks of attn::kChunkBlocks blocks (the
  // rest would find no keys): bounded by the session's context, never by the current length.
  const int32_t max_chunks = std::max(1, (kv.max_blocks + attn::kChunkBlocks - 1) / attn::kChunkBlocks);
  const int32_t n_split =
      std::max(1, std::min({attn::kMaxSplits, max_chunks, per_sm * info_.multiprocessors / units}));
  uint32_t warp_bytes = 0;
  const size_t smem = e8 ? attn::e8_smem_bytes(kD, n_split)
                         : attn::smem_bytes(kD, gaac, kv.n_half, half_bytes, kv.head_dim_v, n_split, &warp_bytes,
                                            blocks);
  if (smem > (size_t)max_dynamic_smem(device_))
    throw Error("backend", "invalid_argument",
                strfmt("cuda attention: %zu bytes of shared memory needed (head dim %d, GAAC staging %u), the "
                       "device allows %d", smem, kv.head_dim_v, half_bytes, max_dynamic_smem(device_)));

  // Scratch: attention_lossy.cu's (lossy_bytes), then the partials.
  const size_t part_bytes =
      n_split > 1 ? (size_t)units * n_split * attn::kRowsPerGroup * attn::part_row_floats(kv.head_dim_v) * sizeof(float)
                  : 0;
  uint8_t* scr = static_cast<uint8_t*>(lossy_bytes + part_bytes ? scratch(lossy_bytes + part_bytes) : nullptr);
  float* part = nullptr;
  if (n_split > 1) {
    part = reinterpret_cast<float*>(scr + lossy_bytes);
    if (attn_counters_n_ < units) {  // arrival counters start at zero; the kernel leaves them so
      no_capture("growing the attention counters");
      ++epoch_;
      GAACRT_CUDA_CHECK(cudaStreamSynchronize(stream_));
      if (attn_counters_) cudaFree(attn_counters_);
      attn_counters_ = nullptr;
      attn_counters_n_ = 0;
      GAACRT_CUDA_CHECK(cudaMalloc(&attn_counters_, (size_t)units * sizeof(int32_t)));
      GAACRT_CUDA_CHECK(cudaMemsetAsync(attn_counters_, 0, (size_t)units * sizeof(int32_t), stream_));
      attn_counters_n_ = units;
    }
  }
  // E8: lossy::attention rotates the queries into the start of its scratch, and runs its own
  // kernel for any sequence of more than 16 rows unless the tensor-core kernel takes those too
  // (lossy::e8_prefill_on_mma).
  static_assert(attn::kRowsPerGroup == lossy::kRotatedRows, "E8's rotated query rows are its row group");
  const float* e8_qrot = e8 ? reinterpret_cast<const float*>(scr) : nullptr;
  if (e8)
    lossy::attention(kv, args, seqs, n_seqs, q, out, scr, info_.multiprocessors, max_dynamic_smem(device_), stream_,
                     true);
  // Prefill-sized sequences: a thread block per row group (n_split alone, sized for decode, gave
  // 512 tokens of an 8-kv-head layer about two warps per SM scheduler).
  const int64_t max_rows = (int64_t)std::max(args.max_q, 0) * (args.n_head / kv.n_head_kv);
  // Decode-sized launches (E8's always) run their grid kv-head fastest: the blocks go out in index
  // order, so the live splits (the first ones; a short context in a session sized for a long one
  // leaves the rest empty) spread over every multiprocessor before any takes a second.
  const bool head_fastest = e8 || (args.max_q > 0 && max_rows <= attn::kRowsPerGroup);
  // BF16 pages by bulk copy only for warps streaming at least this many blocks (kernels/attention_mma.cuh
  // run_rows says why); GAACRT_CUDA_BULK_MIN_BLOCKS sets it.
  static const int bulk_min = [] {
    const char* e = std::getenv("GAACRT_CUDA_BULK_MIN_BLOCKS");
    return e ? std::max(0, std::atoi(e)) : 8;
  }();
  // Decode splits' least length in chunks of 64 keys past one split's 256 keys
  // (KernelArgs::min_split_chunks): BF16 and GAAC share theirs (their sums keep one order: bit
  // identity), E8 has its own; GAACRT_CUDA_MIN_SPLIT_CHUNKS / GAACRT_CUDA_E8_MIN_SPLIT_CHUNKS set
  // them (1-64). 1, so that a short context's blocks spread over more thread blocks: with 4 (the
  // minimum before) a 2K context was 8 splits whose warps decoded 4 blocks each, one warp a
  // scheduler on half the SMs. H100, µs a layer back to back (bench/cuda_attention.py --kv
  // synthetic --ctx 512,2048,8192 --prefill 64 --lossy e8), 4 -> 1: BF16 9.0 / 9.6 / 19.6 -> 6.9 /
  // 10.3 / 17.2, GAAC 15.3 / 15.8 / 21.4 -> 9.6 / 11.8 / 19.1, E8 15.3-15.8 / 16.2 / 20.6-20.8 ->
  // 11.3-11.6 / 14.0-14.6 / 17.8-18.5; tg128 of the 8B shape at 4K GAAC 316.8-321.2 -> 334.7
  // tok/s, BF16 343.4-344.1 -> 344.2 (twenty-eighth session).
  auto min_chunks_from = [](const char* name) {
    const char* e = std::getenv(name);
    return e && e[0] ? std::max(1, std::min(64, std::atoi(e))) : attn::kMinSplitChunks;
  };
  static const int32_t min_chunks = min_chunks_from("GAACRT_CUDA_MIN_SPLIT_CHUNKS");
  static const int32_t e8_min_chunks = min_chunks_from("GAACRT_CUDA_E8_MIN_SPLIT_CHUNKS");
  const char* pw = std::getenv("GAACRT_CUDA_PREFILL_WIDE");  // read on every call; below
  // E8 with its prefill-sized sequences on the tensor cores too: enough splits for their row
  // groups (lossy::e8_prefill_on_mma), still kv-head fastest; 64 rows a group
  // (attention_e8_wide.cuh) unless GAACRT_CUDA_PREFILL_WIDE=0.
  const int32_t rot_rows = e8 ? lossy::e8_rot_rows(kv, args, n_seqs) : lossy::kRotatedRows;
  const bool e8_prefill = e8 && rot_rows > attn::kRowsPerGroup, e8_wide = e8_prefill && !(pw && pw[0] == '0');
  const int32_t e8_rows = e8_wide ? attn::kWideRows : attn::kRowsPerGroup;
  const int32_t e8_y = e8_prefill ? attention_grid_x(n_split, max_rows, attn::kRowsPerGroup, e8_rows) : n_split;
  // A prefill-sized sequence: the kernel whose thread blocks copy (and GAAC's decode) each block
  // once for their four warps (attention_prefill.cuh), where its ring fits the shared memory sized
  // above; GAACRT_CUDA_PREFILL_SHARED=0 (read on every call) keeps a copy per warp. Its row groups
  // are 64 rows (attention_wide.cuh) at head sizes up to 128 unless GAACRT_CUDA_PREFILL_WIDE=0
  // (read on every call) asks for 16; their steps below.
  static_assert(attn::kWarps == 4, "run_rows_shared: a row group is four warps' M-tiles");
  const char* ps = std::getenv("GAACRT_CUDA_PREFILL_SHARED");
  const uint32_t kv_bytes = gaac ? kv.n_half * half_bytes : (uint32_t)(KV_BLOCK_TOKENS * (kD + 8) * 2);
  const bool shared = !e8 && !head_fastest && max_rows > attn::kRowsPerGroup && !(ps && ps[0] == '0') &&
                      attn::shared_ring_bytes(kD, gaac, blocks, kv_bytes) <= (size_t)attn::kWarps * warp_bytes;
  const bool wide = shared && kD <= KV_TILE_MAX_DIM && !(pw && pw[0] == '0');
  // The wide row groups in steps of two blocks with two bf16 parts of the queries and weights
  // (attention_wide.cuh prefill_wide; kernels of their own, attention_prefill_pairs_*.cu): the
  // default where they are built (head size 128, the three-block build) and their ring fits;
  // GAACRT_CUDA_PREFILL_WIDE=1 keeps one-block steps with three parts. H100, 8B shape, pp512 after
  // 32K (fifteenth session, two rounds): BF16 3,476 / 3,483 tok/s against 3,016 / 3,012, GAAC
  // 2,344 / 2,344 against 2,331 / 2,324 (GAAC's own kernels: a GAAC prefill now goes through BF16
  // pages, attention_gaac_expand.cu, unless that declines); at depth 0 level. Two-block steps with
  // three parts made BF16 3,143 / 3,141 and GAAC 2,188 / 2,194 (removed); two parts alone, BF16
  // +0.7% (twelfth).
  const bool wide_pairs = wide && !(pw && pw[0] == '1') && kD == 128 && blocks == 3 &&
                          attn::shared_ring_bytes(kD, gaac, blocks, kv_bytes, 2) <= (size_t)attn::kWarps * warp_bytes;
  // Hopper (compute capability 9.0, in a build with sm_90a code): the wide row groups on the
  // warpgroup mma (attention_wide.cuh) for BF16 pages of head size 128; GAACRT_CUDA_PREFILL_WGMMA=0
  // (read on every call) keeps mma.sync. Its steps: four blocks (wg_block_math_flat: 64 keys
  // between two barriers, a ring of twelve stages, ~102 KiB, to which the launch's shared memory
  // grows: two thread blocks a multiprocessor still) where the launch's longest sequence reaches
  // kWgFourBlockLen tokens, else two with the step before held (wg_block_math: eight stages, inside
  // the shared memory sized above); =4 or =2 asks for either everywhere. H100, pp512 of the 8B
  // shape, four against two blocks (nineteenth session): after 32K 4,365-4,414 against 4,252-4,276
  // tok/s, after 8K 7,293 against 7,262, after 4K 8,175 against 8,240, at depth 0 9,500-9,568
  // against 9,680-9,821 (a short stream ends in a padded step and fills a deeper ring first). The
  // two-block steps are the same k16 products as mma.sync's in the same order (on an H100,
  // mma.sync's bits); the four-block steps sum other ones. Either way a BF16 launch takes this
  // kernel only where a GAAC launch of the same shape would run on it too, through its expanded
  // pages (expansion_plan), so the two caches keep one kernel and one set of bits (but where the
  // expansion's device allocation fails: then GAAC runs its own kernels).
  constexpr int32_t kWgFourBlockLen = 8192;
  const char* pg = std::getenv("GAACRT_CUDA_PREFILL_WGMMA");
  const int wg_steps = pg && (pg[0] == '2' || pg[0] == '4') ? pg[0] - '0' : (args.max_len >= kWgFourBlockLen ? 4 : 2);
  const size_t wgmma_ring = attn::shared_ring_bytes(kD, false, blocks, kv_bytes, wg_steps, wg_steps == 2);
  const size_t wgmma_room = wg_steps == 2 ? (size_t)attn::kWarps * warp_bytes : (size_t)max_dynamic_smem(device_);
  const bool wgmma = kHaveWgmma && wide_pairs && !gaac && td == 128 && kv.n_half == 1 && info_.cc_major == 9 &&
                     info_.cc_minor == 0 && !(pg && pg[0] == '0') && wgmma_ring <= wgmma_room &&
                     expansion_plan(kv, args, n_seqs).bytes > 0;
  const dim3 grid = head_fastest ? dim3(kv.n_head_kv, e8_y, n_seqs)
                                 : dim3(attention_grid_x(n_split, max_rows, attn::kRowsPerGroup,
                                                         wide ? attn::kWideRows : attn::kRowsPerGroup),
                                        kv.n_head_kv, n_seqs);
  AttnTimeline timeline((int64_t)grid.x * grid.y * grid.z, capturing_);
  const attn::KernelArgs P{kv,         args,       seqs,    q,          out,         part,     attn_counters_,
                           n_split,    half_bytes, staging, warp_bytes, dev_errors_, bulk_min, head_fastest ? 1 : 0,
                           timeline.stamps(), e8_qrot, rot_rows, wide || e8_wide ? 1 : 0,
                           e8 ? e8_min_chunks : min_chunks};
  if (e8)
    attn::launch_attention_e8(kD, P, grid, smem, stream_, device_, e8_prefill);
  else if (wgmma)
    attn::launch_attention_prefill_wgmma_bf16(P, grid, std::max(smem, wgmma_ring), stream_, device_, wg_steps);
  else if (wide_pairs)
    (gaac ? attn::launch_attention_prefill_pairs_gaac : attn::launch_attention_prefill_pairs_bf16)(P, grid, smem, stream_,
                                                                                            device_);
  else if (shared)
    (gaac ? attn::launch_attention_prefill_gaac : attn::launch_attention_prefill_bf16)(kD, P, grid, smem, stream_,
                                                                                      device_, blocks);
  else if (gaac)
    attn::launch_attention_gaac(kD, P, grid, smem, stream_, device_, blocks);
  else
    attn::launch_attention_bf16(kD, P, grid, smem, stream_, device_, blocks);
  GAACRT_CUDA_CHECK(cudaGetLastError());
  timeline.write(stream_, e8 ? "e8" : (gaac ? "gaac" : "bf16"), grid, n_split);
}

}  // namespace gaacrt::cuda
