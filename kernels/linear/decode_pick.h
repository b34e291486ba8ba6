// Default variant of the sm80 decode kernel (LinearArgs::tuning = 0), chosen by how evenly each candidate's grid
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

struct DecodeCandidate {
  int tuning;            // the LinearArgs::tuning value of this variant
  int tiles_per_block;   // 16-row tiles per block
  int warps;             // warps per block, splitting k
  int ksplit;            // blocks of a cluster splitting k further (1 or 2; 2 needs sm_90)
  float score[2][2];     // [fp8][token tiles - 1]
};

// The variants the default pick chooses from (the CUDA side is C++17: no std::span here).
const std::vector<DecodeCandidate>& decode_candidates();

// The running device: SM count and, per decode_candidates() entry, resident blocks per SM [fp8][token tiles - 1]
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
