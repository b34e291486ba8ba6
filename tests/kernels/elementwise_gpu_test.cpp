// GPU elementwise ops against the CPU references (elementwise_ref.cpp, the CPU backend's): embedding rows from fp32 /
// fp16 / bf16 tables and row gathers exact (bit for bit), SwiGLU by normalised error (fp32 out <= 1e-10: only the
// device expf differs; fp16 out <= 1e-6); no NaN, every output element written (NaN poison), bytes around and
// between rows untouched (guard bytes, padded strides); the 27B sizes (hidden 5120, intermediate 17408, a 248320-row
// fp16 table), the fixtures' (16 / 24 / 32) and odd ones (scalar paths); gate/up as column ranges of one merged row,
// SwiGLU in place; one launch of many rows equals each row alone, bit for bit. Skips itself when no device is present.
#include <catch2/catch_test_macros.hpp>

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "gpu_check.h"
#include "kernels/elementwise/elementwise.h"
#include "kernels/elementwise/elementwise_plan.h"

using namespace voltserve::kernels;
using namespace voltserve::test;
using voltserve::DType;

namespace {

#define REQUIRE_DEVICE() \
  if (!have_device()) SKIP("no CUDA device: elementwise GPU tests skipped");

const char* dtype_name(DType d) {
  switch (d) {
    case DType::kF32: return "f32";
    case DType::kF16: return "f16";
    case DType::kBF16: return "bf16";
    default: return "?";
  }
}

// Finite random element bits of `d` (fp32 / fp16 / bf16), subnormals and both zeros included; stored as bytes.
std::vector<uint8_t> random_elements(size_t count, DType d, SplitMix& rng) {
  const size_t elem = voltserve::dtype_bytes(d);
  std::vector<uint8_t> out(count * elem);
  for (size_t i = 0; i < count; ++i) {
    const uint64_t r = rng.next();
    if (d == DType::kF32) {
      uint32_t b = static_cast<uint32_t>(r);
      if (((b >> 23) & 0xFF) == 0xFF) b &= ~(1u << 30);  // no inf / NaN
      std::memcpy(&out[i * 4], &b, 4);
    } else {
      uint16_t b = static_cast<uint16_t>(r);
      const uint16_t exp_mask = d == DType::kF16 ? 0x7C00 : 0x7F80;
      if ((b & exp_mask) == exp_mask) b = static_cast<uint16_t>(b & ~0x4000);  // top exponent bit: finite
      std::memcpy(&out[i * 2], &b, 2);
    }
  }
  return out;
}

std::vector<int32_t> random_ids(int count, int64_t vocab, SplitMix& rng) {
  std::vector<int32_t> ids(static_cast<size_t>(count));
  for (auto& id : ids) id = static_cast<int32_t>(rng.next() % static_cast<uint64_t>(vocab));
  if (count >= 3) {  // the table's edges, and a repeated id
    ids[0] = 0;
    ids[1] = static_cast<int32_t>(vocab - 1);
    ids[2] = ids[count - 1];
  }
  return ids;
}

struct DeviceInts {
  std::unique_ptr<DeviceBuffer> buf;
  explicit DeviceInts(const std::vector<int32_t>& v) {
    buf = std::make_unique<DeviceBuffer>(std::max<size_t>(4, v.size() * 4));
    REQUIRE(buf->p != nullptr);
    CUDA_REQUIRE(cudaMemcpy(buf->p, v.data(), v.size() * 4, cudaMemcpyHostToDevice));
  }
  const int32_t* get() const { return static_cast<const int32_t*>(buf->p); }
};

// ---- embed

struct EmbedCase {
  int64_t vocab = 64, hidden = 16;
  DType dtype = DType::kF32;
  int rows = 1, pad = 0;
  size_t shift = 0;  // bytes added to the table and out pointers
  int n_map = 0;      // > 0: the ids index a map of this many table rows (and some fall outside it)
};

bool run_embed(const EmbedCase& c, const std::vector<uint8_t>& table_host, const GuardedMatrix& table, uint64_t seed) {
  const std::string name = "embed table=" + std::string(dtype_name(c.dtype)) + " vocab=" + std::to_string(c.vocab) +
                           " hidden=" + std::to_string(c.hidden) + " rows=" + std::to_string(c.rows) +
                           (c.pad ? " stride=hidden+" + std::to_string(c.pad) : "") +
                           (c.shift ? " shift=" + std::to_string(c.shift) : "") +
                           (c.n_map ? " map=" + std::to_string(c.n_map) : "");
  INFO(name);
  SplitMix rng(seed);
  std::vector<int32_t> ids = random_ids(c.rows, c.vocab, rng);
  std::vector<int32_t> map, rows = ids;  // rows: the table row each output row must hold
  if (c.n_map > 0) {
    map = random_ids(c.n_map, c.vocab, rng);
    for (size_t r = 0; r < ids.size(); ++r) {
      // Indices into the map, with one before it (a row that sampled nothing) and one past it: both read row 0.
      ids[r] = static_cast<int32_t>(rng.next() % static_cast<uint64_t>(c.n_map + 2)) - 1;
      rows[r] = ids[r] < 0 || ids[r] >= c.n_map ? 0 : map[static_cast<size_t>(ids[r])];
    }
  }
  DeviceInts dids(ids), dmap(map);
  GuardedMatrix dout(c.rows, c.hidden, c.hidden + c.pad, 4, c.shift);
  dout.upload(nullptr);
  elementwise::EmbedArgs a;
  a.table = table.data();
  a.table_dtype = c.dtype;
  a.hidden = c.hidden;
  a.ids = dids.get();
  a.id_map = c.n_map > 0 ? dmap.get() : nullptr;
  a.n_map = c.n_map;
  a.n_rows = c.rows;
  a.out = dout.as<float>();
  a.out_stride = c.hidden + c.pad;
  const elementwise::RowPlan plan = elementwise::embed_plan(a);
  const KernelStatus st = elementwise::embed(a);
  INFO("status " << static_cast<int>(st.code) << " " << st.message << " " << st.file << ":" << st.line);
  REQUIRE(st.ok());
  CUDA_REQUIRE(cudaDeviceSynchronize());
  bool untouched = true;
  int64_t first_bad = 0;
  const std::vector<uint8_t> got = dout.download(&untouched, &first_bad);
  std::vector<float> ref(static_cast<size_t>(c.rows * c.hidden));
  elementwise::EmbedArgs h = a;
  h.table = table_host.data();
  h.ids = rows.data();  // the expected rows straight, not through the map
  h.id_map = nullptr;
  h.n_map = 0;
  h.out = ref.data();
  h.out_stride = c.hidden;
  elementwise::embed_ref(h);
  size_t first_diff = got.size();
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] != reinterpret_cast<const uint8_t*>(ref.data())[i]) {
      first_diff = i;
      break;
    }
  }
  const bool exact = first_diff == got.size();
  const bool ok = exact && untouched;
  const ErrorStats e = normalised_error(bytes_to_floats(got), ref, 0.0);
  std::printf("%-84s vec=%d bitwise=%s err=%.3e %s\n", name.c_str(), plan.vec, exact ? "same" : "DIFFERENT", e.err,
              ok ? "ok" : "FAIL");
  if (!ok) {
    const size_t el = first_diff / 4;
    std::printf("  first difference at row %zu col %zu (id %d)%s\n", el / static_cast<size_t>(c.hidden),
                el % static_cast<size_t>(c.hidden), exact ? 0 : ids[el / static_cast<size_t>(c.hidden)],
                untouched ? "" : ("; guard damaged at byte " + std::to_string(first_bad)).c_str());
  }
  std::fflush(stdout);
  CHECK(ok);
  return ok;
}

// ---- swiglu

struct SwigluCase {
  int64_t n = 16;
  int rows = 1;
  bool merged = true;  // gate and up: the two column ranges of one [rows, 2n] row; else two [rows, n + pad] matrices
  bool f16 = false;
  bool in_place = false;  // out = the gate range (fp32)
  int pad = 0;
  size_t shift = 0;
};

bool run_swiglu(const SwigluCase& c, uint64_t seed) {
  const std::string name = "swiglu n=" + std::to_string(c.n) + " rows=" + std::to_string(c.rows) +
                           (c.merged ? " gate|up merged" : " gate,up apart") + (c.f16 ? " out=f16" : " out=f32") +
                           (c.in_place ? " out=gate" : "") + (c.pad ? " pad=" + std::to_string(c.pad) : "") +
                           (c.shift ? " shift=" + std::to_string(c.shift) : "");
  INFO(name);
  SplitMix rng(seed);
  const size_t dense = static_cast<size_t>(c.rows * c.n);
  const std::vector<float> g = random_floats(dense, -10.0, 10.0, 20.0, rng);
  const std::vector<float> u = random_floats(dense, -3.0, 3.0, 1.0, rng);
  std::vector<float> ref(dense);
  {
    elementwise::SwigluArgs h;
    h.gate = g.data();
    h.up = u.data();
    h.out = ref.data();
    h.gate_stride = h.up_stride = h.out_stride = c.n;
    h.n_rows = c.rows;
    h.n = c.n;
    elementwise::swiglu_ref(h);
  }
  std::unique_ptr<GuardedMatrix> dgu, dg, du, dout;
  elementwise::SwigluArgs a;
  a.n_rows = c.rows;
  a.n = c.n;
  if (c.merged) {
    // [rows, 2n + pad]: gate in columns [0, n), up in [n, 2n).
    std::vector<float> gu(static_cast<size_t>(c.rows) * 2 * c.n);
    for (int r = 0; r < c.rows; ++r) {
      std::memcpy(&gu[static_cast<size_t>(r) * 2 * c.n], &g[static_cast<size_t>(r) * c.n], static_cast<size_t>(c.n) * 4);
      std::memcpy(&gu[static_cast<size_t>(r) * 2 * c.n + c.n], &u[static_cast<size_t>(r) * c.n], static_cast<size_t>(c.n) * 4);
    }
    dgu = std::make_unique<GuardedMatrix>(c.rows, 2 * c.n, 2 * c.n + c.pad, 4, c.shift);
    dgu->upload(gu.data());
    a.gate = dgu->as<float>();
    a.up = dgu->as<float>() + c.n;
    a.gate_stride = a.up_stride = 2 * c.n + c.pad;
  } else {
    dg = std::make_unique<GuardedMatrix>(c.rows, c.n, c.n + c.pad, 4, c.shift);
    du = std::make_unique<GuardedMatrix>(c.rows, c.n, c.n + c.pad, 4, c.shift);
    dg->upload(g.data());
    du->upload(u.data());
    a.gate = dg->as<float>();
    a.up = du->as<float>();
    a.gate_stride = a.up_stride = c.n + c.pad;
  }
  if (c.in_place) {
    a.out = const_cast<float*>(a.gate);
    a.out_stride = a.gate_stride;
  } else {
    dout = std::make_unique<GuardedMatrix>(c.rows, c.n, c.n + c.pad, c.f16 ? 2 : 4, c.shift);
    dout->upload(nullptr);
    a.out = dout->data();
    a.out_stride = c.n + c.pad;
  }
  a.out_dtype = c.f16 ? DType::kF16 : DType::kF32;
  const elementwise::RowPlan plan = elementwise::swiglu_plan(a);
  const KernelStatus st = elementwise::swiglu(a);
  INFO("status " << static_cast<int>(st.code) << " " << st.message << " " << st.file << ":" << st.line);
  REQUIRE(st.ok());
  CUDA_REQUIRE(cudaDeviceSynchronize());
  bool untouched = true;
  int64_t first_bad = 0;
  std::vector<float> got(dense);
  bool inputs_kept = true;
  if (c.in_place) {
    // The gate range now holds the output; the up range (merged) or matrix must be unchanged.
    const GuardedMatrix& m = c.merged ? *dgu : *dg;
    const std::vector<uint8_t> b = m.download(&untouched, &first_bad);
    const int64_t cols = c.merged ? 2 * c.n : c.n;
    for (int r = 0; r < c.rows; ++r) {
      std::memcpy(&got[static_cast<size_t>(r) * c.n], b.data() + static_cast<size_t>(r * cols) * 4, static_cast<size_t>(c.n) * 4);
      if (c.merged) {
        inputs_kept &= std::memcmp(b.data() + static_cast<size_t>(r * cols + c.n) * 4, &u[static_cast<size_t>(r) * c.n],
                                   static_cast<size_t>(c.n) * 4) == 0;
      }
    }
  } else {
    const std::vector<uint8_t> b = dout->download(&untouched, &first_bad);
    got = c.f16 ? f16_to_floats(b) : bytes_to_floats(b);
  }
  const ErrorStats e = normalised_error(got, ref, 1e-3);
  const double tol = c.f16 ? 1e-6 : 1e-10;
  const bool ok = e.nan == 0 && e.err <= tol && untouched && inputs_kept;
  std::printf("%-84s vec=%d err=%.3e %s\n", name.c_str(), plan.vec, e.err, ok ? "ok" : "FAIL");
  if (!ok) {
    std::printf("  NaN %zu (first at %zu); first off at row %zu col %zu: %g vs %g; guards %s; inputs %s (tolerance %.0e)\n",
                e.nan, e.first_nan, e.first_off / static_cast<size_t>(c.n), e.first_off % static_cast<size_t>(c.n),
                e.any_off ? got[e.first_off] : 0.0, e.any_off ? ref[e.first_off] : 0.0, untouched ? "intact" : "DAMAGED",
                inputs_kept ? "kept" : "CHANGED", tol);
  }
  std::fflush(stdout);
  CHECK(ok);
  return ok;
}

// ---- gather_rows

bool run_gather(DType dtype, int64_t n, int x_rows, int rows, int pad, size_t shift, uint64_t seed) {
  const std::string name = "gather_rows " + std::string(dtype_name(dtype)) + " n=" + std::to_string(n) + " x_rows=" +
                           std::to_string(x_rows) + " rows=" + std::to_string(rows) + (pad ? " pad=" + std::to_string(pad) : "") +
                           (shift ? " shift=" + std::to_string(shift) : "");
  INFO(name);
  SplitMix rng(seed);
  const size_t elem = voltserve::dtype_bytes(dtype);
  const std::vector<uint8_t> x = random_elements(static_cast<size_t>(x_rows * n), dtype, rng);
  const std::vector<int32_t> idx = random_ids(rows, x_rows, rng);
  DeviceInts didx(idx);
  GuardedMatrix dx(x_rows, n, n + pad, elem, shift), dout(rows, n, n + pad, elem, shift);
  dx.upload(x.data());
  dout.upload(nullptr);
  elementwise::GatherArgs a;
  a.x = dx.data();
  a.x_stride = n + pad;
  a.rows = didx.get();
  a.out = dout.data();
  a.out_stride = n + pad;
  a.dtype = dtype;
  a.n_rows = rows;
  a.n = n;
  const elementwise::RowPlan plan = elementwise::gather_plan(a);
  const KernelStatus st = elementwise::gather_rows(a);
  INFO("status " << static_cast<int>(st.code) << " " << st.message << " " << st.file << ":" << st.line);
  REQUIRE(st.ok());
  CUDA_REQUIRE(cudaDeviceSynchronize());
  bool untouched = true;
  int64_t first_bad = 0;
  const std::vector<uint8_t> got = dout.download(&untouched, &first_bad);
  std::vector<uint8_t> ref(got.size());
  elementwise::GatherArgs h = a;
  h.x = x.data();
  h.x_stride = n;
  h.rows = idx.data();
  h.out = ref.data();
  h.out_stride = n;
  elementwise::gather_rows_ref(h);
  size_t first_diff = got.size();
  for (size_t i = 0; i < got.size() && first_diff == got.size(); ++i)
    if (got[i] != ref[i]) first_diff = i;
  bool x_kept = true;
  const std::vector<uint8_t> xb = dx.download(&x_kept, &first_bad);
  x_kept &= xb == x;
  const bool ok = first_diff == got.size() && untouched && x_kept;
  const ErrorStats e = dtype == DType::kF32 ? normalised_error(bytes_to_floats(got), bytes_to_floats(ref), 0.0)
                                            : normalised_error(f16_to_floats(got), f16_to_floats(ref), 0.0);
  std::printf("%-84s vec=%d bitwise=%s err=%.3e %s\n", name.c_str(), plan.vec, first_diff == got.size() ? "same" : "DIFFERENT",
              e.err, ok ? "ok" : "FAIL");
  if (!ok) {
    std::printf("  first difference at element %zu (out row %zu); out guards %s; x %s\n", first_diff / elem,
                first_diff / elem / static_cast<size_t>(n), untouched ? "intact" : "DAMAGED", x_kept ? "kept" : "CHANGED");
  }
  std::fflush(stdout);
  CHECK(ok);
  return ok;
}

}  // namespace

TEST_CASE("elementwise gpu embed matches the reference exactly", "[gpu]") {
  REQUIRE_DEVICE();
  uint64_t seed = 300;
  for (DType d : {DType::kF32, DType::kF16, DType::kBF16}) {
    for (int64_t hidden : {16, 24, 32, 100, 1001, 5120}) {
      const int64_t vocab = 97;
      SplitMix rng(seed++);
      const std::vector<uint8_t> table_host = random_elements(static_cast<size_t>(vocab * hidden), d, rng);
      for (size_t shift : {size_t{0}, size_t{4}}) {
        GuardedMatrix table(vocab, hidden, hidden, voltserve::dtype_bytes(d), shift);
        table.upload(table_host.data());
        for (int rows : {1, 8, 17}) {
          for (int pad : {0, 4}) {
            EmbedCase c;
            c.vocab = vocab;
            c.hidden = hidden;
            c.dtype = d;
            c.rows = rows;
            c.pad = pad;
            c.shift = shift;
            run_embed(c, table_host, table, seed++);
            c.n_map = 13;  // a draft vocabulary's sampled rows back to table rows
            run_embed(c, table_host, table, seed++);
          }
        }
      }
    }
  }
}

// The real table: 248320 x 5120 fp16 (2.5 GB; lm_head's storage when tied) and bf16, ids over all of it (row offsets
// beyond 2^31 bytes).
TEST_CASE("elementwise gpu embed from the 27B table", "[gpu]") {
  REQUIRE_DEVICE();
  for (DType d : {DType::kF16, DType::kBF16}) {
    SplitMix rng(d == DType::kF16 ? 401 : 402);
    const std::vector<uint8_t> table_host = random_elements(static_cast<size_t>(248320) * 5120, d, rng);
    GuardedMatrix table(248320, 5120, 5120, 2);
    table.upload(table_host.data());
    for (int rows : {1, 8, 64}) {
      EmbedCase c;
      c.vocab = 248320;
      c.hidden = 5120;
      c.dtype = d;
      c.rows = rows;
      run_embed(c, table_host, table, 4100 + static_cast<uint64_t>(rows));
    }
  }
}

TEST_CASE("elementwise gpu swiglu matches the reference", "[gpu]") {
  REQUIRE_DEVICE();
  uint64_t seed = 500;
  for (int64_t n : {16, 24, 32, 100, 1001, 5120, 17408}) {
    for (int rows : {1, 8, 17}) {
      for (bool merged : {true, false}) {
        for (bool f16 : {false, true}) {
          SwigluCase c;
          c.n = n;
          c.rows = rows;
          c.merged = merged;
          c.f16 = f16;
          run_swiglu(c, seed++);
        }
      }
    }
  }
  for (int rows : {64, 300}) {  // prefill-sized
    SwigluCase c;
    c.n = 17408;
    c.rows = rows;
    c.f16 = true;
    run_swiglu(c, seed++);
  }
  for (int64_t n : {24, 17408, 1001}) {
    for (int pad : {0, 3}) {
      for (size_t shift : {size_t{0}, size_t{4}}) {
        for (bool merged : {true, false}) {
          SwigluCase c;
          c.n = n;
          c.rows = 5;
          c.merged = merged;
          c.pad = pad;
          c.shift = shift;
          c.f16 = pad == 3;
          run_swiglu(c, seed++);
          c.f16 = false;
          c.in_place = true;  // out over the gate range
          run_swiglu(c, seed++);
        }
      }
    }
  }
}

TEST_CASE("elementwise gpu gather_rows matches the reference exactly", "[gpu]") {
  REQUIRE_DEVICE();
  uint64_t seed = 700;
  for (DType d : {DType::kF32, DType::kF16}) {
    for (int64_t n : {8, 16, 24, 1001, 5120, 248320}) {
      for (int rows : {1, 8, 17}) {
        for (int pad : {0, 1, 8}) {
          for (size_t shift : {size_t{0}, voltserve::dtype_bytes(d)}) {  // one element off 16-byte alignment
            if (n == 248320 && (pad != 0 || shift != 0 || rows == 17)) continue;  // the logits rows: a few cases
            run_gather(d, n, n == 248320 ? 20 : 64, rows, pad, shift, seed++);
          }
        }
      }
    }
  }
}

// Batch composition: a launch over R rows gives each row exactly what a launch of that row alone gives.
TEST_CASE("elementwise gpu rows are independent of the batch (bitwise)", "[gpu]") {
  REQUIRE_DEVICE();
  const int rows = 6;
  SplitMix rng(800);
  // embed
  {
    const int64_t vocab = 50, hidden = 5120;
    const std::vector<uint8_t> th = random_elements(static_cast<size_t>(vocab * hidden), DType::kBF16, rng);
    GuardedMatrix table(vocab, hidden, hidden, 2);
    table.upload(th.data());
    const std::vector<int32_t> ids = random_ids(rows, vocab, rng);
    DeviceInts dids(ids);
    GuardedMatrix out(rows, hidden, hidden, 4);
    auto run = [&](int r0, int count) {
      elementwise::EmbedArgs a;
      a.table = table.data();
      a.table_dtype = DType::kBF16;
      a.hidden = hidden;
      a.ids = dids.get() + r0;
      a.n_rows = count;
      a.out = out.as<float>() + r0 * hidden;
      a.out_stride = hidden;
      REQUIRE(elementwise::embed(a).ok());
      CUDA_REQUIRE(cudaDeviceSynchronize());
    };
    bool u = true;
    int64_t fb = 0;
    out.upload(nullptr);
    run(0, rows);
    const std::vector<uint8_t> all = out.download(&u, &fb);
    out.upload(nullptr);
    for (int r = 0; r < rows; ++r) run(r, 1);
    const bool same = all == out.download(&u, &fb);
    std::printf("embed batch-composition rows=%d: at once vs one by one %s\n", rows, same ? "same" : "DIFFERENT");
    CHECK(same);
  }
  // swiglu (merged gate|up, fp16 out) and gather (fp32)
  for (int op = 0; op < 2; ++op) {
    const int64_t n = op == 0 ? 17408 : 5120;
    const std::vector<float> in = random_floats(static_cast<size_t>(rows) * 2 * n, -10.0, 10.0, 3.0, rng);
    GuardedMatrix din(rows, 2 * n, 2 * n, 4);
    din.upload(in.data());
    const std::vector<int32_t> idx = random_ids(rows, rows, rng);
    DeviceInts didx(idx);
    const size_t esize = op == 0 ? 2 : 4;
    GuardedMatrix out(rows, n, n, esize);
    auto run = [&](int r0, int count) {
      if (op == 0) {
        elementwise::SwigluArgs a;
        a.gate = din.as<float>() + r0 * 2 * n;
        a.up = a.gate + n;
        a.gate_stride = a.up_stride = 2 * n;
        a.out = static_cast<char*>(out.data()) + static_cast<size_t>(r0 * n) * esize;
        a.out_stride = n;
        a.out_dtype = DType::kF16;
        a.n_rows = count;
        a.n = static_cast<int32_t>(n);
        REQUIRE(elementwise::swiglu(a).ok());
      } else {
        elementwise::GatherArgs a;
        a.x = din.data();
        a.x_stride = 2 * n;
        a.rows = didx.get() + r0;
        a.out = static_cast<char*>(out.data()) + static_cast<size_t>(r0 * n) * esize;
        a.out_stride = n;
        a.dtype = DType::kF32;
        a.n_rows = count;
        a.n = static_cast<int32_t>(n);
        REQUIRE(elementwise::gather_rows(a).ok());
      }
      CUDA_REQUIRE(cudaDeviceSynchronize());
    };
    bool u = true;
    int64_t fb = 0;
    out.upload(nullptr);
    run(0, rows);
    const std::vector<uint8_t> all = out.download(&u, &fb);
    out.upload(nullptr);
    for (int r = 0; r < rows; ++r) run(r, 1);
    const bool same = all == out.download(&u, &fb);
    std::printf("%s batch-composition rows=%d: at once vs one by one %s\n", op == 0 ? "swiglu" : "gather_rows", rows,
                same ? "same" : "DIFFERENT");
    CHECK(same);
  }
}

TEST_CASE("elementwise gpu rejects bad arguments with a status", "[gpu]") {
  REQUIRE_DEVICE();
  GuardedMatrix buf(4, 64, 64, 4);
  const std::vector<int32_t> ids = {0, 1, 2, 3};
  DeviceInts dids(ids);
  elementwise::EmbedArgs e;
  e.table = buf.data();
  e.hidden = 64;
  e.ids = dids.get();
  e.n_rows = 2;
  e.out = buf.as<float>() + 128;
  e.out_stride = 64;
  CHECK(elementwise::embed(e).ok());
  elementwise::EmbedArgs eb = e;
  eb.hidden = 0;
  CHECK(elementwise::embed(eb).code == KernelCode::kBadShape);
  eb = e;
  eb.table_dtype = DType::kI32;
  CHECK(elementwise::embed(eb).code == KernelCode::kBadArgument);
  eb = e;
  eb.ids = nullptr;
  CHECK(elementwise::embed(eb).code == KernelCode::kBadArgument);
  eb = e;
  eb.out_stride = 32;
  CHECK(elementwise::embed(eb).code == KernelCode::kBadShape);
  eb = e;
  eb.n_rows = 0;
  CHECK(elementwise::embed(eb).ok());
  eb = e;
  eb.table = static_cast<const char*>(e.table) + 2;  // fp32 table off its element alignment
  CHECK(elementwise::embed(eb).code == KernelCode::kBadArgument);

  elementwise::SwigluArgs s;
  s.gate = buf.as<float>();
  s.up = buf.as<float>() + 64;
  s.out = buf.as<float>() + 128;
  s.gate_stride = s.up_stride = s.out_stride = 64;
  s.n_rows = 1;
  s.n = 64;
  CHECK(elementwise::swiglu(s).ok());
  elementwise::SwigluArgs sb = s;
  sb.out_dtype = DType::kBF16;
  CHECK(elementwise::swiglu(sb).code == KernelCode::kBadArgument);
  sb = s;
  sb.n = 0;
  CHECK(elementwise::swiglu(sb).code == KernelCode::kBadShape);
  sb = s;
  sb.up_stride = 10;
  CHECK(elementwise::swiglu(sb).code == KernelCode::kBadShape);
  sb = s;
  sb.gate = nullptr;
  CHECK(elementwise::swiglu(sb).code == KernelCode::kBadArgument);
  sb = s;
  sb.out_dtype = DType::kF16;
  sb.out = static_cast<char*>(s.out) + 1;
  CHECK(elementwise::swiglu(sb).code == KernelCode::kBadArgument);

  elementwise::GatherArgs g;
  g.x = buf.data();
  g.x_stride = 64;
  g.rows = dids.get();
  g.out = buf.as<float>() + 128;
  g.out_stride = 64;
  g.n_rows = 1;
  g.n = 64;
  CHECK(elementwise::gather_rows(g).ok());
  elementwise::GatherArgs gb = g;
  gb.dtype = DType::kBF16;
  CHECK(elementwise::gather_rows(gb).code == KernelCode::kBadArgument);
  gb = g;
  gb.n = -1;
  CHECK(elementwise::gather_rows(gb).code == KernelCode::kBadShape);
  gb = g;
  gb.x_stride = 8;
  CHECK(elementwise::gather_rows(gb).code == KernelCode::kBadShape);
  gb = g;
  gb.out = static_cast<char*>(g.out) + 2;
  CHECK(elementwise::gather_rows(gb).code == KernelCode::kBadArgument);
  CUDA_REQUIRE(cudaDeviceSynchronize());
}
