// GPU RMSNorm (+ residual) against the CPU reference (norm_ref.cpp, the CPU backend's): the updated residual bit
// for bit, the output by normalised error (fp32 out <= 1e-8: only the order of the sum of squares differs; fp16 out
// <= 1e-6: plus one rounding), no NaN, every output element written (NaN poison), the bytes around and between rows
// untouched (guard bytes, padded strides); hidden sizes 16 .. 16384 (fixtures, 27B), aligned (16-byte path) and not
// (scalar path), out aliasing x or the residual; one launch of many rows equals each row alone, bit for bit. Skips
// itself when no CUDA device is present.
#include <catch2/catch_test_macros.hpp>

#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "gpu_check.h"
#include "kernels/norm/norm.h"
#include "kernels/norm/norm_plan.h"

using namespace voltserve::kernels;
using namespace voltserve::test;

namespace {

#define REQUIRE_DEVICE() \
  if (!have_device()) SKIP("no CUDA device: norm GPU tests skipped");

enum class Alias { kNone, kOutIsX, kOutIsResidual };

struct NormCase {
  int n = 16;
  int rows = 1;
  bool residual = true;
  bool weight = true;
  bool f16 = false;
  int pad = 0;       // row stride = n + pad (for every matrix)
  size_t shift = 0;  // bytes past 16-byte alignment of every matrix
  Alias alias = Alias::kNone;
};

std::string case_name(const NormCase& c) {
  std::string s = "rms_norm n=" + std::to_string(c.n) + " rows=" + std::to_string(c.rows) +
                  (c.residual ? " residual" : "") + (c.weight ? "" : " no-weight") + (c.f16 ? " out=f16" : " out=f32");
  if (c.pad != 0) s += " stride=n+" + std::to_string(c.pad);
  if (c.shift != 0) s += " shift=" + std::to_string(c.shift);
  if (c.alias == Alias::kOutIsX) s += " out=x";
  if (c.alias == Alias::kOutIsResidual) s += " out=residual";
  return s;
}

// Runs one case on the device and on the host mirror (same strides, same aliasing); returns false on any failure.
bool run_case(const NormCase& c, uint64_t seed) {
  const std::string name = case_name(c);
  INFO(name);
  SplitMix rng(seed);
  const int64_t stride = c.n + c.pad;
  const size_t dense = static_cast<size_t>(c.rows) * c.n;
  const std::vector<float> x = random_floats(dense, -2.0, 2.0, 50.0, rng);
  const std::vector<float> res = random_floats(dense, -5.0, 5.0, 20.0, rng);
  const std::vector<float> w = random_floats(static_cast<size_t>(c.n), 0.5, 1.5, 1.0, rng);

  GuardedMatrix dx(c.rows, c.n, stride, 4, c.shift);
  dx.upload(x.data());
  std::unique_ptr<GuardedMatrix> dres, dout;
  if (c.residual) {
    dres = std::make_unique<GuardedMatrix>(c.rows, c.n, stride, 4, c.shift);
    dres->upload(res.data());
  }
  if (c.alias == Alias::kNone) {
    dout = std::make_unique<GuardedMatrix>(c.rows, c.n, stride, c.f16 ? 2 : 4, c.shift);
    dout->upload(nullptr);
  }
  GuardedMatrix dw(1, c.n, c.n, 4, c.shift);
  dw.upload(w.data());

  norm::RmsNormArgs a;
  a.x = dx.as<float>();
  a.x_stride = stride;
  a.residual = c.residual ? dres->as<float>() : nullptr;
  a.residual_stride = stride;
  a.weight = c.weight ? dw.as<float>() : nullptr;
  a.out = c.alias == Alias::kOutIsX ? dx.data() : c.alias == Alias::kOutIsResidual ? dres->data() : dout->data();
  a.out_stride = stride;
  a.out_dtype = c.f16 ? voltserve::DType::kF16 : voltserve::DType::kF32;
  a.n_rows = c.rows;
  a.n = c.n;
  a.eps = 1e-6f;
  const norm::NormPlan plan = norm::norm_plan(a);
  const KernelStatus st = norm::rms_norm(a);
  INFO("status " << static_cast<int>(st.code) << " " << st.message << " " << st.file << ":" << st.line);
  REQUIRE(st.ok());
  CUDA_REQUIRE(cudaDeviceSynchronize());

  // Host mirror: strided arrays, the reference run with the same aliasing.
  std::vector<float> hx(static_cast<size_t>(c.rows) * stride, 0.0f), hres(hx.size(), 0.0f), hout(hx.size(), 0.0f);
  for (int r = 0; r < c.rows; ++r) {
    std::memcpy(&hx[static_cast<size_t>(r) * stride], &x[static_cast<size_t>(r) * c.n], static_cast<size_t>(c.n) * 4);
    std::memcpy(&hres[static_cast<size_t>(r) * stride], &res[static_cast<size_t>(r) * c.n], static_cast<size_t>(c.n) * 4);
  }
  norm::RmsNormArgs h = a;
  h.x = hx.data();
  h.residual = c.residual ? hres.data() : nullptr;
  h.weight = c.weight ? w.data() : nullptr;
  h.out = c.alias == Alias::kOutIsX ? hx.data() : c.alias == Alias::kOutIsResidual ? hres.data() : hout.data();
  h.out_dtype = voltserve::DType::kF32;
  norm::rms_norm_ref(h);
  auto dense_of = [&](const std::vector<float>& m) {
    std::vector<float> d(dense);
    for (int r = 0; r < c.rows; ++r)
      std::memcpy(&d[static_cast<size_t>(r) * c.n], &m[static_cast<size_t>(r) * stride], static_cast<size_t>(c.n) * 4);
    return d;
  };

  bool ok = true;
  bool untouched = true;
  int64_t first_bad = 0;
  std::string detail;
  // The output: wherever it lives.
  const GuardedMatrix& out_m = c.alias == Alias::kOutIsX ? dx : c.alias == Alias::kOutIsResidual ? *dres : *dout;
  const std::vector<float>& ref_out_m = c.alias == Alias::kOutIsX ? hx : c.alias == Alias::kOutIsResidual ? hres : hout;
  const std::vector<uint8_t> out_bytes = out_m.download(&untouched, &first_bad);
  if (!untouched) detail += " out-guard-damaged-at=" + std::to_string(first_bad);
  ok &= untouched;
  const std::vector<float> got = c.f16 ? f16_to_floats(out_bytes) : bytes_to_floats(out_bytes);
  const std::vector<float> ref = dense_of(ref_out_m);
  const ErrorStats e = normalised_error(got, ref, 1e-3);
  const double tol = c.f16 ? 1e-6 : 1e-8;
  ok &= e.nan == 0 && e.err <= tol;
  if (e.nan != 0) detail += " NaN=" + std::to_string(e.nan) + " first-NaN-at=" + std::to_string(e.first_nan);
  if (e.any_off) {
    detail += " first-off-at=" + std::to_string(e.first_off) + " (row " + std::to_string(e.first_off / c.n) + " col " +
              std::to_string(e.first_off % c.n) + ": " + std::to_string(got[e.first_off]) + " vs " + std::to_string(ref[e.first_off]) + ")";
  }
  // The residual, when it is not also the output: bit for bit.
  if (c.residual && c.alias != Alias::kOutIsResidual) {
    const std::vector<uint8_t> rb = dres->download(&untouched, &first_bad);
    ok &= untouched;
    if (!untouched) detail += " residual-guard-damaged-at=" + std::to_string(first_bad);
    const std::vector<float> ref_res = dense_of(hres);
    const bool same = std::memcmp(rb.data(), ref_res.data(), rb.size()) == 0;
    ok &= same;
    if (!same) detail += " residual-differs";
  }
  // x, when it is not the output: unchanged.
  if (c.alias != Alias::kOutIsX) {
    const std::vector<uint8_t> xb = dx.download(&untouched, &first_bad);
    const bool same = untouched && std::memcmp(xb.data(), x.data(), xb.size()) == 0;
    ok &= same;
    if (!same) detail += " x-changed";
  }
  std::printf("%-78s vec=%d iters=%-2d err=%.3e %s\n", name.c_str(), plan.vec, plan.iters, e.err, ok ? "ok" : "FAIL");
  if (!ok) std::printf("  %s (tolerance %.0e)\n", detail.c_str(), tol);
  std::fflush(stdout);
  CHECK(ok);
  return ok;
}

}  // namespace

TEST_CASE("norm gpu rms_norm matches the reference: shapes, dtypes, strides, alignment, aliasing", "[gpu]") {
  REQUIRE_DEVICE();
  uint64_t seed = 100;
  // Hidden sizes: fixture head dims and hidden sizes, 27B (5120), odd sizes (scalar path), the largest rows.
  for (int n : {16, 24, 32, 48, 100, 1000, 1001, 5120, 5123, 8192, 16384}) {
    for (int rows : {1, 3, 8, 17}) {
      for (bool f16 : {false, true}) {
        NormCase c;
        c.n = n;
        c.rows = rows;
        c.f16 = f16;
        run_case(c, seed++);
        c.residual = false;
        run_case(c, seed++);
        c.weight = false;
        run_case(c, seed++);
      }
    }
  }
  // Prefill-sized launches.
  for (int rows : {64, 300}) {
    NormCase c;
    c.n = 5120;
    c.rows = rows;
    c.f16 = true;
    run_case(c, seed++);
  }
  // Padded strides and misaligned rows take the scalar path where the 16-byte one would be wrong.
  for (int n : {16, 24, 5120}) {
    for (int pad : {0, 3, 8}) {
      for (size_t shift : {size_t{0}, size_t{4}}) {
        for (bool f16 : {false, true}) {
          NormCase c;
          c.n = n;
          c.rows = 5;
          c.pad = pad;
          c.shift = shift;
          c.f16 = f16;
          run_case(c, seed++);
        }
      }
    }
  }
  // In place: out aliasing x, or the residual (fp32 out, same strides).
  for (int n : {24, 5120, 1001}) {
    for (Alias alias : {Alias::kOutIsX, Alias::kOutIsResidual}) {
      for (bool residual : {true, false}) {
        if (alias == Alias::kOutIsResidual && !residual) continue;
        NormCase c;
        c.n = n;
        c.rows = 9;
        c.residual = residual;
        c.alias = alias;
        c.pad = n == 24 ? 8 : 0;
        run_case(c, seed++);
      }
    }
  }
}

// One launch over many rows must give each row exactly what a launch of that row alone gives (rows are independent
// blocks): the output and the updated residual, bit for bit, whatever the other rows hold.
TEST_CASE("norm gpu rows are independent of the batch (bitwise)", "[gpu]") {
  REQUIRE_DEVICE();
  for (int n : {24, 5120, 1001}) {
    for (bool f16 : {false, true}) {
      const int rows = 7;
      SplitMix rng(900 + static_cast<uint64_t>(n) + (f16 ? 1 : 0));
      const std::vector<float> x = random_floats(static_cast<size_t>(rows) * n, -2.0, 2.0, 50.0, rng);
      const std::vector<float> res = random_floats(x.size(), -5.0, 5.0, 20.0, rng);
      const std::vector<float> w = random_floats(static_cast<size_t>(n), 0.5, 1.5, 1.0, rng);
      const size_t esize = f16 ? 2 : 4;
      GuardedMatrix dx(rows, n, n, 4), dres(rows, n, n, 4), dout(rows, n, n, esize), dw(1, n, n, 4);
      dw.upload(w.data());
      auto run = [&](int row0, int count) {
        norm::RmsNormArgs a;
        a.x = dx.as<float>() + static_cast<int64_t>(row0) * n;
        a.x_stride = n;
        a.residual = dres.as<float>() + static_cast<int64_t>(row0) * n;
        a.residual_stride = n;
        a.weight = dw.as<float>();
        a.out = static_cast<char*>(dout.data()) + static_cast<size_t>(row0) * n * esize;
        a.out_stride = n;
        a.out_dtype = f16 ? voltserve::DType::kF16 : voltserve::DType::kF32;
        a.n_rows = count;
        a.n = n;
        const KernelStatus st = norm::rms_norm(a);
        INFO("status " << st.message);
        REQUIRE(st.ok());
        CUDA_REQUIRE(cudaDeviceSynchronize());
      };
      bool untouched = true;
      int64_t first_bad = 0;
      dx.upload(x.data());
      dres.upload(res.data());
      dout.upload(nullptr);
      run(0, rows);
      const std::vector<uint8_t> all_out = dout.download(&untouched, &first_bad);
      const std::vector<uint8_t> all_res = dres.download(&untouched, &first_bad);
      dres.upload(res.data());
      dout.upload(nullptr);
      for (int r = 0; r < rows; ++r) run(r, 1);
      const std::vector<uint8_t> one_out = dout.download(&untouched, &first_bad);
      const std::vector<uint8_t> one_res = dres.download(&untouched, &first_bad);
      const bool same = all_out == one_out && all_res == one_res;
      std::printf("rms_norm batch-composition n=%d rows=%d out=%s: %d rows at once vs one by one %s\n", n, rows,
                  f16 ? "f16" : "f32", rows, same ? "same" : "DIFFERENT");
      CHECK(same);
    }
  }
}

TEST_CASE("norm gpu rejects bad arguments with a status", "[gpu]") {
  REQUIRE_DEVICE();
  GuardedMatrix dx(2, 64, 64, 4), dout(2, 64, 64, 4);
  norm::RmsNormArgs a;
  a.x = dx.as<float>();
  a.x_stride = 64;
  a.out = dout.data();
  a.out_stride = 64;
  a.n_rows = 2;
  a.n = 64;
  CHECK(norm::rms_norm(a).ok());
  CUDA_REQUIRE(cudaDeviceSynchronize());
  norm::RmsNormArgs b = a;
  b.n = 0;
  CHECK(norm::rms_norm(b).code == KernelCode::kBadShape);
  b = a;
  b.n_rows = 0;  // nothing to do
  CHECK(norm::rms_norm(b).ok());
  b = a;
  b.x = nullptr;
  CHECK(norm::rms_norm(b).code == KernelCode::kBadArgument);
  b = a;
  b.out_dtype = voltserve::DType::kBF16;
  CHECK(norm::rms_norm(b).code == KernelCode::kBadArgument);
  b = a;
  b.x_stride = 32;
  CHECK(norm::rms_norm(b).code == KernelCode::kBadShape);
  b = a;
  b.out = static_cast<char*>(a.out) + 2;  // fp32 out off its element alignment
  CHECK(norm::rms_norm(b).code == KernelCode::kBadArgument);
  b = a;
  b.n = 20000;
  b.x_stride = b.out_stride = 20000;
  b.n_rows = 1;
  CHECK(norm::rms_norm(b).code == KernelCode::kBadShape);
}
