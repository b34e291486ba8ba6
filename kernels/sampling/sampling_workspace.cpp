// sampling::workspace_bytes (sampling.h) on the host, without CUDA: the CUDA backend sizes its scratch with it and
// the memory plan (engine/plan) counts it. The layout itself is sampling_math.h's workspace_layout, which the
// device code uses; tests/kernels/sampling_gpu_test.cpp runs the kernels on workspaces of exactly this size.
#include "sampling/sampling.h"
#include "sampling/sampling_math.h"

namespace voltserve::kernels::sampling {

size_t workspace_bytes(int32_t n_rows, int32_t n_vocab_real) {
  if (n_rows <= 0 || n_vocab_real <= 0) return 0;
  return workspace_layout(n_rows, n_vocab_real).total;
}

}  // namespace voltserve::kernels::sampling
