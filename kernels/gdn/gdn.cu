// Gated DeltaNet device form (gdn.h): gdn_forward and commit launch the kernels whose bodies are in gdn_blocks.h,
// after the host checks of gdn_plan.cpp. One portable implementation (fp32 FMA, warp shuffles; no tensor cores,
// cp.async, ldmatrix or bf16), so every family from sm_70 runs it. Tested against gdn_ref.cpp by
// tests/kernels/gdn_gpu_test.cpp (and, on the CPU, the same bodies by tests/kernels/gdn_blocks_test.cpp).
//
// Kernels of one call, in stream order (grids in gdn_plan.h):
//   conv        (conv head, 16-token tile, seq) x 128        every sequence
//   recurrent   (v-head, seq) x 4 head_v_dim                 sequences run token by token (decode, verify, short)
//   prep        (chunk, v-head, seq) x 256                   chunked sequences: intra-chunk WY factors
//   state_pass  (16 / 32 value columns, v-head, seq) x 8 cols chunked sequences: the sequential pass over chunks
//   norm        (token, seq) x 256                           chunked sequences: gated RMSNorm
// The last three are launched only when a chunked sequence is possible (kChunked, or kAuto with
// max_seq_tokens > 64), so decode and verify steps are two launches.
//
// Memory traffic per call on the 27B layer (16 k-heads, 48 v-heads, 128 x 128, K = 4), per sequence of T tokens:
//   recurrent state   2 x 3 MiB (read once, written once, whatever T)  — the decode cost
//   checkpoints       T x (3 MiB + 120 KiB) written (verify items only)
//   conv state        2 x 120 KiB; inputs T x 64 KiB (qkv, z, b, a); out T x 12 KiB (fp16)
//   workspace         T x 80 KiB (conv outputs written, read back); chunked: T x 96 KiB of W / U / Qe / P written
//                     and read (W, Qe, K re-read from L2 by each of the head's 4 or 8 column blocks)
// Decode at batch 1 runs 48 recurrent blocks (one per v-head; 512 threads, 1 per SM): each streams its 64 KiB in
// one round of loads, so the call is latency-bound (~3 us expected for ~1.4 us of bytes at 4.5 TB/s); at batch 8
// the 384 blocks keep the memory system busy (expected ~80% of the read ceiling for the recurrent kernel).
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "common/pdl.cuh"
#include "gdn/gdn.h"
#include "gdn/gdn_blocks.h"
#include "gdn/gdn_plan.h"

namespace voltserve::kernels::gdn {
namespace {

// The context the block bodies are written against (gdn_blocks.h): CUDA threads of one block.
struct DeviceCtx {
  int32_t tid;
  int32_t nthreads;
  __device__ void sync() const { __syncthreads(); }
  __device__ float shfl_xor(float v, int m) const { return __shfl_xor_sync(0xffffffffu, v, m); }
  __device__ float shfl(float v, int src) const { return __shfl_sync(0xffffffffu, v, src); }
  __device__ void store_f16(uint16_t* p, float v) const { *reinterpret_cast<__half*>(p) = __float2half_rn(v); }
  // Waits for the previous kernel in the stream (programmatic dependent launch; returns at once without it).
  __device__ void dep_wait() const { pdl_wait(); }
};

// Every kernel lets the next one be scheduled at once; all but the recurrent one wait for the previous kernel before
// anything else (the recurrent block loads its state first and waits itself: recurrent_block).
__device__ DeviceCtx this_block(bool wait = true) {
  pdl_launch_dependents();
  if (wait) pdl_wait();
  return DeviceCtx{static_cast<int32_t>(threadIdx.x), static_cast<int32_t>(blockDim.x)};
}

// Dynamic shared memory, 16-byte aligned for the float4 tiles.
extern __shared__ float4 gdn_smem[];

__global__ void __launch_bounds__(kConvThreads) gdn_conv_kernel(KernelArgs a) {
  DeviceCtx ctx = this_block();
  conv_block(ctx, a, static_cast<int32_t>(blockIdx.x), static_cast<int32_t>(blockIdx.y),
             static_cast<int32_t>(blockIdx.z), reinterpret_cast<float*>(gdn_smem));
}

__global__ void __launch_bounds__(4 * kMaxHeadDim) gdn_recurrent_kernel(KernelArgs a) {
  DeviceCtx ctx = this_block(false);
  recurrent_block(ctx, a, static_cast<int32_t>(blockIdx.x), static_cast<int32_t>(blockIdx.y),
                  reinterpret_cast<float*>(gdn_smem));
}

__global__ void __launch_bounds__(kPrepThreads) gdn_prep_kernel(KernelArgs a) {
  DeviceCtx ctx = this_block();
  chunk_prep_block(ctx, a, static_cast<int32_t>(blockIdx.x), static_cast<int32_t>(blockIdx.y),
                   static_cast<int32_t>(blockIdx.z), reinterpret_cast<float*>(gdn_smem));
}

// Both widths bounded at 256 threads and 2 blocks per SM: with a plain bound ptxas (12.9 for sm_70, 13.0 for sm_80)
// held both near 70-80 registers and spilled a few bytes; with this one they take ~98 and spill nothing.
template <int32_t kCols>
__global__ void __launch_bounds__(pass_threads(32), 2) gdn_state_pass_kernel(KernelArgs a) {
  DeviceCtx ctx = this_block();
  state_pass_block<kCols>(ctx, a, static_cast<int32_t>(blockIdx.x), static_cast<int32_t>(blockIdx.y),
                          static_cast<int32_t>(blockIdx.z), reinterpret_cast<float*>(gdn_smem));
}

__global__ void __launch_bounds__(kNormThreads) gdn_norm_kernel(KernelArgs a) {
  DeviceCtx ctx = this_block();
  chunked_norm_block(ctx, a, static_cast<int32_t>(blockIdx.x), static_cast<int32_t>(blockIdx.y));
}

__global__ void __launch_bounds__(kCommitThreads) gdn_commit_kernel(CommitArgs a) {
  DeviceCtx ctx = this_block();
  commit_block(ctx, a, static_cast<int32_t>(blockIdx.x), static_cast<int32_t>(blockIdx.y),
               static_cast<int32_t>(blockIdx.z));
}

dim3 to_dim3(const Dim3& d) { return dim3(d.x, d.y, d.z); }

template <class Args>
KernelStatus run(void (*kernel)(Args), const Launch& l, const Args& args, cudaStream_t stream, bool pdl = false) {
  if (!l.run) return KernelStatus::Ok();
  // Above 48 KiB of dynamic shared memory a kernel must opt in (the 32-column state pass: 57 KiB, within Volta's
  // 96 KiB).
  if (l.smem_bytes > 48 * 1024) {
    VS_CUDA_TRY(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(l.smem_bytes)));
  }
  VS_CUDA_TRY(launch_kernel(kernel, to_dim3(l.grid), dim3(l.threads), l.smem_bytes, stream, pdl, args));
  return KernelStatus::Ok();
}

}  // namespace

KernelStatus launch_stage(const ForwardPlan& plan, Stage stage) {
  auto stream = static_cast<cudaStream_t>(plan.stream);
  switch (stage) {
    case Stage::kConv:
      return run(&gdn_conv_kernel, plan.conv, plan.k, stream, plan.pdl);
    case Stage::kRecurrent:
      return run(&gdn_recurrent_kernel, plan.recurrent, plan.k, stream, plan.pdl);
    case Stage::kPrep:
      return run(&gdn_prep_kernel, plan.prep, plan.k, stream, plan.pdl);
    case Stage::kStatePass:
      if (plan.pass_cols == 32) return run(&gdn_state_pass_kernel<32>, plan.state_pass, plan.k, stream, plan.pdl);
      return run(&gdn_state_pass_kernel<16>, plan.state_pass, plan.k, stream, plan.pdl);
    case Stage::kNorm:
      return run(&gdn_norm_kernel, plan.norm, plan.k, stream, plan.pdl);
  }
  return VS_KERNEL_FAIL(kBadArgument, "gdn: unknown stage");
}

KernelStatus gdn_forward(const Params& p, const DeviceArgs& a) {
  PlanOptions opt;
  int dev = 0;
  VS_CUDA_TRY(cudaGetDevice(&dev));
  VS_CUDA_TRY(cudaDeviceGetAttribute(&opt.sm_count, cudaDevAttrMultiProcessorCount, dev));
  ForwardPlan plan;
  if (KernelStatus st = plan_forward(p, a, &plan, opt); !st.ok()) return st;
  for (Stage stage : kStages) {
    if (KernelStatus st = launch_stage(plan, stage); !st.ok()) return st;
  }
  return KernelStatus::Ok();
}

KernelStatus commit(const Params& p, const State* layers, int32_t n_layers, const Commit* commits, int32_t n_commits,
                    void* stream) {
  if (n_layers < 0) return VS_KERNEL_FAIL(kBadShape, "gdn commit: n_layers must be >= 0");
  for (int32_t l0 = 0; l0 < n_layers; l0 += kMaxCommitLayers) {
    CommitPlan plan;
    const int32_t n = n_layers - l0 < kMaxCommitLayers ? n_layers - l0 : kMaxCommitLayers;
    if (KernelStatus st = plan_commit(p, layers + l0, n, commits, n_commits, stream, &plan); !st.ok()) return st;
    const KernelStatus st = run(&gdn_commit_kernel, plan.copy, plan.k, static_cast<cudaStream_t>(plan.stream));
    if (!st.ok()) return st;
  }
  return KernelStatus::Ok();
}

}  // namespace voltserve::kernels::gdn
