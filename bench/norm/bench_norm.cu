// bench_norm: RMSNorm fused with the residual update (kernels/norm) at the 27B hidden size, decode (1, 8 rows) and
// prefill (512 .. 8192 rows) launches: µs per launch under CUDA-graph replay after a warm-up (median of many replays,
// buffers rotated so that together they exceed 3 x L2), GB/s of the bytes the op must move (x; the residual read and
// written; out; the weight once) and % of the read ceiling measured in the same run. Prints a summary table last.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "common/bench_util.cuh"
#include "norm/norm.h"

using namespace voltserve;
using namespace voltserve::bench;

namespace {

struct Variant {
  const char* name;
  bool residual;
  bool f16;
};

// The decoder layer's pre-norms (residual += x, then the norm feeds a linear layer: fp16), the same with fp32 out, and
// a norm without residual (final / MTP pre-fc norms).
const Variant kVariants[] = {{"res+norm->f16", true, true}, {"res+norm->f32", true, false}, {"norm->f16", false, true}};

struct Row {
  std::string variant;
  int rows;
  double us, gbs, pct;
};

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--quick")) {
      quick = true;
    } else if (!std::strcmp(argv[i], "--warmup-ms") && i + 1 < argc) {
      g_warmup_ms = std::strtof(argv[++i], nullptr);
    } else {
      const bool help = !std::strcmp(argv[i], "--help") || !std::strcmp(argv[i], "-h");
      std::fprintf(help ? stdout : stderr, "usage: bench_norm [--quick] [--warmup-ms MS]\n");
      return help ? 0 : 2;
    }
  }
  BENCH_CK(cudaSetDevice(0));
  cudaDeviceProp prop;
  BENCH_CK(cudaGetDeviceProperties(&prop, 0));
  const size_t l2 = static_cast<size_t>(prop.l2CacheSize);
  std::printf("bench_norm: %s, cc %d%d, %d SMs, L2 %.0f MB\n", prop.name, prop.major, prop.minor, prop.multiProcessorCount,
              l2 / 1e6);
  cudaStream_t s;
  BENCH_CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const double ceiling = read_ceiling_gbs(s, prop);
  std::printf("read ceiling: %.0f GB/s (read-only kernel, 2 x 2.42 GB)\n", ceiling);

  const int n = 5120;  // 27B hidden size
  std::vector<int> row_counts = {1, 8, 512, 2048, 8192};
  if (quick) row_counts = {1, 8, 2048};
  std::vector<Row> rows;
  float* weight;
  BENCH_CK(cudaMalloc(&weight, n * sizeof(float)));
  fill_f32(weight, n, 3, 1.0f);
  for (const Variant& v : kVariants) {
    for (int r : row_counts) {
      const size_t elems = static_cast<size_t>(r) * n;
      const size_t moved = elems * (4 + (v.residual ? 8 : 0) + (v.f16 ? 2 : 4));  // per launch, without the weight
      const int copies = rotation_copies(moved, l2);
      float* x;
      float* res = nullptr;
      void* out;
      BENCH_CK(cudaMalloc(&x, elems * copies * 4));
      fill_f32(x, elems * copies, 11, 2.0f);
      if (v.residual) {
        BENCH_CK(cudaMalloc(&res, elems * copies * 4));
        fill_f32(res, elems * copies, 12, 4.0f);
      }
      BENCH_CK(cudaMalloc(&out, elems * copies * (v.f16 ? 2 : 4)));
      const double us = median_us_graph(s, std::max(copies, 8), 21, [&](int i) {
        const size_t c = static_cast<size_t>(i % copies);
        kernels::norm::RmsNormArgs a;
        a.x = x + c * elems;
        a.x_stride = n;
        a.residual = v.residual ? res + c * elems : nullptr;
        a.residual_stride = n;
        a.weight = weight;
        a.out = static_cast<char*>(out) + c * elems * (v.f16 ? 2 : 4);
        a.out_stride = n;
        a.out_dtype = v.f16 ? DType::kF16 : DType::kF32;
        a.n_rows = r;
        a.n = n;
        a.stream = s;
        const kernels::KernelStatus st = kernels::norm::rms_norm(a);
        if (!st.ok()) {
          std::fprintf(stderr, "bench_norm: rms_norm: %s (%s:%d)\n", st.message, st.file, st.line);
          std::exit(1);
        }
      });
      const double bytes = static_cast<double>(moved) + n * 4.0;
      const double gbs = bytes / (us * 1e3);
      rows.push_back({v.name, r, us, gbs, 100.0 * gbs / ceiling});
      std::printf("rms_norm %-14s n=%d rows=%-5d %9.2f us %7.0f GB/s %5.1f%%  (%d copies)\n", v.name, n, r, us, gbs,
                  100.0 * gbs / ceiling, copies);
      std::fflush(stdout);
      BENCH_CK(cudaFree(x));
      BENCH_CK(cudaFree(res));
      BENCH_CK(cudaFree(out));
    }
  }
  BENCH_CK(cudaFree(weight));

  std::printf("\n== summary (read ceiling %.0f GB/s; rms_norm n=%d: us / %% of ceiling, bytes moved / time) ==\n", ceiling, n);
  std::printf("%-14s", "variant");
  for (int r : row_counts) std::printf(" %17s", ("rows=" + std::to_string(r)).c_str());
  std::printf("\n");
  for (const Variant& v : kVariants) {
    std::printf("%-14s", v.name);
    for (int r : row_counts) {
      for (const Row& row : rows) {
        if (row.variant != v.name || row.rows != r) continue;
        char cell[32];
        std::snprintf(cell, sizeof cell, "%.2fus %.1f%%", row.us, row.pct);
        std::printf(" %17s", cell);
      }
    }
    std::printf("\n");
  }
  return 0;
}
