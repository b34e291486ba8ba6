// DType names and sizes (safetensors spellings).
#include "model/safetensors_dtype.h"

namespace voltserve {

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kBF16: return "BF16";
    case DType::kF16: return "F16";
    case DType::kF32: return "F32";
    case DType::kF8E4M3: return "F8_E4M3";
    case DType::kU8: return "U8";
    case DType::kI8: return "I8";
    case DType::kI32: return "I32";
    case DType::kI64: return "I64";
  }
  return "?";
}

size_t dtype_size_bytes(DType dtype) {
  switch (dtype) {
    case DType::kBF16: return 2;
    case DType::kF16: return 2;
    case DType::kF32: return 4;
    case DType::kF8E4M3: return 1;
    case DType::kU8: return 1;
    case DType::kI8: return 1;
    case DType::kI32: return 4;
    case DType::kI64: return 8;
  }
  return 0;
}

std::optional<DType> parse_dtype(std::string_view name) {
  if (name == "BF16") return DType::kBF16;
  if (name == "F16") return DType::kF16;
  if (name == "F32") return DType::kF32;
  if (name == "F8_E4M3") return DType::kF8E4M3;
  if (name == "U8") return DType::kU8;
  if (name == "I8") return DType::kI8;
  if (name == "I32") return DType::kI32;
  if (name == "I64") return DType::kI64;
  return std::nullopt;
}

std::optional<size_t> safetensors_dtype_size(std::string_view name) {
  if (auto dtype = parse_dtype(name)) return dtype_size_bytes(*dtype);
  if (name == "BOOL" || name == "F8_E5M2" || name == "F8_E8M0") return 1;
  if (name == "I16" || name == "U16") return 2;
  if (name == "U32") return 4;
  if (name == "F64" || name == "U64" || name == "C64") return 8;
  return std::nullopt;
}

}  // namespace voltserve
