// prepare_cuda_linear: checkpoint weights (kernels::HostWeightRef) to device weights in a kernel family's layout.
// NVFP4 / FP8 codes are prepacked (kernels/linear/prepack.h) and consecutive parts of one format merged into one
// launch where their tiles allow; dense weights become fp16 row-major (Volta has no bf16; DESIGN.md §3), refused
// with the tensor's name when a value does not fit fp16 rather than clamped.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "backend/cuda/cuda_internal.h"
#include "common/fp_formats.h"
#include "linear/prepack.h"
#include "linear/synthetic.h"

namespace voltserve::cuda {
namespace {

size_t codes_bytes(const kernels::HostWeightRef& w) {
  if (w.format == WeightFormat::kNvfp4) return static_cast<size_t>(w.n * (w.k / 2));
  return static_cast<size_t>(w.n * w.k);
}

Result<void*> upload_bytes(DeviceMemory& memory, const void* host, size_t bytes, std::string_view what) {
  VS_ASSIGN_OR_RETURN(void* d, memory.alloc(bytes, what));
  VS_CUDA_RETURN(cudaMemcpy(d, host, bytes, cudaMemcpyHostToDevice));
  return d;
}

// Dense parts -> one fp16 [sum n, k] segment.
Result<CudaLinear::Segment> dense_segment(std::span<const kernels::HostWeightRef> parts, kernels::KernelFamily family,
                                          DeviceMemory& memory, std::string_view what) {
  const int64_t k = parts[0].k;
  int64_t n = 0;
  for (const auto& p : parts) n += p.n;
  std::vector<uint16_t> h(static_cast<size_t>(n * k));
  std::vector<float> row(static_cast<size_t>(k));
  int64_t r0 = 0;
  for (const auto& p : parts) {
    for (int64_t r = 0; r < p.n; ++r) {
      kernels::dequantize_row_ref(p, r, row.data());
      for (int64_t j = 0; j < k; ++j) {
        const float v = row[static_cast<size_t>(j)];
        if (!(std::fabs(v) <= 65504.0f)) {
          return invalid_argument("cuda backend: " + std::string(what) + ": value " + std::to_string(v) + " at [" +
                                  std::to_string(r) + ", " + std::to_string(j) +
                                  "] does not fit fp16 (the GPU kernels hold dense weights as fp16)");
        }
        h[static_cast<size_t>((r0 + r) * k + j)] = fp::float_to_f16(v);
      }
    }
    r0 += p.n;
  }
  VS_ASSIGN_OR_RETURN(void* d, upload_bytes(memory, h.data(), h.size() * 2, what));
  CudaLinear::Segment seg;
  seg.view.format = WeightFormat::kDense;
  seg.view.family = family;
  seg.view.n = n;
  seg.view.k = k;
  seg.view.codes = static_cast<const uint8_t*>(d);
  return seg;
}

Result<kernels::PackedWeightHost> prepack_part(const kernels::HostWeightRef& w, kernels::KernelFamily family,
                                               std::string_view what) {
  kernels::PackedWeightHost packed;
  const size_t scale_bytes = w.format == WeightFormat::kNvfp4 ? static_cast<size_t>(w.n * (w.k / 16)) : 0;
  const std::string err =
      kernels::prepack(w.format, family, w.n, w.k, std::span<const uint8_t>(w.codes, codes_bytes(w)),
                       std::span<const uint8_t>(w.scales, scale_bytes), &packed);
  if (!err.empty()) return invalid_argument("cuda backend: " + std::string(what) + ": " + err);
  return packed;
}

// Quantized parts of one format -> one merged segment, or one segment per part where the tiles do not allow a
// merge (every part but the last must fill whole tiles).
Result<std::vector<CudaLinear::Segment>> quantized_segments(std::span<const kernels::HostWeightRef> parts,
                                                            kernels::KernelFamily family, DeviceMemory& memory,
                                                            std::string_view what) {
  std::vector<kernels::PackedWeightHost> packed;
  for (const auto& p : parts) {
    VS_ASSIGN_OR_RETURN(kernels::PackedWeightHost ph, prepack_part(p, family, what));
    packed.push_back(std::move(ph));
  }
  auto upload_segment = [&](const kernels::PackedWeightHost& ph, const std::vector<float>* row_scales,
                            const kernels::HostWeightRef* single) -> Result<CudaLinear::Segment> {
    CudaLinear::Segment seg;
    seg.view.format = ph.format;
    seg.view.family = ph.family;
    seg.view.n = ph.n;
    seg.view.k = ph.k;
    VS_ASSIGN_OR_RETURN(void* codes, upload_bytes(memory, ph.codes.data(), ph.codes.size(), what));
    seg.view.codes = static_cast<const uint8_t*>(codes);
    if (!ph.scales.empty()) {
      VS_ASSIGN_OR_RETURN(void* scales, upload_bytes(memory, ph.scales.data(), ph.scales.size(), what));
      seg.view.scales = static_cast<const uint8_t*>(scales);
    }
    const float* channel = nullptr;
    if (row_scales != nullptr) {
      channel = row_scales->data();
    } else if (single != nullptr) {
      seg.view.global_scale = single->global_scale;
      seg.view.tensor_scale = single->tensor_scale;
      channel = single->channel_scales;
    }
    if (channel != nullptr) {
      VS_ASSIGN_OR_RETURN(void* cs, upload_bytes(memory, channel, static_cast<size_t>(ph.n) * sizeof(float), what));
      seg.view.channel_scales = static_cast<const float*>(cs);
    }
    return seg;
  };
  std::vector<CudaLinear::Segment> out;
  if (parts.size() > 1) {
    std::vector<kernels::MergePart> mp;
    for (size_t i = 0; i < parts.size(); ++i) {
      const float scale = parts[i].format == WeightFormat::kNvfp4 ? parts[i].global_scale : parts[i].tensor_scale;
      mp.push_back({&packed[i], scale, parts[i].channel_scales});
    }
    kernels::PackedWeightHost merged;
    std::vector<float> row_scales;
    if (kernels::merge_packed_rows(mp, &merged, &row_scales).empty()) {
      VS_ASSIGN_OR_RETURN(CudaLinear::Segment seg, upload_segment(merged, &row_scales, nullptr));
      out.push_back(seg);
      return out;
    }
  }
  for (size_t i = 0; i < parts.size(); ++i) {
    VS_ASSIGN_OR_RETURN(CudaLinear::Segment seg, upload_segment(packed[i], nullptr, &parts[i]));
    out.push_back(seg);
  }
  return out;
}

// Synthetic parts of one format (codes == nullptr) -> one segment filled on the device in the packed layout.
Result<CudaLinear::Segment> synthetic_segment(std::span<const kernels::HostWeightRef> parts,
                                              kernels::KernelFamily family, DeviceMemory& memory,
                                              std::string_view what) {
  const kernels::HostWeightRef& p0 = parts[0];
  int64_t n = 0;
  for (const auto& p : parts) n += p.n;
  size_t codes_bytes = 0, scales_bytes = 0;
  if (p0.format == WeightFormat::kDense) {
    codes_bytes = static_cast<size_t>(n * p0.k) * 2;
  } else {
    kernels::packed_bytes(p0.format, family, n, p0.k, &codes_bytes, &scales_bytes);
  }
  CudaLinear::Segment seg;
  seg.view.format = p0.format;
  seg.view.family = family;
  seg.view.n = n;
  seg.view.k = p0.k;
  VS_ASSIGN_OR_RETURN(void* codes, memory.alloc(codes_bytes, what));
  void* scales = nullptr;
  if (scales_bytes > 0) {
    VS_ASSIGN_OR_RETURN(scales, memory.alloc(scales_bytes, what));
  }
  const kernels::KernelStatus st = kernels::synthetic_fill_device(p0.format, n, p0.k, p0.synthetic_seed, codes,
                                                                  codes_bytes, scales, scales_bytes, nullptr);
  if (!st.ok()) return kernel_status(st, "synthetic weights of " + std::string(what));
  VS_CUDA_RETURN(cudaDeviceSynchronize());
  seg.view.codes = static_cast<const uint8_t*>(codes);
  seg.view.scales = static_cast<const uint8_t*>(scales);
  seg.view.global_scale = kernels::kSyntheticNvfp4GlobalScale;
  seg.view.tensor_scale = kernels::kSyntheticFp8TensorScale;
  if (p0.format != WeightFormat::kDense && parts.size() > 1) {
    // A checkpoint's merged projection carries its parts' scales per row (merge_packed_rows): ones here, so that a
    // synthetic model takes the memory and runs the kernels a real checkpoint does (backend/cuda_layout.h).
    const std::vector<float> ones(static_cast<size_t>(n), 1.0f);
    VS_ASSIGN_OR_RETURN(void* cs, upload_bytes(memory, ones.data(), ones.size() * sizeof(float), what));
    seg.view.channel_scales = static_cast<const float*>(cs);
  }
  return seg;
}

}  // namespace

size_t CudaLinear::workspace_bytes(int64_t m) const {
  size_t most = 0;
  for (const Segment& s : segments_) most = std::max(most, kernels::linear_workspace_bytes(s.view, m));
  return most;
}

Result<std::unique_ptr<CudaLinear>> prepare_cuda_linear(std::span<const kernels::HostWeightRef> parts,
                                                        kernels::KernelFamily family, DeviceMemory& memory,
                                                        std::string_view what) {
  if (parts.empty()) return invalid_argument("cuda backend: " + std::string(what) + ": no weight parts");
  auto lin = std::make_unique<CudaLinear>();
  lin->k_ = parts[0].k;
  for (const auto& p : parts) {
    if (p.k != lin->k_ || p.n <= 0) {
      return invalid_argument("cuda backend: " + std::string(what) + ": parts of a merged weight need one k and n > 0");
    }
    if (p.k % 16 != 0) {
      return invalid_argument("cuda backend: " + std::string(what) + ": k = " + std::to_string(p.k) +
                              " is not a multiple of 16 (the GPU linear kernels need it)");
    }
  }
  // Runs of consecutive parts with one format become one group each.
  size_t i = 0;
  int64_t n0 = 0;
  while (i < parts.size()) {
    size_t j = i + 1;
    while (j < parts.size() && parts[j].format == parts[i].format &&
           (parts[j].codes == nullptr) == (parts[i].codes == nullptr)) {
      ++j;
    }
    const auto group = parts.subspan(i, j - i);
    std::vector<CudaLinear::Segment> segs;
    if (parts[i].codes == nullptr) {
      VS_ASSIGN_OR_RETURN(CudaLinear::Segment seg, synthetic_segment(group, family, memory, what));
      segs.push_back(seg);
    } else if (parts[i].format == WeightFormat::kDense) {
      VS_ASSIGN_OR_RETURN(CudaLinear::Segment seg, dense_segment(group, family, memory, what));
      segs.push_back(seg);
    } else {
      VS_ASSIGN_OR_RETURN(segs, quantized_segments(group, family, memory, what));
    }
    for (CudaLinear::Segment& s : segs) {
      s.n0 = n0;
      n0 += s.view.n;
      lin->segments_.push_back(s);
    }
    i = j;
  }
  lin->n_ = n0;
  return lin;
}

}  // namespace voltserve::cuda
