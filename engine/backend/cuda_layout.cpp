// cuda_layout (see cuda_layout.h): the arithmetic of prepare_cuda_linear (backend/cuda/cuda_linear.cpp) and
// CudaBackend::configure (backend/cuda/cuda_backend.cpp), step by step in the same order.
#include "backend/cuda_layout.h"

#include <algorithm>

#include "common/step_desc.h"
#include "gdn/gdn.h"
#include "linear/prepack.h"
#include "sampling/sampling.h"

namespace voltserve::cuda_layout {
namespace {

void add_packed(WeightFormat format, kernels::KernelFamily family, int64_t n, int64_t k, size_t* codes,
                size_t* scales) {
  size_t c = 0, s = 0;
  kernels::packed_bytes(format, family, n, k, &c, &s);
  *codes += c;
  *scales += s;
}

}  // namespace

std::vector<LinearSegment> linear_segments(std::span<const kernels::HostWeightRef> parts,
                                           kernels::KernelFamily family) {
  std::vector<LinearSegment> out;
  size_t i = 0;
  while (i < parts.size()) {
    size_t j = i + 1;
    while (j < parts.size() && parts[j].format == parts[i].format &&
           (parts[j].codes == nullptr) == (parts[i].codes == nullptr)) {
      ++j;
    }
    const auto group = parts.subspan(i, j - i);
    const WeightFormat format = parts[i].format;
    const int64_t k = parts[i].k;
    int64_t n = 0;
    for (const auto& p : group) n += p.n;
    if (parts[i].codes == nullptr) {  // synthetic: one segment filled on the device
      LinearSegment seg{format, n, k, {}};
      if (format == WeightFormat::kDense) {
        seg.buffers.push_back(n * k * 2);
      } else {
        size_t codes = 0, scales = 0;
        add_packed(format, family, n, k, &codes, &scales);
        seg.buffers.push_back(static_cast<int64_t>(codes));
        if (scales > 0) seg.buffers.push_back(static_cast<int64_t>(scales));
      }
      if (format != WeightFormat::kDense && group.size() > 1) {
        seg.buffers.push_back(n * static_cast<int64_t>(sizeof(float)));  // per-row scales (ones), as merged
      } else if (group.size() == 1 && group[0].channel_scales != nullptr) {
        seg.buffers.push_back(n * static_cast<int64_t>(sizeof(float)));
      }
      out.push_back(std::move(seg));
    } else if (format == WeightFormat::kDense) {
      out.push_back({format, n, k, {n * k * 2}});
    } else {
      const int tile_rows = kernels::tile_geometry(family).tile_rows;
      bool mergeable = group.size() > 1;
      for (size_t p = 0; p + 1 < group.size(); ++p) mergeable &= group[p].n % tile_rows == 0;
      if (mergeable) {
        size_t codes = 0, scales = 0;
        for (const auto& p : group) add_packed(format, family, p.n, k, &codes, &scales);
        LinearSegment seg{format, n, k, {static_cast<int64_t>(codes)}};
        if (scales > 0) seg.buffers.push_back(static_cast<int64_t>(scales));
        seg.buffers.push_back(n * static_cast<int64_t>(sizeof(float)));  // the parts' scales as per-row scales
        out.push_back(std::move(seg));
      } else {
        for (const auto& p : group) {
          size_t codes = 0, scales = 0;
          add_packed(format, family, p.n, k, &codes, &scales);
          LinearSegment seg{format, p.n, k, {static_cast<int64_t>(codes)}};
          if (scales > 0) seg.buffers.push_back(static_cast<int64_t>(scales));
          if (p.channel_scales != nullptr) seg.buffers.push_back(p.n * static_cast<int64_t>(sizeof(float)));
          out.push_back(std::move(seg));
        }
      }
    }
    i = j;
  }
  return out;
}

int64_t linear_bytes(std::span<const kernels::HostWeightRef> parts, kernels::KernelFamily family) {
  int64_t total = 0;
  for (const LinearSegment& s : linear_segments(parts, family)) {
    for (int64_t b : s.buffers) total += alloc_bytes(b);
  }
  return total;
}

int64_t linear_scratch_bytes(std::span<const kernels::HostWeightRef> parts, kernels::KernelFamily family, int64_t m) {
  size_t most = 0;
  for (const LinearSegment& s : linear_segments(parts, family)) {
    kernels::PackedWeightView v;
    v.format = s.format;
    v.family = family;
    v.n = s.n;
    v.k = s.k;
    most = std::max(most, kernels::linear_workspace_bytes(v, m));
  }
  return static_cast<int64_t>(most);
}

std::vector<NamedBytes> step_buffers(const StepLimits& limits) {
  const int64_t T = limits.max_tokens;
  constexpr int64_t kTop = kernels::sampling::kMaxTopLogprobs;
  auto bytes = [](int64_t count, size_t elem) { return std::max<int64_t>(count, 1) * static_cast<int64_t>(elem); };
  const int64_t words = (static_cast<int64_t>(limits.vocab_size) + 31) / 32;
  return {
      {"step tokens", bytes(T, sizeof(int32_t))},
      {"step sequences", bytes(limits.max_seqs, sizeof(kernels::SeqDesc))},
      {"step page table", bytes(limits.max_page_refs, sizeof(int32_t))},
      {"step output rows", bytes(T, sizeof(int32_t))},
      {"step sampling parameters", bytes(T, sizeof(kernels::sampling::RowParams))},
      {"step logit_bias ids", bytes(limits.max_bias, sizeof(int32_t))},
      {"step logit_bias values", bytes(limits.max_bias, sizeof(float))},
      {"token masks", bytes(T * words, sizeof(uint32_t))},
      {"token mask ticket", bytes(1, sizeof(uint32_t))},
      {"sampled tokens", bytes(T, sizeof(int32_t))},
      {"logprobs", bytes(T, sizeof(float))},
      {"top ids", bytes(T * kTop, sizeof(int32_t))},
      {"top logprobs", bytes(T * kTop, sizeof(float))},
      {"row status", bytes(T, sizeof(int32_t))},
      {"row NaN index", bytes(T, sizeof(int32_t))},
      {"GDN commit", bytes(1, sizeof(kernels::gdn::Commit))},
      {"accepted runs", bytes(2 * static_cast<int64_t>(limits.max_seqs), sizeof(int32_t))},
      {"penalty counts", bytes(static_cast<int64_t>(limits.n_slots) * limits.vocab_size, sizeof(int32_t))},
      {"penalty prompt bits", bytes(static_cast<int64_t>(limits.n_slots) * words, sizeof(uint32_t))},
  };
}

}  // namespace voltserve::cuda_layout
