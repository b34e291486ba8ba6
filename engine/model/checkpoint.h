// Checkpoint: the tensors of a Hugging Face model folder (one model.safetensors, or
// model.safetensors.index.json + shards), memory-mapped and validated; typed lookups with errors that name the
// file, the tensor, and what was expected. Tested in tests/model/checkpoint_test.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "model/safetensors_dtype.h"
#include "voltserve/status.h"

namespace voltserve {

class MappedFile;

// A tensor inside a mapped file. Valid while the Checkpoint it came from (or a copy of it) lives.
// `data` is NOT guaranteed to be aligned: read it with memcpy or to_f32(), never by casting to uint16_t*/float*.
struct TensorView {
  std::string name;
  std::string file;             // the shard's file name (for messages)
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;   // row-major; [] is a scalar
  const std::byte* data = nullptr;
  size_t n_bytes = 0;           // == numel() * dtype_size_bytes(dtype)
  int64_t numel() const;
};

class Checkpoint {
 public:
  // Opens `model_dir`/model.safetensors, or `model_dir`/model.safetensors.index.json and every shard it names.
  // Errors: NotFound (no checkpoint files), DataLoss (truncated / lying header, index naming a tensor its shard
  // lacks), InvalidArgument (bad index JSON, a tensor in two shards, a shard path outside model_dir).
  static Result<Checkpoint> open(const std::filesystem::path& model_dir);
  // Opens explicit safetensors files (tests, tools); every tensor name must be unique across them.
  static Result<Checkpoint> open_files(const std::vector<std::filesystem::path>& files);

  bool contains(std::string_view name) const;
  // NotFound naming the tensor and the folder; Unimplemented if its dtype is one voltserve does not read.
  Result<TensorView> tensor(std::string_view name) const;
  // As above, and checks dtype and shape: InvalidArgument naming file, tensor, expected and actual.
  Result<TensorView> tensor(std::string_view name, DType dtype, std::span<const int64_t> shape) const;
  Result<TensorView> tensor(std::string_view name, DType dtype, std::initializer_list<int64_t> shape) const {
    return tensor(name, dtype, std::span<const int64_t>(shape.begin(), shape.size()));
  }
  // Sorted names of every tensor in the checkpoint (all shards, including vision and mtp tensors).
  std::vector<std::string> names() const;
  const std::filesystem::path& dir() const { return dir_; }

 private:
  struct Entry {
    size_t file_index = 0;
    std::string dtype_name;
    std::optional<DType> dtype;
    std::vector<int64_t> shape;
    uint64_t offset = 0;  // absolute offset in the file
    uint64_t n_bytes = 0;
  };
  std::filesystem::path dir_;
  std::vector<std::shared_ptr<const MappedFile>> files_;
  std::vector<std::string> file_names_;
  std::map<std::string, Entry, std::less<>> entries_;
};

// Converts a BF16/F16/F32/F8E4M3 tensor to fp32 (exact for every one of them); InvalidArgument for other dtypes.
Result<std::vector<float>> to_f32(const TensorView& tensor);

// "[2, 3]" — used in messages.
std::string shape_to_string(std::span<const int64_t> shape);

}  // namespace voltserve
