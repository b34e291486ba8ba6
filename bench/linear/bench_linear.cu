// bench_linear (also `voltserve bench linear`): per 27B layer shape, format, family and M, the time of one
// linear_forward under CUDA-graph replay with rotating weight copies (> 2x L2), median of many replays, as
// us, GB/s and % of a read ceiling measured in the same run (read-only kernel over >= 4 GB); for M >= 512 the
// TFLOP/s next to a plain cuBLAS fp16 GEMM of the same shape; dense fp16 weights (lm_head, mtp.fc, in_proj_a/b,
// fixtures) through their own decode kernels and, for mtp.fc at M >= 512, cuBLAS. Prints a summary table last.
#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "linear/decode_pick.h"
#include "linear/dense_kmap.h"
#include "linear/linear.h"
#include "linear/linear_families.h"
#include "linear/sm80_kmap.h"

using namespace voltserve::kernels;

#define CK(call)                                                                                         \
  do {                                                                                                   \
    cudaError_t e_ = (call);                                                                             \
    if (e_ != cudaSuccess) {                                                                             \
      std::fprintf(stderr, "bench_linear: %s failed: %s (%s:%d)\n", #call, cudaGetErrorString(e_), __FILE__, \
                   __LINE__);                                                                            \
      std::exit(1);                                                                                      \
    }                                                                                                    \
  } while (0)

namespace {

__global__ void read_kernel(const uint4* p, size_t n, unsigned* sink) {
  uint32_t acc = 0;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const uint4 v = __ldcs(p + i);
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x9E3779B9u) *sink = acc;  // keeps the loads alive
}

// mma.sync throughput (--mma-peak): every warp runs C independent accumulator chains of m16n8k16 f16 x f16 -> f32,
// the sm80 decode kernels' instruction. Block 0's thread 0 reports the cycles it took.
template <int C>
__global__ void mma_peak_kernel(int iters, float* sink, long long* cycles) {
  const uint32_t a = 0x3C003C00u ^ (threadIdx.x & 1u);  // f16 pairs near 1 (never folded: asm volatile)
  float acc[C][4] = {};
  const long long t0 = clock64();
  for (int i = 0; i < iters; ++i) {
#pragma unroll
    for (int c = 0; c < C; ++c) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
      asm volatile(
          "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%4,%4,%4}, {%4,%4}, {%0,%1,%2,%3};"
          : "+f"(acc[c][0]), "+f"(acc[c][1]), "+f"(acc[c][2]), "+f"(acc[c][3])
          : "r"(a));
#else
      __trap();  // --mma-peak runs on sm_80+ only
#endif
    }
  }
  const long long t1 = clock64();
  float sum = 0.0f;
  for (int c = 0; c < C; ++c) sum += acc[c][0] + acc[c][1] + acc[c][2] + acc[c][3];
  if (sum == 1234.5f) *sink = sum;
  if (threadIdx.x == 0 && blockIdx.x == 0) *cycles = t1 - t0;
}

__device__ uint32_t hash32(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return static_cast<uint32_t>(x);
}

// mode 0: random bytes; 1: e4m3 group scales in [2^-3, 2^7]; 2: finite e4m3 weights; 3: fp16 in [-1, 1].
__global__ void fill_kernel(uint8_t* p, size_t n, uint64_t seed, int mode) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const uint32_t r = hash32(seed * 0x9E3779B97F4A7C15ull + i);
    if (mode == 0) p[i] = static_cast<uint8_t>(r);
    if (mode == 1) p[i] = static_cast<uint8_t>(((4 + r % 11) << 3) | ((r >> 8) & 7));
    if (mode == 2) p[i] = static_cast<uint8_t>(((r >> 16) & 0x80) | ((r % 13) << 3) | ((r >> 8) & 7));
    if (mode == 3 && i % 2 == 0) {
      const __half h = __float2half((static_cast<float>(r & 0xFFFF) / 32768.0f) - 1.0f);
      std::memcpy(p + i, &h, 2);
    }
  }
}

void fill(void* p, size_t n, uint64_t seed, int mode) {
  fill_kernel<<<1024, 256>>>(static_cast<uint8_t*>(p), n, seed, mode);
  CK(cudaGetLastError());
}

float kWarmupMs = 25.0f;  // --warmup-ms

template <typename F>
double median_us_graph(cudaStream_t s, int launches, int replays, F&& enqueue) {
  enqueue(0);  // warm-up outside capture (lazy init of cuBLAS and modules)
  CK(cudaStreamSynchronize(s));
  cudaGraph_t g;
  cudaGraphExec_t ge;
  CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < launches; ++i) enqueue(i);
  CK(cudaStreamEndCapture(s, &g));
  CK(cudaGraphInstantiate(&ge, g, 0));
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  auto replay_ms = [&] {  // one timed replay of the whole graph
    CK(cudaEventRecord(a, s));
    CK(cudaGraphLaunch(ge, s));
    CK(cudaEventRecord(b, s));
    CK(cudaEventSynchronize(b));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, a, b));
    return ms;
  };
  // Warm-up replays for >= kWarmupMs of GPU time: the GPU lowers its clocks while the host allocates and fills the next
  // weights, and a kernel timed right after ran up to 10% slow (NVFP4 decode, whose integer work follows the SM
  // clock) until they recovered. Serving keeps the GPU busy, so steady clocks are the case to measure.
  float warm_ms = 0;
  for (int i = 0; i < 10000 && warm_ms < kWarmupMs; ++i) warm_ms += replay_ms();
  std::vector<double> t;
  for (int r = 0; r < replays; ++r) t.push_back(replay_ms() * 1000.0 / launches);
  std::sort(t.begin(), t.end());
  CK(cudaEventDestroy(a));
  CK(cudaEventDestroy(b));
  CK(cudaGraphExecDestroy(ge));
  CK(cudaGraphDestroy(g));
  return t[t.size() / 2];
}

// A weight shape and how often the 27B model streams it per forward, counted two ways: once per checkpoint tensor
// (per_tensor), and as an engine launches them with the projections that read the same input merged into one
// weight (merged: merge_packed_rows, GDN in_proj_qkv + in_proj_z, attention q + k + v, MLP gate + up). The
// summary weights each shape by bytes x count for both. Merged weights carry per-row scales (the parts' global
// scales), as the engine would run them.
struct Shape {
  const char* name;
  int64_t n, k;
  int per_tensor;
  int merged;
};

const Shape kShapes[] = {
    {"gdn.in_proj_qkv", 10240, 5120, 48, 0}, {"gdn.in_proj_z", 6144, 5120, 48, 0},
    {"gdn.out_proj", 5120, 6144, 48, 48},    {"attn.q_proj", 12288, 5120, 16, 0},
    {"attn.k/v_proj", 1024, 5120, 32, 0},    {"attn.o_proj", 5120, 6144, 16, 16},
    {"mlp.gate/up", 17408, 5120, 128, 0},    {"mlp.down", 5120, 17408, 64, 64},
    {"gdn.qkv+z", 16384, 5120, 0, 48},       {"attn.q+k+v", 14336, 5120, 0, 16},
    {"mlp.gate+up", 34816, 5120, 0, 64},
    // Last: its long run at the power cap leaves the clocks low for a while (the next shape's M = 1 ran 3-6% slow).
    {"lm_head", 248320, 5120, 1, 1},
};

struct Row {
  std::string shape;
  WeightFormat format;
  KernelFamily fam;
  int64_t m;
  double us, gbs, pct, weight_bytes;
  int per_tensor, merged;  // Shape's counts
};

struct Weights {
  std::vector<void*> codes, scales;
  float* row_scales = nullptr;  // merged shapes: per-row multipliers (channel_scales)
  size_t code_bytes = 0, scale_bytes = 0;
  WeightFormat format = WeightFormat::kNvfp4;
  KernelFamily fam = KernelFamily::kSm80;
  int64_t n = 0, k = 0;
  // Copy i (mod the number of copies; the benchmark rotates through them so L2 holds none).
  PackedWeightView view(int i) const {
    const size_t c = static_cast<size_t>(i) % codes.size();
    PackedWeightView v;
    v.format = format;
    v.family = fam;
    v.n = n;
    v.k = k;
    v.codes = static_cast<const uint8_t*>(codes[c]);
    v.scales = scale_bytes ? static_cast<const uint8_t*>(scales[c]) : nullptr;
    v.global_scale = row_scales ? 1.0f : 1.0f / 2048.0f;
    v.tensor_scale = row_scales ? 1.0f : 0.01f;
    v.channel_scales = row_scales;
    return v;
  }
  ~Weights() {
    for (void* p : codes) cudaFree(p);
    for (void* p : scales) cudaFree(p);
    cudaFree(row_scales);
  }
};

void make_weights(Weights& w, WeightFormat format, KernelFamily fam, const Shape& sh, size_t l2) {
  const int64_t n = sh.n, k = sh.k;
  w.format = format;
  w.fam = fam;
  w.n = n;
  w.k = k;
  const int tr = fam == KernelFamily::kSm70 ? 32 : 16;
  const int64_t rb = format == WeightFormat::kNvfp4 ? k / 2 : k;
  const int64_t kblocks = fam == KernelFamily::kSm70 ? (rb + 15) / 16 : sm80_kblocks(format == WeightFormat::kFp8, k);
  const int64_t units = (n + tr - 1) / tr * kblocks * 32;
  w.code_bytes = static_cast<size_t>(units * 16);
  w.scale_bytes = format == WeightFormat::kNvfp4 ? static_cast<size_t>(units * 2) : 0;
  const size_t per = w.code_bytes + w.scale_bytes;
  const int copies = static_cast<int>(std::max<size_t>(1, std::min<size_t>(64, (3 * l2 + per - 1) / per)));
  for (int c = 0; c < copies; ++c) {
    void* p;
    CK(cudaMalloc(&p, w.code_bytes));
    fill(p, w.code_bytes, 11 + c, format == WeightFormat::kNvfp4 ? 0 : 2);
    w.codes.push_back(p);
    if (w.scale_bytes) {
      CK(cudaMalloc(&p, w.scale_bytes));
      fill(p, w.scale_bytes, 77 + c, 1);
      w.scales.push_back(p);
    }
  }
  if (sh.per_tensor == 0) {  // a merged weight: its parts' scales per row
    std::vector<float> rs(static_cast<size_t>(n));
    for (int64_t r = 0; r < n; ++r) rs[r] = (format == WeightFormat::kNvfp4 ? 1.0f / 2048.0f : 0.01f) * (1 + r % 3);
    CK(cudaMalloc(&w.row_scales, rs.size() * sizeof(float)));
    CK(cudaMemcpy(w.row_scales, rs.data(), rs.size() * sizeof(float), cudaMemcpyHostToDevice));
  }
}

// Dense fp16 weights (WeightFormat::kDense: row-major [n, k], no prepack; BF16 checkpoint tensors converted at load):
// the tied-or-not lm_head / embedding table, the MTP fc, GDN in_proj_a / b, and tiny fixture shapes (latency only).
struct DenseShape {
  const char* name;
  int64_t n, k;
};

const DenseShape kDenseShapes[] = {
    {"lm_head.f16", 248320, 5120}, {"mtp.fc.f16", 5120, 10240},    {"gdn.in_proj_a/b.f16", 48, 5120},
    {"fixture.128x128", 128, 128}, {"fixture.32x64", 32, 64},       {"fixture.16x16", 16, 16},
};

// Copies of one dense weight in one allocation, each 256-byte aligned, together > 3 x L2 where that takes at most 1024
// copies (the fixtures stay in L2: they measure latency).
struct DenseWeights {
  void* buf = nullptr;
  size_t bytes = 0, pitch = 0;
  int copies = 1;
  int64_t n = 0, k = 0;
  KernelFamily fam = KernelFamily::kSm80;
  PackedWeightView view(int i) const {
    PackedWeightView v;
    v.format = WeightFormat::kDense;
    v.family = fam;
    v.n = n;
    v.k = k;
    v.codes = static_cast<const uint8_t*>(buf) + static_cast<size_t>(i % copies) * pitch;
    return v;
  }
  ~DenseWeights() { cudaFree(buf); }
};

void make_dense_weights(DenseWeights& w, const DenseShape& sh, KernelFamily fam, size_t l2) {
  w.n = sh.n;
  w.k = sh.k;
  w.fam = fam;
  w.bytes = static_cast<size_t>(sh.n * sh.k * 2);
  w.pitch = (w.bytes + 255) / 256 * 256;
  w.copies = static_cast<int>(std::max<size_t>(1, std::min<size_t>(1024, (3 * l2 + w.bytes - 1) / w.bytes)));
  CK(cudaMalloc(&w.buf, w.pitch * w.copies));
  fill(w.buf, w.pitch * w.copies, 21, 3);
}

// Median µs of one linear_forward over the weight's rotating copies (CUDA-graph replay); exits on an error. With a
// DecodeChoice: the sm80 decode kernel with that variant / prefetch budget (linear_families.h).
double time_linear(cudaStream_t s, const Weights& w, const LinearArgs& a, int replays,
                   const sm80::DecodeChoice* choice = nullptr) {
  const int copies = static_cast<int>(w.codes.size());
  return median_us_graph(s, std::max(copies, 8), replays, [&](int i) {
    const KernelStatus st = choice != nullptr ? sm80::linear_decode(w.view(i), a, *choice) : linear_forward(w.view(i), a);
    if (!st.ok()) {
      std::fprintf(stderr, "bench_linear: linear_forward: %s (%s:%d)\n", st.message, st.file, st.line);
      std::exit(1);
    }
  });
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  bool sm70_too = true;
  bool sweep = false;
  bool sweep_only = false;
  bool pf_sweep = false;
  bool mma_peak = false;
  const char* only = nullptr;  // --only: this shape only
  bool chunked_x = true;       // x token-chunked for 2 <= M <= 16 (x_layout.h), as the engine passes it
  const char* out_path = nullptr;
  std::vector<int> sweep_variants;  // --variants: the sweep's variants (default: all)
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--quick")) quick = true;
    else if (!std::strcmp(argv[i], "--no-sm70")) sm70_too = false;
    else if (!std::strcmp(argv[i], "--row-major-x")) chunked_x = false;
    else if (!std::strcmp(argv[i], "--sweep")) sweep = true;
    else if (!std::strcmp(argv[i], "--sweep-only")) sweep = sweep_only = true;
    else if (!std::strcmp(argv[i], "--prefetch-sweep")) pf_sweep = sweep_only = true;
    else if (!std::strcmp(argv[i], "--mma-peak")) mma_peak = sweep_only = true;
    else if (!std::strcmp(argv[i], "--only") && i + 1 < argc) only = argv[++i];
    else if (!std::strcmp(argv[i], "--out") && i + 1 < argc) out_path = argv[++i];
    else if (!std::strcmp(argv[i], "--variants") && i + 1 < argc) {
      for (const char* q = argv[++i]; *q != '\0';) {
        char* end = nullptr;
        const long v = std::strtol(q, &end, 10);
        if (end == q || v < 0) {
          std::fprintf(stderr, "bench_linear: --variants wants a comma-separated list of variant ids (decode_pick.h)\n");
          return 2;
        }
        sweep_variants.push_back(static_cast<int>(v));
        q = *end == ',' ? end + 1 : end;
      }
    }
    else if (!std::strcmp(argv[i], "--warmup-ms") && i + 1 < argc) kWarmupMs = std::strtof(argv[++i], nullptr);
    else {
      const bool help = !std::strcmp(argv[i], "--help") || !std::strcmp(argv[i], "-h");
      std::fprintf(help ? stdout : stderr,
                   "usage: bench_linear [--quick] [--no-sm70] [--sweep | --sweep-only | --prefetch-sweep | --mma-peak] [--only SHAPE] "
                   "[--variants 0,4,21,... (the sweep's variants: kDecodeCandidates ids, 0 = the default pick)] "
                   "[--out results.tsv] [--warmup-ms MS] [--row-major-x]\n"
                   "x is token-chunked for 2 <= M <= 16 (kernels/linear/x_layout.h) unless --row-major-x\nshapes (n x k; merged = projections merged by merge_packed_rows):\n");
      for (const Shape& sh : kShapes) {
        std::fprintf(help ? stdout : stderr, "  %-16s %6lld x %-6lld%s\n", sh.name, static_cast<long long>(sh.n),
                     static_cast<long long>(sh.k), sh.per_tensor == 0 ? "  (merged)" : "");
      }
      for (const DenseShape& sh : kDenseShapes) {
        std::fprintf(help ? stdout : stderr, "  %-16s %6lld x %-6lld  (dense fp16; --sweep adds its warps per block)\n",
                     sh.name, static_cast<long long>(sh.n), static_cast<long long>(sh.k));
      }
      return help ? 0 : 2;
    }
  }
  if (only != nullptr &&
      std::none_of(std::begin(kShapes), std::end(kShapes), [&](const Shape& sh) { return !std::strcmp(only, sh.name); }) &&
      std::none_of(std::begin(kDenseShapes), std::end(kDenseShapes),
                   [&](const DenseShape& sh) { return !std::strcmp(only, sh.name); })) {
    std::fprintf(stderr, "bench_linear: --only %s: no such shape (bench_linear --help lists them)\n", only);
    return 2;
  }
  int dev = 0;
  CK(cudaSetDevice(dev));
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, dev));
  const int cc = prop.major * 10 + prop.minor;
  const size_t l2 = static_cast<size_t>(prop.l2CacheSize);
  std::printf("bench_linear: %s, cc %d, %d SMs, L2 %.0f MB; x %s\n", prop.name, cc, prop.multiProcessorCount, l2 / 1e6,
              chunked_x ? "token-chunked for 2 <= M <= 16, else row-major" : "row-major");
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cublasHandle_t cublas;
  if (cublasCreate(&cublas) != CUBLAS_STATUS_SUCCESS) {
    std::fprintf(stderr, "bench_linear: cublasCreate failed\n");
    return 1;
  }
  cublasSetStream(cublas, s);
  unsigned* sink;
  CK(cudaMalloc(&sink, 4));

  // Read ceiling: read-only kernel over 4.5 GB (2 halves rotated).
  double ceiling_gbs = 0;
  {
    const size_t bytes = size_t{4608} << 20;
    void* buf;
    CK(cudaMalloc(&buf, bytes));
    fill(buf, bytes, 5, 0);
    const size_t half = bytes / 2 / 16;
    const int grid = prop.multiProcessorCount * 8;
    const double us = median_us_graph(s, 4, 15, [&](int i) {
      read_kernel<<<grid, 512, 0, s>>>(static_cast<const uint4*>(buf) + (i % 2) * half, half, sink);
    });
    ceiling_gbs = (bytes / 2) / (us * 1e3);
    CK(cudaFree(buf));
    std::printf("read ceiling: %.0f GB/s (read-only kernel, 2 x %.2f GB)\n", ceiling_gbs, bytes / 2 / 1e9);
  }

  std::vector<Row> rows;
  void* x;
  void* y;
  void* ws;
  const int64_t max_m = 2048;
  CK(cudaMalloc(&x, max_m * 17408 * 2));
  fill(x, max_m * 17408 * 2, 3, 3);
  CK(cudaMalloc(&y, max_m * 17408 * 4));  // also >= 16 x 248320 x 4 (lm_head, M <= 16)
  const size_t ws_bytes = size_t{1} << 30;
  CK(cudaMalloc(&ws, ws_bytes));
  auto decode_args = [&](int64_t m) {  // an M <= 16 call on this run's x, y and stream
    LinearArgs a;
    a.x = x;
    a.m = m;
    a.y = y;
    a.stream = s;
    a.pdl = true;  // as the engine launches them on sm_90+ (ignored below)
    if (chunked_x && m >= kChunkedPreferredMinRows && m <= kChunkedMaxRows) a.x_layout = XLayout::kTokenChunked;
    return a;
  };
  std::vector<int64_t> ms = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
  if (quick) ms = {1, 4, 8, 9, 16};
  std::vector<KernelFamily> fams = {KernelFamily::kSm80};
  if (cc < 80) fams = {KernelFamily::kSm70};
  else if (sm70_too) fams.push_back(KernelFamily::kSm70);

  if (sweep && cc >= 80) {
    // sm80 decode-kernel variants (kDecodeCandidates, decode_pick.h) on the shapes that carry most bytes.
    std::printf("\n== sweep: sm80 variants (ids of kDecodeCandidates, kernels/linear/decode_pick.h) ==\n");
    for (const Shape& sh : kShapes) {
      if (only != nullptr && std::strcmp(only, sh.name) != 0) continue;
      for (WeightFormat format : {WeightFormat::kNvfp4, WeightFormat::kFp8}) {
        if (format == WeightFormat::kFp8 && sh.n == 248320) continue;
        Weights w;
        make_weights(w, format, KernelFamily::kSm80, sh, l2);
        for (int64_t m : {int64_t{1}, int64_t{8}, int64_t{16}}) {
          std::printf("%-16s %-5s m=%-3lld", sh.name, weight_format_name(format), static_cast<long long>(m));
          // {variant, pdl}: variant 0 = the default pick; o = programmatic dependent launch, p = plain.
          std::vector<std::pair<int, bool>> variants = {{0, true}, {0, false}};
          for (const auto& c : sm80::kDecodeCandidates) variants.emplace_back(c.id, true);
          if (!sweep_variants.empty()) {
            variants.clear();
            for (int v : sweep_variants) variants.emplace_back(v, true);
          }
          for (const auto& [variant, pdl] : variants) {
            if (variant != 0 && !sm80::decode_variant_runs_here(variant)) continue;
            LinearArgs a = decode_args(m);
            a.pdl = pdl;
            const sm80::DecodeChoice choice{variant, -1};
            const double us = time_linear(s, w, a, 15, &choice);
            const double gbs = (w.code_bytes + w.scale_bytes) / (us * 1e3);
            std::printf("  v%d/%c %5.1fus %4.1f%%", variant, pdl ? 'o' : 'p', us, 100.0 * gbs / ceiling_gbs);
          }
          std::printf("\n");
          std::fflush(stdout);
        }
      }
    }
  }

  if (pf_sweep && cc >= 80) {
    // FP8 L2 prefetch budgets (DecodeChoice::l2_prefetch_kib; 0 = none), default variant, with programmatic dependent
    // launch (o) and plain launches (p).
    std::printf("\n== prefetch sweep: FP8, {o: PDL | p: plain}{l2_prefetch_kib} ==\n");
    for (const Shape& sh : kShapes) {
      if (sh.n == 248320 || (only != nullptr && std::strcmp(only, sh.name) != 0)) continue;
      Weights w;
      make_weights(w, WeightFormat::kFp8, KernelFamily::kSm80, sh, l2);
      for (int64_t m : {int64_t{1}, int64_t{8}, int64_t{16}}) {
        std::printf("%-16s m=%-3lld", sh.name, static_cast<long long>(m));
        const int configs[][2] = {{1, 0},     {1, 2048}, {1, 4096}, {1, 8192},
                                  {1, 12288}, {1, 16384}, {2, 0},   {2, 8192}};
        for (const auto& c : configs) {
          LinearArgs a = decode_args(m);
          a.pdl = c[0] == 1;
          const sm80::DecodeChoice choice{0, c[1]};
          const double us = time_linear(s, w, a, 15, &choice);
          const double gbs = (w.code_bytes + w.scale_bytes) / (us * 1e3);
          std::printf("  %c%d %5.1fus %4.1f%%", c[0] == 1 ? 'o' : 'p', c[1], us, 100.0 * gbs / ceiling_gbs);
        }
        std::printf("\n");
        std::fflush(stdout);
      }
    }
  }

  if (mma_peak && cc >= 80) {
    // What the tensor cores give the decode kernels' MMA: m16n8k16 per SM and cycle, by resident warps per SM and
    // independent accumulator chains per warp, against what the weight-streaming kernels need at the targets
    // (NVFP4: 4 MMAs per 16 rows x 64 k = 576 bytes and token tile; FP8: 2 per 512 bytes).
    std::printf("\n== mma peak: mma.sync.m16n8k16 f16 x f16 -> f32 ==\n");
    float* fsink;
    long long* dcycles;
    CK(cudaMalloc(&fsink, 4));
    CK(cudaMalloc(&dcycles, 8));
    double best = 0;
    for (int warps : {4, 8, 16, 32}) {
      for (int chains : {1, 2, 4, 8}) {
        const int threads = warps * 32;  // one block per SM, so block 0's cycles span the whole kernel
        const int blocks = prop.multiProcessorCount;
        const int iters = 4096;
        auto launch = [&] {
          switch (chains) {
            case 1: mma_peak_kernel<1><<<blocks, threads, 0, s>>>(iters, fsink, dcycles); break;
            case 2: mma_peak_kernel<2><<<blocks, threads, 0, s>>>(iters, fsink, dcycles); break;
            case 4: mma_peak_kernel<4><<<blocks, threads, 0, s>>>(iters, fsink, dcycles); break;
            default: mma_peak_kernel<8><<<blocks, threads, 0, s>>>(iters, fsink, dcycles); break;
          }
        };
        launch();  // warm-up
        cudaEvent_t e0, e1;
        CK(cudaEventCreate(&e0));
        CK(cudaEventCreate(&e1));
        CK(cudaEventRecord(e0, s));
        launch();
        CK(cudaEventRecord(e1, s));
        CK(cudaEventSynchronize(e1));
        CK(cudaGetLastError());
        float ms = 0;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        long long cycles = 0;
        CK(cudaMemcpy(&cycles, dcycles, 8, cudaMemcpyDeviceToHost));
        CK(cudaEventDestroy(e0));
        CK(cudaEventDestroy(e1));
        const double per_sm = static_cast<double>(warps) * iters * chains;  // MMAs each SM issued
        const double per_cycle = per_sm / static_cast<double>(cycles);
        best = std::max(best, per_cycle);
        std::printf("warps/SM %2d chains/warp %d: %.3f MMA per SM-cycle (%.1f cycles each per scheduler), %.0f TFLOP/s"
                    " at %.0f MHz\n",
                    warps, chains, per_cycle, 4.0 / per_cycle, blocks * per_sm * 4096.0 / (ms * 1e9),
                    cycles / (ms * 1e3));
      }
    }
    // Needed by the decode kernels at a fraction of the read ceiling, per SM-cycle, at clock f (MHz).
    const double sms = prop.multiProcessorCount;
    auto need = [&](double frac, double bytes_per_mma, double mhz) {
      return frac * ceiling_gbs * 1e9 / bytes_per_mma / sms / (mhz * 1e6);
    };
    for (double mhz : {1200.0, 1400.0, 1700.0}) {
      std::printf("at %.0f MHz, MMA per SM-cycle needed: NVFP4 90%% M<=8 %.3f, 85%% M=9..16 %.3f; FP8 90%% %.3f, 85%% "
                  "%.3f (best measured %.3f)\n",
                  mhz, need(0.90, 576.0 / 4, mhz), need(0.85, 576.0 / 8, mhz), need(0.90, 512.0 / 2, mhz),
                  need(0.85, 512.0 / 4, mhz), best);
    }
    CK(cudaFree(fsink));
    CK(cudaFree(dcycles));
  }

  if (sweep_only) return 0;
  for (const Shape& sh : kShapes) {
    if (only != nullptr && std::strcmp(only, sh.name) != 0) continue;
    for (WeightFormat format : {WeightFormat::kNvfp4, WeightFormat::kFp8}) {
      if (format == WeightFormat::kFp8 && sh.n == 248320) continue;  // lm_head stays NVFP4 (ModelOpt recipe)
      for (KernelFamily fam : fams) {
        Weights w;
        make_weights(w, format, fam, sh, l2);
        std::vector<int64_t> fam_ms = ms;
        if (fam == KernelFamily::kSm70 && cc >= 80) fam_ms = {1, 8, 16};
        for (int64_t m : fam_ms) {
          const double us = time_linear(s, w, decode_args(m), 21);
          const double bytes = static_cast<double>(w.code_bytes + w.scale_bytes) + m * sh.k * 2.0 + m * sh.n * 4.0;
          const double gbs = bytes / (us * 1e3);
          rows.push_back({sh.name, format, fam, m, us, gbs, 100.0 * gbs / ceiling_gbs,
                          static_cast<double>(w.code_bytes + w.scale_bytes), sh.per_tensor, sh.merged});
          std::string pick;  // sm80: the default decode variant and its resident blocks per SM
          if (fam == KernelFamily::kSm80) {
            int resident = 0;
            const int v = sm80::default_decode_variant(w.view(0), m, &resident);
            pick = "  v" + std::to_string(v) + " x" + std::to_string(resident) + "/SM";
          }
          std::printf("%-16s n=%-6lld k=%-6lld %-5s %s m=%-3lld %9.2f us %7.0f GB/s %5.1f%%%s\n", sh.name,
                      static_cast<long long>(sh.n), static_cast<long long>(sh.k), weight_format_name(format), family_name(fam),
                      static_cast<long long>(m), us, gbs, 100.0 * gbs / ceiling_gbs, pick.c_str());
          std::fflush(stdout);
        }
      }
    }
  }

  // Dense fp16 weights: the decode kernels of every family at M <= 16 (x token-chunked from 2 tokens, as above), with
  // --sweep every warps-per-block choice; M >= 512 is cuBLAS on the weight itself (the dense GEMM path).
  struct DenseRow {
    std::string shape;
    KernelFamily fam;
    int64_t m;
    double us, gbs, pct;
  };
  std::vector<DenseRow> dense_rows;
  for (const DenseShape& sh : kDenseShapes) {
    if (only != nullptr && std::strcmp(only, sh.name) != 0) continue;
    for (KernelFamily fam : fams) {
      DenseWeights w;
      make_dense_weights(w, sh, fam, l2);
      std::vector<int64_t> fam_ms = ms;
      if (fam == KernelFamily::kSm70 && cc >= 80) fam_ms = {1, 8, 16};
      auto time_dense = [&](const LinearArgs& a, int warps = 0) {  // warps per block, 0: the default
        return median_us_graph(s, std::max(w.copies, 8), 21, [&](int i) {
          const KernelStatus st = warps == 0                     ? linear_forward(w.view(i), a)
                                  : fam == KernelFamily::kSm80 ? sm80::linear_dense_decode(w.view(i), a, warps)
                                                               : sm70::linear_dense_decode(w.view(i), a, warps);
          if (!st.ok()) {
            std::fprintf(stderr, "bench_linear: linear_forward (dense): %s (%s:%d)\n", st.message, st.file, st.line);
            std::exit(1);
          }
        });
      };
      for (int64_t m : fam_ms) {
        const double us = time_dense(decode_args(m));
        const double bytes = static_cast<double>(w.bytes) + m * sh.k * 2.0 + m * sh.n * 4.0;
        const double gbs = bytes / (us * 1e3);
        dense_rows.push_back({sh.name, fam, m, us, gbs, 100.0 * gbs / ceiling_gbs});
        std::printf("%-16s n=%-6lld k=%-6lld dense %s m=%-3lld %9.2f us %7.0f GB/s %5.1f%%  warps %d x%d copies\n", sh.name,
                    static_cast<long long>(sh.n), static_cast<long long>(sh.k), family_name(fam), static_cast<long long>(m),
                    us, gbs, 100.0 * gbs / ceiling_gbs, dense::decode_warps(sh.n, sh.k), w.copies);
        std::fflush(stdout);
      }
      if (sweep) {
        for (int64_t m : {int64_t{1}, int64_t{8}, int64_t{16}}) {
          std::printf("%-16s dense %s m=%-3lld", sh.name, family_name(fam), static_cast<long long>(m));
          for (int warps : {4, 8, 16}) {
            const double us = time_dense(decode_args(m), warps);
            std::printf("  w%d %8.2fus %5.1f%%", warps, us, 100.0 * (w.bytes / (us * 1e3)) / ceiling_gbs);
          }
          std::printf("\n");
          std::fflush(stdout);
        }
      }
      if (sh.n == 5120 && sh.k == 10240 && fam == fams[0]) {  // mtp.fc at prefill sizes: the cuBLAS path
        for (int64_t m : {int64_t{512}, int64_t{2048}}) {
          if (quick && m == 2048) continue;
          LinearArgs a;
          a.x = x;
          a.m = m;
          a.y = y;
          a.stream = s;
          a.cublas_handle = cublas;
          const double us = median_us_graph(s, 4, 11, [&](int i) {
            const KernelStatus st = linear_forward(w.view(i), a);
            if (!st.ok()) {
              std::fprintf(stderr, "bench_linear: linear_forward (dense GEMM): %s (%s:%d)\n", st.message, st.file, st.line);
              std::exit(1);
            }
          });
          std::printf("%-16s n=%-6lld k=%-6lld dense cuBLAS m=%-5lld %9.1f us %6.1f TFLOP/s\n", sh.name,
                      static_cast<long long>(sh.n), static_cast<long long>(sh.k), static_cast<long long>(m), us,
                      2.0 * m * sh.n * sh.k / (us * 1e6));
          std::fflush(stdout);
        }
      }
    }
  }

  // Large M: dequantize + cuBLAS (our path) vs cuBLAS fp16 GEMM on a ready fp16 weight.
  struct Big {
    std::string shape;
    WeightFormat format;
    int64_t m;
    double us, tflops, cublas_tflops;
  };
  std::vector<Big> bigs;
  for (const Shape& sh : kShapes) {
    // Large M: the checkpoint tensors (a merged weight runs the same dequantization + GEMM, only longer).
    if (sh.n == 248320 || sh.per_tensor == 0 || (only != nullptr && std::strcmp(only, sh.name) != 0)) continue;
    for (WeightFormat format : {WeightFormat::kNvfp4, WeightFormat::kFp8}) {
      for (int64_t m : {int64_t{512}, int64_t{2048}}) {
        if (quick && m == 2048) continue;
        Weights w;
        make_weights(w, format, fams[0], sh, 0);
        const PackedWeightView v = w.view(0);
        LinearArgs a;
        a.x = x;
        a.m = m;
        a.y = y;
        a.stream = s;
        a.cublas_handle = cublas;
        a.workspace = ws;
        a.workspace_bytes = ws_bytes;
        const double us = median_us_graph(s, 4, 11, [&](int) {
          const KernelStatus st = linear_forward(v, a);
          if (!st.ok()) {
            std::fprintf(stderr, "bench_linear: linear_forward: %s (%s:%d)\n", st.message, st.file, st.line);
            std::exit(1);
          }
        });
        // Plain cuBLAS fp16 GEMM with the fp16 weight already in `ws` (left there by the run above).
        const float alpha = 1.0f, beta = 0.0f;
        const double cus = median_us_graph(s, 4, 11, [&](int) {
          cublasGemmEx(cublas, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(sh.n), static_cast<int>(m),
                       static_cast<int>(sh.k), &alpha, ws, CUDA_R_16F, static_cast<int>(sh.k), x, CUDA_R_16F,
                       static_cast<int>(sh.k), &beta, y, CUDA_R_32F, static_cast<int>(sh.n), CUBLAS_COMPUTE_32F,
                       CUBLAS_GEMM_DEFAULT);
        });
        const double flops = 2.0 * m * sh.n * sh.k;
        bigs.push_back({sh.name, format, m, us, flops / (us * 1e6), flops / (cus * 1e6)});
        std::printf("%-16s n=%-6lld k=%-6lld %-5s m=%-5lld %9.1f us %6.1f TFLOP/s  cuBLAS fp16 %6.1f TFLOP/s  %5.1f%%\n",
                    sh.name, static_cast<long long>(sh.n), static_cast<long long>(sh.k), weight_format_name(format),
                    static_cast<long long>(m), us, flops / (us * 1e6), flops / (cus * 1e6), 100.0 * cus / us);
        std::fflush(stdout);
      }
    }
  }

  if (out_path != nullptr) {
    if (FILE* f = std::fopen(out_path, "w")) {
      std::fprintf(f, "shape\tcodec\tfamily\tm\tus\tGBps\tpct_ceiling\n");
      for (const Row& r : rows)
        std::fprintf(f, "%s\t%s\t%s\t%lld\t%.3f\t%.1f\t%.2f\n", r.shape.c_str(), weight_format_name(r.format),
                     family_name(r.fam), static_cast<long long>(r.m), r.us, r.gbs, r.pct);
      for (const DenseRow& r : dense_rows)
        std::fprintf(f, "%s\tdense\t%s\t%lld\t%.3f\t%.1f\t%.2f\n", r.shape.c_str(), family_name(r.fam),
                     static_cast<long long>(r.m), r.us, r.gbs, r.pct);
      for (const Big& b : bigs)
        std::fprintf(f, "%s\t%s\tdequant+cublas\t%lld\t%.3f\tTFLOPs=%.1f\tcublas_fp16=%.1f\n", b.shape.c_str(),
                     weight_format_name(b.format), static_cast<long long>(b.m), b.us, b.tflops, b.cublas_tflops);
      std::fclose(f);
    }
  }

  // Summary: weight-byte weighted % of ceiling over the 27B layer shapes (bytes x count), lm_head apart; "tensors"
  // counts one launch per checkpoint tensor, "merged" the launches with merged projections (Shape).
  std::printf("\n== summary (read ceiling %.0f GB/s) ==\n", ceiling_gbs);
  std::printf("%-6s %-5s %-8s %8s %8s %8s %8s\n", "family", "format", "M", "tensors%", "merged%", "lm_head%", "min%");
  struct Mean {
    double num = 0, den = 0;
    void add(double pct, double w) { num += pct * w, den += w; }
    std::string str() const {
      char buf[16] = "-";
      if (den > 0) std::snprintf(buf, sizeof buf, "%.1f%%", num / den);
      return buf;
    }
  };
  for (KernelFamily fam : fams) {
    for (WeightFormat format : {WeightFormat::kNvfp4, WeightFormat::kFp8}) {
      for (int grp = 0; grp < 2; ++grp) {
        Mean tensors, merged, head;
        double mn = 1e9;  // the lowest per-tensor row
        for (const Row& r : rows) {
          if (r.fam != fam || r.format != format || (grp == 0) != (r.m <= 8)) continue;
          if (r.shape == "lm_head") {
            head.add(r.pct, 1);
            continue;
          }
          tensors.add(r.pct, r.weight_bytes * r.per_tensor);
          merged.add(r.pct, r.weight_bytes * r.merged);
          if (r.per_tensor > 0) mn = std::min(mn, r.pct);
        }
        if (tensors.den == 0 && merged.den == 0) continue;
        char lowest[16] = "-";  // no per-tensor rows (e.g. --only a merged shape)
        if (mn < 1e9) std::snprintf(lowest, sizeof lowest, "%.1f%%", mn);
        std::printf("%-6s %-5s %-8s %8s %8s %8s %8s\n", family_name(fam), weight_format_name(format), grp == 0 ? "1-8" : "9-16",
                    tensors.str().c_str(), merged.str().c_str(), head.str().c_str(), lowest);
      }
    }
  }
  // Mixed recipe (MLP NVFP4, attention/GDN FP8), sm80 family.
  for (int grp = 0; grp < 2; ++grp) {
    Mean tensors, merged;
    for (const Row& r : rows) {
      if (r.fam != fams[0] || r.shape == "lm_head" || (grp == 0) != (r.m <= 8)) continue;
      const bool mlp = r.shape.rfind("mlp", 0) == 0;
      if (mlp != (r.format == WeightFormat::kNvfp4)) continue;
      tensors.add(r.pct, r.weight_bytes * r.per_tensor);
      merged.add(r.pct, r.weight_bytes * r.merged);
    }
    if (tensors.den > 0 || merged.den > 0)
      std::printf("%-6s mixed %-8s %8s %8s   (MLP NVFP4 + attention/GDN FP8)\n", family_name(fams[0]),
                  grp == 0 ? "1-8" : "9-16", tensors.str().c_str(), merged.str().c_str());
  }
  // Per forward of the 27B model: the linear layers' kernel times summed as launched (count x µs), lm_head apart;
  // what bounds plain decode (M = 1) and a verification round (M = k + 1) before attention, GDN and norms.
  std::printf("\nper 27B forward, sum of linear-layer kernel times (%s): ms merged / per tensor + lm_head\n",
              family_name(fams[0]));
  for (WeightFormat format : {WeightFormat::kNvfp4, WeightFormat::kFp8}) {
    for (int64_t m : ms) {
      if (m != 1 && m != 4 && m != 8 && m != 16) continue;
      double merged = 0, tensors = 0, head = 0;
      int shapes = 0;
      for (const Row& r : rows) {
        if (r.fam != fams[0] || r.m != m) continue;
        if (r.shape == "lm_head") {
          head = r.us;
          continue;
        }
        if (r.format != format) continue;
        merged += r.us * r.merged;
        tensors += r.us * r.per_tensor;
        ++shapes;
      }
      if (shapes == static_cast<int>(std::size(kShapes)) - 1) {
        std::printf("%-5s M=%-3lld %6.2f / %6.2f ms + %5.3f ms\n", weight_format_name(format), static_cast<long long>(m),
                    merged / 1000, tensors / 1000, head / 1000);
      }
    }
  }
  double ratio_min = 1e9, ratio_sum = 0;
  for (const Big& b : bigs) {
    ratio_min = std::min(ratio_min, b.tflops / b.cublas_tflops);
    ratio_sum += b.tflops / b.cublas_tflops;
  }
  if (!bigs.empty())
    std::printf("M>=512 dequant+cuBLAS vs cuBLAS fp16: mean %.1f%%, min %.1f%%\n", 100.0 * ratio_sum / bigs.size(),
                100.0 * ratio_min);
  // Dense fp16 rows: µs and % of the read ceiling at M = 1, 8, 16 per shape and family (lm_head.f16 is the row that
  // matters: 2.5 GB per token; the fixtures measure launch latency, their weights sit in L2).
  if (!dense_rows.empty()) {
    std::printf("\ndense fp16 (row-major, no prepack): us / %% of ceiling\n%-6s %-20s %18s %18s %18s\n", "family", "shape",
                "M=1", "M=8", "M=16");
    for (KernelFamily fam : fams) {
      for (const DenseShape& sh : kDenseShapes) {
        std::string cells[3];
        bool any = false;
        for (const DenseRow& r : dense_rows) {
          if (r.fam != fam || r.shape != sh.name) continue;
          const int c = r.m == 1 ? 0 : r.m == 8 ? 1 : r.m == 16 ? 2 : -1;
          if (c < 0) continue;
          char buf[48];
          std::snprintf(buf, sizeof buf, "%.2fus %.1f%%", r.us, r.pct);
          cells[c] = buf;
          any = true;
        }
        if (any) {
          std::printf("%-6s %-20s %18s %18s %18s\n", family_name(fam), sh.name, cells[0].c_str(), cells[1].c_str(),
                      cells[2].c_str());
        }
      }
    }
  }
  cublasDestroy(cublas);
  return 0;
}
