// Row gathers and elementwise ops between the big kernels of a decoder step: the embedding lookup, SwiGLU (MODEL.md
// §2.4) and gathering the rows that need outputs. The references (elementwise_ref.cpp) are the CPU backend's;
// tests/kernels/elementwise_gpu_test.cpp checks the device forms against them (exact for the copies).
#pragma once

#include <cstdint>

#include "common/dtype.h"
#include "common/host_parallel.h"
#include "common/kernel_status.h"

namespace voltserve::kernels::elementwise {

// out[r, :] = float(table[row_of(ids[r]), :]) for r < n_rows. table [vocab, hidden] row-major, table_dtype kF32,
// kF16 or kBF16; out fp32 (the residual stream). row_of(i) is i, or id_map[i] with an id map (the ids are then
// indices into it: a draft vocabulary's sampled rows, model/mtp_head.h); an id < 0 (a row that sampled nothing) or
// >= n_map reads row 0. Ids and the map's entries are checked against vocab by the caller (the runner validates
// steps, MtpHead its draft vocabulary).
struct EmbedArgs {
  const void* table = nullptr;
  DType table_dtype = DType::kF32;
  int64_t hidden = 0;
  const int32_t* ids = nullptr;  // [n_rows]
  const int32_t* id_map = nullptr;  // [n_map] or null
  int32_t n_map = 0;
  int32_t n_rows = 0;
  float* out = nullptr;
  int64_t out_stride = 0;
  void* stream = nullptr;
};
void embed_ref(const EmbedArgs& a);
// Device forms (elementwise.cu): pointers aligned to their element size, row strides >= the row length; swiglu may
// write over its gate or up range (out == gate with equal strides, fp32).
KernelStatus embed(const EmbedArgs& a);

// out[r, j] = silu(gate[r, j]) * up[r, j], silu(x) = x / (1 + exp(-x)), in fp32; gate and up are usually two
// column ranges of one merged gate|up linear output.
struct SwigluArgs {
  const float* gate = nullptr;
  int64_t gate_stride = 0;
  const float* up = nullptr;
  int64_t up_stride = 0;
  void* out = nullptr;
  int64_t out_stride = 0;
  DType out_dtype = DType::kF32;  // reference: kF32; device: kF32 or kF16 (the down_proj input)
  int32_t n_rows = 0;
  int32_t n = 0;
  void* stream = nullptr;
  bool pdl = false;  // device form: programmatic dependent launch (sm_90+ only; kernels/common/pdl.cuh)
};
void swiglu_ref(const SwigluArgs& a, const HostParallel* parallel = nullptr);
KernelStatus swiglu(const SwigluArgs& a);

// out[r, :] = x[rows[r], :], n columns of dtype (kF32 or kF16; the same for x and out).
struct GatherArgs {
  const void* x = nullptr;
  int64_t x_stride = 0;
  const int32_t* rows = nullptr;  // [n_rows]
  void* out = nullptr;
  int64_t out_stride = 0;
  DType dtype = DType::kF32;
  int32_t n_rows = 0;
  int32_t n = 0;
  void* stream = nullptr;
  bool pdl = false;  // device form: programmatic dependent launch (sm_90+ only; kernels/common/pdl.cuh)
};
void gather_rows_ref(const GatherArgs& a);
KernelStatus gather_rows(const GatherArgs& a);

}  // namespace voltserve::kernels::elementwise
