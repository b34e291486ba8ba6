// Writing safetensors checkpoints as a stream: the tensors' names, dtypes and shapes are planned first (so each
// shard's header is written before its data), shards stay under a byte limit like HF's max_shard_size, and the data
// arrives tensor by tensor. Tested in tests/model/checkpoint_quantize_test.cpp (read back by Checkpoint).
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "voltserve/status.h"

namespace voltserve {

struct PlannedTensor {
  std::string name;
  std::string dtype;           // safetensors spelling ("BF16", "U8", "F8_E4M3", "F32", ...)
  std::vector<int64_t> shape;  // [] is a 0-d scalar
  uint64_t n_bytes = 0;
};

struct ShardPlan {
  std::string file;                    // "model.safetensors" or "model-00001-of-00003.safetensors"
  std::vector<PlannedTensor> tensors;  // in write order
  uint64_t data_bytes = 0;
};

// Packs `groups` (tensors that belong together, e.g. a weight and its scales) in order into shards of at most
// `max_shard_bytes` of data each; a group larger than the limit gets a shard of its own. One shard is named
// model.safetensors, several model-XXXXX-of-YYYYY.safetensors (HF's names).
std::vector<ShardPlan> plan_shards(const std::vector<std::vector<PlannedTensor>>& groups, uint64_t max_shard_bytes);

// model.safetensors.index.json for several shards: {"metadata": {"total_size"}, "weight_map": {tensor: file}}.
std::string shard_index_json(const std::vector<ShardPlan>& shards);

// The output folder of a checkpoint writer (`--out`): created if missing; if it holds files, an error unless
// `force`, and then the files a checkpoint consists of (shards, index, config.json, hf_quant_config.json) are
// removed so that old shards cannot mix with the new ones. `source`, when given, must not be the same folder.
Status prepare_checkpoint_folder(const std::filesystem::path& out, bool force,
                                 const std::filesystem::path* source = nullptr);
// A small text file read or written whole (config.json, the index).
Result<std::string> read_text_file(const std::filesystem::path& path);
Status write_text_file(const std::filesystem::path& path, const std::string& text);

// Writes one planned shard: the header on create(), then each tensor's bytes through write() in plan order (a
// tensor may arrive in several pieces), checked against the plan; finish() flushes and fails if anything is missing.
class SafetensorsFileWriter {
 public:
  static Result<SafetensorsFileWriter> create(const std::filesystem::path& path, const ShardPlan& plan);
  // Appends bytes to the current tensor; InvalidArgument if they run past the planned tensors.
  Status write(std::span<const uint8_t> bytes);
  Status finish();

 private:
  SafetensorsFileWriter() = default;
  std::filesystem::path path_;
  std::unique_ptr<std::ofstream> out_;
  uint64_t expected_ = 0;
  uint64_t written_ = 0;
};

}  // namespace voltserve
