// synthetic_fill_device (see synthetic.h): a grid-stride fill of packed synthetic codes and scales, or of fp16
// dense weights. Portable (scripts/check-sm70.sh assembles it for sm_70).
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "linear/synthetic.h"

namespace voltserve::kernels {
namespace {

enum class FillKind { kRandomBytes, kNvfp4Scales, kFp8Codes, kDenseF16 };

__global__ void synthetic_fill_kernel(uint8_t* out, size_t n_elems, uint64_t seed, FillKind kind) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n_elems; i += stride) {
    const uint64_t h = synthetic_hash(seed, i);
    switch (kind) {
      case FillKind::kRandomBytes: out[i] = static_cast<uint8_t>(h >> 24); break;
      case FillKind::kNvfp4Scales: out[i] = synthetic_nvfp4_scale(h); break;
      case FillKind::kFp8Codes: out[i] = synthetic_fp8_code(h); break;
      case FillKind::kDenseF16: reinterpret_cast<__half*>(out)[i] = __float2half_rn(synthetic_dense_value(h)); break;
    }
  }
}

KernelStatus fill(void* p, size_t n_elems, uint64_t seed, FillKind kind, cudaStream_t stream) {
  if (n_elems == 0) return KernelStatus::Ok();
  if (p == nullptr) return VS_KERNEL_FAIL(kBadArgument, "synthetic_fill_device: null output");
  synthetic_fill_kernel<<<1024, 256, 0, stream>>>(static_cast<uint8_t*>(p), n_elems, seed, kind);
  VS_CUDA_TRY(cudaGetLastError());
  return KernelStatus::Ok();
}

}  // namespace

KernelStatus synthetic_fill_device(WeightFormat format, int64_t n, int64_t k, uint64_t seed, void* codes,
                                   size_t codes_bytes, void* scales, size_t scales_bytes, void* stream) {
  auto s = static_cast<cudaStream_t>(stream);
  if (n <= 0 || k <= 0) return VS_KERNEL_FAIL(kBadShape, "synthetic_fill_device: n and k must be positive");
  switch (format) {
    case WeightFormat::kNvfp4: {
      KernelStatus st = fill(codes, codes_bytes, seed, FillKind::kRandomBytes, s);
      if (!st.ok()) return st;
      return fill(scales, scales_bytes, seed ^ 0x5ca1e, FillKind::kNvfp4Scales, s);
    }
    case WeightFormat::kFp8:
      return fill(codes, codes_bytes, seed, FillKind::kFp8Codes, s);
    case WeightFormat::kDense:
      if (codes_bytes < static_cast<size_t>(n * k) * 2) return VS_KERNEL_FAIL(kBadShape, "synthetic_fill_device: dense buffer too small");
      return fill(codes, static_cast<size_t>(n * k), seed, FillKind::kDenseF16, s);
  }
  return VS_KERNEL_FAIL(kBadArgument, "synthetic_fill_device: unknown format");
}

}  // namespace voltserve::kernels
