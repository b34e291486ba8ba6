// Shared by the op benchmarks (bench_norm, bench_elementwise, bench_attention, bench_gdn, bench_sampling): the read
// ceiling measured in the same run (a read-only kernel over 2 x 2.4 GB, as bench_linear measures it), CUDA-graph replay timing after a warm-up
// (median of many replays), seeded device fills, and rotation counts for inputs that would otherwise sit in L2.
// Header-only, for benchmarks of one translation unit.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define BENCH_CK(call)                                                                                           \
  do {                                                                                                           \
    const cudaError_t e_ = (call);                                                                               \
    if (e_ != cudaSuccess) {                                                                                     \
      std::fprintf(stderr, "bench: %s failed: %s (%s:%d)\n", #call, cudaGetErrorString(e_), __FILE__, __LINE__); \
      std::exit(1);                                                                                              \
    }                                                                                                            \
  } while (0)

namespace voltserve::bench {

__global__ void read_kernel(const uint4* p, size_t n, unsigned* sink) {
  uint32_t acc = 0;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const uint4 v = __ldcs(p + i);
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x9E3779B9u) *sink = acc;  // keeps the loads alive
}

__device__ __forceinline__ uint32_t hash32(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return static_cast<uint32_t>(x);
}

// mode 0: fp32 in [-scale, scale); 1: fp16 in [-scale, scale); 2: int32 in [0, limit).
__global__ void fill_kernel(void* p, size_t n, uint64_t seed, int mode, float scale, uint32_t limit) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const uint32_t r = hash32(seed * 0x9E3779B97F4A7C15ull + i);
    const float u = (static_cast<float>(r >> 8) / 8388608.0f - 1.0f) * scale;
    if (mode == 0) static_cast<float*>(p)[i] = u;
    if (mode == 1) static_cast<__half*>(p)[i] = __float2half(u);
    if (mode == 2) static_cast<int32_t*>(p)[i] = static_cast<int32_t>(r % limit);
  }
}

inline void fill_f32(void* p, size_t count, uint64_t seed, float scale) {
  fill_kernel<<<1024, 256>>>(p, count, seed, 0, scale, 1);
  BENCH_CK(cudaGetLastError());
}
inline void fill_f16(void* p, size_t count, uint64_t seed, float scale) {
  fill_kernel<<<1024, 256>>>(p, count, seed, 1, scale, 1);
  BENCH_CK(cudaGetLastError());
}
inline void fill_ids(void* p, size_t count, uint64_t seed, uint32_t limit) {
  fill_kernel<<<1024, 256>>>(p, count, seed, 2, 1.0f, limit);
  BENCH_CK(cudaGetLastError());
}

inline float g_warmup_ms = 25.0f;  // --warmup-ms

// Median microseconds per launch: `launches` calls of enqueue(i) captured in one graph, replayed after a warm-up of
// g_warmup_ms of GPU time (steady clocks, as serving keeps them), median over `replays` replays.
template <typename F>
double median_us_graph(cudaStream_t s, int launches, int replays, F&& enqueue) {
  enqueue(0);  // warm-up outside capture (module loading)
  BENCH_CK(cudaStreamSynchronize(s));
  cudaGraph_t g;
  cudaGraphExec_t ge;
  BENCH_CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < launches; ++i) enqueue(i);
  BENCH_CK(cudaStreamEndCapture(s, &g));
  BENCH_CK(cudaGraphInstantiate(&ge, g, 0));
  cudaEvent_t a, b;
  BENCH_CK(cudaEventCreate(&a));
  BENCH_CK(cudaEventCreate(&b));
  auto replay_ms = [&] {
    BENCH_CK(cudaEventRecord(a, s));
    BENCH_CK(cudaGraphLaunch(ge, s));
    BENCH_CK(cudaEventRecord(b, s));
    BENCH_CK(cudaEventSynchronize(b));
    float ms = 0;
    BENCH_CK(cudaEventElapsedTime(&ms, a, b));
    return ms;
  };
  float warm_ms = 0;
  for (int i = 0; i < 10000 && warm_ms < g_warmup_ms; ++i) warm_ms += replay_ms();
  std::vector<double> t;
  for (int r = 0; r < replays; ++r) t.push_back(replay_ms() * 1000.0 / launches);
  std::sort(t.begin(), t.end());
  BENCH_CK(cudaEventDestroy(a));
  BENCH_CK(cudaEventDestroy(b));
  BENCH_CK(cudaGraphExecDestroy(ge));
  BENCH_CK(cudaGraphDestroy(g));
  return t[t.size() / 2];
}

// GB/s of the read-only kernel over 2 x 2.4 GB (rotated; less on a device with under 14 GB free), the ceiling every
// row is reported against.
inline double read_ceiling_gbs(cudaStream_t s, const cudaDeviceProp& prop) {
  size_t free_b = 0, total_b = 0;
  BENCH_CK(cudaMemGetInfo(&free_b, &total_b));
  const size_t bytes = std::min<size_t>(size_t{4608} << 20, free_b / 3) / 32 * 32;
  void* buf;
  unsigned* sink;
  BENCH_CK(cudaMalloc(&buf, bytes));
  BENCH_CK(cudaMalloc(&sink, 4));
  fill_f32(buf, bytes / 4, 5, 1.0f);
  const size_t half = bytes / 2 / 16;
  const int grid = prop.multiProcessorCount * 8;
  const double us = median_us_graph(s, 4, 15, [&](int i) {
    read_kernel<<<grid, 512, 0, s>>>(static_cast<const uint4*>(buf) + (i % 2) * half, half, sink);
  });
  BENCH_CK(cudaFree(buf));
  BENCH_CK(cudaFree(sink));
  return static_cast<double>(bytes / 2) / (us * 1e3);
}

// Copies of a launch's buffers to rotate through so that together they exceed 3 x L2 (at most `cap`; 1 when one
// launch already does).
inline int rotation_copies(size_t bytes_per_launch, size_t l2, int cap = 8192) {
  if (bytes_per_launch == 0) return 1;
  return static_cast<int>(std::max<size_t>(1, std::min<size_t>(static_cast<size_t>(cap), (3 * l2 + bytes_per_launch - 1) / bytes_per_launch)));
}

}  // namespace voltserve::bench
