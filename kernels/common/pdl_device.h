// The device side of programmatic dependent launch (the contract and the launch: pdl.cuh). CUDA-free names only,
// so that headers the SIMT emulator compiles on the host (attention_kernels.cuh) use them too; below sm_90 and on
// the host every call is a no-op.
#pragma once

namespace voltserve::kernels {

// Lets the next kernel in the stream be scheduled (once every block of this one has called it).
__device__ __forceinline__ void pdl_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// Waits until the previous kernel in the stream has finished and its writes are visible (at once without PDL).
__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// The entry of a kernel that reads nothing before the previous kernel has finished: both of the above.
__device__ __forceinline__ void pdl_start() {
  pdl_launch_dependents();
  pdl_wait();
}

}  // namespace voltserve::kernels
