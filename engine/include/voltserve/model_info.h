// What the engine tells its users about the loaded model, and how to load one (Engine::load, engine.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace voltserve {

struct ModelInfo {
  std::string name;                    // the model folder's name
  int32_t vocab_size = 0;              // rows of the logits (may include padding rows)
  int32_t n_vocab_real = 0;            // ids >= this are padding and are never sampled
  int32_t context_length = 0;          // max positions per sequence
  int32_t hidden_size = 0;             // width of the hidden states
  std::vector<int32_t> eos_token_ids;  // from config.json / generation_config.json
  std::string backend;                 // "cpu" or "cuda", with the device where there is one
  int64_t weight_bytes = 0;            // what a decode step streams: the weights the backend holds, less an
                                       // untied embedding table (a step reads one row of it per token)
  double device_read_gbps = 0.0;       // the device's read bandwidth measured at start-up (0: not measured)
  int64_t kv_bytes_per_token = 0;      // attention KV cache bytes one position takes (all full-attention layers)
  int64_t state_bytes_per_seq = 0;     // GDN conv + recurrent state bytes of one sequence (all linear layers)
};

// How to load a model folder (a Hugging Face folder of the Qwen3.5 family).
// The serving default of ModelOptions::n_prefix_snapshots (voltserve serve and plan): 8 rows, ~1.2 GB on a 27B
// (151 MB each in fp32, about 19k tokens of its KV). A conversation's next turn needs one (its reply's end), a shared
// prompt one more; 8 keep the recent turns of a handful of conversations without taking a full context's KV from
// a 32 GB V100 (README, "Prefix cache").
inline constexpr int32_t kDefaultPrefixSnapshots = 8;

// Wall time of speculative rounds' phases in the model runner, summed: the verify steps (the target forward over
// [x, d1..dk] with the acceptance; on a GPU the device's time too when the step ends with a synchronisation), the
// MTP passes that follow them (the next drafts), and the commits (the state rollback to the accepted length).
struct SpeculativePhaseTimes {
  uint64_t verify_steps = 0;
  double verify_seconds = 0.0;
  double draft_seconds = 0.0;
  uint64_t commits = 0;
  double commit_seconds = 0.0;
  // Verify steps whose MTP passes followed them on the device (ModelOptions::device_rounds): the host waits once a
  // round, so their verify_seconds is the verify step's launch and draft_seconds the rest of the round.
  uint64_t device_rounds = 0;
};

// A device backend's timeline of its decode-sized steps (forward passes of at most 64 rows: decode, verify, MTP
// passes), from events around each step's launches (CUDA; zero elsewhere, and with op timing on): the device's time
// from a step's first launch to its last kernel's end, and the time before it since the previous step's end — that
// step's downloads, this one's uploads, and whatever the host took to plan and launch it. The gaps before steps
// launched with no host wait since the step before them (queued while the device was busy: the MTP passes of a
// round, a verify step's passes with ModelOptions::device_rounds) are also counted apart: the device's own cost
// between steps, with no host time in it.
struct DeviceTimeline {
  uint64_t steps = 0;  // decode-sized steps timed
  double busy_seconds = 0.0;
  uint64_t gaps = 0;  // ... of them timed after another step
  double gap_seconds = 0.0;
  uint64_t queued_gaps = 0;  // ... of those with no host wait since the step before
  double queued_gap_seconds = 0.0;
};

struct ModelOptions {
  std::string model_dir;
  std::string backend = "auto";  // cpu, cuda or auto (cuda when a GPU is visible, else cpu)
  std::string kernel_family = "auto";  // CUDA: the weight kernels' family, sm70, sm80 or auto (by the device)
  int32_t n_threads = 0;         // CPU backend threads; 0: min(hardware threads, 8)
  int32_t max_context = 0;       // positions per sequence; 0: min(max_position_embeddings, 8192)
  int32_t page_size = 16;        // tokens per KV page
  int32_t n_slots = 0;           // sequences live at once; 0: the engine's max_running
  int32_t n_pages = 0;           // KV pages shared by all sequences; 0: enough for n_slots full contexts
  // Prefix caching: GDN state snapshot rows kept beside the state slots (engine/cache/prefix_cache.h; the memory
  // plan's line "prefix snapshots"); 0: no prefix cache.
  int32_t n_prefix_snapshots = 0;
  // Instead of model_dir: a config.json of the real shapes (config/models/*.json) whose quantization_config decides
  // each layer's format, with seeded synthetic weights (benchmarks; no checkpoint on disk).
  std::string synthetic_config;
  uint64_t synthetic_seed = 1;
  // CUDA: time every op of every step with device events and log the per-op breakdown when the engine stops.
  bool op_timing = false;
  // CUDA: replay decode-sized steps as CUDA graphs (same tokens as eager launches; off for comparisons).
  bool cuda_graphs = true;
  // CUDA, sm_90+: programmatic dependent launch between a step's kernels (each may be scheduled while the one
  // before it finishes; same results). Off for comparisons.
  bool pdl = true;
  // Speculative decoding: a round's MTP passes follow its verify step on the device, planned for the longest
  // accepted run and moved by the actual one there (kernels/sampling/accepted_runs.h), so the host waits once a
  // round instead of twice. Rounds with logprobs, penalties or prompt chunks in the step still wait between. Off for
  // comparisons (the drafts are the same).
  bool device_rounds = true;
  // The output head: "" or "keep" as the checkpoint stores it; "fp8" (one scale per row) or "nvfp4" quantize a
  // BF16 head at load (a smaller decode step; greedy agreement measured in bench/RESULTS.md).
  std::string lm_head;
  // Speculative decoding's drafting (the MTP head; the target's output never changes): draft over the N most frequent
  // tokens only (a draft lm_head of N rows; draft_vocab.json beside the model lists them, else the tokenizer's added
  // tokens and the lowest ids; 0: the whole vocabulary), and the mtp.* weights "" / "nvfp4" (the default: dense ones
  // quantized at load, with the draft lm_head; measured to cost little acceptance) or "keep" (as stored, BF16 in
  // published checkpoints).
  int32_t draft_vocab = 0;
  std::string mtp_format;
  // The KV pages' element type: "" or "auto" (fp8 when the checkpoint's kv_cache_quant_algo is FP8, else the
  // activation dtype: CPU fp32, CUDA fp16), "fp16", "bf16" (CPU backend only) or "fp8" (e4m3, half of fp16's bytes,
  // per-layer scales from the checkpoint's k_scale / v_scale, else 1).
  std::string kv_cache_dtype;
  // Logit rows that are real tokens (the tokenizer's size); rows past it pad the matrix (Qwen3.5: 248077 of
  // 248320) and are never sampled. 0: every row is real.
  int32_t n_vocab_real = 0;
};

}  // namespace voltserve
