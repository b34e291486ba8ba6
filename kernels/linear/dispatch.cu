// linear_forward: host-side shape/pointer checks, then the M <= 16 decode kernel of the weight's family (over
// row chunks of 16 up to kMaxStreamRows), or above that fp16 dequantization of weight row chunks into the caller's
// workspace followed by a cuBLAS fp16 GEMM (fp32 accumulation); dense fp16 weights go to their own decode kernels or
// straight to cuBLAS (linear_dense.cu).
// Tested by tests/kernels/linear_gpu_test.cpp.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>

#include "common/per_device.h"
#include "linear/dense.h"
#include "linear/linear_families.h"

namespace voltserve::kernels {

namespace {

KernelStatus check(const PackedWeightView& w, const LinearArgs& a) {
  if (w.n <= 0 || w.k <= 0 || w.k % 16 != 0) {
    return VS_KERNEL_FAIL(kBadShape, "linear: n must be positive and k a positive multiple of 16");
  }
  if (w.n > (int64_t{1} << 30) || w.k > (int64_t{1} << 24)) return VS_KERNEL_FAIL(kBadShape, "linear: n or k too large");
  if (w.codes == nullptr) return VS_KERNEL_FAIL(kBadArgument, "linear: weight codes are null");
  if (w.format == WeightFormat::kNvfp4 && w.scales == nullptr) return VS_KERNEL_FAIL(kBadArgument, "linear: NVFP4 scales are null");
  if (w.format == WeightFormat::kDense && (reinterpret_cast<uintptr_t>(w.codes) & 15) != 0) {
    return VS_KERNEL_FAIL(kBadArgument, "linear: the dense fp16 weight must be 16-byte aligned");
  }
  if (a.x == nullptr || a.y == nullptr) return VS_KERNEL_FAIL(kBadArgument, "linear: x or y is null");
  if (a.m < 1) return VS_KERNEL_FAIL(kBadShape, "linear: m must be >= 1");
  if (a.y_stride != 0 && a.y_stride < w.n) return VS_KERNEL_FAIL(kBadShape, "linear: y_stride must be 0 or >= n");
  if ((reinterpret_cast<uintptr_t>(a.x) & 15) != 0) return VS_KERNEL_FAIL(kBadArgument, "linear: x must be 16-byte aligned");
  if (a.x_layout != XLayout::kRowMajor && a.x_layout != XLayout::kTokenChunked) {
    return VS_KERNEL_FAIL(kBadArgument, "linear: x_layout must be kRowMajor or kTokenChunked");
  }
  if (a.x_layout == XLayout::kTokenChunked && a.m > kChunkedMaxRows) {
    return VS_KERNEL_FAIL(kBadArgument, "linear: token-chunked x is for the decode path (m <= 16)");
  }
  return KernelStatus::Ok();
}

// linear_gemm after check().
KernelStatus gemm(const PackedWeightView& w, const LinearArgs& a) {
  if (a.x_layout != XLayout::kRowMajor) return VS_KERNEL_FAIL(kBadArgument, "linear: the GEMM path takes row-major x");
  if (a.cublas_handle == nullptr) {
    return VS_KERNEL_FAIL(kBadArgument, "linear: the GEMM path (m above 64) needs a cuBLAS handle");
  }
  if (w.format == WeightFormat::kDense) return dense::gemm_cublas(w, a);
  if (a.workspace == nullptr) {
    return VS_KERNEL_FAIL(kBadArgument, "linear: the GEMM path (m above 64) needs a workspace");
  }
  const int64_t rows_fit = static_cast<int64_t>(a.workspace_bytes / (static_cast<size_t>(w.k) * 2));
  int64_t chunk = w.n;
  if (rows_fit < w.n) {
    chunk = rows_fit / 256 * 256;  // a multiple of both families' tile heights
    if (chunk < 256) return VS_KERNEL_FAIL(kWorkspaceTooSmall, "linear: workspace holds fewer than 256 fp16 weight rows");
  }
  auto handle = static_cast<cublasHandle_t>(a.cublas_handle);
  auto stream = static_cast<cudaStream_t>(a.stream);
  if (cublasStatus_t st = cublasSetStream(handle, stream); st != CUBLAS_STATUS_SUCCESS) {
    return kernel_error(KernelCode::kCudaError, "cublasSetStream", __FILE__, __LINE__, static_cast<int>(st));
  }
  const float alpha = 1.0f;
  const float beta = 0.0f;
  for (int64_t row0 = 0; row0 < w.n; row0 += chunk) {
    const int64_t rows = std::min<int64_t>(chunk, w.n - row0);
    KernelStatus s = w.family == KernelFamily::kSm80 ? sm80::dequantize_f16(w, row0, rows, a.workspace, a.stream)
                                                     : sm70::dequantize_f16(w, row0, rows, a.workspace, a.stream);
    if (!s.ok()) return s;
    // Column-major view: Y^T[rows, m] (ld n) = W_chunk[rows, k] (row-major = col-major k x rows, op T) * X^T.
    void* yc = a.y_f32 ? static_cast<void*>(static_cast<float*>(a.y) + row0)
                       : static_cast<void*>(static_cast<__half*>(a.y) + row0);
    const cublasStatus_t st = cublasGemmEx(
        handle, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(rows), static_cast<int>(a.m), static_cast<int>(w.k),
        &alpha, a.workspace, CUDA_R_16F, static_cast<int>(w.k), a.x, CUDA_R_16F, static_cast<int>(w.k), &beta, yc,
        a.y_f32 ? CUDA_R_32F : CUDA_R_16F, static_cast<int>(a.y_stride > 0 ? a.y_stride : w.n), CUBLAS_COMPUTE_32F,
        CUBLAS_GEMM_DEFAULT);
    if (st != CUBLAS_STATUS_SUCCESS) {
      return kernel_error(KernelCode::kCudaError, "cublasGemmEx", __FILE__, __LINE__, static_cast<int>(st));
    }
  }
  return KernelStatus::Ok();
}

}  // namespace

int current_device_major() {
  static PerDevice<int> majors;
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) return 0;
  return majors.get(dev, [](int d) {
    int major = 0;
    return cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, d) == cudaSuccess ? major : 0;
  });
}

KernelFamily preferred_family(int compute_capability) {
  return compute_capability >= 80 ? KernelFamily::kSm80 : KernelFamily::kSm70;
}

KernelStatus linear_forward(const PackedWeightView& w, const LinearArgs& a) {
  if (KernelStatus s = check(w, a); !s.ok()) return s;
  if (a.m > kMaxStreamRows) return gemm(w, a);
  const bool dense = w.format == WeightFormat::kDense;
  auto decode = [&](const LinearArgs& c) {
    if (w.family == KernelFamily::kSm80) return dense ? sm80::linear_dense_decode(w, c) : sm80::linear_decode(w, c);
    return dense ? sm70::linear_dense_decode(w, c) : sm70::linear_decode(w, c);
  };
  if (a.m <= kMaxDecodeRows) return decode(a);
  // Rows of 16 at a time (x row-major here: check() keeps token-chunked x to m <= 16). A row's arithmetic does not
  // depend on the launch's other rows, so chunking keeps the decode path's batch invariance.
  const int64_t y_stride = a.y_stride > 0 ? a.y_stride : w.n;
  for (int64_t r0 = 0; r0 < a.m; r0 += kMaxDecodeRows) {
    LinearArgs c = a;
    c.m = std::min(kMaxDecodeRows, a.m - r0);
    c.x = static_cast<const __half*>(a.x) + r0 * w.k;
    c.y = a.y_f32 ? static_cast<void*>(static_cast<float*>(a.y) + r0 * y_stride)
                  : static_cast<void*>(static_cast<__half*>(a.y) + r0 * y_stride);
    if (KernelStatus s = decode(c); !s.ok()) return s;
  }
  return KernelStatus::Ok();
}

KernelStatus linear_gemm(const PackedWeightView& w, const LinearArgs& a) {
  if (KernelStatus s = check(w, a); !s.ok()) return s;
  return gemm(w, a);
}

}  // namespace voltserve::kernels
