// Every `voltserve serve` setting in one struct: built-in defaults, overridden by a JSON config file
// (config/*.json, schema in config/README.md), overridden by CLI flags. Tested by tests/server/serve_settings_test.cpp.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "http/serve_options.h"
#include "voltserve/model_info.h"
#include "voltserve/status.h"

namespace voltserve::http {

struct ServeSettings {
  std::string model;       // "" = the bundled default model
  std::string tokenizer;   // "" = the model folder
  std::string backend = "auto";  // cpu, cuda or auto (cuda when a GPU is visible, else cpu)
  std::string kernel_family = "auto";  // CUDA weight kernels: sm70, sm80 or auto
  std::string log_level = "info";
  int32_t threads = 0;     // CPU backend threads (0 = automatic)
  int32_t max_running = 16;
  int32_t max_waiting = 64;
  int32_t context = 0;     // 0 = the model's (capped by the runner)
  int32_t kv_pages = 0;    // KV pages of 16 tokens; 0 = as many as fit (GPU memory plan) or max_running contexts
  std::string lm_head = "keep";  // keep, fp8 or nvfp4: a BF16 lm_head quantized at load
  std::string kv_cache_dtype = "auto";  // auto, fp16, bf16 or fp8: the KV pages' element type
  int32_t max_tokens_per_step = 256;
  int32_t prefill_chunk = 128;
  int32_t max_n = 8;
  // Speculative decoding with the model's MTP head: the default of requests (-1 auto, 0 off, 1..max) and the most
  // drafts per round any request may use (0: never; the MTP head is then not loaded). Only where the model has an
  // MTP head and the backend verifies drafts.
  int32_t speculative_k = -1;
  int32_t max_speculative_k = 8;
  int32_t draft_vocab = 0;            // MTP drafting over the N most frequent tokens (0: the whole vocabulary)
  std::string mtp_format = "nvfp4";   // nvfp4 (the MTP layer quantized at load) or keep
  // Prefix caching (engine/cache/prefix_cache.h): on unless prefix_cache is false (--no-prefix-cache); GDN state
  // snapshot rows (0: off too; each holds one sequence's state) and the prefill tokens between snapshots.
  bool prefix_cache = true;
  int32_t prefix_cache_snapshots = kDefaultPrefixSnapshots;
  int32_t prefix_snapshot_interval = 512;
  ServeOptions http;
};

// "auto" -> -1, "0".."31" -> the number; false for anything else.
bool parse_speculative_k(const std::string& text, int32_t& out);

// Applies a config file's keys onto `settings`. Unknown keys and wrong types are errors naming the key.
Status apply_config_file(const std::filesystem::path& file, ServeSettings& settings);

// The bundled default model (models/demo, the trained demo model): next to the binary's source tree
// (<binary dir>/../models/demo), else the source tree this binary was built from, else
// relative to the working directory.
std::filesystem::path default_model_dir();

}  // namespace voltserve::http
