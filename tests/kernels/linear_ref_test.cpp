// CPU reference of the quantized linear layer: exact dequantization of NVFP4 (nibble order, e4m3 group scale,
// global scale, per-channel multiplier) and FP8 (per-tensor and per-channel), and y = x W^T against hand-computed values.
#include <catch2/catch_test_macros.hpp>

#include <cmath>
#include <vector>

#include "kernels/linear/linear_ref.h"

using namespace voltserve::kernels;

TEST_CASE("linear_ref dequantizes NVFP4 exactly", "[unit]") {
  // One row, k = 32: bytes 0x21 -> k0 = code 1 (0.5), k1 = code 2 (1.0); 0xF7 -> k2 = 6, k3 = -6.
  std::vector<uint8_t> codes(16, 0);
  codes[0] = 0x21;
  codes[1] = 0xF7;
  codes[8] = 0x9A;  // k16 = code 10 (-1.0), k17 = code 9 (-0.5)
  // Group 0 scale e4m3 0x40 = 2.0; group 1 scale 0x38 = 1.0. Global 0.25.
  std::vector<uint8_t> scales = {0x40, 0x38};
  HostWeightRef w{WeightFormat::kNvfp4, 1, 32, codes.data(), scales.data(), 0.25f};
  std::vector<float> row(32);
  dequantize_row_ref(w, 0, row.data());
  CHECK(row[0] == 0.25f);
  CHECK(row[1] == 0.5f);
  CHECK(row[2] == 3.0f);
  CHECK(row[3] == -3.0f);
  CHECK(row[4] == 0.0f);
  CHECK(row[16] == -0.25f);
  CHECK(row[17] == -0.125f);
  // A per-channel multiplier (rows merged from tensors with different global scales) applies on top.
  const float ch = 3.0f;
  w.channel_scales = &ch;
  dequantize_row_ref(w, 0, row.data());
  CHECK(row[0] == 0.75f);
  CHECK(row[3] == -9.0f);
  CHECK(row[17] == -0.375f);
}

TEST_CASE("linear_ref dequantizes FP8 with tensor and channel scales", "[unit]") {
  std::vector<uint8_t> codes = {0x38, 0xB8, 0x01, 0x7E, 0x40, 0x00, 0x00, 0x00};  // 1, -1, 2^-9, 448 | 2, 0...
  std::vector<float> ch = {1.0f, 3.0f};
  HostWeightRef w{WeightFormat::kFp8, 2, 4, codes.data(), nullptr, 1.0f, 0.5f, ch.data()};
  std::vector<float> row(4);
  dequantize_row_ref(w, 0, row.data());
  CHECK(row[0] == 0.5f);
  CHECK(row[1] == -0.5f);
  CHECK(row[2] == std::ldexp(1.0f, -10));
  CHECK(row[3] == 224.0f);
  dequantize_row_ref(w, 1, row.data());
  CHECK(row[0] == 3.0f);
}

TEST_CASE("linear_ref computes x W^T over all rows and sampled rows", "[unit]") {
  // W (2 x 16 FP8): row 0 all 1.0, row 1 alternating 2, -2. x: 2 rows.
  std::vector<uint8_t> codes(32);
  for (int j = 0; j < 16; ++j) {
    codes[j] = 0x38;
    codes[16 + j] = (j % 2 == 0) ? 0x40 : 0xC0;
  }
  HostWeightRef w{WeightFormat::kFp8, 2, 16, codes.data(), nullptr, 1.0f, 1.0f, nullptr};
  std::vector<float> x(32);
  for (int j = 0; j < 16; ++j) {
    x[j] = static_cast<float>(j);
    x[16 + j] = 1.0f;
  }
  std::vector<float> y(4);
  linear_ref(w, x.data(), 2, y.data(), 2);
  CHECK(y[0] == 120.0f);   // sum 0..15
  CHECK(y[1] == -16.0f);   // 2*(0+2+..+14) - 2*(1+3+..+15) = 2*56 - 2*64
  CHECK(y[2] == 16.0f);
  CHECK(y[3] == 0.0f);
  const int64_t rows[] = {1};
  std::vector<float> ys(2);
  linear_ref_rows(w, rows, x.data(), 2, ys.data(), 1);
  CHECK(ys[0] == -16.0f);
  CHECK(ys[1] == 0.0f);
}
