// Which rows and k values each lane of the dense (fp16, row-major [n, k], not prepacked) decode kernels loads and
// feeds to which MMA operand, and how many warps split k: shared by linear_dense_sm70.cu / linear_dense_sm80.cu and
// by tests/kernels/linear_dense_kmap_test.cpp, which runs the same maps through a CPU model of the two MMA shapes.
//
// Both families: a block computes one 16-row tile of W against 8 tokens (or 16: two token tiles off the same weight
// registers); its warps split k in blocks of 64 (warp w takes k-blocks w, w + warps, ...); a k-block of a row is
// 128 contiguous bytes, eight 16-byte chunks c = 0..7 (k 8c .. 8c + 7 of the block).
//
// sm80 (mma.m16n8k16, A = 16 rows x 16 k, B = 16 k x 8 tokens): lane (g = lane / 4, t = lane % 4) loads chunks t and
// t + 4 of rows g and g + 8 and of token g's x. One load instruction of the warp then covers bytes 0..63 (or 64..127)
// of 8 rows: whole 32-byte sectors, which the L1-bypassing weight loads need (half-used sectors would be fetched
// twice). The MMA sums over k in any order as long as A and B agree, and in m16n8k16 lane t supplies the same k
// pairs (logical k 2t, 2t + 1 and 2t + 8, 2t + 9) of A and of B; so lane t's 8 half2 words (chunk t: words 0..3,
// chunk t + 4: words 4..7) go to MMA i = word / 2, logical pair t for even words and t + 4 for odd ones:
//
//   MMA i:  A reg0 = row g   word 2i      A reg2 = row g   word 2i + 1      B reg0 = token g word 2i
//           A reg1 = row g+8 word 2i      A reg3 = row g+8 word 2i + 1      B reg1 = token g word 2i + 1
//
// sm70 (mma.m8n8k4, per quad-pair: A = 8 rows x 4 k, B = 4 k x 8 tokens): all 8 lanes of a quad-pair must use the
// same k (lane r holds A row r and B column r), so the freedom is across quad-pairs instead: quad-pair q takes rows
// 8 * (q / 2) .. + 7 of the tile and the chunks of parity q % 2, i.e. chunks 2j + q % 2 (j = 0..3). One load
// instruction of the warp covers chunks 2j and 2j + 1 of 16 rows, whole sectors again; the two parities' partial
// sums of a row are added in the epilogue. Each chunk feeds two MMAs (words 0, 1 and words 2, 3).
#pragma once

#include <cstdint>

#include "common/host_device.h"

namespace voltserve::kernels::dense {

inline constexpr int kTileRows = 16;
inline constexpr int kKBlock = 64;  // k values per k-block (one 128-byte piece of a row)

// k-blocks of a row: ceil(k / 64); the last one is partial when k % 64 != 0 (its chunks at or past k are zero-filled).
VS_HD constexpr int64_t kblocks(int64_t k) { return (k + kKBlock - 1) / kKBlock; }
VS_HD constexpr int64_t row_tiles(int64_t n) { return (n + kTileRows - 1) / kTileRows; }

// sm80: the chunk (0..7) of a k-block that load j (0, 1) of lane t (0..3) reads.
VS_HD constexpr int sm80_chunk(int t, int j) { return t + 4 * j; }
// sm80: the tile row (0..15) that a lane's row load h (0: row g, 1: row g + 8) reads.
VS_HD constexpr int sm80_row(int lane, int h) { return lane / 4 + 8 * h; }

// sm70: lane's quad-pair, its A row / B column inside the quad-pair (the mma.m8n8k4 fragment order), its tile row and
// the chunk that its load j (0..3) reads.
VS_HD constexpr int sm70_quad_pair(int lane) { return (lane >> 2) & 3; }
VS_HD constexpr int sm70_rr(int lane) { return (lane & 3) + 4 * (lane >> 4); }
VS_HD constexpr int sm70_row(int lane) { return 8 * (sm70_quad_pair(lane) / 2) + sm70_rr(lane); }
VS_HD constexpr int sm70_parity(int lane) { return sm70_quad_pair(lane) % 2; }
VS_HD constexpr int sm70_chunk(int lane, int j) { return 2 * j + sm70_parity(lane); }

// Warps per block (they split k). The order of every sum depends on it alone (each warp adds its k-blocks in order,
// the epilogue adds the warps in order), so it is a function of the weight's shape only, never of m: batch invariance.
// Large weights (lm_head: 15520 tiles) run 4 warps per block and fill the GPU with blocks; small ones split k over
// more warps so that enough loads are in flight (in_proj_a/b: 3 tiles x 16 warps); never more warps than k-blocks.
VS_HD constexpr int decode_warps(int64_t n, int64_t k) {
  const int64_t tiles = row_tiles(n);
  int w = tiles >= 1024 ? 4 : tiles >= 128 ? 8 : 16;
  while (w > 4 && w > kblocks(k)) w /= 2;
  return w;
}

// The warps-per-block choices of the dense decode kernels (linear_families.h): 0 = decode_warps(n, k), else 4, 8, 16.
VS_HD constexpr bool valid_decode_warps(int warps) { return warps == 0 || warps == 4 || warps == 8 || warps == 16; }

}  // namespace voltserve::kernels::dense
