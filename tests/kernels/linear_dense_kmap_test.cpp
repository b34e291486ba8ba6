// The dense decode kernels' lane maps (kernels/linear/dense_kmap.h) run through a CPU model of the two MMA shapes as
// the PTX ISA defines their fragments (mma.m16n8k16 for sm80, mma.m8n8k4 per quad-pair for sm70), mirroring the
// kernels' loads (rows, chunks, x offsets in both layouts, zero fill past k and for padded tokens), k split over
// warps and epilogues; small integer inputs make every sum exact, so the result must equal x · W^T exactly.
// Also the warps-per-block pick on the 27B shapes. No GPU needed.
#include <catch2/catch_test_macros.hpp>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "kernels/linear/dense_kmap.h"
#include "kernels/linear/x_layout.h"

using namespace voltserve::kernels;

namespace {

struct Problem {
  int n, k, m;
  XLayout layout;
  std::vector<double> w;   // [n, k] row-major
  std::vector<double> x;   // [m, k] logical
  std::vector<double> xl;  // x in `layout` (x_buffer_halves; unwritten slots NaN)
  std::vector<double> ref;  // [m, n]
};

Problem make_problem(int n, int k, int m, XLayout layout, uint64_t seed) {
  Problem p{n, k, m, layout, {}, {}, {}, {}};
  uint64_t s = seed;
  auto next = [&s] {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<int>((s >> 33) % 17) - 8;  // -8..8: exact in fp16, sums exact in double
  };
  p.w.resize(static_cast<size_t>(n) * k);
  for (auto& v : p.w) v = next();
  p.x.resize(static_cast<size_t>(m) * k);
  for (auto& v : p.x) v = next();
  p.xl.assign(static_cast<size_t>(x_buffer_halves(layout, m, k)), std::numeric_limits<double>::quiet_NaN());
  for (int tok = 0; tok < m; ++tok)
    for (int kk = 0; kk < k; ++kk) p.xl[static_cast<size_t>(x_offset(layout, k, tok, kk))] = p.x[static_cast<size_t>(tok) * k + kk];
  p.ref.assign(static_cast<size_t>(m) * n, 0.0);
  for (int tok = 0; tok < m; ++tok)
    for (int r = 0; r < n; ++r) {
      double acc = 0;
      for (int kk = 0; kk < k; ++kk) acc += p.x[static_cast<size_t>(tok) * k + kk] * p.w[static_cast<size_t>(r) * k + kk];
      p.ref[static_cast<size_t>(tok) * n + r] = acc;
    }
  return p;
}

// Half e (0: low, 1: high) of half2 word `word` (0..3) of 16-byte chunk c of weight row `row`: zero past k, as the
// kernels' zero-filled loads.
double w_half(const Problem& p, int row, int c, int word, int e) {
  if (c >= p.k / 8) return 0.0;
  return p.w[static_cast<size_t>(row) * p.k + 8 * c + 2 * word + e];
}

// The same for token `tok`'s x, read the way the kernels address it: base at the warp's first k-block, plus the
// k-block step, plus the chunk step; checked against x_offset of the element itself.
double x_half(const Problem& p, int tok, int warp, int warps, int kb, int chunk, int word, int e, bool* addr_ok) {
  const int c = kb * 8 + chunk;
  if (tok >= p.m || c >= p.k / 8) return 0.0;
  const int64_t base = x_offset(p.layout, p.k, tok, static_cast<int64_t>(warp) * dense::kKBlock);
  const int64_t at = base + static_cast<int64_t>(kb - warp) * x_block_step(p.layout) + x_chunk_step(p.layout, chunk) +
                     2 * word + e;
  (void)warps;
  if (at != x_offset(p.layout, p.k, tok, 8 * c + 2 * word + e) || at < 0 || at >= static_cast<int64_t>(p.xl.size())) {
    *addr_ok = false;
    return 0.0;
  }
  return p.xl[static_cast<size_t>(at)];
}

// sm80 kernel model: y [m, n].
std::vector<double> run_sm80(const Problem& p, int warps, bool* addr_ok) {
  const int nt_tiles = p.m > 8 ? 2 : 1;
  const int kblocks = static_cast<int>(dense::kblocks(p.k));
  std::vector<double> y(static_cast<size_t>(p.m) * p.n, std::numeric_limits<double>::quiet_NaN());
  for (int tile = 0; tile < dense::row_tiles(p.n); ++tile) {
    // red[warp][nt][lane][c]
    std::vector<double> red(static_cast<size_t>(warps) * nt_tiles * 128, 0.0);
    for (int warp = 0; warp < warps; ++warp) {
      for (int kb = warp; kb < kblocks; kb += warps) {
        for (int nt = 0; nt < nt_tiles; ++nt) {
          for (int i = 0; i < 4; ++i) {
            double A[16][16] = {}, B[16][8] = {};
            for (int lane = 0; lane < 32; ++lane) {
              const int g = lane / 4, t = lane % 4;
              for (int half_pair = 0; half_pair < 2; ++half_pair) {  // word 2i (logical pair t) or 2i + 1 (t + 4)
                const int wi = 2 * i + half_pair;
                const int j = wi / 4, word = wi % 4;
                const int chunk = dense::sm80_chunk(t, j);
                const int c = kb * 8 + chunk;
                for (int e = 0; e < 2; ++e) {
                  const int kl = 2 * t + 8 * half_pair + e;  // logical k of the MMA
                  for (int h = 0; h < 2; ++h) {
                    const int row = std::min(tile * 16 + dense::sm80_row(lane, h), p.n - 1);
                    A[g + 8 * h][kl] = w_half(p, row, c, word, e);
                  }
                  B[kl][g] = x_half(p, nt * 8 + dense::sm80_row(lane, 0), warp, warps, kb, chunk, word, e, addr_ok);
                }
              }
            }
            for (int lane = 0; lane < 32; ++lane) {
              const int g = lane / 4, t = lane % 4;
              for (int c = 0; c < 4; ++c) {
                const int r = g + 8 * (c / 2), col = 2 * t + c % 2;  // m16n8k16 C fragment
                double s = 0;
                for (int kl = 0; kl < 16; ++kl) s += A[r][kl] * B[kl][col];
                red[((static_cast<size_t>(warp) * nt_tiles + nt) * 32 + lane) * 4 + c] += s;
              }
            }
          }
        }
      }
    }
    // Epilogue, as the kernel: o = nt * 128 + lane * 4 + c.
    for (int o = 0; o < nt_tiles * 128; ++o) {
      double sum = 0;
      for (int w = 0; w < warps; ++w) sum += red[static_cast<size_t>(w) * nt_tiles * 128 + o];
      const int nt = o / 128, ln = (o / 4) % 32, c = o % 4;
      const int row = tile * 16 + (ln >> 2) + 8 * (c >> 1);
      const int tok = nt * 8 + 2 * (ln & 3) + (c & 1);
      if (row < p.n && tok < p.m) y[static_cast<size_t>(tok) * p.n + row] = sum;
    }
  }
  return y;
}

// sm70 kernel model. The accumulator layout of mma.m8n8k4 is left to an arbitrary bijection (lane in quad-pair,
// slot) -> (A row, B column): the kernel finds it with a calibration MMA, and so does this model.
std::vector<double> run_sm70(const Problem& p, int warps, bool* addr_ok) {
  auto slot_rc = [](int qp_lane, int slot) {  // any bijection of 8 x 8 onto 8 x 8
    const int v = (qp_lane * 8 + slot) * 37 % 64;
    return std::pair<int, int>{v / 8, v % 8};
  };
  auto qp_lane_of = [](int lane) { return (lane & 3) + 4 * (lane >> 4); };  // lane's index inside its quad-pair
  const int nt_tiles = p.m > 8 ? 2 : 1;
  const int cols = nt_tiles * 8;
  const int part = 16 * cols;
  const int kblocks = static_cast<int>(dense::kblocks(p.k));
  std::vector<double> y(static_cast<size_t>(p.m) * p.n, std::numeric_limits<double>::quiet_NaN());
  for (int tile = 0; tile < dense::row_tiles(p.n); ++tile) {
    std::vector<double> red(static_cast<size_t>(warps) * 2 * part, std::numeric_limits<double>::quiet_NaN());
    for (int warp = 0; warp < warps; ++warp) {
      std::vector<double> acc(static_cast<size_t>(nt_tiles) * 32 * 8, 0.0);  // [nt][lane][slot]
      for (int kb = warp; kb < kblocks; kb += warps) {
        for (int j = 0; j < 4; ++j) {
          for (int nt = 0; nt < nt_tiles; ++nt) {
            for (int step = 0; step < 2; ++step) {  // words x, y then z, w of the chunk
              for (int q = 0; q < 4; ++q) {
                double A[8][4] = {}, B[4][8] = {};
                for (int lane = 0; lane < 32; ++lane) {
                  if (dense::sm70_quad_pair(lane) != q) continue;
                  const int rr = dense::sm70_rr(lane);
                  const int chunk = dense::sm70_chunk(lane, j);
                  const int c = kb * 8 + chunk;
                  const int row = std::min(tile * 16 + dense::sm70_row(lane), p.n - 1);
                  for (int kk = 0; kk < 4; ++kk) {
                    const int word = 2 * step + kk / 2, e = kk % 2;
                    A[rr][kk] = w_half(p, row, c, word, e);
                    B[kk][rr] = x_half(p, nt * 8 + rr, warp, warps, kb, chunk, word, e, addr_ok);
                  }
                }
                // Every lane of the quad-pair must use the same k: one chunk index per quad-pair.
                for (int lane = 0; lane < 32; ++lane) {
                  if (dense::sm70_quad_pair(lane) == q && dense::sm70_chunk(lane, j) != dense::sm70_chunk(4 * q, j)) *addr_ok = false;
                }
                for (int lane = 0; lane < 32; ++lane) {
                  if (dense::sm70_quad_pair(lane) != q) continue;
                  for (int slot = 0; slot < 8; ++slot) {
                    const auto [r, col] = slot_rc(qp_lane_of(lane), slot);
                    double s = 0;
                    for (int kk = 0; kk < 4; ++kk) s += A[r][kk] * B[kk][col];
                    acc[(static_cast<size_t>(nt) * 32 + lane) * 8 + slot] += s;
                  }
                }
              }
            }
          }
        }
      }
      // Calibration (C[r][c] = 8r + c) and placement, as the kernel.
      for (int lane = 0; lane < 32; ++lane) {
        const int q = dense::sm70_quad_pair(lane);
        const int par = dense::sm70_parity(lane);
        for (int nt = 0; nt < nt_tiles; ++nt)
          for (int slot = 0; slot < 8; ++slot) {
            const auto [r, col] = slot_rc(qp_lane_of(lane), slot);
            const int v = 8 * r + col;
            red[static_cast<size_t>(warp) * 2 * part + par * part + (8 * (q / 2) + (v >> 3)) * cols + nt * 8 + (v & 7)] =
                acc[(static_cast<size_t>(nt) * 32 + lane) * 8 + slot];
          }
      }
    }
    for (int o = 0; o < part; ++o) {
      double sum = 0;
      for (int w = 0; w < warps; ++w) sum += red[static_cast<size_t>(w) * 2 * part + o] + red[static_cast<size_t>(w) * 2 * part + part + o];
      const int row = tile * 16 + o / cols;
      const int tok = o % cols;
      if (row < p.n && tok < p.m) y[static_cast<size_t>(tok) * p.n + row] = sum;
    }
  }
  return y;
}

}  // namespace

TEST_CASE("dense decode lane maps compute x W^T exactly (CPU model of both MMA shapes)", "[unit]") {
  const int shapes[][2] = {{16, 16}, {48, 80}, {24, 112}, {40, 64}, {33, 208}, {7, 48}, {64, 320}};
  uint64_t seed = 1;
  for (const auto& s : shapes) {
    for (int m : {1, 3, 8, 9, 16}) {
      for (XLayout layout : {XLayout::kRowMajor, XLayout::kTokenChunked}) {
        for (int warps : {4, 8, 16}) {
          const Problem p = make_problem(s[0], s[1], m, layout, seed++);
          for (int fam = 0; fam < 2; ++fam) {
            bool addr_ok = true;
            const std::vector<double> y = fam == 0 ? run_sm70(p, warps, &addr_ok) : run_sm80(p, warps, &addr_ok);
            size_t bad = 0, first = y.size();
            for (size_t i = 0; i < y.size(); ++i) {
              if (!(y[i] == p.ref[i])) {
                if (bad++ == 0) first = i;
              }
            }
            INFO("dense " << (fam == 0 ? "sm70" : "sm80") << " n=" << p.n << " k=" << p.k << " m=" << m << " warps=" << warps
                          << " x=" << (layout == XLayout::kRowMajor ? "row" : "chunked") << " mismatches=" << bad
                          << " first at " << first);
            CHECK(addr_ok);
            CHECK(bad == 0);
          }
        }
      }
    }
  }
}

TEST_CASE("dense decode warps per block follow the shape only", "[unit]") {
  CHECK(dense::decode_warps(248320, 5120) == 4);  // lm_head: 15520 tiles
  CHECK(dense::decode_warps(5120, 10240) == 8);   // mtp.fc: 320 tiles
  CHECK(dense::decode_warps(48, 5120) == 16);     // gdn in_proj_a / b: 3 tiles
  CHECK(dense::decode_warps(128, 128) == 4);      // fixtures: 2 k-blocks, no idle warps beyond 4
  CHECK(dense::decode_warps(16, 512) == 8);
  CHECK(dense::decode_warps(16, 16) == 4);
  for (int t : {0, 4, 8, 16}) CHECK(dense::valid_decode_warps(t));
  for (int t : {1, 2, 3, 5, 12, 32, -4}) CHECK_FALSE(dense::valid_decode_warps(t));
}
