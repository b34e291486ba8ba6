// Programmatic dependent launch (PDL, sm_90+) for the small kernels of a decode step (norms, SwiGLU, Gated DeltaNet,
// attention). A kernel launched with `pdl` may be scheduled while the kernel before it in the stream still runs
// (as soon as every block of that one has called pdl_launch_dependents(), which each kernel here does first):
// its launch and ramp-up hide behind the previous kernel instead of following it, and a linear kernel after it
// (linear_sm80.cu) issues its first weight loads while this one still works.
//
// The contract for a kernel launched with pdl: it calls pdl_wait() before it touches any memory that an earlier
// kernel of the step may write or read (so before every load of an activation and before its first store), and
// every block calls it (an early-returning block included), so that the kernel cannot complete before the one
// before it: a later kernel's wait then covers every earlier kernel too. Only data that no kernel of the step
// writes (weights; a layer's own recurrent state, written by that layer alone) may be read before the wait.
// Below sm_90 the device calls (pdl_device.h) compile to nothing and `pdl` must be false (the caller checks the
// device).
#pragma once
#include <cuda_runtime.h>

#include "common/pdl_device.h"

namespace voltserve::kernels {

// kernel<<<grid, block, smem, stream>>>(args...), with the programmatic-serialization attribute when pdl.
template <class... Params, class... Args>
cudaError_t launch_kernel(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream, bool pdl,
                          Args&&... args) {
  if (!pdl) {
    kernel<<<grid, block, smem, stream>>>(static_cast<Params>(args)...);
    return cudaGetLastError();
  }
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr.val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = &attr;
  cfg.numAttrs = 1;
  return cudaLaunchKernelEx(&cfg, kernel, static_cast<Params>(args)...);
}

}  // namespace voltserve::kernels
