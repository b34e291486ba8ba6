// CPU reference of kernels/elementwise (see elementwise.h): embedding lookup, SwiGLU, row gather.
#include <cmath>
#include <cstring>

#include "common/fp_formats.h"
#include "elementwise/elementwise.h"
#include "elementwise/elementwise_plan.h"

namespace voltserve::kernels::elementwise {

void embed_ref(const EmbedArgs& a) {
  const auto* table = static_cast<const uint8_t*>(a.table);
  const size_t elem = dtype_bytes(a.table_dtype);
  for (int32_t r = 0; r < a.n_rows; ++r) {
    const int32_t id = embed_row(a.ids[r], a.id_map, a.n_map);
    const uint8_t* src = table + static_cast<size_t>(id) * static_cast<size_t>(a.hidden) * elem;
    float* dst = a.out + static_cast<int64_t>(r) * a.out_stride;
    for (int64_t i = 0; i < a.hidden; ++i) {
      if (a.table_dtype == DType::kF32) {
        std::memcpy(dst + i, src + 4 * i, 4);
      } else {
        uint16_t h;
        std::memcpy(&h, src + 2 * i, 2);
        dst[i] = a.table_dtype == DType::kBF16 ? fp::bf16_to_float(h) : fp::f16_to_float(h);
      }
    }
  }
}

void swiglu_ref(const SwigluArgs& a, const HostParallel* parallel) {
  auto* out = static_cast<float*>(a.out);
  run_parallel(parallel, a.n_rows, 4, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* g = a.gate + r * a.gate_stride;
      const float* u = a.up + r * a.up_stride;
      float* o = out + r * a.out_stride;
      for (int32_t j = 0; j < a.n; ++j) o[j] = g[j] / (1.0f + std::exp(-g[j])) * u[j];
    }
  });
}

void gather_rows_ref(const GatherArgs& a) {
  const size_t elem = dtype_bytes(a.dtype);
  const auto* x = static_cast<const uint8_t*>(a.x);
  auto* out = static_cast<uint8_t*>(a.out);
  for (int32_t r = 0; r < a.n_rows; ++r) {
    std::memcpy(out + static_cast<size_t>(r) * static_cast<size_t>(a.out_stride) * elem,
                x + static_cast<size_t>(a.rows[r]) * static_cast<size_t>(a.x_stride) * elem,
                static_cast<size_t>(a.n) * elem);
  }
}

}  // namespace voltserve::kernels::elementwise
