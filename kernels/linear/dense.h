// Host side of the dense fp16 path (WeightFormat::kDense) shared by the dispatcher and both families' decode entry
// points (linear_dense.cu): the argument checks of the decode kernels and the GEMM path, M >= 65 (cuBLAS on the
// fp16 weight, then per-row channel scales). Tested through tests/kernels/linear_gpu_test.cpp.
#pragma once

#include "linear/linear.h"

namespace voltserve::kernels::dense {

// What a dense decode launch needs beyond the dispatcher's checks (the families' entry points are also called
// directly): a dense weight of family `family`, k % 16 == 0, 16-byte aligned weight and x, 1 <= m <= 16, and a
// warps-per-block choice (0, 4, 8 or 16).
KernelStatus check_decode(const PackedWeightView& w, const LinearArgs& a, KernelFamily family, int warps);

// y = x · W^T by cuBLAS (fp16 x fp16, fp32 accumulation) on the weight as stored, any m; then y[t, r] *= c[r] if the
// weight has channel scales. Needs a.cublas_handle; no workspace. x row-major.
KernelStatus gemm_cublas(const PackedWeightView& w, const LinearArgs& a);

}  // namespace voltserve::kernels::dense
