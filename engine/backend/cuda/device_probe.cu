// probe_device: the device facts the start-up log reports, and its read bandwidth measured with a read-only kernel
// over a buffer several times the L2 (the ceiling every kernel's speed is stated against; DESIGN.md §4).
#include <cuda_runtime.h>

#include <algorithm>
#include <vector>

#include "backend/cuda/device_probe.h"

namespace voltserve::cuda {
namespace {

// Sums 16-byte words so the loads cannot be dropped; one word per thread per iteration, grid-stride.
__global__ void read_probe_kernel(const uint4* __restrict__ p, size_t n, unsigned int* out) {
  unsigned int acc = 0;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const uint4 v = p[i];
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x9e3779b9u) *out = acc;  // practically never: keeps the loads alive
}

}  // namespace

Result<DeviceReport> probe_device(int device, bool measure_bandwidth) {
  DeviceReport r;
  VS_CUDA_RETURN(cudaSetDevice(device));
  cudaDeviceProp prop{};
  VS_CUDA_RETURN(cudaGetDeviceProperties(&prop, device));
  r.name = prop.name;
  r.compute_capability = prop.major * 10 + prop.minor;
  r.sm_count = prop.multiProcessorCount;
  VS_CUDA_RETURN(cudaMemGetInfo(&r.memory_free, &r.memory_total));
  if (!measure_bandwidth) return r;
  // 8x the L2 and at least 256 MiB, at most a quarter of what is free.
  size_t bytes = std::max<size_t>(static_cast<size_t>(prop.l2CacheSize) * 8, size_t{256} << 20);
  bytes = std::min(bytes, r.memory_free / 4) / 16 * 16;
  if (bytes < (size_t{16} << 20)) return r;
  void* buf = nullptr;
  unsigned int* sink = nullptr;
  if (cudaMalloc(&buf, bytes) != cudaSuccess) return r;
  if (cudaMalloc(&sink, sizeof(unsigned int)) != cudaSuccess) {
    cudaFree(buf);
    return r;
  }
  cudaMemset(buf, 1, bytes);
  cudaEvent_t t0, t1;
  cudaEventCreate(&t0);
  cudaEventCreate(&t1);
  const int blocks = prop.multiProcessorCount * 8;
  const size_t words = bytes / 16;
  read_probe_kernel<<<blocks, 512>>>(static_cast<const uint4*>(buf), words, sink);  // warm-up
  std::vector<float> ms;
  for (int it = 0; it < 5; ++it) {
    cudaEventRecord(t0);
    read_probe_kernel<<<blocks, 512>>>(static_cast<const uint4*>(buf), words, sink);
    cudaEventRecord(t1);
    cudaEventSynchronize(t1);
    float t = 0.0f;
    cudaEventElapsedTime(&t, t0, t1);
    ms.push_back(t);
  }
  const cudaError_t err = cudaGetLastError();
  cudaEventDestroy(t0);
  cudaEventDestroy(t1);
  cudaFree(sink);
  cudaFree(buf);
  if (err != cudaSuccess) return cuda_status(err, "read_probe_kernel", __FILE__, __LINE__);
  std::sort(ms.begin(), ms.end());
  if (ms[ms.size() / 2] > 0.0f) r.read_gbps = static_cast<double>(bytes) / (ms[ms.size() / 2] * 1e-3) / 1e9;
  return r;
}

}  // namespace voltserve::cuda
