// HostParallel: how a CUDA-free reference spreads a loop over threads. The CPU backend passes its thread pool;
// tests may pass nullptr (run_parallel then runs the loop on the calling thread). A body writes disjoint outputs
// per index, so results do not depend on the split.
#pragma once

#include <cstdint>
#include <functional>

namespace voltserve::kernels {

class HostParallel {
 public:
  virtual ~HostParallel() = default;
  // Calls body(begin, end) over [0, n) in pieces of at least `grain` indices, possibly concurrently; returns
  // when all pieces are done.
  virtual void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& body) const = 0;
};

inline void run_parallel(const HostParallel* p, int64_t n, int64_t grain,
                         const std::function<void(int64_t, int64_t)>& body) {
  if (n <= 0) return;
  if (p == nullptr) {
    body(0, n);
  } else {
    p->parallel_for(n, grain, body);
  }
}

}  // namespace voltserve::kernels
