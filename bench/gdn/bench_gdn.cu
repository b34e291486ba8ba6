// bench_gdn: the Gated DeltaNet device form (gdn_forward) on the 27B layer shape, decode (batch 1 and 8), speculative
// verify (k + 1 = 4 / 8 rows with checkpoints) and prefill (512 / 2048 tokens), timed with CUDA-graph replay after a
// warm-up, median of many replays, with the recurrent states rotated over copies larger than L2 (a real step reads
// 48 layers' states, so no layer's state is in L2). Prints, per case, the whole call and each of its kernels in us,
// the modelled bytes (state read + write, conv state, inputs, outputs, checkpoints, workspace) as GB/s and as % of
// a read ceiling measured in the same run (a read-only kernel over > 2 GB), and a summary table last.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "common/bench_util.cuh"
#include "gdn/gdn.h"
#include "gdn/gdn_plan.h"

using namespace voltserve::kernels;
using namespace voltserve::kernels::gdn;

#define CK BENCH_CK

#define KS(call)                                                                                   \
  do {                                                                                             \
    const KernelStatus st_ = (call);                                                               \
    if (!st_.ok()) {                                                                               \
      std::fprintf(stderr, "bench_gdn: %s: %s (%s:%d)\n", #call, st_.message, st_.file, st_.line); \
      std::exit(1);                                                                                \
    }                                                                                              \
  } while (0)

namespace {

using voltserve::bench::median_us_graph;

__global__ void shift_kernel(float* p, size_t n, float by) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    p[i] += by;
  }
}

float* alloc_fill(size_t n, uint64_t seed, float lo, float hi) {
  float* p = nullptr;
  CK(cudaMalloc(&p, std::max<size_t>(n, 1) * sizeof(float)));
  // Uniform in [lo, hi): the shared fill is symmetric, so scale and shift it.
  voltserve::bench::fill_f32(p, n, seed, 0.5f * (hi - lo));
  if (lo != -hi) shift_kernel<<<1024, 256>>>(p, n, 0.5f * (hi + lo));
  CK(cudaGetLastError());
  return p;
}

struct Case {
  std::string name;
  int batch;
  int tokens;  // per sequence
  bool ckpt;   // verify item: checkpoints after every token
  Mode mode;
  bool quick;  // part of --quick
};

struct Row {
  std::string name;
  double total_us, bytes, gbs, pct;
  double stage_us[5];  // with gdn_forward's own pick of the state-pass width (pass_cols)
  int pass_cols = 0;
  double pass_us[2] = {0, 0};  // the state pass at 16 and at 32 columns per block
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
      std::fprintf(help ? stdout : stderr, "usage: bench_gdn [--quick] [--warmup-ms MS]\n");
      return help ? 0 : 2;
    }
  }
  CK(cudaSetDevice(0));
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  const size_t l2 = static_cast<size_t>(prop.l2CacheSize);
  std::printf("bench_gdn: %s, cc %d.%d, %d SMs, L2 %.0f MB\n", prop.name, prop.major, prop.minor,
              prop.multiProcessorCount, l2 / 1e6);
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const int replays = quick ? 15 : 41;

  const double ceiling_gbs = voltserve::bench::read_ceiling_gbs(s, prop);
  std::printf("read ceiling: %.0f GB/s (read-only kernel over 2 x up to 2.4 GB)\n", ceiling_gbs);

  Params p;
  p.n_k_heads = 16;
  p.n_v_heads = 48;
  p.head_k_dim = 128;
  p.head_v_dim = 128;
  p.conv_kernel = 4;
  const int64_t conv_dim = p.conv_dim(), v_width = int64_t{p.n_v_heads} * p.head_v_dim;
  const int64_t state_bytes = p.recurrent_state_size() * 4, conv_state_bytes = int64_t{p.conv_state_width()} * 4;

  const std::vector<Case> all_cases = {
      {"decode b=1", 1, 1, false, Mode::kAuto, true},
      {"decode b=8", 8, 1, false, Mode::kAuto, true},
      {"verify b=1 k+1=4", 1, 4, true, Mode::kAuto, true},
      {"verify b=8 k+1=4", 8, 4, true, Mode::kAuto, false},
      {"verify b=1 k+1=8", 1, 8, true, Mode::kAuto, false},
      {"verify b=8 k+1=8", 8, 8, true, Mode::kAuto, true},
      {"segment b=1 T=64", 1, 64, false, Mode::kAuto, false},
      {"prefill b=1 T=512", 1, 512, false, Mode::kAuto, true},
      {"prefill b=1 T=2048", 1, 2048, false, Mode::kAuto, true},
      {"prefill b=4 T=2048", 4, 2048, false, Mode::kAuto, false},
      {"prefill b=1 T=2048 seq", 1, 2048, false, Mode::kSequential, false},
  };
  std::vector<Row> rows;
  for (const Case& c : all_cases) {
    if (quick && !c.quick) continue;
    const int32_t n_rows = c.batch * c.tokens;
    // State copies: enough that the states a replay touches never sit in L2.
    const int64_t step_state_bytes = int64_t{c.batch} * state_bytes;
    const int copies = static_cast<int>(
        std::clamp<int64_t>((3 * static_cast<int64_t>(l2) + step_state_bytes - 1) / step_state_bytes, 1, 64));
    const int32_t slots = c.batch * copies;
    float* qkv = alloc_fill(static_cast<size_t>(n_rows * conv_dim), 1, -1.0f, 1.0f);
    float* z = alloc_fill(static_cast<size_t>(n_rows * v_width), 2, -3.0f, 3.0f);
    float* b = alloc_fill(static_cast<size_t>(n_rows) * p.n_v_heads, 3, -4.0f, 4.0f);
    float* a = alloc_fill(static_cast<size_t>(n_rows) * p.n_v_heads, 4, -3.0f, 3.0f);
    float* conv_w = alloc_fill(static_cast<size_t>(conv_dim * p.conv_kernel), 5, -0.6f, 0.6f);
    float* a_log = alloc_fill(static_cast<size_t>(p.n_v_heads), 6, -2.0f, 1.0f);
    float* dt_bias = alloc_fill(static_cast<size_t>(p.n_v_heads), 7, -1.0f, 1.0f);
    float* norm_w = alloc_fill(static_cast<size_t>(p.head_v_dim), 8, 0.5f, 1.5f);
    float* conv_state = alloc_fill(static_cast<size_t>(slots) * p.conv_state_width(), 9, -1.0f, 1.0f);
    float* rec_state = alloc_fill(static_cast<size_t>(slots * p.recurrent_state_size()), 10, -0.5f, 0.5f);
    float* conv_ckpt = nullptr;
    float* rec_ckpt = nullptr;
    if (c.ckpt) {
      conv_ckpt = alloc_fill(static_cast<size_t>(c.batch * c.tokens) * p.conv_state_width(), 11, 0.0f, 0.0f);
      rec_ckpt =
          alloc_fill(static_cast<size_t>(int64_t{c.batch} * c.tokens * p.recurrent_state_size()), 12, 0.0f, 0.0f);
    }
    void* out;
    CK(cudaMalloc(&out, static_cast<size_t>(n_rows * v_width) * 2));
    const size_t ws_bytes = workspace_bytes(p, n_rows, c.batch, c.tokens);
    void* ws;
    CK(cudaMalloc(&ws, ws_bytes));
    // Copy r of the step: sequences i -> slots r * batch + i.
    std::vector<SeqDesc> seqs(static_cast<size_t>(c.batch * copies));
    for (int r = 0; r < copies; ++r) {
      for (int i = 0; i < c.batch; ++i) {
        SeqDesc& sd = seqs[static_cast<size_t>(r * c.batch + i)];
        sd.row0 = i * c.tokens;
        sd.n_tokens = c.tokens;
        sd.slot = r * c.batch + i;
        sd.ckpt = c.ckpt ? i : -1;
      }
    }
    SeqDesc* d_seqs;
    CK(cudaMalloc(&d_seqs, seqs.size() * sizeof(SeqDesc)));
    CK(cudaMemcpy(d_seqs, seqs.data(), seqs.size() * sizeof(SeqDesc), cudaMemcpyHostToDevice));
    CK(cudaDeviceSynchronize());

    auto args = [&](int i) {
      DeviceArgs d;
      d.qkv = qkv;
      d.qkv_stride = conv_dim;
      d.z = z;
      d.z_stride = v_width;
      d.b = b;
      d.b_stride = p.n_v_heads;
      d.a = a;
      d.a_stride = p.n_v_heads;
      d.w = {conv_w, a_log, dt_bias, norm_w};
      d.state = {conv_state, rec_state, conv_ckpt, rec_ckpt, c.ckpt ? c.tokens : 0};
      d.seqs = d_seqs + static_cast<size_t>(i % copies) * c.batch;
      d.n_seqs = c.batch;
      d.out = out;
      d.out_stride = v_width;
      d.out_dtype = voltserve::DType::kF16;
      d.mode = c.mode;
      d.n_rows = n_rows;
      d.max_seq_tokens = c.tokens;
      d.workspace = ws;
      d.workspace_bytes = ws_bytes;
      d.stream = s;
      return d;
    };
    const int launches = std::max(copies, 8);
    Row row;
    row.name = c.name;
    row.total_us = median_us_graph(s, launches, replays, [&](int i) { KS(gdn_forward(p, args(i))); });
    PlanOptions opt;
    opt.sm_count = prop.multiProcessorCount;  // as gdn_forward plans
    auto time_stage = [&](Stage st, const PlanOptions& o) {
      return median_us_graph(s, launches, replays, [&](int i) {
        ForwardPlan pl;
        KS(plan_forward(p, args(i), &pl, o));
        KS(launch_stage(pl, st));
      });
    };
    ForwardPlan plan;
    KS(plan_forward(p, args(0), &plan, opt));
    row.pass_cols = plan.pass_cols;
    for (Stage st : kStages) {
      const size_t si = static_cast<size_t>(st);
      row.stage_us[si] = stage_launch(plan, st).run ? time_stage(st, opt) : 0.0;
    }
    if (plan.state_pass.run) {
      for (int w = 0; w < 2; ++w) {
        PlanOptions forced = opt;
        forced.pass_cols = w == 0 ? 16 : 32;
        row.pass_us[w] = time_stage(Stage::kStatePass, forced);
      }
    }
    // Modelled bytes of one call: the recurrent state read and written once, the conv state read and written,
    // qkv / z / b / a read, out written (fp16), checkpoints written, and the workspace: conv outputs written and
    // read, plus the chunked form's W / U / Qe / P written and read (state pass: once per 32-column slice of W and
    // Qe from L2, counted once).
    const double rows_d = n_rows;
    double bytes = 2.0 * c.batch * (state_bytes + conv_state_bytes) +
                   rows_d * (conv_dim + v_width + 2 * p.n_v_heads) * 4 + rows_d * v_width * 2 +
                   2.0 * rows_d * conv_dim * 4;
    if (c.ckpt) bytes += rows_d * (state_bytes + conv_state_bytes);
    const bool chunked = c.mode == Mode::kChunked || (c.mode == Mode::kAuto && c.tokens > 64);
    if (chunked) bytes += 2.0 * rows_d * p.n_v_heads * (2 * p.head_k_dim + 2 * p.head_v_dim) * 4;
    row.bytes = bytes;
    row.gbs = bytes / (row.total_us * 1e3);
    row.pct = 100.0 * row.gbs / ceiling_gbs;
    std::printf("%-24s total %9.1f us  %8.1f GB/s  %5.1f%% of ceiling  (%.2f MB)   ", c.name.c_str(), row.total_us,
                row.gbs, row.pct, bytes / 1e6);
    for (Stage st : kStages) {
      if (row.stage_us[static_cast<size_t>(st)] > 0)
        std::printf(" %s %.1f us", stage_name(st), row.stage_us[static_cast<size_t>(st)]);
    }
    if (row.pass_us[0] > 0) {
      std::printf("  (pass_cols %d; state pass at 16 / 32 columns: %.1f / %.1f us)", row.pass_cols, row.pass_us[0],
                  row.pass_us[1]);
    }
    std::printf("\n");
    std::fflush(stdout);
    rows.push_back(row);
    for (void* ptr :
         {static_cast<void*>(qkv), static_cast<void*>(z), static_cast<void*>(b), static_cast<void*>(a),
          static_cast<void*>(conv_w), static_cast<void*>(a_log), static_cast<void*>(dt_bias),
          static_cast<void*>(norm_w), static_cast<void*>(conv_state), static_cast<void*>(rec_state),
          static_cast<void*>(conv_ckpt), static_cast<void*>(rec_ckpt), out, ws, static_cast<void*>(d_seqs)}) {
      CK(cudaFree(ptr));
    }
  }

  // Summary: the whole call, each kernel, the state pass at both widths, and the recurrent kernel alone as a
  // fraction of the ceiling (the state bytes it must move: read + write, plus checkpoints; decode / verify rows).
  std::printf("\n== summary (read ceiling %.0f GB/s; 27B GDN layer: 16 k-heads, 48 v-heads, 128 x 128) ==\n",
              ceiling_gbs);
  std::printf("%-24s %9s %8s %6s %8s %8s %8s %8s %8s %8s %8s %10s\n", "case", "total_us", "GB/s", "%ceil", "conv_us",
              "recur_us", "prep_us", "pass_us", "norm_us", "pass16", "pass32", "recur%ceil");
  for (const Row& r : rows) {
    const Case& c = *std::find_if(all_cases.begin(), all_cases.end(), [&](const Case& x) { return x.name == r.name; });
    const double rec_bytes = 2.0 * c.batch * state_bytes + (c.ckpt ? double(c.batch) * c.tokens * state_bytes : 0.0);
    const double rec_us = r.stage_us[static_cast<size_t>(Stage::kRecurrent)];
    char rec_pct[16] = "-";
    if (rec_us > 0 && !(c.mode == Mode::kAuto && c.tokens > 64)) {
      std::snprintf(rec_pct, sizeof rec_pct, "%.1f%%", 100.0 * rec_bytes / (rec_us * 1e3) / ceiling_gbs);
    }
    std::printf("%-24s %9.1f %8.1f %5.1f%% %8.1f %8.1f %8.1f %8.1f %8.1f %8.1f %8.1f %10s\n", r.name.c_str(),
                r.total_us, r.gbs, r.pct, r.stage_us[0], r.stage_us[1], r.stage_us[2], r.stage_us[3], r.stage_us[4],
                r.pass_us[0], r.pass_us[1], rec_pct);
  }
  CK(cudaStreamDestroy(s));
  return 0;
}
