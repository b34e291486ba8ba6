// make_backend (see backend_factory.h).
#include "backend/backend_factory.h"

namespace voltserve {

Result<std::unique_ptr<Backend>> make_backend(const std::string& name, const BackendOptions& options) {
  if (name == "cpu" || name == "auto") {
    CpuBackendOptions cpu;
    cpu.n_threads = options.n_threads;
    cpu.gdn_mode = options.gdn_mode;
    return make_cpu_backend(cpu);
  }
  if (name == "cuda") return unimplemented("backend 'cuda' is not available in this build (it has: cpu)");
  return invalid_argument("unknown backend '" + name + "' (cpu, cuda or auto)");
}

}  // namespace voltserve
