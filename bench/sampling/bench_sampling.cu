// bench_sampling: the time of one sample() call (kernels/sampling) at the Qwen3.5 vocabulary (248077 real ids of a
// 248320-wide lm_head output) for decode batches (1, 8, 64 rows) and a verify / prefill-sized step (256 rows),
// greedy and sampled (the typical chat settings top-k 20 + top-p 0.95; the Qwen3.5 instruct preset with a presence
// penalty; top-p 0.95 alone; temperature alone), on peaked (language-model-like) and flat logits (flat rows take the
// general path under top-p alone). CUDA-graph replay after warm-up, logits rotated over copies larger than L2,
// median of many replays; us per call, GB/s over the bytes read (logits, plus the penalty counts where on) and %
// of a read ceiling measured in the same run. Prints a summary table last.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "common/bench_util.cuh"
#include "sampling/sampling.h"

using namespace voltserve::kernels;
using namespace voltserve::kernels::sampling;

#define CK BENCH_CK

namespace {

constexpr int32_t kVocab = 248320;
constexpr int32_t kRealVocab = 248077;

using voltserve::bench::hash32;
using voltserve::bench::median_us_graph;

// Logits of rows of `stride` floats: flat (uniform in [-4, 4]) or peaked (a sum of four uniforms times 2.5, one id
// in 4000 lifted by 8..16: a language model's next-token logits); padding ids hold 1e30 (never read).
__global__ void fill_logits_kernel(float* p, size_t n, int32_t stride, int32_t n_real, uint64_t seed, int peaked) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const int32_t id = static_cast<int32_t>(i % static_cast<size_t>(stride));
    const uint32_t a = hash32(seed * 0x9E3779B97F4A7C15ull + i), b = hash32(seed * 0x9E3779B97F4A7C15ull + i + n);
    const float u0 = (a & 0xFFFF) / 65536.0f, u1 = (a >> 16) / 65536.0f, u2 = (b & 0xFFFF) / 65536.0f,
                u3 = (b >> 16) / 65536.0f;
    float v = peaked ? (u0 + u1 + u2 + u3 - 2.0f) * 2.5f : u0 * 8.0f - 4.0f;
    if (peaked && (a % 4000u) == 7u) v += 8.0f + 8.0f * u3;
    p[i] = id < n_real ? v : 1e30f;
  }
}

struct Setting {
  const char* name;
  float temperature;
  int32_t top_k;
  float top_p;
  float presence;  // != 0: the rows have penalty state (a slot each)
};

const Setting kSettings[] = {
    {"greedy", 0.0f, 0, 1.0f, 0.0f},
    {"chat k20+p0.95", 1.0f, 20, 0.95f, 0.0f},
    {"instruct k20+p0.8+pres1.5", 0.7f, 20, 0.8f, 1.5f},
    {"top_p=0.95", 1.0f, 0, 0.95f, 0.0f},
    {"T=1", 1.0f, 0, 1.0f, 0.0f},
};

struct Row {
  std::string setting, shape;
  int32_t rows;
  double us, gbs, pct;
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
      std::fprintf(help ? stdout : stderr,
                   "usage: bench_sampling [--quick] [--warmup-ms MS]\n"
                   "times sample() at vocab %d (%d real) for 1, 8, 64 and 256 rows (--quick: 1, 8, 64)\n",
                   kVocab, kRealVocab);
      return help ? 0 : 2;
    }
  }
  CK(cudaSetDevice(0));
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  const size_t l2 = static_cast<size_t>(prop.l2CacheSize);
  std::printf("bench_sampling: %s, cc %d%d, %d SMs, L2 %.0f MB; vocab %d (%d real)\n", prop.name, prop.major,
              prop.minor, prop.multiProcessorCount, l2 / 1e6, kVocab, kRealVocab);
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));

  const double ceiling_gbs = voltserve::bench::read_ceiling_gbs(s, prop);
  std::printf("read ceiling: %.0f GB/s (read-only kernel over 2 x up to 2.4 GB)\n", ceiling_gbs);

  const std::vector<int32_t> row_counts = quick ? std::vector<int32_t>{1, 8, 64} : std::vector<int32_t>{1, 8, 64, 256};
  const int replays = quick ? 9 : 21;
  // Penalty state for 256 slots (the presence rows): a few hundred generated ids each.
  const int32_t n_slots = 256, words = (kVocab + 31) / 32;
  int32_t* counts;
  uint32_t* bits;
  CK(cudaMalloc(&counts, static_cast<size_t>(n_slots) * kVocab * 4));
  CK(cudaMalloc(&bits, static_cast<size_t>(n_slots) * words * 4));
  {
    std::vector<int32_t> hc(static_cast<size_t>(n_slots) * kVocab, 0);
    for (int32_t sl = 0; sl < n_slots; ++sl)
      for (int i = 0; i < 300; ++i) hc[static_cast<size_t>(sl) * kVocab + static_cast<size_t>((i * 7919 + sl * 131) % kRealVocab)] += 1;
    CK(cudaMemcpy(counts, hc.data(), hc.size() * 4, cudaMemcpyHostToDevice));
    CK(cudaMemset(bits, 0, static_cast<size_t>(n_slots) * words * 4));
    CK(cudaDeviceSynchronize());
  }
  std::vector<Row> results;
  for (int32_t n_rows : row_counts) {
    const size_t row_bytes = static_cast<size_t>(kVocab) * 4;
    const size_t step_bytes = row_bytes * static_cast<size_t>(n_rows);
    const int copies = static_cast<int>(std::max<size_t>(1, std::min<size_t>(64, (3 * l2 + step_bytes - 1) / step_bytes)));
    std::vector<float*> logits(static_cast<size_t>(copies));
    void* ws;
    const size_t ws_bytes = workspace_bytes(n_rows, kRealVocab);
    CK(cudaMalloc(&ws, ws_bytes));
    int32_t* out_i;
    float* out_f;
    CK(cudaMalloc(&out_i, static_cast<size_t>(n_rows) * (3 + kMaxTopLogprobs) * 4));
    CK(cudaMalloc(&out_f, static_cast<size_t>(n_rows) * (1 + kMaxTopLogprobs) * 4));
    RowParams* drows;
    CK(cudaMalloc(&drows, static_cast<size_t>(n_rows) * sizeof(RowParams)));
    for (int peaked : {1, 0}) {
      for (int c = 0; c < copies; ++c) {
        CK(cudaMalloc(&logits[static_cast<size_t>(c)], step_bytes));
        fill_logits_kernel<<<1024, 256, 0, s>>>(logits[static_cast<size_t>(c)], step_bytes / 4, kVocab, kRealVocab,
                                                17 + static_cast<uint64_t>(c), peaked);
        CK(cudaGetLastError());
      }
      CK(cudaStreamSynchronize(s));
      for (const Setting& set : kSettings) {
        if (!peaked && set.temperature <= 0.0f && quick) continue;
        std::vector<RowParams> rows(static_cast<size_t>(n_rows));
        for (int32_t r = 0; r < n_rows; ++r) {
          RowParams& p = rows[static_cast<size_t>(r)];
          p.flags = kSample;
          p.temperature = set.temperature;
          p.top_k = set.top_k;
          p.top_p = set.top_p;
          p.seed = 1234567 + static_cast<uint64_t>(r);
          p.draw_index = 99 + static_cast<uint64_t>(r);
          if (set.presence != 0.0f) {
            p.slot = r % n_slots;
            p.presence_penalty = set.presence;
          }
        }
        CK(cudaMemcpy(drows, rows.data(), rows.size() * sizeof(RowParams), cudaMemcpyHostToDevice));
        CK(cudaDeviceSynchronize());  // the copy (legacy stream) before launches on the non-blocking stream
        DeviceArgs a;
        a.logits_stride = kVocab;
        a.n_rows = n_rows;
        a.n_vocab_real = kRealVocab;
        a.rows = drows;
        a.penalties = PenaltyState{counts, bits, kVocab, n_slots};
        a.out = Outputs{out_i, out_f, out_i + n_rows, out_f + n_rows, out_i + n_rows * (1 + kMaxTopLogprobs),
                        out_i + n_rows * (2 + kMaxTopLogprobs)};
        a.workspace = ws;
        a.workspace_bytes = ws_bytes;
        a.stream = s;
        const double us = median_us_graph(s, std::max(copies, 8), replays, [&](int i) {
          DeviceArgs ai = a;
          ai.logits = logits[static_cast<size_t>(i % copies)];
          const KernelStatus st = sample(ai);
          if (!st.ok()) {
            std::fprintf(stderr, "bench_sampling: sample: %s (%s:%d)\n", st.message, st.file, st.line);
            std::exit(1);
          }
        });
        const double bytes = static_cast<double>(n_rows) * kRealVocab * 4.0 * (set.presence != 0.0f ? 2.0 : 1.0);
        const double gbs = bytes / (us * 1e3);
        results.push_back({set.name, peaked ? "peaked" : "flat", n_rows, us, gbs, 100.0 * gbs / ceiling_gbs});
        std::printf("%-28s %-6s rows=%-4d %9.2f us %8.1f GB/s %5.1f%%\n", set.name, peaked ? "peaked" : "flat", n_rows,
                    us, gbs, 100.0 * gbs / ceiling_gbs);
        std::fflush(stdout);
      }
      for (float* p : logits) CK(cudaFree(p));
    }
    CK(cudaFree(ws));
    CK(cudaFree(out_i));
    CK(cudaFree(out_f));
    CK(cudaFree(drows));
  }

  std::printf("\n== summary (read ceiling %.0f GB/s; us per sample() call, %% of the ceiling over the bytes read) ==\n",
              ceiling_gbs);
  std::printf("%-28s %-6s", "setting", "logits");
  for (int32_t n : row_counts) std::printf("   rows=%-4d      ", n);
  std::printf("\n");
  for (const Setting& set : kSettings) {
    for (const char* shape : {"peaked", "flat"}) {
      bool any = false;
      std::string line;
      for (int32_t n : row_counts) {
        char cell[64] = "       -          ";
        for (const Row& r : results) {
          if (r.setting == set.name && r.shape == shape && r.rows == n) {
            std::snprintf(cell, sizeof cell, " %8.1fus %5.1f%%  ", r.us, r.pct);
            any = true;
          }
        }
        line += cell;
      }
      if (any) std::printf("%-28s %-6s%s\n", set.name, shape, line.c_str());
    }
  }
  CK(cudaFree(counts));
  CK(cudaFree(bits));
  return 0;
}
