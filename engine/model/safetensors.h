// The safetensors header parser: validates the 8-byte length, the JSON and every tensor entry against the
// file's size (offsets inside the data area, begin <= end, n_bytes == numel * dtype size, no overlaps, no
// shape overflow). Pure function over bytes, so libFuzzer drives it (fuzz/safetensors_header_fuzz.cpp).
// Tested in tests/model/safetensors_test.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "model/safetensors_dtype.h"
#include "voltserve/status.h"

namespace voltserve {

struct SafetensorsEntry {
  std::string name;
  std::string dtype_name;       // as written in the header ("BF16", "F64", ...)
  std::optional<DType> dtype;   // nullopt: a dtype voltserve does not read (error only if the tensor is requested)
  std::vector<int64_t> shape;   // [] is a scalar (numel 1)
  uint64_t begin = 0;           // byte offsets relative to the start of the data area
  uint64_t end = 0;
};

struct SafetensorsHeader {
  uint64_t data_offset = 0;  // 8 + header length: where the data area starts in the file
  std::vector<SafetensorsEntry> tensors;  // in header order; __metadata__ is skipped
};

// Parses and validates the header of a whole safetensors file held in `file`. `file_label` (usually the
// path) starts every error message. Never throws; every malformed input is a DataLoss/InvalidArgument Status.
Result<SafetensorsHeader> parse_safetensors_header(std::span<const std::byte> file, std::string_view file_label);

}  // namespace voltserve
