// matvec_q8_gate_up_norm.cu — the gate/up matvec (kernels/matvec_gate_up.cuh) with the norm and
// quantization of x inside its launch (matvec_q8_norm_fits).
#include "kernels/matvec_gate_up.cuh"

namespace gaacrt::cuda::matvec {

template void launch_gate_up<true>(const WeightView&, const WeightView&, Activation, float*, const Q8Act&,
                                   const NormX&, cudaStream_t);

}  // namespace gaacrt::cuda::matvec
