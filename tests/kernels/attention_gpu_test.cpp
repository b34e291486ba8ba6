// GPU test of gated attention's device form against the CPU reference (attention_ref.cpp) through the shared harness
// (attention_harness.h): normalised error <= 5e-4, an fp64 oracle on the GPU's own fp16 cache (strict), cache rows
// written (key within one fp16 ulp, value exact) and all others unchanged, every output written and nothing else,
// no NaN, guard bytes, batch invariance. First the cases the CPU emulator test also runs, then the 27B shape at every
// verify width, long contexts (3000 and 17000 positions, split context), prefill chunks of 17, 64, 200 and 2048 rows
// with and without context, batches mixing decode, verify and prefill, verify rows against one-at-a-time decoding.
// One line per call: `... err=<x> ... ok|FAIL`.
// Skips itself when no CUDA device is present.
#include <catch2/catch_test_macros.hpp>

#include <cuda_runtime.h>

#include "attention_fp8_harness.h"
#include "attention_harness.h"

namespace {

using namespace voltserve::test::attn;

#define CUDA_REQUIRE(call)                                                                   \
  do {                                                                                       \
    const cudaError_t e_ = (call);                                                           \
    INFO(#call << " -> " << cudaGetErrorString(e_) << " at " << __FILE__ << ":" << __LINE__); \
    REQUIRE(e_ == cudaSuccess);                                                              \
  } while (0)

bool have_device() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
}

#define REQUIRE_DEVICE() \
  if (!have_device()) SKIP("no CUDA device: attention GPU tests skipped");

class CudaDevice : public Device {
 public:
  void* alloc(size_t bytes) override {
    void* p = nullptr;
    CUDA_REQUIRE(cudaMalloc(&p, bytes));
    return p;
  }
  void release(void* p) override { cudaFree(p); }
  void upload(void* dst, const void* src, size_t bytes) override {
    CUDA_REQUIRE(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
  }
  void download(void* dst, const void* src, size_t bytes) override {
    CUDA_REQUIRE(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
  }
  void fill(void* dst, uint8_t byte, size_t bytes) override { CUDA_REQUIRE(cudaMemset(dst, byte, bytes)); }
  KernelStatus run(const ka::Params& p, const ka::DeviceArgs& a) override {
    const KernelStatus s = ka::gated_attention(p, a);
    if (!s.ok()) return s;
    const cudaError_t e = cudaDeviceSynchronize();
    if (e != cudaSuccess) {
      return voltserve::kernels::kernel_error(KernelCode::kCudaError, cudaGetErrorString(e), __FILE__, __LINE__,
                                              static_cast<int>(e));
    }
    return s;
  }
};

}  // namespace

TEST_CASE("attention gpu: the emulator's cases", "[gpu]") {
  REQUIRE_DEVICE();
  CudaDevice dev;
  for (const CaseSpec& c : shared_cases()) run_case(dev, c);
}

TEST_CASE("attention gpu: 27B shape, 1..16 verify rows after a 37-token context, each equal to plain decoding", "[gpu]") {
  REQUIRE_DEVICE();
  CudaDevice dev;
  for (int32_t n = 1; n <= 16; ++n) {
    CaseSpec c = make_case("verify", shape_27b(), {{37, n}}, n % 2 ? PageOrder::kDescending : PageOrder::kRandom,
                           n % 5 == 0 ? DType::kF32 : DType::kF16);
    c.seed = 2000 + static_cast<uint64_t>(n);
    c.sequential = true;
    run_case(dev, c);
  }
  CaseSpec first = make_case("first-token", shape_27b(), {{0, 1}, {0, 16}}, PageOrder::kRandom, DType::kF32);
  first.seed = 2100;
  run_case(dev, first);
}

TEST_CASE("attention gpu: long contexts (split context) at 3000 and 17000 positions", "[gpu]") {
  REQUIRE_DEVICE();
  CudaDevice dev;
  // 3000 positions computed by a first call of the op (a 3-sequence prefill), then decode / verify rows on top.
  CaseSpec c3 = make_case("long", shape_27b(), {{2999, 1}, {2996, 4}, {2984, 16}}, PageOrder::kRandom);
  c3.invariance = true;
  c3.sequential = true;
  c3.seed = 2200;
  run_case(dev, c3);
  // 17000 positions of random fp16 keys and values (the reference's O(n^2) prefill would take minutes).
  CaseSpec c17 = make_case("long", shape_27b(), {{16999, 1, Fill::kDirect}, {16996, 4, Fill::kDirect},
                                                 {16984, 16, Fill::kDirect}}, PageOrder::kDescending, DType::kF32);
  c17.invariance = true;
  c17.sequential = true;
  c17.seed = 2201;
  run_case(dev, c17);
  // The tiny shape through a real 17000-row prefill first.
  CaseSpec t17 = make_case("long", shape_tiny(16), {{16999, 1}, {16990, 10}}, PageOrder::kRandom);
  t17.seed = 2202;
  run_case(dev, t17);
}

TEST_CASE("attention gpu: prefill chunks of 17, 64, 200 and 2048 rows with and without context", "[gpu]") {
  REQUIRE_DEVICE();
  CudaDevice dev;
  uint64_t seed = 2300;
  for (int32_t n : {17, 64, 200, 2048}) {
    for (int32_t past : {0, n == 2048 ? 500 : 100}) {
      CaseSpec c = make_case("prefill", shape_27b(), {{past, n}}, past ? PageOrder::kRandom : PageOrder::kAscending,
                             n == 64 ? DType::kF32 : DType::kF16);
      c.seed = seed++;
      run_case(dev, c);
    }
  }
  for (int32_t past : {0, 700}) {
    CaseSpec c = make_case("prefill", shape_tiny(8), {{past, 2048}}, PageOrder::kDescending);
    c.seed = seed++;
    run_case(dev, c);
  }
}

TEST_CASE("attention gpu: batches mixing decode, verify and prefill; batch invariance", "[gpu]") {
  REQUIRE_DEVICE();
  CudaDevice dev;
  // Eight decode sequences at 4k context (the batch-8 decode shape), each alone must give the same bits.
  std::vector<SeqSpec> b8;
  for (int i = 0; i < 8; ++i) b8.push_back({4095 - 37 * i, 1, Fill::kDirect});
  CaseSpec c8 = make_case("decode-batch8", shape_27b(), b8, PageOrder::kRandom);
  c8.invariance = true;
  c8.seed = 2400;
  run_case(dev, c8);
  // Decode and verify rows at long and short contexts, padding entries, prefill with and without context, row gaps,
  // padded strides and bounds above the step's (as a captured graph would pass them).
  CaseSpec mix = make_case("mixed", shape_27b(),
                           {{3000, 1, Fill::kDirect}, {0, 0}, {5000, 5, Fill::kDirect}, {17000, 16, Fill::kDirect},
                            {0, 33}, {0, 0}, {200, 64}, {12, 1}, {40, 16}},
                           PageOrder::kRandom, DType::kF32);
  mix.row_gap = 3;
  mix.extra_rows = 7;
  mix.extra_seq_tokens = 10;
  mix.extra_context = 5000;
  mix.stride_pad = 5;
  mix.invariance = true;
  mix.sequential = true;
  mix.seed = 2401;
  run_case(dev, mix);
  CaseSpec tmix = make_case("mixed", shape_tiny(16),
                            {{1, 1}, {4500, 3, Fill::kDirect}, {0, 300}, {77, 16}, {0, 0}, {9, 17}},
                            PageOrder::kDescending);
  tmix.invariance = true;
  tmix.row_gap = 1;
  tmix.seed = 2402;
  run_case(dev, tmix);
}

TEST_CASE("attention gpu rejects bad arguments with a status", "[gpu]") {
  REQUIRE_DEVICE();
  CudaDevice dev;
  check_bad_arguments(dev);
}

TEST_CASE("attention fp8 KV pages on the GPU match the reference", "[gpu]") {
  REQUIRE_DEVICE();
  CudaDevice dev;
  for (const Fp8Case& c : fp8_cases(/*large=*/true)) run_fp8_case(dev, c);
}
