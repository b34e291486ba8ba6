// CPU tests of the attention kernels' per-element helpers and block arithmetic (kernels/attention/attention_math.h)
// and launch plan (attention_plan.h): the helpers reproduce the reference's key norm, rotation and gate bit for bit;
// split plans cover every context exactly within the limits the grid and the combine kernel assume; team layouts fit
// the block; merged partial softmax states equal the direct softmax; the plan's grids and workspace cover the
// sequences any valid step can hold.
#include <catch2/catch_test_macros.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/attention/attention.h"
#include "kernels/attention/attention_math.h"
#include "kernels/attention/attention_plan.h"
#include "linear_random.h"

namespace ka = voltserve::kernels::attention;
namespace kd = voltserve::kernels::attention::detail;
using voltserve::kernels::SeqDesc;
using voltserve::test::SplitMix;

namespace {

ka::Params params(int32_t heads, int32_t kv, int32_t hd, int32_t rotary, float theta) {
  ka::Params p;
  p.n_heads = heads;
  p.n_kv_heads = kv;
  p.head_dim = hd;
  p.rotary_dim = rotary;
  p.rope_theta = theta;
  return p;
}

}  // namespace

TEST_CASE("attention helpers reproduce the reference's key norm, rotation and gate bit for bit", "[unit]") {
  for (const ka::Params& p : {params(24, 4, 256, 64, 1e7f), params(4, 2, 32, 8, 1e4f), params(4, 2, 32, 16, 1e4f),
                              params(2, 1, 64, 0, 1e4f), params(6, 2, 96, 96, 1e4f)}) {
    for (int32_t pos : {0, 1, 17, 1000, 32767}) {
      SplitMix rng(static_cast<uint64_t>(pos) * 31 + static_cast<uint64_t>(p.head_dim));
      const int64_t hd = p.head_dim, kvw = int64_t{p.n_kv_heads} * hd;
      std::vector<float> qg(static_cast<size_t>(p.n_heads * 2 * hd)), k(static_cast<size_t>(kvw)),
          v(static_cast<size_t>(kvw)), qn(static_cast<size_t>(hd)), kn(static_cast<size_t>(hd));
      for (auto& x : qg) x = static_cast<float>(rng.uniform() * 6 - 3);
      for (auto& x : k) x = static_cast<float>(rng.uniform() * 4 - 2);
      for (auto& x : v) x = static_cast<float>(rng.uniform() * 2 - 1);
      for (auto& x : qn) x = static_cast<float>(0.5 + rng.uniform());
      for (auto& x : kn) x = static_cast<float>(0.5 + rng.uniform());
      // One token at position pos; its only visible key is itself when pos == 0, so out = v * sigmoid(gate) exactly.
      const int32_t page_size = 16;
      const int32_t n_pages = pos / page_size + 1;
      std::vector<int32_t> table(static_cast<size_t>(n_pages));
      for (int32_t i = 0; i < n_pages; ++i) table[static_cast<size_t>(i)] = n_pages - 1 - i;
      std::vector<float> kc(static_cast<size_t>(n_pages * page_size * kvw), 0.0f), vc(kc.size(), 0.0f);
      std::vector<float> out(static_cast<size_t>(p.n_heads * hd));
      SeqDesc s;
      s.n_tokens = 1;
      s.n_past = pos;
      ka::RefArgs r;
      r.qg = qg.data();
      r.qg_stride = static_cast<int64_t>(qg.size());
      r.k = k.data();
      r.k_stride = kvw;
      r.v = v.data();
      r.v_stride = kvw;
      r.q_norm = qn.data();
      r.k_norm = kn.data();
      r.k_cache = kc.data();
      r.v_cache = vc.data();
      r.seqs = &s;
      r.n_seqs = 1;
      r.page_table = table.data();
      r.out = out.data();
      r.out_stride = p.n_heads * hd;
      ka::gated_attention_ref(p, r);

      std::vector<float> inv_freq(static_cast<size_t>(std::max(1, p.rotary_dim / 2)));
      kd::rope_inv_freq(p.rope_theta, p.rotary_dim, inv_freq.data());
      const float* row = kc.data() + kd::cache_row(table.data(), 0, page_size, pos) * kvw;
      bool same = true;
      for (int32_t g = 0; g < p.n_kv_heads; ++g) {
        const float* x = k.data() + g * hd;
        float sum_sq = 0.0f;
        for (int64_t d = 0; d < hd; ++d) sum_sq += x[d] * x[d];
        const float inv = kd::rms_inv(sum_sq, p.head_dim, p.rms_norm_eps);
        std::vector<float> y(static_cast<size_t>(hd));
        for (int64_t d = 0; d < hd; ++d) y[static_cast<size_t>(d)] = x[d] * inv * kn[static_cast<size_t>(d)];
        const int32_t half = p.rotary_dim / 2;
        for (int32_t j = 0; j < half; ++j) {
          const float theta = static_cast<float>(pos) * inv_freq[static_cast<size_t>(j)];
          const float c = std::cos(theta), sn = std::sin(theta);
          const float x0 = y[static_cast<size_t>(j)], x1 = y[static_cast<size_t>(j + half)];
          y[static_cast<size_t>(j)] = kd::rope_lo(x0, x1, c, sn);
          y[static_cast<size_t>(j + half)] = kd::rope_hi(x0, x1, c, sn);
        }
        same &= std::memcmp(y.data(), row + g * hd, static_cast<size_t>(hd) * 4) == 0;
      }
      INFO("head_dim " << p.head_dim << " rotary " << p.rotary_dim << " pos " << pos);
      CHECK(same);
      if (pos == 0) {
        const int32_t group = p.n_heads / p.n_kv_heads;
        bool gate_same = true;
        for (int32_t h = 0; h < p.n_heads; ++h) {
          for (int64_t d = 0; d < hd; ++d) {
            const float want = v[static_cast<size_t>((h / group) * hd + d)] * kd::sigmoid(qg[static_cast<size_t>(h * 2 * hd + hd + d)]);
            gate_same &= out[static_cast<size_t>(h * hd + d)] == want;
          }
        }
        CHECK(gate_same);
      }
    }
  }
}

TEST_CASE("attention split plans cover each context exactly within the grid's and the combine's limits", "[unit]") {
  auto on_ladder = [](int32_t len) {  // 128 * 2^j or 192 * 2^j
    while (len > 192 && len % 2 == 0) len /= 2;
    return len == 128 || len == 192;
  };
  int32_t prev_len = kd::kMinSplitLen;
  for (int32_t ctx = 1; ctx <= 140000; ++ctx) {
    const kd::SplitPlan sp = kd::split_plan(ctx);
    // The shortest ladder length with at most 32 splits: one step down would need more.
    const int32_t down = (sp.len & (sp.len - 1)) == 0 ? sp.len / 4 * 3 : sp.len / 3 * 2;
    const bool ok = sp.count >= 1 && sp.count <= kd::kMaxSplits && sp.len >= kd::kMinSplitLen && on_ladder(sp.len) &&
                    sp.len % 64 == 0 && int64_t{sp.count - 1} * sp.len < ctx && int64_t{sp.count} * sp.len >= ctx &&
                    sp.count <= (ctx + kd::kMinSplitLen - 1) / kd::kMinSplitLen && sp.len >= prev_len &&
                    (sp.len == kd::kMinSplitLen || (ctx + down - 1) / down > kd::kMaxSplits);
    if (!ok) {
      INFO("ctx " << ctx << " len " << sp.len << " count " << sp.count);
      REQUIRE(ok);
    }
    prev_len = sp.len;
  }
  // Up to 4096 positions every context uses 128-position splits (verify rows reproduce plain decoding exactly).
  CHECK(kd::split_plan(4096).len == 128);
  CHECK(kd::split_plan(4096).count == 32);
  CHECK(kd::split_plan(4097).len == 192);
  CHECK(kd::split_plan(4097).count == 22);
  CHECK(kd::split_plan(17000).len == 768);
  CHECK(kd::split_plan(17000).count == 23);
  CHECK(kd::split_plan(32768).len == 1024);
  CHECK(kd::split_plan(32768).count == 32);
}

TEST_CASE("attention team layouts fill the block with whole q groups", "[unit]") {
  for (int32_t nq = 1; nq <= kd::kQPerBlock; ++nq) {
    const kd::TeamLayout t = kd::team_layout(nq);
    INFO("nq " << nq);
    CHECK(t.groups * kd::kQPerWarp >= nq);
    CHECK((t.groups - 1) * kd::kQPerWarp < nq);
    CHECK((t.teams & (t.teams - 1)) == 0);
    CHECK(t.groups * t.teams <= kd::kWarps);
    CHECK(t.groups * t.teams * 2 > kd::kWarps);
    // The merge scratch holds the upper half of the teams.
    CHECK((t.teams / 2) * t.groups <= kd::kWarps / 2);
  }
  for (int32_t group : {1, 2, 3, 6, 12, 16, 48}) CHECK(kd::rows_per_chunk(group) * group <= kd::kQPerBlock);
  for (int32_t key = 0; key < kd::kKeysPerBatch; ++key) {
    for (int32_t lane = kd::lane_of_key(key); lane < kd::lane_of_key(key) + 8; ++lane) CHECK(kd::key_of_lane(lane) == key);
  }
}

TEST_CASE("attention merged partial softmax states equal the direct softmax", "[unit]") {
  SplitMix rng(5);
  for (int trial = 0; trial < 200; ++trial) {
    const int n = 1 + static_cast<int>(rng.next() % 300);
    std::vector<double> s(static_cast<size_t>(n)), val(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) {
      s[static_cast<size_t>(i)] = rng.uniform() * 40 - 20;
      val[static_cast<size_t>(i)] = rng.uniform() * 2 - 1;
    }
    double mx = -INFINITY, den = 0, num = 0;
    for (double x : s) mx = std::max(mx, x);
    for (int i = 0; i < n; ++i) {
      den += std::exp(s[static_cast<size_t>(i)] - mx);
      num += std::exp(s[static_cast<size_t>(i)] - mx) * val[static_cast<size_t>(i)];
    }
    // Partial states over random chunks (some empty), merged left to right.
    float m = -INFINITY, l = 0, acc = 0;
    for (int i0 = 0; i0 < n;) {
      const int len = static_cast<int>(rng.next() % 20);
      float pm = -INFINITY, pl = 0, pa = 0;
      for (int i = i0; i < std::min(n, i0 + len); ++i) pm = std::max(pm, static_cast<float>(s[static_cast<size_t>(i)]));
      for (int i = i0; i < std::min(n, i0 + len); ++i) {
        const float e = std::exp(static_cast<float>(s[static_cast<size_t>(i)]) - pm);
        pl += e;
        pa += e * static_cast<float>(val[static_cast<size_t>(i)]);
      }
      const kd::MergeScales ms = kd::merge_scales(m, pm);
      l = l * ms.c1 + pl * ms.c2;
      acc = acc * ms.c1 + pa * ms.c2;
      m = ms.m;
      i0 += len;
    }
    CHECK(std::abs(acc / l - num / den) <= 1e-5);
  }
  // An empty state merges as nothing: the other side's factor is exactly 1, its own 0, never NaN.
  const kd::MergeScales a = kd::merge_scales(-INFINITY, 2.5f);
  CHECK((a.m == 2.5f && a.c1 == 0.0f && a.c2 == 1.0f));
  const kd::MergeScales b = kd::merge_scales(-INFINITY, -INFINITY);
  CHECK((b.m == -INFINITY && b.c1 == 0.0f && b.c2 == 0.0f));
}

TEST_CASE("attention sequence checks reject entries outside the bounds without overflow", "[unit]") {
  const kd::Bounds b{100, 20, 1000};
  auto seq = [](int32_t row0, int32_t n, int32_t past) {
    SeqDesc s;
    s.row0 = row0;
    s.n_tokens = n;
    s.n_past = past;
    return s;
  };
  CHECK(kd::seq_valid(seq(80, 20, 980), b));
  CHECK_FALSE(kd::seq_valid(seq(81, 20, 0), b));   // rows past n_rows
  CHECK_FALSE(kd::seq_valid(seq(0, 21, 0), b));    // more tokens than max_seq_tokens
  CHECK_FALSE(kd::seq_valid(seq(0, 20, 981), b));  // context past max_context
  CHECK_FALSE(kd::seq_valid(seq(0, 0, 0), b));     // padding
  CHECK_FALSE(kd::seq_valid(seq(-1, 1, 0), b));
  CHECK_FALSE(kd::seq_valid(seq(0, 1, -1), b));
  CHECK_FALSE(kd::seq_valid(seq(std::numeric_limits<int32_t>::max(), 1, 0), b));
  CHECK_FALSE(kd::seq_valid(seq(0, 1, std::numeric_limits<int32_t>::max()), b));
  CHECK(kd::seq_is_decode(seq(0, 16, 0)));
  CHECK_FALSE(kd::seq_is_decode(seq(0, 17, 0)));
}

namespace {

// Device arguments of a 27B-shaped step over `seqs` for make_plan (pointers into a dummy buffer; n_rows and the
// bounds are the caller's).
ka::DeviceArgs plan_args(std::vector<char>& ws, std::vector<SeqDesc>& seqs) {
  ka::DeviceArgs a;
  a.qg = a.k = a.v = a.q_norm = a.k_norm = reinterpret_cast<const float*>(ws.data());
  a.k_cache = a.v_cache = a.workspace = a.out = ws.data();
  a.seqs = seqs.data();
  a.page_table = reinterpret_cast<const int32_t*>(ws.data());
  a.qg_stride = 24 * 512;
  a.k_stride = a.v_stride = 1024;
  a.out_stride = 24 * 256;
  a.n_seqs = static_cast<int32_t>(seqs.size());
  return a;
}

}  // namespace

TEST_CASE("attention launch plan covers every valid step's sequences", "[unit]") {
  SplitMix rng(9);
  const ka::Params p = params(24, 4, 256, 64, 1e7f);
  std::vector<char> ws(64);
  for (int trial = 0; trial < 500; ++trial) {
    // A random step: sequences with disjoint rows, some padding; bounds at or above what they need.
    const int32_t n_seqs = 1 + static_cast<int32_t>(rng.next() % 40);
    std::vector<SeqDesc> seqs(static_cast<size_t>(n_seqs));
    int32_t rows = 0, max_tokens = 1, max_ctx = 1, decode_rows = 0, tiles = 0;
    for (SeqDesc& s : seqs) {
      if (rng.next() % 5 == 0) continue;
      s.n_tokens = rng.next() % 2 ? 1 + static_cast<int32_t>(rng.next() % 16) : 17 + static_cast<int32_t>(rng.next() % 300);
      s.n_past = static_cast<int32_t>(rng.next() % 40000);
      s.row0 = rows;
      rows += s.n_tokens;
      max_tokens = std::max(max_tokens, s.n_tokens);
      max_ctx = std::max(max_ctx, s.n_past + s.n_tokens);
      if (s.n_tokens <= kd::kMaxDecodeTokens) decode_rows += s.n_tokens;
      else tiles += (s.n_tokens + kd::rows_per_chunk(6) - 1) / kd::rows_per_chunk(6);
    }
    ka::DeviceArgs a = plan_args(ws, seqs);
    a.n_rows = std::max(1, rows) + static_cast<int32_t>(rng.next() % 3);
    a.max_seq_tokens = max_tokens;
    a.max_context = max_ctx + static_cast<int32_t>(rng.next() % 100);
    a.workspace_bytes = ka::workspace_bytes(p, a.n_rows, n_seqs, a.max_seq_tokens, a.max_context);
    kd::LaunchPlan plan;
    REQUIRE(kd::make_plan(p, a, &plan).ok());
    const kd::WorkspaceLayout w = kd::workspace_layout(p, a.n_rows, n_seqs, a.max_seq_tokens, a.max_context);
    INFO("trial " << trial);
    CHECK(w.slots >= decode_rows);
    CHECK(w.total == a.workspace_bytes);
    CHECK(w.part_acc_offset >= size_t{4} * a.n_rows * 24 * 256);
    CHECK(plan.decode_grid.y == 4u);
    CHECK(plan.decode_grid.z == static_cast<uint32_t>(n_seqs));
    CHECK(plan.combine_grid.x == static_cast<uint32_t>(n_seqs));
    for (const SeqDesc& s : seqs) {
      if (s.n_tokens == 0) continue;
      if (s.n_tokens <= kd::kMaxDecodeTokens) {
        // Every (split, q group of 6 q vectors) of the sequence has its block.
        CHECK(static_cast<int32_t>(plan.decode_grid.x) % w.splits == 0);
        CHECK(static_cast<int32_t>(plan.decode_grid.x) / w.splits >= (s.n_tokens * 6 + kd::kQPerWarp - 1) / kd::kQPerWarp);
        CHECK(static_cast<int32_t>(plan.combine_grid.y) >= s.n_tokens);
        CHECK(w.splits >= kd::split_plan(s.n_past + s.n_tokens).count);
      }
    }
    CHECK(plan.run_prefill == (max_tokens > kd::kMaxDecodeTokens));
    if (plan.run_prefill) CHECK(static_cast<int32_t>(plan.prefill_grid.x) >= tiles);
  }
}

TEST_CASE("attention decode grid: one block per split and q group", "[unit]") {
  const ka::Params p = params(24, 4, 256, 64, 1e7f);  // group 6: one q group per row
  std::vector<char> ws(64);
  // grid.x = splits x group blocks for n_seqs sequences of `rows` rows at `ctx` positions.
  auto grid_x = [&](int32_t n_seqs, int32_t rows, int32_t ctx) {
    std::vector<SeqDesc> seqs(static_cast<size_t>(n_seqs));
    for (int32_t i = 0; i < n_seqs; ++i) {
      SeqDesc& d = seqs[static_cast<size_t>(i)];
      d.row0 = i * rows;
      d.n_tokens = rows;
      d.n_past = ctx - rows;
      d.slot = i;
    }
    ka::DeviceArgs a = plan_args(ws, seqs);
    a.n_rows = n_seqs * rows;
    a.max_seq_tokens = rows;
    a.max_context = ctx;
    a.workspace_bytes = ka::workspace_bytes(p, a.n_rows, n_seqs, a.max_seq_tokens, a.max_context);
    kd::LaunchPlan plan;
    REQUIRE(kd::make_plan(p, a, &plan).ok());
    return static_cast<int32_t>(plan.decode_grid.x);
  };
  CHECK(grid_x(1, 1, 1024) == 8);        // 8 splits of 128 positions; one group
  CHECK(grid_x(1, 8, 1024) == 8 * 8);    // a K = 7 verify: 8 groups side by side
  CHECK(grid_x(1, 16, 256) == 2 * 16);
  CHECK(grid_x(1, 4, 8192) == 32 * 4);   // 32 splits (the most)
  CHECK(grid_x(8, 3, 1024) == 8 * 3);    // sequences are grid.z
  CHECK(grid_x(1, 17, 1024) == 8 * 16);  // > 16 rows go to the prefill kernel; the decode grid stays bounded
}
