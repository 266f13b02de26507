// matvec_q8_gate_up.cu — the decode FFN's gate/up matvec (kernels/matvec_gate_up.cuh): the host
// entry point and the launch that reads an already quantized x.
#include "kernels/matvec_gate_up.cuh"

namespace gaacrt::cuda {
using namespace matvec;

template void matvec::launch_gate_up<false>(const WeightView&, const WeightView&, Activation, float*, const Q8Act&,
                                            const NormX&, cudaStream_t);

bool matvec_q8_gate_up(const WeightView& gate, const WeightView& up, Activation act, float* h, const Q8Act& a,
                       cudaStream_t stream, const NormX* norm) {
  if (gate.type != up.type || gate.layout != up.layout || gate.n_rows != up.n_rows ||
      (act != Activation::SiLU && act != Activation::GeluTanh))
    return false;
  check_q8(gate, a.n_tok, a.n_cols, "matvec_q8_gate_up");
  check_q8(up, a.n_tok, a.n_cols, "matvec_q8_gate_up");
  if (norm && !matvec_q8_norm_fits(a.n_tok, a.n_cols, *norm))
    throw Error("backend", "invalid_argument", "cuda matvec_q8_gate_up: the norm cannot run in every thread block here");
  if (norm) launch_gate_up<true>(gate, up, act, h, a, *norm, stream);
  else launch_gate_up<false>(gate, up, act, h, a, NormX{}, stream);
  return true;
}

}  // namespace gaacrt::cuda
