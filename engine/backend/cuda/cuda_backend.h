// The CUDA backend: the Backend ops on one GPU, over the device kernels of kernels/ (the linear families sm70 /
// sm80 for the weights, portable kernels for attention, Gated DeltaNet, norms, elementwise ops and sampling).
// Weights are prepacked for the chosen family at load; activations are fp16 where a linear reads them and fp32 in
// the residual stream; the KV cache is fp16; GDN state fp32. Tested against the CPU backend on the fixture models
// (tests/golden/cuda_model_test.cpp, [gpu]). CUDA-free header: the server and CPU-only builds include it.
#pragma once

#include <memory>
#include <string>

#include "backend/backend.h"
#include "voltserve/status.h"

namespace voltserve {

struct CudaBackendOptions {
  int device = 0;
  // "auto" (sm80 from compute capability 8.0 on, sm70 below), "sm70" or "sm80": the family of the weight kernels.
  std::string kernel_family = "auto";
  // Time every op of every step with device events (serialises nothing, but adds an event pair per op) and log the
  // per-op breakdown, per step, when the backend is destroyed.
  bool op_timing = false;
  // Replay decode-sized steps (up to 64 token rows) as CUDA graphs captured per step shape
  // (backend/step_graphs.h); op_timing turns them off.
  bool cuda_graphs = true;
  // sm_90+: launch the step's kernels with programmatic dependent launch (kernels/common/pdl.cuh), so that each
  // may be scheduled while the previous one still runs; ignored below sm_90.
  bool pdl = true;
};

// Whether this build has the CUDA backend and a CUDA device is visible; `why` says why not.
bool cuda_backend_available(std::string* why);
Result<std::unique_ptr<Backend>> make_cuda_backend(const CudaBackendOptions& options);

}  // namespace voltserve
