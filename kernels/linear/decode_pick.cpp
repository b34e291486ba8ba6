// Default sm80 decode variant by wave fill (see decode_pick.h).
#include "linear/decode_pick.h"

#include <cstddef>

namespace voltserve::kernels::sm80 {

namespace {

// Scores: H200 sweep of 2026-11-30 (`bench_linear --sweep-only`, 11 weight shapes of the 27B model including the
// merged projections, M = 1 and 8 for one token tile, 16 for two), median of measured % of the read ceiling over
// wave_fill. Leave-one-shape-out, this pick reached 72.3% (NVFP4) and 83.1% (FP8) of the ceiling, weighted by the
// shapes' bytes over M = 1, 8, 16, against 72.9% / 84.3% for the best variant per shape in hindsight and 71.1% /
// 82.2% for the earlier tile-count thresholds.
const std::vector<DecodeCandidate> kCandidates = {
    // tuning, tiles/block, warps, {{NVFP4 nt1, nt2}, {FP8 nt1, nt2}}
    {4, 2, 4, {{116, 75}, {164, 146}}},   {21, 2, 4, {{115, 88}, {164, 137}}},
    {9, 2, 4, {{115, 92}, {164, 121}}},   {19, 1, 4, {{103, 63}, {134, 112}}},
    {5, 1, 4, {{91, 61}, {117, 97}}},     {11, 2, 4, {{94, 74}, {140, 109}}},
    {18, 2, 4, {{107, 90}, {140, 116}}},  {8, 1, 4, {{86, 60}, {118, 91}}},
    {22, 1, 8, {{78, 56}, {99, 81}}},     {10, 1, 8, {{73, 42}, {95, 79}}},
    {17, 2, 8, {{93, 40}, {134, 109}}},   {6, 1, 8, {{90, 37}, {109, 91}}},
    {2, 1, 8, {{80, 29}, {109, 89}}},     {7, 1, 16, {{45, 37}, {65, 55}}},
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
    const long blocks = (n_tiles + c.tiles_per_block - 1) / c.tiles_per_block;
    const long slots = static_cast<long>(device.sms) * device.resident[i][fp8 ? 1 : 0][nt - 1];
    return wave_fill(blocks, slots) * c.score[fp8 ? 1 : 0][nt - 1];
  };
  DecodePick best;
  double best_score = -1.0;
  for (int warps : {4, 8, 16}) {
    int pick[2] = {0, 0};
    double score[2] = {-1.0, -1.0};
    for (size_t i = 0; i < cands.size() && i < device.resident.size(); ++i) {
      if (cands[i].warps != warps) continue;
      for (int nt = 1; nt <= 2; ++nt) {
        const double s = predicted(i, nt);
        if (s > score[nt - 1]) {
          score[nt - 1] = s;
          pick[nt - 1] = cands[i].tuning;
        }
      }
    }
    const double group = 0.7 * score[0] + 0.3 * score[1];
    if (pick[0] != 0 && pick[1] != 0 && group > best_score) {
      best_score = group;
      best = {pick[0], pick[1]};
    }
  }
  return best;
}

}  // namespace voltserve::kernels::sm80
