// MappedFile: a read-only mmap of a whole file (checkpoint shards), unmapped on destruction.
// Tested through tests/model/checkpoint_test.cpp.
#pragma once

#include <cstddef>
#include <filesystem>
#include <span>

#include "voltserve/status.h"

namespace voltserve {

class MappedFile {
 public:
  // Errors: NotFound (missing file), DataLoss/Internal (cannot stat or map). An empty file maps to no bytes.
  static Result<MappedFile> open(const std::filesystem::path& path);

  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  std::span<const std::byte> bytes() const { return {data_, size_}; }
  const std::filesystem::path& path() const { return path_; }

 private:
  MappedFile() = default;
  std::filesystem::path path_;
  const std::byte* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace voltserve
