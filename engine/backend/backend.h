// Backend: the op interface the Qwen3.5 forward pass is written against once (engine/model/qwen35_model.cpp),
// shaped for a device. A step's metadata (token ids, positions, slots, page tables, output rows and their sampling
// parameters) is handed over once, in begin_step(); ops then name only tensors, which are views of memory the
// backend allocated once (weights, caches, a workspace sized for the largest step), so the pointers of a step are
// the same from one step of the same size to the next and a device backend can capture a step as a graph. Ops
// report failures into a sticky per-step error that end_step() returns. Sampling is an op: a device returns token
// ids and logprobs, never the full logits unless asked. The CPU backend (backend/cpu/) is the fp32 reference over
// kernels/*/*_ref.cpp; tested against transformers in tests/golden, and by tests/golden/runner_contract_test.cpp.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "attention/attention.h"
#include "common/dtype.h"
#include "common/step_desc.h"
#include "gdn/gdn.h"
#include "linear/linear_ref.h"
#include "sampling/accept.h"
#include "sampling/sampling.h"
#include "voltserve/model_info.h"
#include "voltserve/status.h"

namespace voltserve {

// A view of backend memory: `rows` x `cols` elements of `dtype`, row r at data + r * stride elements.
struct Tensor {
  void* data = nullptr;
  DType dtype = DType::kF32;
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t stride = 0;

  bool empty() const { return data == nullptr; }
  // The first n rows (a step uses the top of a workspace buffer sized for the largest step).
  Tensor first_rows(int64_t n) const { return {data, dtype, n, cols, stride}; }
  // Columns [c0, c0 + n): one projection's part of a merged output.
  Tensor columns(int64_t c0, int64_t n) const {
    return {static_cast<char*>(data) + c0 * static_cast<int64_t>(dtype_bytes(dtype)), dtype, rows, n, stride};
  }
  Tensor row(int64_t r) const {
    return {static_cast<char*>(data) + r * stride * static_cast<int64_t>(dtype_bytes(dtype)), dtype, 1, cols, stride};
  }
  // Host-addressable fp32 views (CPU backend and tests).
  float* f32() const { return static_cast<float*>(data); }
  float* f32_row(int64_t r) const { return f32() + r * stride; }
};

// A linear layer's weight prepared for this backend: y = x W^T, W [n, k]. Made from one or several checkpoint
// tensors that read the same input (q|k|v, qkv|z|b|a, gate|up): their rows are concatenated, so one op computes the
// concatenated output and the model reads each part as a column range.
class PreparedLinear {
 public:
  virtual ~PreparedLinear() = default;
  virtual int64_t n() const = 0;  // output features (all parts)
  virtual int64_t k() const = 0;  // input features
  virtual int64_t bytes() const = 0;  // what it holds on its backend
};

// Gated full attention (MODEL.md §2.5): the kernels' parameters (kernels/attention/attention.h). Norm weights arrive
// with the zero-centred "+1" already added.
using AttentionParams = kernels::attention::Params;
struct AttentionWeights {
  Tensor q_norm;  // [1, head_dim] fp32, (1 + w)
  Tensor k_norm;  // [1, head_dim] fp32, (1 + w)
};
// Paged KV memory of one attention layer: row `page * page_size + offset` holds one position's
// [n_kv_heads * head_dim] keys (k) or values (v), in the dtype the model allocated (--kv-cache-dtype: by default the
// activation dtype, CPU fp32, CUDA fp16; kF8E4M3 stores e4m3(x / scale) with the layer's scales below).
struct KvCacheLayer {
  Tensor k;  // [n_pages * page_size, n_kv_heads * head_dim]
  Tensor v;
  float k_scale = 1.0f;  // kF8E4M3: the checkpoint's self_attn.k_proj.k_scale / v_proj.v_scale, else 1
  float v_scale = 1.0f;
};

// Gated DeltaNet mixer (MODEL.md §2.6): the kernels' parameters (kernels/gdn/gdn.h).
using GdnParams = kernels::gdn::Params;
struct GdnWeights {
  Tensor conv;         // [conv_dim, conv_kernel] fp32; the last tap multiplies the current token
  Tensor a_log;        // [1, n_v_heads] fp32
  Tensor dt_bias;      // [1, n_v_heads] fp32
  Tensor norm_weight;  // [1, head_v_dim] fp32, the plain weight of the gated RMSNorm (no +1)
};
// Per-slot recurrent state of one GDN layer, fp32 (layouts in kernels/gdn/gdn.h). The checkpoint tensors hold,
// for a verify item in slot s, the state after each of its tokens (rows s * max_verify_tokens + t); empty when
// the runner was configured without speculative verification. The snapshot tensors hold prefix-cache snapshots
// (engine/cache/prefix_cache.h): row i is a copy of some slot's state at a prefix end; empty without a prefix cache.
struct GdnStateLayer {
  Tensor conv;       // [n_slots, conv_dim * (conv_kernel - 1)]
  Tensor recurrent;  // [n_slots, n_v_heads * head_k_dim * head_v_dim]
  Tensor conv_ckpt;       // [n_slots * max_verify_tokens, conv_dim * (conv_kernel - 1)]
  Tensor recurrent_ckpt;  // [n_slots * max_verify_tokens, n_v_heads * head_k_dim * head_v_dim]
  Tensor conv_snap;       // [n_snapshots, conv_dim * (conv_kernel - 1)]
  Tensor recurrent_snap;  // [n_snapshots, n_v_heads * head_k_dim * head_v_dim]
};

// How a GDN mixer processes a multi-token segment; both give the same result up to fp32 rounding.
enum class GdnMode {
  kAuto,        // chunked for segments longer than one chunk, sequential otherwise
  kSequential,  // the token-by-token delta rule (MODEL.md §2.6)
  kChunked,     // the chunked WY form with chunks of 64 (MODEL.md §3)
};

// The largest step the backend must hold: sizes its step buffers and bounds every begin_step().
struct StepLimits {
  int32_t max_tokens = 0;       // token rows per step
  int32_t max_seqs = 0;         // sequences per step
  int32_t max_page_refs = 0;    // page-table entries per step, all sequences together
  int32_t max_bias = 0;         // logit_bias entries per step, all rows together
  int32_t vocab_size = 0;       // logits rows of the lm_head
  int32_t n_vocab_real = 0;     // ids >= this are padding and are never sampled
  int32_t hidden_size = 0;      // width of the hidden states rows may return
  int32_t n_slots = 0;          // penalty-state slots (one per live sequence)
  // Kernel scratch to reserve now (the memory plan's figure, engine/plan), so that no step has to grow it; 0: the
  // backend grows it on demand.
  int64_t scratch_bytes = 0;
};

// The device memory a backend plans against (engine/plan/memory_plan.h); device backends only.
struct DeviceMemoryInfo {
  std::string device;           // "NVIDIA H200 (sm_90)"
  int64_t free_bytes = 0;       // free on the device now
  int64_t total_bytes = 0;
  int64_t allocated_bytes = 0;  // what this backend holds so far
  std::string weight_layout;    // the kernel family its weights are prepacked for: "sm70" or "sm80"
};

// What one output row of a step asks for (a row is one token of the step; rows index the step's tokens).
enum OutputFlags : uint32_t {
  kOutSample = 1u,    // sample a token with `sampling` (kernels/sampling/sampling.h)
  kOutLogprobs = 2u,  // with kOutSample: its logprob and sampling.n_top_logprobs alternatives
  kOutLogits = 4u,    // the full fp32 logits row
  kOutHidden = 8u,    // the final-normed hidden state (the MTP head's input)
  // With kOutSample, on every row of a verify item whose tokens after the first are drafts (SeqDesc::n_draft): the
  // rows' logits decide which drafts are accepted (kernels/sampling/accept.h); row j's result is the token emitted
  // there, rows past the accepted run are kRowNotReached. The rows are consecutive outputs, in token order.
  kOutAccept = 16u,
};
struct OutputRow {
  int32_t row = 0;
  uint32_t flags = 0;
  kernels::sampling::RowParams sampling;  // slot and flags are filled in by the backend from `row` and `flags`
};

// Everything a step needs, on the host; begin_step() copies it into backend memory once.
struct StepBatch {
  std::vector<int32_t> tokens;              // [T]: every sequence's tokens back to back
  std::vector<kernels::SeqDesc> seqs;       // row0 / n_tokens / n_past / slot / page_offset / n_prompt / ckpt
  std::vector<int32_t> page_table;          // flattened; seqs[i].page_offset indexes it
  std::vector<OutputRow> outputs;           // rows that need outputs, in the order results are returned
  std::vector<int32_t> bias_ids;            // logit_bias entries; OutputRow::sampling.bias_offset indexes them
  std::vector<float> bias_values;
  // Token masks of constrained rows (structured output): OutputRow::sampling.mask_row indexes them, mask_words
  // uint32 each (bit id set: id may be sampled); at most one per output row. Their contents are computed on the
  // host while the step runs: a backend calls complete_masks() (when set) before it reads them, as late as it can
  // (core/mask_worker.h), and at most once per run of the step's ops (a step that runs again calls it again).
  std::vector<uint32_t> masks;
  int32_t mask_words = 0;
  std::function<void()> complete_masks;
  void clear();
  int32_t n_tokens() const { return static_cast<int32_t>(tokens.size()); }
};

// One output row's results (in StepBatch::outputs order).
struct RowResult {
  int32_t token = -1;  // kOutSample: the sampled id, -1 when status != kRowOk
  int32_t status = kernels::sampling::kRowOk;
  int32_t nan_index = -1;  // status kNanLogits: the first NaN id
  float logprob = 0.0f;
  std::vector<std::pair<int32_t, float>> top;  // kOutLogprobs: (id, logprob), descending
  // The MTP head's greedy drafts after this row's token (ModelRunner: the last emitted row of a sequence that asked
  // for SeqStep::n_draft drafts).
  std::vector<int32_t> drafts;
};
struct StepResult {
  std::vector<RowResult> rows;
  std::vector<float> logits;  // [rows with kOutLogits, vocab_size], in output order
  std::vector<float> hidden;  // [rows with kOutHidden, hidden_size], in output order
  void clear();
};

// The kernels' view of a GDN state layer; max_ckpt_tokens = checkpoint rows per slot (0 without checkpoints).
kernels::gdn::State gdn_state_view(const GdnStateLayer& s);
// An internal error naming `backend` when a verify item of `batch` has more rows than `s` checkpoints per slot, or
// when `index` / `slot` of a commit (index >= 0) fall outside them; ok otherwise.
Status check_gdn_checkpoints(const StepBatch& batch, const kernels::gdn::State& s, std::string_view backend);
Status check_gdn_commit(const GdnStateLayer& layer, const kernels::gdn::State& s, int32_t slot, int32_t index,
                        std::string_view backend);

// uint32 words of one token mask for these limits (one bit per lm_head row).
inline int32_t mask_words(const StepLimits& limits) { return (limits.vocab_size + 31) / 32; }

// The sampler's parameters of each output row of `batch`, with the slot of the row's sequence (-1 when no
// sequence holds it) and the sampler's flags from the row's output flags: what every backend hands its sampler.
std::vector<kernels::sampling::RowParams> sampler_rows(const StepBatch& batch);

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  // The dtype linear layers read (CPU fp32, CUDA fp16): the model allocates the normed activations in it.
  virtual DType activation_dtype() const = 0;
  // Bytes the prepared weights take, and the device's measured read bandwidth (0 where not measured).
  virtual int64_t weight_bytes() const = 0;
  virtual double read_gbps() const { return 0.0; }
  // Whether lm_head_outputs runs the speculative acceptance of kOutAccept rows.
  virtual bool accepts_drafts() const { return false; }
  // The device's memory, for the memory plan; nullopt for backends that hold host memory (CPU).
  virtual std::optional<DeviceMemoryInfo> device_memory() const { return std::nullopt; }

  // Memory owned by the backend until it is destroyed; zeroed. `what` names it in errors.
  virtual Result<Tensor> alloc(int64_t rows, int64_t cols, DType dtype, std::string_view what) = 0;
  // Small fp32 parameters (norm weights, conv taps, A_log): [rows, cols].
  virtual Result<Tensor> upload(std::span<const float> host, int64_t rows, int64_t cols, std::string_view what) = 0;
  // Ids for the kernels (the MTP head's draft-vocabulary rows, embed_samples): [1, ids.size()] int32.
  virtual Result<Tensor> upload_ids(std::span<const int32_t> ids, std::string_view what) = 0;
  // A linear weight from one or several checkpoint tensors sharing k (concatenated rows, see PreparedLinear).
  virtual Result<std::unique_ptr<PreparedLinear>> prepare_linear(std::span<const kernels::HostWeightRef> parts,
                                                                 std::string_view what) = 0;
  // Sizes the step buffers and the penalty state; called once before the first step.
  virtual Status configure(const StepLimits& limits) = 0;
  // Zeroes a slot's sampling penalty state (a new sequence; its prompt is counted as it is computed).
  virtual Status reset_sampling_slot(int32_t slot) = 0;
  // Zeroes rows [row_begin, row_end) of t.
  virtual void zero_rows(Tensor& t, int64_t row_begin, int64_t row_end) = 0;

  // The step: begin_step() uploads the metadata and counts the step's input tokens into the penalty state
  // (positions below a sequence's n_prompt as prompt tokens, the others as generated ones); the ops run;
  // end_step() waits for the device, copies the outputs into `result` and returns the first error of the step.
  virtual Status begin_step(const StepBatch& batch) = 0;
  virtual Status end_step(StepResult& result) = 0;
  // True right after an end_step() that failed only because the step must run again: a device backend that
  // replays captured graphs first sees a step's ops without launching them (to find its graph), and when it has
  // none, nothing of the step ran. The caller then runs the same step (same batch, same ops) once more.
  virtual bool rerun_step() const { return false; }
  // end_step() without waiting for the device: the step's sampled ids and row statuses (its kOutSample rows; no
  // logprobs, logits or hidden states) are kept until take_deferred() hands them over, one StepResult per deferred
  // step in step order, after waiting for the device once. A chain of deferred steps whose inputs come from the
  // device (embed_samples) runs back to back, with no host round trip between its steps; a failed deferred step
  // drops the chain's kept results. The defaults suit a backend whose end_step() is synchronous anyway (CPU).
  // A deferred step may have verify items (kOutSample | kOutAccept rows of requests without penalties): its
  // result is walked (rows past the accepted run kRowNotReached) as end_step's would be.
  virtual Status end_step_deferred();
  virtual Status take_deferred(std::vector<StepResult>& results);
  // Steps replayed from captured graphs so far (0 for a backend without graphs).
  virtual int64_t graph_replays() const { return 0; }
  // The device's time in steps and between them so far, as of the last wait for the device (device backends).
  virtual DeviceTimeline device_timeline() const { return {}; }

  // out[i] = table row tokens[i] for the step's T tokens (the embedding as a [vocab, hidden] linear weight, shared
  // with a tied lm_head). out: [T, hidden] fp32.
  virtual void embed(const PreparedLinear& table, Tensor& out) = 0;
  // out[i] = table row of the id the previous step sampled at its output row i (id_map[sampled] when id_map is not
  // empty: the previous step sampled over a draft vocabulary), row 0 where that row sampled nothing. The step's own
  // tokens are placeholders; its sequences hold no slot (nothing of it is counted into a penalty state). The MTP
  // head's draft chain: each step embeds the draft the step before it sampled, on the device.
  virtual void embed_samples(const PreparedLinear& table, const Tensor& id_map, Tensor& out) = 0;
  // out = x / sqrt(mean(x^2) + eps) * w, per row. `w` already holds (1 + w) for the zero-centred norms.
  virtual void rms_norm(const Tensor& x, const Tensor& w, float eps, Tensor& out) = 0;
  // residual += x; out = rms_norm(residual) (a decoder layer's add fused with the next norm).
  virtual void rms_norm_residual(const Tensor& x, Tensor& residual, const Tensor& w, float eps, Tensor& out) = 0;
  // out = x W^T for x's rows; out is [x.rows, n] fp32.
  virtual void linear(const PreparedLinear& w, const Tensor& x, Tensor& out) = 0;
  // out = silu(gate) * up, elementwise.
  virtual void swiglu(const Tensor& gate, const Tensor& up, Tensor& out) = 0;
  // out[i] = x[outputs[i].row] for the step's output rows.
  virtual void gather_output_rows(const Tensor& x, Tensor& out) = 0;

  // Gated attention after the projections (kernels/attention/attention.h) over the step's sequences. qg: q_proj
  // output [T, n_heads * 2 * head_dim] (per head [query|gate]); k, v: [T, n_kv_heads * head_dim]; out
  // [T, n_heads * head_dim] in activation_dtype().
  virtual void gated_attention(const AttentionParams& p, const AttentionWeights& w, const Tensor& qg,
                               const Tensor& k, const Tensor& v, KvCacheLayer& cache, Tensor& out) = 0;
  // Gated DeltaNet after the projections (kernels/gdn/gdn.h) over the step's sequences. qkv [T, conv_dim]; z
  // [T, n_v_heads * head_v_dim]; b, a [T, n_v_heads]; out [T, n_v_heads * head_v_dim] in activation_dtype().
  virtual void gdn_layer(const GdnParams& p, const GdnWeights& w, const Tensor& qkv, const Tensor& z,
                         const Tensor& b, const Tensor& a, GdnStateLayer& state, Tensor& out) = 0;
  // Between steps, after a verify step: copies checkpoint (slot, index) into the slot's state of every layer that
  // has one (layers without a recurrent state, the attention layers' entries, are skipped): kernels::gdn::commit,
  // one launch for the model's GDN layers.
  virtual Status gdn_commit(const GdnParams& p, std::span<GdnStateLayer> layers, int32_t slot, int32_t index) = 0;

  // Prefix caching, between steps (engine/cache/prefix_cache.h): a slot's GDN state to a snapshot row and back, and
  // one KV page to another (a hit's partial last page, which the new sequence writes on). Checked here; the copy is
  // copy_rows.
  Status save_state(GdnStateLayer& state, int32_t slot, int32_t snapshot);
  Status load_state(GdnStateLayer& state, int32_t snapshot, int32_t slot);
  Status copy_kv_page(KvCacheLayer& cache, int32_t page_size, int32_t src_page, int32_t dst_page);
  // dst rows [dst_row, dst_row + n_rows) = src rows [src_row, src_row + n_rows): same dtype and cols, in range
  // (checked by the callers above), ordered after every op before it and before every op after it.
  virtual Status copy_rows(const Tensor& src, int64_t src_row, Tensor& dst, int64_t dst_row, int64_t n_rows) = 0;

  // hidden [n_outputs, hidden] (the final-normed rows of the step's outputs, in output order): computes the logits
  // of every output row through `head`, then per row samples / reports logprobs / keeps the logits / keeps the
  // hidden state as its flags ask. logits_ws is a [>= 1, vocab] fp32 workspace; rows are processed in chunks of
  // its height.
  virtual void lm_head_outputs(const PreparedLinear& head, const Tensor& hidden, Tensor& logits_ws) = 0;

 protected:
  // Speculative rounds without a host wait after the verify step (kernels/sampling/accepted_runs.h): the accepted
  // runs of the last step with verify items stay in backend memory, and a later step's sequence with
  // SeqDesc::shift_rows / shift_past >= 0 moves its output rows forward by the drafts accepted in that sequence of
  // the verify step, or its n_past back by the drafts rejected there — a step planned for the longest runs (the MTP
  // head's passes after a deferred verify step) so follows the actual ones. begin_step's bookkeeping: a step with
  // verify items records its sequences' draft counts (0 for the others); check_shifts refuses a shift naming a
  // sequence outside them, or one that could move a row out of its sequence or n_past below 0.
  // note_judged_step returns whether the step has verify items.
  bool note_judged_step(const StepBatch& batch);
  Status check_shifts(const StepBatch& batch, std::string_view backend) const;

  std::vector<StepResult> deferred_;  // the default end_step_deferred()'s results
  std::vector<int32_t> judged_drafts_;  // per sequence of the last step with verify items: its drafts
};

// Whether a row's sampling parameters apply penalties (presence, frequency or repetition), whose counts of accepted
// drafts the host adds after a verify step (so such a verify step is not deferred).
bool penalized(const kernels::sampling::RowParams& row);
// Whether a sequence of the step moves by accepted runs (SeqDesc::shift_rows / shift_past).
bool has_shifts(const StepBatch& batch);

// Runs one step — `once()` calls begin_step, the ops and end_step — again while the backend asks for it
// (Backend::rerun_step; a graph-replaying backend asks at most twice in a row).
template <class F>
Status run_step(Backend& backend, F&& once) {
  Status s = once();
  for (int attempt = 0; !s.is_ok() && attempt < 2 && backend.rerun_step(); ++attempt) s = once();
  return s;
}

struct CpuBackendOptions {
  int32_t n_threads = 0;  // 0: min(hardware threads, 8)
  GdnMode gdn_mode = GdnMode::kAuto;
  // Tests only: a deliberately wrong acceptance rule, to prove the statistical tests can fail.
  kernels::sampling::AcceptRule accept_rule = kernels::sampling::AcceptRule::kExact;
};
std::unique_ptr<Backend> make_cpu_backend(const CpuBackendOptions& options);

}  // namespace voltserve
