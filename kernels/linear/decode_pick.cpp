// Default sm80 decode variant by wave fill (see decode_pick.h).
#include "linear/decode_pick.h"

#include <algorithm>
#include <cstddef>
#include <utility>

namespace voltserve::kernels::sm80 {

int decode_candidate_index(int id) {
  for (int i = 0; i < kDecodeCandidateCount; ++i) {
    if (kDecodeCandidates[i].id == id) return i;
  }
  return -1;
}

double wave_fill(long blocks, long slots) {
  if (blocks <= 0 || slots <= 0) return 0.0;
  const long waves = (blocks + slots - 1) / slots;
  return static_cast<double>(blocks) / static_cast<double>(waves * slots);
}

DecodePick pick_decode_variants(const DecodeDevice& device, bool fp8, long n_tiles) {
  const auto& cands = kDecodeCandidates;
  constexpr size_t kCount = static_cast<size_t>(kDecodeCandidateCount);
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
    for (size_t i = 0; i < kCount && i < device.resident.size(); ++i) {
      if (cands[i].warps != warps || cands[i].ksplit != ksplit) continue;
      for (int nt = 1; nt <= 2; ++nt) {
        if (device.resident[i][fp8 ? 1 : 0][nt - 1] <= 0) continue;  // does not run on this device
        const double s = predicted(i, nt);
        if (s > score[nt - 1]) {
          score[nt - 1] = s;
          pick[nt - 1] = cands[i].id;
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
