// bench_attention: one gated_attention call (prep + split-context decode + combine, or prep + prefill) at the 27B
// shape (24 q / 4 kv heads, head_dim 256, fp16 KV cache, 16-position pages scattered over a pool) under CUDA-graph
// replay after warm-up, median of many replays, with rotating copies of the KV pages (> 3x L2) so the decode reads
// come from DRAM. Decode (batch 1 and 8, 4k-32k context, 1 row, and 4 / 16 verify rows) is reported as us, GB/s of
// K/V bytes read and % of a read ceiling measured in the same run (read-only kernel over 2 x 2.25 GB); prefill (512
// and 2048 rows, with and without context) as us, tokens/s and attention TFLOP/s. Summary table last.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "attention/attention.h"
#include "common/bench_util.cuh"

using namespace voltserve::kernels;
namespace ka = voltserve::kernels::attention;

#define CK BENCH_CK

namespace {

using voltserve::bench::median_us_graph;

// fp16 K/V cache contents in [-1, 1), fp32 activations in [-scale, scale).
void fill_f16(void* p, size_t n, uint64_t seed) { voltserve::bench::fill_f16(p, n, seed, 1.0f); }
void fill_f32(void* p, size_t n, uint64_t seed, float scale) { voltserve::bench::fill_f32(p, n, seed, scale); }

struct Case {
  std::string name;
  int batch;
  int n_tokens;  // rows per sequence
  int n_past;    // cached positions per sequence
  bool decode() const { return n_tokens <= 16; }
};

struct Row {
  Case c;
  double us, gbs, pct, tflops;
};

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--quick")) {
      quick = true;
    } else if (!std::strcmp(argv[i], "--warmup-ms") && i + 1 < argc) {
      voltserve::bench::g_warmup_ms = std::strtof(argv[++i], nullptr);
    } else {
      const bool help = !std::strcmp(argv[i], "--help") || !std::strcmp(argv[i], "-h");
      std::fprintf(help ? stdout : stderr, "usage: bench_attention [--quick] [--warmup-ms MS]\n");
      return help ? 0 : 2;
    }
  }
  int dev = 0;
  CK(cudaSetDevice(dev));
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, dev));
  const size_t l2 = static_cast<size_t>(prop.l2CacheSize);
  std::printf("bench_attention: %s, cc %d%d, %d SMs, L2 %.0f MB\n", prop.name, prop.major, prop.minor,
              prop.multiProcessorCount, l2 / 1e6);
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const double ceiling_gbs = voltserve::bench::read_ceiling_gbs(s, prop);
  std::printf("read ceiling: %.0f GB/s (read-only kernel over 2 x up to 2.4 GB)\n", ceiling_gbs);

  ka::Params p;
  p.n_heads = 24;
  p.n_kv_heads = 4;
  p.head_dim = 256;
  p.rotary_dim = 64;
  p.rope_theta = 1e7f;
  p.rms_norm_eps = 1e-6f;
  p.page_size = 16;
  const int64_t kv_width = int64_t{p.n_kv_heads} * p.head_dim;
  const size_t page_bytes = static_cast<size_t>(p.page_size) * kv_width * 2;  // one cache (K or V)

  std::vector<Case> cases;
  for (int batch : {1, 8}) {
    for (int ctx : {4096, 8192, 16384, 32768}) {
      if (quick && (ctx == 8192 || ctx == 16384)) continue;
      cases.push_back({"decode", batch, 1, ctx - 1});
    }
  }
  // A 1k context (the round benchmarks'): one row, then a k = 7 verify's 8 rows.
  cases.push_back({"decode", 1, 1, 1023});
  cases.push_back({"verify", 1, 8, 1024 - 8});
  for (int n : {4, 16}) {
    cases.push_back({"verify", 1, n, 8192 - n});
    if (!quick) cases.push_back({"verify", 8, n, 4096 - n});
  }
  cases.push_back({"prefill", 1, 2048, 0});
  if (!quick) {
    cases.push_back({"prefill", 1, 512, 0});
    cases.push_back({"prefill", 1, 2048, 8192});
  }

  // The page pool: enough for the largest case's rotating copies.
  auto pages_of = [&](const Case& c) { return static_cast<size_t>(c.batch) * ((c.n_past + c.n_tokens + 15) / 16); };
  auto copies_of = [&](const Case& c) {
    if (!c.decode()) return size_t{1};  // prefill is compute-bound: L2 residency does not matter
    const size_t kv = pages_of(c) * page_bytes * 2;
    return std::max<size_t>(1, std::min<size_t>(64, (3 * l2 + kv - 1) / kv));
  };
  size_t pool_pages = 0;
  int max_rows = 0;
  for (const Case& c : cases) {
    pool_pages = std::max(pool_pages, pages_of(c) * copies_of(c));
    max_rows = std::max(max_rows, c.batch * c.n_tokens);
  }
  __half *k_cache, *v_cache;
  CK(cudaMalloc(&k_cache, pool_pages * page_bytes));
  CK(cudaMalloc(&v_cache, pool_pages * page_bytes));
  fill_f16(k_cache, pool_pages * page_bytes / 2, 11);
  fill_f16(v_cache, pool_pages * page_bytes / 2, 12);
  CK(cudaGetLastError());
  float *qg, *k, *v, *norm, *out;
  CK(cudaMalloc(&qg, static_cast<size_t>(max_rows) * p.n_heads * 2 * p.head_dim * 4));
  CK(cudaMalloc(&k, static_cast<size_t>(max_rows) * kv_width * 4));
  CK(cudaMalloc(&v, static_cast<size_t>(max_rows) * kv_width * 4));
  CK(cudaMalloc(&norm, static_cast<size_t>(p.head_dim) * 4));
  CK(cudaMalloc(&out, static_cast<size_t>(max_rows) * p.n_heads * p.head_dim * 4));
  fill_f32(qg, static_cast<size_t>(max_rows) * p.n_heads * 2 * p.head_dim, 21, 2.0f);
  fill_f32(k, static_cast<size_t>(max_rows) * kv_width, 22, 2.0f);
  fill_f32(v, static_cast<size_t>(max_rows) * kv_width, 23, 1.0f);
  fill_f32(norm, static_cast<size_t>(p.head_dim), 24, 0.3f);
  CK(cudaGetLastError());
  std::mt19937 rng(7);

  std::vector<Row> rows;
  for (const Case& c : cases) {
    const int copies = static_cast<int>(copies_of(c));
    const int per_seq = (c.n_past + c.n_tokens + 15) / 16;
    // Scattered pages: copy i's sequences take a random subset of the pool.
    std::vector<int32_t> perm(pool_pages);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    std::vector<int32_t> table(perm.begin(), perm.begin() + static_cast<size_t>(copies) * c.batch * per_seq);
    std::vector<SeqDesc> seqs(static_cast<size_t>(copies) * c.batch);
    for (int i = 0; i < copies; ++i) {
      for (int b = 0; b < c.batch; ++b) {
        SeqDesc& d = seqs[static_cast<size_t>(i * c.batch + b)];
        d.row0 = b * c.n_tokens;
        d.n_tokens = c.n_tokens;
        d.n_past = c.n_past;
        d.page_offset = (i * c.batch + b) * per_seq;
      }
    }
    int32_t* d_table;
    SeqDesc* d_seqs;
    CK(cudaMalloc(&d_table, table.size() * 4));
    CK(cudaMalloc(&d_seqs, seqs.size() * sizeof(SeqDesc)));
    CK(cudaMemcpy(d_table, table.data(), table.size() * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d_seqs, seqs.data(), seqs.size() * sizeof(SeqDesc), cudaMemcpyHostToDevice));
    const int32_t n_rows = c.batch * c.n_tokens;
    const size_t ws_bytes = ka::workspace_bytes(p, n_rows, c.batch, c.n_tokens, c.n_past + c.n_tokens);
    void* ws;
    CK(cudaMalloc(&ws, ws_bytes));
    ka::DeviceArgs a;
    a.qg = qg;
    a.qg_stride = int64_t{p.n_heads} * 2 * p.head_dim;
    a.k = k;
    a.k_stride = kv_width;
    a.v = v;
    a.v_stride = kv_width;
    a.q_norm = norm;
    a.k_norm = norm;
    a.k_cache = k_cache;
    a.v_cache = v_cache;
    a.n_seqs = c.batch;
    a.page_table = d_table;
    a.out = out;
    a.out_stride = int64_t{p.n_heads} * p.head_dim;
    a.out_dtype = voltserve::DType::kF16;
    a.n_rows = n_rows;
    a.max_seq_tokens = c.n_tokens;
    a.max_context = c.n_past + c.n_tokens;
    a.workspace = ws;
    a.workspace_bytes = ws_bytes;
    a.stream = s;
    const double us = median_us_graph(s, std::max(copies, 4), c.decode() ? 31 : 11, [&](int i) {
      ka::DeviceArgs ai = a;
      ai.seqs = d_seqs + static_cast<size_t>(i % copies) * c.batch;
      const KernelStatus st = ka::gated_attention(p, ai);
      if (!st.ok()) {
        std::fprintf(stderr, "bench_attention: gated_attention: %s (%s:%d)\n", st.message, st.file, st.line);
        std::exit(1);
      }
    });
    const double ctx = c.n_past + c.n_tokens;
    const double kv_bytes = c.batch * ctx * kv_width * 2.0 * 2.0;
    // Attention FLOPs (QK and PV, 2 per multiply-add) over every row's visible positions.
    const double visible = c.batch * (c.n_tokens * (c.n_past + 1.0) + c.n_tokens * (c.n_tokens - 1.0) / 2.0);
    const double flops = 4.0 * visible * p.n_heads * p.head_dim;
    Row r{c, us, kv_bytes / (us * 1e3), 0, flops / (us * 1e6)};
    r.pct = 100.0 * r.gbs / ceiling_gbs;
    rows.push_back(r);
    if (c.decode()) {
      std::printf("%-8s batch=%d rows=%-2d ctx=%-6.0f copies=%-2d %9.2f us %7.0f GB/s %5.1f%% of ceiling  %6.2f TFLOP/s\n",
                  c.name.c_str(), c.batch, c.n_tokens, ctx, copies, us, r.gbs, r.pct, r.tflops);
    } else {
      std::printf("%-8s batch=%d rows=%-4d n_past=%-5d %9.1f us %8.0f tokens/s %6.2f TFLOP/s (compute-bound: fp32 FMA)\n",
                  c.name.c_str(), c.batch, c.n_tokens, c.n_past, us, c.batch * c.n_tokens / (us * 1e-6), r.tflops);
    }
    std::fflush(stdout);
    CK(cudaFree(ws));
    CK(cudaFree(d_table));
    CK(cudaFree(d_seqs));
  }

  std::printf("\n== summary (read ceiling %.0f GB/s; decode: K/V bytes read / time of the whole op) ==\n", ceiling_gbs);
  std::printf("%-8s %5s %4s %7s %10s %8s %8s\n", "case", "batch", "rows", "ctx", "us", "GB/s", "%ceil");
  for (const Row& r : rows) {
    if (!r.c.decode()) continue;
    std::printf("%-8s %5d %4d %7d %10.2f %8.0f %7.1f%%\n", r.c.name.c_str(), r.c.batch, r.c.n_tokens,
                r.c.n_past + r.c.n_tokens, r.us, r.gbs, r.pct);
  }
  std::printf("%-8s %5s %4s %7s %10s %8s %8s\n", "case", "batch", "rows", "n_past", "us", "tok/s", "TFLOP/s");
  for (const Row& r : rows) {
    if (r.c.decode()) continue;
    std::printf("%-8s %5d %4d %7d %10.1f %8.0f %8.2f\n", r.c.name.c_str(), r.c.batch, r.c.n_tokens, r.c.n_past, r.us,
                r.c.batch * r.c.n_tokens / (r.us * 1e-6), r.tflops);
  }
  return 0;
}
