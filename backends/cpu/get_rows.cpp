// get_rows.cpp — embedding lookup: dequantize rows of token_embd, times the embedding scale.
#include "dequantize.h"
#include "ops.h"

namespace gaacrt::cpu {

void get_rows(const WeightView& emb, const int32_t* ids, int64_t n, float scale, float* out, ThreadPool& pool) {
  require_gguf_layout(emb, "cpu get_rows");
  auto body = [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      float* row = out + i * emb.n_cols;
      dequantize_row(emb.type, static_cast<const uint8_t*>(emb.data) + (size_t)ids[i] * emb.row_stride, row, emb.n_cols);
      if (scale != 1.f)
        for (int64_t c = 0; c < emb.n_cols; ++c) row[c] *= scale;
    }
  };
  // A decode step's few rows take about a microsecond each: less than waking the pool.
  if (n < 16) body(0, n);
  else pool.parallel_for(n, body);
}

}  // namespace gaacrt::cpu
