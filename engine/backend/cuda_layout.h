// What the CUDA backend allocates, as sizes: the buffers of a prepared linear weight (prepacked codes and scales,
// fp16 dense rows, per-row scales), its step buffers and the kernels' scratch, rounded as its allocator rounds.
// CUDA-free and built everywhere: the memory plan (engine/plan) counts with it without a GPU, and the CUDA backend
// checks each weight it prepares against it (a drift is logged). Tested in tests/plan/memory_plan_test.cpp.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "linear/linear.h"
#include "linear/linear_ref.h"

namespace voltserve::cuda_layout {

// The smallest block DeviceMemory::alloc hands out; every request takes max(bytes, kMinAlloc).
inline constexpr int64_t kMinAlloc = 256;
inline int64_t alloc_bytes(int64_t bytes) { return bytes > kMinAlloc ? bytes : kMinAlloc; }

// One launch of a prepared weight (CudaLinear::Segment) and the device buffers it holds.
struct LinearSegment {
  WeightFormat format = WeightFormat::kDense;
  int64_t n = 0;
  int64_t k = 0;
  std::vector<int64_t> buffers;  // requested bytes of each allocation (codes, scales, per-row scales)
};

// The segments prepare_cuda_linear makes of `parts` for `family`: runs of consecutive parts with one format (and
// all synthetic or all not) form a group; a dense group is one fp16 [sum n, k] buffer; a quantized group of several
// parts is one merged segment when every part but the last fills whole tiles (kernels::merge_packed_rows; its
// parts' scales become per-row scales [n] fp32), else one segment per part (with its own per-channel scales when it
// has them); a synthetic group is one segment of sum n rows filled on the device, with per-row scales (ones) when
// it merges quantized parts as a checkpoint's would (and for a single part that carries channel_scales: the memory
// plan's stand-in for a head it quantizes at load).
std::vector<LinearSegment> linear_segments(std::span<const kernels::HostWeightRef> parts, kernels::KernelFamily family);

// Device bytes of those segments' buffers, allocator rounding included.
int64_t linear_bytes(std::span<const kernels::HostWeightRef> parts, kernels::KernelFamily family);

// The M >= 65 dequantization scratch a prepared weight wants for m rows (the largest of its segments').
int64_t linear_scratch_bytes(std::span<const kernels::HostWeightRef> parts, kernels::KernelFamily family, int64_t m);

// The buffers CudaBackend::configure allocates for `limits` (step metadata, per-row results, penalty state), by
// name, requested bytes (before rounding).
struct NamedBytes {
  std::string name;
  int64_t bytes = 0;
};
std::vector<NamedBytes> step_buffers(const StepLimits& limits);

}  // namespace voltserve::cuda_layout
