// quantize_weight and the scalar encoders (see weight_quantize.h).
#include "model/weight_quantize.h"

#include <algorithm>
#include <cmath>
#include <thread>

#include "common/fp_formats.h"

namespace voltserve {
namespace {

constexpr float kE4m3Max = 448.0f;
constexpr float kE2m1Max = 6.0f;

// Rows [0, n) split over threads; body(r0, r1) writes disjoint rows.
template <class Fn>
void for_rows(int64_t n, int threads, Fn body) {
  if (threads <= 0) threads = static_cast<int>(std::min<unsigned>(8, std::max(1u, std::thread::hardware_concurrency())));
  const int64_t per = (n + threads - 1) / threads;
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    const int64_t r0 = t * per, r1 = std::min(n, r0 + per);
    if (r0 >= r1) break;
    pool.emplace_back([=] { body(r0, r1); });
  }
  for (auto& th : pool) th.join();
}

}  // namespace

uint8_t float_to_e4m3(float x) {
  if (std::isnan(x)) return 0x7F;
  const uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
  const float a = std::fabs(x);
  if (a >= kE4m3Max) return sign | 0x7E;  // saturate (there is no infinity)
  constexpr float kMinNormal = 1.0f / 64.0f;  // 2^-6
  if (a < kMinNormal) {
    // Subnormals are m/8 * 2^-6 = m * 2^-9: scale by 2^9 (exact) and round to an integer, ties to even.
    const float m = std::nearbyint(a * 512.0f);
    return sign | static_cast<uint8_t>(m);  // m == 8 is 2^-6, the smallest normal: code 0x08 as well
  }
  int e2 = 0;
  std::frexp(a, &e2);  // a = f * 2^e2, f in [0.5, 1)
  int e = e2 - 1;      // a = (1 + m/8) * 2^e
  float m = std::nearbyint((std::ldexp(a, -e) - 1.0f) * 8.0f);
  if (m >= 8.0f) {
    m = 0.0f;
    ++e;
  }
  const int biased = e + 7;
  if (biased > 15 || (biased == 15 && m > 6.0f)) return sign | 0x7E;
  return sign | static_cast<uint8_t>((biased << 3) | static_cast<int>(m));
}

uint8_t float_to_e2m1(float x) {
  const float a = std::fabs(x);
  // Midpoints between {0, 0.5, 1, 1.5, 2, 3, 4, 6}; a tie goes to the even code (the smaller magnitude here for
  // 0.25, 1.25, 2.5, 5; the larger for 0.75, 1.75, 3.5).
  uint8_t code;
  if (!(a > 0.25f)) {
    code = 0;
  } else if (a < 0.75f) {
    code = 1;
  } else if (a <= 1.25f) {
    code = 2;
  } else if (a < 1.75f) {
    code = 3;
  } else if (a <= 2.5f) {
    code = 4;
  } else if (a < 3.5f) {
    code = 5;
  } else if (a <= 5.0f) {
    code = 6;
  } else {
    code = 7;
  }
  // As ModelOpt's _cast_fp4: the sign bit follows x < 0, so a small negative value is -0 (code 8); -0.0 itself is 0.
  return x < 0.0f ? static_cast<uint8_t>(code | 0x8) : code;
}

Result<std::unique_ptr<QuantizedWeight>> quantize_weight(const kernels::HostWeightRef& w, WeightFormat target,
                                                         int threads) {
  if (w.codes == nullptr) return invalid_argument("quantize_weight: the weight has no data (a synthetic weight)");
  if (w.n <= 0 || w.k <= 0 || w.k % 16 != 0) {
    return invalid_argument("quantize_weight: shape [" + std::to_string(w.n) + ", " + std::to_string(w.k) +
                            "] needs n > 0 and k a positive multiple of 16");
  }
  if (target != WeightFormat::kFp8 && target != WeightFormat::kNvfp4) {
    return invalid_argument("quantize_weight: the target format must be FP8 or NVFP4");
  }
  auto q = std::make_unique<QuantizedWeight>();
  const int64_t n = w.n, k = w.k;
  q->ref.format = target;
  q->ref.n = n;
  q->ref.k = k;
  if (target == WeightFormat::kFp8) {
    q->codes.resize(static_cast<size_t>(n * k));
    q->channel_scales.resize(static_cast<size_t>(n));
    for_rows(n, threads, [&](int64_t r0, int64_t r1) {
      std::vector<float> row(static_cast<size_t>(k));
      for (int64_t r = r0; r < r1; ++r) {
        kernels::dequantize_row_ref(w, r, row.data());
        float amax = 0.0f;
        for (float v : row) amax = std::max(amax, std::fabs(v));
        const float scale = amax > 0.0f ? amax / kE4m3Max : 1.0f;
        q->channel_scales[static_cast<size_t>(r)] = scale;
        uint8_t* out = q->codes.data() + r * k;
        for (int64_t j = 0; j < k; ++j) out[j] = float_to_e4m3(row[static_cast<size_t>(j)] / scale);
      }
    });
    q->ref.codes = q->codes.data();
    q->ref.tensor_scale = 1.0f;
    q->ref.channel_scales = q->channel_scales.data();
    return q;
  }
  // NVFP4: the per-tensor global scale first (one pass for the amax), then codes and group scales per row.
  std::vector<float> row_amax(static_cast<size_t>(n), 0.0f);
  for_rows(n, threads, [&](int64_t r0, int64_t r1) {
    std::vector<float> row(static_cast<size_t>(k));
    for (int64_t r = r0; r < r1; ++r) {
      kernels::dequantize_row_ref(w, r, row.data());
      float amax = 0.0f;
      for (float v : row) amax = std::max(amax, std::fabs(v));
      row_amax[static_cast<size_t>(r)] = amax;
    }
  });
  const float amax = *std::max_element(row_amax.begin(), row_amax.end());
  const float global = amax > 0.0f ? amax / (kE2m1Max * kE4m3Max) : 1.0f;
  q->codes.assign(static_cast<size_t>(n * (k / 2)), 0);
  q->scales.assign(static_cast<size_t>(n * (k / 16)), 0);
  for_rows(n, threads, [&](int64_t r0, int64_t r1) {
    std::vector<float> row(static_cast<size_t>(k));
    for (int64_t r = r0; r < r1; ++r) {
      kernels::dequantize_row_ref(w, r, row.data());
      for (int64_t g = 0; g < k / 16; ++g) {
        const float* x = row.data() + g * 16;
        float bmax = 0.0f;
        for (int i = 0; i < 16; ++i) bmax = std::max(bmax, std::fabs(x[i]));
        // ModelOpt: the block scale in units of the global scale, 1 for an all-zero block; clamped to e4m3's
        // range [2^-9, 448] (where ModelOpt would round a tiny block's scale to 0 and lose the block).
        const float want = bmax == 0.0f ? 1.0f : std::clamp(bmax / (kE2m1Max * global), 1.0f / 512.0f, kE4m3Max);
        const uint8_t s = float_to_e4m3(want);
        q->scales[static_cast<size_t>(r * (k / 16) + g)] = s;
        const float step = fp::e4m3_to_float(s) * global;
        uint8_t* out = q->codes.data() + r * (k / 2) + g * 8;
        for (int i = 0; i < 16; i += 2) {
          const uint8_t lo = float_to_e2m1(x[i] / step), hi = float_to_e2m1(x[i + 1] / step);
          out[i / 2] = static_cast<uint8_t>(lo | (hi << 4));
        }
      }
    }
  });
  q->ref.codes = q->codes.data();
  q->ref.scales = q->scales.data();
  q->ref.global_scale = global;
  return q;
}

}  // namespace voltserve
