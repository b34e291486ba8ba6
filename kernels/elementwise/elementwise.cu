// The elementwise ops between the big kernels of a decoder step (elementwise.h): embedding row gather, SwiGLU and row
// gather; one portable implementation for every GPU from sm_70 (fp32 arithmetic, integer bit moves; no bf16
// instructions: bf16 -> fp32 is a 16-bit shift). scripts/check-sm70.sh assembles it for sm_70;
// tests/kernels/elementwise_gpu_test.cpp checks it against elementwise_ref.cpp (exact for the copies).
//
// Launch (all three): a 1-D grid of n_rows x col_blocks blocks of 256 threads; block b handles row b / col_blocks and
// its column block b % col_blocks of 256 x 4 units, each thread 4 units 256 apart (coalesced, 4 independent loads in
// flight per thread). A unit is 16 bytes of input where every row start is aligned for it (elementwise_plan.h), else
// one element. Memory-bound: embed reads hidden elements of the table per row and writes 4 bytes each; SwiGLU reads 8
// bytes and writes 4 (or 2) per element; gather reads and writes each element once.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "common/pdl.cuh"
#include "elementwise/elementwise.h"
#include "elementwise/elementwise_plan.h"

namespace voltserve::kernels::elementwise {
namespace {

enum class Table { kF32, kF16, kBF16 };

__device__ __forceinline__ float bf16_bits_to_float(uint32_t bits) { return __uint_as_float(bits << 16); }

struct EmbedParams {
  const void* table;  // [vocab, hidden] row-major
  int64_t hidden;
  const int32_t* ids;  // [n_rows]
  const int32_t* id_map;  // [n_map] or null
  int32_t n_map;
  float* out;          // [n_rows, hidden], row stride out_stride
  int64_t out_stride;
  int64_t col_blocks;
};

template <Table T, int V>
__global__ void __launch_bounds__(kThreads) embed_kernel(EmbedParams p) {
  const int64_t b = blockIdx.x;
  const int64_t row = b / p.col_blocks;
  const int64_t cb = b % p.col_blocks;
  const int64_t id = embed_row(p.ids[row], p.id_map, p.n_map);
  float* dst = p.out + row * p.out_stride;
  // All of the thread's loads first (kIters in flight), then the conversions and stores.
  using Raw = std::conditional_t<T == Table::kF32, std::conditional_t<V == 4, float4, float>,
                                 std::conditional_t<V == 8, uint4, unsigned short>>;
  const Raw* src = reinterpret_cast<const Raw*>(static_cast<const char*>(p.table) + id * p.hidden * (T == Table::kF32 ? 4 : 2));
  Raw raw[kIters];
#pragma unroll
  for (int it = 0; it < kIters; ++it) {
    const int64_t i = unit_first_element(cb, it, static_cast<int>(threadIdx.x), V);
    if (i < p.hidden) raw[it] = __ldg(src + i / V);  // V divides hidden: the whole unit is in the row
  }
#pragma unroll
  for (int it = 0; it < kIters; ++it) {
    const int64_t i = unit_first_element(cb, it, static_cast<int>(threadIdx.x), V);
    if (i >= p.hidden) continue;
    if constexpr (T == Table::kF32) {
      *reinterpret_cast<Raw*>(dst + i) = raw[it];
    } else if constexpr (V == 8) {
      const uint32_t words[4] = {raw[it].x, raw[it].y, raw[it].z, raw[it].w};
      float f[8];
#pragma unroll
      for (int w = 0; w < 4; ++w) {
        if constexpr (T == Table::kF16) {
          const float2 v = __half22float2(*reinterpret_cast<const __half2*>(&words[w]));
          f[2 * w] = v.x;  // the lower address's half
          f[2 * w + 1] = v.y;
        } else {
          f[2 * w] = bf16_bits_to_float(words[w] & 0xFFFFu);
          f[2 * w + 1] = bf16_bits_to_float(words[w] >> 16);
        }
      }
      *reinterpret_cast<float4*>(dst + i) = make_float4(f[0], f[1], f[2], f[3]);
      *reinterpret_cast<float4*>(dst + i + 4) = make_float4(f[4], f[5], f[6], f[7]);
    } else {
      const uint32_t h = raw[it];
      dst[i] = T == Table::kF16 ? __half2float(__ushort_as_half(static_cast<unsigned short>(h))) : bf16_bits_to_float(h);
    }
  }
}

struct SwigluParams {
  const float* gate;  // [n_rows, n], row stride gate_stride
  int64_t gate_stride;
  const float* up;  // [n_rows, n], row stride up_stride
  int64_t up_stride;
  void* out;  // [n_rows, n] fp32 or fp16, row stride out_stride
  int64_t out_stride;
  int64_t n;
  int64_t col_blocks;
};

// Plain (coherent) loads, all of a thread's before its stores: out may be the gate or up range itself (each element
// is read before the thread that owns it writes it).
template <bool F16, int V>
__global__ void __launch_bounds__(kThreads) swiglu_kernel(SwigluParams p) {
  pdl_start();  // gate and up come from the previous kernel (kernels/common/pdl.cuh)
  using Raw = std::conditional_t<V == 4, float4, float>;
  const int64_t b = blockIdx.x;
  const int64_t row = b / p.col_blocks;
  const int64_t cb = b % p.col_blocks;
  const Raw* g = reinterpret_cast<const Raw*>(p.gate + row * p.gate_stride);
  const Raw* u = reinterpret_cast<const Raw*>(p.up + row * p.up_stride);
  Raw graw[kIters], uraw[kIters];
#pragma unroll
  for (int it = 0; it < kIters; ++it) {
    const int64_t i = unit_first_element(cb, it, static_cast<int>(threadIdx.x), V);
    if (i < p.n) {
      graw[it] = g[i / V];
      uraw[it] = u[i / V];
    }
  }
#pragma unroll
  for (int it = 0; it < kIters; ++it) {
    const int64_t i = unit_first_element(cb, it, static_cast<int>(threadIdx.x), V);
    if (i >= p.n) continue;
    float o[V];
    if constexpr (V == 4) {
      o[0] = silu_mul(graw[it].x, uraw[it].x);
      o[1] = silu_mul(graw[it].y, uraw[it].y);
      o[2] = silu_mul(graw[it].z, uraw[it].z);
      o[3] = silu_mul(graw[it].w, uraw[it].w);
    } else {
      o[0] = silu_mul(graw[it], uraw[it]);
    }
    if constexpr (F16) {
      __half* dst = static_cast<__half*>(p.out) + row * p.out_stride + i;
      if constexpr (V == 4) {
        const __half2 lo = __floats2half2_rn(o[0], o[1]);  // .x (lower address) = o[0]
        const __half2 hi = __floats2half2_rn(o[2], o[3]);
        *reinterpret_cast<uint2*>(dst) = make_uint2(*reinterpret_cast<const uint32_t*>(&lo), *reinterpret_cast<const uint32_t*>(&hi));
      } else {
        *dst = __float2half_rn(o[0]);
      }
    } else {
      float* dst = static_cast<float*>(p.out) + row * p.out_stride + i;
      if constexpr (V == 4) {
        *reinterpret_cast<float4*>(dst) = make_float4(o[0], o[1], o[2], o[3]);
      } else {
        *dst = o[0];
      }
    }
  }
}

struct GatherParams {
  const uint8_t* x;  // [*, n] elements of elem bytes, row stride x_stride elements
  int64_t x_stride;
  const int32_t* rows;  // [n_rows]
  uint8_t* out;         // [n_rows, n], row stride out_stride elements
  int64_t out_stride;
  int64_t n;
  int64_t elem;
  int64_t col_blocks;
};

// Copies bits: U is the unit type (uint4: 16 bytes; uint32_t / uint16_t: one fp32 / fp16 element), V elements each.
template <typename U, int V>
__global__ void __launch_bounds__(kThreads) gather_kernel(GatherParams p) {
  pdl_start();
  const int64_t b = blockIdx.x;
  const int64_t row = b / p.col_blocks;
  const int64_t cb = b % p.col_blocks;
  const uint8_t* src = p.x + static_cast<int64_t>(p.rows[row]) * p.x_stride * p.elem;
  uint8_t* dst = p.out + row * p.out_stride * p.elem;
  U v[kIters];  // all loads first: kIters in flight per thread
#pragma unroll
  for (int it = 0; it < kIters; ++it) {
    const int64_t i = unit_first_element(cb, it, static_cast<int>(threadIdx.x), V);
    if (i < p.n) v[it] = *reinterpret_cast<const U*>(src + i * p.elem);
  }
#pragma unroll
  for (int it = 0; it < kIters; ++it) {
    const int64_t i = unit_first_element(cb, it, static_cast<int>(threadIdx.x), V);
    if (i < p.n) *reinterpret_cast<U*>(dst + i * p.elem) = v[it];
  }
}

}  // namespace

KernelStatus embed(const EmbedArgs& a) {
  if (a.n_rows < 0 || a.hidden < 1) return VS_KERNEL_FAIL(kBadShape, "embed: hidden must be >= 1 and n_rows >= 0");
  if (a.n_rows == 0) return KernelStatus::Ok();
  if (a.table == nullptr || a.ids == nullptr || a.out == nullptr) return VS_KERNEL_FAIL(kBadArgument, "embed: table, ids or out is null");
  if (a.table_dtype != DType::kF32 && a.table_dtype != DType::kF16 && a.table_dtype != DType::kBF16) {
    return VS_KERNEL_FAIL(kBadArgument, "embed: table_dtype must be kF32, kF16 or kBF16");
  }
  if (a.out_stride < a.hidden) return VS_KERNEL_FAIL(kBadShape, "embed: out_stride must be >= hidden");
  if (!aligned_to(a.table, dtype_bytes(a.table_dtype)) || !aligned_to(a.out, 4)) {
    return VS_KERNEL_FAIL(kBadArgument, "embed: table and out must be aligned to their element size");
  }
  const RowPlan plan = embed_plan(a);
  if (plan.blocks == 0) return VS_KERNEL_FAIL(kBadShape, "embed: too many rows x column blocks for one grid");
  const EmbedParams p{a.table, a.hidden, a.ids, a.id_map, a.n_map, a.out, a.out_stride, plan.col_blocks};
  const auto grid = static_cast<unsigned>(plan.blocks);
  auto stream = static_cast<cudaStream_t>(a.stream);
  const bool vec = plan.vec > 1;
  if (a.table_dtype == DType::kF32) {
    if (vec) {
      embed_kernel<Table::kF32, 4><<<grid, kThreads, 0, stream>>>(p);
    } else {
      embed_kernel<Table::kF32, 1><<<grid, kThreads, 0, stream>>>(p);
    }
  } else if (a.table_dtype == DType::kF16) {
    if (vec) {
      embed_kernel<Table::kF16, 8><<<grid, kThreads, 0, stream>>>(p);
    } else {
      embed_kernel<Table::kF16, 1><<<grid, kThreads, 0, stream>>>(p);
    }
  } else {
    if (vec) {
      embed_kernel<Table::kBF16, 8><<<grid, kThreads, 0, stream>>>(p);
    } else {
      embed_kernel<Table::kBF16, 1><<<grid, kThreads, 0, stream>>>(p);
    }
  }
  VS_CUDA_TRY(cudaGetLastError());
  return KernelStatus::Ok();
}

KernelStatus swiglu(const SwigluArgs& a) {
  if (a.n_rows < 0 || a.n < 1) return VS_KERNEL_FAIL(kBadShape, "swiglu: n must be >= 1 and n_rows >= 0");
  if (a.n_rows == 0) return KernelStatus::Ok();
  if (a.gate == nullptr || a.up == nullptr || a.out == nullptr) return VS_KERNEL_FAIL(kBadArgument, "swiglu: gate, up or out is null");
  if (a.out_dtype != DType::kF32 && a.out_dtype != DType::kF16) {
    return VS_KERNEL_FAIL(kBadArgument, "swiglu: out_dtype must be kF32 or kF16");
  }
  if (a.gate_stride < a.n || a.up_stride < a.n || a.out_stride < a.n) {
    return VS_KERNEL_FAIL(kBadShape, "swiglu: every row stride must be >= n");
  }
  if (!aligned_to(a.gate, 4) || !aligned_to(a.up, 4) || !aligned_to(a.out, dtype_bytes(a.out_dtype))) {
    return VS_KERNEL_FAIL(kBadArgument, "swiglu: gate, up and out must be aligned to their element size");
  }
  const RowPlan plan = swiglu_plan(a);
  if (plan.blocks == 0) return VS_KERNEL_FAIL(kBadShape, "swiglu: too many rows x column blocks for one grid");
  const SwigluParams p{a.gate, a.gate_stride, a.up, a.up_stride, a.out, a.out_stride, a.n, plan.col_blocks};
  const auto grid = static_cast<unsigned>(plan.blocks);
  auto stream = static_cast<cudaStream_t>(a.stream);
  const bool vec = plan.vec > 1;
  auto kernel = a.out_dtype == DType::kF16 ? (vec ? &swiglu_kernel<true, 4> : &swiglu_kernel<true, 1>)
                                           : (vec ? &swiglu_kernel<false, 4> : &swiglu_kernel<false, 1>);
  VS_CUDA_TRY(launch_kernel(kernel, dim3(grid), dim3(kThreads), 0, stream, a.pdl, p));
  return KernelStatus::Ok();
}

KernelStatus gather_rows(const GatherArgs& a) {
  if (a.n_rows < 0 || a.n < 1) return VS_KERNEL_FAIL(kBadShape, "gather_rows: n must be >= 1 and n_rows >= 0");
  if (a.n_rows == 0) return KernelStatus::Ok();
  if (a.x == nullptr || a.rows == nullptr || a.out == nullptr) return VS_KERNEL_FAIL(kBadArgument, "gather_rows: x, rows or out is null");
  if (a.dtype != DType::kF32 && a.dtype != DType::kF16) return VS_KERNEL_FAIL(kBadArgument, "gather_rows: dtype must be kF32 or kF16");
  if (a.x_stride < a.n || a.out_stride < a.n) return VS_KERNEL_FAIL(kBadShape, "gather_rows: every row stride must be >= n");
  if (!aligned_to(a.x, dtype_bytes(a.dtype)) || !aligned_to(a.out, dtype_bytes(a.dtype))) {
    return VS_KERNEL_FAIL(kBadArgument, "gather_rows: x and out must be aligned to their element size");
  }
  const RowPlan plan = gather_plan(a);
  if (plan.blocks == 0) return VS_KERNEL_FAIL(kBadShape, "gather_rows: too many rows x column blocks for one grid");
  const int64_t elem = static_cast<int64_t>(dtype_bytes(a.dtype));
  const GatherParams p{static_cast<const uint8_t*>(a.x), a.x_stride, a.rows, static_cast<uint8_t*>(a.out), a.out_stride,
                       a.n, elem, plan.col_blocks};
  const auto grid = static_cast<unsigned>(plan.blocks);
  auto stream = static_cast<cudaStream_t>(a.stream);
  auto kernel = plan.vec > 1 ? (elem == 4 ? &gather_kernel<uint4, 4> : &gather_kernel<uint4, 8>)
                             : (elem == 4 ? &gather_kernel<uint32_t, 1> : &gather_kernel<uint16_t, 1>);
  VS_CUDA_TRY(launch_kernel(kernel, dim3(grid), dim3(kThreads), 0, stream, a.pdl, p));
  return KernelStatus::Ok();
}

}  // namespace voltserve::kernels::elementwise
