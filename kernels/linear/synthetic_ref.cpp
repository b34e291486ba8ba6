// synthetic_fill_host (see synthetic.h): checkpoint-order synthetic weights for the CPU backend.
#include <cstring>

#include "linear/linear_ref.h"
#include "linear/synthetic.h"

namespace voltserve::kernels {

HostWeightRef synthetic_fill_host(const HostWeightRef& w, std::vector<uint8_t>& codes, std::vector<uint8_t>& scales,
                                  std::vector<float>& dense) {
  HostWeightRef r = w;
  const uint64_t seed = w.synthetic_seed;
  if (w.format == WeightFormat::kNvfp4) {
    codes.resize(static_cast<size_t>(w.n * w.k / 2));
    scales.resize(static_cast<size_t>(w.n * w.k / 16));
    for (size_t i = 0; i < codes.size(); ++i) codes[i] = static_cast<uint8_t>(synthetic_hash(seed, i) >> 24);
    for (size_t i = 0; i < scales.size(); ++i) scales[i] = synthetic_nvfp4_scale(synthetic_hash(seed ^ 0x5ca1e, i));
    r.codes = codes.data();
    r.scales = scales.data();
    r.global_scale = kSyntheticNvfp4GlobalScale;
  } else if (w.format == WeightFormat::kFp8) {
    codes.resize(static_cast<size_t>(w.n * w.k));
    for (size_t i = 0; i < codes.size(); ++i) codes[i] = synthetic_fp8_code(synthetic_hash(seed, i));
    r.codes = codes.data();
    r.tensor_scale = kSyntheticFp8TensorScale;
    r.channel_scales = nullptr;
  } else {
    dense.resize(static_cast<size_t>(w.n * w.k));
    for (size_t i = 0; i < dense.size(); ++i) dense[i] = synthetic_dense_value(synthetic_hash(seed, i));
    r.codes = reinterpret_cast<const uint8_t*>(dense.data());
    r.dense_dtype = DType::kF32;
  }
  return r;
}

}  // namespace voltserve::kernels
