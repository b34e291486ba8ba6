// CPU tests of the Gated DeltaNet device form without a GPU: the scalar helpers (gdn_math.h) against the
// reference's formulas, the host checks and launch plans (gdn_plan.cpp), one warp's delta-rule step on an emulated
// warp against the recurrence written out, and the kernels' block bodies (gdn_blocks.h) run by the CPU emulator
// (gdn_emulator.h) against gdn_ref through the same cases as the GPU test (gdn_cases.h), on the tiny fixture shapes
// and on a few 27B-shape steps.
#include "kernels/gdn/gdn_blocks.h"

#include <catch2/catch_test_macros.hpp>
#include <algorithm>
#include <utility>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "gdn_cases.h"
#include "gdn_emulator.h"
#include "kernels/gdn/gdn_math.h"
#include "kernels/gdn/gdn_plan.h"

using namespace voltserve::kernels;
using namespace voltserve::kernels::gdn;
using voltserve::test::EmuCtx;
using voltserve::test::SplitMix;
namespace cases = voltserve::test::gdn;

namespace {

class EmuBackend final : public cases::Backend {
 public:
  ~EmuBackend() override {
    for (void* p : blocks_) std::free(p);
  }
  void* alloc(size_t bytes) override {
    void* p = std::aligned_alloc(256, (bytes + 255) / 256 * 256);
    blocks_.push_back(p);
    return p;
  }
  void upload(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
  void download(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
  void fill(void* dst, uint8_t byte, size_t bytes) override { std::memset(dst, byte, bytes); }
  KernelStatus forward(const Params& p, const DeviceArgs& a) override {
    return voltserve::test::emulate_forward(p, a, options);
  }
  KernelStatus commit(const Params& p, const State* layers, int32_t n_layers, const Commit* c, int32_t n) override {
    return voltserve::test::emulate_commit(p, layers, n_layers, c, n);
  }
  PlanOptions options;  // e.g. pass_cols: the state-pass width

 private:
  std::vector<void*> blocks_;
};

// Runs fn(ctx) on one emulated block of `threads` threads.
template <class Fn>
void run_block(int32_t threads, Fn fn) {
  Launch l;
  l.run = true;
  l.threads = static_cast<uint32_t>(threads);
  voltserve::test::emulate_launch(l, [&](EmuCtx& ctx, int32_t, int32_t, int32_t, float*) { fn(ctx); });
}

}  // namespace

TEST_CASE("gdn helpers follow the reference's formulas", "[unit]") {
  for (float x : {-30.0f, -5.0f, -0.5f, 0.0f, 0.25f, 3.0f, 19.9f, 20.0f, 20.1f, 40.0f}) {
    CHECK(silu(x) == x / (1.0f + std::exp(-x)));
    CHECK(sigmoid(x) == 1.0f / (1.0f + std::exp(-x)));
    CHECK(softplus(x) == (x > 20.0f ? x : std::log1p(std::exp(x))));
  }
  CHECK(softplus(20.5f) == 20.5f);  // torch's threshold: linear above 20
  CHECK(softplus(20.0f) == std::log1p(std::exp(20.0f)));
  CHECK(log_decay(0.3f, 1.5f, -0.25f) == -std::exp(0.3f) * std::log1p(std::exp(1.25f)));
  CHECK(log_decay(-7.0f, -40.0f, 0.0f) <= 0.0f);
  CHECK(l2_inv(4.0f) == 1.0f / std::sqrt(4.0f + 1e-6f));
  CHECK(rms_inv(12.0f, 3, 1e-6f) == 1.0f / std::sqrt(12.0f / 3.0f + 1e-6f));
  const float o = 0.7f, inv = 1.3f, w = 0.9f, z = -0.4f;
  CHECK(gated_norm(o, inv, w, z) == o * inv * w * (z / (1.0f + std::exp(-z))));
}

TEST_CASE("gdn sequence rules: token cut, checkpoints, chunked form", "[unit]") {
  SeqDesc s;
  s.row0 = 10;
  s.n_tokens = 40;
  s.slot = 2;
  CHECK(seq_tokens(s, 100, 64) == 40);
  CHECK(seq_tokens(s, 30, 64) == 20);   // cut at n_rows
  CHECK(seq_tokens(s, 100, 16) == 16);  // cut at max_seq_tokens
  s.slot = -1;
  CHECK(seq_tokens(s, 100, 64) == 0);
  s.slot = 0;
  s.n_tokens = 0;
  CHECK(seq_tokens(s, 100, 64) == 0);
  s.n_tokens = 5;
  s.row0 = 100;
  CHECK(seq_tokens(s, 100, 64) == 0);
  s.ckpt = 3;
  CHECK(seq_has_ckpt(s, true));
  CHECK_FALSE(seq_has_ckpt(s, false));
  CHECK_FALSE(seq_chunked(Mode::kAuto, 64, false));
  CHECK(seq_chunked(Mode::kAuto, 65, false));
  CHECK_FALSE(seq_chunked(Mode::kAuto, 65, true));
  CHECK(seq_chunked(Mode::kChunked, 1, false));
  CHECK_FALSE(seq_chunked(Mode::kChunked, 100, true));
  CHECK_FALSE(seq_chunked(Mode::kSequential, 5000, false));
}

TEST_CASE("gdn checkpoint layout: a bijection on a head's state, whole quads of columns along the rows", "[unit]") {
  for (const auto& [dk, dv] : {std::pair{128, 128}, {24, 24}, {8, 16}, {16, 10}, {5, 3}, {32, 7}}) {
    INFO("dk " << dk << " dv " << dv);
    std::vector<int> hits(static_cast<size_t>(dk * dv), 0);
    for (int32_t d = 0; d < dk; ++d) {
      for (int32_t e = 0; e < dv; ++e) {
        const int64_t o = ckpt_offset(dk, dv, d, e);
        REQUIRE(o >= 0);
        REQUIRE(o < int64_t{dk} * dv);
        ++hits[static_cast<size_t>(o)];
        // A full quad of columns is contiguous, and row d + 1's quad follows row d's.
        if (e < dv / 4 * 4) {
          CHECK(o == ckpt_offset(dk, dv, d, e / 4 * 4) + e % 4);
          if (d + 1 < dk) CHECK(ckpt_offset(dk, dv, d + 1, e) == o + 4);
        }
      }
    }
    CHECK(std::count(hits.begin(), hits.end(), 1) == dk * dv);
  }
}

TEST_CASE("gdn workspace layout: aligned, disjoint sections", "[unit]") {
  const Params p = cases::shape_27b().p;
  const WorkspaceLayout l = workspace_layout(p.n_k_heads, p.n_v_heads, p.head_k_dim, p.head_v_dim, 37);
  const int64_t sections[] = {l.conv, l.beta, l.g, l.gam, l.w, l.u, l.qe, l.p, l.total};
  for (int64_t s : sections) CHECK(s % 64 == 0);
  CHECK(l.beta - l.conv >= 37 * int64_t{p.conv_dim()});
  CHECK(l.gam - l.g >= 37 * 48);
  CHECK(l.u - l.w >= 37 * 48 * 128);
  CHECK(l.total - l.p >= 37 * 48 * 128);
  CHECK(workspace_bytes(p, 37, 1, 37) == static_cast<size_t>(l.total) * 4);
  CHECK(workspace_bytes(p, 0, 0, 0) == 0);
}

TEST_CASE("gdn plan checks arguments and shapes the launches", "[unit]") {
  const Params p = cases::shape_27b().p;
  static float dummy[64];
  alignas(256) static float ws[1 << 16];
  SeqDesc seq;
  DeviceArgs a;
  a.qkv = a.z = a.b = a.a = dummy;
  a.qkv_stride = p.conv_dim();
  a.z_stride = a.out_stride = 48 * 128;
  a.b_stride = a.a_stride = 48;
  a.w = {dummy, dummy, dummy, dummy};
  alignas(16) static float state[16];
  a.state.conv = dummy;
  a.state.recurrent = state;
  a.seqs = &seq;
  a.n_seqs = 1;
  a.out = dummy;
  a.n_rows = 1;
  a.max_seq_tokens = 1;
  a.workspace = ws;
  a.workspace_bytes = workspace_bytes(p, 1, 1, 1);
  REQUIRE(a.workspace_bytes <= sizeof(ws));
  ForwardPlan plan;
  REQUIRE(plan_forward(p, a, &plan).ok());
  CHECK(plan.conv.run);
  CHECK(plan.conv.grid.x == 80);
  CHECK(plan.conv.grid.y == 1);
  CHECK(plan.recurrent.threads == 512);
  CHECK(plan.recurrent.grid.x == 48);
  CHECK(plan.recurrent.smem_bytes <= 48 * 1024);
  CHECK_FALSE(plan.prep.run);  // decode: two launches
  CHECK_FALSE(plan.state_pass.run);
  CHECK(plan.k.q_scale == 1.0f / std::sqrt(128.0f));

  DeviceArgs b = a;
  b.max_seq_tokens = 65;
  b.n_rows = 65;
  b.workspace_bytes = workspace_bytes(p, 65, 1, 65);
  std::vector<float> big_ws(b.workspace_bytes / 4 + 64);
  b.workspace = reinterpret_cast<void*>((reinterpret_cast<uintptr_t>(big_ws.data()) + 255) / 256 * 256);
  REQUIRE(plan_forward(p, b, &plan).ok());
  CHECK(plan.prep.run);
  CHECK(plan.prep.grid.x == 2);
  CHECK(plan.pass_cols == 16);  // no SM count given: the narrow pass
  CHECK(plan.state_pass.smem_bytes <= 48 * 1024);
  CHECK(plan.prep.smem_bytes <= 48 * 1024);
  REQUIRE(plan_forward(p, b, &plan, PlanOptions{132, 0}).ok());
  CHECK(plan.pass_cols == 32);  // one sequence: 384 blocks of 16 columns would take two waves of an H200's 264 slots
  CHECK(plan.state_pass.grid.x == 4);
  REQUIRE(plan_forward(p, b, &plan, PlanOptions{192, 0}).ok());
  CHECK(plan.pass_cols == 16);  // 384 blocks of 16 fit one wave of 2 x 192
  CHECK(plan.state_pass.grid.x == 8);
  REQUIRE(plan_forward(p, b, &plan, PlanOptions{0, 32}).ok());
  CHECK(plan.pass_cols == 32);
  CHECK(plan.state_pass.threads == 256);
  CHECK(plan.state_pass.smem_bytes <= 96 * 1024);  // Volta's opt-in limit
  CHECK(plan_forward(p, b, &plan, PlanOptions{0, 24}).code == KernelCode::kBadArgument);
  std::vector<SeqDesc> six(6);
  DeviceArgs b6 = b;
  b6.seqs = six.data();
  b6.n_seqs = 6;
  REQUIRE(plan_forward(p, b6, &plan, PlanOptions{132, 0}).ok());
  CHECK(plan.pass_cols == 32);
  b.mode = Mode::kSequential;
  REQUIRE(plan_forward(p, b, &plan).ok());
  CHECK_FALSE(plan.prep.run);

  auto code = [&](const Params& pp, const DeviceArgs& aa) { return plan_forward(pp, aa, &plan).code; };
  Params bad = p;
  bad.head_v_dim = 20;
  CHECK(code(bad, a) == KernelCode::kUnsupported);
  bad = p;
  bad.head_k_dim = 136;
  CHECK(code(bad, a) == KernelCode::kUnsupported);
  bad = p;
  bad.conv_kernel = 9;
  CHECK(code(bad, a) == KernelCode::kUnsupported);
  bad = p;
  bad.conv_kernel = 1;
  CHECK(code(bad, a) == KernelCode::kUnsupported);
  bad = p;
  bad.n_v_heads = 40;
  CHECK(code(bad, a) == KernelCode::kBadShape);
  DeviceArgs c = a;
  c.z = nullptr;
  CHECK(code(p, c) == KernelCode::kBadArgument);
  c = a;
  c.qkv_stride = p.conv_dim() - 1;
  CHECK(code(p, c) == KernelCode::kBadShape);
  c = a;
  c.workspace_bytes -= 4;
  CHECK(code(p, c) == KernelCode::kWorkspaceTooSmall);
  c = a;
  c.workspace = reinterpret_cast<char*>(ws) + 16;
  CHECK(code(p, c) == KernelCode::kBadArgument);
  c = a;
  c.state.recurrent = state + 1;
  CHECK(code(p, c) == KernelCode::kBadArgument);
  c = a;
  c.state.recurrent_ckpt = state;
  CHECK(code(p, c) == KernelCode::kBadArgument);  // no conv_ckpt / max_ckpt_tokens
  c = a;
  c.out_dtype = voltserve::DType::kBF16;
  CHECK(code(p, c) == KernelCode::kUnsupported);
  c = a;
  c.mode = static_cast<Mode>(9);
  CHECK(code(p, c) == KernelCode::kBadArgument);
  c = a;
  c.n_seqs = 0;
  c.workspace = nullptr;  // nothing to do: no checks of the buffers
  REQUIRE(plan_forward(p, c, &plan).ok());
  for (Stage s : kStages) CHECK_FALSE(stage_launch(plan, s).run);

  CommitPlan cp;
  State st;
  CHECK(plan_commit(p, &st, 1, nullptr, 0, nullptr, &cp).ok());
  CHECK_FALSE(cp.copy.run);
  CHECK(plan_commit(p, &st, 1, nullptr, 1, nullptr, &cp).code == KernelCode::kBadArgument);
  CHECK(plan_commit(p, &st, 0, nullptr, 1, nullptr, &cp).code == KernelCode::kBadShape);
  CHECK(plan_commit(p, &st, kMaxCommitLayers + 1, nullptr, 1, nullptr, &cp).code == KernelCode::kBadShape);
}

TEST_CASE("gdn reduce_scatter16 leaves slot lane/2 on each lane", "[unit]") {
  std::vector<float> got(32);
  run_block(32, [&](EmuCtx& ctx) {
    float p[16];
    for (int s = 0; s < 16; ++s) p[s] = static_cast<float>((ctx.tid + 1) * (s + 1) + s * 1000);
    got[static_cast<size_t>(ctx.tid)] = reduce_scatter16(ctx, p);
  });
  for (int lane = 0; lane < 32; ++lane) {
    const int s = lane >> 1;
    float want = 0;
    for (int l = 0; l < 32; ++l) want += static_cast<float>((l + 1) * (s + 1) + s * 1000);
    CHECK(got[static_cast<size_t>(lane)] == want);
  }
}

TEST_CASE("gdn delta_step on one warp matches the recurrence", "[unit]") {
  // One warp's 8 columns of a dk x 8 state slice, dk = 128 and 24: decay, u = S^T k, delta, S += k delta^T,
  // o = S^T q, written out directly (double) against delta_step on the emulated warp.
  for (int dk : {128, 24}) {
    SplitMix rng(77 + static_cast<uint64_t>(dk));
    std::vector<double> S(static_cast<size_t>(dk * 8)), k(static_cast<size_t>(dk)), q(static_cast<size_t>(dk)), v(8);
    for (auto& x : S) x = rng.uniform() - 0.5;
    for (auto& x : k) x = rng.uniform() - 0.5;
    for (auto& x : q) x = rng.uniform() - 0.5;
    for (auto& x : v) x = rng.uniform() * 2 - 1;
    const double decay = 0.8, beta = 0.6;
    std::vector<float> S_f(S.begin(), S.end()), k_f(k.begin(), k.end()), q_f(q.begin(), q.end()),
        v_f(v.begin(), v.end());
    std::vector<float> got_S(S.size()), got_o(8);
    run_block(32, [&](EmuCtx& ctx) {
      const int lane = ctx.tid;
      float st[4][8], kk[4], qq[4];
      for (int i = 0; i < 4; ++i) {
        const int d = lane + 32 * i;
        kk[i] = d < dk ? k_f[static_cast<size_t>(d)] : 0.0f;
        qq[i] = d < dk ? q_f[static_cast<size_t>(d)] : 0.0f;
        for (int c = 0; c < 8; ++c) st[i][c] = d < dk ? S_f[static_cast<size_t>(d * 8 + c)] : 0.0f;
      }
      const float o = delta_step(ctx, st, kk, qq, static_cast<float>(decay), static_cast<float>(beta),
                                 v_f[static_cast<size_t>((lane >> 1) & 7)]);
      if (lane >= 16 && lane % 2 == 0) got_o[static_cast<size_t>((lane - 16) >> 1)] = o;
      for (int i = 0; i < 4; ++i) {
        const int d = lane + 32 * i;
        for (int c = 0; c < 8 && d < dk; ++c) got_S[static_cast<size_t>(d * 8 + c)] = st[i][c];
      }
    });
    for (auto& x : S) x *= decay;
    for (int c = 0; c < 8; ++c) {
      double u = 0;
      for (int d = 0; d < dk; ++d) u += S[static_cast<size_t>(d * 8 + c)] * k[static_cast<size_t>(d)];
      const double delta = beta * (v[static_cast<size_t>(c)] - u);
      for (int d = 0; d < dk; ++d) S[static_cast<size_t>(d * 8 + c)] += k[static_cast<size_t>(d)] * delta;
    }
    for (int c = 0; c < 8; ++c) {
      double o = 0;
      for (int d = 0; d < dk; ++d) o += S[static_cast<size_t>(d * 8 + c)] * q[static_cast<size_t>(d)];
      CHECK(std::abs(got_o[static_cast<size_t>(c)] - o) < 1e-5);
    }
    double max_err = 0;
    for (size_t i = 0; i < S.size(); ++i) max_err = std::max(max_err, std::abs(got_S[i] - S[i]));
    CHECK(max_err < 1e-5);
  }
}

TEST_CASE("gdn kernel bodies on the CPU emulator match gdn_ref: tiny shapes", "[unit]") {
  EmuBackend be;
  uint64_t seed = 1000;
  int32_t shape_index = 0;
  for (const cases::Shape& sh : cases::tiny_shapes()) {
    be.options.pass_cols = shape_index++ % 2 ? 32 : 16;  // both state-pass widths
    INFO("pass_cols " << be.options.pass_cols);
    for (const auto& c : cases::recurrent_cases(sh.p, seed)) cases::run_case(be, sh.name, c);
    for (const auto& c : cases::chunked_cases(sh.p, seed + 100, false)) cases::run_case(be, sh.name, c);
    for (const auto& c : cases::mixed_cases(sh.p, seed + 200, false)) {
      cases::run_case(be, sh.name, c);
      if (c.n_calls == 1) cases::run_batch_invariance(be, sh.name, c);
    }
    seed += 1000;
  }
}

TEST_CASE("gdn commit on the CPU emulator: many layers per launch, and above a launch's layers", "[unit]") {
  EmuBackend be;
  uint64_t seed = 3000;
  for (const cases::Shape& sh : cases::tiny_shapes()) {
    for (int32_t n_layers : {1, 5, kMaxCommitLayers + 2}) cases::run_commit_layers(be, sh.name, sh.p, n_layers, seed++);
  }
}

TEST_CASE("gdn kernel bodies on the CPU emulator match gdn_ref: 27B shape steps", "[unit]") {
  EmuBackend be;
  const cases::Shape sh = cases::shape_27b();
  cases::CaseSpec decode;
  decode.name = "decode";
  decode.p = sh.p;
  decode.seqs = {{1, 1}, {1, 0, -1, 1}};
  decode.seed = 5001;
  cases::run_case(be, sh.name, decode);
  cases::CaseSpec verify;
  verify.name = "verify";
  verify.p = sh.p;
  verify.seqs = {{3, 0, 0}};
  verify.max_ckpt_tokens = 4;
  verify.n_ckpt_sets = 1;
  verify.commits = {{0, 0, 1}};
  verify.seed = 5002;
  cases::run_case(be, sh.name, verify);
  cases::CaseSpec prefill;
  prefill.p = sh.p;
  prefill.mode = Mode::kAuto;
  prefill.seqs = {{70, 0}};
  prefill.cross_ref = true;
  prefill.seed = 5003;
  for (int32_t cols : {16, 32}) {
    be.options.pass_cols = cols;
    prefill.name = "prefill pass_cols=" + std::to_string(cols);
    cases::run_case(be, sh.name, prefill);
  }
}

// The GPU test's long cases (2048-token segments in every mode, long memory) on one fixture shape; hidden from the
// default run (minutes on one core): test_kernels_gdn "[slow]".
TEST_CASE("gdn kernel bodies on the CPU emulator match gdn_ref: long segments", "[.][slow]") {
  EmuBackend be;
  const cases::Shape sh = cases::tiny_shapes()[1];
  for (const auto& c : cases::chunked_cases(sh.p, 7000, true)) cases::run_case(be, sh.name, c);
  for (const auto& c : cases::mixed_cases(sh.p, 7100, true)) cases::run_case(be, sh.name, c);
}
