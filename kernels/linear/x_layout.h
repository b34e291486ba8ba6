// Layouts of the activations x [m, k] (fp16) that linear_forward reads, shared by the kernels (device) and by the
// code that writes x (host or device). Tested by tests/kernels/linear_x_layout_test.cpp (a bijection into the
// buffer) and, through the kernels, by tests/kernels/linear_gpu_test.cpp (bit-identical to row-major).
//
// kRowMajor: element (tok, kk) at tok * k + kk.
// kTokenChunked (decode, m <= 16): tokens in tiles of 8 (tile T = tok / 8, slot s = tok % 8), k in blocks
// of 64 (kp = k rounded up to 64), each block cut into 16-byte chunks of 8 k values, even chunks before odd ones:
//   element (tok, kk) at T * 8 * kp + (kk / 64) * 512 + ((kk / 8) % 2) * 256 + s * 32 + ((kk / 16) % 4) * 8 + kk % 8.
// That is the order in which an sm80 warp loads x for one token tile (sm80_kmap.h: lane (g, t) reads token slot g's
// chunk 2t + i of a 64-k block with its load i), so the 8 lanes of each quarter-warp phase of a 16-byte load read
// one whole 128-byte line: 4 lines per load instead of up to 8 half-used ones from the token rows (row-major can cost
// more with every token from 2 to 8: gdn.in_proj_qkv NVFP4 ran 7 points slower at M = 7 than at M = 1,
// bench/RESULTS.md). With two token tiles (m = 9..16) the x loads are the decode kernel's largest L1 cost.
// The buffer holds ceil(m / 8) * 8 * kp halves: the slots of tokens m.. (padding of the last tile) and k values k..
// are never read (a padded token's lanes read a real token of their own line, x_pad_source).
#pragma once

#include <cstdint>

#include "common/host_device.h"

namespace voltserve::kernels {

enum class XLayout : int { kRowMajor = 0, kTokenChunked = 1 };

inline constexpr int64_t kChunkedMaxRows = 16;  // the token-chunked layout is for the decode path, m <= 16
// The layout to write for best speed: row-major for one token (dense: chunked spreads a lone token over a tile's 8
// slots, and measured 3-5 points slower on the merged 27B projections), token-chunked from 2 tokens on.
inline constexpr int64_t kChunkedPreferredMinRows = 2;

// Halves of the buffer x occupies in `layout` (k a multiple of 16).
VS_HD int64_t x_buffer_halves(XLayout layout, int64_t m, int64_t k) {
  return layout == XLayout::kRowMajor ? m * k : (m + 7) / 8 * 8 * ((k + 63) / 64 * 64);
}

// Offset in halves of element (tok, kk) of x in `layout`.
VS_HD int64_t x_offset(XLayout layout, int64_t k, int64_t tok, int64_t kk) {
  if (layout == XLayout::kRowMajor) return tok * k + kk;
  const int64_t kp = (k + 63) / 64 * 64;
  return tok / 8 * 8 * kp + kk / 64 * 512 + (kk / 8) % 2 * 256 + tok % 8 * 32 + (kk / 16) % 4 * 8 + kk % 8;
}

// Steps between one token's elements, for kernels that walk x with constant strides: from the 16-byte chunk at kk (a
// multiple of 16) to the one 8 * c values on, as long as both lie in one 64-k block...
VS_HD constexpr int64_t x_chunk_step(XLayout layout, int c) {
  return layout == XLayout::kRowMajor ? 8 * c : (c % 2) * 256 + (c / 2) * 8;
}

// ... and from kk to kk + 64.
VS_HD constexpr int64_t x_block_step(XLayout layout) { return layout == XLayout::kRowMajor ? 64 : 512; }

// The token whose x the lanes of token `tok` read in a decode kernel when tok >= m (padding of the last token tile;
// its MMA column is never written): in the token-chunked layout the other slot of its pair (slots 2p and 2p + 1 share
// each 128-byte line) when that token is real, else the tile's first token, so that a quarter-warp phase (one slot
// pair) still reads one cache line and nothing outside the written slots is read; row-major, token 0. m >= 1;
// tok < m returns tok.
VS_HD int64_t x_pad_source(XLayout layout, int64_t m, int64_t tok) {
  if (tok < m) return tok;
  if (layout == XLayout::kRowMajor) return 0;
  return (tok ^ 1) < m ? (tok ^ 1) : tok / 8 * 8;
}

}  // namespace voltserve::kernels
