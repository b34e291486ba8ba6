// The RMSNorm kernel's per-element helpers (kernels/norm/norm_plan.h) against the reference on the CPU: with the
// reference's sequential sum of squares they give its output bit for bit; and the host's launch plan (16-byte path
// only where every row start is aligned, iterations per thread, the largest rows). No GPU needed.
#include <catch2/catch_test_macros.hpp>

#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/norm/norm.h"
#include "kernels/norm/norm_plan.h"
#include "linear_random.h"

using namespace voltserve::kernels;

TEST_CASE("norm helpers reproduce rms_norm_row_ref bit for bit", "[unit]") {
  voltserve::test::SplitMix rng(7);
  for (int n : {1, 16, 24, 1001, 5120}) {
    std::vector<float> x(static_cast<size_t>(n)), w(x.size()), ref(x.size()), ref_nw(x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      x[i] = static_cast<float>((rng.uniform() * 4.0 - 2.0) * (rng.next() % 50 == 0 ? 100.0 : 1.0));
      w[i] = static_cast<float>(0.5 + rng.uniform());
    }
    for (float eps : {1e-6f, 1e-5f}) {
      norm::rms_norm_row_ref(x.data(), w.data(), n, eps, ref.data());
      norm::rms_norm_row_ref(x.data(), nullptr, n, eps, ref_nw.data());
      float sum_sq = 0.0f;
      for (float v : x) sum_sq += v * v;
      const float inv = norm::rms_inv(sum_sq, n, eps);
      bool same = true, same_nw = true;
      for (size_t i = 0; i < x.size(); ++i) {
        const float o = norm::rms_out(x[i], inv, w[i]);
        const float o_nw = norm::rms_out(x[i], inv, 1.0f);
        same &= std::memcmp(&o, &ref[i], 4) == 0;
        same_nw &= std::memcmp(&o_nw, &ref_nw[i], 4) == 0;
      }
      INFO("n=" << n << " eps=" << eps);
      CHECK(same);
      CHECK(same_nw);
    }
  }
}

TEST_CASE("norm launch plan: 16-byte path only for aligned rows, iterations per thread", "[unit]") {
  alignas(16) static float buf[64];
  norm::RmsNormArgs a;
  a.x = buf;
  a.residual = buf;
  a.weight = buf;
  a.out = buf;
  a.n = 5120;
  a.x_stride = a.residual_stride = a.out_stride = 5120;
  norm::NormPlan p = norm::norm_plan(a);
  CHECK(p.vec == 4);
  CHECK(p.iters == 8);  // 1280 float4 units over 256 threads: 5, rounded up to a power of two
  a.n = 16;
  a.x_stride = a.residual_stride = a.out_stride = 16;
  CHECK(norm::norm_plan(a).iters == 1);
  a.n = 16384;
  a.x_stride = a.residual_stride = a.out_stride = 16384;
  CHECK(norm::norm_plan(a).iters == 16);
  a.n = 16388;  // too long for 16 iterations of 256 float4s
  a.x_stride = a.residual_stride = a.out_stride = 16388;
  CHECK(norm::norm_plan(a).iters == 0);
  // Anything misaligned: scalar, up to 8192 floats.
  a.n = 24;
  a.x_stride = a.residual_stride = a.out_stride = 24;
  CHECK(norm::norm_plan(a).vec == 4);
  norm::RmsNormArgs b = a;
  b.x = buf + 1;
  CHECK(norm::norm_plan(b).vec == 1);
  b = a;
  b.residual = buf + 2;
  CHECK(norm::norm_plan(b).vec == 1);
  b = a;
  b.weight = buf + 3;
  CHECK(norm::norm_plan(b).vec == 1);
  b = a;
  b.out = buf + 1;
  CHECK(norm::norm_plan(b).vec == 1);
  b = a;
  b.out_dtype = voltserve::DType::kF16;
  b.out = reinterpret_cast<char*>(buf) + 8;  // 8-byte aligned is enough for 4 halves
  CHECK(norm::norm_plan(b).vec == 4);
  b.out = reinterpret_cast<char*>(buf) + 4;
  CHECK(norm::norm_plan(b).vec == 1);
  b = a;
  b.x_stride = 26;
  CHECK(norm::norm_plan(b).vec == 1);
  b = a;
  b.residual = nullptr;  // no residual: its stride does not matter
  b.residual_stride = 3;
  CHECK(norm::norm_plan(b).vec == 4);
  b = a;
  b.n = 1001;
  b.x_stride = b.residual_stride = b.out_stride = 1001;
  p = norm::norm_plan(b);
  CHECK(p.vec == 1);
  CHECK(p.iters == 4);
  b.n = 8192;
  b.x = buf + 1;
  CHECK(norm::norm_plan(b).iters == 32);
  b.n = 8193;
  CHECK(norm::norm_plan(b).iters == 0);
}
