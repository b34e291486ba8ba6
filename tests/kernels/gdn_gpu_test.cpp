// GPU Gated DeltaNet kernels (gdn_forward, commit) against the CPU reference gdn_ref / commit_ref through the cases
// of gdn_cases.h (the same cases run on the CPU emulator in gdn_blocks_test.cpp): the 27B shapes and the tiny fixture
// shapes; decode, segments of 2..16 tokens, 17 / 64 / 65 / 200 / 2048 tokens in every mode, long memory, calls that
// continue earlier states, mixed batches with verify items (checkpoints) and commits, batch composition bit for bit,
// CUDA-graph capture and replay, bad arguments. One line per check: `gdn <shape> <case> what=<x> err=<e> ok|FAIL`.
// Skips itself when no CUDA device is present.
#include <cuda_runtime.h>

#include <catch2/catch_test_macros.hpp>
#include <cstdio>
#include <cstring>
#include <vector>

#include "gdn_cases.h"
#include "kernels/gdn/gdn.h"
#include "kernels/gdn/gdn_plan.h"

using namespace voltserve::kernels;
using namespace voltserve::kernels::gdn;
namespace cases = voltserve::test::gdn;

namespace {

#define CUDA_REQUIRE(call)                                                                    \
  do {                                                                                        \
    const cudaError_t e_ = (call);                                                            \
    INFO(#call << " -> " << cudaGetErrorString(e_) << " at " << __FILE__ << ":" << __LINE__); \
    REQUIRE(e_ == cudaSuccess);                                                               \
  } while (0)

bool have_device() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
}

#define REQUIRE_DEVICE() \
  if (!have_device()) SKIP("no CUDA device: gdn GPU tests skipped");

class DeviceBackend final : public cases::Backend {
 public:
  ~DeviceBackend() override {
    for (void* p : blocks_) cudaFree(p);
  }
  void* alloc(size_t bytes) override {
    void* p = nullptr;
    CUDA_REQUIRE(cudaMalloc(&p, bytes));
    blocks_.push_back(p);
    return p;
  }
  void upload(void* dst, const void* src, size_t bytes) override {
    CUDA_REQUIRE(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
  }
  void download(void* dst, const void* src, size_t bytes) override {
    CUDA_REQUIRE(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
  }
  void fill(void* dst, uint8_t byte, size_t bytes) override { CUDA_REQUIRE(cudaMemset(dst, byte, bytes)); }
  KernelStatus forward(const Params& p, const DeviceArgs& a) override {
    if (pass_cols != 0) {  // a forced state-pass width: the plan and its stages, as gdn_forward launches them
      ForwardPlan plan;
      PlanOptions opt;
      opt.pass_cols = pass_cols;
      if (KernelStatus st = plan_forward(p, a, &plan, opt); !st.ok()) return st;
      for (Stage s : kStages) {
        if (KernelStatus st = launch_stage(plan, s); !st.ok()) return st;
      }
      return synced();
    }
    const KernelStatus st = gdn_forward(p, a);
    if (!st.ok()) return st;
    return synced();
  }
  int32_t pass_cols = 0;  // 0: gdn_forward's own pick
  KernelStatus commit(const Params& p, const State* layers, int32_t n_layers, const Commit* c, int32_t n) override {
    const KernelStatus st = gdn::commit(p, layers, n_layers, c, n, nullptr);
    if (!st.ok()) return st;
    return synced();
  }

 private:
  static KernelStatus synced() {
    const cudaError_t e = cudaDeviceSynchronize();
    if (e != cudaSuccess) {
      std::printf("gdn gpu: %s\n", cudaGetErrorString(e));
      return kernel_error(KernelCode::kCudaError, "cudaDeviceSynchronize", __FILE__, __LINE__, static_cast<int>(e));
    }
    return KernelStatus::Ok();
  }
  std::vector<void*> blocks_;
};

// Each case on its own backend, so that its device buffers are freed before the next one.
void run_all(const cases::Shape& sh, uint64_t seed) {
  for (const auto& c : cases::recurrent_cases(sh.p, seed)) {
    DeviceBackend be;
    cases::run_case(be, sh.name, c);
  }
  for (const auto& c : cases::chunked_cases(sh.p, seed + 100, true)) {
    DeviceBackend be;
    cases::run_case(be, sh.name, c);
  }
  for (const auto& c : cases::mixed_cases(sh.p, seed + 200, true)) {
    DeviceBackend be;
    cases::run_case(be, sh.name, c);
    if (c.n_calls == 1) cases::run_batch_invariance(be, sh.name, c);
  }
}

}  // namespace

TEST_CASE("gdn gpu 27B shapes: decode, verify, segments, chunked prefill, mixed batches", "[gpu]") {
  REQUIRE_DEVICE();
  run_all(cases::shape_27b(), 9000);
}

TEST_CASE("gdn gpu commit: a model's layers in one launch, and above a launch's layers", "[gpu]") {
  REQUIRE_DEVICE();
  DeviceBackend be;
  cases::run_commit_layers(be, "27b", cases::shape_27b().p, 48, 9500);
  uint64_t seed = 9600;
  for (const cases::Shape& sh : cases::tiny_shapes()) {
    for (int32_t n_layers : {1, 3, gdn::kMaxCommitLayers + 2}) {
      cases::run_commit_layers(be, sh.name, sh.p, n_layers, seed++);
    }
  }
}

TEST_CASE("gdn gpu tiny fixture and awkward shapes", "[gpu]") {
  REQUIRE_DEVICE();
  uint64_t seed = 20000;
  for (const cases::Shape& sh : cases::tiny_shapes()) {
    run_all(sh, seed);
    seed += 1000;
  }
}

// Both state-pass widths (gdn_forward picks 16 for few sequences, 32 for many) on the 27B shape and a fixture.
TEST_CASE("gdn gpu state pass at 16 and 32 value columns per block", "[gpu]") {
  REQUIRE_DEVICE();
  for (const cases::Shape& sh : {cases::shape_27b(), cases::tiny_shapes()[0], cases::tiny_shapes()[5]}) {
    for (int32_t cols : {16, 32}) {
      for (auto c : cases::chunked_cases(sh.p, 40000 + static_cast<uint64_t>(cols), true)) {
        if (c.mode == Mode::kSequential) continue;
        c.name += " pass_cols=" + std::to_string(cols);
        DeviceBackend be;
        be.pass_cols = cols;
        cases::run_case(be, sh.name, c);
      }
    }
  }
}

// A captured graph of gdn_forward (the engine replays one per step shape) gives the bits of a direct call, and
// replays correctly twice in a row (the state advances: the second replay continues the first).
TEST_CASE("gdn gpu forward under CUDA-graph capture and replay", "[gpu]") {
  REQUIRE_DEVICE();
  DeviceBackend be;
  const cases::Shape sh = cases::shape_27b();
  for (Mode mode : {Mode::kAuto, Mode::kChunked}) {
    cases::CaseSpec c;
    c.name = "graph";
    c.p = sh.p;
    c.mode = mode;
    c.seqs = {{1, 0}, {100, 1}, {4, 2, 0}};
    c.max_ckpt_tokens = 4;
    c.n_ckpt_sets = 1;
    c.seed = 31;
    const std::string label = cases::case_label(sh.name, c);
    voltserve::test::SplitMix rng(c.seed);
    cases::CaseData d;
    cases::setup_case(be, c, d, rng);
    const cases::CallInputs in = cases::make_inputs(d, rng);
    d.d_qkv.upload(in.qkv.data());
    d.d_z.upload(in.z.data());
    d.d_b.upload(in.b.data());
    d.d_a.upload(in.a.data());
    cudaStream_t s;
    CUDA_REQUIRE(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    DeviceArgs a = cases::device_args(d, c.mode, c.out_dtype, static_cast<int32_t>(d.seqs.size()),
                                      static_cast<const SeqDesc*>(d.d_seqs.ptr()), d.max_seq_tokens);
    a.stream = s;
    // Direct: two calls from the starting state (as the device holds it, whatever setup_case left there).
    const std::vector<uint8_t> start_rec = d.d_rec_state.download();
    const std::vector<uint8_t> start_conv = d.d_conv_state.download();
    std::vector<uint8_t> direct_out[2], direct_state[2];
    for (int i = 0; i < 2; ++i) {
      d.d_out.fill(cases::kPoisonByte);  // as before each replay below: rows no sequence writes stay poison
      REQUIRE(gdn_forward(sh.p, a).ok());
      CUDA_REQUIRE(cudaStreamSynchronize(s));
      direct_out[i] = d.d_out.download();
      direct_state[i] = d.d_rec_state.download();
    }
    // Captured: reset the state, capture once, replay twice.
    d.d_rec_state.upload(start_rec.data());
    d.d_conv_state.upload(start_conv.data());
    cudaGraph_t g;
    cudaGraphExec_t ge;
    CUDA_REQUIRE(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    const KernelStatus st = gdn_forward(sh.p, a);
    cudaGraph_t captured = nullptr;
    const cudaError_t end = cudaStreamEndCapture(s, &captured);
    INFO("capture status " << st.message << " at " << st.file << ":" << st.line << " end " << cudaGetErrorString(end));
    REQUIRE(st.ok());
    REQUIRE(end == cudaSuccess);
    g = captured;
    CUDA_REQUIRE(cudaGraphInstantiate(&ge, g, 0));
    bool same = true;
    for (int i = 0; i < 2; ++i) {
      d.d_out.fill(cases::kPoisonByte);
      CUDA_REQUIRE(cudaGraphLaunch(ge, s));
      CUDA_REQUIRE(cudaStreamSynchronize(s));
      same &= d.d_out.download() == direct_out[i] && d.d_rec_state.download() == direct_state[i];
    }
    cases::report_flag(label, "graph-replay-bitwise", same);
    CHECK(same);
    CUDA_REQUIRE(cudaGraphExecDestroy(ge));
    CUDA_REQUIRE(cudaGraphDestroy(g));
    CUDA_REQUIRE(cudaStreamDestroy(s));
  }
}

TEST_CASE("gdn gpu rejects bad arguments with a status", "[gpu]") {
  REQUIRE_DEVICE();
  const Params p = cases::shape_27b().p;
  DeviceArgs a;
  CHECK(gdn_forward(p, a).ok());  // n_seqs == 0: nothing to do
  a.n_seqs = 1;
  a.n_rows = 1;
  a.max_seq_tokens = 1;
  CHECK(gdn_forward(p, a).code == KernelCode::kBadArgument);  // null pointers
  Params bad = p;
  bad.head_k_dim = 96 + 4;
  CHECK(gdn_forward(bad, a).code == KernelCode::kUnsupported);
  const State none{};
  CHECK(commit(p, &none, 1, nullptr, 1, nullptr).code == KernelCode::kBadArgument);
  CHECK(commit(p, &none, 1, nullptr, 0, nullptr).ok());
  CHECK(commit(p, nullptr, 0, nullptr, 1, nullptr).ok());  // no layers: nothing to commit
  CHECK(commit(p, &none, -1, nullptr, 1, nullptr).code == KernelCode::kBadShape);
}
