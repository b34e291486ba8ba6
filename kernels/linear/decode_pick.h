// The sm80 decode kernel's variants and the default one, chosen by how evenly each candidate's grid
// fills the GPU. CUDA-free so that the CPU tests cover it (tests/kernels/linear_decode_pick_test.cpp); the kernel
// side (linear_sm80.cu) supplies the device: SM count and each candidate's resident blocks per SM.
//
// Model (fitted and cross-validated on an H200 sweep, bench/RESULTS.md): a decode kernel streams
// best when its blocks fill whole waves of the GPU's block slots (a 512-block grid on 528 slots: 84%; the same
// weight in 640 slots: 76%), so predicted % of ceiling = fill(blocks, SMs x resident blocks per SM) x score, where
// score is the candidate's own efficiency: the median over the 27B shapes of measured % / fill.
#pragma once

#include <array>
#include <vector>

namespace voltserve::kernels::sm80 {

// One variant of the sm80 decode kernel (linear_sm80.cu instantiates exactly these, from this table): its block shape
// (the kernel's template parameters) and its score for the pick. `id` is the number benchmarks and tests name it by
// (`bench_linear --variants`), the same numbers bench/RESULTS.md's sweeps use; gaps are variants measured and removed.
struct DecodeCandidate {
  int id;
  int tiles_per_block;   // 16-row tiles per block
  int ring;              // weight loads in flight per warp
  int warps;             // warps per block, splitting k
  int min_blocks;        // resident blocks per SM asked of the register allocator (__launch_bounds__)
  bool late_x2;          // two token tiles: x loaded right before use (fewer live registers) instead of a step ahead
  int ksplit;            // blocks of a cluster splitting k further (1 or 2; 2 needs sm_90)
  float score[2][2];     // [fp8][token tiles - 1]
};

// Scores: an H200 sweep (`bench_linear --sweep-only` after a 25 ms warm-up per measurement, 11 weight shapes of the
// 27B model including the merged projections, M = 1 and 8 for one token tile, 16 for two), median of measured % of the
// read ceiling over wave_fill. Leave-one-shape-out, this pick reached 73.4% (NVFP4) and 85.8% (FP8) of the ceiling,
// weighted by the shapes' bytes over M = 1, 8, 16, against 74.2% / 86.6% for the best variant per shape in hindsight
// (bench/RESULTS.md). 27..29 were scored the same way on two later sweeps, then rescaled by the median ratio of the
// scores above to their own new scores (per format and token tiles), so that all scores stay on one scale; they win
// where a weight's tiles just fit 7 or 8 blocks per SM (merged q+k+v, qkv+z on 132 SMs). 23..26 are 5, 21, 10 and 19
// with k split over the two blocks of a cluster.
inline constexpr DecodeCandidate kDecodeCandidates[] = {
    // id, tiles/block, ring, warps, min blocks, late x, k split, {{NVFP4 nt1, nt2}, {FP8 nt1, nt2}}
    {4, 2, 4, 4, 5, false, 1, {{120, 77}, {166, 148}}},  {21, 2, 4, 4, 5, true, 1, {{119, 91}, {166, 140}}},
    {9, 2, 4, 4, 4, false, 1, {{116, 93}, {165, 124}}},  {19, 1, 2, 4, 6, false, 1, {{105, 65}, {136, 116}}},
    {5, 1, 4, 4, 5, false, 1, {{92, 62}, {119, 100}}},   {11, 2, 6, 4, 3, false, 1, {{97, 77}, {142, 111}}},
    {18, 2, 6, 4, 4, false, 1, {{110, 93}, {142, 119}}}, {8, 1, 4, 4, 4, false, 1, {{87, 61}, {118, 94}}},
    {22, 1, 2, 8, 3, true, 1, {{79, 58}, {100, 83}}},    {10, 1, 3, 8, 3, false, 1, {{75, 43}, {96, 81}}},
    {17, 2, 4, 8, 3, false, 1, {{94, 41}, {137, 110}}},  {6, 1, 2, 8, 4, false, 1, {{92, 38}, {111, 93}}},
    {2, 1, 3, 8, 4, false, 1, {{81, 29}, {110, 91}}},    {7, 1, 4, 16, 1, false, 1, {{46, 37}, {66, 56}}},
    {23, 1, 4, 4, 5, false, 2, {{60, 43}, {84, 72}}},    {24, 2, 4, 4, 5, true, 2, {{79, 60}, {108, 90}}},
    {25, 1, 3, 8, 3, false, 2, {{49, 29}, {72, 57}}},    {26, 1, 2, 4, 6, false, 2, {{67, 44}, {89, 83}}},
    {27, 1, 2, 4, 7, false, 1, {{115, 67}, {139, 116}}}, {28, 1, 2, 4, 8, false, 1, {{119, 60}, {148, 115}}},
    {29, 1, 3, 4, 7, false, 1, {{107, 59}, {141, 113}}},
};
inline constexpr int kDecodeCandidateCount = static_cast<int>(sizeof(kDecodeCandidates) / sizeof(kDecodeCandidates[0]));

// Index of the candidate with this id in kDecodeCandidates, or -1.
int decode_candidate_index(int id);

// The running device: SM count and, per kDecodeCandidates entry, resident blocks per SM [fp8][token tiles - 1]
// (0: the candidate does not run there).
struct DecodeDevice {
  int sms = 0;
  std::vector<std::array<std::array<int, 2>, 2>> resident;
};

// Fraction of the block slots a grid keeps busy over its waves: blocks / (ceil(blocks / slots) * slots).
double wave_fill(long blocks, long slots);

// The variants for one (nt1) and two (nt2) token tiles of a weight of n_tiles tiles. Both come from one group of
// equal warps per block and k split (these alone set the order of every sum), so a token's sums have the same
// order whatever m is (batch invariance: speculative verification reproduces plain decoding bit for bit): the
// group whose best candidates predict the most for 0.7 x nt1 + 0.3 x nt2 (decode at M <= 8 is the common case).
struct DecodePick {
  int nt1 = 0;
  int nt2 = 0;
};
DecodePick pick_decode_variants(const DecodeDevice& device, bool fp8, long n_tiles);

}  // namespace voltserve::kernels::sm80
