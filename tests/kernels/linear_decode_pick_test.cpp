// Default sm80 decode variant by wave fill (kernels/linear/decode_pick.h): the fill arithmetic, the pick on the
// H200's numbers against the variants the 2026-11-30 sweep measured best, and batch invariance (one warps-per-block
// and k-split group for both token-tile counts) on any device. Runs on the CPU.
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_floating_point.hpp>

#include <map>
#include <utility>

#include "kernels/linear/decode_pick.h"

using namespace voltserve::kernels::sm80;

namespace {

// Resident blocks per SM of each candidate on the H200 (sm_90 register counts of the CUDA 13.0 build: 65536
// registers per SM, 4- to 16-warp blocks), [fp8][token tiles - 1].
DecodeDevice h200() {
  const std::map<int, std::array<std::array<int, 2>, 2>> resident = {
      {4, {{{5, 5}, {5, 5}}}},  {21, {{{5, 5}, {5, 5}}}}, {9, {{{4, 4}, {5, 4}}}},  {19, {{{6, 6}, {6, 7}}}},
      {5, {{{5, 5}, {5, 5}}}},  {11, {{{3, 3}, {4, 3}}}}, {18, {{{4, 4}, {4, 4}}}}, {8, {{{4, 4}, {5, 4}}}},
      {22, {{{3, 3}, {3, 3}}}}, {10, {{{3, 3}, {3, 3}}}}, {17, {{{3, 3}, {3, 3}}}}, {6, {{{4, 4}, {4, 4}}}},
      {2, {{{4, 4}, {4, 4}}}},  {7, {{{1, 1}, {1, 1}}}},  {23, {{{5, 5}, {5, 5}}}}, {24, {{{5, 5}, {5, 5}}}},
      {25, {{{3, 3}, {3, 3}}}}, {26, {{{6, 6}, {6, 7}}}}, {27, {{{7, 7}, {7, 7}}}}, {28, {{{8, 8}, {8, 8}}}},
      {29, {{{7, 7}, {7, 7}}}}};
  DecodeDevice d;
  d.sms = 132;
  for (const DecodeCandidate& c : kDecodeCandidates) d.resident.push_back(resident.at(c.id));
  return d;
}

// Warps per block and k split of a candidate: together they set the order of every sum.
std::pair<int, int> sum_order_of(int id) {
  for (const DecodeCandidate& c : kDecodeCandidates)
    if (c.id == id) return {c.warps, c.ksplit};
  return {-1, -1};
}

}  // namespace

TEST_CASE("decode pick: wave fill counts the block slots a grid keeps busy", "[unit]") {
  CHECK_THAT(wave_fill(512, 528), Catch::Matchers::WithinRel(512.0 / 528.0));
  CHECK(wave_fill(528, 528) == 1.0);
  CHECK_THAT(wave_fill(529, 528), Catch::Matchers::WithinRel(529.0 / 1056.0));
  CHECK_THAT(wave_fill(1088, 660), Catch::Matchers::WithinRel(1088.0 / 1320.0));
  CHECK(wave_fill(0, 528) == 0.0);
  CHECK(wave_fill(10, 0) == 0.0);
}

TEST_CASE("decode pick on the H200 takes the variants the sweep measured best", "[unit]") {
  const DecodeDevice d = h200();
  // NVFP4, 1024 tiles (GDN in_proj_qkv + in_proj_z merged): one-tile blocks, 8 per SM (1024 of 1056 slots, v28) for
  // one token tile: 85.2 / 84.1% at M = 1 / 8 vs 84.5 / 83.4% for v9; for two, 512 two-tile blocks in 528 slots (v9,
  // 4 per SM): 71.4% at M = 16 vs 41.3% for v28 (the 4-warp group holds both).
  const DecodePick qkvz = pick_decode_variants(d, false, 1024);
  CHECK(qkvz.nt1 == 28);
  CHECK(qkvz.nt2 == 9);
  // Attention q + k + v, 896 tiles: 7 one-tile blocks per SM (896 of 924 slots, v27): 84.4 / 82.7% vs 78.8 / 78.5%
  // for v9 (448 blocks in 528 slots).
  const DecodePick qkv = pick_decode_variants(d, false, 896);
  CHECK(qkv.nt1 == 27);
  CHECK(qkv.nt2 == 9);
  // 320 tiles (o_proj, out_proj, down): NVFP4 takes 8-warp blocks, 3 per SM (320 of 396 slots); FP8 splits k over
  // two-block clusters of 4-warp blocks, 5 per SM (640 of 660 slots): down 88.3% vs 82.1% over M = 1, 8, 16.
  const DecodePick nvfp4_320 = pick_decode_variants(d, false, 320);
  CHECK(sum_order_of(nvfp4_320.nt1) == std::pair{8, 1});
  CHECK(sum_order_of(nvfp4_320.nt2) == std::pair{8, 1});
  const DecodePick fp8_320 = pick_decode_variants(d, true, 320);
  CHECK(fp8_320.nt1 == 23);
  CHECK(fp8_320.nt2 == 23);
  // Without clusters (resident 0: not sm_90) the split candidates are never picked.
  DecodeDevice no_clusters = d;
  for (int i = 0; i < kDecodeCandidateCount; ++i) {
    if (kDecodeCandidates[i].ksplit > 1) no_clusters.resident[static_cast<size_t>(i)] = {};
  }
  CHECK(sum_order_of(pick_decode_variants(no_clusters, true, 320).nt1).second == 1);
  // Few tiles: 16 warps split k.
  CHECK(pick_decode_variants(d, false, 64).nt1 == 7);
  CHECK(pick_decode_variants(d, true, 64).nt2 == 7);
  // 768 tiles (q_proj): one-tile blocks, 6 per SM (768 of 792 slots).
  CHECK(pick_decode_variants(d, false, 768).nt1 == 19);
}

TEST_CASE("decode pick keeps one warps-per-block group for both token-tile counts (batch invariance)", "[unit]") {
  for (int sms : {20, 46, 82, 108, 132, 170}) {
    DecodeDevice d = h200();
    d.sms = sms;
    // Perturb the residencies as another device's register file would.
    for (size_t i = 0; i < d.resident.size(); ++i)
      for (auto& per_codec : d.resident[i])
        for (int& r : per_codec) r = 1 + static_cast<int>((static_cast<size_t>(r) * (i + 3) + static_cast<size_t>(sms)) % 6);
    for (bool fp8 : {false, true}) {
      for (long tiles = 1; tiles <= 20000; tiles += tiles < 2048 ? 1 : 97) {
        const DecodePick p = pick_decode_variants(d, fp8, tiles);
        INFO("sms=" << sms << " fp8=" << fp8 << " tiles=" << tiles << " picks " << p.nt1 << "/" << p.nt2);
        REQUIRE(p.nt1 != 0);
        REQUIRE(sum_order_of(p.nt1) == sum_order_of(p.nt2));
      }
    }
  }
  CHECK(pick_decode_variants(DecodeDevice{}, false, 1024).nt1 == 0);  // no device information: no pick
}

TEST_CASE("decode candidates: one table of unique ids whose shapes the kernel takes", "[unit]") {
  std::map<int, int> seen;
  for (int i = 0; i < kDecodeCandidateCount; ++i) {
    const DecodeCandidate& c = kDecodeCandidates[i];
    INFO("candidate " << c.id);
    CHECK(c.id > 0);  // 0 names the default pick
    CHECK(seen.emplace(c.id, i).second);
    CHECK(decode_candidate_index(c.id) == i);
    // The kernel's static requirements (linear_sm80.cu): FP8 k-blocks pair up over the warps splitting k, and the
    // unguarded main loop needs a ring of at least 2 steps per tile.
    CHECK((c.warps == 4 || c.warps == 8 || c.warps == 16));
    CHECK((c.ksplit == 1 || c.ksplit == 2));
    CHECK((c.tiles_per_block == 1 || c.tiles_per_block == 2));
    CHECK(c.ring / c.tiles_per_block >= 2);
    CHECK(c.min_blocks >= 1);
  }
  // Removed variants (timing-only diagnostics, shapes no pick chose) are not in the table.
  for (int gone : {0, 1, 12, 13, 15, 101, 200, 300}) CHECK(decode_candidate_index(gone) == -1);
}
