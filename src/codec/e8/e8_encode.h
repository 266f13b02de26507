// e8_encode.h — exact nearest-codeword search of the E8P12 codebook for one 8-dim block
// (portable: C++, CUDA and MSL include this file, so a GPU encode kernel runs the same code).
//
// Follows shared/spec/e8.md §4 ("sorted-type search", about 36 candidates per branch, and the
// index reconstruction). The result equals brute force over all 65,536 codewords except on exact
// ties (measure zero); tests/test_e8_encoder.py checks that on thousands of blocks.
//
// Why it works, in short (the spec has the exchange arguments):
//  * G = (U + 1/4) u (U - 1/4): the best codeword is the better of beta + NN_U(x - beta) for
//    beta = +1/4 and -1/4 ("two shifted branches"; ties go to +1/4).
//  * NN_U(y): fold signs (t = |y|, p = parity of the negative count). The answer is sgn * v with
//    |v| a prototype and at most one negative entry, needed exactly when sigma(|v|) + p is odd;
//    it then sits where a_i t_i is smallest and costs 4 min_i a_i t_i.
//  * The 227 ball prototypes are permutation-closed, so by the rearrangement inequality only the
//    descending arrangement of 7 "types" (m entries 5/2, k entries 3/2, rest 1/2) can win; the 29
//    pads are scored one by one. Scores are 2<t,v> - |v|^2 (larger is nearer), written with the
//    prefix sums P_r of the sorted t: 2 sum a_r t_(r) = P_8 + 2 P_(m+k) + 2 P_m.
//  * Cost: each branch is searched (e8_branch_search: sort, 7 type scores, the pads only when
//    their bound 2 P_5 - 12 beats the best type, ~10 % of blocks); only the better branch is
//    turned into a code (e8_branch_build: placement, prototype rank, sign byte).
#pragma once
#include "e8_codebook.h"

namespace gaacrt {

struct E8Encoded {
  uint32_t code;  // 16-bit code (§2)
  float err;      // squared distance |x - g(code)|^2
};

// Half-position mask (bit i set where the pad has 1/2) of pad p, rows 227 + p (§1, QuIP#'s list).
GAACRT_HD uint32_t e8_pad_mask(int32_t p) {
  const uint8_t masks[E8_N_PADS] = {0x0E, 0x0D, 0x0B, 0x07, 0xC8, 0xA8, 0x98, 0x68, 0x58, 0x38,
                                    0xC4, 0xA4, 0x94, 0x64, 0x54, 0x34, 0xC2, 0xA2, 0x92, 0x62,
                                    0x52, 0x31, 0xC1, 0xA1, 0x91, 0x61, 0x51, 0x13, 0x8C};
  return masks[p];
}

// Row of a ball prototype from its digits (a_i = digit_i + 1/2, digit i in bits 2i..2i+1):
// its rank in lexicographic order among the 227 vectors of cost sum <= 4, where a coordinate's
// cost is (a_i^2 - 1/4) / 2 = 0, 1, 3 for the digits 0, 1, 2. count[r][b] = number of length-r
// digit strings of cost <= b; the rank adds, at each position, the completions of every smaller
// digit that still fits the budget.
GAACRT_HD uint32_t e8_ball_rank(uint32_t digits) {
  const uint8_t count[8][5] = {{1, 1, 1, 1, 1},  {1, 2, 2, 3, 3},    {1, 3, 4, 6, 8},    {1, 4, 7, 11, 17},
                               {1, 5, 11, 19, 32}, {1, 6, 16, 31, 56}, {1, 7, 22, 48, 93}, {1, 8, 29, 71, 148}};
  const int32_t cost[3] = {0, 1, 3};
  int32_t budget = 4;
  uint32_t rank = 0;
  for (int32_t i = 0; i < E8_BLOCK; ++i) {
    const int32_t dgt = (int32_t)((digits >> (2 * i)) & 3u);
    for (int32_t smaller = 0; smaller < dgt; ++smaller) {
      const int32_t left = budget - cost[smaller];
      if (left >= 0) rank += count[7 - i][left];
    }
    budget -= cost[dgt];
  }
  return rank;
}

// What the search of one branch leaves for the build: the folded input, its order, the winner.
struct E8BranchSearch {
  float t[E8_BLOCK];      // |y|
  int32_t ord[E8_BLOCK];  // indices of t, descending
  uint32_t negmask, p;    // signs of y, and the parity of their count
  int32_t cand;           // winner: type 0..6, or 7 + pad index
  float err;              // |y - u|^2 from the winner's score: |t|^2 - (2<t,v> - |v|^2)
};

// Type c = 0..6 is (k, m) = (0,0) (1,0) (2,0) (3,0) (4,0) (0,1) (1,1): k entries 3/2, m entries 5/2.
GAACRT_HD int32_t e8_type_k(int32_t c) { return c < 5 ? c : c - 5; }
GAACRT_HD int32_t e8_type_m(int32_t c) { return c < 5 ? 0 : 1; }

// Search phase of one branch: score the 7 types and (when they can win) the 29 pads.
GAACRT_HD E8BranchSearch e8_branch_search(E8Vec8 y) {
  E8BranchSearch out;
  uint32_t negmask = 0, p = 0;
  float tt = 0.0f;
  for (int32_t i = 0; i < E8_BLOCK; ++i) {
    const bool neg = y.v[i] < 0.0f;
    out.t[i] = neg ? -y.v[i] : y.v[i];
    tt += out.t[i] * out.t[i];
    negmask |= (uint32_t)neg << i;
    p ^= (uint32_t)neg;
  }
  // Descending order of t: an optimal 19-comparator sorting network on (value, index) pairs,
  // branch-free (each step is a compare and two selects). Equal values may come out in either
  // order, which changes no score.
  float ts[E8_BLOCK];
  for (int32_t i = 0; i < E8_BLOCK; ++i) { ts[i] = out.t[i]; out.ord[i] = i; }
  const uint8_t net[19][2] = {{0, 2}, {1, 3}, {4, 6}, {5, 7}, {0, 4}, {1, 5}, {2, 6}, {3, 7}, {0, 1}, {2, 3},
                              {4, 5}, {6, 7}, {2, 4}, {3, 5}, {1, 4}, {3, 6}, {1, 2}, {3, 4}, {5, 6}};
  for (int32_t c = 0; c < 19; ++c) {
    const int32_t a = net[c][0], b = net[c][1];
    const float ta = ts[a], tb = ts[b];
    const int32_t oa = out.ord[a], ob = out.ord[b];
    const bool sw = tb > ta;
    ts[a] = sw ? tb : ta; ts[b] = sw ? ta : tb;
    out.ord[a] = sw ? ob : oa; out.ord[b] = sw ? oa : ob;
  }
  float P[E8_BLOCK + 1];
  P[0] = 0.0f;
  for (int32_t r = 0; r < E8_BLOCK; ++r) P[r + 1] = P[r] + ts[r];
  const float tmin = ts[E8_BLOCK - 1];

  // Candidates: 7 types, then 29 pads. Scores below are 2<t,v> - |v|^2 - P_8.
  float best = -3.0e38f;
  int32_t best_cand = 0;
  for (int32_t c = 0; c < 7; ++c) {
    const int32_t k = e8_type_k(c), m = e8_type_m(c);
    const uint32_t f = ((uint32_t)k + p) & 1u;
    const float s = 2.0f * P[m + k] + 2.0f * P[m] - (float)(2 + 2 * k + 6 * m) - (f ? 2.0f * tmin : 0.0f);
    if (s > best) { best = s; best_cand = c; }
  }
  const uint32_t f_pad = 1u - p;  // every pad has sigma = 9 (odd)
  // A pad's score is at most 2 P_8 - 2 h - 12 with h >= the sum of the 3 smallest t, i.e. at most
  // 2 P_5 - 12: when no pad can beat the best type (ties keep the type), skip all 29 (exact).
  const bool pads_can_win = 2.0f * P[5] - 12.0f > best;
  for (int32_t q = 0; pads_can_win && q < E8_N_PADS; ++q) {
    const uint32_t mask = e8_pad_mask(q);
    float h = 0.0f, mn = 3.0e38f;
    for (int32_t i = 0; i < E8_BLOCK; ++i) {
      const bool half = (mask >> i) & 1u;
      if (half) h += out.t[i];
      const float at = half ? 0.5f * out.t[i] : 1.5f * out.t[i];
      if (at < mn) mn = at;
    }
    const float s = 2.0f * P[E8_BLOCK] - 2.0f * h - 12.0f - (f_pad ? 4.0f * mn : 0.0f);
    if (s > best) { best = s; best_cand = 7 + q; }
  }

  out.negmask = negmask;
  out.p = p;
  out.cand = best_cand;
  out.err = tt - (P[E8_BLOCK] + best);
  return out;
}

// Build phase: the code of the search's winner (shift bit set for beta = -1/4) and the error
// |y - u|^2 recomputed from the point itself.
GAACRT_HD E8Encoded e8_branch_build(E8BranchSearch sr, E8Vec8 y, bool minus_quarter) {
  const uint32_t p = sr.p, negmask = sr.negmask;
  const int32_t best_cand = sr.cand;

  // Build v (|v| x2 per dimension, and which entry is negated), then u = sgn * v.
  int32_t ax2[E8_BLOCK];
  uint32_t proto, vneg = 0;
  bool sigma_odd;
  if (best_cand < 7) {
    const int32_t k = e8_type_k(best_cand), m = e8_type_m(best_cand);
    uint32_t digits = 0;
    for (int32_t j = 0; j < E8_BLOCK; ++j) {
      const int32_t dgt = j < m ? 2 : (j < m + k ? 1 : 0);
      ax2[sr.ord[j]] = 2 * dgt + 1;
      digits |= (uint32_t)dgt << (2 * sr.ord[j]);
    }
    proto = e8_ball_rank(digits);
    sigma_odd = (k & 1) != 0;
    if (((uint32_t)k + p) & 1u) vneg = 1u << sr.ord[E8_BLOCK - 1];
  } else {
    const int32_t q = best_cand - 7;
    const uint32_t mask = e8_pad_mask(q);
    int32_t arg = 0;
    float mn = 3.0e38f;
    for (int32_t i = 0; i < E8_BLOCK; ++i) {
      ax2[i] = ((mask >> i) & 1u) ? 1 : 3;
      const float at = 0.5f * (float)ax2[i] * sr.t[i];
      if (at < mn) { mn = at; arg = i; }
    }
    proto = (uint32_t)(E8_N_PROTO_BALL + q);
    sigma_odd = true;
    if (1u - p) vneg = 1u << arg;  // f = 1 - p for every pad
  }

  // Flip bits relative to a' (coordinate 7 of a' is already negative when sigma is odd), in the
  // bit order of the sign byte; the error against u.
  const uint32_t uneg = negmask ^ vneg;
  uint32_t s = 0;
  float err = 0.0f;
  for (int32_t i = 0; i < E8_BLOCK; ++i) {
    const uint32_t ui_neg = (uneg >> i) & 1u;
    const uint32_t phi = ui_neg ^ (uint32_t)(i == 7 && sigma_odd);
    s |= phi << e8_dim2bit(i);
    const float u = ui_neg ? -0.5f * (float)ax2[i] : 0.5f * (float)ax2[i];
    const float dlt = y.v[i] - u;
    err += dlt * dlt;
  }
  if (minus_quarter) s ^= 1u;  // odd parity selects the -1/4 shift
  E8Encoded r;
  r.code = (proto << 8) | s;
  r.err = err;
  return r;
}

// One branch: nearest point of U to y (NN_U), as a code whose shift bit is set for beta = -1/4.
GAACRT_HD E8Encoded e8_nearest_u(E8Vec8 y, bool minus_quarter) {
  return e8_branch_build(e8_branch_search(y), y, minus_quarter);
}

// Nearest codeword of x (§4): the better branch, ties to +1/4.
GAACRT_HD E8Encoded e8_encode_block(E8Vec8 x) {
  E8Vec8 yp, ym;
  for (int32_t i = 0; i < E8_BLOCK; ++i) {
    yp.v[i] = x.v[i] - 0.25f;
    ym.v[i] = x.v[i] + 0.25f;
  }
  // Both branches are searched; only the better one is built (ties to +1/4).
  const E8BranchSearch plus = e8_branch_search(yp);
  const E8BranchSearch minus = e8_branch_search(ym);
  return minus.err < plus.err ? e8_branch_build(minus, ym, true) : e8_branch_build(plus, yp, false);
}

}  // namespace gaacrt
