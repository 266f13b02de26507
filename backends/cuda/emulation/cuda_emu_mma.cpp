// cuda_emu_mma.cpp — the CUDA emulation's matrix warp functions: ldmatrix, movmatrix and mma.sync
// (bf16 / fp16 and int8), each a warp collective (cuda_emu.cpp) whose resolver turns the 32 lanes'
// fragments into matrices, as the PTX ISA lays them out, and back. tests/cuda_emu/probe.cu pins
// the layouts down.
#include "cuda_runtime.h"

#include <cstring>

#include "common/half.h"

namespace gaacrt_cuda_emu {

namespace {
uint16_t ld16(const void* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}
const char* resolve_ldmatrix(Slot* s, uint32_t part) {
  if (part != 0xFFFFFFFFu) return "ldmatrix needs all 32 lanes";
  const bool trans = s[0].in[0] != 0;
  for (unsigned t = 0; t < 32; ++t)
    if ((uintptr_t)s[t].ptr % 16) return "ldmatrix row address not 16-byte aligned";
  for (unsigned t = 0; t < 32; ++t)
    for (unsigned i = 0; i < 4; ++i) {
      const uint8_t* r0;
      const uint8_t* r1;
      size_t off;
      if (!trans) {
        r0 = r1 = static_cast<const uint8_t*>(s[8 * i + t / 4].ptr);
        off = 4 * (t % 4);
        s[t].out[i] = (uint32_t)ld16(r0 + off) | ((uint32_t)ld16(r1 + off + 2) << 16);
      } else {
        r0 = static_cast<const uint8_t*>(s[8 * i + 2 * (t % 4)].ptr);
        r1 = static_cast<const uint8_t*>(s[8 * i + 2 * (t % 4) + 1].ptr);
        off = 2 * (t / 4);
        s[t].out[i] = (uint32_t)ld16(r0 + off) | ((uint32_t)ld16(r1 + off) << 16);
      }
    }
  return nullptr;
}

// movmatrix.trans: lane t's word holds elements (row t / 4, cols 2 (t % 4), +1) of an 8x8 matrix
// of 16-bit values; it receives the same positions of the transpose.
const char* resolve_movmatrix(Slot* s, uint32_t part) {
  if (part != 0xFFFFFFFFu) return "movmatrix needs all 32 lanes";
  auto at = [&](unsigned row, unsigned col) { return (s[4 * row + col / 2].in[0] >> (16 * (col % 2))) & 0xFFFFu; };
  for (unsigned t = 0; t < 32; ++t) s[t].out[0] = at(2 * (t % 4), t / 4) | at(2 * (t % 4) + 1, t / 4) << 16;
  return nullptr;
}

// A 16-bit mma input as a float: bf16, or fp16 (mma_f16), by the library's own conversions.
float half_bits_to_f32(uint16_t h, bool fp16) { return fp16 ? gaacrt::fp16_to_f32(h) : gaacrt::bf16_to_f32(h); }

// Fragment positions (g = lane / 4, c = lane % 4) of m16n8k16 with 16-bit inputs.
const char* resolve_mma16(Slot* s, uint32_t part) {
  if (part != 0xFFFFFFFFu) return "mma.sync needs all 32 lanes";
  const bool fp16 = s[0].in[10] != 0;
  double A[16][16], B[16][8];
  float C[16][8];
  for (unsigned l = 0; l < 32; ++l) {
    const unsigned g = l / 4, c = 2 * (l % 4);
    auto lo = [&](uint32_t w) { return half_bits_to_f32((uint16_t)w, fp16); };
    auto hi = [&](uint32_t w) { return half_bits_to_f32((uint16_t)(w >> 16), fp16); };
    const uint32_t* a = s[l].in;
    A[g][c] = lo(a[0]), A[g][c + 1] = hi(a[0]);
    A[g + 8][c] = lo(a[1]), A[g + 8][c + 1] = hi(a[1]);
    A[g][c + 8] = lo(a[2]), A[g][c + 9] = hi(a[2]);
    A[g + 8][c + 8] = lo(a[3]), A[g + 8][c + 9] = hi(a[3]);
    B[c][g] = lo(a[4]), B[c + 1][g] = hi(a[4]);
    B[c + 8][g] = lo(a[5]), B[c + 9][g] = hi(a[5]);
    C[g][c] = bits<float>(a[6]), C[g][c + 1] = bits<float>(a[7]);
    C[g + 8][c] = bits<float>(a[8]), C[g + 8][c + 1] = bits<float>(a[9]);
  }
  for (unsigned l = 0; l < 32; ++l) {
    const unsigned g = l / 4, c = 2 * (l % 4);
    const unsigned rows[4] = {g, g, g + 8, g + 8}, cols[4] = {c, c + 1, c, c + 1};
    for (int x = 0; x < 4; ++x) {
      double acc = C[rows[x]][cols[x]];
      for (int k = 0; k < 16; ++k) acc += A[rows[x]][k] * B[k][cols[x]];
      s[l].out[x] = bits<uint32_t>((float)acc);
    }
  }
  return nullptr;
}

// m16n8k32 / m16n8k16 with int8 inputs (4 per register) and int32 accumulators (wrapping).
// The operands are widened to int16, B stored transposed, so each output is a contiguous dot
// product the compiler turns into pmaddwd; a sum of 32 products of int8 by (u)int8 stays within
// int32 (at most 32 * 128 * 255), so it is exact, as the tensor cores' is, and only the add to C
// wraps. (The emulated prefill matmul spent ~45% of a whole-model test in this function with
// int64 sums over B's columns.)
template <int K>
void mma8_products(const int16_t (&A)[16][32], const int16_t (&Bt)[8][32], int32_t (&P)[16][8]) {
  for (int r = 0; r < 16; ++r)
    for (int c = 0; c < 8; ++c) {
      int32_t acc = 0;
      for (int k = 0; k < K; ++k) acc += (int32_t)A[r][k] * Bt[c][k];
      P[r][c] = acc;
    }
}

const char* resolve_mma8(Slot* s, uint32_t part) {
  if (part != 0xFFFFFFFFu) return "mma.sync needs all 32 lanes";
  const int K = (int)(s[0].in[10] & 0xFF);
  const bool bu = (s[0].in[10] >> 8) & 1u;
  if (K != 16 && K != 32) return "int8 mma.sync is m16n8k16 or m16n8k32";
  int16_t A[16][32], Bt[8][32];
  int32_t P[16][8];
  auto sb = [](uint32_t w, int k) { return (int16_t)(int8_t)(w >> (8 * k)); };
  auto ub = [](uint32_t w, int k) { return (int16_t)((w >> (8 * k)) & 0xFFu); };
  for (unsigned l = 0; l < 32; ++l) {
    const unsigned g = l / 4, c = 4 * (l % 4);
    const uint32_t* a = s[l].in;
    for (int k = 0; k < 4; ++k) {
      A[g][c + k] = sb(a[0], k);
      A[g + 8][c + k] = sb(a[1], k);
      Bt[g][c + k] = bu ? ub(a[4], k) : sb(a[4], k);
      if (K == 32) {
        A[g][16 + c + k] = sb(a[2], k);
        A[g + 8][16 + c + k] = sb(a[3], k);
        Bt[g][16 + c + k] = bu ? ub(a[5], k) : sb(a[5], k);
      }
    }
  }
  if (K == 32)
    mma8_products<32>(A, Bt, P);
  else
    mma8_products<16>(A, Bt, P);
  for (unsigned l = 0; l < 32; ++l) {
    const unsigned g = l / 4, c = 2 * (l % 4);
    const uint32_t* a = s[l].in;
    s[l].out[0] = a[6] + (uint32_t)P[g][c];
    s[l].out[1] = a[7] + (uint32_t)P[g][c + 1];
    s[l].out[2] = a[8] + (uint32_t)P[g + 8][c];
    s[l].out[3] = a[9] + (uint32_t)P[g + 8][c + 1];
  }
  return nullptr;
}
}  // namespace

void ldmatrix_x4(uint32_t r[4], const void* p, bool trans, const char* file, int line) {
  Slot s{};
  s.ptr = p;
  s.in[0] = trans;
  warp_collective(&resolve_ldmatrix, 0xFFFFFFFFu, s, file, line);
  for (int i = 0; i < 4; ++i) r[i] = s.out[i];
}

uint32_t movmatrix_trans(uint32_t x, const char* file, int line) {
  Slot s{};
  s.in[0] = x;
  warp_collective(&resolve_movmatrix, 0xFFFFFFFFu, s, file, line);
  return s.out[0];
}

void mma_bf16(float d[4], const uint32_t a[4], uint32_t b0, uint32_t b1, bool fp16, const char* file, int line) {
  Slot s{};
  for (int i = 0; i < 4; ++i) s.in[i] = a[i], s.in[6 + i] = bits<uint32_t>(d[i]);
  s.in[4] = b0;
  s.in[5] = b1;
  s.in[10] = fp16;
  warp_collective(&resolve_mma16, 0xFFFFFFFFu, s, file, line);
  for (int i = 0; i < 4; ++i) d[i] = bits<float>(s.out[i]);
}

void mma_s8(int d[4], const uint32_t* a, uint32_t b0, uint32_t b1, int k, bool b_unsigned, const char* file, int line) {
  Slot s{};
  s.in[0] = a[0];
  s.in[1] = a[1];
  if (k == 32) s.in[2] = a[2], s.in[3] = a[3];
  s.in[4] = b0;
  s.in[5] = b1;
  for (int i = 0; i < 4; ++i) s.in[6 + i] = (uint32_t)d[i];
  s.in[10] = (uint32_t)k | ((uint32_t)b_unsigned << 8);
  warp_collective(&resolve_mma8, 0xFFFFFFFFu, s, file, line);
  for (int i = 0; i < 4; ++i) d[i] = (int)s.out[i];
}

}  // namespace gaacrt_cuda_emu
