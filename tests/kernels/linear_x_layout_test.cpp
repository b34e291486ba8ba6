// Activation layouts (kernels/linear/x_layout.h): each maps the m x k elements one-to-one into its buffer, and the
// token-chunked layout is the order of an sm80 warp's x loads (sm80_kmap.h). Runs on the CPU.
#include <catch2/catch_test_macros.hpp>

#include <vector>

#include "kernels/linear/sm80_kmap.h"
#include "kernels/linear/x_layout.h"

using namespace voltserve::kernels;

TEST_CASE("x layouts are one-to-one onto their buffers", "[unit]") {
  for (XLayout layout : {XLayout::kRowMajor, XLayout::kTokenChunked}) {
    for (int64_t m = 1; m <= kChunkedMaxRows; ++m) {
      for (int64_t k : {16, 80, 1104}) {
        const int64_t size = x_buffer_halves(layout, m, k);
        REQUIRE(size >= m * k);
        std::vector<int> hits(static_cast<size_t>(size), 0);
        for (int64_t tok = 0; tok < m; ++tok)
          for (int64_t kk = 0; kk < k; ++kk) {
            const int64_t o = x_offset(layout, k, tok, kk);
            REQUIRE(o >= 0);
            REQUIRE(o < size);
            ++hits[static_cast<size_t>(o)];
          }
        int64_t used = 0;
        for (int h : hits) {
          REQUIRE(h <= 1);
          used += h;
        }
        CHECK(used == m * k);
      }
    }
  }
  CHECK(x_buffer_halves(XLayout::kTokenChunked, 9, 64) == 16 * 64);  // room for two whole token tiles
  CHECK(x_buffer_halves(XLayout::kTokenChunked, 8, 80) == 8 * 128);   // and whole 64-k blocks
}

TEST_CASE("token-chunked x is the order in which an sm80 warp loads x", "[unit]") {
  for (int64_t k : {64, 80, 5120}) {
    const int64_t kp = (k + 63) / 64 * 64;
    // Load i of a 64-k block b (NVFP4: a lane's two 16-byte loads; FP8: k-block 2b + i) by lane (g, t) = 4g + t
    // reads token slot g's k values from sm80_lane_k0: 16 bytes at lane * 16 bytes from the load's start, so each
    // quarter-warp (8 lanes) reads one 128-byte line.
    for (int64_t b = 0; b < kp / 64; ++b)
      for (int i = 0; i < 2; ++i)
        for (int lane = 0; lane < 32; ++lane) {
          const int g = lane / 4;
          const int t = lane % 4;
          const int64_t want = b * 512 + i * 256 + lane * 8;
          CHECK(x_offset(XLayout::kTokenChunked, k, g, sm80_lane_k0(false, b, t) + 8 * i) == want);
          CHECK(x_offset(XLayout::kTokenChunked, k, g, sm80_lane_k0(true, 2 * b + i, t)) == want);
          CHECK(x_offset(XLayout::kTokenChunked, k, 8 + g, sm80_lane_k0(true, 2 * b + i, t)) == 8 * kp + want);
        }
    // Inside a 16-byte chunk k is contiguous.
    CHECK(x_offset(XLayout::kTokenChunked, k, 3, 17) == x_offset(XLayout::kTokenChunked, k, 3, 16) + 1);
  }
  CHECK(x_offset(XLayout::kRowMajor, 64, 9, 5) == 9 * 64 + 5);
}

TEST_CASE("x layout steps agree with x_offset", "[unit]") {
  for (XLayout layout : {XLayout::kRowMajor, XLayout::kTokenChunked}) {
    for (int64_t tok : {0, 5, 11}) {
      for (int64_t kk = 0; kk < 256; kk += 16) {
        const int64_t at = x_offset(layout, 1104, tok, kk);
        for (int c = 0; kk % 64 + 8 * c < 64; ++c) {
          CHECK(x_offset(layout, 1104, tok, kk + 8 * c) - at == x_chunk_step(layout, c));
        }
        CHECK(x_offset(layout, 1104, tok, kk + 64) - at == x_block_step(layout));
      }
    }
  }
}

TEST_CASE("padded tokens read a written token of their own cache line", "[unit]") {
  for (int64_t m = 1; m <= kChunkedMaxRows; ++m) {
    const int64_t tiles = (m + 7) / 8;
    for (int64_t tok = 0; tok < tiles * 8; ++tok) {
      const int64_t src = x_pad_source(XLayout::kTokenChunked, m, tok);
      INFO("m " << m << " tok " << tok << " src " << src);
      CHECK(src < m);               // written by the caller
      CHECK(src / 8 == tok / 8);    // same token tile
      if (tok < m) CHECK(src == tok);
      CHECK(x_pad_source(XLayout::kRowMajor, m, tok) == (tok < m ? tok : 0));
    }
    // Every quarter-warp phase of an sm80 x load (slots 2p and 2p + 1, lanes t = 0..3) reads one 128-byte line.
    for (int64_t k : {64, 1104}) {
      for (int64_t tile = 0; tile < tiles; ++tile)
        for (int64_t b = 0; b < (k + 63) / 64; ++b)
          for (int i = 0; i < 2; ++i)
            for (int p = 0; p < 4; ++p) {
              int64_t line = -1;
              bool one_line = true;
              for (int slot = 2 * p; slot < 2 * p + 2; ++slot)
                for (int t = 0; t < 4; ++t) {
                  const int64_t src = x_pad_source(XLayout::kTokenChunked, m, tile * 8 + slot);
                  const int64_t l = x_offset(XLayout::kTokenChunked, k, src, sm80_lane_k0(false, b, t) + 8 * i) / 64;
                  if (line >= 0 && l != line) one_line = false;
                  line = l;
                }
              INFO("m " << m << " k " << k << " tile " << tile << " block " << b << " load " << i << " phase " << p);
              CHECK(one_line);
            }
    }
  }
}
