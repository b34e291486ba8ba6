// GPU sampling (kernels/sampling/sampling.cu) against the CPU sampler (sample_ref) on the same logits: statuses and
// NaN ids equal, greedy tokens equal, sampled tokens equal except draws that fall within rounding of a bucket boundary
// (or a top-p / min-p cut within rounding; each printed with u and the cumulative values, at most 1 in 1000 rows),
// logprobs within 1e-4, top logprob ids equal. Every output poisoned before the run and checked written (and rows
// without logprobs checked untouched), guard bytes around every buffer, the workspace filled with garbage. Rows of
// every setting (greedy, temperature, top-k 1 / 20 / 1000, top-p 0.9 / 0.5 with and without top-k, min-p,
// penalties with non-trivial state, logit_bias of +-100, +-1e30 and -inf, NaN, all -inf, +inf, padding, flags 0) on
// flat, peaked and tied logits at the Qwen3.5 vocabulary (248077 real ids of 248320) and small ones. Also: a row's
// result does not depend on the rest of the batch (bitwise), CUDA-graph replay, the penalty-state updates (exact), and
// the argument checks; draft rows (speculative acceptance, RowParams::draft) against accept_drafts_ref; the
// accepted-runs walk and shift (accepted_runs.h) against their references. One line per case: "... err=<max logprob error> ok|FAIL". Skips itself without a CUDA device.
#include <catch2/catch_test_macros.hpp>

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "kernels/sampling/accept.h"
#include "kernels/sampling/accepted_runs.h"
#include "kernels/sampling/philox.h"
#include "kernels/sampling/sampling.h"
#include "sampling_draft_ref.h"
#include "sampling_random.h"
#include "sampling_runs_cases.h"

using namespace voltserve::kernels;
using namespace voltserve::kernels::sampling;
using voltserve::test::LogitShape;
using voltserve::test::SampleRng;

namespace {

#define CUDA_REQUIRE(call)                                                                   \
  do {                                                                                       \
    const cudaError_t e_ = (call);                                                           \
    INFO(#call << " -> " << cudaGetErrorString(e_) << " at " << __FILE__ << ":" << __LINE__); \
    REQUIRE(e_ == cudaSuccess);                                                              \
  } while (0)

bool have_device() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
}

#define REQUIRE_DEVICE() \
  if (!have_device()) SKIP("no CUDA device: sampling GPU tests skipped");

constexpr float kInf = std::numeric_limits<float>::infinity();
const float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr size_t kGuard = 256;
constexpr uint8_t kGuardByte = 0xA5;
constexpr uint8_t kPoisonByte = 0xA5;           // ints: 0xA5A5A5A5, never a token, status or id
constexpr uint32_t kPoisonInt = 0xA5A5A5A5u;
constexpr uint8_t kPoisonFloatByte = 0xFF;      // floats: NaN, never a logprob
constexpr float kLogprobTol = 1e-4f;
constexpr double kBoundaryTol = 1e-9;  // how near u (or a cut) must be to a boundary for a mismatch to be rounding

// A device buffer with guard bytes on both sides.
struct Guarded {
  unsigned char* base = nullptr;
  size_t bytes = 0;
  explicit Guarded(size_t b) : bytes(b) {
    if (cudaMalloc(reinterpret_cast<void**>(&base), bytes + 2 * kGuard) != cudaSuccess) base = nullptr;
    if (base != nullptr) cudaMemset(base, kGuardByte, bytes + 2 * kGuard);
  }
  ~Guarded() {
    if (base != nullptr) cudaFree(base);
  }
  Guarded(const Guarded&) = delete;
  Guarded& operator=(const Guarded&) = delete;
  void* p() const { return bytes > 0 ? base + kGuard : nullptr; }
  template <class T>
  T* as() const {
    return static_cast<T*>(p());
  }
  void fill(uint8_t v) const { REQUIRE(cudaMemset(base + kGuard, v, bytes) == cudaSuccess); }
  void upload(const void* src) const {
    if (bytes > 0) REQUIRE(cudaMemcpy(base + kGuard, src, bytes, cudaMemcpyHostToDevice) == cudaSuccess);
  }
  template <class T>
  std::vector<T> download(bool* guards_ok) const {
    std::vector<unsigned char> raw(bytes + 2 * kGuard);
    REQUIRE(cudaMemcpy(raw.data(), base, raw.size(), cudaMemcpyDeviceToHost) == cudaSuccess);
    for (size_t i = 0; i < kGuard; ++i) {
      if (raw[i] != kGuardByte || raw[kGuard + bytes + i] != kGuardByte) *guards_ok = false;
    }
    std::vector<T> out(bytes / sizeof(T));
    std::memcpy(out.data(), raw.data() + kGuard, out.size() * sizeof(T));
    return out;
  }
};

struct Threads : HostParallel {
  void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& body) const override {
    const int64_t workers = std::max<int64_t>(1, std::min<int64_t>(std::thread::hardware_concurrency(), n / grain));
    std::vector<std::thread> ts;
    for (int64_t w = 0; w < workers; ++w) ts.emplace_back(body, n * w / workers, n * (w + 1) / workers);
    for (auto& t : ts) t.join();
  }
};

// ---- A batch of rows on the host.
struct Setting {
  const char* name;
  float temperature;
  int32_t top_k;
  float top_p, min_p;
  int32_t n_top = -1;  // >= 0: kLogprobs with that many alternatives
  bool penalties = false, bias = false;
  int special = 0;  // 1 NaN, 2 all -inf, 3 three +inf, 4 a hundred +inf, 5 flags 0, 6 kLogprobs without kSample
};

const Setting kSettings[] = {
    {"greedy", 0.0f, 0, 1.0f, 0.0f},
    {"greedy+logprobs5", 0.0f, 0, 1.0f, 0.0f, 5},
    {"T=1", 1.0f, 0, 1.0f, 0.0f},
    {"T=0.7+logprobs20", 0.7f, 0, 1.0f, 0.0f, 20},
    {"top_k=1", 1.0f, 1, 1.0f, 0.0f},
    {"top_k=20", 0.8f, 20, 1.0f, 0.0f, 1},
    {"top_k=1000+logprobs0", 1.0f, 1000, 1.0f, 0.0f, 0},
    {"top_p=0.9", 1.0f, 0, 0.9f, 0.0f},
    {"top_p=0.5", 0.6f, 0, 0.5f, 0.0f, 3},
    {"top_k=20+top_p=0.9", 1.0f, 20, 0.9f, 0.0f},
    {"top_k=20+top_p=0.95", 1.0f, 20, 0.95f, 0.0f},
    {"top_k=40+top_p=0.5", 0.7f, 40, 0.5f, 0.0f},
    {"top_k=1000+top_p=0.9", 1.0f, 1000, 0.9f, 0.0f},
    {"min_p=0.05", 1.0f, 0, 1.0f, 0.05f},
    {"min_p=0.1+top_p=0.9", 1.2f, 0, 0.9f, 0.1f},
    {"top_k=64+min_p=0.02", 1.0f, 64, 1.0f, 0.02f},
    {"top_k=65+top_p=0.8", 0.9f, 65, 0.8f, 0.0f},
    {"top_p=1e-6", 1.0f, 0, 1e-6f, 0.0f},
    {"penalties+k20+p0.95", 1.0f, 20, 0.95f, 0.0f, 4, true},
    {"penalties+greedy", 0.0f, 0, 1.0f, 0.0f, -1, true},
    {"penalties+T=1", 1.0f, 0, 1.0f, 0.0f, -1, true},
    {"bias+top_p=0.9", 1.0f, 0, 0.9f, 0.0f, 2, false, true},
    {"bias+greedy", 0.0f, 0, 1.0f, 0.0f, -1, false, true},
    {"bias+penalties+k20", 0.9f, 20, 1.0f, 0.0f, -1, true, true},
    {"nan", 1.0f, 20, 0.9f, 0.0f, 5, false, false, 1},
    {"nan+greedy", 0.0f, 0, 1.0f, 0.0f, -1, false, false, 1},
    {"all -inf", 1.0f, 0, 1.0f, 0.0f, 5, false, false, 2},
    {"+inf x3+top_p=0.9", 1.0f, 0, 0.9f, 0.0f, 3, false, false, 3},
    {"+inf x100", 1.0f, 0, 1.0f, 0.0f, -1, false, false, 4},
    {"+inf x100+top_k=20", 1.0f, 20, 1.0f, 0.0f, -1, false, false, 4},
    {"+inf x100+top_p=0.7", 1.0f, 0, 0.7f, 0.0f, -1, false, false, 4},
    {"flags=0", 1.0f, 20, 0.9f, 0.0f, -1, false, false, 5},
    {"logprobs without sample", 1.0f, 0, 1.0f, 0.0f, 5, false, false, 6},
};

struct Batch {
  int32_t n_real = 0, stride = 0;
  std::vector<float> logits;
  std::vector<RowParams> rows;
  std::vector<std::string> names;
  std::vector<int32_t> bias_ids;
  std::vector<float> bias_values;
  int32_t pen_vocab = 0, n_slots = 0;
  std::vector<int32_t> counts;
  std::vector<uint32_t> bits;
  std::vector<uint32_t> masks;  // structured-output token masks (RowParams::mask_row), mask_words per row
  int32_t mask_words = 0;
  std::vector<int32_t> pending;  // ids RowParams::pending_* index (draft rows)
  int32_t n_rows() const { return static_cast<int32_t>(rows.size()); }
  PenaltyState host_penalties() {
    PenaltyState s;
    s.vocab = pen_vocab;
    s.n_slots = n_slots;
    s.counts = counts.empty() ? nullptr : counts.data();
    s.prompt_bits = bits.empty() ? nullptr : bits.data();
    return s;
  }
};

void add_row(Batch& b, const Setting& set, LogitShape shape, SampleRng& rng) {
  const int32_t n = b.n_real;
  std::vector<float> x = voltserve::test::random_logits(b.stride, shape, rng);
  for (int32_t i = n; i < b.stride; ++i) x[static_cast<size_t>(i)] = (i % 2) ? 1e30f : kNaN;  // padding: never read
  if (set.special == 1) {
    x[static_cast<size_t>(rng.next() % static_cast<uint64_t>(n))] = kNaN;
    x[static_cast<size_t>(rng.next() % static_cast<uint64_t>(n))] = kNaN;
  }
  if (set.special == 2) std::fill(x.begin(), x.begin() + n, -kInf);
  if (set.special == 3 || set.special == 4) {
    const int count = std::min<int32_t>(set.special == 3 ? 3 : 100, n);
    for (int i = 0; i < count; ++i) x[static_cast<size_t>(rng.next() % static_cast<uint64_t>(n))] = kInf;
  }
  RowParams p;
  p.flags = set.special == 5 ? 0u : set.special == 6 ? kLogprobs : kSample;
  if (set.n_top >= 0 && set.special != 6) p.flags |= kLogprobs;
  p.temperature = set.temperature;
  p.top_k = set.top_k;
  p.top_p = set.top_p;
  p.min_p = set.min_p;
  p.n_top_logprobs = std::max(0, set.n_top);
  p.seed = rng.next();
  p.draw_index = rng.next() % 100000;
  if (set.penalties) {
    p.slot = static_cast<int32_t>(rng.next() % static_cast<uint64_t>(b.n_slots));
    p.repetition_penalty = 1.1f + 0.2f * static_cast<float>(rng.uniform());
    p.presence_penalty = 1.5f;
    p.frequency_penalty = 0.2f;
  }
  if (set.bias) {
    p.bias_offset = static_cast<int32_t>(b.bias_ids.size());
    const float values[] = {100.0f, -100.0f, 1e30f, -1e30f, -kInf, 3.5f};
    for (int i = 0; i < 12; ++i) {
      b.bias_ids.push_back(static_cast<int32_t>(rng.next() % static_cast<uint64_t>(n + 4)) - 2);
      b.bias_values.push_back(values[rng.next() % 6]);
    }
    b.bias_ids.push_back(b.bias_ids[static_cast<size_t>(p.bias_offset)]);  // a duplicate: added in order
    b.bias_values.push_back(-0.25f);
    p.bias_count = static_cast<int32_t>(b.bias_ids.size()) - p.bias_offset;
  }
  b.logits.insert(b.logits.end(), x.begin(), x.end());
  b.rows.push_back(p);
  b.names.push_back(set.name);
}

// Penalty state for the batch: random counts and prompt bits in every slot.
void make_penalties(Batch& b, int32_t vocab, int32_t n_slots, SampleRng& rng) {
  b.pen_vocab = vocab;
  b.n_slots = n_slots;
  const int32_t words = (vocab + 31) / 32;
  b.counts.assign(static_cast<size_t>(vocab) * static_cast<size_t>(n_slots), 0);
  b.bits.assign(static_cast<size_t>(words) * static_cast<size_t>(n_slots), 0u);
  for (int32_t s = 0; s < n_slots; ++s) {
    for (int i = 0; i < 600; ++i) {
      const int32_t id = static_cast<int32_t>(rng.next() % static_cast<uint64_t>(vocab));
      if (rng.next() % 2) {
        b.counts[static_cast<size_t>(s) * static_cast<size_t>(vocab) + static_cast<size_t>(id)] +=
            1 + static_cast<int32_t>(rng.next() % 4);
      } else {
        b.bits[static_cast<size_t>(s) * static_cast<size_t>(words) + static_cast<size_t>(id / 32)] |= 1u << (id % 32);
      }
    }
  }
}

struct Results {
  std::vector<int32_t> token, status, nan_index, top_ids;
  std::vector<float> logprob, top_logprobs;
  bool guards_ok = true;
};

Results run_reference(Batch& b) {
  const int32_t n = b.n_rows();
  Results r;
  r.token.assign(static_cast<size_t>(n), static_cast<int32_t>(kPoisonInt));
  r.status = r.nan_index = r.token;
  r.top_ids.assign(static_cast<size_t>(n) * kMaxTopLogprobs, static_cast<int32_t>(kPoisonInt));
  r.logprob.assign(static_cast<size_t>(n), kNaN);
  r.top_logprobs.assign(static_cast<size_t>(n) * kMaxTopLogprobs, kNaN);
  Threads threads;
  RefArgs a;
  a.logits = b.logits.data();
  a.logits_stride = b.stride;
  a.n_rows = n;
  a.n_vocab_real = b.n_real;
  a.rows = b.rows.data();
  a.bias_ids = b.bias_ids.data();
  a.bias_values = b.bias_values.data();
  a.penalties = b.host_penalties();
  a.masks = b.masks.empty() ? nullptr : b.masks.data();
  a.mask_words = b.mask_words;
  a.out = Outputs{r.token.data(), r.logprob.data(), r.top_ids.data(), r.top_logprobs.data(), r.status.data(),
                  r.nan_index.data()};
  a.parallel = &threads;
  sample_ref(a);
  return r;
}

// Device copies of a batch's inputs (logits, rows, bias, penalties).
struct DeviceBatch {
  std::unique_ptr<Guarded> logits, rows, bias_ids, bias_values, counts, bits, masks, pending;
  explicit DeviceBatch(Batch& b) {
    masks = std::make_unique<Guarded>(b.masks.size() * sizeof(uint32_t));
    masks->upload(b.masks.data());
    pending = std::make_unique<Guarded>(b.pending.size() * sizeof(int32_t));
    pending->upload(b.pending.data());
    logits = std::make_unique<Guarded>(b.logits.size() * sizeof(float));
    rows = std::make_unique<Guarded>(b.rows.size() * sizeof(RowParams));
    bias_ids = std::make_unique<Guarded>(b.bias_ids.size() * sizeof(int32_t));
    bias_values = std::make_unique<Guarded>(b.bias_values.size() * sizeof(float));
    counts = std::make_unique<Guarded>(b.counts.size() * sizeof(int32_t));
    bits = std::make_unique<Guarded>(b.bits.size() * sizeof(uint32_t));
    REQUIRE(logits->base != nullptr);
    REQUIRE(rows->base != nullptr);
    logits->upload(b.logits.data());
    rows->upload(b.rows.data());
    bias_ids->upload(b.bias_ids.data());
    bias_values->upload(b.bias_values.data());
    counts->upload(b.counts.data());
    bits->upload(b.bits.data());
  }
  bool guards_ok() const {
    bool ok = true;
    for (const Guarded* g : {logits.get(), rows.get(), bias_ids.get(), bias_values.get(), counts.get(), bits.get()}) {
      (void)g->download<unsigned char>(&ok);
    }
    return ok;
  }
};

// Poisoned, guarded outputs and a garbage-filled workspace for n rows.
struct DeviceOutputs {
  Guarded token, logprob, top_ids, top_logprobs, status, nan_index, workspace;
  DeviceOutputs(int32_t n, int32_t n_vocab)
      : token(static_cast<size_t>(n) * 4),
        logprob(static_cast<size_t>(n) * 4),
        top_ids(static_cast<size_t>(n) * kMaxTopLogprobs * 4),
        top_logprobs(static_cast<size_t>(n) * kMaxTopLogprobs * 4),
        status(static_cast<size_t>(n) * 4),
        nan_index(static_cast<size_t>(n) * 4),
        workspace(workspace_bytes(n, n_vocab)) {
    REQUIRE(workspace.base != nullptr);
    poison();
  }
  void poison() const {
    token.fill(kPoisonByte);
    status.fill(kPoisonByte);
    nan_index.fill(kPoisonByte);
    top_ids.fill(kPoisonByte);
    logprob.fill(kPoisonFloatByte);
    top_logprobs.fill(kPoisonFloatByte);
    workspace.fill(0xC3);  // garbage: nothing may depend on a zeroed workspace
    // The memsets (and the inputs' pageable uploads) run on the legacy stream, which a non-blocking stream does not
    // wait for: finish them before any launch.
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  }
  Outputs outputs() const {
    return Outputs{token.as<int32_t>(),   logprob.as<float>(), top_ids.as<int32_t>(), top_logprobs.as<float>(),
                   status.as<int32_t>(), nan_index.as<int32_t>()};
  }
  Results download() const {
    Results r;
    r.token = token.download<int32_t>(&r.guards_ok);
    r.status = status.download<int32_t>(&r.guards_ok);
    r.nan_index = nan_index.download<int32_t>(&r.guards_ok);
    r.top_ids = top_ids.download<int32_t>(&r.guards_ok);
    r.logprob = logprob.download<float>(&r.guards_ok);
    r.top_logprobs = top_logprobs.download<float>(&r.guards_ok);
    (void)workspace.download<unsigned char>(&r.guards_ok);
    return r;
  }
};

DeviceArgs device_args(const Batch& b, const DeviceBatch& d, const DeviceOutputs& o, cudaStream_t stream) {
  DeviceArgs a;
  a.logits = d.logits->as<float>();
  a.logits_stride = b.stride;
  a.n_rows = b.n_rows();
  a.n_vocab_real = b.n_real;
  a.rows = d.rows->as<RowParams>();
  a.bias_ids = d.bias_ids->as<int32_t>();
  a.bias_values = d.bias_values->as<float>();
  a.penalties.vocab = b.pen_vocab;
  a.penalties.n_slots = b.n_slots;
  a.penalties.counts = d.counts->as<int32_t>();
  a.penalties.prompt_bits = d.bits->as<uint32_t>();
  a.penalties.pending = b.pending.empty() ? nullptr : d.pending->as<int32_t>();
  a.masks = b.masks.empty() ? nullptr : d.masks->as<uint32_t>();
  a.mask_words = b.mask_words;
  a.out = o.outputs();
  a.workspace = o.workspace.p();
  a.workspace_bytes = o.workspace.bytes;
  a.stream = stream;
  return a;
}

Results run_device(Batch& b, cudaStream_t stream) {
  DeviceBatch d(b);
  DeviceOutputs o(b.n_rows(), b.n_real);
  const KernelStatus st = sample(device_args(b, d, o, stream));
  INFO("sample: " << st.message << " " << st.file << ":" << st.line << " cuda " << st.cuda_error);
  REQUIRE(st.ok());
  CUDA_REQUIRE(cudaStreamSynchronize(stream));
  CUDA_REQUIRE(cudaGetLastError());
  Results r = o.download();
  r.guards_ok &= d.guards_ok();
  return r;
}

// Whether the device's token t for row r can be a rounding decision of the reference: u within kBoundaryTol of
// t's bucket in the reference's walk, or a top-p / min-p cut within rounding. Prints the evidence.
bool boundary_case(Batch& b, int32_t r, int32_t t, const std::string& name) {
  const RowParams& p = b.rows[static_cast<size_t>(r)];
  const float* x = b.logits.data() + static_cast<size_t>(r) * static_cast<size_t>(b.stride);
  std::vector<float> processed;
  process_logits_ref(x, b.n_real, p, b.bias_ids.data(), b.bias_values.data(), b.host_penalties(), processed,
                     row_mask(b.masks.empty() ? nullptr : b.masks.data(), b.mask_words, p.mask_row));
  std::vector<std::pair<int32_t, double>> dist;
  final_distribution_ref(processed, p, dist);
  const double u = uniform_draw(p.seed, p.draw_index, kStreamSample);
  double cum = 0.0;
  for (const auto& [id, prob] : dist) {
    const double lo = cum;
    cum += prob;
    if (id == t) {
      const double d = u < lo ? lo - u : (u >= cum ? u - cum : 0.0);
      std::printf("  %s row %d: device %d, bucket [%.17g, %.17g), u %.17g: %s\n", name.c_str(), r, t, lo, cum, u,
                  d <= kBoundaryTol ? "draw at a boundary" : "NOT a boundary");
      return d <= kBoundaryTol;
    }
  }
  // Not among the reference's survivors: a cut decided the other way? Recompute the sorted list's cumulative
  // mass at the top-p limit and the weights at the min-p threshold.
  float mx = -kInf;
  for (float v : processed) mx = std::max(mx, v);
  const double inv_t = 1.0 / static_cast<double>(p.temperature);
  std::vector<std::pair<int32_t, double>> all;
  for (size_t i = 0; i < processed.size(); ++i) {
    if (processed[i] == -kInf) continue;
    all.emplace_back(static_cast<int32_t>(i), std::isinf(mx) ? (std::isinf(processed[i]) ? 1.0 : -1.0)
                                                             : std::exp(processed[i] * inv_t - mx * inv_t));
  }
  all.erase(std::remove_if(all.begin(), all.end(), [](const auto& e) { return e.second < 0.0; }), all.end());
  std::sort(all.begin(), all.end(), [](const auto& a, const auto& c) {
    return a.second != c.second ? a.second > c.second : a.first < c.first;
  });
  const size_t k = p.top_k > 0 && static_cast<size_t>(p.top_k) < all.size() ? static_cast<size_t>(p.top_k) : all.size();
  double total = 0.0;
  for (size_t j = 0; j < k; ++j) total += all[j].second;
  bool near = false;
  if (p.top_p < 1.0f) {
    const double limit = static_cast<double>(p.top_p) * total;
    double c = 0.0;
    for (size_t j = 0; j < k; ++j) {
      near |= std::fabs(c - limit) <= kBoundaryTol * total;
      c += all[j].second;
    }
  }
  if (p.min_p > 0.0f && !all.empty()) {
    const double thr = static_cast<double>(p.min_p) * all[0].second;
    for (size_t j = 0; j < k; ++j) near |= std::fabs(all[j].second - thr) <= kBoundaryTol * thr;
  }
  std::printf("  %s row %d: device %d not among the reference's %zu survivors; u %.17g: %s\n", name.c_str(), r, t,
              dist.size(), u, near ? "a cut at a boundary" : "NOT a boundary");
  return near;
}

struct CaseStats {
  int rows = 0, token_diff = 0, boundary = 0, status_diff = 0, top_diff = 0, unwritten = 0, stray = 0;
  double err = 0.0;
  bool greedy = false;
};

// Compares device and reference per row; one line per setting of the batch.
bool compare(Batch& b, const Results& dev, const Results& ref, const std::string& label) {
  std::map<std::string, CaseStats> cases;
  std::vector<std::string> order;
  for (int32_t r = 0; r < b.n_rows(); ++r) {
    const RowParams& p = b.rows[static_cast<size_t>(r)];
    const std::string& name = b.names[static_cast<size_t>(r)];
    if (!cases.count(name)) order.push_back(name);
    CaseStats& c = cases[name];
    ++c.rows;
    c.greedy = p.temperature <= 0.0f;
    const size_t ri = static_cast<size_t>(r);
    if (static_cast<uint32_t>(dev.token[ri]) == kPoisonInt || static_cast<uint32_t>(dev.status[ri]) == kPoisonInt) {
      ++c.unwritten;
      continue;
    }
    if (dev.status[ri] != ref.status[ri]) ++c.status_diff;
    if (ref.status[ri] == kNanLogits && dev.nan_index[ri] != ref.nan_index[ri]) ++c.status_diff;
    const bool logprobs = ref.status[ri] == kRowOk && ref.token[ri] >= 0 && (p.flags & kLogprobs) != 0;
    const int32_t k = logprobs ? std::min(std::clamp(p.n_top_logprobs, 0, kMaxTopLogprobs), b.n_real) : 0;
    for (int32_t j = 0; j < kMaxTopLogprobs; ++j) {
      const size_t at = ri * kMaxTopLogprobs + static_cast<size_t>(j);
      const bool poisoned = static_cast<uint32_t>(dev.top_ids[at]) == kPoisonInt;
      if (j < k && poisoned) ++c.unwritten;
      if (j >= k && !poisoned) ++c.stray;  // rows and entries the reference leaves alone stay untouched
    }
    if (!logprobs && !std::isnan(dev.logprob[ri])) ++c.stray;
    if (dev.token[ri] != ref.token[ri]) {
      ++c.token_diff;
      const bool sampled = p.temperature > 0.0f && dev.token[ri] >= 0 && ref.token[ri] >= 0;
      if (sampled && boundary_case(b, r, dev.token[ri], label + " " + name)) ++c.boundary;
    }
    if (!logprobs) continue;
    // The device's chosen logprob against the reference's for the same id (the same unless a boundary case).
    float want = 0.0f;
    std::vector<int32_t> ids(kMaxTopLogprobs);
    std::vector<float> lps(kMaxTopLogprobs);
    log_softmax_top_ref(b.logits.data() + ri * static_cast<size_t>(b.stride), b.n_real, dev.token[ri], 0, &want,
                        ids.data(), lps.data());
    auto diff = [](float a, float w) {
      if (std::isnan(a)) return 1e30;
      if (a == w) return 0.0;
      return static_cast<double>(std::fabs(a - w));
    };
    c.err = std::max(c.err, diff(dev.logprob[ri], want));
    for (int32_t j = 0; j < k; ++j) {
      const size_t at = ri * kMaxTopLogprobs + static_cast<size_t>(j);
      if (dev.top_ids[at] != ref.top_ids[at]) ++c.top_diff;
      c.err = std::max(c.err, diff(dev.top_logprobs[at], ref.top_logprobs[at]));
    }
  }
  bool all_ok = dev.guards_ok;
  for (const std::string& name : order) {
    const CaseStats& c = cases[name];
    const int real_diff = c.token_diff - c.boundary;
    const bool ok = c.unwritten == 0 && c.stray == 0 && c.status_diff == 0 && c.top_diff == 0 && real_diff == 0 &&
                    (!c.greedy || c.token_diff == 0) && c.boundary * 1000 <= std::max(c.rows, 1000) &&
                    c.err <= kLogprobTol && dev.guards_ok;
    std::printf("sampling %s %-26s rows=%-4d token_diff=%d boundary=%d status_diff=%d top_diff=%d unwritten=%d "
                "stray=%d guards=%s err=%.3e %s\n",
                label.c_str(), name.c_str(), c.rows, c.token_diff, c.boundary, c.status_diff, c.top_diff, c.unwritten,
                c.stray, dev.guards_ok ? "ok" : "DAMAGED", c.err, ok ? "ok" : "FAIL");
    all_ok &= ok;
  }
  std::fflush(stdout);
  return all_ok;
}

Batch make_batch(int32_t n_real, int32_t stride, LogitShape shape, int rows_per_setting, uint64_t seed,
                 int32_t pen_vocab) {
  SampleRng rng(seed);
  Batch b;
  b.n_real = n_real;
  b.stride = stride;
  make_penalties(b, pen_vocab, 4, rng);
  for (int i = 0; i < rows_per_setting; ++i) {
    for (const Setting& set : kSettings) add_row(b, set, shape, rng);
  }
  return b;
}

std::string batch_label(const Batch& b, LogitShape shape) {
  return "v=" + std::to_string(b.n_real) + " stride=" + std::to_string(b.stride) + " pen_vocab=" +
         std::to_string(b.pen_vocab) + " " + voltserve::test::logit_shape_name(shape);
}

struct Stream {
  cudaStream_t s = nullptr;
  Stream() { cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking); }
  ~Stream() {
    if (s != nullptr) cudaStreamDestroy(s);
  }
};

// accept_drafts_ref's verdict on each draft row of b (sampling_draft_ref.h); the other rows' from sample_ref.
Results reference_draft_rows(Batch& b) {
  Results r = run_reference(b);  // the rows without a draft
  for (int32_t i = 0; i < b.n_rows(); ++i) {
    const RowParams& p = b.rows[static_cast<size_t>(i)];
    if (p.draft < 0) continue;
    const voltserve::test::DraftVerdict v = voltserve::test::judge_draft_ref(
        b.logits.data() + static_cast<size_t>(i) * static_cast<size_t>(b.stride), b.stride, b.n_real, p,
        b.bias_ids.data(), b.bias_values.data(), b.host_penalties(), b.pending.data());
    const size_t ri = static_cast<size_t>(i);
    r.token[ri] = v.token;
    r.status[ri] = v.status;
    r.nan_index[ri] = v.status == kNanLogits ? v.nan_index : r.nan_index[ri];
    r.logprob[ri] = v.logprob;
    std::copy(v.top_ids.begin(), v.top_ids.end(), r.top_ids.begin() + static_cast<std::ptrdiff_t>(ri * kMaxTopLogprobs));
    std::copy(v.top_logprobs.begin(), v.top_logprobs.end(),
              r.top_logprobs.begin() + static_cast<std::ptrdiff_t>(ri * kMaxTopLogprobs));
  }
  return r;
}

// Whether the device's verdict t on draft row r can be a rounding decision of the reference's: the acceptance draw
// within kBoundaryTol of p(d), the resampling draw at a bucket boundary of the walk without d, or a cut within
// rounding (boundary_case). Prints the evidence.
bool draft_boundary_case(Batch& b, int32_t r, int32_t t, const std::string& name) {
  const RowParams& p = b.rows[static_cast<size_t>(r)];
  const float* x = b.logits.data() + static_cast<size_t>(r) * static_cast<size_t>(b.stride);
  std::vector<float> processed;
  std::vector<int32_t> counts;
  process_logits_ref(x, b.n_real, p, b.bias_ids.data(), b.bias_values.data(),
                     voltserve::test::with_pending(b.host_penalties(), p, b.pending.data(), counts), processed);
  std::vector<std::pair<int32_t, double>> dist;
  final_distribution_ref(processed, p, dist);
  double p_d = 0.0, rest = 0.0;
  for (const auto& [id, prob] : dist) (id == p.draft ? p_d : rest) += prob;
  const double u = uniform_draw(p.seed, p.draw_index, kStreamAccept);
  if (std::fabs(u - p_d) <= kBoundaryTol) {
    std::printf("  %s row %d: device %d, draft %d, p(d) %.17g, u %.17g: acceptance at a boundary\n", name.c_str(), r,
                t, p.draft, p_d, u);
    return true;
  }
  const double target = uniform_draw(p.seed, p.draw_index, kStreamResample) * rest;
  double cum = 0.0;
  for (const auto& [id, prob] : dist) {
    if (id == p.draft) continue;
    const double lo = cum;
    cum += prob;
    if (id == t) {
      const double d = target < lo ? lo - target : (target >= cum ? target - cum : 0.0);
      std::printf("  %s row %d: device %d, draft %d, bucket [%.17g, %.17g), target %.17g: %s\n", name.c_str(), r, t,
                  p.draft, lo, cum, target, d <= kBoundaryTol ? "resample at a boundary" : "NOT a boundary");
      return d <= kBoundaryTol;
    }
  }
  return t != p.draft && boundary_case(b, r, t, name);
}

}  // namespace

TEST_CASE("sampling gpu: draft rows judge their drafts as accept_drafts_ref does", "[gpu]") {
  // Every sampled setting judging a draft (its argmax, one of its likely ids or any id), on every path of the
  // sampler, penalized rows with 0-3 pending drafts: each row must give the reference's token (up to rounding
  // boundaries), status and logprobs.
  REQUIRE_DEVICE();
  Stream stream;
  uint64_t seed = 4000;
  int accepted = 0, rejected = 0, judged = 0;
  for (const int32_t n_real : {248077, 5000, 64}) {
    for (LogitShape shape : {LogitShape::kPeaked, LogitShape::kFlat}) {
      const int32_t stride = n_real == 248077 ? 248320 : n_real + 3;
      Batch b = make_batch(n_real, stride, shape, n_real == 248077 ? 2 : 6, seed++, n_real);
      SampleRng rng(seed * 31);
      Batch judged_batch = b;
      judged_batch.rows.clear();
      judged_batch.names.clear();
      judged_batch.logits.clear();
      for (int32_t i = 0; i < b.n_rows(); ++i) {
        RowParams p = b.rows[static_cast<size_t>(i)];
        if ((p.flags & kSample) == 0) continue;
        const float* x = b.logits.data() + static_cast<size_t>(i) * static_cast<size_t>(stride);
        const int kind = static_cast<int>(rng.next() % 3);
        if (kind == 0) {  // the raw argmax (often the processed one)
          p.draft = static_cast<int32_t>(std::max_element(x, x + n_real, [](float a, float c) {
                                           return (std::isnan(a) ? -kInf : a) < (std::isnan(c) ? -kInf : c);
                                         }) - x);
        } else {
          p.draft = static_cast<int32_t>(rng.next() % static_cast<uint64_t>(kind == 1 ? std::min(n_real, 40) : n_real));
        }
        if (p.slot >= 0) {  // penalized: the drafts before it (this one among them) counted as well
          p.pending_offset = static_cast<int32_t>(judged_batch.pending.size());
          p.pending_count = static_cast<int32_t>(rng.next() % 4);
          for (int32_t j = 0; j < p.pending_count; ++j) {
            judged_batch.pending.push_back(j == 0 ? p.draft : static_cast<int32_t>(rng.next() % static_cast<uint64_t>(n_real)));
          }
        }
        judged_batch.rows.push_back(p);
        judged_batch.names.push_back(b.names[static_cast<size_t>(i)]);
        judged_batch.logits.insert(judged_batch.logits.end(), x, x + stride);
      }
      const Results dev = run_device(judged_batch, stream.s);
      Results ref = reference_draft_rows(judged_batch);
      for (int32_t i = 0; i < judged_batch.n_rows(); ++i) {
        const size_t ri = static_cast<size_t>(i);
        const RowParams& p = judged_batch.rows[ri];
        ++judged;
        if (p.temperature > 0.0f && dev.status[ri] == kRowOk) ++(dev.token[ri] == p.draft ? accepted : rejected);
      }
      // A mismatch must be a rounding boundary of the acceptance or the resampling walk (compare() counts them
      // through boundary_case; here the draft-aware check replaces it).
      int real_diff = 0;
      for (int32_t i = 0; i < judged_batch.n_rows(); ++i) {
        const size_t ri = static_cast<size_t>(i);
        if (dev.token[ri] == ref.token[ri]) continue;
        if (!draft_boundary_case(judged_batch, i, dev.token[ri], batch_label(b, shape))) ++real_diff;
        ref.token[ri] = dev.token[ri];  // judged above; compare() checks everything else
      }
      CHECK(real_diff == 0);
      CHECK(compare(judged_batch, dev, ref, batch_label(b, shape) + " drafts"));
    }
  }
  std::printf("sampling gpu drafts: %d rows judged (%d sampled accepted, %d rejected)\n", judged, accepted, rejected);
  CHECK(accepted > 0);
  CHECK(rejected > 0);
}

TEST_CASE("sampling gpu: every setting at the Qwen3.5 vocabulary (248077 of 248320)", "[gpu]") {
  REQUIRE_DEVICE();
  Stream stream;
  uint64_t seed = 1000;
  for (LogitShape shape : {LogitShape::kPeaked, LogitShape::kFlat, LogitShape::kTied}) {
    // Penalty state over the padded width on one batch, the real ids on the others.
    const int32_t pen_vocab = shape == LogitShape::kFlat ? 248320 : 248077;
    Batch b = make_batch(248077, 248320, shape, 3, seed++, pen_vocab);
    const Results ref = run_reference(b);
    const Results dev = run_device(b, stream.s);
    CHECK(compare(b, dev, ref, batch_label(b, shape)));
  }
}

TEST_CASE("sampling gpu: structured-output token masks match the reference, masked ids never sampled", "[gpu]") {
  REQUIRE_DEVICE();
  Stream stream;
  uint64_t seed = 1500;
  for (const int32_t n_real : {3033, 248077}) {
    for (LogitShape shape : {LogitShape::kPeaked, LogitShape::kFlat}) {
      Batch b = make_batch(n_real, n_real + 7, shape, 2, seed++, n_real);
      SampleRng rng(seed * 7);
      b.mask_words = (n_real + 31) / 32;
      // Every other row gets a mask of a few random allowed ids.
      int32_t n_masks = 0;
      for (int32_t r = 0; r < b.n_rows(); r += 2) {
        std::vector<uint32_t> m(static_cast<size_t>(b.mask_words), 0u);
        const int allowed = 1 + static_cast<int>(rng.next() % 50);
        for (int i = 0; i < allowed; ++i) {
          const auto id = static_cast<int32_t>(rng.next() % static_cast<uint64_t>(n_real));
          m[static_cast<size_t>(id / 32)] |= 1u << (id % 32);
        }
        b.rows[static_cast<size_t>(r)].mask_row = n_masks++;
        b.masks.insert(b.masks.end(), m.begin(), m.end());
      }
      const Results ref = run_reference(b);
      const Results dev = run_device(b, stream.s);
      CHECK(compare(b, dev, ref, batch_label(b, shape) + " masked"));
      for (int32_t r = 0; r < b.n_rows(); r += 2) {
        const int32_t t = dev.token[static_cast<size_t>(r)];
        if (t < 0 || dev.status[static_cast<size_t>(r)] != kRowOk) continue;
        const uint32_t* m =
            b.masks.data() + static_cast<size_t>(b.rows[static_cast<size_t>(r)].mask_row) * static_cast<size_t>(b.mask_words);
        CHECK(((m[t / 32] >> (t % 32)) & 1u) == 1u);
      }
    }
  }
}

TEST_CASE("sampling gpu: small and awkward vocabularies", "[gpu]") {
  REQUIRE_DEVICE();
  Stream stream;
  uint64_t seed = 2000;
  const int32_t sizes[][2] = {{1, 1},       {2, 3},       {17, 17},     {64, 64},       {65, 80},
                              {300, 301},   {4095, 4096}, {4096, 4096}, {4097, 4100},   {9000, 9001},
                              {70000, 70016}, {151936, 151936}};
  for (const auto& sz : sizes) {
    for (LogitShape shape : {LogitShape::kPeaked, LogitShape::kFlat, LogitShape::kTied}) {
      Batch b = make_batch(sz[0], sz[1], shape, 2, seed++, sz[0]);
      const Results ref = run_reference(b);
      const Results dev = run_device(b, stream.s);
      CHECK(compare(b, dev, ref, batch_label(b, shape)));
    }
  }
}

TEST_CASE("sampling gpu: many draws of one row keep to the reference (boundary cases counted)", "[gpu]") {
  REQUIRE_DEVICE();
  Stream stream;
  // One peaked and one flat row under the typical chat settings and top-p alone, 256 draw indices each: the
  // device must pick the reference's token for every draw that is not within rounding of a boundary.
  for (LogitShape shape : {LogitShape::kPeaked, LogitShape::kFlat}) {
    for (const char* want : {"top_k=20+top_p=0.95", "top_p=0.9", "T=1", "min_p=0.05"}) {
      const Setting& set = *std::find_if(std::begin(kSettings), std::end(kSettings),
                                         [&](const Setting& x) { return std::strcmp(x.name, want) == 0; });
      SampleRng rng(3000 + static_cast<uint64_t>(shape));
      Batch b;
      b.n_real = 248077;
      b.stride = 248320;
      add_row(b, set, shape, rng);
      const std::vector<float> x(b.logits.begin(), b.logits.end());
      const RowParams p0 = b.rows[0];
      for (int i = 1; i < 256; ++i) {
        b.logits.insert(b.logits.end(), x.begin(), x.end());
        RowParams p = p0;
        p.draw_index = p0.draw_index + static_cast<uint64_t>(i);
        b.rows.push_back(p);
        b.names.push_back(set.name);
      }
      const Results ref = run_reference(b);
      const Results dev = run_device(b, stream.s);
      CHECK(compare(b, dev, ref, std::string("draws=256 ") + voltserve::test::logit_shape_name(shape)));
    }
  }
}

TEST_CASE("sampling gpu: a row's result does not depend on the rest of the batch (bitwise)", "[gpu]") {
  REQUIRE_DEVICE();
  Stream stream;
  Batch full = make_batch(248077, 248320, LogitShape::kPeaked, 1, 4000, 248077);
  const Results all = run_device(full, stream.s);
  // Each row alone, and each row among other rows (the batch reversed, then a batch of other logits around it).
  auto sub_batch = [&](const std::vector<int32_t>& pick) {
    Batch b;
    b.n_real = full.n_real;
    b.stride = full.stride;
    b.bias_ids = full.bias_ids;
    b.bias_values = full.bias_values;
    b.pen_vocab = full.pen_vocab;
    b.n_slots = full.n_slots;
    b.counts = full.counts;
    b.bits = full.bits;
    for (int32_t r : pick) {
      const auto at = full.logits.begin() + static_cast<int64_t>(r) * full.stride;
      b.logits.insert(b.logits.end(), at, at + full.stride);
      b.rows.push_back(full.rows[static_cast<size_t>(r)]);
      b.names.push_back(full.names[static_cast<size_t>(r)]);
    }
    return b;
  };
  auto same_row = [&](const Results& a, int32_t ra, const Results& b, int32_t rb) {
    const size_t ia = static_cast<size_t>(ra), ib = static_cast<size_t>(rb);
    return a.token[ia] == b.token[ib] && a.status[ia] == b.status[ib] &&
           std::memcmp(&a.logprob[ia], &b.logprob[ib], 4) == 0 &&
           std::memcmp(&a.top_ids[ia * kMaxTopLogprobs], &b.top_ids[ib * kMaxTopLogprobs], 4 * kMaxTopLogprobs) == 0 &&
           std::memcmp(&a.top_logprobs[ia * kMaxTopLogprobs], &b.top_logprobs[ib * kMaxTopLogprobs],
                       4 * kMaxTopLogprobs) == 0;
  };
  int alone_diff = 0;
  for (int32_t r = 0; r < full.n_rows(); ++r) {
    Batch one = sub_batch({r});
    const Results res = run_device(one, stream.s);
    CHECK(res.guards_ok);
    alone_diff += same_row(all, r, res, 0) ? 0 : 1;
  }
  std::vector<int32_t> reversed;
  for (int32_t r = full.n_rows() - 1; r >= 0; --r) reversed.push_back(r);
  Batch rev = sub_batch(reversed);
  const Results rres = run_device(rev, stream.s);
  int reversed_diff = 0;
  for (int32_t i = 0; i < rev.n_rows(); ++i) reversed_diff += same_row(all, reversed[static_cast<size_t>(i)], rres, i) ? 0 : 1;
  std::printf("sampling batch-invariance v=248077 rows=%d alone: %s (%d rows differ)\n", full.n_rows(),
              alone_diff == 0 ? "same" : "DIFFERENT", alone_diff);
  std::printf("sampling batch-invariance v=248077 rows=%d reversed: %s (%d rows differ)\n", full.n_rows(),
              reversed_diff == 0 ? "same" : "DIFFERENT", reversed_diff);
  CHECK(alone_diff == 0);
  CHECK(reversed_diff == 0);
}

TEST_CASE("sampling gpu: CUDA-graph replay gives the direct launch's results", "[gpu]") {
  REQUIRE_DEVICE();
  Stream stream;
  Batch a = make_batch(248077, 248320, LogitShape::kPeaked, 1, 5000, 248077);
  Batch b = make_batch(248077, 248320, LogitShape::kFlat, 1, 5001, 248077);
  REQUIRE(a.n_rows() == b.n_rows());
  REQUIRE(a.bias_ids.size() == b.bias_ids.size());
  DeviceBatch d(a);
  DeviceOutputs o(a.n_rows(), a.n_real);
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CUDA_REQUIRE(cudaStreamBeginCapture(stream.s, cudaStreamCaptureModeThreadLocal));
  const KernelStatus st = sample(device_args(a, d, o, stream.s));
  CUDA_REQUIRE(cudaStreamEndCapture(stream.s, &graph));
  REQUIRE(st.ok());
  CUDA_REQUIRE(cudaGraphInstantiate(&exec, graph, 0));
  bool ok = true;
  for (Batch* batch : {&a, &b, &a}) {
    d.logits->upload(batch->logits.data());
    d.rows->upload(batch->rows.data());
    d.bias_ids->upload(batch->bias_ids.data());
    d.bias_values->upload(batch->bias_values.data());
    d.counts->upload(batch->counts.data());
    d.bits->upload(batch->bits.data());
    o.poison();
    CUDA_REQUIRE(cudaGraphLaunch(exec, stream.s));
    CUDA_REQUIRE(cudaStreamSynchronize(stream.s));
    const Results res = o.download();
    ok &= compare(*batch, res, run_reference(*batch), "graph-replay v=248077");
  }
  CUDA_REQUIRE(cudaGraphExecDestroy(exec));
  CUDA_REQUIRE(cudaGraphDestroy(graph));
  CHECK(ok);
}

TEST_CASE("sampling gpu: update_penalties, count_generated and reset_penalties equal the reference exactly", "[gpu]") {
  REQUIRE_DEVICE();
  Stream stream;
  for (int32_t vocab : {17, 4096, 248320}) {
    SampleRng rng(6000 + static_cast<uint64_t>(vocab));
    const int32_t n_slots = 5;
    const int32_t words = (vocab + 31) / 32;
    std::vector<int32_t> counts(static_cast<size_t>(vocab) * n_slots);
    std::vector<uint32_t> bits(static_cast<size_t>(words) * n_slots);
    for (auto& c : counts) c = rng.next() % 50 == 0 ? static_cast<int32_t>(rng.next() % 5) : 0;
    for (auto& w : bits) w = rng.next() % 10 == 0 ? static_cast<uint32_t>(rng.next()) : 0u;
    Guarded dcounts(counts.size() * 4), dbits(bits.size() * 4);
    dcounts.upload(counts.data());
    dbits.upload(bits.data());
    CUDA_REQUIRE(cudaDeviceSynchronize());
    PenaltyState hs{counts.data(), bits.data(), vocab, n_slots};
    PenaltyState ds{dcounts.as<int32_t>(), dbits.as<uint32_t>(), vocab, n_slots};
    // Steps of several sequences: chunked prefill crossing n_prompt, decode and verify rows, the same slot twice,
    // ids repeated within a step, padding entries, slot -1 and slots past n_slots, ids outside [0, vocab).
    for (int step = 0; step < 6; ++step) {
      std::vector<int32_t> tokens;
      std::vector<SeqDesc> seqs;
      const int n_seqs = 1 + static_cast<int>(rng.next() % 7);
      for (int q = 0; q < n_seqs; ++q) {
        SeqDesc s;
        s.row0 = static_cast<int32_t>(tokens.size());
        s.n_tokens = static_cast<int32_t>(rng.next() % 5 == 0 ? 0 : 1 + rng.next() % (step == 0 ? 700 : 9));
        s.n_past = static_cast<int32_t>(rng.next() % 40);
        s.n_prompt = static_cast<int32_t>(rng.next() % 60);
        s.slot = static_cast<int32_t>(rng.next() % (n_slots + 2)) - 1;
        for (int32_t t = 0; t < s.n_tokens; ++t) {
          const uint64_t pick = rng.next() % 100;
          tokens.push_back(pick < 3 ? -1 - static_cast<int32_t>(pick) : pick < 6 ? vocab + static_cast<int32_t>(pick)
                           : pick < 40 ? static_cast<int32_t>(rng.next() % 8)
                                       : static_cast<int32_t>(rng.next() % static_cast<uint64_t>(vocab)));
        }
        seqs.push_back(s);
      }
      Guarded dtokens(tokens.size() * 4), dseqs(seqs.size() * sizeof(SeqDesc));
      dtokens.upload(tokens.data());
      dseqs.upload(seqs.data());
      CUDA_REQUIRE(cudaDeviceSynchronize());  // the uploads (legacy stream) before the launch on stream.s
      update_penalties_ref(hs, tokens.data(), seqs.data(), n_seqs);
      const KernelStatus st = update_penalties(ds, dtokens.as<int32_t>(), dseqs.as<SeqDesc>(), n_seqs,
                                               static_cast<int32_t>(tokens.size()), stream.s);
      REQUIRE(st.ok());
      {  // accepted drafts (count_generated): the first tokens of the step into one slot, ids out of range skipped
        const int32_t slot = static_cast<int32_t>(rng.next() % n_slots);
        const int32_t n = std::min<int32_t>(static_cast<int32_t>(tokens.size()), static_cast<int32_t>(rng.next() % 16));
        for (int32_t i = 0; i < n; ++i) {
          if (tokens[static_cast<size_t>(i)] >= 0 && tokens[static_cast<size_t>(i)] < vocab) {
            ++counts[static_cast<size_t>(slot) * static_cast<size_t>(vocab) + static_cast<size_t>(tokens[static_cast<size_t>(i)])];
          }
        }
        REQUIRE(count_generated(ds, slot, dtokens.as<int32_t>(), n, stream.s).ok());
        REQUIRE(count_generated(ds, n_slots, dtokens.as<int32_t>(), n, stream.s).ok());  // out of range: nothing
      }
      if (step == 3) {
        reset_penalties_ref(hs, 2);
        REQUIRE(reset_penalties(ds, 2, stream.s).ok());
        REQUIRE(reset_penalties(ds, n_slots, stream.s).ok());  // out of range: nothing, as the reference
        REQUIRE(reset_penalties(ds, -1, stream.s).ok());
      }
      CUDA_REQUIRE(cudaStreamSynchronize(stream.s));
      bool guards = true;
      const std::vector<int32_t> got_counts = dcounts.download<int32_t>(&guards);
      const std::vector<uint32_t> got_bits = dbits.download<uint32_t>(&guards);
      size_t diff = 0;
      for (size_t i = 0; i < counts.size(); ++i) diff += got_counts[i] != counts[i];
      for (size_t i = 0; i < bits.size(); ++i) diff += got_bits[i] != bits[i];
      const bool ok = diff == 0 && guards;
      std::printf("sampling update_penalties vocab=%d slots=%d step=%d seqs=%d tokens=%zu%s guards=%s err=%zu %s\n",
                  vocab, n_slots, step, n_seqs, tokens.size(), step == 3 ? " +reset slot 2" : "",
                  guards ? "ok" : "DAMAGED", diff, ok ? "ok" : "FAIL");
      CHECK(ok);
    }
  }
}

TEST_CASE("sampling gpu: the accepted-runs walk and shift equal their references exactly", "[gpu]") {
  REQUIRE_DEVICE();
  Stream stream;
  for (uint64_t seed = 1; seed <= 200; ++seed) {
    const voltserve::test::RunsCase c = voltserve::test::random_runs_case(seed);
    const auto n_seqs = static_cast<int32_t>(c.seqs.size());
    auto up = [](const auto& v) {
      auto g = std::make_unique<Guarded>(v.size() * sizeof(v[0]));
      g->upload(v.data());
      return g;
    };
    const auto dseqs = up(c.seqs), dvrows = up(c.out_rows), dparams = up(c.rows), dtokens = up(c.tokens),
               dout = up(c.token_out), dstatus = up(c.status), dlater = up(c.later), drows = up(c.later_rows);
    Guarded druns(2 * c.seqs.size() * 4);
    druns.fill(kPoisonByte);
    CUDA_REQUIRE(cudaDeviceSynchronize());
    std::vector<int32_t> runs(2 * c.seqs.size());
    const auto n_out = static_cast<int32_t>(c.out_rows.size());
    WalkArgs w{c.seqs.data(), n_seqs, c.out_rows.data(), c.rows.data(), n_out, c.tokens.data(), c.token_out.data(),
               c.status.data(), runs.data()};
    walk_ref(w);
    std::vector<SeqDesc> later = c.later;
    std::vector<int32_t> rows = c.later_rows;
    ShiftArgs sh{later.data(), n_seqs, rows.data(), static_cast<int32_t>(rows.size()), runs.data()};
    shift_ref(sh);
    w = {dseqs->as<SeqDesc>(), n_seqs, dvrows->as<int32_t>(), dparams->as<RowParams>(), n_out, dtokens->as<int32_t>(),
         dout->as<int32_t>(), dstatus->as<int32_t>(), druns.as<int32_t>()};
    REQUIRE(walk(w, stream.s).ok());
    sh = {dlater->as<SeqDesc>(), n_seqs, drows->as<int32_t>(), static_cast<int32_t>(rows.size()), druns.as<int32_t>()};
    REQUIRE(shift(sh, stream.s).ok());
    CUDA_REQUIRE(cudaStreamSynchronize(stream.s));
    bool guards = true;
    INFO("seed " << seed);
    CHECK(druns.download<int32_t>(&guards) == runs);
    CHECK(drows->download<int32_t>(&guards) == rows);
    const std::vector<SeqDesc> dl = dlater->download<SeqDesc>(&guards);
    for (size_t i = 0; i < later.size(); ++i) CHECK(dl[i].n_past == later[i].n_past);
    CHECK(guards);
  }
}

TEST_CASE("sampling gpu: argument checks", "[gpu]") {
  REQUIRE_DEVICE();
  Batch b = make_batch(1000, 1000, LogitShape::kPeaked, 1, 7000, 1000);
  DeviceBatch d(b);
  DeviceOutputs o(b.n_rows(), b.n_real);
  const DeviceArgs good = device_args(b, d, o, nullptr);
  CHECK(sample(good).ok());
  DeviceArgs a = good;
  a.n_rows = 0;
  CHECK(sample(a).ok());  // nothing to do
  a = good;
  a.n_vocab_real = 0;
  CHECK(sample(a).code == KernelCode::kBadShape);
  a = good;
  a.n_vocab_real = 262145;
  a.logits_stride = 262145;
  CHECK(sample(a).code == KernelCode::kBadShape);
  a = good;
  a.logits_stride = 999;
  CHECK(sample(a).code == KernelCode::kBadShape);
  a = good;
  a.logits = nullptr;
  CHECK(sample(a).code == KernelCode::kBadArgument);
  a = good;
  a.out.token = nullptr;
  CHECK(sample(a).code == KernelCode::kBadArgument);
  a = good;
  a.workspace_bytes = workspace_bytes(b.n_rows(), b.n_real) - 1;
  CHECK(sample(a).code == KernelCode::kWorkspaceTooSmall);
  a = good;
  a.penalties.prompt_bits = nullptr;
  CHECK(sample(a).code == KernelCode::kBadArgument);
  CHECK(workspace_bytes(0, 1000) == 0);
  CHECK(workspace_bytes(4, 248077) >= workspace_bytes(1, 248077));
  CHECK(update_penalties(good.penalties, nullptr, nullptr, -1, 0, nullptr).code == KernelCode::kBadShape);
  CHECK(update_penalties(good.penalties, nullptr, nullptr, 0, 0, nullptr).ok());
  CUDA_REQUIRE(cudaDeviceSynchronize());
}
