// The safetensors spellings ("BF16", "F8_E4M3", ...) and sizes of DType (kernels/common/dtype.h), the element
// types a checkpoint may hold and that voltserve reads. Tested in tests/model/dtype_test.cpp.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

#include "common/dtype.h"

namespace voltserve {

// The safetensors spelling: "BF16", "F16", "F32", "F8_E4M3", "U8", "I8", "I32", "I64".
const char* dtype_name(DType dtype);
size_t dtype_size_bytes(DType dtype);
// Parses a safetensors dtype string; nullopt for anything voltserve does not read (F64, BOOL, F8_E5M2, ...).
std::optional<DType> parse_dtype(std::string_view safetensors_name);
// Bytes per element of any dtype the safetensors format defines (including ones voltserve does not read),
// so headers can be bounds-checked in full; nullopt for unknown names and sub-byte types (F4, F6_*).
std::optional<size_t> safetensors_dtype_size(std::string_view safetensors_name);

}  // namespace voltserve
