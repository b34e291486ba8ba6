// Dense fp16 weights (WeightFormat::kDense) outside the decode kernels: the checks shared by both families' decode
// entry points, and the GEMM path (M >= 65): one cuBLAS fp16 GEMM straight on the row-major weight (no
// dequantization, no workspace), followed by a per-row multiply when the weight carries channel scales. Portable:
// no arch-specific instructions (scripts/check-sm70.sh assembles it for sm_70). Tested by tests/kernels/linear_gpu_test.cpp.
#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "linear/dense.h"
#include "linear/dense_kmap.h"

namespace voltserve::kernels::dense {
namespace {

// y[t, r] *= c[r] over y [m, n] with rows ldy elements apart (fp32, or fp16 rounded once more). Grid-stride, one
// element per step.
__global__ void scale_rows_kernel(void* y, bool y_f32, int64_t total, int64_t n, int64_t ldy, const float* c) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += stride) {
    const int64_t at = (i / n) * ldy + i % n;
    const float s = c[i % n];
    if (y_f32) {
      static_cast<float*>(y)[at] *= s;
    } else {
      __half* h = static_cast<__half*>(y) + at;
      *h = __float2half_rn(__half2float(*h) * s);
    }
  }
}

}  // namespace

KernelStatus check_decode(const PackedWeightView& w, const LinearArgs& a, KernelFamily family, int warps) {
  if (w.format != WeightFormat::kDense) return VS_KERNEL_FAIL(kBadArgument, "linear_dense_decode: weight is not dense");
  if (w.family != family) return VS_KERNEL_FAIL(kBadArgument, "linear_dense_decode: weight view names the other family");
  if (w.n <= 0 || w.k <= 0 || w.k % 16 != 0) {
    return VS_KERNEL_FAIL(kBadShape, "linear_dense_decode: n must be positive and k a positive multiple of 16");
  }
  if (w.n > (int64_t{1} << 30) || w.k > (int64_t{1} << 24)) return VS_KERNEL_FAIL(kBadShape, "linear_dense_decode: n or k too large");
  if (w.codes == nullptr || (reinterpret_cast<uintptr_t>(w.codes) & 15) != 0) {
    return VS_KERNEL_FAIL(kBadArgument, "linear_dense_decode: the fp16 weight must be non-null and 16-byte aligned");
  }
  if (a.x == nullptr || a.y == nullptr || (reinterpret_cast<uintptr_t>(a.x) & 15) != 0) {
    return VS_KERNEL_FAIL(kBadArgument, "linear_dense_decode: x must be non-null and 16-byte aligned, y non-null");
  }
  if (a.m < 1 || a.m > kMaxDecodeRows) return VS_KERNEL_FAIL(kBadShape, "linear_dense_decode: m must be 1..16");
  if (a.x_layout != XLayout::kRowMajor && a.x_layout != XLayout::kTokenChunked) {
    return VS_KERNEL_FAIL(kBadArgument, "linear_dense_decode: x_layout must be kRowMajor or kTokenChunked");
  }
  if (!valid_decode_warps(warps)) return VS_KERNEL_FAIL(kBadArgument, "linear_dense_decode: warps must be 0, 4, 8 or 16");
  return KernelStatus::Ok();
}

KernelStatus gemm_cublas(const PackedWeightView& w, const LinearArgs& a) {
  if (a.cublas_handle == nullptr) return VS_KERNEL_FAIL(kBadArgument, "linear: the dense GEMM path (m above 64) needs a cuBLAS handle");
  if (a.x_layout != XLayout::kRowMajor) return VS_KERNEL_FAIL(kBadArgument, "linear: the dense GEMM path takes row-major x");
  if (a.m > (int64_t{1} << 30)) return VS_KERNEL_FAIL(kBadShape, "linear: m too large");
  auto handle = static_cast<cublasHandle_t>(a.cublas_handle);
  auto stream = static_cast<cudaStream_t>(a.stream);
  if (cublasStatus_t st = cublasSetStream(handle, stream); st != CUBLAS_STATUS_SUCCESS) {
    return kernel_error(KernelCode::kCudaError, "cublasSetStream", __FILE__, __LINE__, static_cast<int>(st));
  }
  const float alpha = 1.0f;
  const float beta = 0.0f;
  const int64_t ldy = a.y_stride > 0 ? a.y_stride : w.n;
  // Column-major view, as the quantized path: Y^T [n, m] (ld n) = W [n, k] (row-major = col-major k x n, op T) * X^T.
  const cublasStatus_t st = cublasGemmEx(
      handle, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(w.n), static_cast<int>(a.m), static_cast<int>(w.k), &alpha,
      w.codes, CUDA_R_16F, static_cast<int>(w.k), a.x, CUDA_R_16F, static_cast<int>(w.k), &beta, a.y,
      a.y_f32 ? CUDA_R_32F : CUDA_R_16F, static_cast<int>(ldy), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  if (st != CUBLAS_STATUS_SUCCESS) {
    return kernel_error(KernelCode::kCudaError, "cublasGemmEx", __FILE__, __LINE__, static_cast<int>(st));
  }
  if (w.channel_scales != nullptr) {
    const int64_t total = a.m * w.n;
    constexpr int kThreads = 256;
    const int64_t blocks = std::min<int64_t>((total + kThreads - 1) / kThreads, 8192);
    scale_rows_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(a.y, a.y_f32, total, w.n, ldy,
                                                                              w.channel_scales);
    VS_CUDA_TRY(cudaGetLastError());
  }
  return KernelStatus::Ok();
}

}  // namespace voltserve::kernels::dense
