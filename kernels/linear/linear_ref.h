// CUDA-free reference for the quantized linear layer over raw arrays in checkpoint order (the oracle the GPU
// kernels are tested against): exact dequantization and a multi-threaded fp32 y = x · W^T.
// Tested by tests/kernels/linear_ref_test.cpp against hand-computed values.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "common/dtype.h"
#include "linear/linear.h"

namespace voltserve::kernels {

// Weights in checkpoint order (host memory, e.g. a memory-mapped checkpoint). NVFP4: codes [n, k/2] (even k in
// the low nibble), scales [n, k/16] e4m3, global_scale multiplier. FP8: codes [n, k] e4m3, tensor_scale. Dense:
// codes [n, k] elements of dense_dtype (BF16, F16 or F32). All: optional channel_scales [n] multiplier.
struct HostWeightRef {
  WeightFormat format = WeightFormat::kNvfp4;
  int64_t n = 0;
  int64_t k = 0;
  const uint8_t* codes = nullptr;
  const uint8_t* scales = nullptr;
  float global_scale = 1.0f;
  float tensor_scale = 1.0f;
  const float* channel_scales = nullptr;
  DType dense_dtype = DType::kBF16;  // kDense only
  // codes == nullptr: a synthetic weight (benchmarks), its values drawn from this seed by the backend
  // (kernels/linear/synthetic.h); dequantize_row_ref does not take such a weight.
  uint64_t synthetic_seed = 0;
};

// Exact fp32 values of row `row` (k floats): the correctly rounded product of the stored factors.
void dequantize_row_ref(const HostWeightRef& w, int64_t row, float* out);

// y[i, j] = sum_k x[i, k] * W[rows[j], k] for i < m, j < rows.size(); y is [m, rows.size()] row-major.
// Accumulates in double; splits the rows over `threads` threads (0: hardware concurrency).
void linear_ref_rows(const HostWeightRef& w, std::span<const int64_t> rows, const float* x, int64_t m, float* y,
                     int threads = 0);

// Checkpoint-order data of a synthetic weight w (w.codes == nullptr; format, n, k and synthetic_seed set;
// kernels/linear/synthetic.h): codes [n, k/2] + scales [n, k/16] (NVFP4), codes [n, k] (FP8), or dense fp32 values
// [n, k]. Returns w pointing at them (the vectors must outlive it), with the synthetic global / tensor scale.
HostWeightRef synthetic_fill_host(const HostWeightRef& w, std::vector<uint8_t>& codes, std::vector<uint8_t>& scales,
                                  std::vector<float>& dense);

// All rows: y [m, n].
void linear_ref(const HostWeightRef& w, const float* x, int64_t m, float* y, int threads = 0);

}  // namespace voltserve::kernels
