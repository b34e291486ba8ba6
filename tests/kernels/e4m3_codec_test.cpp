// Tests of the e4m3 codec of the FP8 KV cache (kernels/common/e4m3_codec.h) against independent references: the
// decoder against ldexp of the format's definition on all 256 codes, the encoder against a nearest-value search over
// the 254 finite codes (ties to the even code, saturation to +-448, NaN kept) on every code, every midpoint between
// neighbours and random floats across the whole exponent range.
#include <catch2/catch_test_macros.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>

#include "kernels/common/e4m3_codec.h"
#include "kernels/common/fp_formats.h"

namespace {

using voltserve::fp::e4m3_to_float;
using voltserve::fp::e4m3x2_to_half2_div256;
using voltserve::fp::f16_to_float;
using voltserve::fp::float_to_e4m3;

// The format's definition, written independently of both codecs: (-1)^s * 2^(e-7) * (1 + m/8), e = 0: 2^-6 * m/8.
double definition(int code) {
  const int s = code >> 7, e = (code >> 3) & 15, m = code & 7;
  if (e == 15 && m == 7) return std::numeric_limits<double>::quiet_NaN();
  const double mag = e == 0 ? std::ldexp(m / 8.0, -6) : std::ldexp(1.0 + m / 8.0, e - 7);
  return s ? -mag : mag;
}

// Nearest finite code to x (ties: the code with an even mantissa), saturating; NaN for NaN.
uint8_t nearest(float x) {
  if (std::isnan(x)) return std::signbit(x) ? 0xFF : 0x7F;
  const double ax = std::fabs(static_cast<double>(x));
  int best = 0;
  double best_err = std::numeric_limits<double>::infinity();
  for (int c = 0; c <= 0x7E; ++c) {
    const double err = std::fabs(definition(c) - ax);
    if (err < best_err || (err == best_err && (c & 1) == 0)) {
      best = c;
      best_err = err;
    }
  }
  if (ax >= 448.0) best = 0x7E;
  return static_cast<uint8_t>((std::signbit(x) ? 0x80 : 0) | best);
}

float from_bits(uint32_t b) {
  float f;
  std::memcpy(&f, &b, sizeof f);
  return f;
}

}  // namespace

TEST_CASE("e4m3 decoders agree with the format's definition on all 256 codes", "[unit]") {
  int nan_codes = 0;
  for (int c = 0; c < 256; ++c) {
    INFO("code " << c);
    const double want = definition(c);
    const float got = e4m3_to_float(static_cast<uint8_t>(c));
    // The fast KV decoder: half bits of value / 256, the code in either half of the pair.
    const uint32_t lo = e4m3x2_to_half2_div256(static_cast<uint32_t>(c) | (0x38u << 8));  // other half: 1.0
    const uint32_t hi = e4m3x2_to_half2_div256(0x38u | (static_cast<uint32_t>(c) << 8));
    const float fast_lo = f16_to_float(static_cast<uint16_t>(lo & 0xFFFF)) * 256.0f;
    const float fast_hi = f16_to_float(static_cast<uint16_t>(hi >> 16)) * 256.0f;
    CHECK(f16_to_float(static_cast<uint16_t>(lo >> 16)) * 256.0f == 1.0f);
    CHECK(f16_to_float(static_cast<uint16_t>(hi & 0xFFFF)) * 256.0f == 1.0f);
    if (std::isnan(want)) {
      ++nan_codes;
      CHECK(std::isnan(got));
      CHECK(std::isnan(fast_lo));
      CHECK(std::isnan(fast_hi));
    } else {
      CHECK(static_cast<double>(got) == want);
      CHECK(static_cast<double>(fast_lo) == want);
      CHECK(static_cast<double>(fast_hi) == want);
      CHECK(std::signbit(got) == (c >= 128));
      // Every finite code round-trips through the encoder.
      CHECK(float_to_e4m3(got) == c);
    }
  }
  CHECK(nan_codes == 2);
  CHECK(e4m3_to_float(0x7E) == 448.0f);
  CHECK(e4m3_to_float(0x01) == std::ldexp(1.0f, -9));
}

TEST_CASE("e4m3 encoder rounds to nearest even, saturates and keeps NaN", "[unit]") {
  // Every midpoint between neighbouring codes (ties go to the even mantissa) and just either side of it.
  for (int c = 0; c < 0x7E; ++c) {
    const double mid = (definition(c) + definition(c + 1)) / 2;
    const float m = static_cast<float>(mid);
    REQUIRE(static_cast<double>(m) == mid);  // midpoints are exact in fp32
    INFO("midpoint after code " << c);
    CHECK(float_to_e4m3(m) == nearest(m));
    CHECK(float_to_e4m3(m) == ((c & 1) ? c + 1 : c));
    CHECK(float_to_e4m3(-m) == (0x80 | nearest(m)));
    CHECK(float_to_e4m3(std::nextafter(m, 0.0f)) == c);
    CHECK(float_to_e4m3(std::nextafter(m, 1e9f)) == c + 1);
  }
  CHECK(float_to_e4m3(448.0f) == 0x7E);
  CHECK(float_to_e4m3(463.9f) == 0x7E);
  CHECK(float_to_e4m3(464.0f) == 0x7E);  // would round to 480, the NaN code: saturates
  CHECK(float_to_e4m3(1e30f) == 0x7E);
  CHECK(float_to_e4m3(-1e30f) == 0xFE);
  CHECK(float_to_e4m3(std::numeric_limits<float>::infinity()) == 0x7E);
  CHECK(float_to_e4m3(-std::numeric_limits<float>::infinity()) == 0xFE);
  CHECK(float_to_e4m3(std::numeric_limits<float>::quiet_NaN()) == 0x7F);
  CHECK(float_to_e4m3(-std::numeric_limits<float>::quiet_NaN()) == 0xFF);
  CHECK(float_to_e4m3(0.0f) == 0x00);
  CHECK(float_to_e4m3(-0.0f) == 0x80);
  CHECK(float_to_e4m3(std::ldexp(1.0f, -10)) == 0x00);               // half the smallest subnormal: tie to 0
  CHECK(float_to_e4m3(std::nextafter(std::ldexp(1.0f, -10), 1.0f)) == 0x01);
  CHECK(float_to_e4m3(std::numeric_limits<float>::denorm_min()) == 0x00);
}

TEST_CASE("e4m3 encoder matches the nearest-value search on random floats", "[unit]") {
  std::mt19937_64 rng(20261202);
  int64_t subnormal = 0, saturated = 0, normal = 0;
  for (int i = 0; i < 400000; ++i) {
    float x;
    if (i % 2 == 0) {
      // Random bits with the exponent drawn around e4m3's range (2^-12 .. 2^10), random sign and mantissa.
      const uint32_t e = static_cast<uint32_t>(127 - 12 + static_cast<int>(rng() % 23));
      x = from_bits(static_cast<uint32_t>((rng() & 1) << 31) | (e << 23) | static_cast<uint32_t>(rng() & 0x7FFFFF));
    } else {
      x = from_bits(static_cast<uint32_t>(rng()));  // any fp32, incl. inf, NaN, fp32 subnormals
    }
    const uint8_t want = nearest(x);
    const uint8_t got = float_to_e4m3(x);
    if (std::isnan(x)) {
      REQUIRE((got & 0x7F) == 0x7F);
      continue;
    }
    if (got != want) FAIL("x = " << x << " got " << int(got) << " want " << int(want));
    const float ax = std::fabs(x);
    if (ax < std::ldexp(1.0f, -6)) ++subnormal;
    else if (ax >= 448.0f) ++saturated;
    else ++normal;
  }
  CHECK(subnormal > 10000);
  CHECK(saturated > 10000);
  CHECK(normal > 10000);
}
