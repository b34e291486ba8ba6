// Prepack / unpack between checkpoint order and the kernel families' fragment order (see prepack.h).
#include "linear/prepack.h"

#include "linear/nvfp4_bits.h"
#include "linear/sm80_kmap.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace voltserve::kernels {

namespace {

constexpr int kLanes = 32;
constexpr int kLaneBytes = 16;

int64_t row_bytes(WeightFormat format, int64_t k) { return format == WeightFormat::kNvfp4 ? k / 2 : k; }

// sm80 NVFP4: the bits of each 32-bit word of a lane unit are placed for the table-free decode
// (nvfp4_bits.h); a bijection on 32 bits applied word by word, undone by unpack.
void permute_nvfp4_words(uint8_t* unit, bool forward) {
  for (int w = 0; w < kLaneBytes / 4; ++w) {
    uint32_t v = 0;
    std::memcpy(&v, unit + 4 * w, 4);
    v = forward ? nvfp4_sm80_place(v) : nvfp4_sm80_unplace(v);
    std::memcpy(unit + 4 * w, &v, 4);
  }
}

// Calls f(row, src_col, dst_offset, nbytes) for every run of code bytes that lane `lane` of (tile, kb) holds,
// and s(row, group, dst_offset) for its scale bytes. One description used by both directions.
template <typename CodeFn, typename ScaleFn>
void for_each_lane_run(WeightFormat format, KernelFamily family, int64_t tile, int64_t kb, int lane, CodeFn&& f,
                       ScaleFn&& s) {
  if (family == KernelFamily::kSm80) {
    const int g = lane / 4;
    const int t = lane % 4;
    const bool fp8 = format == WeightFormat::kFp8;
    const int64_t col = sm80_lane_k0(fp8, kb, t) / (fp8 ? 1 : 2);  // sm80_kmap.h
    for (int h = 0; h < 2; ++h) {
      const int64_t row = tile * 16 + g + 8 * h;
      f(row, col, 8 * h, 8);
      s(row, kb * 4 + t, h);
    }
  } else {
    const int q = (lane / 4) % 4;
    const int r = lane % 4 + 4 * (lane / 16);
    const int64_t row = tile * 32 + 8 * q + r;
    f(row, kb * 16, 0, 16);
    s(row, kb * 2, 0);
    s(row, kb * 2 + 1, 1);
  }
}

}  // namespace

const char* family_name(KernelFamily f) { return f == KernelFamily::kSm70 ? "sm70" : "sm80"; }

TileGeometry tile_geometry(KernelFamily family) {
  return family == KernelFamily::kSm80 ? TileGeometry{16, 32} : TileGeometry{32, 16};
}

std::string check_linear_shape(WeightFormat format, int64_t n, int64_t k) {
  if (n <= 0 || k <= 0) return "linear: n and k must be positive (n=" + std::to_string(n) + " k=" + std::to_string(k) + ")";
  // Any n: the last tile's rows past n are zero padding. k: whole NVFP4 scale groups, and 16-byte aligned rows of x
  // for the kernels' vector loads.
  if (k % 16 != 0) {
    return std::string("linear: k=") + std::to_string(k) + " is not a multiple of 16 (" + weight_format_name(format) + ")";
  }
  return "";
}

void packed_bytes(WeightFormat format, KernelFamily family, int64_t n, int64_t k, size_t* codes, size_t* scales) {
  const TileGeometry geo = tile_geometry(family);
  const int64_t rb = row_bytes(format, k);
  const int64_t n_tiles = (n + geo.tile_rows - 1) / geo.tile_rows;
  const int64_t kblocks = family == KernelFamily::kSm80 ? sm80_kblocks(format == WeightFormat::kFp8, k)
                                                        : (rb + geo.kblock_bytes - 1) / geo.kblock_bytes;
  const int64_t units = n_tiles * kblocks * kLanes;
  *codes = static_cast<size_t>(units * kLaneBytes);
  *scales = format == WeightFormat::kNvfp4 ? static_cast<size_t>(units * 2) : 0;
}

std::string prepack(WeightFormat format, KernelFamily family, int64_t n, int64_t k, std::span<const uint8_t> codes,
                    std::span<const uint8_t> scales, PackedWeightHost* out) {
  if (std::string e = check_linear_shape(format, n, k); !e.empty()) return e;
  const int64_t rb = row_bytes(format, k);
  if (static_cast<int64_t>(codes.size()) != n * rb) {
    return "prepack: codes hold " + std::to_string(codes.size()) + " bytes, expected n*" +
           (format == WeightFormat::kNvfp4 ? "k/2" : "k") + " = " + std::to_string(n * rb);
  }
  const int64_t groups = k / 16;
  if (format == WeightFormat::kNvfp4 && static_cast<int64_t>(scales.size()) != n * groups) {
    return "prepack: NVFP4 scales hold " + std::to_string(scales.size()) + " bytes, expected n*k/16 = " +
           std::to_string(n * groups);
  }
  if (format == WeightFormat::kFp8 && !scales.empty()) return "prepack: FP8 weights take no group scales";

  const TileGeometry geo = tile_geometry(family);
  out->format = format;
  out->family = family;
  out->n = n;
  out->k = k;
  out->n_tiles = (n + geo.tile_rows - 1) / geo.tile_rows;
  out->kblocks = family == KernelFamily::kSm80 ? sm80_kblocks(format == WeightFormat::kFp8, k)
                                               : (rb + geo.kblock_bytes - 1) / geo.kblock_bytes;
  const int64_t units = out->n_tiles * out->kblocks * kLanes;
  out->codes.assign(static_cast<size_t>(units * kLaneBytes), 0);
  out->scales.assign(format == WeightFormat::kNvfp4 ? static_cast<size_t>(units * 2) : 0, 0);

  for (int64_t tile = 0; tile < out->n_tiles; ++tile) {
    for (int64_t kb = 0; kb < out->kblocks; ++kb) {
      for (int lane = 0; lane < kLanes; ++lane) {
        const int64_t unit = (tile * out->kblocks + kb) * kLanes + lane;
        uint8_t* dst = out->codes.data() + unit * kLaneBytes;
        uint8_t* sdst = format == WeightFormat::kNvfp4 ? out->scales.data() + unit * 2 : nullptr;
        for_each_lane_run(
            format, family, tile, kb, lane,
            [&](int64_t row, int64_t col, int off, int nbytes) {
              if (row >= n) return;
              const int64_t take = std::min<int64_t>(nbytes, std::max<int64_t>(0, rb - col));
              if (take > 0) std::memcpy(dst + off, codes.data() + row * rb + col, static_cast<size_t>(take));
            },
            [&](int64_t row, int64_t group, int off) {
              if (sdst != nullptr && row < n && group < groups) sdst[off] = scales[row * groups + group];
            });
        if (format == WeightFormat::kNvfp4 && family == KernelFamily::kSm80) permute_nvfp4_words(dst, true);
      }
    }
  }
  return "";
}

std::string unpack(const PackedWeightHost& p, std::vector<uint8_t>* codes, std::vector<uint8_t>* scales) {
  if (std::string e = check_linear_shape(p.format, p.n, p.k); !e.empty()) return e;
  const int64_t rb = row_bytes(p.format, p.k);
  const int64_t groups = p.k / 16;
  const int64_t units = p.n_tiles * p.kblocks * kLanes;
  if (static_cast<int64_t>(p.codes.size()) != units * kLaneBytes ||
      (p.format == WeightFormat::kNvfp4 && static_cast<int64_t>(p.scales.size()) != units * 2)) {
    return "unpack: packed buffers do not match n=" + std::to_string(p.n) + " k=" + std::to_string(p.k);
  }
  codes->assign(static_cast<size_t>(p.n * rb), 0);
  scales->assign(p.format == WeightFormat::kNvfp4 ? static_cast<size_t>(p.n * groups) : 0, 0);
  for (int64_t tile = 0; tile < p.n_tiles; ++tile) {
    for (int64_t kb = 0; kb < p.kblocks; ++kb) {
      for (int lane = 0; lane < kLanes; ++lane) {
        const int64_t unit = (tile * p.kblocks + kb) * kLanes + lane;
        uint8_t src[kLaneBytes];
        std::memcpy(src, p.codes.data() + unit * kLaneBytes, kLaneBytes);
        if (p.format == WeightFormat::kNvfp4 && p.family == KernelFamily::kSm80) permute_nvfp4_words(src, false);
        const uint8_t* ssrc = p.format == WeightFormat::kNvfp4 ? p.scales.data() + unit * 2 : nullptr;
        for_each_lane_run(
            p.format, p.family, tile, kb, lane,
            [&](int64_t row, int64_t col, int off, int nbytes) {
              if (row >= p.n) return;
              const int64_t take = std::min<int64_t>(nbytes, std::max<int64_t>(0, rb - col));
              if (take > 0) std::memcpy(codes->data() + row * rb + col, src + off, static_cast<size_t>(take));
            },
            [&](int64_t row, int64_t group, int off) {
              if (ssrc != nullptr && row < p.n && group < groups) (*scales)[row * groups + group] = ssrc[off];
            });
      }
    }
  }
  return "";
}

std::string merge_packed_rows(std::span<const MergePart> parts, PackedWeightHost* out, std::vector<float>* row_scales) {
  if (parts.empty()) return "merge_packed_rows: no parts";
  for (size_t i = 0; i < parts.size(); ++i) {
    const PackedWeightHost* p = parts[i].packed;
    const std::string part = "merge_packed_rows: part " + std::to_string(i);
    if (p == nullptr) return part + " has no packed weight";
    const PackedWeightHost& first = *parts[0].packed;
    if (p->format != first.format || p->family != first.family) {
      return part + " is " + weight_format_name(p->format) + "/" + family_name(p->family) + ", part 0 is " +
             weight_format_name(first.format) + "/" + family_name(first.family);
    }
    if (p->k != first.k) return part + " has k=" + std::to_string(p->k) + ", part 0 has k=" + std::to_string(first.k);
    const int rows = tile_geometry(p->family).tile_rows;
    if (i + 1 < parts.size() && p->n % rows != 0) {
      return part + " has n=" + std::to_string(p->n) + ", not a multiple of the " + family_name(p->family) +
             " tile (" + std::to_string(rows) + " rows); only the last part may end inside a tile";
    }
    const int64_t units = p->n_tiles * p->kblocks * kLanes;
    if (p->n_tiles != (p->n + rows - 1) / rows || static_cast<int64_t>(p->codes.size()) != units * kLaneBytes ||
        static_cast<int64_t>(p->scales.size()) != (p->format == WeightFormat::kNvfp4 ? units * 2 : 0)) {
      return part + ": packed buffers do not match n=" + std::to_string(p->n) + " k=" + std::to_string(p->k);
    }
    if (!std::isfinite(parts[i].scale)) return part + " has a non-finite scale";
  }
  const PackedWeightHost& first = *parts[0].packed;
  PackedWeightHost merged;
  merged.format = first.format;
  merged.family = first.family;
  merged.k = first.k;
  merged.kblocks = first.kblocks;
  row_scales->clear();
  for (const MergePart& part : parts) {
    const PackedWeightHost& p = *part.packed;
    merged.n += p.n;
    merged.n_tiles += p.n_tiles;
    merged.codes.insert(merged.codes.end(), p.codes.begin(), p.codes.end());
    merged.scales.insert(merged.scales.end(), p.scales.begin(), p.scales.end());
    for (int64_t r = 0; r < p.n; ++r) {
      row_scales->push_back(part.scale * (part.channel_scales != nullptr ? part.channel_scales[r] : 1.0f));
    }
  }
  *out = std::move(merged);
  return "";
}

}  // namespace voltserve::kernels
