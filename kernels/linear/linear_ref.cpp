// CPU reference for kernels/linear (see linear_ref.h): exact dequantization through common/fp_formats.h.
#include "linear/linear_ref.h"

#include <algorithm>
#include <cstring>
#include <thread>
#include <vector>

#include "common/fp_formats.h"

namespace voltserve::kernels {

void dequantize_row_ref(const HostWeightRef& w, int64_t row, float* out) {
  if (w.format == WeightFormat::kNvfp4) {
    const uint8_t* codes = w.codes + row * (w.k / 2);
    const uint8_t* scales = w.scales + row * (w.k / 16);
    const float channel = w.channel_scales != nullptr ? w.channel_scales[row] : 1.0f;
    for (int64_t j = 0; j < w.k; ++j) {
      const uint8_t byte = codes[j / 2];
      const uint8_t code = (j % 2 == 0) ? (byte & 0xF) : (byte >> 4);
      out[j] = fp::e2m1_to_float(code) * fp::e4m3_to_float(scales[j / 16]) * w.global_scale * channel;
    }
  } else if (w.format == WeightFormat::kDense) {
    const float channel = w.channel_scales != nullptr ? w.channel_scales[row] : 1.0f;
    const size_t elem = dtype_bytes(w.dense_dtype);
    const uint8_t* p = w.codes + static_cast<size_t>(row * w.k) * elem;
    for (int64_t j = 0; j < w.k; ++j) {
      float v = 0.0f;
      if (w.dense_dtype == DType::kF32) {
        std::memcpy(&v, p + 4 * j, 4);
      } else {
        uint16_t h;
        std::memcpy(&h, p + 2 * j, 2);
        v = w.dense_dtype == DType::kBF16 ? fp::bf16_to_float(h) : fp::f16_to_float(h);
      }
      out[j] = v * channel;
    }
  } else {
    const uint8_t* codes = w.codes + row * w.k;
    const float s = w.tensor_scale * (w.channel_scales != nullptr ? w.channel_scales[row] : 1.0f);
    for (int64_t j = 0; j < w.k; ++j) out[j] = fp::e4m3_to_float(codes[j]) * s;
  }
}

void linear_ref_rows(const HostWeightRef& w, std::span<const int64_t> rows, const float* x, int64_t m, float* y,
                     int threads) {
  const int64_t nr = static_cast<int64_t>(rows.size());
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  threads = static_cast<int>(std::min<int64_t>(threads, std::max<int64_t>(1, nr / 8)));
  auto work = [&](int64_t begin, int64_t end) {
    std::vector<float> wrow(static_cast<size_t>(w.k));
    for (int64_t j = begin; j < end; ++j) {
      dequantize_row_ref(w, rows[j], wrow.data());
      for (int64_t i = 0; i < m; ++i) {
        const float* xi = x + i * w.k;
        double acc = 0.0;
        for (int64_t kk = 0; kk < w.k; ++kk) acc += static_cast<double>(xi[kk]) * wrow[kk];
        y[i * nr + j] = static_cast<float>(acc);
      }
    }
  };
  if (threads == 1) {
    work(0, nr);
    return;
  }
  std::vector<std::thread> pool;
  const int64_t chunk = (nr + threads - 1) / threads;
  for (int t = 0; t < threads; ++t) {
    const int64_t b = t * chunk;
    const int64_t e = std::min(nr, b + chunk);
    if (b < e) pool.emplace_back(work, b, e);
  }
  for (auto& th : pool) th.join();
}

void linear_ref(const HostWeightRef& w, const float* x, int64_t m, float* y, int threads) {
  std::vector<int64_t> rows(static_cast<size_t>(w.n));
  for (int64_t i = 0; i < w.n; ++i) rows[i] = i;
  linear_ref_rows(w, rows, x, m, y, threads);
}

}  // namespace voltserve::kernels
