// The elementwise kernels' helpers (kernels/elementwise/elementwise_plan.h) on the CPU: silu_mul reproduces
// swiglu_ref bit for bit (overflowing exp included); the column blocks of a row cover every element exactly once; the
// 16-byte paths are chosen only where every row start is aligned. No GPU needed.
#include <catch2/catch_test_macros.hpp>

#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/elementwise/elementwise.h"
#include "kernels/elementwise/elementwise_plan.h"
#include "linear_random.h"

using namespace voltserve::kernels;
using voltserve::DType;

TEST_CASE("elementwise silu_mul reproduces swiglu_ref bit for bit", "[unit]") {
  voltserve::test::SplitMix rng(11);
  const int n = 4096;
  std::vector<float> g(n), u(n), ref(n);
  for (int i = 0; i < n; ++i) {
    g[i] = static_cast<float>((rng.uniform() * 20.0 - 10.0) * (i % 97 == 0 ? 30.0 : 1.0));
    u[i] = static_cast<float>(rng.uniform() * 6.0 - 3.0);
  }
  g[0] = -200.0f;  // exp(200) = inf: -0 * u
  g[1] = 200.0f;
  g[2] = 0.0f;
  elementwise::SwigluArgs a;
  a.gate = g.data();
  a.up = u.data();
  a.out = ref.data();
  a.gate_stride = a.up_stride = a.out_stride = n;
  a.n_rows = 1;
  a.n = n;
  elementwise::swiglu_ref(a);
  bool same = true;
  for (int i = 0; i < n; ++i) {
    const float o = elementwise::silu_mul(g[i], u[i]);
    same &= std::memcmp(&o, &ref[i], 4) == 0;
  }
  CHECK(same);
}

TEST_CASE("elementwise column blocks cover each row exactly once", "[unit]") {
  for (int vec : {1, 4, 8}) {
    for (int64_t n : {int64_t{8}, int64_t{16}, int64_t{24}, int64_t{1000}, int64_t{1024}, int64_t{5120}, int64_t{17408},
                      int64_t{8192 + 8}}) {
      if (n % vec != 0) continue;
      const elementwise::RowPlan p = elementwise::row_plan(3, n, vec);
      CHECK(p.blocks == 3 * p.col_blocks);
      std::vector<int> hits(static_cast<size_t>(n), 0);
      bool in_range = true;
      for (int64_t cb = 0; cb < p.col_blocks; ++cb)
        for (int it = 0; it < elementwise::kIters; ++it)
          for (int tid = 0; tid < elementwise::kThreads; ++tid) {
            const int64_t i = elementwise::unit_first_element(cb, it, tid, vec);
            if (i >= n) continue;
            in_range &= i + vec <= n;
            for (int j = 0; j < vec; ++j) ++hits[static_cast<size_t>(i + j)];
          }
      bool once = true;
      for (int h : hits) once &= h == 1;
      INFO("vec=" << vec << " n=" << n << " col_blocks=" << p.col_blocks);
      CHECK(in_range);
      CHECK(once);
    }
  }
  CHECK(elementwise::row_plan(int64_t{1} << 31, 5120, 4).blocks == 0);  // beyond one grid
}

TEST_CASE("elementwise launch plans take 16-byte units only where aligned", "[unit]") {
  alignas(16) static uint8_t buf[8192];
  elementwise::EmbedArgs e;
  e.table = buf;
  e.out = reinterpret_cast<float*>(buf);
  e.hidden = 5120;
  e.out_stride = 5120;
  e.n_rows = 2;
  for (DType d : {DType::kF16, DType::kBF16}) {
    e.table_dtype = d;
    CHECK(elementwise::embed_plan(e).vec == 8);
  }
  e.table_dtype = DType::kF32;
  CHECK(elementwise::embed_plan(e).vec == 4);
  e.hidden = e.out_stride = 100;  // fp32: 4 | 100; fp16: 8 does not divide 100
  CHECK(elementwise::embed_plan(e).vec == 4);
  e.table_dtype = DType::kF16;
  CHECK(elementwise::embed_plan(e).vec == 1);
  e.hidden = e.out_stride = 5120;
  e.out = reinterpret_cast<float*>(buf + 4);
  CHECK(elementwise::embed_plan(e).vec == 1);
  e.out = reinterpret_cast<float*>(buf);
  e.out_stride = 5122;
  CHECK(elementwise::embed_plan(e).vec == 1);
  e.out_stride = 5120;
  e.table = buf + 8;
  CHECK(elementwise::embed_plan(e).vec == 1);

  elementwise::SwigluArgs s;
  s.gate = reinterpret_cast<const float*>(buf);
  s.up = reinterpret_cast<const float*>(buf) + 16;
  s.out = buf;
  s.gate_stride = s.up_stride = 2 * 17408;
  s.out_stride = 17408;
  s.n = 17408;
  s.n_rows = 1;
  CHECK(elementwise::swiglu_plan(s).vec == 4);
  s.up = reinterpret_cast<const float*>(buf) + 1001;  // up = the second column range of a merged [., 2 * 1001] row
  CHECK(elementwise::swiglu_plan(s).vec == 1);
  s.up = reinterpret_cast<const float*>(buf) + 16;
  s.out_dtype = DType::kF16;
  s.out = buf + 8;
  CHECK(elementwise::swiglu_plan(s).vec == 4);
  s.out = buf + 4;
  CHECK(elementwise::swiglu_plan(s).vec == 1);
  s.out = buf;
  s.n = 1001;
  CHECK(elementwise::swiglu_plan(s).vec == 1);

  elementwise::GatherArgs g;
  g.x = buf;
  g.out = buf;
  g.x_stride = g.out_stride = 5120;
  g.n = 5120;
  g.n_rows = 4;
  g.dtype = DType::kF32;
  CHECK(elementwise::gather_plan(g).vec == 4);
  g.dtype = DType::kF16;
  CHECK(elementwise::gather_plan(g).vec == 8);
  g.n = 5124;  // fp16: 8 does not divide it
  CHECK(elementwise::gather_plan(g).vec == 1);
  g.n = 5120;
  g.x_stride = 5124;  // fp16 rows 10248 bytes apart: not 16-byte aligned
  CHECK(elementwise::gather_plan(g).vec == 1);
  g.dtype = DType::kF32;  // fp32 rows 20496 bytes apart: aligned
  CHECK(elementwise::gather_plan(g).vec == 4);
}
