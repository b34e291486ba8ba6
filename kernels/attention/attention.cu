// gated_attention, device form: the host checks and the launch plan (attention_plan.cpp), then the four kernels of
// attention_kernels.cuh on the caller's stream, instantiated for head_dim = 32, 64, ..., 256 and an fp16 or e4m3 KV
// cache. One portable implementation (fp32 FMA; fp16 or e4m3 cache, decoded with integer operations) for every
// architecture from sm_70. Tested by
// tests/kernels/attention_gpu_test.cpp against attention_ref.cpp.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "attention/attention.h"
#include "common/pdl.cuh"
#include "attention/attention_kernels.cuh"
#include "attention/attention_plan.h"

namespace voltserve::kernels::attention {
namespace {

dim3 to_dim3(const detail::Dim3& d) { return dim3(d.x, d.y, d.z); }

template <int DPL, class C>
KernelStatus launch_attention(const detail::LaunchPlan& plan, cudaStream_t stream, bool pdl) {
  VS_CUDA_TRY(launch_kernel(&detail::attention_prep_kernel<DPL, C>, to_dim3(plan.prep_grid), dim3(detail::kPrepThreads),
                            0, stream, pdl, plan.args));
  VS_CUDA_TRY(launch_kernel(&detail::attention_decode_split_kernel<DPL, C>, to_dim3(plan.decode_grid),
                            dim3(detail::kAttendThreads), 0, stream, pdl, plan.args));
  VS_CUDA_TRY(launch_kernel(&detail::attention_combine_kernel<DPL>, to_dim3(plan.combine_grid),
                            dim3(detail::kCombineThreads), 0, stream, pdl, plan.args));
  if (plan.run_prefill) {
    VS_CUDA_TRY(launch_kernel(&detail::attention_prefill_kernel<DPL, C>, to_dim3(plan.prefill_grid),
                              dim3(detail::kAttendThreads), 0, stream, pdl, plan.args));
  }
  return KernelStatus::Ok();
}

template <class C>
KernelStatus launch_for_head_dim(int32_t head_dim, const detail::LaunchPlan& plan, cudaStream_t stream, bool pdl) {
  switch (head_dim / 32) {
    case 1: return launch_attention<1, C>(plan, stream, pdl);
    case 2: return launch_attention<2, C>(plan, stream, pdl);
    case 3: return launch_attention<3, C>(plan, stream, pdl);
    case 4: return launch_attention<4, C>(plan, stream, pdl);
    case 5: return launch_attention<5, C>(plan, stream, pdl);
    case 6: return launch_attention<6, C>(plan, stream, pdl);
    case 7: return launch_attention<7, C>(plan, stream, pdl);
    case 8: return launch_attention<8, C>(plan, stream, pdl);
    default: break;
  }
  return VS_KERNEL_FAIL(kBadShape, "gated_attention: head_dim must be a multiple of 32 in [32, 256]");
}

}  // namespace

KernelStatus gated_attention(const Params& p, const DeviceArgs& a) {
  detail::LaunchPlan plan;
  if (KernelStatus s = detail::make_plan(p, a, &plan); !s.ok()) return s;
  if (plan.empty) return KernelStatus::Ok();
  const auto stream = static_cast<cudaStream_t>(a.stream);
  // The instantiations: dims per lane = head_dim / 32 (make_plan admits multiples of 32 up to 256).
  if (a.cache_dtype == DType::kF8E4M3) return launch_for_head_dim<detail::CacheF8>(p.head_dim, plan, stream, a.pdl);
  return launch_for_head_dim<detail::CacheF16>(p.head_dim, plan, stream, a.pdl);
}

}  // namespace voltserve::kernels::attention
