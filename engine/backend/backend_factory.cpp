// make_backend (see backend_factory.h).
#include "backend/backend_factory.h"

#include <spdlog/spdlog.h>

#include "common/named_logger.h"

#if VOLTSERVE_HAVE_CUDA_BACKEND
#include "backend/cuda/cuda_backend.h"
#endif

namespace voltserve {

namespace {

std::unique_ptr<Backend> cpu_backend(const BackendOptions& options) {
  CpuBackendOptions cpu;
  cpu.n_threads = options.n_threads;
  cpu.gdn_mode = options.gdn_mode;
  cpu.accept_rule = options.accept_rule;
  return make_cpu_backend(cpu);
}

}  // namespace

Result<std::unique_ptr<Backend>> make_backend(const std::string& name, const BackendOptions& options) {
  if (options.kernel_family != "auto" && options.kernel_family != "sm70" && options.kernel_family != "sm80") {
    return invalid_argument("unknown kernel family '" + options.kernel_family + "' (sm70, sm80 or auto)");
  }
  if (name == "cpu") {
    if (options.kernel_family != "auto") {
      return invalid_argument("kernel family " + options.kernel_family + " applies to the CUDA backend only");
    }
    return cpu_backend(options);
  }
  if (name != "cuda" && name != "auto") return invalid_argument("unknown backend '" + name + "' (cpu, cuda or auto)");
#if VOLTSERVE_HAVE_CUDA_BACKEND
  std::string why;
  if (cuda_backend_available(&why)) {
    CudaBackendOptions cuda;
    cuda.kernel_family = options.kernel_family;
    cuda.op_timing = options.op_timing;
    cuda.cuda_graphs = options.cuda_graphs;
    cuda.pdl = options.pdl;
    return make_cuda_backend(cuda);
  }
  if (name == "cuda") return unavailable("backend 'cuda': " + why);
  named_logger("engine").info("backend auto: {}; using the CPU backend", why);
#else
  if (name == "cuda") return unimplemented("backend 'cuda' is not available: this build has no CUDA (it has: cpu)");
  named_logger("engine").info("backend auto: this build has no CUDA; using the CPU backend");
#endif
  return cpu_backend(options);
}

}  // namespace voltserve
