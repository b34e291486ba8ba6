// GPU linear kernels (both families the device can run) against the CPU reference on dequantized weights:
// normalised error ||a-b||^2/||b||^2 <= 5e-4, no NaN, every output written, guard bytes intact; fresh seeded
// inputs with +-200 outliers; M in {1,2,3,4,5,8,9,12,15,16,17,64,512}; the 27B layer shapes and awkward ones.
// The reference covers all rows when cheap and otherwise a seeded sample (the first and last 48 rows plus random
// ones, at least 64): "rows=" in each case's line says how many. Skips itself when no CUDA device is present.
#include <catch2/catch_test_macros.hpp>

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/linear/decode_pick.h"
#include "kernels/linear/linear.h"
#include "kernels/linear/linear_families.h"
#include "kernels/linear/linear_ref.h"
#include "kernels/linear/prepack.h"
#include "linear_random.h"

using namespace voltserve::kernels;
using voltserve::test::SplitMix;

namespace {

#define CUDA_REQUIRE(call)                                                                   \
  do {                                                                                       \
    const cudaError_t e_ = (call);                                                           \
    INFO(#call << " -> " << cudaGetErrorString(e_) << " at " << __FILE__ << ":" << __LINE__); \
    REQUIRE(e_ == cudaSuccess);                                                              \
  } while (0)

bool have_device(int* cc) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) return false;
  int major = 0, minor = 0;
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0);
  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0);
  *cc = major * 10 + minor;
  return true;
}

struct DeviceBuffer {
  void* p = nullptr;
  size_t bytes = 0;
  explicit DeviceBuffer(size_t b) : bytes(b) {
    if (cudaMalloc(&p, b) != cudaSuccess) p = nullptr;
  }
  ~DeviceBuffer() {
    if (p != nullptr) cudaFree(p);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
};

// A quantized weight in checkpoint order plus its device copies in both families' layouts.
struct TestWeight {
  WeightFormat format;
  int64_t n, k;
  std::vector<uint8_t> codes, scales;
  std::vector<float> channel;
  float global_scale = 1.0f / 448.0f;
  float tensor_scale = 0.0125f;
  std::unique_ptr<DeviceBuffer> dcodes[2], dscales[2], dchannel;

  HostWeightRef host() const {
    return HostWeightRef{format,        n,           k,
                         codes.data(), scales.empty() ? nullptr : scales.data(), global_scale,
                         tensor_scale, channel.empty() ? nullptr : channel.data()};
  }
  PackedWeightView view(KernelFamily fam) const {
    const int f = fam == KernelFamily::kSm70 ? 0 : 1;
    PackedWeightView v;
    v.format = format;
    v.family = fam;
    v.n = n;
    v.k = k;
    v.codes = static_cast<const uint8_t*>(dcodes[f]->p);
    v.scales = dscales[f] ? static_cast<const uint8_t*>(dscales[f]->p) : nullptr;
    v.global_scale = global_scale;
    v.tensor_scale = tensor_scale;
    v.channel_scales = dchannel ? static_cast<const float*>(dchannel->p) : nullptr;
    return v;
  }
};

// Prepacks w's checkpoint-order data for both families and copies it (and its channel scales) to the device.
void upload(TestWeight& w) {
  for (int f = 0; f < 2; ++f) {
    PackedWeightHost p;
    const std::string err = prepack(w.format, f == 0 ? KernelFamily::kSm70 : KernelFamily::kSm80, w.n, w.k, w.codes,
                                    w.scales, &p);
    REQUIRE(err.empty());
    w.dcodes[f] = std::make_unique<DeviceBuffer>(p.codes.size());
    REQUIRE(w.dcodes[f]->p != nullptr);
    CUDA_REQUIRE(cudaMemcpy(w.dcodes[f]->p, p.codes.data(), p.codes.size(), cudaMemcpyHostToDevice));
    if (!p.scales.empty()) {
      w.dscales[f] = std::make_unique<DeviceBuffer>(p.scales.size());
      REQUIRE(w.dscales[f]->p != nullptr);
      CUDA_REQUIRE(cudaMemcpy(w.dscales[f]->p, p.scales.data(), p.scales.size(), cudaMemcpyHostToDevice));
    }
  }
  if (!w.channel.empty()) {
    w.dchannel = std::make_unique<DeviceBuffer>(w.channel.size() * sizeof(float));
    CUDA_REQUIRE(cudaMemcpy(w.dchannel->p, w.channel.data(), w.channel.size() * sizeof(float),
                            cudaMemcpyHostToDevice));
  }
}

std::unique_ptr<TestWeight> make_weight(WeightFormat format, int64_t n, int64_t k, bool per_channel, uint64_t seed) {
  auto w = std::make_unique<TestWeight>();
  w->format = format;
  w->n = n;
  w->k = k;
  SplitMix rng(seed);
  if (format == WeightFormat::kNvfp4) {
    w->codes.resize(static_cast<size_t>(n * k / 2));
    w->scales.resize(static_cast<size_t>(n * k / 16));
    voltserve::test::fill_random_bytes(w->codes, rng);
    voltserve::test::fill_e4m3_scales(w->scales, rng);
  } else {
    w->codes.resize(static_cast<size_t>(n * k));
    voltserve::test::fill_e4m3_weights(w->codes, rng);
  }
  if (per_channel) {
    w->channel.resize(static_cast<size_t>(n));
    for (auto& c : w->channel) c = static_cast<float>(0.5 + rng.uniform());
  }
  upload(*w);
  return w;
}

std::vector<int64_t> sample_rows(int64_t n, int64_t m, int64_t k, uint64_t seed) {
  const int64_t budget = 40'000'000 / std::max<int64_t>(1, m * k);
  const int64_t want = std::clamp<int64_t>(budget, 64, n);
  std::vector<int64_t> rows;
  if (want >= n) {
    for (int64_t i = 0; i < n; ++i) rows.push_back(i);
    return rows;
  }
  std::vector<char> take(static_cast<size_t>(n), 0);
  for (int64_t i = 0; i < std::min<int64_t>(48, n); ++i) take[i] = take[n - 1 - i] = 1;
  SplitMix rng(seed);
  int64_t have = std::count(take.begin(), take.end(), 1);
  while (have < want) {
    const int64_t r = static_cast<int64_t>(rng.next() % static_cast<uint64_t>(n));
    if (!take[r]) {
      take[r] = 1;
      ++have;
    }
  }
  for (int64_t i = 0; i < n; ++i)
    if (take[i]) rows.push_back(i);
  return rows;
}

struct Context {
  cublasHandle_t cublas = nullptr;
  std::unique_ptr<DeviceBuffer> workspace;
  Context() {
    cublasCreate(&cublas);
    workspace = std::make_unique<DeviceBuffer>(size_t{512} << 20);  // 512 MiB: lm_head runs in chunks
  }
  ~Context() {
    if (cublas != nullptr) cublasDestroy(cublas);
  }
};

constexpr size_t kGuard = 256;
constexpr uint8_t kGuardByte = 0xA5;

// linear_forward, or the sm80 decode kernel with an explicit variant / FP8 L2 prefetch budget (linear_families.h).
KernelStatus launch_linear(const PackedWeightView& v, const LinearArgs& a, int variant = 0, int l2_prefetch_kib = -1) {
  if (variant == 0 && l2_prefetch_kib == -1) return linear_forward(v, a);
  return sm80::linear_decode(v, a, {variant, l2_prefetch_kib});
}

// Every sm80 decode variant the default pick may choose (decode_pick.h) that runs on this device.
std::vector<int> variants_here() {
  std::vector<int> ids;
  for (const auto& c : sm80::kDecodeCandidates) {
    if (sm80::decode_variant_runs_here(c.id)) ids.push_back(c.id);
  }
  return ids;
}

// linear_forward for a dense weight, or its decode kernels with explicit warps per block, or the cuBLAS path.
KernelStatus dense_forward(const PackedWeightView& v, const LinearArgs& a, int warps, bool gemm = false) {
  if (gemm) return linear_gemm(v, a);
  if (warps == 0) return linear_forward(v, a);
  return v.family == KernelFamily::kSm80 ? sm80::linear_dense_decode(v, a, warps) : sm70::linear_dense_decode(v, a, warps);
}

// Runs one case; returns the normalised error (fails the test on NaN, unwritten outputs, guard damage).
double run_case(Context& ctx, const TestWeight& w, KernelFamily fam, int64_t m, bool y_f32, uint64_t seed,
                int variant = 0, bool pdl = true) {
  const std::string name = std::string("linear ") + weight_format_name(w.format) + " m=" + std::to_string(m) +
                           " n=" + std::to_string(w.n) + " k=" + std::to_string(w.k) + " fam=" + family_name(fam) +
                           (y_f32 ? "" : " y=f16") + (w.channel.empty() ? "" : " per-channel") +
                           (variant > 0 ? " variant=" + std::to_string(variant) : "") + (pdl ? "" : " plain launch");
  INFO(name);
  SplitMix rng(seed);
  std::vector<uint16_t> xh(static_cast<size_t>(m * w.k));
  std::vector<float> xf(xh.size());
  voltserve::test::fill_activations(xh, xf, rng);
  DeviceBuffer dx(xh.size() * 2);
  REQUIRE(dx.p != nullptr);
  CUDA_REQUIRE(cudaMemcpy(dx.p, xh.data(), xh.size() * 2, cudaMemcpyHostToDevice));
  const size_t esize = y_f32 ? 4 : 2;
  const size_t ybytes = static_cast<size_t>(m * w.n) * esize;
  DeviceBuffer dy(ybytes + 2 * kGuard);
  REQUIRE(dy.p != nullptr);
  CUDA_REQUIRE(cudaMemset(dy.p, kGuardByte, ybytes + 2 * kGuard));
  CUDA_REQUIRE(cudaMemset(static_cast<char*>(dy.p) + kGuard, 0xFF, ybytes));  // NaN poison

  LinearArgs a;
  a.x = dx.p;
  a.m = m;
  a.y = static_cast<char*>(dy.p) + kGuard;
  a.y_f32 = y_f32;
  a.workspace = ctx.workspace->p;
  a.workspace_bytes = ctx.workspace->bytes;
  a.cublas_handle = ctx.cublas;
  a.pdl = pdl;
  const KernelStatus st = launch_linear(w.view(fam), a, variant);
  INFO("status " << static_cast<int>(st.code) << " " << st.message << " " << st.file << ":" << st.line);
  REQUIRE(st.ok());
  CUDA_REQUIRE(cudaDeviceSynchronize());

  std::vector<uint8_t> raw(ybytes + 2 * kGuard);
  CUDA_REQUIRE(cudaMemcpy(raw.data(), dy.p, raw.size(), cudaMemcpyDeviceToHost));
  bool guards_ok = true;
  for (size_t i = 0; i < kGuard; ++i) guards_ok &= raw[i] == kGuardByte && raw[kGuard + ybytes + i] == kGuardByte;
  CHECK(guards_ok);
  std::vector<float> y(static_cast<size_t>(m * w.n));
  for (size_t i = 0; i < y.size(); ++i) {
    if (y_f32) {
      std::memcpy(&y[i], raw.data() + kGuard + 4 * i, 4);
    } else {
      uint16_t h;
      std::memcpy(&h, raw.data() + kGuard + 2 * i, 2);
      y[i] = voltserve::fp::f16_to_float(h);
    }
  }
  size_t nan = 0;
  for (float v : y) nan += std::isnan(v) ? 1 : 0;
  CHECK(nan == 0);

  const std::vector<int64_t> rows = sample_rows(w.n, m, w.k, seed ^ 0x5151);
  std::vector<float> ref(static_cast<size_t>(m) * rows.size());
  linear_ref_rows(w.host(), rows, xf.data(), m, ref.data());
  double num = 0.0, den = 0.0;
  for (int64_t i = 0; i < m; ++i) {
    for (size_t j = 0; j < rows.size(); ++j) {
      const double b = ref[i * rows.size() + j];
      const double d = static_cast<double>(y[i * w.n + rows[j]]) - b;
      num += d * d;
      den += b * b;
    }
  }
  const double err = den > 0 ? num / den : num;
  std::printf("%-70s rows=%-6zu err=%.3e %s\n", name.c_str(), rows.size(), err, err <= 5e-4 && nan == 0 && guards_ok ? "ok" : "FAIL");
  std::fflush(stdout);
  CHECK(err <= 5e-4);
  return err;
}

const int64_t kMs[] = {1, 2, 3, 4, 5, 8, 9, 12, 15, 16, 17, 64, 512};

void sweep(const TestWeight& w, int cc, uint64_t seed, const std::vector<int64_t>& ms) {
  Context ctx;
  REQUIRE(ctx.cublas != nullptr);
  REQUIRE(ctx.workspace->p != nullptr);
  for (KernelFamily fam : {KernelFamily::kSm70, KernelFamily::kSm80}) {
    if (fam == KernelFamily::kSm80 && cc < 80) continue;
    for (int64_t m : ms) run_case(ctx, w, fam, m, true, seed + static_cast<uint64_t>(m) * 31 + static_cast<uint64_t>(fam));
  }
}

std::vector<int64_t> all_ms() { return std::vector<int64_t>(std::begin(kMs), std::end(kMs)); }

#define REQUIRE_DEVICE(cc)                                                  \
  int cc = 0;                                                               \
  if (!have_device(&cc)) SKIP("no CUDA device: linear GPU tests skipped");

}  // namespace

TEST_CASE("linear gpu nvfp4 27B shapes, every M, both families", "[gpu]") {
  REQUIRE_DEVICE(cc);
  const int64_t shapes[][2] = {{10240, 5120}, {6144, 5120}, {5120, 6144}, {12288, 5120},
                               {1024, 5120},  {17408, 5120}, {5120, 17408}};
  uint64_t seed = 100;
  for (const auto& s : shapes) {
    auto w = make_weight(WeightFormat::kNvfp4, s[0], s[1], false, seed++);
    sweep(*w, cc, seed * 1000, all_ms());
  }
}

TEST_CASE("linear gpu fp8 27B shapes, every M, both families", "[gpu]") {
  REQUIRE_DEVICE(cc);
  const int64_t shapes[][2] = {{10240, 5120}, {6144, 5120}, {5120, 6144}, {12288, 5120}, {1024, 5120}};
  uint64_t seed = 200;
  for (const auto& s : shapes) {
    auto w = make_weight(WeightFormat::kFp8, s[0], s[1], false, seed++);
    sweep(*w, cc, seed * 1000, all_ms());
  }
}

TEST_CASE("linear gpu nvfp4 lm_head 5120->248320", "[gpu]") {
  REQUIRE_DEVICE(cc);
  auto w = make_weight(WeightFormat::kNvfp4, 248320, 5120, false, 300);
  sweep(*w, cc, 300000, {1, 4, 8, 9, 16, 17, 64});
}

TEST_CASE("linear gpu awkward shapes, per-channel scales and fp16 output", "[gpu]") {
  REQUIRE_DEVICE(cc);
  // k not a multiple of 256 (or of 64), n an odd multiple of 16 or no multiple of 16 at all (GDN in_proj_a / b have
  // one row per value head); per-channel multipliers on both codecs.
  const int64_t shapes[][2] = {{16, 16}, {48, 80}, {1040, 5184}, {5136, 1104}, {208, 17408 + 16},
                               {1, 64}, {24, 5120}, {1000, 272}};
  uint64_t seed = 400;
  for (const auto& s : shapes) {
    for (WeightFormat format : {WeightFormat::kNvfp4, WeightFormat::kFp8}) {
      auto w = make_weight(format, s[0], s[1], true, seed++);
      sweep(*w, cc, seed * 1000, all_ms());
    }
  }
  Context ctx;
  auto w = make_weight(WeightFormat::kNvfp4, 1040, 5184, false, 450);
  for (KernelFamily fam : {KernelFamily::kSm70, KernelFamily::kSm80}) {
    if (fam == KernelFamily::kSm80 && cc < 80) continue;
    for (int64_t m : {1, 9, 16, 64}) run_case(ctx, *w, fam, m, false, 4500 + static_cast<uint64_t>(m));
  }
}

// Merged projections (merge_packed_rows): one launch over the rows of attention q, k and v (27B shapes) whose
// global / tensor scales differ, against the CPU reference with the merged row scales, both families, decode and
// dequantization paths; and for NVFP4 on the sm80 family with one decode variant, bit-identical to launching each
// part alone (the global scale moves from the output scale to the row multiplier without a second rounding).
TEST_CASE("linear gpu merged projections match the reference and the separate launches", "[gpu]") {
  REQUIRE_DEVICE(cc);
  Context ctx;
  const int64_t k = 5120;
  const std::vector<int64_t> ns = {12288, 1024, 1024};
  uint64_t seed = 600;
  for (WeightFormat format : {WeightFormat::kNvfp4, WeightFormat::kFp8}) {
    std::vector<std::unique_ptr<TestWeight>> parts;
    auto merged = std::make_unique<TestWeight>();
    merged->format = format;
    merged->k = k;
    merged->global_scale = merged->tensor_scale = 1.0f;
    for (size_t i = 0; i < ns.size(); ++i) {
      parts.push_back(make_weight(format, ns[i], k, false, seed++));
      TestWeight& p = *parts.back();
      p.global_scale = std::ldexp(1.0f, -9 - static_cast<int>(i)) * (1.0f + 0.375f * static_cast<float>(i));
      p.tensor_scale = 0.01f * static_cast<float>(i + 1);
      merged->n += p.n;
      merged->codes.insert(merged->codes.end(), p.codes.begin(), p.codes.end());
      merged->scales.insert(merged->scales.end(), p.scales.begin(), p.scales.end());
    }
    // The device copy of the merged weight is the prepack of the concatenated rows; merge_packed_rows must give
    // the same bytes from the parts' own prepacks.
    for (KernelFamily fam : {KernelFamily::kSm70, KernelFamily::kSm80}) {
      std::vector<PackedWeightHost> packed(parts.size());
      std::vector<MergePart> mp;
      for (size_t i = 0; i < parts.size(); ++i) {
        REQUIRE(prepack(format, fam, parts[i]->n, k, parts[i]->codes, parts[i]->scales, &packed[i]).empty());
        mp.push_back({&packed[i], format == WeightFormat::kNvfp4 ? parts[i]->global_scale : parts[i]->tensor_scale});
      }
      PackedWeightHost out, direct;
      std::vector<float> row_scales;
      REQUIRE(merge_packed_rows(mp, &out, &row_scales).empty());
      REQUIRE(prepack(format, fam, merged->n, k, merged->codes, merged->scales, &direct).empty());
      CHECK(out.codes == direct.codes);
      CHECK(out.scales == direct.scales);
      merged->channel = row_scales;
    }
    upload(*merged);
    for (KernelFamily fam : {KernelFamily::kSm70, KernelFamily::kSm80}) {
      if (fam == KernelFamily::kSm80 && cc < 80) continue;
      for (int64_t m : {1, 8, 9, 16, 64}) run_case(ctx, *merged, fam, m, true, seed * 100 + static_cast<uint64_t>(m));
    }
    if (format != WeightFormat::kNvfp4 || cc < 80) continue;
    SplitMix rng(seed * 7);
    std::vector<uint16_t> xh(static_cast<size_t>(16 * k));
    std::vector<float> xf(xh.size());
    voltserve::test::fill_activations(xh, xf, rng);
    DeviceBuffer dx(xh.size() * 2), dy(static_cast<size_t>(16 * merged->n) * 4);
    REQUIRE((dx.p != nullptr && dy.p != nullptr));
    CUDA_REQUIRE(cudaMemcpy(dx.p, xh.data(), xh.size() * 2, cudaMemcpyHostToDevice));
    auto run = [&](const TestWeight& w, int64_t m) {
      LinearArgs a;
      a.x = dx.p;
      a.m = m;
      a.y = dy.p;
      // One variant for every launch: the same order of every sum.
      const KernelStatus st = launch_linear(w.view(KernelFamily::kSm80), a, 4);
      INFO("status " << st.message);
      REQUIRE(st.ok());
      std::vector<float> y(static_cast<size_t>(m * w.n));
      CUDA_REQUIRE(cudaMemcpy(y.data(), dy.p, y.size() * 4, cudaMemcpyDeviceToHost));
      return y;
    };
    for (int64_t m : {1, 5, 16}) {
      const std::vector<float> ym = run(*merged, m);
      int64_t row0 = 0;
      for (const auto& p : parts) {
        const std::vector<float> yp = run(*p, m);
        bool same = true;
        for (int64_t t = 0; t < m; ++t) {
          same &= std::memcmp(&ym[t * merged->n + row0], &yp[t * p->n], static_cast<size_t>(p->n) * 4) == 0;
        }
        std::printf("linear merged vs separate nvfp4 rows [%lld, %lld) m=%lld %s\n", static_cast<long long>(row0),
                    static_cast<long long>(row0 + p->n), static_cast<long long>(m), same ? "same" : "DIFFERENT");
        CHECK(same);
        row0 += p->n;
      }
    }
  }
}

TEST_CASE("linear gpu sm80 every decode variant", "[gpu]") {
  REQUIRE_DEVICE(cc);
  if (cc < 80) SKIP("sm80 family needs sm_80+");
  Context ctx;
  // Fewer tiles than resident blocks, k not a multiple of the k-block, and a 27B shape with several tiles per block;
  // an odd tile count leaves the last two-tile block half empty.
  const int64_t shapes[][2] = {{48, 80}, {5136, 1104}, {10240, 5120}, {10256, 5120}};
  uint64_t seed = 700;
  for (const auto& s : shapes) {
    for (WeightFormat format : {WeightFormat::kNvfp4, WeightFormat::kFp8}) {
      auto w = make_weight(format, s[0], s[1], format == WeightFormat::kFp8, seed++);
      for (int variant : variants_here()) {
        for (int64_t m : {1, 8, 9, 16}) {
          run_case(ctx, *w, KernelFamily::kSm80, m, m != 8, seed * 100 + static_cast<uint64_t>(m + variant), variant);
        }
      }
      // Plain launches (no programmatic dependent launch).
      for (int variant : {6, 10}) {
        for (int64_t m : {1, 16}) {
          run_case(ctx, *w, KernelFamily::kSm80, m, true, seed * 100 + static_cast<uint64_t>(m + variant), variant, false);
        }
      }
    }
  }
  LinearArgs a;
  auto w = make_weight(WeightFormat::kNvfp4, 32, 64, false, 799);
  DeviceBuffer dx(64 * 2), dy(32 * 4);
  a.x = dx.p;
  a.y = dy.p;
  a.m = 1;
  for (int bad : {1, 3, 12, 13, 14, 15, 16, 20, 30, 99, -1}) {  // 1, 12, 13, 15: removed variants
    CHECK(sm80::linear_decode(w->view(KernelFamily::kSm80), a, {bad}).code == KernelCode::kBadArgument);
    CHECK_FALSE(sm80::decode_variant_runs_here(bad));
  }
  auto w8 = make_weight(WeightFormat::kFp8, 32, 64, false, 798);
  CHECK(sm80::linear_decode(w8->view(KernelFamily::kSm80), a, {0, -2}).code == KernelCode::kBadArgument);
  // Cluster variants run on sm_90+ only; below, asking for one is refused rather than launched.
  CHECK(sm80::decode_variant_runs_here(23) == (cc >= 90));
  if (cc < 90) CHECK(sm80::linear_decode(w->view(KernelFamily::kSm80), a, {23}).code == KernelCode::kUnsupported);
}

// Batch invariance: a token's output must not depend on how many other tokens share the launch (speculative
// verification runs k + 1 tokens where plain decoding runs 1, and greedy output must stay byte-identical). The
// first m rows of a 16-token launch must equal, bit for bit, a launch with only those m rows, with x row-major or
// token-chunked (x_layout.h): for the default pick (sm80: one variant per shape, whatever m), explicit sm80 variants,
// and the sm70 family.
TEST_CASE("linear gpu decode is batch invariant (bitwise)", "[gpu]") {
  REQUIRE_DEVICE(cc);
  // Shapes over the default pick's choices: few tiles (k split over 16 warps), 320 tiles (awkward k; long k), 640,
  // 896 and 1024 tiles (on 132 SMs one-tile blocks for one token tile, two-tile blocks for two), 1088 and 8192 tiles.
  const int64_t shapes[][2] = {{1024, 5120},  {5136, 1104},  {5120, 17408}, {10240, 5120},
                               {14336, 5120}, {16384, 5120}, {17408, 5120}, {131072, 1024}};
  uint64_t seed = 1500;
  for (const auto& s : shapes) {
    for (WeightFormat format : {WeightFormat::kNvfp4, WeightFormat::kFp8}) {
      auto w = make_weight(format, s[0], s[1], format == WeightFormat::kFp8, seed++);
      SplitMix rng(seed * 7);
      std::vector<uint16_t> xh(static_cast<size_t>(16 * w->k));
      std::vector<float> xf(xh.size());
      voltserve::test::fill_activations(xh, xf, rng);
      DeviceBuffer dx(static_cast<size_t>(x_buffer_halves(XLayout::kTokenChunked, 16, w->k)) * 2);
      DeviceBuffer dy(static_cast<size_t>(16 * w->n) * 4);
      REQUIRE((dx.p != nullptr && dy.p != nullptr));
      // The first m rows of x, row-major or token-chunked (x_layout.h; never-read slots hold NaN).
      auto upload_x = [&](int64_t m, XLayout layout) {
        std::vector<uint16_t> xl(static_cast<size_t>(x_buffer_halves(layout, m, w->k)), 0xFFFF);
        for (int64_t tok = 0; tok < m; ++tok)
          for (int64_t kk = 0; kk < w->k; ++kk)
            xl[static_cast<size_t>(x_offset(layout, w->k, tok, kk))] = xh[static_cast<size_t>(tok * w->k + kk)];
        CUDA_REQUIRE(cudaMemcpy(dx.p, xl.data(), xl.size() * 2, cudaMemcpyHostToDevice));
      };
      auto run = [&](KernelFamily fam, int64_t m, int variant, int l2_prefetch_kib = -1,
                     XLayout layout = XLayout::kRowMajor) {
        upload_x(m, layout);
        LinearArgs a;
        a.x = dx.p;
        a.m = m;
        a.y = dy.p;
        a.x_layout = layout;
        const KernelStatus st = launch_linear(w->view(fam), a, variant, l2_prefetch_kib);
        INFO("status " << st.message);
        REQUIRE(st.ok());
        std::vector<float> y(static_cast<size_t>(m * w->n));
        CUDA_REQUIRE(cudaMemcpy(y.data(), dy.p, y.size() * 4, cudaMemcpyDeviceToHost));
        return y;
      };
      std::vector<std::pair<KernelFamily, int>> configs = {{KernelFamily::kSm70, 0}};
      if (cc >= 80) {
        configs.emplace_back(KernelFamily::kSm80, 0);
        for (int variant : variants_here()) configs.emplace_back(KernelFamily::kSm80, variant);
      }
      for (const auto& [fam, variant] : configs) {
        const std::vector<float> y16 = run(fam, 16, variant);
        // Row-major and token-chunked x, every m: the same bits.
        const std::pair<int64_t, XLayout> runs[] = {
            {1, XLayout::kRowMajor},     {2, XLayout::kRowMajor},     {5, XLayout::kRowMajor},
            {8, XLayout::kRowMajor},     {9, XLayout::kRowMajor},     {15, XLayout::kRowMajor},
            {1, XLayout::kTokenChunked}, {2, XLayout::kTokenChunked}, {5, XLayout::kTokenChunked},
            {8, XLayout::kTokenChunked}, {9, XLayout::kTokenChunked}, {15, XLayout::kTokenChunked},
            {16, XLayout::kTokenChunked}};
        for (const auto& [m, layout] : runs) {
          const std::vector<float> ym = run(fam, m, variant, -1, layout);
          const bool same = std::memcmp(ym.data(), y16.data(), ym.size() * 4) == 0;
          std::printf("linear batch-invariance %s n=%lld k=%lld fam=%s variant=%d m=%lld x=%s vs 16 %s\n",
                      weight_format_name(format), static_cast<long long>(w->n), static_cast<long long>(w->k), family_name(fam),
                      variant, static_cast<long long>(m), layout == XLayout::kRowMajor ? "row" : "chunked",
                      same ? "same" : "DIFFERENT");
          CHECK(same);
        }
      }
      // The FP8 L2 prefetch is a hint: no prefetch, the default budget and the whole weight give the same bits.
      if (cc >= 80 && format == WeightFormat::kFp8) {
        const std::vector<float> y_default = run(KernelFamily::kSm80, 16, 0);
        for (int kib : {0, 1 << 20}) {
          const std::vector<float> y = run(KernelFamily::kSm80, 16, 0, kib);
          const bool same = std::memcmp(y.data(), y_default.data(), y.size() * 4) == 0;
          std::printf("linear l2-prefetch fp8 n=%lld k=%lld kib=%d vs default %s\n", static_cast<long long>(w->n),
                      static_cast<long long>(w->k), kib, same ? "same" : "DIFFERENT");
          CHECK(same);
        }
      }
    }
  }
}

// Back-to-back launches without host syncs: A writes y1 (fp16), B reads it as x, then A runs again on other
// input and overwrites y1. With programmatic dependent launch a kernel issues weight loads before the previous
// one has finished, so a missing wait would show as B reading stale x (RAW) or A' clobbering B's input (WAR).
TEST_CASE("linear gpu chained launches keep stream order (programmatic dependent launch)", "[gpu]") {
  REQUIRE_DEVICE(cc);
  if (cc < 80) SKIP("sm80 family needs sm_80+");
  auto wa = make_weight(WeightFormat::kNvfp4, 8192, 4096, false, 901);
  auto wb = make_weight(WeightFormat::kNvfp4, 512, 8192, false, 902);
  wa->global_scale = 1.0f / 8192.0f;  // keeps y1 well inside fp16
  for (int variant_b : {0, 5, 23}) {  // 23: k split over a cluster
    if (variant_b != 0 && !sm80::decode_variant_runs_here(variant_b)) continue;
    for (int64_t m : {int64_t{1}, int64_t{16}}) {
      SplitMix rng(903 + static_cast<uint64_t>(m * 7 + variant_b));
      std::vector<uint16_t> x0h(static_cast<size_t>(m * 4096)), x1h(x0h.size());
      std::vector<float> x0f(x0h.size()), x1f(x0h.size());
      voltserve::test::fill_activations(x0h, x0f, rng);
      voltserve::test::fill_activations(x1h, x1f, rng);
      DeviceBuffer dx0(x0h.size() * 2), dx1(x1h.size() * 2), dy1(static_cast<size_t>(m * 8192) * 2),
          dy2(static_cast<size_t>(m * 512) * 4);
      REQUIRE((dx0.p && dx1.p && dy1.p && dy2.p));
      CUDA_REQUIRE(cudaMemcpy(dx0.p, x0h.data(), x0h.size() * 2, cudaMemcpyHostToDevice));
      CUDA_REQUIRE(cudaMemcpy(dx1.p, x1h.data(), x1h.size() * 2, cudaMemcpyHostToDevice));
      LinearArgs a;
      a.m = m;
      a.pdl = true;
      a.y_f32 = false;
      a.x = dx0.p;
      a.y = dy1.p;
      // Reference input of B: y1 = A(x0), computed alone first.
      REQUIRE(linear_forward(wa->view(KernelFamily::kSm80), a).ok());
      CUDA_REQUIRE(cudaDeviceSynchronize());
      std::vector<uint16_t> y1h(static_cast<size_t>(m * 8192));
      CUDA_REQUIRE(cudaMemcpy(y1h.data(), dy1.p, y1h.size() * 2, cudaMemcpyDeviceToHost));
      std::vector<float> y1f(y1h.size());
      for (size_t i = 0; i < y1h.size(); ++i) y1f[i] = voltserve::fp::f16_to_float(y1h[i]);
      // Poison y1 with a kernel-free memset, then A, B, A' back to back.
      CUDA_REQUIRE(cudaMemset(dy1.p, 0xFF, y1h.size() * 2));
      CUDA_REQUIRE(cudaMemset(dy2.p, 0xFF, static_cast<size_t>(m * 512) * 4));
      REQUIRE(linear_forward(wa->view(KernelFamily::kSm80), a).ok());
      LinearArgs b;
      b.m = m;
      b.x = dy1.p;
      b.y = dy2.p;
      b.pdl = true;
      REQUIRE(launch_linear(wb->view(KernelFamily::kSm80), b, variant_b).ok());
      a.x = dx1.p;
      REQUIRE(linear_forward(wa->view(KernelFamily::kSm80), a).ok());
      CUDA_REQUIRE(cudaDeviceSynchronize());
      std::vector<float> y2(static_cast<size_t>(m * 512));
      CUDA_REQUIRE(cudaMemcpy(y2.data(), dy2.p, y2.size() * 4, cudaMemcpyDeviceToHost));
      std::vector<int64_t> rows(512);
      for (int64_t i = 0; i < 512; ++i) rows[i] = i;
      std::vector<float> ref(y2.size());
      linear_ref_rows(wb->host(), rows, y1f.data(), m, ref.data());
      double num = 0.0, den = 0.0;
      size_t nan = 0;
      for (size_t i = 0; i < y2.size(); ++i) {
        nan += std::isnan(y2[i]) ? 1 : 0;
        num += (static_cast<double>(y2[i]) - ref[i]) * (static_cast<double>(y2[i]) - ref[i]);
        den += static_cast<double>(ref[i]) * ref[i];
      }
      const double err = den > 0 ? num / den : num;
      std::printf("linear chained A->B->A' m=%lld variant_b=%d err=%.3e %s\n", static_cast<long long>(m), variant_b, err,
                  err <= 5e-4 && nan == 0 ? "ok" : "FAIL");
      CHECK(nan == 0);
      CHECK(err <= 5e-4);
    }
  }
}

TEST_CASE("linear gpu rejects bad arguments with a status", "[gpu]") {
  REQUIRE_DEVICE(cc);
  auto w = make_weight(WeightFormat::kNvfp4, 32, 64, false, 500);
  PackedWeightView v = w->view(KernelFamily::kSm70);
  DeviceBuffer dx(64 * 2 * 32), dy(32 * 4 * 32);
  LinearArgs a;
  a.x = dx.p;
  a.y = dy.p;
  a.m = 0;
  CHECK(linear_forward(v, a).code == KernelCode::kBadShape);
  a.m = kMaxStreamRows + 1;  // needs cuBLAS + workspace
  CHECK(linear_forward(v, a).code == KernelCode::kBadArgument);
  a.m = 4;
  a.x = nullptr;
  CHECK(linear_forward(v, a).code == KernelCode::kBadArgument);
  a.x = dx.p;
  PackedWeightView bad = v;
  bad.k = 40;  // k must be a multiple of 16 (any n is fine)
  CHECK(linear_forward(bad, a).code == KernelCode::kBadShape);
  bad = v;
  bad.n = 0;
  CHECK(linear_forward(bad, a).code == KernelCode::kBadShape);
  bad = v;
  bad.scales = nullptr;
  CHECK(linear_forward(bad, a).code == KernelCode::kBadArgument);
  a.m = 17;
  CHECK(sm70::linear_decode(v, a).code == KernelCode::kBadShape);
  // Token-chunked x: decode path, m <= 16 only.
  a.x_layout = XLayout::kTokenChunked;
  a.m = 17;
  CHECK(linear_forward(v, a).code == KernelCode::kBadArgument);
  a.m = 9;
  CHECK(linear_gemm(v, a).code == KernelCode::kBadArgument);
  a.x_layout = static_cast<XLayout>(7);
  CHECK(linear_forward(v, a).code == KernelCode::kBadArgument);
  if (cc < 80) CHECK(linear_forward(w->view(KernelFamily::kSm80), LinearArgs{dx.p, 1, dy.p}).code == KernelCode::kUnsupported);
}

// ---- Dense fp16 weights (WeightFormat::kDense): row-major [n, k] on the device, no prepack, the same bytes for both
// families. The reference multiplies by the exact fp16 values, so errors are only fp32 accumulation order and the fp16
// output rounding: the cases use tolerances far below 5e-4 (1e-6 for fp32 out; 1e-5 for fp16 out, where cuBLAS may
// also add split-k partial sums in fp16), which a dropped 16-byte chunk of any row (~1e-3 at k = 10240) breaks.

namespace {

constexpr double kDenseTol = 1e-6;
constexpr double kDenseTolF16 = 1e-5;

struct DenseWeight {
  int64_t n = 0, k = 0;
  std::vector<uint16_t> h;  // [n, k] fp16 bits
  std::vector<float> channel;
  std::unique_ptr<DeviceBuffer> dw, dchannel;

  HostWeightRef host() const {
    HostWeightRef r;
    r.format = WeightFormat::kDense;
    r.n = n;
    r.k = k;
    r.codes = reinterpret_cast<const uint8_t*>(h.data());
    r.channel_scales = channel.empty() ? nullptr : channel.data();
    r.dense_dtype = voltserve::DType::kF16;
    return r;
  }
  PackedWeightView view(KernelFamily fam) const {
    PackedWeightView v;
    v.format = WeightFormat::kDense;
    v.family = fam;
    v.n = n;
    v.k = k;
    v.codes = static_cast<const uint8_t*>(dw->p);
    v.channel_scales = dchannel ? static_cast<const float*>(dchannel->p) : nullptr;
    return v;
  }
};

// Seeded fp16 weights of magnitude 2^-5 .. 1, both signs, built from bits (fast enough for lm_head's 1.3 G values);
// optional per-row multipliers in [0.5, 1.5).
std::unique_ptr<DenseWeight> make_dense(int64_t n, int64_t k, bool per_channel, uint64_t seed) {
  auto w = std::make_unique<DenseWeight>();
  w->n = n;
  w->k = k;
  w->h.resize(static_cast<size_t>(n * k));
  SplitMix rng(seed);
  for (size_t i = 0; i < w->h.size(); i += 4) {
    const uint64_t r = rng.next();
    for (size_t j = 0; j < 4 && i + j < w->h.size(); ++j) {
      const auto b = static_cast<uint32_t>(r >> (16 * j)) & 0xFFFF;
      w->h[i + j] = static_cast<uint16_t>((b & 0x83FF) | ((10 + ((b >> 10) & 31) % 5) << 10));
    }
  }
  if (per_channel) {
    w->channel.resize(static_cast<size_t>(n));
    for (auto& c : w->channel) c = static_cast<float>(0.5 + rng.uniform());
  }
  w->dw = std::make_unique<DeviceBuffer>(w->h.size() * 2);
  REQUIRE(w->dw->p != nullptr);
  CUDA_REQUIRE(cudaMemcpy(w->dw->p, w->h.data(), w->h.size() * 2, cudaMemcpyHostToDevice));
  if (per_channel) {
    w->dchannel = std::make_unique<DeviceBuffer>(w->channel.size() * sizeof(float));
    REQUIRE(w->dchannel->p != nullptr);
    CUDA_REQUIRE(cudaMemcpy(w->dchannel->p, w->channel.data(), w->channel.size() * sizeof(float), cudaMemcpyHostToDevice));
  }
  return w;
}

// x [m, k] (fp16 bits) in `layout` for the device (slots never read hold NaN).
std::vector<uint16_t> lay_out_x(const std::vector<uint16_t>& xh, int64_t m, int64_t k, XLayout layout) {
  std::vector<uint16_t> xl(static_cast<size_t>(x_buffer_halves(layout, m, k)), 0xFFFF);
  for (int64_t tok = 0; tok < m; ++tok)
    for (int64_t kk = 0; kk < k; ++kk) xl[static_cast<size_t>(x_offset(layout, k, tok, kk))] = xh[static_cast<size_t>(tok * k + kk)];
  return xl;
}

// One dense case against the reference: poisoned output, guard bytes, NaN check, normalised error <= kDenseTol.
// Prints one line per case; returns the error.
double run_dense_case(Context& ctx, const DenseWeight& w, KernelFamily fam, int64_t m, bool y_f32, uint64_t seed,
                      int warps = 0, XLayout layout = XLayout::kRowMajor, bool gemm = false) {
  const std::string name = "linear dense m=" + std::to_string(m) + " n=" + std::to_string(w.n) + " k=" + std::to_string(w.k) +
                           " fam=" + family_name(fam) + (y_f32 ? "" : " y=f16") + (w.channel.empty() ? "" : " per-channel") +
                           (warps > 0 ? " warps=" + std::to_string(warps) : "") +
                           (layout == XLayout::kTokenChunked ? " x=chunked" : "") + (gemm ? " path=cublas" : "");
  INFO(name);
  SplitMix rng(seed);
  std::vector<uint16_t> xh(static_cast<size_t>(m * w.k));
  std::vector<float> xf(xh.size());
  voltserve::test::fill_activations(xh, xf, rng);
  const std::vector<uint16_t> xl = lay_out_x(xh, m, w.k, layout);
  DeviceBuffer dx(xl.size() * 2);
  REQUIRE(dx.p != nullptr);
  CUDA_REQUIRE(cudaMemcpy(dx.p, xl.data(), xl.size() * 2, cudaMemcpyHostToDevice));
  const size_t esize = y_f32 ? 4 : 2;
  const size_t ybytes = static_cast<size_t>(m * w.n) * esize;
  DeviceBuffer dy(ybytes + 2 * kGuard);
  REQUIRE(dy.p != nullptr);
  CUDA_REQUIRE(cudaMemset(dy.p, kGuardByte, ybytes + 2 * kGuard));
  CUDA_REQUIRE(cudaMemset(static_cast<char*>(dy.p) + kGuard, 0xFF, ybytes));  // NaN poison

  LinearArgs a;
  a.x = dx.p;
  a.m = m;
  a.y = static_cast<char*>(dy.p) + kGuard;
  a.y_f32 = y_f32;
  a.cublas_handle = ctx.cublas;  // no workspace: the dense path needs none
  a.x_layout = layout;
  const KernelStatus st = dense_forward(w.view(fam), a, warps, gemm);
  INFO("status " << static_cast<int>(st.code) << " " << st.message << " " << st.file << ":" << st.line);
  REQUIRE(st.ok());
  CUDA_REQUIRE(cudaDeviceSynchronize());

  std::vector<uint8_t> raw(ybytes + 2 * kGuard);
  CUDA_REQUIRE(cudaMemcpy(raw.data(), dy.p, raw.size(), cudaMemcpyDeviceToHost));
  bool guards_ok = true;
  for (size_t i = 0; i < kGuard; ++i) guards_ok &= raw[i] == kGuardByte && raw[kGuard + ybytes + i] == kGuardByte;
  CHECK(guards_ok);
  std::vector<float> y(static_cast<size_t>(m * w.n));
  size_t nan = 0, first_nan = y.size();
  for (size_t i = 0; i < y.size(); ++i) {
    if (y_f32) {
      std::memcpy(&y[i], raw.data() + kGuard + 4 * i, 4);
    } else {
      uint16_t h;
      std::memcpy(&h, raw.data() + kGuard + 2 * i, 2);
      y[i] = voltserve::fp::f16_to_float(h);
    }
    if (std::isnan(y[i]) && nan++ == 0) first_nan = i;
  }
  CHECK(nan == 0);

  const std::vector<int64_t> rows = sample_rows(w.n, m, w.k, seed ^ 0x5151);
  std::vector<float> ref(static_cast<size_t>(m) * rows.size());
  linear_ref_rows(w.host(), rows, xf.data(), m, ref.data());
  double num = 0.0, den = 0.0, worst = -1.0;
  int64_t worst_tok = -1, worst_row = -1;
  for (int64_t i = 0; i < m; ++i) {
    for (size_t j = 0; j < rows.size(); ++j) {
      const double b = ref[i * rows.size() + j];
      const double d = static_cast<double>(y[i * w.n + rows[j]]) - b;
      num += d * d;
      den += b * b;
      if (std::fabs(d) > worst) {
        worst = std::fabs(d);
        worst_tok = i;
        worst_row = rows[j];
      }
    }
  }
  const double err = den > 0 ? num / den : num;
  const double tol = y_f32 ? kDenseTol : kDenseTolF16;
  const bool ok = err <= tol && nan == 0 && guards_ok;
  std::printf("%-70s rows=%-6zu err=%.3e %s\n", name.c_str(), rows.size(), err, ok ? "ok" : "FAIL");
  if (!ok) {
    std::printf("  worst |d| = %.4g at token %lld row %lld; NaN %zu (first at %zu); guards %s; tolerance %.0e\n", worst,
                static_cast<long long>(worst_tok), static_cast<long long>(worst_row), nan, first_nan,
                guards_ok ? "intact" : "DAMAGED", tol);
  }
  std::fflush(stdout);
  CHECK(err <= tol);
  return err;
}

std::vector<KernelFamily> families_of(int cc) {
  std::vector<KernelFamily> f = {KernelFamily::kSm70};
  if (cc >= 80) f.push_back(KernelFamily::kSm80);
  return f;
}

}  // namespace

TEST_CASE("linear gpu dense fp16: 27B shapes, fixtures, every M, both families", "[gpu]") {
  REQUIRE_DEVICE(cc);
  Context ctx;
  REQUIRE(ctx.cublas != nullptr);
  struct DenseShape {
    int64_t n, k;
    bool per_channel;
  };
  // mtp.fc, GDN in_proj_a / b, a 1024-tile weight (4 warps), an awkward one (n no multiple of 16, k % 64 == 16), and
  // the tiny fixture shapes (n, k 16..128; head dims 16 / 24 / 32 as row counts).
  const DenseShape shapes[] = {{5120, 10240, false}, {48, 5120, false}, {48, 5120, true},  {16384, 5120, true},
                               {1000, 272, true},    {5136, 1104, false}, {16, 16, false},  {24, 32, true},
                               {32, 48, false},      {16, 64, true},      {128, 128, false}, {100, 112, true},
                               {7, 16, false},       {1, 64, false}};
  uint64_t seed = 2000;
  for (const DenseShape& s : shapes) {
    auto w = make_dense(s.n, s.k, s.per_channel, seed++);
    for (KernelFamily fam : families_of(cc)) {
      for (int64_t m : all_ms()) run_dense_case(ctx, *w, fam, m, true, seed * 100 + static_cast<uint64_t>(m));
      for (int64_t m : {1, 9, 16, 64}) run_dense_case(ctx, *w, fam, m, false, seed * 100 + 50 + static_cast<uint64_t>(m));
      for (int64_t m : {2, 8, 13, 16}) {
        run_dense_case(ctx, *w, fam, m, true, seed * 100 + 70 + static_cast<uint64_t>(m), 0, XLayout::kTokenChunked);
      }
      // Every warps-per-block choice, and cuBLAS at decode sizes (linear_gemm).
      for (int warps : {4, 8, 16}) {
        for (int64_t m : {1, 16}) run_dense_case(ctx, *w, fam, m, m == 1, seed * 100 + 80 + static_cast<uint64_t>(m + warps), warps);
      }
    }
    run_dense_case(ctx, *w, KernelFamily::kSm70, 5, true, seed * 100 + 99, 0, XLayout::kRowMajor, true);
  }
}

TEST_CASE("linear gpu dense fp16 lm_head 5120->248320", "[gpu]") {
  REQUIRE_DEVICE(cc);
  Context ctx;
  REQUIRE(ctx.cublas != nullptr);
  auto w = make_dense(248320, 5120, false, 2100);
  for (KernelFamily fam : families_of(cc)) {
    for (int64_t m : {1, 4, 8, 9, 16, 17, 64}) run_dense_case(ctx, *w, fam, m, true, 21000 + static_cast<uint64_t>(m));
    run_dense_case(ctx, *w, fam, 8, false, 21100, 0, XLayout::kTokenChunked);
  }
}

// Batch invariance (dense): a token's output must not depend on how many tokens share the launch nor on what the
// others hold. The first m rows of a 16-token launch must equal, bit for bit, a launch of only those m rows (x
// row-major or token-chunked), and a 16-token launch whose rows m.. hold other data; per family and warps per block.
TEST_CASE("linear gpu dense decode is batch invariant (bitwise)", "[gpu]") {
  REQUIRE_DEVICE(cc);
  const int64_t shapes[][2] = {{48, 5120}, {5120, 10240}, {16384, 5120}, {100, 112}, {24, 32}};
  uint64_t seed = 2200;
  for (const auto& s : shapes) {
    auto w = make_dense(s[0], s[1], true, seed++);
    SplitMix rng(seed * 7);
    std::vector<uint16_t> xh(static_cast<size_t>(16 * w->k)), xo(xh.size());
    std::vector<float> xf(xh.size());
    voltserve::test::fill_activations(xh, xf, rng);
    voltserve::test::fill_activations(xo, xf, rng);  // other data for rows m..15
    DeviceBuffer dx(static_cast<size_t>(x_buffer_halves(XLayout::kTokenChunked, 16, w->k)) * 2);
    DeviceBuffer dy(static_cast<size_t>(16 * w->n) * 4);
    REQUIRE((dx.p != nullptr && dy.p != nullptr));
    auto run = [&](KernelFamily fam, int64_t m, int warps, XLayout layout, const std::vector<uint16_t>& x) {
      const std::vector<uint16_t> xl = lay_out_x(x, m, w->k, layout);
      CUDA_REQUIRE(cudaMemcpy(dx.p, xl.data(), xl.size() * 2, cudaMemcpyHostToDevice));
      CUDA_REQUIRE(cudaMemset(dy.p, 0xFF, static_cast<size_t>(16 * w->n) * 4));
      LinearArgs a;
      a.x = dx.p;
      a.m = m;
      a.y = dy.p;
      a.x_layout = layout;
      const KernelStatus st = dense_forward(w->view(fam), a, warps);
      INFO("status " << st.message);
      REQUIRE(st.ok());
      std::vector<float> y(static_cast<size_t>(m * w->n));
      CUDA_REQUIRE(cudaMemcpy(y.data(), dy.p, y.size() * 4, cudaMemcpyDeviceToHost));
      return y;
    };
    for (KernelFamily fam : families_of(cc)) {
      for (int warps : {0, 4, 8, 16}) {
        const std::vector<float> y16 = run(fam, 16, warps, XLayout::kRowMajor, xh);
        for (int64_t m : {1, 2, 5, 8, 9, 15, 16}) {
          for (XLayout layout : {XLayout::kRowMajor, XLayout::kTokenChunked}) {
            // Alone: only the first m rows.
            const std::vector<float> ym = run(fam, m, warps, layout, xh);
            // With other rows: 16 rows, rows m.. replaced.
            std::vector<uint16_t> mixed = xh;
            std::copy(xo.begin() + m * w->k, xo.end(), mixed.begin() + m * w->k);
            const std::vector<float> yx = run(fam, 16, warps, layout, mixed);
            const size_t cmp = static_cast<size_t>(m * w->n) * 4;
            const bool same = std::memcmp(ym.data(), y16.data(), cmp) == 0 && std::memcmp(yx.data(), y16.data(), cmp) == 0;
            size_t first = 0;
            while (!same && first < static_cast<size_t>(m * w->n) && std::memcmp(&ym[first], &y16[first], 4) == 0 &&
                   std::memcmp(&yx[first], &y16[first], 4) == 0) {
              ++first;
            }
            std::printf("linear dense batch-invariance n=%lld k=%lld fam=%s warps=%d m=%lld x=%s vs 16 %s", static_cast<long long>(w->n),
                        static_cast<long long>(w->k), family_name(fam), warps, static_cast<long long>(m),
                        layout == XLayout::kRowMajor ? "row" : "chunked", same ? "same\n" : "DIFFERENT");
            if (!same) std::printf(" (first at token %zu row %zu)\n", first / static_cast<size_t>(w->n), first % static_cast<size_t>(w->n));
            CHECK(same);
          }
        }
      }
    }
  }
}

TEST_CASE("linear gpu dense rejects bad arguments with a status", "[gpu]") {
  REQUIRE_DEVICE(cc);
  Context ctx;
  auto w = make_dense(32, 64, false, 2300);
  DeviceBuffer dx(64 * 2 * (kMaxStreamRows + 1)), dy(32 * 4 * (kMaxStreamRows + 1));
  LinearArgs a;
  a.x = dx.p;
  a.y = dy.p;
  a.m = 4;
  PackedWeightView v = w->view(KernelFamily::kSm70);
  CHECK(linear_forward(v, a).ok());
  CUDA_REQUIRE(cudaDeviceSynchronize());
  PackedWeightView bad = v;
  bad.codes += 2;  // not 16-byte aligned
  CHECK(linear_forward(bad, a).code == KernelCode::kBadArgument);
  bad = v;
  bad.k = 40;  // k must be a multiple of 16
  CHECK(linear_forward(bad, a).code == KernelCode::kBadShape);
  for (int t : {1, 3, 12, 32}) CHECK(sm70::linear_dense_decode(v, a, t).code == KernelCode::kBadArgument);
  a.m = kMaxStreamRows + 1;  // needs a cuBLAS handle (no workspace)
  CHECK(linear_forward(v, a).code == KernelCode::kBadArgument);
  a.cublas_handle = ctx.cublas;
  CHECK(linear_forward(v, a).ok());
  a.x_layout = XLayout::kTokenChunked;  // the GEMM path takes row-major x
  CHECK(linear_forward(v, a).code == KernelCode::kBadArgument);
  a.x_layout = XLayout::kRowMajor;
  a.m = 4;
  // The family entry points check on their own: the other family's view, a quantized weight.
  CHECK(sm70::linear_dense_decode(w->view(KernelFamily::kSm80), a).code == KernelCode::kBadArgument);
  bad = v;
  bad.format = WeightFormat::kFp8;
  CHECK(sm70::linear_dense_decode(bad, a).code == KernelCode::kBadArgument);
  if (cc < 80) CHECK(linear_forward(w->view(KernelFamily::kSm80), a).code == KernelCode::kUnsupported);
  CUDA_REQUIRE(cudaDeviceSynchronize());
}

// A weight's output as a column range of a wider one (LinearArgs::y_stride, the merged-output views of the CUDA
// backend): the same values as a contiguous output, bit for bit, and the columns outside the range untouched, on
// the decode path, its row chunks (17 <= M <= 64) and the M >= 65 path of every format.
TEST_CASE("linear gpu y_stride writes a column range of a wider output", "[gpu]") {
  int cc = 0;
  if (!have_device(&cc)) SKIP("no CUDA device");
  Context ctx;
  const int64_t n = 80, k = 128, pad_left = 16, ldy = n + 40;
  const auto nv = make_weight(WeightFormat::kNvfp4, n, k, false, 31);
  const auto f8 = make_weight(WeightFormat::kFp8, n, k, true, 32);
  const auto de = make_dense(n, k, true, 33);
  for (KernelFamily fam : families_of(cc)) {
    for (int64_t m : {int64_t{3}, int64_t{16}, int64_t{20}, int64_t{72}}) {
      for (int which = 0; which < 3; ++which) {
        const PackedWeightView v = which == 0 ? nv->view(fam) : which == 1 ? f8->view(fam) : de->view(fam);
        SplitMix rng(static_cast<uint64_t>(100 + m + which));
        std::vector<uint16_t> xh(static_cast<size_t>(m * k));
        std::vector<float> xf(xh.size());
        voltserve::test::fill_activations(xh, xf, rng);
        DeviceBuffer dx(xh.size() * 2), dy(static_cast<size_t>(m * n) * 4), dwide(static_cast<size_t>(m * ldy) * 4);
        CUDA_REQUIRE(cudaMemcpy(dx.p, xh.data(), xh.size() * 2, cudaMemcpyHostToDevice));
        CUDA_REQUIRE(cudaMemset(dwide.p, 0x7F, dwide.bytes));  // sentinel 0x7F7F7F7F
        LinearArgs a;
        a.x = dx.p;
        a.m = m;
        a.workspace = ctx.workspace->p;
        a.workspace_bytes = ctx.workspace->bytes;
        a.cublas_handle = ctx.cublas;
        a.y = dy.p;
        REQUIRE(linear_forward(v, a).ok());
        a.y = static_cast<float*>(dwide.p) + pad_left;
        a.y_stride = ldy;
        REQUIRE(linear_forward(v, a).ok());
        CUDA_REQUIRE(cudaDeviceSynchronize());
        std::vector<float> y(static_cast<size_t>(m * n)), wide(static_cast<size_t>(m * ldy));
        CUDA_REQUIRE(cudaMemcpy(y.data(), dy.p, dy.bytes, cudaMemcpyDeviceToHost));
        CUDA_REQUIRE(cudaMemcpy(wide.data(), dwide.p, dwide.bytes, cudaMemcpyDeviceToHost));
        int64_t differ = 0, touched = 0;
        uint32_t sentinel = 0x7F7F7F7Fu;
        for (int64_t i = 0; i < m; ++i) {
          for (int64_t j = 0; j < ldy; ++j) {
            const float got = wide[static_cast<size_t>(i * ldy + j)];
            if (j >= pad_left && j < pad_left + n) {
              differ += std::memcmp(&got, &y[static_cast<size_t>(i * n + j - pad_left)], 4) != 0 ? 1 : 0;
            } else {
              touched += std::memcmp(&got, &sentinel, 4) != 0 ? 1 : 0;
            }
          }
        }
        std::printf("linear y_stride %s m=%lld fam=%s ldy=%lld: %lld values differ, %lld outside touched %s\n",
                    weight_format_name(v.format), static_cast<long long>(m), family_name(fam),
                    static_cast<long long>(ldy), static_cast<long long>(differ), static_cast<long long>(touched),
                    differ == 0 && touched == 0 ? "ok" : "FAIL");
        CHECK(differ == 0);
        CHECK(touched == 0);
      }
    }
  }
}

// Batch invariance above 16 rows (17 <= m <= kMaxStreamRows, speculative verify steps of several sequences): the
// decode path runs in row chunks of 16, so every row of a 64-row launch must equal, bit for bit, that row decoded
// alone and the first m rows of shorter launches, for every format and family.
TEST_CASE("linear gpu row chunks up to 64 rows are batch invariant (bitwise)", "[gpu]") {
  REQUIRE_DEVICE(cc);
  Context ctx;
  const int64_t shapes[][2] = {{1024, 5120}, {5136, 1104}, {10240, 5120}};
  uint64_t seed = 1700;
  for (const auto& s : shapes) {
    for (int which = 0; which < 3; ++which) {
      std::unique_ptr<TestWeight> q;
      std::unique_ptr<DenseWeight> d;
      if (which == 2) {
        d = make_dense(s[0], s[1], true, seed++);
      } else {
        q = make_weight(which == 0 ? WeightFormat::kNvfp4 : WeightFormat::kFp8, s[0], s[1], which == 1, seed++);
      }
      auto view = [&](KernelFamily fam) { return q ? q->view(fam) : d->view(fam); };
      const int64_t n = s[0], k = s[1];
      SplitMix rng(seed * 7);
      std::vector<uint16_t> xh(static_cast<size_t>(kMaxStreamRows * k));
      std::vector<float> xf(xh.size());
      voltserve::test::fill_activations(xh, xf, rng);
      DeviceBuffer dx(xh.size() * 2), dy(static_cast<size_t>(kMaxStreamRows * n) * 4);
      REQUIRE((dx.p != nullptr && dy.p != nullptr));
      // Rows [row0, row0 + m) of x, launched on their own.
      auto run = [&](KernelFamily fam, int64_t row0, int64_t m) {
        CUDA_REQUIRE(cudaMemcpy(dx.p, xh.data() + row0 * k, static_cast<size_t>(m * k) * 2,
                                cudaMemcpyHostToDevice));
        LinearArgs a;
        a.x = dx.p;
        a.m = m;
        a.y = dy.p;
        a.cublas_handle = ctx.cublas;  // not needed up to kMaxStreamRows: a wrong dispatch would still run
        a.workspace = ctx.workspace->p;
        a.workspace_bytes = ctx.workspace->bytes;
        const KernelStatus st = linear_forward(view(fam), a);
        INFO("status " << st.message);
        REQUIRE(st.ok());
        std::vector<float> y(static_cast<size_t>(m * n));
        CUDA_REQUIRE(cudaMemcpy(y.data(), dy.p, y.size() * 4, cudaMemcpyDeviceToHost));
        return y;
      };
      for (KernelFamily fam : families_of(cc)) {
        const std::vector<float> y64 = run(fam, 0, kMaxStreamRows);
        const std::pair<int64_t, int64_t> runs[] = {{0, 17}, {0, 33}, {0, 40}, {16, 1}, {40, 1}, {63, 1}, {47, 17}};
        for (const auto& [row0, m] : runs) {
          const std::vector<float> ym = run(fam, row0, m);
          const bool same = std::memcmp(ym.data(), y64.data() + row0 * n, ym.size() * 4) == 0;
          std::printf("linear row-chunk invariance %s n=%lld k=%lld fam=%s rows %lld..%lld vs 64 %s\n",
                      weight_format_name(view(fam).format), static_cast<long long>(n),
                      static_cast<long long>(k), family_name(fam), static_cast<long long>(row0),
                      static_cast<long long>(row0 + m - 1), same ? "same" : "DIFFERENT");
          CHECK(same);
        }
      }
    }
  }
}
