// prepack / unpack of NVFP4 and FP8 weights for both kernel families: unpack(prepack(w)) == w byte for byte,
// padding is zero, and bad shapes are rejected with a message. Runs on the CPU.
#include <catch2/catch_test_macros.hpp>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/common/fp_formats.h"
#include "kernels/linear/nvfp4_bits.h"
#include "kernels/linear/prepack.h"
#include "linear_random.h"

using namespace voltserve::kernels;
using voltserve::test::SplitMix;

namespace {

void roundtrip(WeightFormat format, KernelFamily family, int64_t n, int64_t k, uint64_t seed) {
  SplitMix rng(seed);
  std::vector<uint8_t> codes(static_cast<size_t>(format == WeightFormat::kNvfp4 ? n * k / 2 : n * k));
  std::vector<uint8_t> scales(static_cast<size_t>(format == WeightFormat::kNvfp4 ? n * k / 16 : 0));
  voltserve::test::fill_random_bytes(codes, rng);
  voltserve::test::fill_random_bytes(scales, rng);
  PackedWeightHost packed;
  REQUIRE(prepack(format, family, n, k, codes, scales, &packed).empty());
  const TileGeometry geo = tile_geometry(family);
  CHECK(packed.n_tiles == (n + geo.tile_rows - 1) / geo.tile_rows);
  CHECK(packed.codes.size() == static_cast<size_t>(packed.n_tiles * packed.kblocks * 512));
  // The packed buffer holds every code bit once (sm80 NVFP4 moves bits inside words), plus zero padding.
  size_t ones_packed = 0, ones_orig = 0;
  for (uint8_t b : packed.codes) ones_packed += static_cast<size_t>(__builtin_popcount(b));
  for (uint8_t b : codes) ones_orig += static_cast<size_t>(__builtin_popcount(b));
  CHECK(ones_packed == ones_orig);
  if (packed.codes.size() > codes.size()) CHECK(packed.codes != std::vector<uint8_t>(packed.codes.size(), 0));
  std::vector<uint8_t> codes_back, scales_back;
  REQUIRE(unpack(packed, &codes_back, &scales_back).empty());
  CHECK(codes_back == codes);
  CHECK(scales_back == scales);
}

}  // namespace

TEST_CASE("linear prepack roundtrip nvfp4 and fp8, both families", "[unit]") {
  const int64_t shapes[][2] = {{16, 16}, {16, 64}, {32, 80}, {48, 1040}, {80, 5120 + 64}, {1040, 272}, {256, 6144},
                               {1, 16}, {5, 64}, {24, 80}, {33, 272}};  // n not a multiple of a tile
  uint64_t seed = 1;
  for (const auto& s : shapes) {
    for (WeightFormat format : {WeightFormat::kNvfp4, WeightFormat::kFp8}) {
      for (KernelFamily fam : {KernelFamily::kSm70, KernelFamily::kSm80}) {
        INFO("prepack " << weight_format_name(format) << " fam=" << family_name(fam) << " n=" << s[0] << " k=" << s[1]);
        roundtrip(format, fam, s[0], s[1], seed++);
      }
    }
  }
}

TEST_CASE("linear prepack places lane bytes where the kernels read them", "[unit]") {
  // sm80, NVFP4, one tile: lane (g=1, t=2) of k-block 0 holds row 1 bytes [16, 24) then row 9 bytes [16, 24).
  const int64_t n = 16, k = 64;
  std::vector<uint8_t> codes(n * k / 2), scales(n * k / 16);
  for (size_t i = 0; i < codes.size(); ++i) codes[i] = static_cast<uint8_t>(i * 7 + 3);
  for (size_t i = 0; i < scales.size(); ++i) scales[i] = static_cast<uint8_t>(100 + i);
  PackedWeightHost p;
  REQUIRE(prepack(WeightFormat::kNvfp4, KernelFamily::kSm80, n, k, codes, scales, &p).empty());
  const int lane = 1 * 4 + 2;
  for (int w = 0; w < 2; ++w) {  // words hold their 4 checkpoint bytes with bits placed (nvfp4_bits.h)
    uint32_t lo = 0, hi = 0;
    std::memcpy(&lo, &p.codes[lane * 16 + 4 * w], 4);
    std::memcpy(&hi, &p.codes[lane * 16 + 8 + 4 * w], 4);
    lo = nvfp4_sm80_unplace(lo);
    hi = nvfp4_sm80_unplace(hi);
    for (int b = 0; b < 4; ++b) {
      CHECK(((lo >> (8 * b)) & 0xFF) == codes[1 * 32 + 16 + 4 * w + b]);
      CHECK(((hi >> (8 * b)) & 0xFF) == codes[9 * 32 + 16 + 4 * w + b]);
    }
  }
  CHECK(p.scales[lane * 2] == scales[1 * 4 + 2]);
  CHECK(p.scales[lane * 2 + 1] == scales[9 * 4 + 2]);
  // sm70, NVFP4: lane 21 is quad-pair q = 1, row r = 1 + 4 = 5 -> tile row 13; 16 bytes from k-block 1.
  PackedWeightHost p70;
  const int64_t n70 = 32;
  std::vector<uint8_t> c70(n70 * k / 2), s70(n70 * k / 16);
  for (size_t i = 0; i < c70.size(); ++i) c70[i] = static_cast<uint8_t>(i * 13 + 1);
  for (size_t i = 0; i < s70.size(); ++i) s70[i] = static_cast<uint8_t>(i);
  REQUIRE(prepack(WeightFormat::kNvfp4, KernelFamily::kSm70, n70, k, c70, s70, &p70).empty());
  const size_t unit = (0 * 2 + 1) * 32 + 21;
  for (int b = 0; b < 16; ++b) CHECK(p70.codes[unit * 16 + b] == c70[13 * 32 + 16 + b]);
  CHECK(p70.scales[unit * 2] == s70[13 * 4 + 2]);
  CHECK(p70.scales[unit * 2 + 1] == s70[13 * 4 + 3]);
}

TEST_CASE("sm80 NVFP4 bit placement is a bijection and decodes to e2m1 * 2^-14 exactly", "[unit]") {
  // Every single bit maps to a distinct bit and back.
  uint32_t seen = 0;
  for (int i = 0; i < 32; ++i) {
    const uint32_t placed = nvfp4_sm80_place(1u << i);
    REQUIRE(__builtin_popcount(placed) == 1);
    CHECK((seen & placed) == 0);
    seen |= placed;
    CHECK(nvfp4_sm80_unplace(placed) == (1u << i));
  }
  CHECK(seen == 0xFFFFFFFFu);
  // The kernels' extraction of each pair equals the true value * 2^-14 for every code in every position,
  // whatever the other codes of the word are.
  SplitMix rng(99);
  int checked = 0;
  for (int iter = 0; iter < 4096; ++iter) {
    const uint32_t word = static_cast<uint32_t>(rng.next());
    const uint32_t placed = nvfp4_sm80_place(word);
    REQUIRE(nvfp4_sm80_unplace(placed) == word);
    const uint32_t pairs[4] = {nvfp4_sm80_pair<0>(placed), nvfp4_sm80_pair<1>(placed), nvfp4_sm80_pair<2>(placed),
                               nvfp4_sm80_pair<3>(placed)};
    for (int q = 0; q < 4; ++q) {
      for (int h = 0; h < 2; ++h) {
        const uint8_t code = static_cast<uint8_t>((word >> (8 * q + 4 * h)) & 0xF);
        const float got = voltserve::fp::f16_to_float(static_cast<uint16_t>(pairs[q] >> (16 * h)));
        const float want = voltserve::fp::e2m1_to_float(code) * std::ldexp(1.0f, -14);
        INFO("word=" << word << " pair=" << q << " half=" << h << " code=" << int(code));
        REQUIRE(got == want);
        REQUIRE(std::signbit(got) == ((code & 8) != 0));
        ++checked;
      }
    }
  }
  CHECK(checked == 4096 * 8);
}

TEST_CASE("linear prepack rejects bad shapes and sizes with a message", "[unit]") {
  PackedWeightHost p;
  std::vector<uint8_t> codes(24 * 64 / 2), scales(24 * 64 / 16);
  std::string e = prepack(WeightFormat::kNvfp4, KernelFamily::kSm80, 0, 64, {}, {}, &p);
  CHECK(e.find("n=0") != std::string::npos);
  CHECK(prepack(WeightFormat::kNvfp4, KernelFamily::kSm80, 24, 64, codes, scales, &p).empty());  // any n
  std::vector<uint8_t> c2(16 * 40 / 2), s2(16 * 40 / 16);
  e = prepack(WeightFormat::kNvfp4, KernelFamily::kSm80, 16, 40, c2, s2, &p);
  CHECK(e.find("k=40") != std::string::npos);
  std::vector<uint8_t> c3(16 * 64 / 2 - 1), s3(16 * 64 / 16);
  e = prepack(WeightFormat::kNvfp4, KernelFamily::kSm70, 16, 64, c3, s3, &p);
  CHECK(e.find("codes hold") != std::string::npos);
  std::vector<uint8_t> c4(16 * 64), s4(3);
  e = prepack(WeightFormat::kFp8, KernelFamily::kSm70, 16, 64, c4, s4, &p);
  CHECK(e.find("FP8") != std::string::npos);
}

TEST_CASE("linear merge_packed_rows concatenates rows and carries each part's scales", "[unit]") {
  struct Case {
    WeightFormat format;
    KernelFamily fam;
    std::vector<int64_t> ns;
    int64_t k;
  };
  // The last part may end inside a tile (16 rows of a 32-row sm70 tile); k need not fill a k-block.
  const Case cases[] = {{WeightFormat::kNvfp4, KernelFamily::kSm80, {48, 16, 32}, 80},
                        {WeightFormat::kNvfp4, KernelFamily::kSm70, {64, 32, 16}, 1040},
                        {WeightFormat::kFp8, KernelFamily::kSm80, {32, 16}, 272},
                        {WeightFormat::kFp8, KernelFamily::kSm70, {32, 96, 48}, 64}};
  uint64_t seed = 900;
  for (const Case& c : cases) {
    INFO("merge " << weight_format_name(c.format) << " fam=" << family_name(c.fam) << " k=" << c.k);
    const int64_t rb = c.format == WeightFormat::kNvfp4 ? c.k / 2 : c.k;
    const int64_t groups = c.format == WeightFormat::kNvfp4 ? c.k / 16 : 0;
    std::vector<PackedWeightHost> packed(c.ns.size());
    std::vector<std::vector<float>> channels(c.ns.size());
    std::vector<MergePart> parts;
    std::vector<uint8_t> all_codes, all_scales;
    std::vector<float> want_scales;
    for (size_t i = 0; i < c.ns.size(); ++i) {
      SplitMix rng(seed++);
      std::vector<uint8_t> codes(static_cast<size_t>(c.ns[i] * rb)), scales(static_cast<size_t>(c.ns[i] * groups));
      voltserve::test::fill_random_bytes(codes, rng);
      voltserve::test::fill_random_bytes(scales, rng);
      REQUIRE(prepack(c.format, c.fam, c.ns[i], c.k, codes, scales, &packed[i]).empty());
      all_codes.insert(all_codes.end(), codes.begin(), codes.end());
      all_scales.insert(all_scales.end(), scales.begin(), scales.end());
      const float scale = 0.25f * static_cast<float>(i + 1);
      if (i == 1) {  // one part with its own per-channel scales
        for (int64_t r = 0; r < c.ns[i]; ++r) channels[i].push_back(1.0f + 0.125f * static_cast<float>(r % 5));
      }
      for (int64_t r = 0; r < c.ns[i]; ++r) want_scales.push_back(scale * (channels[i].empty() ? 1.0f : channels[i][r]));
      parts.push_back({&packed[i], scale, channels[i].empty() ? nullptr : channels[i].data()});
    }
    PackedWeightHost merged;
    std::vector<float> row_scales;
    REQUIRE(merge_packed_rows(parts, &merged, &row_scales).empty());
    int64_t n = 0;
    for (int64_t part_n : c.ns) n += part_n;
    CHECK(merged.n == n);
    CHECK(row_scales == want_scales);
    // The merge is the prepack of the concatenated rows, and unpacks to them.
    PackedWeightHost direct;
    REQUIRE(prepack(c.format, c.fam, n, c.k, all_codes, all_scales, &direct).empty());
    CHECK(merged.n_tiles == direct.n_tiles);
    CHECK(merged.kblocks == direct.kblocks);
    CHECK(merged.codes == direct.codes);
    CHECK(merged.scales == direct.scales);
    std::vector<uint8_t> codes_back, scales_back;
    REQUIRE(unpack(merged, &codes_back, &scales_back).empty());
    CHECK(codes_back == all_codes);
    CHECK(scales_back == all_scales);
  }
}

TEST_CASE("linear merge_packed_rows rejects parts that cannot share a launch, naming the part", "[unit]") {
  auto pack = [](WeightFormat format, KernelFamily fam, int64_t n, int64_t k) {
    std::vector<uint8_t> codes(static_cast<size_t>(format == WeightFormat::kNvfp4 ? n * k / 2 : n * k));
    std::vector<uint8_t> scales(static_cast<size_t>(format == WeightFormat::kNvfp4 ? n * k / 16 : 0));
    PackedWeightHost p;
    REQUIRE(prepack(format, fam, n, k, codes, scales, &p).empty());
    return p;
  };
  const PackedWeightHost a = pack(WeightFormat::kNvfp4, KernelFamily::kSm80, 32, 64);
  const PackedWeightHost k128 = pack(WeightFormat::kNvfp4, KernelFamily::kSm80, 32, 128);
  const PackedWeightHost fp8 = pack(WeightFormat::kFp8, KernelFamily::kSm80, 32, 64);
  const PackedWeightHost sm70 = pack(WeightFormat::kNvfp4, KernelFamily::kSm70, 32, 64);
  const PackedWeightHost sm70_16 = pack(WeightFormat::kNvfp4, KernelFamily::kSm70, 16, 64);
  PackedWeightHost broken = a;
  broken.codes.pop_back();
  PackedWeightHost out;
  std::vector<float> rs;
  auto merge = [&](std::vector<MergePart> parts) { return merge_packed_rows(parts, &out, &rs); };
  CHECK(merge({}).find("no parts") != std::string::npos);
  CHECK(merge({{&a, 1.0f}, {nullptr, 1.0f}}).find("part 1 has no packed weight") != std::string::npos);
  CHECK(merge({{&a, 1.0f}, {&k128, 1.0f}}).find("part 1 has k=128, part 0 has k=64") != std::string::npos);
  CHECK(merge({{&a, 1.0f}, {&fp8, 1.0f}}).find("part 1 is FP8") != std::string::npos);
  CHECK(merge({{&a, 1.0f}, {&sm70, 1.0f}}).find("part 1 is NVFP4/sm70") != std::string::npos);
  CHECK(merge({{&sm70_16, 1.0f}, {&sm70, 1.0f}}).find("part 0 has n=16") != std::string::npos);
  CHECK(merge({{&sm70, 1.0f}, {&sm70_16, 1.0f}}).empty());  // the last part may end inside a tile
  CHECK(merge({{&a, 1.0f}, {&broken, 1.0f}}).find("part 1: packed buffers") != std::string::npos);
  CHECK(merge({{&a, std::nanf("")}}).find("part 0 has a non-finite scale") != std::string::npos);
}
