// The load-time quantizer (model/weight_quantize.h): the e4m3 and e2m1 encoders against the exact decoders (every
// code, every midpoint, saturation), FP8 per-row and NVFP4 (ModelOpt's recipe) weights against their source through
// the one reference dequantizer, and the errors.
#include <catch2/catch_test_macros.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "common/fp_formats.h"
#include "model/weight_quantize.h"
#include "support/test_rng.h"

using namespace voltserve;

namespace {

// A BF16 weight [n, k] with rows of very different scales (as lm_head rows are), values ~ N(0, s_r).
struct Bf16Weight {
  std::vector<uint16_t> bits;
  kernels::HostWeightRef ref;
};
Bf16Weight make_weight(int64_t n, int64_t k, uint64_t seed) {
  testing::TestRng rng(seed);
  Bf16Weight w;
  w.bits.resize(static_cast<size_t>(n * k));
  for (int64_t r = 0; r < n; ++r) {
    const double scale = std::ldexp(1.0, static_cast<int>(r % 7) - 4);
    for (int64_t j = 0; j < k; ++j) {
      const double u1 = std::max(rng.next_double(), 1e-12), u2 = rng.next_double();
      float v = static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2) * scale);
      uint32_t u;
      std::memcpy(&u, &v, 4);
      w.bits[static_cast<size_t>(r * k + j)] = static_cast<uint16_t>((u + 0x7FFF + ((u >> 16) & 1)) >> 16);
    }
  }
  w.ref.format = WeightFormat::kDense;
  w.ref.dense_dtype = DType::kBF16;
  w.ref.n = n;
  w.ref.k = k;
  w.ref.codes = reinterpret_cast<const uint8_t*>(w.bits.data());
  return w;
}

// ||dequant(q) - w||^2 / ||w||^2 over the whole weight.
double normalised_error(const kernels::HostWeightRef& w, const kernels::HostWeightRef& q) {
  std::vector<float> a(static_cast<size_t>(w.k)), b(static_cast<size_t>(w.k));
  double num = 0, den = 0;
  for (int64_t r = 0; r < w.n; ++r) {
    kernels::dequantize_row_ref(w, r, a.data());
    kernels::dequantize_row_ref(q, r, b.data());
    for (int64_t j = 0; j < w.k; ++j) {
      num += (double(a[j]) - b[j]) * (double(a[j]) - b[j]);
      den += double(a[j]) * a[j];
    }
  }
  return num / den;
}

}  // namespace

TEST_CASE("float_to_e4m3: every finite code round-trips, midpoints go to the even code, saturation at 448", "[unit]") {
  for (int c = 0; c < 256; ++c) {
    if ((c & 0x7F) == 0x7F) continue;  // NaN
    INFO("code " << c);
    CHECK(float_to_e4m3(fp::e4m3_to_float(static_cast<uint8_t>(c))) == c);
  }
  for (int c = 0; c < 0x7E; ++c) {  // consecutive positive codes
    const float lo = fp::e4m3_to_float(static_cast<uint8_t>(c)), hi = fp::e4m3_to_float(static_cast<uint8_t>(c + 1));
    const float mid = 0.5f * (lo + hi);
    INFO("between codes " << c << " and " << c + 1);
    CHECK(float_to_e4m3(mid) == ((c % 2 == 0) ? c : c + 1));
    CHECK(float_to_e4m3(std::nextafter(mid, 0.0f)) == c);
    CHECK(float_to_e4m3(std::nextafter(mid, 1000.0f)) == c + 1);
    CHECK(float_to_e4m3(-mid) == (((c % 2 == 0) ? c : c + 1) | 0x80));
  }
  CHECK(float_to_e4m3(448.0f) == 0x7E);
  CHECK(float_to_e4m3(460.0f) == 0x7E);
  CHECK(float_to_e4m3(1e30f) == 0x7E);
  CHECK(float_to_e4m3(-1e30f) == 0xFE);
  CHECK(float_to_e4m3(std::nanf("")) == 0x7F);
  CHECK(float_to_e4m3(1e-30f) == 0x00);
}

TEST_CASE("float_to_e2m1: codes round-trip, ties to the even code, saturation at 6", "[unit]") {
  for (int c = 0; c < 16; ++c) {
    if (c == 8) continue;  // -0 encodes as +0
    CHECK(float_to_e2m1(fp::e2m1_to_float(static_cast<uint8_t>(c))) == c);
  }
  const float mags[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
  for (int c = 0; c < 7; ++c) {
    const float mid = 0.5f * (mags[c] + mags[c + 1]);
    INFO("between " << mags[c] << " and " << mags[c + 1]);
    CHECK(float_to_e2m1(mid) == ((c % 2 == 0) ? c : c + 1));
    CHECK(float_to_e2m1(std::nextafter(mid, 0.0f)) == c);
    CHECK(float_to_e2m1(std::nextafter(mid, 100.0f)) == c + 1);
  }
  CHECK(float_to_e2m1(100.0f) == 7);
  CHECK(float_to_e2m1(-100.0f) == 15);
  CHECK(float_to_e2m1(-0.1f) == 8);  // ModelOpt keeps the sign of a negative value that rounds to zero
  CHECK(float_to_e2m1(-0.0f) == 0);
}

TEST_CASE("quantize_weight FP8: one scale per row, the row's largest value lands on 448 exactly", "[unit]") {
  const Bf16Weight w = make_weight(37, 128, 7);
  auto q = quantize_weight(w.ref, WeightFormat::kFp8, 3);
  REQUIRE(q.is_ok());
  const kernels::HostWeightRef& r = q.value()->ref;
  CHECK(r.format == WeightFormat::kFp8);
  REQUIRE(r.channel_scales != nullptr);
  std::vector<float> row(128);
  for (int64_t i = 0; i < r.n; ++i) {
    kernels::dequantize_row_ref(w.ref, i, row.data());
    float amax = 0;
    for (float v : row) amax = std::max(amax, std::fabs(v));
    CHECK(r.channel_scales[i] == amax / 448.0f);
  }
  // e4m3 keeps 3 mantissa bits: relative error per value <= 2^-4, so the normalised error stays well below 1%.
  const double e = normalised_error(w.ref, r);
  CHECK(e < 1e-2 * 1e-1);
  CHECK(e > 0.0);
}

TEST_CASE("quantize_weight NVFP4: ModelOpt's global and group scales, exact on a weight of grid values", "[unit]") {
  // Row 0: one group holding every e2m1 magnitude times 0.25 and amax 6 * 0.25 = 1.5 -> exact.
  std::vector<float> vals(2 * 32, 0.0f);
  const float grid[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
  for (int i = 0; i < 16; ++i) vals[i] = (i % 2 ? -1.0f : 1.0f) * grid[i % 8] * 0.25f;
  for (int i = 16; i < 64; ++i) vals[i] = 0.125f * static_cast<float>((i % 5) - 2);
  kernels::HostWeightRef w;
  w.format = WeightFormat::kDense;
  w.dense_dtype = DType::kF32;
  w.n = 2;
  w.k = 32;
  w.codes = reinterpret_cast<const uint8_t*>(vals.data());
  auto q = quantize_weight(w, WeightFormat::kNvfp4, 1);
  REQUIRE(q.is_ok());
  const kernels::HostWeightRef& r = q.value()->ref;
  CHECK(r.global_scale == 1.5f / (6.0f * 448.0f));
  // The group's scale is 448 (its amax over 6 * global) and every value is a grid point times 0.25: the codes are
  // exact, the dequantized values exact up to the rounding of the global scale.
  CHECK(q.value()->scales[0] == float_to_e4m3(448.0f));
  std::vector<float> back(32);
  kernels::dequantize_row_ref(r, 0, back.data());
  for (int i = 0; i < 16; ++i) {
    const uint8_t byte = q.value()->codes[static_cast<size_t>(i / 2)];
    CHECK(((i % 2) ? byte >> 4 : byte & 0xF) == float_to_e2m1(vals[i] / 0.25f));
    CHECK(std::fabs(back[i] - vals[i]) <= 1e-6f * std::fabs(vals[i]));
  }

  // A realistic weight: NVFP4's 8 levels per group of 16 give a normalised error of about 1%.
  const Bf16Weight big = make_weight(64, 256, 11);
  auto qb = quantize_weight(big.ref, WeightFormat::kNvfp4, 0);
  REQUIRE(qb.is_ok());
  const double e = normalised_error(big.ref, qb.value()->ref);
  CHECK(e < 2e-2);
  CHECK(e > 1e-4);
}

TEST_CASE("quantize_weight refuses what it cannot quantize, naming why", "[unit]") {
  Bf16Weight w = make_weight(4, 48, 3);
  kernels::HostWeightRef synthetic = w.ref;
  synthetic.codes = nullptr;
  auto a = quantize_weight(synthetic, WeightFormat::kFp8);
  REQUIRE_FALSE(a.is_ok());
  CHECK(a.status().message().find("synthetic") != std::string::npos);
  kernels::HostWeightRef odd = w.ref;
  odd.k = 40;
  auto b = quantize_weight(odd, WeightFormat::kNvfp4);
  REQUIRE_FALSE(b.is_ok());
  CHECK(b.status().message().find("multiple of 16") != std::string::npos);
  auto c = quantize_weight(w.ref, WeightFormat::kDense);
  REQUIRE_FALSE(c.is_ok());
}
