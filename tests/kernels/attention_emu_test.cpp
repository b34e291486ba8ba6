// CPU test of the attention device code: the kernels of kernels/attention/attention_kernels.cuh, run by the SIMT
// emulator (simt_emu.h) through the same launch plan as attention.cu, checked by the shared harness
// (attention_harness.h) against the reference on the cases the GPU test also runs first. Catches indexing, masking,
// shuffle and barrier mistakes on machines without a GPU; says nothing about speed or the GPU memory model.
#include "simt_emu.h"  // first: the CUDA vocabulary the kernel header uses

#include "kernels/attention/attention_kernels.cuh"

#include <catch2/catch_test_macros.hpp>

#include <cstdlib>
#include <cstring>

#include "attention_fp8_harness.h"
#include "attention_harness.h"

namespace {

namespace kd = voltserve::kernels::attention::detail;
using voltserve::kernels::KernelStatus;
using namespace voltserve::test::attn;

dim3 to_dim3(const kd::Dim3& d) { return dim3{d.x, d.y, d.z}; }

KernelStatus emu_error(const char* what) {
  return voltserve::kernels::kernel_error(voltserve::kernels::KernelCode::kCudaError, what, __FILE__, __LINE__);
}

template <int DPL, class C>
KernelStatus emu_launch(const kd::LaunchPlan& plan, uint64_t seed) {
  const kd::KernelArgs& a = plan.args;
  if (const char* e = simt_emu::launch(to_dim3(plan.prep_grid), dim3{kd::kPrepThreads, 1, 1},
                                       [&a] { kd::attention_prep_kernel<DPL, C>(a); }, seed)) {
    return emu_error(e);
  }
  if (const char* e = simt_emu::launch(to_dim3(plan.decode_grid), dim3{kd::kAttendThreads, 1, 1},
                                       [&a] { kd::attention_decode_split_kernel<DPL, C>(a); }, seed + 1)) {
    return emu_error(e);
  }
  if (const char* e = simt_emu::launch(to_dim3(plan.combine_grid), dim3{kd::kCombineThreads, 1, 1},
                                       [&a] { kd::attention_combine_kernel<DPL>(a); }, seed + 2)) {
    return emu_error(e);
  }
  if (plan.run_prefill) {
    if (const char* e = simt_emu::launch(to_dim3(plan.prefill_grid), dim3{kd::kAttendThreads, 1, 1},
                                         [&a] { kd::attention_prefill_kernel<DPL, C>(a); }, seed + 3)) {
      return emu_error(e);
    }
  }
  return KernelStatus::Ok();
}

class EmuDevice : public Device {
 public:
  void* alloc(size_t bytes) override { return std::aligned_alloc(256, (bytes + 255) / 256 * 256); }
  void release(void* p) override { std::free(p); }
  void upload(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
  void download(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
  void fill(void* dst, uint8_t byte, size_t bytes) override { std::memset(dst, byte, bytes); }
  KernelStatus run(const ka::Params& p, const ka::DeviceArgs& a) override {
    kd::LaunchPlan plan;
    if (KernelStatus s = kd::make_plan(p, a, &plan); !s.ok()) return s;
    if (plan.empty) return KernelStatus::Ok();
    ++runs_;
    if (a.cache_dtype == voltserve::DType::kF8E4M3) return launch<kd::CacheF8>(p, plan);
    return launch<kd::CacheF16>(p, plan);
  }

 private:
  template <class C>
  KernelStatus launch(const ka::Params& p, const kd::LaunchPlan& plan) {
    switch (p.head_dim / 32) {  // the head dims the shared cases use
      case 1: return emu_launch<1, C>(plan, runs_ * 7);
      case 2: return emu_launch<2, C>(plan, runs_ * 7);
      case 3: return emu_launch<3, C>(plan, runs_ * 7);
      case 8: return emu_launch<8, C>(plan, runs_ * 7);
      default: return emu_error("head_dim not instantiated in the emulator test");
    }
  }
  uint64_t runs_ = 0;
};

}  // namespace

TEST_CASE("attention device code on the SIMT emulator matches the reference", "[unit]") {
  EmuDevice dev;
  for (const CaseSpec& c : shared_cases()) run_case(dev, c);
}

TEST_CASE("attention device form rejects bad arguments with a status (emulator)", "[unit]") {
  EmuDevice dev;
  check_bad_arguments(dev);
}

TEST_CASE("attention fp8 device code on the SIMT emulator matches the reference", "[unit]") {
  EmuDevice dev;
  for (const Fp8Case& c : fp8_cases(/*large=*/false)) run_fp8_case(dev, c);
}
