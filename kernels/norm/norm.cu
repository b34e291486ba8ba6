// RMSNorm over rows fused with the residual update before it (norm.h), one portable implementation for every GPU
// from sm_70 (fp32 FMA only; scripts/check-sm70.sh assembles it for sm_70). Tested against norm_ref.cpp by
// tests/kernels/norm_gpu_test.cpp.
//
// Launch: one block of 256 threads per row. A thread holds its share of the row in registers (the plan's ITERS
// units of V = 4 floats, 16-byte loads and stores where every row start is aligned, else single floats): it reads x
// (and the residual, which it updates in place), sums v^2 in fp32, the block adds the 256 partial sums in a fixed
// tree, and the thread writes v * inv * w from its registers. Every element is read before the barrier and written by
// the thread that read it, so out may alias x or the residual. Traffic per row: x, residual (read + write), out and
// the weight (from L2 after the first rows): 14 or 16 bytes per element with a residual, 6 or 8 without.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "common/pdl.cuh"
#include "norm/norm.h"
#include "norm/norm_plan.h"

namespace voltserve::kernels::norm {
namespace {

struct Params {
  const float* x;  // [n_rows, n] fp32, row stride x_stride
  int64_t x_stride;
  float* residual;  // [n_rows, n] fp32 or nullptr, updated in place
  int64_t residual_stride;
  const float* weight;  // [n] or nullptr
  void* out;            // [n_rows, n] fp32 or fp16, row stride out_stride
  int64_t out_stride;
  int n;
  float eps;
};

template <int V>
__device__ __forceinline__ void load(const float* p, float (&v)[V]) {
  if constexpr (V == 4) {
    const float4 f = *reinterpret_cast<const float4*>(p);
    v[0] = f.x;
    v[1] = f.y;
    v[2] = f.z;
    v[3] = f.w;
  } else {
    v[0] = *p;
  }
}

template <int V>
__device__ __forceinline__ void store(float* p, const float (&v)[V]) {
  if constexpr (V == 4) {
    *reinterpret_cast<float4*>(p) = make_float4(v[0], v[1], v[2], v[3]);
  } else {
    *p = v[0];
  }
}

template <int V>
__device__ __forceinline__ void store(__half* p, const float (&v)[V]) {
  if constexpr (V == 4) {
    const __half2 lo = __floats2half2_rn(v[0], v[1]);  // .x (lower address) = v[0]
    const __half2 hi = __floats2half2_rn(v[2], v[3]);
    *reinterpret_cast<uint2*>(p) = make_uint2(*reinterpret_cast<const uint32_t*>(&lo), *reinterpret_cast<const uint32_t*>(&hi));
  } else {
    *p = __float2half_rn(v[0]);
  }
}

// Sum over the block in a fixed tree (warp shuffles, then warp 0 over the warps' sums); called once per block.
__device__ __forceinline__ float block_sum(float v) {
  constexpr int kWarps = kNormThreads / 32;
  __shared__ float part[kWarps];
  __shared__ float total;
  const int lane = static_cast<int>(threadIdx.x & 31);
  const int warp = static_cast<int>(threadIdx.x >> 5);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  if (lane == 0) part[warp] = v;
  __syncthreads();
  if (warp == 0) {
    float s = lane < kWarps ? part[lane] : 0.0f;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if (lane == 0) total = s;
  }
  __syncthreads();
  return total;
}

template <int V, int ITERS, typename OutT>
__global__ void __launch_bounds__(kNormThreads) rms_norm_kernel(Params p) {
  pdl_start();  // x and the residual come from the previous kernel
  const int64_t row = blockIdx.x;
  const float* x = p.x + row * p.x_stride;
  float* res = p.residual != nullptr ? p.residual + row * p.residual_stride : nullptr;
  OutT* out = static_cast<OutT*>(p.out) + row * p.out_stride;
  // Thread tid holds units it * 256 + tid (elements V * unit ..): consecutive threads, consecutive 16-byte pieces.
  float v[ITERS][V];
  float sum_sq = 0.0f;
#pragma unroll
  for (int it = 0; it < ITERS; ++it) {
    const int i = (it * kNormThreads + static_cast<int>(threadIdx.x)) * V;
#pragma unroll
    for (int j = 0; j < V; ++j) v[it][j] = 0.0f;
    if (i < p.n) {  // V divides n: the whole unit is in the row
      load<V>(x + i, v[it]);
      if (res != nullptr) {
        float r[V];
        load<V>(res + i, r);
#pragma unroll
        for (int j = 0; j < V; ++j) v[it][j] = r[j] + v[it][j];
        store<V>(res + i, v[it]);
      }
#pragma unroll
      for (int j = 0; j < V; ++j) sum_sq += v[it][j] * v[it][j];
    }
  }
  const float inv = rms_inv(block_sum(sum_sq), p.n, p.eps);
#pragma unroll
  for (int it = 0; it < ITERS; ++it) {
    const int i = (it * kNormThreads + static_cast<int>(threadIdx.x)) * V;
    if (i < p.n) {
      float w[V];
      if (p.weight != nullptr) {
        load<V>(p.weight + i, w);
      } else {
#pragma unroll
        for (int j = 0; j < V; ++j) w[j] = 1.0f;
      }
      float o[V];
#pragma unroll
      for (int j = 0; j < V; ++j) o[j] = rms_out(v[it][j], inv, w[j]);
      store<V>(out + i, o);
    }
  }
}

template <int V, int ITERS>
cudaError_t launch(const Params& p, bool f16, int rows, cudaStream_t stream, bool pdl) {
  auto kernel = f16 ? &rms_norm_kernel<V, ITERS, __half> : &rms_norm_kernel<V, ITERS, float>;
  return launch_kernel(kernel, dim3(rows), dim3(kNormThreads), 0, stream, pdl, p);
}

// The instantiated (vector width, iterations) pairs: norm_plan's powers of two up to kNormMaxIters*.
cudaError_t dispatch(const NormPlan& plan, const Params& p, bool f16, int rows, cudaStream_t stream, bool pdl) {
  if (plan.vec == 4) {
    switch (plan.iters) {
      case 1: return launch<4, 1>(p, f16, rows, stream, pdl);
      case 2: return launch<4, 2>(p, f16, rows, stream, pdl);
      case 4: return launch<4, 4>(p, f16, rows, stream, pdl);
      case 8: return launch<4, 8>(p, f16, rows, stream, pdl);
      case 16: return launch<4, 16>(p, f16, rows, stream, pdl);
      default: return cudaErrorInvalidValue;
    }
  }
  switch (plan.iters) {
    case 1: return launch<1, 1>(p, f16, rows, stream, pdl);
    case 2: return launch<1, 2>(p, f16, rows, stream, pdl);
    case 4: return launch<1, 4>(p, f16, rows, stream, pdl);
    case 8: return launch<1, 8>(p, f16, rows, stream, pdl);
    case 16: return launch<1, 16>(p, f16, rows, stream, pdl);
    case 32: return launch<1, 32>(p, f16, rows, stream, pdl);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace

KernelStatus rms_norm(const RmsNormArgs& a) {
  if (a.n_rows < 0 || a.n < 1) return VS_KERNEL_FAIL(kBadShape, "rms_norm: n must be >= 1 and n_rows >= 0");
  if (a.n_rows == 0) return KernelStatus::Ok();
  if (a.x == nullptr || a.out == nullptr) return VS_KERNEL_FAIL(kBadArgument, "rms_norm: x or out is null");
  if (a.out_dtype != DType::kF32 && a.out_dtype != DType::kF16) {
    return VS_KERNEL_FAIL(kBadArgument, "rms_norm: out_dtype must be kF32 or kF16");
  }
  if (a.x_stride < a.n || a.out_stride < a.n || (a.residual != nullptr && a.residual_stride < a.n)) {
    return VS_KERNEL_FAIL(kBadShape, "rms_norm: every row stride must be >= n");
  }
  auto aligned = [](const void* q, uintptr_t bytes) { return reinterpret_cast<uintptr_t>(q) % bytes == 0; };
  if (!aligned(a.x, 4) || !aligned(a.residual, 4) || !aligned(a.weight, 4) || !aligned(a.out, dtype_bytes(a.out_dtype))) {
    return VS_KERNEL_FAIL(kBadArgument, "rms_norm: x, residual, weight and out must be aligned to their element size");
  }
  const NormPlan plan = norm_plan(a);
  if (plan.iters == 0) return VS_KERNEL_FAIL(kBadShape, "rms_norm: n too large (16384 with 16-byte aligned rows, else 8192)");
  Params p{};
  p.x = a.x;
  p.x_stride = a.x_stride;
  p.residual = a.residual;
  p.residual_stride = a.residual_stride;
  p.weight = a.weight;
  p.out = a.out;
  p.out_stride = a.out_stride;
  p.n = a.n;
  p.eps = a.eps;
  VS_CUDA_TRY(dispatch(plan, p, a.out_dtype == DType::kF16, a.n_rows, static_cast<cudaStream_t>(a.stream), a.pdl));
  return KernelStatus::Ok();
}

}  // namespace voltserve::kernels::norm
