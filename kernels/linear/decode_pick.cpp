// Default sm80 decode variant by wave fill (see decode_pick.h).
#include "linear/decode_pick.h"

#include <algorithm>
#include <cstddef>
#include <utility>

namespace voltserve::kernels::sm80 {

namespace {

// Scores: an H200 sweep (`bench_linear --sweep-only` after a 25 ms warm-up per measurement, 11 weight
// shapes of the 27B model including the merged projections, M = 1 and 8 for one token tile, 16 for two), median of
// measured % of the read ceiling over wave_fill. Leave-one-shape-out, this pick reached 73.4% (NVFP4) and 85.8% (FP8)
// of the ceiling, weighted by the shapes' bytes over M = 1, 8, 16, against 74.2% / 86.6% for the best variant per
// shape in hindsight (bench/RESULTS.md).
const std::vector<DecodeCandidate> kCandidates = {
    // tuning, tiles/block, warps, k split, {{NVFP4 nt1, nt2}, {FP8 nt1, nt2}}
    {4, 2, 4, 1, {{120, 77}, {166, 148}}},  {21, 2, 4, 1, {{119, 91}, {166, 140}}},
    {9, 2, 4, 1, {{116, 93}, {165, 124}}},  {19, 1, 4, 1, {{105, 65}, {136, 116}}},
    {5, 1, 4, 1, {{92, 62}, {119, 100}}},   {11, 2, 4, 1, {{97, 77}, {142, 111}}},
    {18, 2, 4, 1, {{110, 93}, {142, 119}}}, {8, 1, 4, 1, {{87, 61}, {118, 94}}},
    {22, 1, 8, 1, {{79, 58}, {100, 83}}},   {10, 1, 8, 1, {{75, 43}, {96, 81}}},
    {17, 2, 8, 1, {{94, 41}, {137, 110}}},  {6, 1, 8, 1, {{92, 38}, {111, 93}}},
    {2, 1, 8, 1, {{81, 29}, {110, 91}}},    {7, 1, 16, 1, {{46, 37}, {66, 56}}},
    {23, 1, 4, 2, {{60, 43}, {84, 72}}},    {24, 2, 4, 2, {{79, 60}, {108, 90}}},
    {25, 1, 8, 2, {{49, 29}, {72, 57}}},    {26, 1, 4, 2, {{67, 44}, {89, 83}}},
    // Scored the same way on two later sweeps, then rescaled by
    // the median ratio of the scores above to their own new scores (per format and token tiles), so that all scores
    // stay on one scale. They win where a weight's tiles just fit 7 or 8 blocks per SM (merged q+k+v, qkv+z).
    {27, 1, 4, 1, {{115, 67}, {139, 116}}}, {28, 1, 4, 1, {{119, 60}, {148, 115}}},
    {29, 1, 4, 1, {{107, 59}, {141, 113}}},
};

}  // namespace

const std::vector<DecodeCandidate>& decode_candidates() { return kCandidates; }

double wave_fill(long blocks, long slots) {
  if (blocks <= 0 || slots <= 0) return 0.0;
  const long waves = (blocks + slots - 1) / slots;
  return static_cast<double>(blocks) / static_cast<double>(waves * slots);
}

DecodePick pick_decode_variants(const DecodeDevice& device, bool fp8, long n_tiles) {
  const std::vector<DecodeCandidate>& cands = decode_candidates();
  auto predicted = [&](size_t i, int nt) {
    const DecodeCandidate& c = cands[i];
    const long blocks = (n_tiles + c.tiles_per_block - 1) / c.tiles_per_block * c.ksplit;
    const long slots = static_cast<long>(device.sms) * device.resident[i][fp8 ? 1 : 0][nt - 1];
    return wave_fill(blocks, slots) * c.score[fp8 ? 1 : 0][nt - 1];
  };
  // The distinct (warps, k split) groups, found once: this runs on every default launch.
  static const std::vector<std::pair<int, int>> groups = [&cands] {
    std::vector<std::pair<int, int>> g;
    for (const DecodeCandidate& c : cands) {
      if (std::find(g.begin(), g.end(), std::pair{c.warps, c.ksplit}) == g.end()) g.emplace_back(c.warps, c.ksplit);
    }
    return g;
  }();
  DecodePick best;
  double best_score = -1.0;
  for (const auto& [warps, ksplit] : groups) {
    int pick[2] = {0, 0};
    double score[2] = {-1.0, -1.0};
    for (size_t i = 0; i < cands.size() && i < device.resident.size(); ++i) {
      if (cands[i].warps != warps || cands[i].ksplit != ksplit) continue;
      for (int nt = 1; nt <= 2; ++nt) {
        if (device.resident[i][fp8 ? 1 : 0][nt - 1] <= 0) continue;  // does not run on this device
        const double s = predicted(i, nt);
        if (s > score[nt - 1]) {
          score[nt - 1] = s;
          pick[nt - 1] = cands[i].tuning;
        }
      }
    }
    const double predicted_group = 0.7 * score[0] + 0.3 * score[1];
    if (pick[0] != 0 && pick[1] != 0 && predicted_group > best_score) {
      best_score = predicted_group;
      best = {pick[0], pick[1]};
    }
  }
  return best;
}

}  // namespace voltserve::kernels::sm80
