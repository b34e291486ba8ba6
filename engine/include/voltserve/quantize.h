// quantize_checkpoint: a BF16/F16/F32 Hugging Face folder to a ModelOpt-layout checkpoint (NVFP4, FP8 or the mixed
// recipe; MODEL.md §5.2), tensor by tensor so a model never needs its size in RAM. `voltserve quantize` calls it.
// Tested in tests/model/checkpoint_quantize_test.cpp and tests/model/quantize_ref_test.py (tools/quantize_ref.py).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "voltserve/status.h"

namespace voltserve {

enum class QuantizeFormat {
  kNvfp4,  // every decoder Linear NVFP4 (weights only, W4A16_NVFP4)
  kMixed,  // FP8 attention and GDN projections, NVFP4 MLP and lm_head (ModelOpt's w4a16_nvfp4-fp8_attn recipe)
  kFp8,    // every decoder Linear FP8 E4M3, one scale per tensor
};

// "nvfp4" | "mixed" | "fp8"; InvalidArgument naming the accepted spellings otherwise.
Result<QuantizeFormat> parse_quantize_format(const std::string& name);
const char* quantize_format_name(QuantizeFormat format);

struct QuantizeOptions {
  std::string in_dir;
  std::string out_dir;
  QuantizeFormat format = QuantizeFormat::kNvfp4;
  // Glob patterns ('*', '?') of tensor names ("*.layers.0.*", "model.layers.3.mlp.down_proj.weight") or module
  // names ("lm_head") whose weights stay as they are.
  std::vector<std::string> keep;
  bool quantize_lm_head = false;  // nvfp4 / fp8: quantize lm_head too (mixed always does, unless kept)
  bool force = false;             // write into a non-empty out_dir (its checkpoint files are replaced)
  uint64_t max_shard_bytes = 5'000'000'000;  // HF's default "5GB"; one shard holds at least one tensor
  int threads = 0;                           // 0: up to 8
};

struct QuantizeProgress {
  int64_t index = 0;   // 1-based tensor number
  int64_t total = 0;
  std::string name;    // source tensor name
  std::string action;  // "NVFP4", "FP8" or "kept BF16" (...)
  uint64_t bytes_done = 0;   // source bytes processed so far
  uint64_t bytes_total = 0;
};

struct QuantizeSummary {
  int64_t tensors_in = 0;
  int64_t quantized_nvfp4 = 0;
  int64_t quantized_fp8 = 0;
  int64_t kept = 0;
  uint64_t bytes_in = 0;
  uint64_t bytes_out = 0;  // tensor data written (all shards)
  int64_t shards = 0;
  std::vector<std::string> copied_files;  // tokenizer, template, generation config, ...
  std::vector<std::string> warnings;      // e.g. a Linear left unquantized because K is not a multiple of 16
};

// Errors name what was wrong: NotFound (in_dir, config.json or safetensors missing), InvalidArgument (an input that
// is already quantized, a tensor of an unsupported dtype that would be quantized, a non-empty out_dir without
// force, out_dir == in_dir), DataLoss (a malformed input file), Internal (a write failure, naming the file).
Result<QuantizeSummary> quantize_checkpoint(const QuantizeOptions& options,
                                            const std::function<void(const QuantizeProgress&)>& progress = {});

}  // namespace voltserve
