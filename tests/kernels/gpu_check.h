// Shared pieces of the GPU kernel tests of the portable ops (norm, elementwise): device detection, device buffers,
// matrices inside guard bytes (the bytes around and between the rows must come back untouched; the rows' own
// elements start as NaN poison so that an unwritten element shows), normalised error, seeded random data.
#pragma once

#include <catch2/catch_test_macros.hpp>

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "linear_random.h"

namespace voltserve::test {

#define CUDA_REQUIRE(call)                                                                   \
  do {                                                                                       \
    const cudaError_t e_ = (call);                                                           \
    INFO(#call << " -> " << cudaGetErrorString(e_) << " at " << __FILE__ << ":" << __LINE__); \
    REQUIRE(e_ == cudaSuccess);                                                              \
  } while (0)

inline bool have_device() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
}

struct DeviceBuffer {
  void* p = nullptr;
  size_t bytes = 0;
  explicit DeviceBuffer(size_t b) : bytes(b) {
    if (cudaMalloc(&p, b) != cudaSuccess) p = nullptr;
  }
  ~DeviceBuffer() {
    if (p != nullptr) cudaFree(p);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
};

inline constexpr size_t kGuard = 256;
inline constexpr uint8_t kGuardByte = 0xA5;

// A device matrix [rows, stride] of `elem`-byte elements whose first n of each row are in use, `shift` bytes past a
// 256-byte boundary (shift 4 misaligns 16-byte access), with kGuard guard bytes before and after. Every byte that is
// not a used element holds kGuardByte and must still hold it after a kernel (check_untouched).
struct GuardedMatrix {
  int64_t rows = 0, n = 0, stride = 0;
  size_t elem = 4, shift = 0;
  std::unique_ptr<DeviceBuffer> buf;

  GuardedMatrix(int64_t rows_, int64_t n_, int64_t stride_, size_t elem_, size_t shift_ = 0)
      : rows(rows_), n(n_), stride(stride_), elem(elem_), shift(shift_) {
    buf = std::make_unique<DeviceBuffer>(total());
    REQUIRE(buf->p != nullptr);
  }
  size_t span() const { return rows > 0 ? static_cast<size_t>(((rows - 1) * stride + n)) * elem : 0; }
  size_t total() const { return kGuard + shift + span() + kGuard; }
  void* data() const { return static_cast<char*>(buf->p) + kGuard + shift; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(data());
  }
  bool used(size_t byte) const {  // byte offset from data()
    const size_t e = byte / elem;
    return byte < span() && static_cast<int64_t>(e % static_cast<size_t>(stride)) < n;
  }
  // Uploads dense rows [rows, n] (rows * n * elem bytes; nullptr: NaN poison 0xFF) and guard bytes everywhere else.
  void upload(const void* dense) const {
    std::vector<uint8_t> img(total(), kGuardByte);
    for (int64_t r = 0; r < rows; ++r) {
      uint8_t* dst = img.data() + kGuard + shift + static_cast<size_t>(r * stride) * elem;
      if (dense != nullptr) {
        std::memcpy(dst, static_cast<const uint8_t*>(dense) + static_cast<size_t>(r * n) * elem, static_cast<size_t>(n) * elem);
      } else {
        std::memset(dst, 0xFF, static_cast<size_t>(n) * elem);
      }
    }
    CUDA_REQUIRE(cudaMemcpy(buf->p, img.data(), img.size(), cudaMemcpyHostToDevice));
  }
  // Downloads the used elements as dense rows; *untouched says whether every other byte still holds kGuardByte, and
  // *first_bad names the first that does not (byte offset from data(), negative: before it).
  std::vector<uint8_t> download(bool* untouched, int64_t* first_bad) const {
    std::vector<uint8_t> img(total());
    CUDA_REQUIRE(cudaMemcpy(img.data(), buf->p, img.size(), cudaMemcpyDeviceToHost));
    *untouched = true;
    *first_bad = 0;
    const size_t base = kGuard + shift;
    for (size_t i = 0; i < img.size(); ++i) {
      const bool in_use = i >= base && used(i - base);
      if (!in_use && img[i] != kGuardByte && *untouched) {
        *untouched = false;
        *first_bad = static_cast<int64_t>(i) - static_cast<int64_t>(base);
      }
    }
    std::vector<uint8_t> dense(static_cast<size_t>(rows * n) * elem);
    for (int64_t r = 0; r < rows; ++r) {
      std::memcpy(dense.data() + static_cast<size_t>(r * n) * elem, img.data() + base + static_cast<size_t>(r * stride) * elem,
                  static_cast<size_t>(n) * elem);
    }
    return dense;
  }
};

// ||a - b||^2 / ||b||^2 over float vectors, the NaNs of a counted (and the first one's index) and the first index
// where |a - b| exceeds `report_above` (for the failure line).
struct ErrorStats {
  double err = 0.0;
  size_t nan = 0, first_nan = 0, first_off = 0;
  bool any_off = false;
};

inline ErrorStats normalised_error(const std::vector<float>& a, const std::vector<float>& b, double report_above) {
  ErrorStats s;
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i])) {
      if (s.nan++ == 0) s.first_nan = i;
      continue;
    }
    const double d = static_cast<double>(a[i]) - b[i];
    num += d * d;
    den += static_cast<double>(b[i]) * b[i];
    if (!s.any_off && std::fabs(d) > report_above * (1.0 + std::fabs(b[i]))) {
      s.any_off = true;
      s.first_off = i;
    }
  }
  s.err = den > 0 ? num / den : num;
  return s;
}

// fp16 bits of a dense device-order vector to floats.
inline std::vector<float> f16_to_floats(const std::vector<uint8_t>& bytes) {
  std::vector<float> out(bytes.size() / 2);
  for (size_t i = 0; i < out.size(); ++i) {
    uint16_t h;
    std::memcpy(&h, bytes.data() + 2 * i, 2);
    out[i] = fp::f16_to_float(h);
  }
  return out;
}

inline std::vector<float> bytes_to_floats(const std::vector<uint8_t>& bytes) {
  std::vector<float> out(bytes.size() / 4);
  if (!out.empty()) std::memcpy(out.data(), bytes.data(), bytes.size());
  return out;
}

// Uniform in [lo, hi) with about 1% of the values scaled by `outlier`.
inline std::vector<float> random_floats(size_t count, double lo, double hi, double outlier, SplitMix& rng) {
  std::vector<float> v(count);
  for (auto& x : v) {
    double u = lo + (hi - lo) * rng.uniform();
    if (rng.next() % 100 == 0) u *= outlier;
    x = static_cast<float>(u);
  }
  return v;
}

}  // namespace voltserve::test
