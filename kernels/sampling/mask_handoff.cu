// See mask_handoff.h. Plain PTX for sm_70 and newer: ld.acquire.sys (the host's publication), %globaltimer (the
// timeout), __nanosleep (a polite spin); no tensor cores, so one implementation serves every family.
#include <cuda_runtime.h>

#include <cstdint>

#include "sampling/mask_handoff.h"

namespace voltserve::kernels::sampling {
namespace {

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

// One thread: polls the host's word until it holds this step's ticket, or gives up after the timeout. The copy
// that follows in the stream starts only once this kernel has finished, so after the host's writes.
__global__ void await_ticket_kernel(const uint32_t* ready, const uint32_t* ticket, uint32_t* timed_out,
                                    int64_t timeout_ns) {
  const uint32_t want = *ticket;
  const uint64_t t0 = global_ns();
  while (load_acquire_system(ready) != want) {
    if (global_ns() - t0 > static_cast<uint64_t>(timeout_ns)) {
      *reinterpret_cast<volatile uint32_t*>(timed_out) = want;
      __threadfence_system();
      return;
    }
    __nanosleep(500);
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
  const auto st = static_cast<cudaStream_t>(stream);
  await_ticket_kernel<<<1, 1, 0, st>>>(h.ready, h.ticket, h.timed_out, h.timeout_ns);
  VS_CUDA_TRY(cudaGetLastError());
  VS_CUDA_TRY(cudaMemcpyAsync(h.masks, h.host_masks, static_cast<size_t>(h.n_words) * sizeof(uint32_t),
                              cudaMemcpyHostToDevice, st));
  return KernelStatus::Ok();
}

}  // namespace voltserve::kernels::sampling
