// bench_elementwise: the elementwise ops of a decoder step (kernels/elementwise) at the 27B sizes, decode (1, 8 rows)
// and prefill (512, 2048 rows) launches: embedding rows from the 248320 x 5120 table (fp16, as a tied lm_head stores
// it, and bf16), SwiGLU over the merged gate|up output (17408 columns each, fp16 out for down_proj) and row gathers
// (5120 fp32 / fp16). µs per launch under CUDA-graph replay after a warm-up (median of many replays; ids, inputs and
// outputs rotated so that together they exceed 3 x L2), GB/s of the bytes the op must move (read + written) and % of
// the read ceiling measured in the same run. Prints a summary table last.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "common/bench_util.cuh"
#include "elementwise/elementwise.h"

using namespace voltserve;
using namespace voltserve::bench;

namespace {

struct Row {
  std::string op;
  int rows;
  double us, gbs, pct;
};

void check(const kernels::KernelStatus& st, const char* what) {
  if (!st.ok()) {
    std::fprintf(stderr, "bench_elementwise: %s: %s (%s:%d)\n", what, st.message, st.file, st.line);
    std::exit(1);
  }
}

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
      std::fprintf(help ? stdout : stderr, "usage: bench_elementwise [--quick] [--warmup-ms MS]\n");
      return help ? 0 : 2;
    }
  }
  BENCH_CK(cudaSetDevice(0));
  cudaDeviceProp prop;
  BENCH_CK(cudaGetDeviceProperties(&prop, 0));
  const size_t l2 = static_cast<size_t>(prop.l2CacheSize);
  std::printf("bench_elementwise: %s, cc %d%d, %d SMs, L2 %.0f MB\n", prop.name, prop.major, prop.minor,
              prop.multiProcessorCount, l2 / 1e6);
  cudaStream_t s;
  BENCH_CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const double ceiling = read_ceiling_gbs(s, prop);
  std::printf("read ceiling: %.0f GB/s (read-only kernel, 2 x 2.42 GB)\n", ceiling);

  std::vector<int> row_counts = {1, 8, 512, 2048};
  if (quick) row_counts = {1, 8, 512};
  std::vector<Row> rows;
  auto record = [&](const std::string& op, int r, double us, double bytes, int copies) {
    const double gbs = bytes / (us * 1e3);
    rows.push_back({op, r, us, gbs, 100.0 * gbs / ceiling});
    std::printf("%-24s rows=%-5d %9.2f us %7.0f GB/s %5.1f%%  (%d copies)\n", op.c_str(), r, us, gbs, 100.0 * gbs / ceiling,
                copies);
    std::fflush(stdout);
  };
  std::vector<std::string> ops;

  // Embedding rows: a different id set per launch, drawn over the whole table.
  const int64_t vocab = 248320, hidden = 5120;
  for (DType d : {DType::kF16, DType::kBF16}) {
    const std::string op = d == DType::kF16 ? "embed f16 5120" : "embed bf16 5120";
    ops.push_back(op);
    void* table;
    BENCH_CK(cudaMalloc(&table, static_cast<size_t>(vocab * hidden) * 2));
    fill_f16(table, static_cast<size_t>(vocab * hidden), 21, 1.0f);  // fp16 bits; as bf16 just other finite values
    for (int r : row_counts) {
      const size_t moved = static_cast<size_t>(r) * hidden * (2 + 4) + static_cast<size_t>(r) * 4;
      const int copies = rotation_copies(moved, l2);
      int32_t* ids;
      float* out;
      BENCH_CK(cudaMalloc(&ids, static_cast<size_t>(r) * copies * 4));
      fill_ids(ids, static_cast<size_t>(r) * copies, 31 + r, static_cast<uint32_t>(vocab));
      BENCH_CK(cudaMalloc(&out, static_cast<size_t>(r) * copies * hidden * 4));
      const double us = median_us_graph(s, std::max(copies, 8), 21, [&](int i) {
        const size_t c = static_cast<size_t>(i % copies);
        kernels::elementwise::EmbedArgs a;
        a.table = table;
        a.table_dtype = d;
        a.hidden = hidden;
        a.ids = ids + c * r;
        a.n_rows = r;
        a.out = out + c * r * hidden;
        a.out_stride = hidden;
        a.stream = s;
        check(kernels::elementwise::embed(a), "embed");
      });
      record(op, r, us, static_cast<double>(moved), copies);
      BENCH_CK(cudaFree(ids));
      BENCH_CK(cudaFree(out));
    }
    BENCH_CK(cudaFree(table));
  }

  // SwiGLU over the merged gate|up linear output [rows, 2 x 17408] fp32, fp16 out.
  {
    const int64_t n = 17408;
    const std::string op = "swiglu 17408 ->f16";
    ops.push_back(op);
    for (int r : row_counts) {
      const size_t moved = static_cast<size_t>(r) * n * (8 + 2);
      const int copies = rotation_copies(moved, l2);
      float* gu;
      void* out;
      BENCH_CK(cudaMalloc(&gu, static_cast<size_t>(r) * copies * 2 * n * 4));
      fill_f32(gu, static_cast<size_t>(r) * copies * 2 * n, 41, 8.0f);
      BENCH_CK(cudaMalloc(&out, static_cast<size_t>(r) * copies * n * 2));
      const double us = median_us_graph(s, std::max(copies, 8), 21, [&](int i) {
        const size_t c = static_cast<size_t>(i % copies);
        kernels::elementwise::SwigluArgs a;
        a.gate = gu + c * r * 2 * n;
        a.up = a.gate + n;
        a.gate_stride = a.up_stride = 2 * n;
        a.out = static_cast<char*>(out) + c * r * n * 2;
        a.out_stride = n;
        a.out_dtype = DType::kF16;
        a.n_rows = r;
        a.n = static_cast<int32_t>(n);
        a.stream = s;
        check(kernels::elementwise::swiglu(a), "swiglu");
      });
      record(op, r, us, static_cast<double>(moved), copies);
      BENCH_CK(cudaFree(gu));
      BENCH_CK(cudaFree(out));
    }
  }

  // Row gathers out of a [2048, 5120] activation (4 copies rotated), random rows.
  for (DType d : {DType::kF32, DType::kF16}) {
    const int64_t n = 5120, x_rows = 2048;
    const size_t elem = dtype_bytes(d);
    const std::string op = d == DType::kF32 ? "gather_rows f32 5120" : "gather_rows f16 5120";
    ops.push_back(op);
    const int x_copies = 4;
    void* x;
    BENCH_CK(cudaMalloc(&x, static_cast<size_t>(x_rows * n) * elem * x_copies));
    fill_f32(x, static_cast<size_t>(x_rows * n) * elem * x_copies / 4, 51, 1.0f);
    for (int r : row_counts) {
      const size_t moved = static_cast<size_t>(r) * n * elem * 2;
      const int copies = rotation_copies(moved, l2);
      int32_t* idx;
      void* out;
      BENCH_CK(cudaMalloc(&idx, static_cast<size_t>(r) * copies * 4));
      fill_ids(idx, static_cast<size_t>(r) * copies, 61 + r, static_cast<uint32_t>(x_rows));
      BENCH_CK(cudaMalloc(&out, static_cast<size_t>(r) * copies * n * elem));
      const double us = median_us_graph(s, std::max(copies, 8), 21, [&](int i) {
        const size_t c = static_cast<size_t>(i % copies);
        kernels::elementwise::GatherArgs a;
        a.x = static_cast<const char*>(x) + static_cast<size_t>(i % x_copies) * x_rows * n * elem;
        a.x_stride = n;
        a.rows = idx + c * r;
        a.out = static_cast<char*>(out) + c * r * n * elem;
        a.out_stride = n;
        a.dtype = d;
        a.n_rows = r;
        a.n = static_cast<int32_t>(n);
        a.stream = s;
        check(kernels::elementwise::gather_rows(a), "gather_rows");
      });
      record(op, r, us, static_cast<double>(moved), copies);
      BENCH_CK(cudaFree(idx));
      BENCH_CK(cudaFree(out));
    }
    BENCH_CK(cudaFree(x));
  }

  std::printf("\n== summary (read ceiling %.0f GB/s; us / %% of ceiling, bytes moved / time) ==\n", ceiling);
  std::printf("%-24s", "op");
  for (int r : row_counts) std::printf(" %17s", ("rows=" + std::to_string(r)).c_str());
  std::printf("\n");
  for (const std::string& op : ops) {
    std::printf("%-24s", op.c_str());
    for (int r : row_counts) {
      for (const Row& row : rows) {
        if (row.op != op || row.rows != r) continue;
        char cell[32];
        std::snprintf(cell, sizeof cell, "%.2fus %.1f%%", row.us, row.pct);
        std::printf(" %17s", cell);
      }
    }
    std::printf("\n");
  }
  return 0;
}
