// Pieces of the CUDA backend shared by its files: device memory that knows its total and names what did not fit,
// the prepared linear weight (one or several launches into column ranges of one output).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/device_probe.h"
#include "common/kernel_status.h"
#include "linear/linear.h"
#include "voltserve/status.h"

namespace voltserve::cuda {

// A kernel entry point's KernelStatus as a Status naming the op.
Status kernel_status(const kernels::KernelStatus& s, std::string_view op);

// Device allocations of one backend, freed with it. Every failure says what did not fit and how much is in use.
class DeviceMemory {
 public:
  DeviceMemory() = default;
  ~DeviceMemory();
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;

  Result<void*> alloc(size_t bytes, std::string_view what);  // zeroed, 256-byte aligned
  int64_t bytes_allocated() const { return bytes_; }

 private:
  std::vector<void*> blocks_;
  int64_t bytes_ = 0;
};

// A linear weight on the device: segments that each write columns [n0, n0 + n) of the output. Parts of one format
// that can share a launch are merged into one segment (kernels::merge_packed_rows); the rest run one after another.
class CudaLinear final : public PreparedLinear {
 public:
  struct Segment {
    kernels::PackedWeightView view;
    int64_t n0 = 0;
  };
  int64_t n() const override { return n_; }
  int64_t k() const override { return k_; }
  int64_t bytes() const override { return bytes_; }
  const std::vector<Segment>& segments() const { return segments_; }
  // Bytes of scratch the M >= 65 path of its segments wants for m rows.
  size_t workspace_bytes(int64_t m) const;

  std::vector<Segment> segments_;
  int64_t n_ = 0;
  int64_t k_ = 0;
  int64_t bytes_ = 0;  // device bytes of its segments (set by the backend)
  std::string label;  // "linear mlp.gate_proj+up_proj": the op timer's name for it (the module without layer index)
};

// Prepares `parts` for `family` (codes prepacked, dense weights converted to fp16 row-major) in `memory`.
Result<std::unique_ptr<CudaLinear>> prepare_cuda_linear(std::span<const kernels::HostWeightRef> parts,
                                                        kernels::KernelFamily family, DeviceMemory& memory,
                                                        std::string_view what);

}  // namespace voltserve::cuda
