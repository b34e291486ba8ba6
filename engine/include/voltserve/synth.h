// synth_checkpoint: a checkpoint of a config's real shapes with seeded random codes and scales (the weights
// `bench --config` builds in memory), written tensor by tensor so a 27B never needs its size in RAM. `voltserve
// synth` calls it. Tested in tests/model/synth_checkpoint_test.cpp.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "voltserve/status.h"

namespace voltserve {

enum class SynthFormat {
  kNvfp4,  // decoder Linears NVFP4 (ModelOpt layout); lm_head as the config says (BF16 unless it names NVFP4)
  kMixed,  // FP8 attention and GDN projections, NVFP4 MLP and lm_head (ModelOpt MIXED_PRECISION)
  kBf16,   // everything BF16 (A_log and the GDN gated norm F32, as in the real exports)
};

// "nvfp4" | "mixed" | "bf16"; InvalidArgument naming the accepted spellings otherwise.
Result<SynthFormat> parse_synth_format(const std::string& name);
const char* synth_format_name(SynthFormat format);

struct SynthOptions {
  std::string config_file;    // a config.json (e.g. config/models/qwen3.5-27b-nvfp4.json)
  std::string out_dir;
  SynthFormat format = SynthFormat::kNvfp4;
  uint64_t seed = 1;          // the same seed as `bench --seed` gives the same weights
  int64_t layers = 0;         // > 0: keep only the first `layers` decoder layers (num_hidden_layers, layer_types cut)
  std::string tokenizer_dir;  // tokenizer files to copy ("": none are written)
  bool force = false;         // write into a non-empty out_dir (its checkpoint files are replaced)
  uint64_t max_shard_bytes = 5'000'000'000;  // HF's default "5GB"; one shard holds at least one tensor
  int threads = 0;                           // generator threads (0: hardware concurrency, at most 8)
};

struct SynthProgress {
  int64_t index = 0;  // 1-based tensor number
  int64_t total = 0;
  std::string name;
  uint64_t bytes_done = 0;
  uint64_t bytes_total = 0;
};

struct SynthSummary {
  int64_t tensors = 0;
  int64_t layers = 0;
  bool mtp = false;          // mtp.* tensors written
  uint64_t bytes = 0;        // tensor data written (all shards)
  int64_t shards = 0;
  std::vector<std::string> files;  // everything written into out_dir, sorted
};

// Errors name what was wrong: NotFound (config file, tokenizer folder), InvalidArgument (a config voltserve cannot
// load, --layers out of range, a non-empty out_dir without force, a tokenizer folder without tokenizer files),
// Internal (an unwritable out_dir or a failed write, naming the file).
Result<SynthSummary> synth_checkpoint(const SynthOptions& options,
                                      const std::function<void(const SynthProgress&)>& progress = {});

}  // namespace voltserve
