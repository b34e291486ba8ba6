// CudaBackend: the Backend ops as launches of the kernels in kernels/ on one stream. A step's metadata is copied to
// fixed device buffers once (begin_step); every op launches asynchronously and records the first failure;
// end_step() copies the small per-row results back, synchronises once and reports the step's status. Nothing in a
// step waits on the host until end_step.
#include "backend/cuda/cuda_backend.h"

#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>
#include <type_traits>

#include "attention/attention.h"
#include "backend/cuda/cuda_internal.h"
#include "backend/cuda/verify_items.h"
#include "backend/step_graphs.h"
#include "backend/cuda_layout.h"
#include "common/named_logger.h"
#include "common/fp_formats.h"
#include "elementwise/elementwise.h"
#include "gdn/gdn.h"
#include "norm/norm.h"
#include "sampling/accept.h"
#include "sampling/accepted_runs.h"
#include "sampling/mask_handoff.h"
#include "sampling/sampling.h"
#include "sampling/sampling_math.h"

namespace voltserve {
namespace cuda {

Status cuda_status(cudaError_t e, const char* call, const char* file, int line) {
  return internal_error(std::string("CUDA error ") + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ") in " +
                        call + " at " + file + ":" + std::to_string(line));
}

Status kernel_status(const kernels::KernelStatus& s, std::string_view op) {
  std::string m = "cuda backend: " + std::string(op) + ": " + s.message + " (" + s.file + ":" + std::to_string(s.line);
  if (s.code == kernels::KernelCode::kCudaError) {
    m += ", error " + std::to_string(s.cuda_error);
    if (s.cuda_error > 0 && s.cuda_error < 10000) m += std::string(" ") + cudaGetErrorName(static_cast<cudaError_t>(s.cuda_error));
  }
  return internal_error(m + ")");
}

DeviceMemory::~DeviceMemory() {
  for (void* p : blocks_) cudaFree(p);
}

Result<void*> DeviceMemory::alloc(size_t bytes, std::string_view what) {
  void* p = nullptr;
  const size_t n = std::max<size_t>(bytes, 256);
  const cudaError_t e = cudaMalloc(&p, n);
  if (e != cudaSuccess) {
    cudaGetLastError();  // clear the (non-sticky) allocation error
    size_t free_b = 0, total_b = 0;
    cudaMemGetInfo(&free_b, &total_b);
    return resource_exhausted("cuda backend: out of device memory allocating " + std::string(what) + " (" +
                              std::to_string(n >> 20) + " MiB): " + std::to_string(bytes_ >> 20) +
                              " MiB allocated so far, " + std::to_string(free_b >> 20) + " MiB free of " +
                              std::to_string(total_b >> 20) +
                              " MiB. The model does not fit with these settings: try a shorter --context, fewer "
                              "--max-running sequences, or a smaller weight format");
  }
  // Zeroed before anything uses it: the memset runs on the legacy stream, which does not order with the backend's
  // non-blocking stream, so wait for it here.
  if (cudaMemset(p, 0, n) != cudaSuccess || cudaDeviceSynchronize() != cudaSuccess) {
    cudaFree(p);
    return internal_error("cuda backend: zeroing " + std::string(what) + " failed");
  }
  blocks_.push_back(p);
  bytes_ += static_cast<int64_t>(n);
  return p;
}

namespace {

spdlog::logger& cuda_log() { return named_logger("cuda"); }

// How long the device waits for a step's token masks before it gives up (a host that never publishes them is a
// bug; the step then fails instead of hanging the device). A mask takes microseconds to milliseconds.
constexpr int64_t kMaskTimeoutNs = 20'000'000'000;

template <class T>
T* dptr(void* p) {
  return static_cast<T*>(p);
}

// A pinned host buffer that grows (pinned so that the step's copies are asynchronous). A mapped one is also
// addressable by kernels (device()), which read it over the bus.
class PinnedBuffer {
 public:
  explicit PinnedBuffer(bool mapped = false) : mapped_(mapped) {}
  ~PinnedBuffer() {
    if (p_ != nullptr) cudaFreeHost(p_);
  }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  Status reserve(size_t bytes) {
    if (bytes <= size_) return Status::ok();
    if (p_ != nullptr) cudaFreeHost(p_);
    p_ = nullptr;
    device_ = nullptr;
    size_ = 0;
    VS_CUDA_RETURN(cudaHostAlloc(&p_, bytes, mapped_ ? cudaHostAllocMapped : cudaHostAllocDefault));
    if (mapped_) VS_CUDA_RETURN(cudaHostGetDevicePointer(&device_, p_, 0));
    size_ = bytes;
    return Status::ok();
  }
  template <class T>
  T* as() const {
    return static_cast<T*>(p_);
  }
  template <class T>
  T* device() const {
    return static_cast<T*>(device_);
  }

 private:
  bool mapped_;
  void* p_ = nullptr;
  void* device_ = nullptr;
  size_t size_ = 0;
};

// Per-op device time (CudaBackendOptions::op_timing): an event pair around each op, read after the step's sync.
// Steps of at most kMaxGraphTokens tokens (decode-sized) and larger ones (prefill chunks) are totalled apart, so
// that a decode breakdown carries no share of the prompt.
class OpTimer {
 public:
  ~OpTimer() {
    for (auto& e : events_) {
      cudaEventDestroy(e.first);
      cudaEventDestroy(e.second);
    }
  }
  struct Scope {
    OpTimer* timer = nullptr;
    size_t index = 0;
    cudaStream_t stream = nullptr;
    ~Scope() {
      if (timer != nullptr) cudaEventRecord(timer->events_[index].second, stream);
    }
  };
  Scope scope(bool on, const char* op, cudaStream_t stream) {
    if (!on) return {};
    if (used_ == events_.size()) {
      std::pair<cudaEvent_t, cudaEvent_t> e{};
      cudaEventCreate(&e.first);
      cudaEventCreate(&e.second);
      events_.push_back(e);
      names_.emplace_back();
    }
    names_[used_] = op;
    cudaEventRecord(events_[used_].first, stream);
    return {this, used_++, stream};
  }
  // After the stream synchronised: adds this step's times to the totals of its kind.
  void collect(int64_t n_tokens) {
    Kind& kind = n_tokens <= kMaxGraphTokens ? decode_ : prefill_;
    for (size_t i = 0; i < used_; ++i) {
      float ms = 0.0f;
      if (cudaEventElapsedTime(&ms, events_[i].first, events_[i].second) == cudaSuccess) {
        auto& t = kind.totals[names_[i]];
        t.first += ms;
        t.second += 1;
      }
    }
    used_ = 0;
    ++kind.n_steps;
  }
  void log(spdlog::logger& log) const {
    log_kind(log, decode_, "decode-sized steps (<= " + std::to_string(kMaxGraphTokens) + " tokens)");
    log_kind(log, prefill_, "larger steps (prefill)");
  }

 private:
  struct Kind {
    std::map<std::string, std::pair<double, int64_t>> totals;
    int64_t n_steps = 0;
  };
  static void log_kind(spdlog::logger& log, const Kind& k, const std::string& what) {
    if (k.n_steps == 0) return;
    double total = 0.0;
    for (const auto& [name, t] : k.totals) total += t.first;
    log.info("cuda: per-op device time over {} {} ({:.3f} ms per step in ops):", k.n_steps, what, total / k.n_steps);
    std::vector<std::pair<std::string, std::pair<double, int64_t>>> rows(k.totals.begin(), k.totals.end());
    std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.first > b.second.first; });
    for (const auto& [name, t] : rows) {
      log.info("cuda:   {:<20} {:9.3f} ms/step {:6.1f}%  {:6.1f} launches/step", name, t.first / k.n_steps,
               total > 0 ? 100.0 * t.first / total : 0.0, static_cast<double>(t.second) / k.n_steps);
    }
  }

  std::vector<std::pair<cudaEvent_t, cudaEvent_t>> events_;
  std::vector<std::string> names_;
  size_t used_ = 0;
  Kind decode_, prefill_;
};

// "model.language_model.layers.3.mlp.gate_proj + model.language_model.layers.3.mlp.up_proj" -> "linear
// mlp.gate_proj+up_proj": the module without its layer, so the op timer adds up all layers of one kind.
std::string linear_label(std::string_view what) {
  std::string out = "linear ";
  bool first = true;
  size_t at = 0;
  while (at <= what.size()) {
    size_t end = what.find(" + ", at);
    if (end == std::string_view::npos) end = what.size();
    std::string_view part = what.substr(at, end - at);
    if (const size_t l = part.find("layers."); l != std::string_view::npos) {
      const size_t dot = part.find('.', l + 7);
      part = dot == std::string_view::npos ? part : part.substr(dot + 1);
    }
    if (!first) {
      const size_t last_dot = part.rfind('.');
      part = last_dot == std::string_view::npos ? part : part.substr(last_dot + 1);
      out += "+";
    }
    out += std::string(part);
    first = false;
    at = end + 3;
  }
  return out;
}

// Backend::device_timeline: an event pair around each step's launches (start before its first, end after its last),
// in a ring that is read after each wait for the device. A deferred chain leaves up to kMaxDeferredSteps pairs
// unread; the ring holds more.
class StepTimeline {
 public:
  ~StepTimeline() {
    for (Slot& s : ring_) {
      if (s.start != nullptr) cudaEventDestroy(s.start);
      if (s.end != nullptr) cudaEventDestroy(s.end);
    }
  }
  Status create() {
    for (Slot& s : ring_) {
      VS_CUDA_RETURN(cudaEventCreate(&s.start));
      VS_CUDA_RETURN(cudaEventCreate(&s.end));
    }
    on_ = true;
    return Status::ok();
  }
  // Before the step's first launch, and after its last (decode: at most kMaxGraphTokens token rows).
  void start(cudaStream_t stream) {
    if (!on_ || next_ - read_ >= kSlots - 1) return;
    ring_[next_ % kSlots].after_wait = std::exchange(waited_, false);
    started_ = cudaEventRecord(ring_[next_ % kSlots].start, stream) == cudaSuccess;
  }
  void end(cudaStream_t stream, bool decode) {
    if (!std::exchange(started_, false)) return;
    Slot& s = ring_[next_ % kSlots];
    if (cudaEventRecord(s.end, stream) != cudaSuccess) return;
    s.decode = decode;
    ++next_;
  }
  // After a wait for the device: every recorded pair is complete.
  void read() {
    waited_ = true;
    for (; read_ < next_; ++read_) {
      const Slot& s = ring_[read_ % kSlots];
      float busy = 0.0f, gap = 0.0f;
      if (!s.decode || cudaEventElapsedTime(&busy, s.start, s.end) != cudaSuccess) continue;
      ++totals_.steps;
      totals_.busy_seconds += 1e-3 * busy;
      if (read_ > 0 && cudaEventElapsedTime(&gap, ring_[(read_ - 1) % kSlots].end, s.start) == cudaSuccess) {
        ++totals_.gaps;
        totals_.gap_seconds += 1e-3 * gap;
        if (!s.after_wait) {
          ++totals_.queued_gaps;
          totals_.queued_gap_seconds += 1e-3 * gap;
        }
      }
    }
    cudaGetLastError();  // an unreadable pair is skipped, not a step error
  }
  DeviceTimeline totals() const { return totals_; }

 private:
  static constexpr uint64_t kSlots = 64;
  struct Slot {
    cudaEvent_t start = nullptr;
    cudaEvent_t end = nullptr;
    bool decode = false;
    bool after_wait = false;  // the host waited for the device between the step before and this one
  };
  std::array<Slot, kSlots> ring_{};
  uint64_t next_ = 0;  // pairs recorded
  uint64_t read_ = 0;  // pairs read
  bool on_ = false;
  bool started_ = false;
  bool waited_ = true;  // a wait for the device since the last start()
  DeviceTimeline totals_;
};

class CudaBackend final : public Backend {
 public:
  static Result<std::unique_ptr<CudaBackend>> create(const CudaBackendOptions& options);
  ~CudaBackend() override;

  std::string name() const override { return name_; }
  DType activation_dtype() const override { return DType::kF16; }
  int64_t weight_bytes() const override { return weight_bytes_; }
  double read_gbps() const override { return report_.read_gbps; }
  bool accepts_drafts() const override { return true; }  // verify_items.h
  std::optional<DeviceMemoryInfo> device_memory() const override;

  Result<Tensor> alloc(int64_t rows, int64_t cols, DType dtype, std::string_view what) override;
  Result<Tensor> upload(std::span<const float> host, int64_t rows, int64_t cols, std::string_view what) override;
  Result<Tensor> upload_ids(std::span<const int32_t> ids, std::string_view what) override;
  Result<std::unique_ptr<PreparedLinear>> prepare_linear(std::span<const kernels::HostWeightRef> parts,
                                                         std::string_view what) override;
  Status configure(const StepLimits& limits) override;
  Status reset_sampling_slot(int32_t slot) override;
  void zero_rows(Tensor& t, int64_t row_begin, int64_t row_end) override;
  Status begin_step(const StepBatch& batch) override;
  Status end_step(StepResult& result) override;
  Status end_step_deferred() override;
  Status take_deferred(std::vector<StepResult>& results) override;
  bool rerun_step() const override { return rerun_; }
  int64_t graph_replays() const override { return graphs_.replays(); }
  DeviceTimeline device_timeline() const override { return timeline_.totals(); }

  void embed(const PreparedLinear& table, Tensor& out) override;
  void embed_samples(const PreparedLinear& table, const Tensor& id_map, Tensor& out) override;
  void rms_norm(const Tensor& x, const Tensor& w, float eps, Tensor& out) override;
  void rms_norm_residual(const Tensor& x, Tensor& residual, const Tensor& w, float eps, Tensor& out) override;
  void linear(const PreparedLinear& w, const Tensor& x, Tensor& out) override;
  void swiglu(const Tensor& gate, const Tensor& up, Tensor& out) override;
  void gather_output_rows(const Tensor& x, Tensor& out) override;
  void gated_attention(const AttentionParams& p, const AttentionWeights& w, const Tensor& qg, const Tensor& k,
                       const Tensor& v, KvCacheLayer& cache, Tensor& out) override;
  void gdn_layer(const GdnParams& p, const GdnWeights& w, const Tensor& qkv, const Tensor& z, const Tensor& b,
                 const Tensor& a, GdnStateLayer& state, Tensor& out) override;
  Status gdn_commit(const GdnParams& p, std::span<GdnStateLayer> layers, int32_t slot, int32_t index) override;
  Status copy_rows(const Tensor& src, int64_t src_row, Tensor& dst, int64_t dst_row, int64_t n_rows) override;
  void lm_head_outputs(const PreparedLinear& head, const Tensor& hidden, Tensor& logits_ws) override;

 private:
  CudaBackend() = default;
  void fail(Status s) {
    if (step_status_.is_ok()) step_status_ = std::move(s);
  }
  bool check(const kernels::KernelStatus& s, std::string_view op) {
    if (s.ok()) return true;
    fail(kernel_status(s, op));
    return false;
  }
  bool in_step(std::string_view op) {
    if (in_step_) return true;
    fail(internal_error("cuda backend: " + std::string(op) + " outside a step"));
    return false;
  }
  // An op's start: adds the op and what it was called with to the step's fingerprint; false when it must not
  // launch (outside a step, or a probe, which only fingerprints the step's ops).
  template <class... A>
  bool enter(std::string_view op, const A&... args) {
    if (!in_step(op)) return false;
    fp_.add(static_cast<uint64_t>(std::hash<std::string_view>{}(op)));
    (fingerprint(args), ...);
    return mode_ != StepMode::kProbe;
  }
  template <class T>
  void fingerprint(const T& v) {
    if constexpr (std::is_same_v<T, Tensor>) {
      fp_.add(v);
    } else if constexpr (std::is_pointer_v<T>) {
      fp_.add(static_cast<const void*>(v));
    } else if constexpr (std::is_same_v<T, AttentionParams> || std::is_same_v<T, GdnParams>) {
      // Values, not the address: a caller may pass a copy (the MTP head sets its page size on one).
      static_assert(sizeof(T) % 4 == 0 && std::is_trivially_copyable_v<T>, "4-byte fields only, no padding");
      uint32_t words[sizeof(T) / 4];
      std::memcpy(words, &v, sizeof(T));
      for (uint32_t w : words) fp_.add(uint64_t{w});
    } else if constexpr (std::is_same_v<T, float>) {
      uint32_t bits = 0;
      std::memcpy(&bits, &v, sizeof bits);
      fp_.add(uint64_t{bits});
    } else {
      static_assert(std::is_integral_v<T>);
      fp_.add(static_cast<uint64_t>(v));
    }
  }
  // end_step of a probe or a captured run; the step's outputs are then copied back as for an eager one.
  Status finish_probe();
  // A probed or captured step's graph launched at its end (or the step asked for again: rerun_step).
  Status launch_graph();
  // embed / embed_samples after their checks: table rows of `ids` (device), through id_map when it is not empty.
  void embed_rows(const PreparedLinear& table, const int32_t* ids, const Tensor& id_map, Tensor& out,
                  std::string_view op);
  Status finish_capture();
  // Once the step's work is launched: completes the batch's token masks on the host (waiting for the mask worker),
  // writes them where the device waits for them (await_host_masks in lm_head_outputs) and publishes the ticket.
  void publish_masks();
  // Scratch shared by the kernels of a step (they run one after another on the stream).
  Status ensure_scratch(size_t bytes);
  void linear_rows(const CudaLinear& w, const void* x, int64_t m, float* y, int64_t y_stride);

  CudaBackendOptions options_;
  OpTimer timer_;
  std::string name_;
  cuda::DeviceReport report_;
  kernels::KernelFamily family_ = kernels::KernelFamily::kSm80;
  cudaStream_t stream_ = nullptr;
  bool pdl_ = false;  // options_.pdl on an sm_90+ device
  cublasHandle_t cublas_ = nullptr;
  cuda::DeviceMemory memory_;
  StepLimits limits_;
  bool configured_ = false;
  size_t linear_ws_rows_bytes_ = 0;  // the largest M >= 65 scratch any weight wants at max_tokens
  void* scratch_ = nullptr;
  size_t scratch_bytes_ = 0;
  int64_t n_weights_ = 0;
  int64_t weight_bytes_ = 0;
  int64_t next_progress_bytes_ = int64_t{1} << 30;
  bool logged_layout_drift_ = false;

  // Step buffers (device), sized by configure().
  int32_t* d_tokens_ = nullptr;
  kernels::SeqDesc* d_seqs_ = nullptr;
  int32_t* d_pages_ = nullptr;
  int32_t* d_out_rows_ = nullptr;
  kernels::sampling::RowParams* d_row_params_ = nullptr;
  int32_t* d_bias_ids_ = nullptr;
  float* d_bias_values_ = nullptr;
  uint32_t* d_masks_ = nullptr;  // [max_tokens, mask_words(limits)]: the step's token masks
  // The masks' hand-off (kernels/sampling/mask_handoff.h): the host writes them into h_masks_ (pinned) and
  // publishes the step's ticket in h_mask_sync_[0] (mapped) after the step is launched; h_mask_sync_[1] is where the device reports one
  // it gave up waiting for. d_mask_ticket_ holds the step's ticket, uploaded with the step's metadata.
  PinnedBuffer h_masks_;
  PinnedBuffer h_mask_sync_{/*mapped=*/true};
  uint32_t* d_mask_ticket_ = nullptr;
  uint32_t mask_ticket_ = 0;
  int32_t* d_token_out_ = nullptr;
  float* d_logprob_out_ = nullptr;
  int32_t* d_top_ids_ = nullptr;
  float* d_top_lp_ = nullptr;
  int32_t* d_status_ = nullptr;
  int32_t* d_nan_index_ = nullptr;
  kernels::gdn::Commit* d_commit_ = nullptr;
  // Accepted runs (kernels/sampling/accepted_runs.h): what the walk at the end of a step with verify items leaves for
  // later steps' shifts (SeqDesc::shift_rows / shift_past).
  int32_t* d_runs_ = nullptr;
  std::vector<kernels::gdn::State> commit_states_;  // gdn_commit's layers, reused round to round
  kernels::sampling::PenaltyState penalties_;

  // CUDA graphs of decode-sized steps (step_graphs.h). A graph-sized step first runs as a probe: the ops are
  // fingerprinted, nothing is launched; end_step then replays the step's graph, or asks for the step again
  // (rerun_step) to run it eagerly (first sight) or captured into a graph (second sight).
  enum class StepMode { kEager, kProbe, kCapture };
  StepGraphCache graphs_;
  StepMode mode_ = StepMode::kEager;
  StepMode rerun_mode_ = StepMode::kEager;
  bool rerun_ = false;
  StepFingerprint fp_;
  std::vector<int64_t> shape_;

  // The current step (host side).
  const StepBatch* batch_ = nullptr;
  bool in_step_ = false;
  Status step_status_;
  int32_t max_seq_tokens_ = 0;
  int32_t max_context_ = 0;
  std::vector<kernels::sampling::RowParams> row_params_;
  std::vector<int32_t> out_rows_;
  PinnedBuffer h_results_;    // token, logprob, top ids, top logprobs, status, nan index of every output row
  // Deferred steps (end_step_deferred): per step, the sampled ids and then the statuses of its output rows, in
  // slots of max_tokens each; deferred_rows_ holds each kept step's row count.
  static constexpr size_t kMaxDeferredSteps = 32;
  PinnedBuffer h_deferred_;
  std::vector<int32_t> deferred_rows_;
  // The verify items of deferred steps, walked when their rows come down (take_deferred): the deferred step, its
  // output rows [first, first + n) and drafts.
  struct DeferredItem {
    size_t step = 0;
    int64_t first = 0;
    int64_t n = 0;
    std::vector<int32_t> drafts;
  };
  std::vector<DeferredItem> deferred_items_;
  StepTimeline timeline_;
  PinnedBuffer h_logits_;     // rows with kOutLogits
  PinnedBuffer h_hidden_;     // rows with kOutHidden (fp16)
  int64_t n_logit_rows_ = 0;               // rows downloaded to h_logits_ (kOutLogits)
  std::vector<int64_t> logit_index_;        // per output row: its row in h_logits_, -1 when none
  std::vector<cuda::VerifyItem> verify_items_;  // the step's verify items (pointing into batch_->seqs)
  int64_t n_hidden_rows_ = 0;
  int64_t hidden_cols_ = 0;
};

Result<std::unique_ptr<CudaBackend>> CudaBackend::create(const CudaBackendOptions& options) {
  std::unique_ptr<CudaBackend> b(new CudaBackend());
  b->options_ = options;
  // An escape hatch for every command (serve has no flag for it): VOLTSERVE_CUDA_GRAPHS=0 launches eagerly.
  if (const char* g = std::getenv("VOLTSERVE_CUDA_GRAPHS"); g != nullptr && std::string_view(g) == "0") {
    b->options_.cuda_graphs = false;
  }
  VS_ASSIGN_OR_RETURN(b->report_, cuda::probe_device(options.device, /*measure_bandwidth=*/true));
  const int cc = b->report_.compute_capability;
  // The same kind of escape hatch: VOLTSERVE_PDL=0 launches every kernel after the previous one has finished.
  const char* pdl_env = std::getenv("VOLTSERVE_PDL");
  b->pdl_ = options.pdl && cc >= 90 && !(pdl_env != nullptr && std::string_view(pdl_env) == "0");
  if (options.kernel_family == "auto") {
    b->family_ = kernels::preferred_family(cc);
  } else if (options.kernel_family == "sm80") {
    if (cc < 80) {
      return invalid_argument("--kernel-family sm80 needs compute capability 8.0 or newer; " + b->report_.name +
                              " is " + std::to_string(cc / 10) + "." + std::to_string(cc % 10));
    }
    b->family_ = kernels::KernelFamily::kSm80;
  } else if (options.kernel_family == "sm70") {
    b->family_ = kernels::KernelFamily::kSm70;
  } else {
    return invalid_argument("unknown kernel family '" + options.kernel_family + "' (sm70, sm80 or auto)");
  }
  VS_CUDA_RETURN(cudaStreamCreateWithFlags(&b->stream_, cudaStreamNonBlocking));
  if (cublasCreate(&b->cublas_) != CUBLAS_STATUS_SUCCESS) return internal_error("cuda backend: cublasCreate failed");
  b->name_ = "cuda " + b->report_.name + " (sm_" + std::to_string(cc) + ")";
  cuda_log().info("cuda: device {} '{}', compute capability {}.{}, {} SMs, {:.1f} GiB ({:.1f} GiB free), "
                  "measured read bandwidth {:.0f} GB/s", options.device, b->report_.name, cc / 10, cc % 10,
                  b->report_.sm_count, static_cast<double>(b->report_.memory_total) / (1 << 30),
                  static_cast<double>(b->report_.memory_free) / (1 << 30), b->report_.read_gbps);
  cuda_log().info("cuda: kernel families: linear {} ({}), attention, gated delta net, norms, elementwise and "
                  "sampling portable (one implementation, sm_70 and up)",
                  kernels::family_name(b->family_), options.kernel_family == "auto" ? "picked for the device" : "forced");
  return b;
}

CudaBackend::~CudaBackend() {
  if (stream_ != nullptr) cudaStreamSynchronize(stream_);
  if (graphs_.captures() > 0) {
    cuda_log().info("cuda: {} step graphs captured, {} steps replayed from them", graphs_.captures(),
                    graphs_.replays());
  }
  graphs_.clear();
  if (options_.op_timing) timer_.log(cuda_log());
  if (cublas_ != nullptr) cublasDestroy(cublas_);
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

Result<Tensor> CudaBackend::alloc(int64_t rows, int64_t cols, DType dtype, std::string_view what) {
  if (rows < 0 || cols < 0) return invalid_argument("cuda backend: " + std::string(what) + ": negative shape");
  VS_ASSIGN_OR_RETURN(void* p, memory_.alloc(static_cast<size_t>(rows * cols) * dtype_bytes(dtype), what));
  return Tensor{p, dtype, rows, cols, cols};
}

Result<Tensor> CudaBackend::upload(std::span<const float> host, int64_t rows, int64_t cols, std::string_view what) {
  if (static_cast<int64_t>(host.size()) != rows * cols) {
    return invalid_argument("cuda backend: " + std::string(what) + ": wrong number of values");
  }
  VS_ASSIGN_OR_RETURN(Tensor t, alloc(rows, cols, DType::kF32, what));
  VS_CUDA_RETURN(cudaMemcpy(t.data, host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice));
  return t;
}

Result<Tensor> CudaBackend::upload_ids(std::span<const int32_t> ids, std::string_view what) {
  const auto n = static_cast<int64_t>(ids.size());
  VS_ASSIGN_OR_RETURN(Tensor t, alloc(1, n, DType::kI32, what));
  VS_CUDA_RETURN(cudaMemcpy(t.data, ids.data(), ids.size() * sizeof(int32_t), cudaMemcpyHostToDevice));
  return t;
}

std::optional<DeviceMemoryInfo> CudaBackend::device_memory() const {
  size_t free_b = 0, total_b = 0;
  if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) {
    cudaGetLastError();
    return std::nullopt;
  }
  DeviceMemoryInfo m;
  m.device = report_.name + " (sm_" + std::to_string(report_.compute_capability) + ")";
  m.free_bytes = static_cast<int64_t>(free_b);
  m.total_bytes = static_cast<int64_t>(total_b);
  m.allocated_bytes = memory_.bytes_allocated();
  m.weight_layout = kernels::family_name(family_);
  return m;
}

Result<std::unique_ptr<PreparedLinear>> CudaBackend::prepare_linear(std::span<const kernels::HostWeightRef> parts,
                                                                    std::string_view what) {
  const int64_t before = memory_.bytes_allocated();
  VS_ASSIGN_OR_RETURN(std::unique_ptr<cuda::CudaLinear> lin, cuda::prepare_cuda_linear(parts, family_, memory_, what));
  lin->label = linear_label(what);
  lin->bytes_ = memory_.bytes_allocated() - before;
  ++n_weights_;
  weight_bytes_ += lin->bytes_;
  // The memory plan counts weights with cuda_layout; say so once if this backend's allocations drifted from it.
  if (const int64_t planned = cuda_layout::linear_bytes(parts, family_);
      planned != lin->bytes_ && !logged_layout_drift_) {
    logged_layout_drift_ = true;
    cuda_log().warn("cuda: {} took {} bytes, the memory plan's cuda_layout counts {} (backend/cuda_layout.cpp is "
                    "out of date)", what, lin->bytes_, planned);
  }
  if (weight_bytes_ >= next_progress_bytes_) {
    cuda_log().info("cuda: weights on the device: {:.1f} GiB in {} tensors", static_cast<double>(weight_bytes_) / (1 << 30),
                    n_weights_);
    next_progress_bytes_ += int64_t{1} << 30;
  }
  return std::unique_ptr<PreparedLinear>(std::move(lin));
}

Status CudaBackend::ensure_scratch(size_t bytes) {
  if (bytes <= scratch_bytes_) return Status::ok();
  // Not while capturing (it synchronises); the capture fails and the step runs again eagerly, which grows it.
  if (mode_ == StepMode::kCapture) return internal_error("cuda backend: the kernel scratch must grow during a capture");
  // Growing happens in the first steps only. The kernels already queued keep the old buffer (it is not freed); the
  // stream is drained first so that nothing queued before overlaps the new buffer's zeroing.
  VS_CUDA_RETURN(cudaStreamSynchronize(stream_));
  VS_ASSIGN_OR_RETURN(scratch_, memory_.alloc(bytes, "kernel scratch"));
  scratch_bytes_ = bytes;
  graphs_.clear();  // they point at the old scratch
  return Status::ok();
}

Status CudaBackend::configure(const StepLimits& limits) {
  if (configured_) return internal_error("cuda backend: configure called twice");
  if (limits.max_tokens < 1 || limits.max_seqs < 1 || limits.vocab_size < 1 || limits.n_slots < 1) {
    return invalid_argument("cuda backend: step limits need max_tokens, max_seqs, vocab_size and n_slots >= 1");
  }
  limits_ = limits;
  const int32_t T = limits.max_tokens;
  auto take = [&](auto*& p, size_t count, const char* what) -> Status {
    using T0 = std::remove_pointer_t<std::remove_reference_t<decltype(p)>>;
    VS_ASSIGN_OR_RETURN(void* d, memory_.alloc(std::max<size_t>(count, 1) * sizeof(T0), what));
    p = static_cast<T0*>(d);
    return Status::ok();
  };
  VS_RETURN_IF_ERROR(take(d_tokens_, static_cast<size_t>(T), "step tokens"));
  VS_RETURN_IF_ERROR(take(d_seqs_, static_cast<size_t>(limits.max_seqs), "step sequences"));
  VS_RETURN_IF_ERROR(take(d_pages_, static_cast<size_t>(limits.max_page_refs), "step page table"));
  VS_RETURN_IF_ERROR(take(d_out_rows_, static_cast<size_t>(T), "step output rows"));
  VS_RETURN_IF_ERROR(take(d_row_params_, static_cast<size_t>(T), "step sampling parameters"));
  VS_RETURN_IF_ERROR(take(d_bias_ids_, static_cast<size_t>(limits.max_bias), "step logit_bias ids"));
  VS_RETURN_IF_ERROR(take(d_bias_values_, static_cast<size_t>(limits.max_bias), "step logit_bias values"));
  VS_RETURN_IF_ERROR(take(d_masks_, static_cast<size_t>(T) * static_cast<size_t>(mask_words(limits)), "token masks"));
  VS_RETURN_IF_ERROR(take(d_mask_ticket_, 1, "token mask ticket"));
  VS_RETURN_IF_ERROR(h_masks_.reserve(static_cast<size_t>(T) * static_cast<size_t>(mask_words(limits)) * 4));
  VS_RETURN_IF_ERROR(h_mask_sync_.reserve(2 * sizeof(uint32_t)));
  h_mask_sync_.as<uint32_t>()[0] = h_mask_sync_.as<uint32_t>()[1] = 0;
  VS_RETURN_IF_ERROR(take(d_token_out_, static_cast<size_t>(T), "sampled tokens"));
  VS_RETURN_IF_ERROR(take(d_logprob_out_, static_cast<size_t>(T), "logprobs"));
  VS_RETURN_IF_ERROR(take(d_top_ids_, static_cast<size_t>(T) * kernels::sampling::kMaxTopLogprobs, "top ids"));
  VS_RETURN_IF_ERROR(take(d_top_lp_, static_cast<size_t>(T) * kernels::sampling::kMaxTopLogprobs, "top logprobs"));
  VS_RETURN_IF_ERROR(take(d_status_, static_cast<size_t>(T), "row status"));
  VS_RETURN_IF_ERROR(take(d_nan_index_, static_cast<size_t>(T), "row NaN index"));
  VS_RETURN_IF_ERROR(take(d_commit_, 1, "GDN commit"));
  VS_RETURN_IF_ERROR(take(d_runs_, 2 * static_cast<size_t>(limits.max_seqs), "accepted runs"));
  penalties_.vocab = limits.vocab_size;
  penalties_.n_slots = limits.n_slots;
  VS_RETURN_IF_ERROR(take(penalties_.counts, static_cast<size_t>(limits.n_slots) * limits.vocab_size, "penalty counts"));
  VS_RETURN_IF_ERROR(take(penalties_.prompt_bits, static_cast<size_t>(limits.n_slots) * penalties_.words(),
                          "penalty prompt bits"));
  VS_RETURN_IF_ERROR(h_results_.reserve(static_cast<size_t>(T) * (4 + 4 + 4 + 4 + 8 * kernels::sampling::kMaxTopLogprobs)));
  VS_RETURN_IF_ERROR(h_deferred_.reserve(kMaxDeferredSteps * 2 * static_cast<size_t>(T) * sizeof(int32_t)));
  if (!options_.op_timing) VS_RETURN_IF_ERROR(timeline_.create());  // op timing's events serialise the step anyway
  // The scratch the memory plan computed for the largest step, now, so that steps never grow it (a grown scratch
  // keeps the old buffer, and a CUDA graph needs fixed pointers).
  if (limits.scratch_bytes > 0) VS_RETURN_IF_ERROR(ensure_scratch(static_cast<size_t>(limits.scratch_bytes)));
  configured_ = true;
  cuda_log().info("cuda: {} weight tensors, {:.2f} GiB on the device after the caches and workspace",
                  n_weights_, static_cast<double>(memory_.bytes_allocated()) / (1 << 30));
  return Status::ok();
}

Status CudaBackend::reset_sampling_slot(int32_t slot) {
  if (slot < 0 || slot >= limits_.n_slots) return out_of_range("cuda backend: sampling slot " + std::to_string(slot));
  const kernels::KernelStatus s = kernels::sampling::reset_penalties(penalties_, slot, stream_);
  if (!s.ok()) return kernel_status(s, "reset_penalties");
  return Status::ok();
}

void CudaBackend::zero_rows(Tensor& t, int64_t row_begin, int64_t row_end) {
  const size_t elem = dtype_bytes(t.dtype);
  if (in_step_ && !enter("zero_rows", t, row_begin, row_end)) return;
  if (row_end <= row_begin) return;
  cudaError_t e = cudaSuccess;
  if (t.stride == t.cols) {
    e = cudaMemsetAsync(static_cast<char*>(t.data) + static_cast<size_t>(row_begin * t.stride) * elem, 0,
                        static_cast<size_t>((row_end - row_begin) * t.cols) * elem, stream_);
  } else {
    e = cudaMemset2DAsync(static_cast<char*>(t.data) + static_cast<size_t>(row_begin * t.stride) * elem,
                          static_cast<size_t>(t.stride) * elem, 0, static_cast<size_t>(t.cols) * elem,
                          static_cast<size_t>(row_end - row_begin), stream_);
  }
  if (e != cudaSuccess) fail(cuda::cuda_status(e, "cudaMemsetAsync (zero_rows)", __FILE__, __LINE__));
}

Status CudaBackend::begin_step(const StepBatch& batch) {
  if (!configured_) return internal_error("cuda backend: begin_step before configure");
  step_status_ = Status::ok();
  const auto n_out = static_cast<int32_t>(batch.outputs.size());
  if (batch.n_tokens() > limits_.max_tokens || static_cast<int32_t>(batch.seqs.size()) > limits_.max_seqs ||
      static_cast<int32_t>(batch.page_table.size()) > limits_.max_page_refs ||
      static_cast<int32_t>(batch.bias_ids.size()) > limits_.max_bias || n_out > limits_.max_tokens ||
      batch.masks.size() > static_cast<size_t>(n_out) * static_cast<size_t>(mask_words(limits_)) ||
      (!batch.masks.empty() && batch.mask_words != mask_words(limits_))) {
    return internal_error("cuda backend: the step exceeds the configured limits");
  }
  for (const OutputRow& o : batch.outputs) {
    // The engine never speculates a constrained sequence (one mask per sampled token, not per draft).
    if ((o.flags & kOutAccept) && o.sampling.mask_row >= 0) {
      return internal_error("cuda backend: a verify item's rows carry token masks; acceptance does not apply them");
    }
  }
  VS_ASSIGN_OR_RETURN(verify_items_, cuda::verify_items(batch));
  VS_RETURN_IF_ERROR(check_shifts(batch, "cuda"));
  note_judged_step(batch);
  batch_ = &batch;
  in_step_ = true;
  max_seq_tokens_ = 0;
  max_context_ = 0;
  for (const kernels::SeqDesc& s : batch.seqs) {
    max_seq_tokens_ = std::max(max_seq_tokens_, s.n_tokens);
    max_context_ = std::max(max_context_, s.n_past + s.n_tokens);
  }
  // Eager steps round too, so that a graph and the eager path launch the same grids (step_graphs.h).
  if (max_context_ > 0) max_context_ = context_bucket(max_context_);
  // Each output row's sampling parameters with its sequence's slot, and the rows themselves. A verify item's row j
  // judges the draft after it and counts the drafts before it in its penalties (verify_items.h).
  row_params_ = sampler_rows(batch);
  for (const cuda::VerifyItem& it : verify_items_) {
    for (int64_t j = 0; j < it.n; ++j) {
      kernels::sampling::RowParams& r = row_params_[static_cast<size_t>(it.first + j)];
      if (j + 1 < it.n) r.draft = batch.tokens[static_cast<size_t>(it.seq->row0 + 1 + j)];
      r.pending_offset = it.seq->row0 + 1;
      r.pending_count = static_cast<int32_t>(j);
    }
  }
  out_rows_.resize(static_cast<size_t>(n_out));
  n_logit_rows_ = 0;
  n_hidden_rows_ = 0;
  logit_index_.assign(static_cast<size_t>(n_out), -1);
  for (int32_t i = 0; i < n_out; ++i) {
    const OutputRow& o = batch.outputs[static_cast<size_t>(i)];
    out_rows_[static_cast<size_t>(i)] = o.row;
    if (o.flags & kOutLogits) logit_index_[static_cast<size_t>(i)] = n_logit_rows_++;
    n_hidden_rows_ += (o.flags & kOutHidden) ? 1 : 0;
  }
  const bool rerun = std::exchange(rerun_, false);
  mode_ = StepMode::kEager;
  fp_.reset();
  shape_.clear();
  if (options_.cuda_graphs && !options_.op_timing) {
    if (auto shape = step_graph_shape(batch, max_context_); shape && !graphs_.disabled(*shape)) {
      shape_ = std::move(*shape);
      // Which rows' logits come down is the backend's choice (above): part of the shape, as the flags are.
      for (const int64_t at : logit_index_) shape_.push_back(at >= 0 ? 1 : 0);
      mode_ = rerun ? rerun_mode_ : StepMode::kProbe;
    }
  }
  auto up = [&](void* dst, const void* src, size_t bytes) -> Status {
    if (bytes == 0) return Status::ok();
    VS_CUDA_RETURN(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_));
    return Status::ok();
  };
  // Pageable copies: the driver has staged the host vectors when cudaMemcpyAsync returns (CUDA's API
  // synchronisation rules), so a deferred step's owner may rewrite them for the next step at once.
  VS_RETURN_IF_ERROR(up(d_tokens_, batch.tokens.data(), batch.tokens.size() * sizeof(int32_t)));
  VS_RETURN_IF_ERROR(up(d_seqs_, batch.seqs.data(), batch.seqs.size() * sizeof(kernels::SeqDesc)));
  VS_RETURN_IF_ERROR(up(d_pages_, batch.page_table.data(), batch.page_table.size() * sizeof(int32_t)));
  VS_RETURN_IF_ERROR(up(d_out_rows_, out_rows_.data(), out_rows_.size() * sizeof(int32_t)));
  VS_RETURN_IF_ERROR(up(d_row_params_, row_params_.data(), row_params_.size() * sizeof(kernels::sampling::RowParams)));
  VS_RETURN_IF_ERROR(up(d_bias_ids_, batch.bias_ids.data(), batch.bias_ids.size() * sizeof(int32_t)));
  VS_RETURN_IF_ERROR(up(d_bias_values_, batch.bias_values.data(), batch.bias_values.size() * sizeof(float)));
  // The token masks come later (end_step publishes them once the step is launched); their ticket goes up now.
  if (!batch.masks.empty()) {
    if (++mask_ticket_ == 0) ++mask_ticket_;  // 0 is what the hand-off words start as
    VS_RETURN_IF_ERROR(up(d_mask_ticket_, &mask_ticket_, sizeof mask_ticket_));
  }
  // The uploads stay outside the graph (a replay finds the new step's metadata in the same buffers); everything
  // from the penalty update on is captured.
  if (mode_ == StepMode::kEager) timeline_.start(stream_);
  if (mode_ == StepMode::kCapture) {
    if (const cudaError_t e = cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal); e != cudaSuccess) {
      cudaGetLastError();
      cuda_log().warn("cuda: cudaStreamBeginCapture failed ({}); steps of this shape run eagerly", cudaGetErrorName(e));
      graphs_.disable(shape_);
      mode_ = StepMode::kEager;
    }
  }
  if (!batch.seqs.empty() && mode_ != StepMode::kProbe) {
    const kernels::KernelStatus s = kernels::sampling::update_penalties(
        penalties_, d_tokens_, d_seqs_, static_cast<int32_t>(batch.seqs.size()), batch.n_tokens(), stream_);
    if (!s.ok()) {
      if (mode_ == StepMode::kCapture) {
        cudaGraph_t g = nullptr;
        if (cudaStreamEndCapture(stream_, &g) == cudaSuccess && g != nullptr) cudaGraphDestroy(g);
        mode_ = StepMode::kEager;
      }
      in_step_ = false;
      return kernel_status(s, "update_penalties");
    }
  }
  if (has_shifts(batch) && mode_ != StepMode::kProbe) {  // inside the graph: it reads the runs of the round
    kernels::sampling::ShiftArgs a;
    a.seqs = d_seqs_;
    a.n_seqs = static_cast<int32_t>(batch.seqs.size());
    a.out_rows = d_out_rows_;
    a.n_out = n_out;
    a.runs = d_runs_;
    check(kernels::sampling::shift(a, stream_), "accepted runs shift");
  }
  return Status::ok();
}

Status CudaBackend::finish_probe() {
  const uint64_t fp = fp_.value();
  if (!step_status_.is_ok()) return std::exchange(step_status_, Status::ok());
  const StepGraphCache::Next next = graphs_.after_probe(shape_, fp);
  if (next == StepGraphCache::Next::kReplay) {
    timeline_.start(stream_);
    VS_CUDA_RETURN(cudaGraphLaunch(static_cast<cudaGraphExec_t>(graphs_.graph(shape_, fp)), stream_));
    return Status::ok();
  }
  rerun_ = true;
  rerun_mode_ = next == StepGraphCache::Next::kCapture ? StepMode::kCapture : StepMode::kEager;
  return unavailable("cuda backend: the step runs again (probed for its graph)");
}

Status CudaBackend::finish_capture() {
  cudaGraph_t graph = nullptr;
  cudaError_t e = cudaStreamEndCapture(stream_, &graph);
  cudaGraphExec_t exec = nullptr;
  if (e == cudaSuccess && step_status_.is_ok()) e = cudaGraphInstantiate(&exec, graph, 0);
  if (graph != nullptr) cudaGraphDestroy(graph);
  if (e == cudaSuccess && step_status_.is_ok()) {
    graphs_.store(shape_, fp_.value(), std::shared_ptr<void>(exec, [](void* x) {
                    cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(x));
                  }));
    timeline_.start(stream_);
    VS_CUDA_RETURN(cudaGraphLaunch(exec, stream_));
    return Status::ok();
  }
  // Nothing of the step ran: run it again eagerly, and every step of this shape from now on.
  cudaGetLastError();
  cuda_log().warn("cuda: capturing a step of {} tokens as a graph failed ({}); steps of this shape run eagerly",
                  shape_.empty() ? 0 : shape_[0],
                  e != cudaSuccess ? cudaGetErrorName(e) : step_status_.message().c_str());
  step_status_ = Status::ok();
  graphs_.disable(shape_);
  rerun_ = true;
  rerun_mode_ = StepMode::kEager;
  return unavailable("cuda backend: the step runs again (graph capture failed)");
}

void CudaBackend::publish_masks() {
  if (batch_ == nullptr || batch_->masks.empty()) return;
  if (batch_->complete_masks) batch_->complete_masks();
  std::memcpy(h_masks_.as<uint32_t>(), batch_->masks.data(), batch_->masks.size() * sizeof(uint32_t));
  std::atomic_ref<uint32_t>(h_mask_sync_.as<uint32_t>()[0]).store(mask_ticket_, std::memory_order_release);
}

Status CudaBackend::launch_graph() {
  if (mode_ == StepMode::kProbe || mode_ == StepMode::kCapture) {
    const StepMode mode = std::exchange(mode_, StepMode::kEager);
    Status s = mode == StepMode::kProbe ? finish_probe() : finish_capture();
    if (!s.is_ok()) {
      in_step_ = false;
      batch_ = nullptr;
      return s;
    }
  }
  timeline_.end(stream_, batch_ != nullptr && batch_->n_tokens() <= kMaxGraphTokens);
  return Status::ok();
}

Status CudaBackend::end_step_deferred() {
  VS_RETURN_IF_ERROR(launch_graph());
  auto drop = [&](Status s) {
    in_step_ = false;
    batch_ = nullptr;
    step_status_ = Status::ok();
    deferred_rows_.clear();  // a chain with a failed step keeps nothing
    deferred_items_.clear();
    return s;
  };
  if (batch_ == nullptr) return drop(internal_error("cuda backend: end_step_deferred outside a step"));
  if (!batch_->masks.empty()) return drop(internal_error("cuda backend: a deferred step carries token masks"));
  for (const OutputRow& o : batch_->outputs) {
    if (o.flags != kOutSample && o.flags != (kOutSample | kOutAccept)) {
      return drop(internal_error("cuda backend: a deferred step's rows may only sample (and judge drafts)"));
    }
  }
  // Its verify items are walked when their rows come down; a penalized one would need its accepted drafts counted
  // into the slot's state before the next step (end_step), so it is not deferred.
  for (const cuda::VerifyItem& it : verify_items_) {
    const kernels::sampling::RowParams& row = row_params_[static_cast<size_t>(it.first)];
    if (kernels::sampling::row_process(row, nullptr, nullptr, penalties_, limits_.n_vocab_real).penalized) {
      return drop(internal_error("cuda backend: a deferred step's verify item has penalties"));
    }
    const auto d0 = batch_->tokens.begin() + it.seq->row0 + 1;
    deferred_items_.push_back({deferred_rows_.size(), it.first, it.n, std::vector<int32_t>(d0, d0 + (it.n - 1))});
  }
  if (deferred_rows_.size() >= kMaxDeferredSteps) {
    return drop(internal_error("cuda backend: more than " + std::to_string(kMaxDeferredSteps) + " deferred steps"));
  }
  const auto n = static_cast<int32_t>(batch_->outputs.size());
  const int32_t n_tokens = batch_->n_tokens();
  if (n > 0 && step_status_.is_ok()) {
    int32_t* h = h_deferred_.as<int32_t>() + deferred_rows_.size() * 2 * static_cast<size_t>(limits_.max_tokens);
    cudaMemcpyAsync(h, d_token_out_, static_cast<size_t>(n) * 4, cudaMemcpyDeviceToHost, stream_);
    cudaMemcpyAsync(h + limits_.max_tokens, d_status_, static_cast<size_t>(n) * 4, cudaMemcpyDeviceToHost, stream_);
  }
  Status s = std::exchange(step_status_, Status::ok());
  if (s.is_ok() && options_.op_timing) {  // the per-op events are read after the step, as end_step does
    if (const cudaError_t e = cudaStreamSynchronize(stream_); e != cudaSuccess) {
      s = cuda::cuda_status(e, "cudaStreamSynchronize (deferred step)", __FILE__, __LINE__);
    }
    timer_.collect(n_tokens);
  }
  if (const cudaError_t e = cudaGetLastError(); s.is_ok() && e != cudaSuccess) {
    s = cuda::cuda_status(e, "a kernel launch of the step", __FILE__, __LINE__);
  }
  if (!s.is_ok()) return drop(std::move(s));
  deferred_rows_.push_back(n);
  in_step_ = false;
  batch_ = nullptr;
  return Status::ok();
}

Status CudaBackend::take_deferred(std::vector<StepResult>& results) {
  results.clear();
  if (deferred_rows_.empty()) return Status::ok();
  const std::vector<int32_t> rows = std::exchange(deferred_rows_, {});
  const std::vector<DeferredItem> items = std::exchange(deferred_items_, {});
  VS_CUDA_RETURN(cudaStreamSynchronize(stream_));
  VS_CUDA_RETURN(cudaGetLastError());
  timeline_.read();
  results.resize(rows.size());
  for (size_t k = 0; k < rows.size(); ++k) {
    const int32_t* h = h_deferred_.as<int32_t>() + k * 2 * static_cast<size_t>(limits_.max_tokens);
    results[k].rows.resize(static_cast<size_t>(rows[k]));
    for (int32_t i = 0; i < rows[k]; ++i) {
      RowResult& r = results[k].rows[static_cast<size_t>(i)];
      r.token = h[i];
      r.status = h[limits_.max_tokens + i];
    }
  }
  std::vector<int32_t> token, status;
  for (const DeferredItem& it : items) {  // as accept_judged_items walks a step's items
    std::vector<RowResult>& r = results[it.step].rows;
    token.resize(static_cast<size_t>(it.n));
    status.resize(static_cast<size_t>(it.n));
    for (int64_t j = 0; j < it.n; ++j) {
      token[static_cast<size_t>(j)] = r[static_cast<size_t>(it.first + j)].token;
      status[static_cast<size_t>(j)] = r[static_cast<size_t>(it.first + j)].status;
    }
    kernels::sampling::accept_judged_rows(static_cast<int32_t>(it.n - 1), it.drafts.data(), token.data(), status.data());
    for (int64_t j = 0; j < it.n; ++j) {
      r[static_cast<size_t>(it.first + j)].token = token[static_cast<size_t>(j)];
      r[static_cast<size_t>(it.first + j)].status = status[static_cast<size_t>(j)];
    }
  }
  return Status::ok();
}

Status CudaBackend::end_step(StepResult& result) {
  result.clear();
  VS_RETURN_IF_ERROR(launch_graph());
  publish_masks();
  const auto n_out = static_cast<int32_t>(batch_ != nullptr ? batch_->outputs.size() : 0);
  constexpr int32_t kTop = kernels::sampling::kMaxTopLogprobs;
  int32_t* h_token = h_results_.as<int32_t>();
  float* h_logprob = reinterpret_cast<float*>(h_token + limits_.max_tokens);
  int32_t* h_status = reinterpret_cast<int32_t*>(h_logprob + limits_.max_tokens);
  int32_t* h_nan = h_status + limits_.max_tokens;
  int32_t* h_top_ids = h_nan + limits_.max_tokens;
  float* h_top_lp = reinterpret_cast<float*>(h_top_ids + static_cast<size_t>(limits_.max_tokens) * kTop);
  if (n_out > 0 && step_status_.is_ok()) {
    // Each copy costs the device a few microseconds between steps (bench decode's device_timeline): the logprobs
    // come down only for a step whose rows ask for them.
    const auto n = static_cast<size_t>(n_out);
    cudaMemcpyAsync(h_token, d_token_out_, n * 4, cudaMemcpyDeviceToHost, stream_);
    cudaMemcpyAsync(h_status, d_status_, n * 4, cudaMemcpyDeviceToHost, stream_);
    cudaMemcpyAsync(h_nan, d_nan_index_, n * 4, cudaMemcpyDeviceToHost, stream_);
    const bool logprobs = std::any_of(batch_->outputs.begin(), batch_->outputs.end(),
                                      [](const OutputRow& o) { return (o.flags & kOutLogprobs) != 0; });
    if (logprobs) {
      cudaMemcpyAsync(h_logprob, d_logprob_out_, n * 4, cudaMemcpyDeviceToHost, stream_);
      cudaMemcpyAsync(h_top_ids, d_top_ids_, n * kTop * 4, cudaMemcpyDeviceToHost, stream_);
      cudaMemcpyAsync(h_top_lp, d_top_lp_, n * kTop * 4, cudaMemcpyDeviceToHost, stream_);
    }
  }
  const cudaError_t sync = cudaStreamSynchronize(stream_);
  const cudaError_t last = cudaGetLastError();
  if (sync == cudaSuccess && last == cudaSuccess) timeline_.read();
  if (options_.op_timing) timer_.collect(batch_ != nullptr ? batch_->n_tokens() : 0);
  in_step_ = false;
  Status s = std::move(step_status_);
  step_status_ = Status::ok();
  if (s.is_ok() && sync != cudaSuccess) s = cuda::cuda_status(sync, "cudaStreamSynchronize (end of step)", __FILE__, __LINE__);
  if (s.is_ok() && last != cudaSuccess) s = cuda::cuda_status(last, "a kernel of the step", __FILE__, __LINE__);
  if (s.is_ok() && batch_ != nullptr && !batch_->masks.empty() &&
      std::atomic_ref<uint32_t>(h_mask_sync_.as<uint32_t>()[1]).load(std::memory_order_acquire) == mask_ticket_) {
    s = internal_error("cuda backend: the step's token masks were not published within " +
                       std::to_string(kMaskTimeoutNs / 1'000'000'000) + " s (the device sampled with stale ones)");
  }
  if (!s.is_ok() || batch_ == nullptr) {
    batch_ = nullptr;
    return s;
  }
  result.rows.resize(static_cast<size_t>(n_out));
  for (int32_t i = 0; i < n_out; ++i) {
    const OutputRow& o = batch_->outputs[static_cast<size_t>(i)];
    RowResult& r = result.rows[static_cast<size_t>(i)];
    if (o.flags & kOutSample) {
      r.token = h_token[i];
      r.status = h_status[i];
      r.nan_index = h_nan[i];
      if ((o.flags & kOutLogprobs) && r.status == kernels::sampling::kRowOk) {
        r.logprob = h_logprob[i];
        const int32_t n_top = std::clamp(o.sampling.n_top_logprobs, 0, kTop);
        for (int32_t t = 0; t < n_top; ++t) r.top.emplace_back(h_top_ids[i * kTop + t], h_top_lp[i * kTop + t]);
      }
    }
  }
  // The walk over the judged rows; a penalized request's accepted drafts join its slot's counts (the next step
  // counts its input token, the correction or bonus, as every step does). Only a penalized request reads the
  // counts, so the others skip the launch.
  const std::vector<int32_t> accepted = cuda::accept_judged_items(verify_items_, *batch_, result);
  for (size_t i = 0; i < verify_items_.size(); ++i) {
    const kernels::SeqDesc& q = *verify_items_[i].seq;
    const kernels::sampling::RowParams& row = row_params_[static_cast<size_t>(verify_items_[i].first)];
    const bool penalized = kernels::sampling::row_process(row, nullptr, nullptr, penalties_, limits_.n_vocab_real).penalized;
    if (accepted[i] == 0 || !penalized) continue;
    const kernels::KernelStatus st =
        kernels::sampling::count_generated(penalties_, q.slot, d_tokens_ + q.row0 + 1, accepted[i], stream_);
    if (!st.ok()) {
      batch_ = nullptr;
      return kernel_status(st, "count_generated");
    }
  }
  if (n_logit_rows_ > 0) {
    const float* l = h_logits_.as<float>();
    const auto vocab = static_cast<size_t>(limits_.vocab_size);
    for (int32_t i = 0; i < n_out; ++i) {
      if (!(batch_->outputs[static_cast<size_t>(i)].flags & kOutLogits)) continue;
      const float* row = l + static_cast<size_t>(logit_index_[static_cast<size_t>(i)]) * vocab;
      result.logits.insert(result.logits.end(), row, row + vocab);
    }
  }
  if (n_hidden_rows_ > 0) {
    const uint16_t* h = h_hidden_.as<uint16_t>();
    result.hidden.resize(static_cast<size_t>(n_hidden_rows_ * hidden_cols_));
    for (size_t i = 0; i < result.hidden.size(); ++i) result.hidden[i] = fp::f16_to_float(h[i]);
  }
  batch_ = nullptr;
  return Status::ok();
}

void CudaBackend::embed(const PreparedLinear& table, Tensor& out) {
  if (!enter("embed", &table, out)) return;
  embed_rows(table, d_tokens_, Tensor{}, out, "embed");
}

void CudaBackend::embed_samples(const PreparedLinear& table, const Tensor& id_map, Tensor& out) {
  if (!enter("embed_samples", &table, id_map, out)) return;
  for (const kernels::SeqDesc& s : batch_->seqs) {
    if (s.slot >= 0) return fail(internal_error("cuda backend: embed_samples on a step whose sequence holds a slot"));
  }
  embed_rows(table, d_token_out_, id_map, out, "embed_samples");  // what the previous step sampled, on the device
}

void CudaBackend::embed_rows(const PreparedLinear& table, const int32_t* ids, const Tensor& id_map, Tensor& out,
                             std::string_view op) {
  const auto timed = timer_.scope(options_.op_timing, "embed", stream_);
  const auto& t = static_cast<const cuda::CudaLinear&>(table);
  if (t.segments().size() != 1 || t.segments()[0].view.format != WeightFormat::kDense) {
    fail(internal_error("cuda backend: the embedding table must be one dense weight"));
    return;
  }
  kernels::elementwise::EmbedArgs a;
  a.table = t.segments()[0].view.codes;
  a.table_dtype = DType::kF16;
  a.hidden = t.k();
  a.ids = ids;
  a.id_map = id_map.empty() ? nullptr : static_cast<const int32_t*>(id_map.data);
  a.n_map = static_cast<int32_t>(id_map.cols);
  a.n_rows = batch_->n_tokens();
  a.out = out.f32();
  a.out_stride = out.stride;
  a.stream = stream_;
  check(kernels::elementwise::embed(a), op);
}

void CudaBackend::rms_norm(const Tensor& x, const Tensor& w, float eps, Tensor& out) {
  if (!enter("rms_norm", x, w, eps, out)) return;
  const auto timed = timer_.scope(options_.op_timing, "rms_norm", stream_);
  kernels::norm::RmsNormArgs a;
  a.x = x.f32();
  a.x_stride = x.stride;
  a.weight = w.empty() ? nullptr : w.f32();
  a.out = out.data;
  a.out_stride = out.stride;
  a.out_dtype = out.dtype;
  a.n_rows = static_cast<int32_t>(x.rows);
  a.n = static_cast<int32_t>(x.cols);
  a.eps = eps;
  a.stream = stream_;
  a.pdl = pdl_;
  check(kernels::norm::rms_norm(a), "rms_norm");
}

void CudaBackend::rms_norm_residual(const Tensor& x, Tensor& residual, const Tensor& w, float eps, Tensor& out) {
  if (!enter("rms_norm_residual", x, residual, w, eps, out)) return;
  const auto timed = timer_.scope(options_.op_timing, "rms_norm_residual", stream_);
  kernels::norm::RmsNormArgs a;
  a.x = x.f32();
  a.x_stride = x.stride;
  a.residual = residual.f32();
  a.residual_stride = residual.stride;
  a.weight = w.empty() ? nullptr : w.f32();
  a.out = out.data;
  a.out_stride = out.stride;
  a.out_dtype = out.dtype;
  a.n_rows = static_cast<int32_t>(x.rows);
  a.n = static_cast<int32_t>(x.cols);
  a.eps = eps;
  a.stream = stream_;
  a.pdl = pdl_;
  check(kernels::norm::rms_norm(a), "rms_norm_residual");
}

void CudaBackend::linear_rows(const cuda::CudaLinear& w, const void* x, int64_t m, float* y, int64_t y_stride) {
  const size_t ws = w.workspace_bytes(m);
  if (ws > scratch_bytes_) {
    if (Status s = ensure_scratch(ws); !s.is_ok()) {
      fail(std::move(s));
      return;
    }
  }
  for (const cuda::CudaLinear::Segment& seg : w.segments()) {
    kernels::LinearArgs a;
    a.x = x;
    a.m = m;
    a.y = y + seg.n0;
    a.y_stride = y_stride;
    a.y_f32 = true;
    a.workspace = scratch_;
    a.workspace_bytes = scratch_bytes_;
    a.cublas_handle = cublas_;
    a.stream = stream_;
    a.pdl = pdl_;
    if (!check(kernels::linear_forward(seg.view, a), "linear")) return;
  }
}

void CudaBackend::linear(const PreparedLinear& weight, const Tensor& x, Tensor& out) {
  if (!enter("linear", &weight, x, out)) return;
  const auto& w = static_cast<const cuda::CudaLinear&>(weight);
  const auto timed = timer_.scope(options_.op_timing, w.label.c_str(), stream_);
  if (x.dtype != DType::kF16 || x.stride != x.cols || x.cols != w.k() || out.dtype != DType::kF32 ||
      out.cols != w.n()) {
    fail(internal_error("cuda backend: linear [" + std::to_string(w.n()) + ", " + std::to_string(w.k()) +
                        "] needs contiguous fp16 x with k columns and fp32 out with n columns"));
    return;
  }
  if (x.rows == 0) return;
  linear_rows(w, x.data, x.rows, out.f32(), out.stride);
}

void CudaBackend::swiglu(const Tensor& gate, const Tensor& up, Tensor& out) {
  if (!enter("swiglu", gate, up, out)) return;
  const auto timed = timer_.scope(options_.op_timing, "swiglu", stream_);
  kernels::elementwise::SwigluArgs a;
  a.gate = gate.f32();
  a.gate_stride = gate.stride;
  a.up = up.f32();
  a.up_stride = up.stride;
  a.out = out.data;
  a.out_stride = out.stride;
  a.out_dtype = out.dtype;
  a.n_rows = static_cast<int32_t>(gate.rows);
  a.n = static_cast<int32_t>(gate.cols);
  a.stream = stream_;
  a.pdl = pdl_;
  check(kernels::elementwise::swiglu(a), "swiglu");
}

void CudaBackend::gather_output_rows(const Tensor& x, Tensor& out) {
  if (!enter("gather_output_rows", x, out)) return;
  const auto timed = timer_.scope(options_.op_timing, "gather_output_rows", stream_);
  kernels::elementwise::GatherArgs a;
  a.x = x.data;
  a.x_stride = x.stride;
  a.rows = d_out_rows_;
  a.out = out.data;
  a.out_stride = out.stride;
  a.dtype = x.dtype;
  a.n_rows = static_cast<int32_t>(batch_->outputs.size());
  a.n = static_cast<int32_t>(x.cols);
  a.stream = stream_;
  a.pdl = pdl_;
  check(kernels::elementwise::gather_rows(a), "gather_output_rows");
}

void CudaBackend::gated_attention(const AttentionParams& p, const AttentionWeights& w, const Tensor& qg,
                                  const Tensor& k, const Tensor& v, KvCacheLayer& cache, Tensor& out) {
  if (!enter("gated_attention", p, w.q_norm, w.k_norm, qg, k, v, cache.k, cache.v, out)) return;
  const auto timed = timer_.scope(options_.op_timing, "gated_attention", stream_);
  const auto n_seqs = static_cast<int32_t>(batch_->seqs.size());
  const size_t ws = kernels::attention::workspace_bytes(p, batch_->n_tokens(), n_seqs, max_seq_tokens_, max_context_);
  if (ws > scratch_bytes_) {
    if (Status s = ensure_scratch(ws); !s.is_ok()) return fail(std::move(s));
  }
  kernels::attention::DeviceArgs a;
  a.qg = qg.f32();
  a.qg_stride = qg.stride;
  a.k = k.f32();
  a.k_stride = k.stride;
  a.v = v.f32();
  a.v_stride = v.stride;
  a.q_norm = w.q_norm.f32();
  a.k_norm = w.k_norm.f32();
  a.k_cache = cache.k.data;
  a.v_cache = cache.v.data;
  a.cache_dtype = cache.k.dtype;
  a.k_scale = cache.k_scale;
  a.v_scale = cache.v_scale;
  a.seqs = d_seqs_;
  a.n_seqs = n_seqs;
  a.page_table = d_pages_;
  a.out = out.data;
  a.out_stride = out.stride;
  a.out_dtype = out.dtype;
  a.n_rows = batch_->n_tokens();
  a.max_seq_tokens = max_seq_tokens_;
  a.max_context = max_context_;
  a.workspace = scratch_;
  a.workspace_bytes = scratch_bytes_;
  a.stream = stream_;
  a.pdl = pdl_;
  check(kernels::attention::gated_attention(p, a), "gated_attention");
}

void CudaBackend::gdn_layer(const GdnParams& p, const GdnWeights& w, const Tensor& qkv, const Tensor& z,
                            const Tensor& b, const Tensor& a_in, GdnStateLayer& state, Tensor& out) {
  if (!enter("gdn_layer", p, w.conv, w.a_log, w.dt_bias, w.norm_weight, qkv, z, b, a_in, state.conv, state.recurrent,
             state.conv_ckpt, state.recurrent_ckpt, out)) {
    return;
  }
  const auto timed = timer_.scope(options_.op_timing, "gdn_layer", stream_);
  const auto n_seqs = static_cast<int32_t>(batch_->seqs.size());
  const kernels::gdn::State ks = gdn_state_view(state);
  if (Status s = check_gdn_checkpoints(*batch_, ks, "cuda"); !s.is_ok()) return fail(std::move(s));
  const size_t ws = kernels::gdn::workspace_bytes(p, batch_->n_tokens(), n_seqs, max_seq_tokens_);
  if (ws > scratch_bytes_) {
    if (Status s = ensure_scratch(ws); !s.is_ok()) return fail(std::move(s));
  }
  kernels::gdn::DeviceArgs a;
  a.qkv = qkv.f32();
  a.qkv_stride = qkv.stride;
  a.z = z.f32();
  a.z_stride = z.stride;
  a.b = b.f32();
  a.b_stride = b.stride;
  a.a = a_in.f32();
  a.a_stride = a_in.stride;
  a.w.conv = w.conv.f32();
  a.w.a_log = w.a_log.f32();
  a.w.dt_bias = w.dt_bias.f32();
  a.w.norm_weight = w.norm_weight.f32();
  a.state = ks;
  a.seqs = d_seqs_;
  a.n_seqs = n_seqs;
  a.out = out.data;
  a.out_stride = out.stride;
  a.out_dtype = out.dtype;
  a.mode = kernels::gdn::Mode::kAuto;
  a.n_rows = batch_->n_tokens();
  a.max_seq_tokens = max_seq_tokens_;
  a.workspace = scratch_;
  a.workspace_bytes = scratch_bytes_;
  a.stream = stream_;
  a.pdl = pdl_;
  check(kernels::gdn::gdn_forward(p, a), "gdn_layer");
}

Status CudaBackend::gdn_commit(const GdnParams& p, std::span<GdnStateLayer> layers, int32_t slot, int32_t index) {
  std::vector<kernels::gdn::State>& states = commit_states_;
  states.clear();
  for (const GdnStateLayer& state : layers) {
    if (state.recurrent.empty()) continue;
    states.push_back(gdn_state_view(state));
    VS_RETURN_IF_ERROR(check_gdn_commit(state, states.back(), slot, index, "cuda"));
  }
  if (states.empty()) return Status::ok();
  const kernels::gdn::Commit c{slot, slot, index};
  // From pageable memory the copy stages `c` before it returns (CUDA's documented behaviour for pageable
  // host-to-device copies), so no synchronisation is needed: the stream orders this commit's kernel before the
  // next commit's copy into d_commit_ and before the next step. One launch for all the layers: one per layer, each
  // with its copy, kept the host ~0.3 ms a round on a 27B (bench/RESULTS.md).
  VS_CUDA_RETURN(cudaMemcpyAsync(d_commit_, &c, sizeof(c), cudaMemcpyHostToDevice, stream_));
  const kernels::KernelStatus s =
      kernels::gdn::commit(p, states.data(), static_cast<int32_t>(states.size()), d_commit_, 1, stream_);
  if (!s.ok()) return kernel_status(s, "gdn_commit");
  return Status::ok();
}

Status CudaBackend::copy_rows(const Tensor& src, int64_t src_row, Tensor& dst, int64_t dst_row, int64_t n_rows) {
  // Between steps only: a copy inside a step would not be part of its captured graph.
  if (in_step_) return internal_error("cuda backend: copy_rows inside a step");
  if (n_rows <= 0) return Status::ok();
  const size_t elem = dtype_bytes(src.dtype);
  // Device to device on the backend's stream: ordered after the step that wrote the source and before the next
  // step that reads the destination, without a host round trip.
  VS_CUDA_RETURN(cudaMemcpy2DAsync(static_cast<char*>(dst.data) + static_cast<size_t>(dst_row * dst.stride) * elem,
                                   static_cast<size_t>(dst.stride) * elem,
                                   static_cast<const char*>(src.data) + static_cast<size_t>(src_row * src.stride) * elem,
                                   static_cast<size_t>(src.stride) * elem, static_cast<size_t>(src.cols) * elem,
                                   static_cast<size_t>(n_rows), cudaMemcpyDeviceToDevice, stream_));
  return Status::ok();
}

void CudaBackend::lm_head_outputs(const PreparedLinear& head_w, const Tensor& hidden, Tensor& logits_ws) {
  if (!in_step("lm_head_outputs")) return;
  const auto& head = static_cast<const cuda::CudaLinear&>(head_w);
  const auto& outputs = batch_->outputs;
  const auto n_out = static_cast<int64_t>(outputs.size());
  const int64_t vocab = head.n();
  const int64_t chunk = logits_ws.rows;
  if (n_logit_rows_ > 0) {
    if (Status s = h_logits_.reserve(static_cast<size_t>(n_logit_rows_ * vocab) * sizeof(float)); !s.is_ok()) {
      return fail(std::move(s));
    }
  }
  if (n_hidden_rows_ > 0) {
    hidden_cols_ = hidden.cols;
    if (Status s = h_hidden_.reserve(static_cast<size_t>(n_hidden_rows_ * hidden.cols) * dtype_bytes(hidden.dtype));
        !s.is_ok()) {
      return fail(std::move(s));
    }
  }
  // The host buffers the outputs are copied into are part of what a captured graph points at.
  if (!enter("lm_head_outputs", &head_w, hidden, logits_ws, h_logits_.as<void>(), h_hidden_.as<void>(),
             static_cast<uint64_t>(batch_->masks.size()))) {
    return;
  }
  const auto timed = timer_.scope(options_.op_timing, "lm_head_outputs", stream_);
  const size_t sample_ws = kernels::sampling::workspace_bytes(static_cast<int32_t>(chunk), limits_.n_vocab_real);
  if (sample_ws > scratch_bytes_) {
    if (Status s = ensure_scratch(sample_ws); !s.is_ok()) return fail(std::move(s));
  }
  // The token masks are still being computed on the host (core/mask_worker.h) when this is launched: the device
  // waits for them just before the first sampling, so that the lm_head's first chunk runs meanwhile.
  bool masks_here = batch_->masks.empty();
  auto await_masks = [&] {
    if (std::exchange(masks_here, true)) return true;
    kernels::sampling::MaskHandoff h;
    h.host_masks = h_masks_.as<const uint32_t>();
    h.ready = h_mask_sync_.device<const uint32_t>();
    h.timed_out = h_mask_sync_.device<uint32_t>() + 1;
    h.ticket = d_mask_ticket_;
    h.masks = d_masks_;
    h.n_words = static_cast<int64_t>(batch_->masks.size());
    h.timeout_ns = kMaskTimeoutNs;
    return check(kernels::sampling::await_host_masks(h, stream_), "await_host_masks");
  };
  int64_t hidden_row = 0;
  const size_t elem = dtype_bytes(hidden.dtype);
  for (int64_t r0 = 0; r0 < n_out; r0 += chunk) {
    const int64_t nr = std::min(chunk, n_out - r0);
    const void* x = static_cast<const char*>(hidden.data) + static_cast<size_t>(r0 * hidden.stride) * elem;
    linear_rows(head, x, nr, logits_ws.f32(), logits_ws.stride);
    if (!step_status_.is_ok()) return;
    bool any_sample = false;
    for (int64_t i = 0; i < nr; ++i) any_sample |= (outputs[static_cast<size_t>(r0 + i)].flags & kOutSample) != 0;
    if (any_sample) {
      if (!await_masks()) return;
      kernels::sampling::DeviceArgs a;
      a.logits = logits_ws.f32();
      a.logits_stride = logits_ws.stride;
      a.n_rows = static_cast<int32_t>(nr);
      a.n_vocab_real = std::min<int32_t>(limits_.n_vocab_real, static_cast<int32_t>(vocab));
      a.rows = d_row_params_ + r0;
      a.bias_ids = d_bias_ids_;
      a.bias_values = d_bias_values_;
      a.penalties = penalties_;
      a.penalties.pending = d_tokens_;  // the verify rows' drafts (RowParams::pending_*)
      a.masks = batch_->masks.empty() ? nullptr : d_masks_;
      a.mask_words = batch_->mask_words;
      a.out.token = d_token_out_ + r0;
      a.out.logprob = d_logprob_out_ + r0;
      a.out.top_ids = d_top_ids_ + r0 * kernels::sampling::kMaxTopLogprobs;
      a.out.top_logprobs = d_top_lp_ + r0 * kernels::sampling::kMaxTopLogprobs;
      a.out.status = d_status_ + r0;
      a.out.nan_index = d_nan_index_ + r0;
      a.workspace = scratch_;
      a.workspace_bytes = scratch_bytes_;
      a.stream = stream_;
      if (!check(kernels::sampling::sample(a), "sample")) return;
    }
    for (int64_t i = 0; i < nr; ++i) {
      const OutputRow& o = outputs[static_cast<size_t>(r0 + i)];
      cudaError_t e = cudaSuccess;
      if (logit_index_[static_cast<size_t>(r0 + i)] >= 0) {  // kOutLogits
        e = cudaMemcpyAsync(h_logits_.as<float>() + logit_index_[static_cast<size_t>(r0 + i)] * vocab,
                            logits_ws.f32_row(i),
                            static_cast<size_t>(vocab) * sizeof(float), cudaMemcpyDeviceToHost, stream_);
      }
      if (e == cudaSuccess && (o.flags & kOutHidden)) {
        e = cudaMemcpyAsync(h_hidden_.as<char>() + static_cast<size_t>(hidden_row * hidden.cols) * elem,
                            static_cast<const char*>(hidden.data) + static_cast<size_t>((r0 + i) * hidden.stride) * elem,
                            static_cast<size_t>(hidden.cols) * elem, cudaMemcpyDeviceToHost, stream_);
        ++hidden_row;
      }
      if (e != cudaSuccess) return fail(cuda::cuda_status(e, "cudaMemcpyAsync (step outputs)", __FILE__, __LINE__));
    }
  }
  if (!verify_items_.empty()) {  // the accepted runs stay on the device for the steps after (SeqDesc::shift_rows)
    kernels::sampling::WalkArgs w;
    w.seqs = d_seqs_;
    w.n_seqs = static_cast<int32_t>(batch_->seqs.size());
    w.out_rows = d_out_rows_;
    w.rows = d_row_params_;
    w.n_out = static_cast<int32_t>(batch_->outputs.size());
    w.tokens = d_tokens_;
    w.token_out = d_token_out_;
    w.status = d_status_;
    w.runs = d_runs_;
    check(kernels::sampling::walk(w, stream_), "accepted runs walk");
  }
}

}  // namespace
}  // namespace cuda

bool cuda_backend_available(std::string* why) {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    if (why != nullptr) {
      *why = e != cudaSuccess ? std::string("no CUDA device usable: ") + cudaGetErrorString(e) : "no CUDA device visible";
    }
    cudaGetLastError();
    return false;
  }
  return true;
}

Result<std::unique_ptr<Backend>> make_cuda_backend(const CudaBackendOptions& options) {
  VS_ASSIGN_OR_RETURN(auto b, cuda::CudaBackend::create(options));
  return std::unique_ptr<Backend>(std::move(b));
}

}  // namespace voltserve
