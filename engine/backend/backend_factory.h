// make_backend: the backend a name asks for — "cpu", "cuda" (when this build has it and a GPU is visible) or
// "auto" (cuda where possible, otherwise cpu, and the log says which and why).
#pragma once

#include <memory>
#include <string>

#include "backend/backend.h"
#include "voltserve/status.h"

namespace voltserve {

struct BackendOptions {
  int32_t n_threads = 0;  // CPU backend threads; 0: min(hardware threads, 8)
  GdnMode gdn_mode = GdnMode::kAuto;  // CPU backend
  std::string kernel_family = "auto";  // CUDA backend: sm70, sm80 or auto
  bool op_timing = false;              // CUDA backend: per-op device timing, logged when the backend goes
  bool cuda_graphs = true;             // CUDA backend: decode-sized steps replay as CUDA graphs
  bool pdl = true;                     // CUDA backend, sm_90+: programmatic dependent launch between kernels
  kernels::sampling::AcceptRule accept_rule = kernels::sampling::AcceptRule::kExact;  // CPU backend; tests only
};

Result<std::unique_ptr<Backend>> make_backend(const std::string& name, const BackendOptions& options);

}  // namespace voltserve
