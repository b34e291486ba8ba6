// The per-element math of the elementwise kernels (elementwise.cu) as host/device helpers, and the host's launch
// plans: vector width (16-byte access only where every row start is aligned for it) and how a row is cut into
// column blocks. CUDA-free; tests/kernels/elementwise_plan_test.cpp checks them on the CPU against the reference
// (elementwise_ref.cpp), tests/kernels/elementwise_gpu_test.cpp the kernels.
#pragma once

#include <math.h>

#include <cstdint>

#include "common/host_device.h"
#include "elementwise/elementwise.h"

namespace voltserve::kernels::elementwise {

// silu(g) * u = g / (1 + exp(-g)) * u in fp32, the reference's expression and order (exp(-g) = inf for g < -88
// gives -0 * u, as on the host).
VS_HD float silu_mul(float g, float u) { return g / (1.0f + expf(-g)) * u; }
// The table row embed reads for id (EmbedArgs): the map's entry when there is a map, row 0 for an id outside it.
VS_HD int32_t embed_row(int32_t id, const int32_t* id_map, int32_t n_map) {
  if (id < 0 || (id_map != nullptr && id >= n_map)) return 0;
  return id_map != nullptr ? id_map[id] : id;
}

inline constexpr int kThreads = 256;  // threads per block
inline constexpr int kIters = 4;      // units per thread: a block covers kThreads * kIters units of a row

// A launch over n_rows rows: each row cut into col_blocks blocks of kThreads * kIters units of `vec` elements.
struct RowPlan {
  int vec = 1;              // elements per unit (16-byte units where aligned: 4 fp32 or 8 fp16 elements)
  int64_t col_blocks = 0;   // blocks per row
  int64_t blocks = 0;       // n_rows * col_blocks; 0 when that exceeds the grid limit (2^31 - 1)
};

inline RowPlan row_plan(int64_t n_rows, int64_t n, int vec) {
  RowPlan p;
  p.vec = vec;
  const int64_t units = (n + vec - 1) / vec;
  p.col_blocks = (units + kThreads * kIters - 1) / (kThreads * kIters);
  p.blocks = n_rows * p.col_blocks;
  if (p.blocks > int64_t{0x7FFFFFFF}) p.blocks = 0;
  return p;
}

// First element of unit `it` of thread `tid` in column block `cb` (the kernels' indexing, shared with the tests).
VS_HD int64_t unit_first_element(int64_t cb, int it, int tid, int vec) {
  return ((cb * kIters + it) * kThreads + tid) * static_cast<int64_t>(vec);
}

inline bool aligned_to(const void* p, uintptr_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

// Embedding rows: 16-byte table loads (4 fp32 or 8 fp16 / bf16 values) when hidden and every row start allow them.
inline RowPlan embed_plan(const EmbedArgs& a) {
  const int per16 = a.table_dtype == DType::kF32 ? 4 : 8;
  const bool vec = a.hidden % per16 == 0 && aligned_to(a.table, 16) && aligned_to(a.out, 16) && a.out_stride % 4 == 0;
  return row_plan(a.n_rows, a.hidden, vec ? per16 : 1);
}

// SwiGLU: 4 floats per unit (fp16 out: 8-byte stores of 4 halves) when n and every row start allow them.
inline RowPlan swiglu_plan(const SwigluArgs& a) {
  const bool f16 = a.out_dtype == DType::kF16;
  const bool vec = a.n % 4 == 0 && aligned_to(a.gate, 16) && a.gate_stride % 4 == 0 && aligned_to(a.up, 16) &&
                   a.up_stride % 4 == 0 && aligned_to(a.out, f16 ? 8 : 16) && a.out_stride % 4 == 0;
  return row_plan(a.n_rows, a.n, vec ? 4 : 1);
}

// Row gather: 16-byte units when the row's bytes and every row start allow them, else single elements.
inline RowPlan gather_plan(const GatherArgs& a) {
  const int64_t elem = static_cast<int64_t>(dtype_bytes(a.dtype));
  const int per16 = static_cast<int>(16 / elem);
  const bool vec = a.n % per16 == 0 && aligned_to(a.x, 16) && aligned_to(a.out, 16) && (a.x_stride * elem) % 16 == 0 &&
                   (a.out_stride * elem) % 16 == 0;
  return row_plan(a.n_rows, a.n, vec ? per16 : 1);
}

}  // namespace voltserve::kernels::elementwise
