// See mask_handoff.h. Plain PTX for sm_70 and newer: ld.acquire.sys (the host's publication), %globaltimer (the
// timeout), __nanosleep (a polite spin); no tensor cores, so one implementation serves every family.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "sampling/mask_handoff.h"

namespace voltserve::kernels::sampling {
namespace {

constexpr int kThreads = 256;
constexpr int kWordsPerThread = 4;  // each thread's loads go over PCIe: a few each, many threads in flight
constexpr int kMaxBlocks = 128;

__device__ __forceinline__ uint32_t load_acquire_system(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

__device__ __forceinline__ uint64_t global_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Every block's thread 0 waits for the ticket itself (blocks cannot wait on each other), then the block copies its
// share of the words.
__global__ void await_host_masks_kernel(MaskHandoff h) {
  __shared__ uint32_t arrived;
  if (threadIdx.x == 0) {
    const uint32_t want = *h.ticket;
    const uint64_t t0 = global_ns();
    uint32_t ok = 0;
    while (true) {
      if (load_acquire_system(h.ready) == want) {
        ok = 1;
        break;
      }
      if (global_ns() - t0 > static_cast<uint64_t>(h.timeout_ns)) break;
      __nanosleep(500);
    }
    if (!ok) {
      *reinterpret_cast<volatile uint32_t*>(h.timed_out) = want;
      __threadfence_system();
    }
    arrived = ok;
  }
  __syncthreads();
  const bool ok = arrived != 0;
  // The acquire above ordered thread 0 after the host's writes; the barrier orders this block after thread 0. The
  // loads bypass the caches (.cv): the host rewrites these words every step.
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < h.n_words; i += stride) {
    h.masks[i] = ok ? __ldcv(h.host_masks + i) : 0u;
  }
}

}  // namespace

KernelStatus await_host_masks(const MaskHandoff& h, void* stream) {
  if (h.n_words == 0) return KernelStatus::Ok();
  if (h.n_words < 0 || h.timeout_ns <= 0) {
    return VS_KERNEL_FAIL(kBadShape, "await_host_masks: n_words must be >= 0 and timeout_ns > 0");
  }
  if (h.host_masks == nullptr || h.ready == nullptr || h.ticket == nullptr || h.timed_out == nullptr ||
      h.masks == nullptr) {
    return VS_KERNEL_FAIL(kBadArgument, "await_host_masks: every pointer is required");
  }
  const int64_t per_block = int64_t{kThreads} * kWordsPerThread;
  const int blocks = static_cast<int>(std::min<int64_t>(kMaxBlocks, (h.n_words + per_block - 1) / per_block));
  await_host_masks_kernel<<<blocks, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(h);
  VS_CUDA_TRY(cudaGetLastError());
  return KernelStatus::Ok();
}

}  // namespace voltserve::kernels::sampling
