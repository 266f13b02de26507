// matvec.cpp — TEMPORARY float path (dequantize a row, fp32 dot); replaced by the
// quantized-activation kernels.
#include "matvec.h"

#include <vector>

#include "dequantize.h"

namespace gaacrt::cpu {

void matmul(const WeightView& w, const float* x, int64_t n_tok, float* y, ThreadPool& pool, Isa) {
  pool.parallel_for(w.n_rows, [&](int64_t r0, int64_t r1) {
    std::vector<float> row(static_cast<size_t>(w.n_cols));
    for (int64_t r = r0; r < r1; ++r) {
      dequantize_row(w.type, static_cast<const uint8_t*>(w.data) + r * w.row_stride, row.data(), w.n_cols);
      for (int64_t t = 0; t < n_tok; ++t) {
        float acc = 0;
        for (int64_t c = 0; c < w.n_cols; ++c) acc += row[c] * x[t * w.n_cols + c];
        y[t * w.n_rows + r] = acc;
      }
    }
  });
}

}  // namespace gaacrt::cpu
