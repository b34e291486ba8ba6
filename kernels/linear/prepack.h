// Load-time prepack of NVFP4 / FP8 weights into a kernel family's fragment order, and its exact inverse.
// A pure permutation of code bits and scale bytes (plus zero padding to whole tiles, which unpack drops); sm80 NVFP4
// words additionally have their bits placed for the table-free decode (nvfp4_bits.h):
// tests/kernels/linear_prepack_test.cpp checks unpack(prepack(w)) == w byte for byte.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "linear/linear.h"

namespace voltserve::kernels {

// Tile geometry per family. Codes are handled as bytes: NVFP4 rows hold k/2 bytes (two e2m1 codes per byte,
// even k in the low nibble; the nibble order inside a byte is kept), FP8 rows hold k bytes.
//   kSm80: tiles of 16 rows x 32 row-bytes; lane (g = lane/4, t = lane%4) holds an 8-byte run of rows g and g+8
//          (16 bytes): NVFP4 bytes [8t, 8t+8) of the k-block, its scales those two rows' group (4*kb + t); FP8
//          k-blocks pair up over 64 k and lane t holds k from 64*(kb/2) + 16t + 8*(kb%2) (sm80_kmap.h).
//   kSm70: tiles of 32 rows x 16 row-bytes; lane holds 16 bytes of row 8*q + r (q = (lane/4)%4 is the
//          quad-pair, r = lane%4 + 4*(lane/16)); its NVFP4 scales are that row's groups 2*kb and 2*kb+1.
// Packed order: [tile][kblock][lane 0..31][16 bytes] for codes, [tile][kblock][lane][2 bytes] for scales.
struct TileGeometry {
  int tile_rows;
  int kblock_bytes;
};
TileGeometry tile_geometry(KernelFamily family);

struct PackedWeightHost {
  WeightFormat format = WeightFormat::kNvfp4;
  KernelFamily family = KernelFamily::kSm80;
  int64_t n = 0;
  int64_t k = 0;
  int64_t n_tiles = 0;  // ceil(n / tile_rows)
  int64_t kblocks = 0;  // ceil(row_bytes / kblock_bytes); sm80 FP8: rounded up to whole pairs (sm80_kmap.h)
  std::vector<uint8_t> codes;
  std::vector<uint8_t> scales;  // empty for FP8
};

// Shape rules shared by every entry point: n, k > 0, k % 16 == 0 (n is free: the last tile is zero-padded).
// Returns "" when valid.
std::string check_linear_shape(WeightFormat format, int64_t n, int64_t k);

// codes: [n, k/2] u8 (NVFP4) with scales [n, k/16] e4m3; or codes [n, k] e4m3 (FP8) with empty scales.
// Returns "" on success, otherwise a message naming what was wrong (sizes, shape).
std::string prepack(WeightFormat format, KernelFamily family, int64_t n, int64_t k, std::span<const uint8_t> codes,
                    std::span<const uint8_t> scales, PackedWeightHost* out);

// The sizes prepack() gives a weight of this shape: codes and (NVFP4) scales bytes, whole tiles and k-blocks.
void packed_bytes(WeightFormat format, KernelFamily family, int64_t n, int64_t k, size_t* codes, size_t* scales);

// Inverse of prepack: writes the original row-major codes (and NVFP4 scales).
std::string unpack(const PackedWeightHost& packed, std::vector<uint8_t>* codes, std::vector<uint8_t>* scales);

// One tensor of a row merge: its packed weight and the multiplier its rows carry (NVFP4: its global_scale; FP8:
// its tensor_scale), times its own per-channel scales when it has them (host, [n]; nullptr: none).
struct MergePart {
  const PackedWeightHost* packed = nullptr;
  float scale = 1.0f;
  const float* channel_scales = nullptr;
};

// Merges tensors that read the same input (GDN in_proj_qkv + in_proj_z, attention q + k + v, MLP gate + up) into
// one packed weight whose rows are the parts' rows in order, so that one launch computes them all: fewer and
// longer kernels stream closer to the read ceiling (bench/RESULTS.md, "merged projections"). Packed tiles are
// self-contained, so this only concatenates bytes; the parts' scales move into row_scales [n], which the caller
// passes as PackedWeightView::channel_scales with global_scale = tensor_scale = 1. Parts must share format, family
// and k, and every part but the last must fill whole tiles (n a multiple of tile_geometry(family).tile_rows).
// Returns "" on success, otherwise a message naming the part and what was wrong.
std::string merge_packed_rows(std::span<const MergePart> parts, PackedWeightHost* out, std::vector<float>* row_scales);

}  // namespace voltserve::kernels
